// The KServe codec on its own: no server, no sockets.
import { describe, expect, it } from 'vitest';
import { TritonError, Tensor } from '../lib/index.js';
import { classify } from '../lib/classification.js';
import {
  decodeHttpInferRequest,
  encodeHttpInferResponse,
  requestFromParts,
  tensorBytes,
  tensorFromBytes,
  tensorJsonData,
} from '../lib/kserve/codec.js';

/** A body whose binary part starts at an 8-byte aligned offset of its ArrayBuffer (as the HTTP front end lays it out). */
function alignedBody(header: unknown, bytes: Uint8Array): { body: Buffer; headerLength: number } {
  const json = Buffer.from(JSON.stringify(header));
  const pad = (8 - (json.byteLength % 8)) % 8;
  const backing = Buffer.alloc(pad + json.byteLength + bytes.byteLength);
  json.copy(backing, pad);
  backing.set(bytes, pad + json.byteLength);
  return { body: backing.subarray(pad), headerLength: json.byteLength };
}

describe('decodeHttpInferRequest', () => {
  it('makes binary inputs TypedArrays over the body, without a copy', () => {
    const data = new Float32Array([1, 2, 3, 4]);
    const { body, headerLength } = alignedBody(
      { inputs: [{ name: 'X', datatype: 'FP32', shape: [2, 2], parameters: { binary_data_size: 16 } }] },
      new Uint8Array(data.buffer),
    );
    const decoded = decodeHttpInferRequest(body, headerLength);
    const input = decoded.request.inputs.X as { data: Float32Array; shape: number[] };
    expect(input.data).toBeInstanceOf(Float32Array);
    expect(input.data.buffer).toBe(body.buffer);
    expect(Array.from(input.data)).toEqual([1, 2, 3, 4]);
    expect(input.shape).toEqual([2, 2]);
  });

  it('keeps a binary BYTES input in its wire form over the body: no copy, no object per element', () => {
    const wire = Buffer.from([1, 0, 0, 0, 0x61, 0, 0, 0, 0, 3, 0, 0, 0, 0x62, 0x63, 0x64]);
    const { body, headerLength } = alignedBody({ inputs: [{ name: 'X', datatype: 'BYTES', shape: [3], parameters: { binary_data_size: wire.length } }] }, wire);
    const input = decodeHttpInferRequest(body, headerLength).request.inputs.X as Tensor;
    expect(input).toBeInstanceOf(Tensor);
    const storage = tensorBytes(input);
    expect(storage.buffer).toBe(body.buffer);
    expect(Buffer.from(storage).equals(wire)).toBe(true);
    expect(input.strings()).toEqual(['a', '', 'bcd']);
    for (const [shape, message] of [
      [[2], "input 'X': decodeBytes: BYTES data has 3 elements but the shape needs 2"],
      [[4], "input 'X': decodeBytes: BYTES data has 3 elements but the shape needs 4"],
    ] as const) {
      const bad = alignedBody({ inputs: [{ name: 'X', datatype: 'BYTES', shape, parameters: { binary_data_size: wire.length } }] }, wire);
      expect(() => decodeHttpInferRequest(bad.body, bad.headerLength)).toThrow(new TritonError('INVALID_ARG', message));
    }
  });

  it('copies only a tensor that would be misaligned', () => {
    const bytes = new Uint8Array([7, 1, 0, 0, 0]); // INT8 [1], then INT32 [1] at offset 1
    const { body, headerLength } = alignedBody(
      {
        inputs: [
          { name: 'A', datatype: 'INT8', shape: [1], parameters: { binary_data_size: 1 } },
          { name: 'B', datatype: 'INT32', shape: [1], parameters: { binary_data_size: 4 } },
        ],
      },
      bytes,
    );
    const inputs = decodeHttpInferRequest(body, headerLength).request.inputs as Record<string, { data: ArrayBufferView }>;
    expect(inputs.A?.data.buffer).toBe(body.buffer);
    expect(inputs.B?.data.buffer).not.toBe(body.buffer);
    expect(Array.from(inputs.B?.data as Int32Array)).toEqual([1]);
  });

  it('flattens nested JSON data and keeps request options', () => {
    const body = Buffer.from(
      JSON.stringify({
        id: 'r',
        inputs: [{ name: 'X', datatype: 'INT32', shape: [2, 2], data: [[1, 2], [3, 4]] }],
        outputs: [{ name: 'Y', parameters: { binary_data: true, classification: 2 } }],
        parameters: { binary_data_output: false, timeout: 2500, priority: 1, sequence_id: 5, sequence_start: true, custom: 'x' },
      }),
    );
    const decoded = decodeHttpInferRequest(body, undefined);
    expect(decoded.request).toMatchObject({
      id: 'r',
      outputs: ['Y'],
      timeoutMs: 2.5,
      priority: 1,
      sequence: { id: 5, start: true, end: false },
      parameters: { custom: 'x' },
      inputs: { X: { datatype: 'INT32', shape: [2, 2], data: [1, 2, 3, 4] } },
    });
    expect(decoded.outputs).toEqual([{ name: 'Y', binary: true, classification: 2 }]);
    expect(decoded.binaryOutput).toBe(false);
  });

  it('rejects what Triton rejects, with INVALID_ARG', () => {
    const bad = (json: unknown, headerLength?: number): TritonError => {
      try {
        decodeHttpInferRequest(Buffer.from(typeof json === 'string' ? json : JSON.stringify(json)), headerLength);
      } catch (error) {
        return error as TritonError;
      }
      throw new Error('accepted');
    };
    expect(bad('{').code).toBe('INVALID_ARG');
    expect(bad({ inputs: [{ name: 'X', datatype: 'FP16', shape: [1], data: [1] }] }).message).toContain('receiving FP16 data via JSON is not supported');
    expect(bad({ inputs: [{ name: 'X', datatype: 'FP32', shape: [1], parameters: { binary_data_size: 4 } }] }).message).toContain(
      'Infer-Header-Content-Length',
    );
    expect(bad({ inputs: [{ name: 'X', datatype: 'FP32', shape: [1], data: [1] }, { name: 'X', datatype: 'FP32', shape: [1], data: [1] }] }).message).toContain(
      'more than once',
    );
    expect(() => requestFromParts(undefined, { triton_x: true }, {}, undefined)).toThrow(/reserved for Triton/);
  });
});

