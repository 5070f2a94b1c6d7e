// The hand-written protobuf codec of the inference messages (lib/kserve/infer-wire.ts)
// against protobufjs (through proto-loader) reading and writing the same .proto.
import { resolve } from 'node:path';
import * as protoLoader from '@grpc/proto-loader';
import { describe, expect, it } from 'vitest';
import { decodeModelInferResponse, decodeModelStreamInferResponse, encodeModelInferRequest } from '../lib/kserve/infer-wire.js';

const definition = protoLoader.loadSync('inference.proto', {
  includeDirs: [resolve(import.meta.dirname, '../lib/kserve/proto')],
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});
const service = definition['inference.GRPCInferenceService'] as Record<string, protoLoader.MethodDefinition<object, object>>;
const infer = service.ModelInfer!;
const stream = service.ModelStreamInfer!;

describe('ModelInferRequest, written by hand, read by protobufjs', () => {
  it('carries names, id, every parameter type, shapes, requested outputs and raw contents', () => {
    const raw0 = new Uint8Array(new Float32Array([1.5, -2, 3, 4]).buffer);
    const raw1 = new TextEncoder().encode('\u0003\u0000\u0000\u0000héé');
    const bytes = encodeModelInferRequest({
      model_name: 'identity_ü',
      model_version: '3',
      id: 'req-日本',
      parameters: { s: 'x', b: true, f: false, i: 42, n: -7, d: 0.25, big: 2n ** 63n + 5n, seq: 2n ** 62n, zero: 0 },
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [1, 4], bytes: raw0 },
        { name: 'TEXT', datatype: 'BYTES', shape: [1], bytes: raw1 },
        { name: 'EMPTY', datatype: 'INT32', shape: [], bytes: new Uint8Array(0) },
      ],
      outputs: [{ name: 'OUT', parameters: { classification: 3 } }, { name: 'OTHER', parameters: undefined }],
    });
    const message = infer.requestDeserialize(bytes) as Record<string, any>;
    expect(message.model_name).toBe('identity_ü');
    expect(message.model_version).toBe('3');
    expect(message.id).toBe('req-日本');
    const p = message.parameters as Record<string, Record<string, unknown>>;
    expect(p.s).toMatchObject({ parameter_choice: 'string_param', string_param: 'x' });
    expect(p.b).toMatchObject({ parameter_choice: 'bool_param', bool_param: true });
    expect(p.f).toMatchObject({ parameter_choice: 'bool_param', bool_param: false });
    expect(p.i).toMatchObject({ parameter_choice: 'int64_param', int64_param: '42' });
    expect(p.n).toMatchObject({ parameter_choice: 'int64_param', int64_param: '-7' });
    expect(p.d).toMatchObject({ parameter_choice: 'double_param', double_param: 0.25 });
    expect(p.big).toMatchObject({ parameter_choice: 'uint64_param', uint64_param: String(2n ** 63n + 5n) });
    expect(p.seq).toMatchObject({ parameter_choice: 'int64_param', int64_param: String(2n ** 62n) });
    expect(p.zero).toMatchObject({ parameter_choice: 'int64_param', int64_param: '0' });
    expect(message.inputs.map((t: any) => [t.name, t.datatype, t.shape])).toEqual([
      ['INPUT0', 'FP32', ['1', '4']],
      ['TEXT', 'BYTES', ['1']],
      ['EMPTY', 'INT32', []],
    ]);
    expect(message.outputs.map((o: any) => [o.name, o.parameters.classification?.int64_param])).toEqual([['OUT', '3'], ['OTHER', undefined]]);
    expect(message.raw_input_contents.map((b: Buffer) => Array.from(b))).toEqual([Array.from(raw0), Array.from(raw1), []]);
  });

  it('leaves out empty strings, as protobuf does for defaults', () => {
    const bytes = encodeModelInferRequest({ model_name: 'm', model_version: '', id: '', parameters: {}, inputs: [], outputs: [] });
    expect(Array.from(bytes)).toEqual([0x0a, 1, 0x6d]);
  });
});

describe('ModelInferResponse, written by protobufjs, read by hand', () => {
  const response = {
    model_name: 'identity_fp32',
    model_version: '1',
    id: 'r-ü',
    parameters: {
      param0: { string_param: 'an example string parameter' },
      param1: { int64_param: '42' },
      param2: { bool_param: false },
      param3: { double_param: 123.123 },
      neg: { int64_param: '-3' },
      u: { uint64_param: '18446744073709551615' },
      triton_final_response: { bool_param: true },
    },
    outputs: [
      { name: 'OUTPUT0', datatype: 'FP32', shape: ['1', '4'] },
      { name: 'EMPTY', datatype: 'INT32', shape: ['0'] },
    ],
    raw_output_contents: [Buffer.from(new Float32Array([1, 2, 3, 4]).buffer), Buffer.alloc(0)],
  };

  it('reads every field; raw outputs are views of the message', () => {
    const bytes = infer.responseSerialize(response);
    const decoded = decodeModelInferResponse(bytes);
    expect(decoded.model_name).toBe('identity_fp32');
    expect(decoded.model_version).toBe('1');
    expect(decoded.id).toBe('r-ü');
    expect(decoded.parameters).toEqual({
      param0: 'an example string parameter',
      param1: 42,
      param2: false,
      param3: 123.123,
      neg: -3,
      u: 18446744073709551615,
      triton_final_response: true,
    });
    expect(decoded.outputs).toEqual([
      { name: 'OUTPUT0', datatype: 'FP32', shape: [1, 4] },
      { name: 'EMPTY', datatype: 'INT32', shape: [0] },
    ]);
    const out = decoded.raw_output_contents[0]!;
    expect(out.buffer).toBe(bytes.buffer);
    expect(Array.from(new Float32Array(new Uint8Array(out).buffer))).toEqual([1, 2, 3, 4]);
    expect(decoded.raw_output_contents[1]!.byteLength).toBe(0);
  });

  it('reads a stream response: an error message, or a response', () => {
    expect(decodeModelStreamInferResponse(stream.responseSerialize({ error_message: 'boom', infer_response: null }))).toEqual({ error_message: 'boom', infer_response: null });
    const ok = decodeModelStreamInferResponse(stream.responseSerialize({ error_message: '', infer_response: response }));
    expect(ok.error_message).toBe('');
    expect(ok.infer_response?.outputs.map((o) => o.name)).toEqual(['OUTPUT0', 'EMPTY']);
  });

  it('refuses truncated or malformed messages', () => {
    const bytes = infer.responseSerialize(response);
    expect(() => decodeModelInferResponse(bytes.subarray(0, bytes.length - 3))).toThrow(/past its message|truncated/);
    expect(() => decodeModelInferResponse(Buffer.from([0x0f]))).toThrow(/wire type/);
  });
});