describe('tensorFromBytes', () => {
  it('splits BYTES wire data into elements and checks sizes', () => {
    const wire = new Uint8Array([1, 0, 0, 0, 0x7a, 0, 0, 0, 0]);
    const tensor = tensorFromBytes('S', 'BYTES', [2], wire);
    expect((tensor.data as Uint8Array[]).map((e) => Buffer.from(e).toString())).toEqual(['z', '']);
    expect(() => tensorFromBytes('S', 'BYTES', [3], wire)).toThrow(/BYTES data has 2 elements/);
    expect(() => tensorFromBytes('F', 'FP32', [2], new Uint8Array(4))).toThrow(/unexpected size for input 'F'/);
  });
});

describe('responses', () => {
  const response = (outputs: Record<string, Tensor>, parameters = {}): Parameters<typeof encodeHttpInferResponse>[0] => ({
    model: { name: 'm', version: 3 },
    id: 'q',
    outputs,
    parameters,
    final: true,
  });

  it('writes Triton’s JSON: id, model_name, model_version, parameters, outputs', () => {
    const out = Tensor.from(new Int32Array([1, -2]), { name: 'OUT', shape: [1, 2] });
    const encoded = encodeHttpInferResponse(response({ OUT: out }, { p: 1 }), { request: { inputs: {} }, outputs: undefined, binaryOutput: false }, false);
    expect(encoded.json).toBe(
      '{"id":"q","model_name":"m","model_version":"3","parameters":{"p":1},"outputs":[{"name":"OUT","datatype":"INT32","shape":[1,2],"data":[1,-2]}]}',
    );
    expect(encoded.binary).toEqual([]);
  });

  it('hands binary outputs over as the tensor’s own bytes', () => {
    const data = new Float64Array([0.5, 1.5]);
    const out = Tensor.from(data, { name: 'OUT' });
    const encoded = encodeHttpInferResponse(response({ OUT: out }), { request: { inputs: {} }, outputs: undefined, binaryOutput: true }, false);
    expect(encoded.json).toContain('"parameters":{"binary_data_size":16}');
    expect(encoded.binary[0]?.buffer).toBe(data.buffer);
  });

  it('writes 64-bit integers exactly and refuses FP16 as JSON', () => {
    expect(tensorJsonData(Tensor.from(new BigInt64Array([2n ** 63n - 1n]), { name: 'I' }))).toBe('[9223372036854775807]');
    expect(() => tensorJsonData(Tensor.from(new Uint16Array([0x3c00]), { name: 'H', datatype: 'FP16' }))).toThrow(/FP16/);
  });

  it('classifies per batch row', () => {
    const tensor = Tensor.from(new Float32Array([1, 3, 2, 0, 0, 5]), { name: 'P', shape: [2, 3] });
    expect(classify(tensor, 2, true)).toEqual({ shape: [2, 2], strings: ['3.000000:1', '2.000000:2', '5.000000:2', '0.000000:0'] });
    expect(classify(tensor, 1, false)).toEqual({ shape: [1], strings: ['5.000000:5'] });
  });
});
