// The hand-written protobuf codec of the inference messages (lib/kserve/infer-wire.ts)
// against protobufjs (through proto-loader) reading and writing the same .proto.
import { resolve } from 'node:path';
import * as protoLoader from '@grpc/proto-loader';
import { describe, expect, it } from 'vitest';
import {
  contentsOf,
  decodeModelInferRequest,
  MAX_REQUEST_PARTS,
  type ContentsField,
  decodeModelInferResponse,
  decodeModelStreamInferResponse,
  encodeModelInferRequest,
  encodeModelInferResponse,
  encodeModelStreamInferResponse,
} from '../lib/kserve/infer-wire.js';

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

describe('the front end direction: requests read by hand, responses written by hand', () => {
  it('reads a ModelInferRequest protobufjs wrote: parameters, typed contents (packed), raw contents as views', () => {
    const raw = Buffer.from(new Float32Array([1, 2, 3]).buffer);
    const bytes = infer.requestSerialize({
      model_name: 'm',
      model_version: '2',
      id: 'r1',
      parameters: { s: { string_param: 'x' }, b: { bool_param: true }, i: { int64_param: '-5' }, d: { double_param: 0.5 }, u: { uint64_param: '7' } },
      inputs: [
        { name: 'RAW', datatype: 'FP32', shape: ['1', '3'], parameters: { shared_memory_region: { string_param: 'r' } } },
        {
          name: 'TYPED',
          datatype: 'INT32',
          shape: ['4'],
          contents: {
            bool_contents: [true, false],
            int_contents: [-1, 2, -2147483648, 2147483647],
            int64_contents: ['-9007199254740993', '5'],
            uint_contents: [4294967295],
            uint64_contents: ['18446744073709551615'],
            fp32_contents: [0.5, -1.25],
            fp64_contents: [1e300],
            bytes_contents: [Buffer.from('héllo'), Buffer.alloc(0)],
          },
        },
      ],
      outputs: [{ name: 'OUT', parameters: { classification: { int64_param: '3' } } }],
      raw_input_contents: [raw],
    });
    const message = decodeModelInferRequest(bytes);
    expect(message).toMatchObject({ model_name: 'm', model_version: '2', id: 'r1', parameters: { s: 'x', b: true, i: -5, d: 0.5, u: 7 } });
    expect(message.inputs[0]).toMatchObject({ name: 'RAW', datatype: 'FP32', shape: [1, 3], parameters: { shared_memory_region: 'r' }, contents: undefined });
    const contents = message.inputs[1]!.contents!;
    expect(contents.counts).toEqual({
      bool_contents: 2,
      int_contents: 4,
      int64_contents: 2,
      uint_contents: 1,
      uint64_contents: 1,
      fp32_contents: 2,
      fp64_contents: 1,
      bytes_contents: 2,
    });
    const read = (field: ContentsField): unknown[] => Array.from(contentsOf(contents, field) as ArrayLike<unknown>);
    expect(contentsOf(contents, 'bool_contents')).toEqual(new Uint8Array([1, 0]));
    expect(contentsOf(contents, 'int_contents')).toEqual(new Int32Array([-1, 2, -2147483648, 2147483647]));
    expect(read('int64_contents')).toEqual([-9007199254740993n, 5n]);
    expect(contentsOf(contents, 'uint_contents')).toEqual(new Uint32Array([4294967295]));
    expect(read('uint64_contents')).toEqual([18446744073709551615n]);
    expect(contentsOf(contents, 'fp32_contents')).toEqual(new Float32Array([0.5, -1.25]));
    expect(contentsOf(contents, 'fp64_contents')).toEqual(new Float64Array([1e300]));
    expect(contentsOf(contents, 'bytes_contents')).toEqual([Buffer.from('héllo'), Buffer.alloc(0)]);
    expect(message.outputs).toEqual([{ name: 'OUT', parameters: { classification: 3 } }]);
    const view = message.raw_input_contents[0] as Buffer;
    expect(view.buffer).toBe(bytes.buffer); // a view, not a copy
    expect(Array.from(new Float32Array(view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength)))).toEqual([1, 2, 3]);
  });

  it('reads unpacked repeated scalars too', () => {
    // field 5 (contents) holding int_contents (2) as two unpacked varints: 3 and 300.
    const contents = Buffer.from([0x10, 0x03, 0x10, 0xac, 0x02]);
    const input = Buffer.concat([Buffer.from([0x0a, 0x01, 0x58, 0x2a, contents.length]), contents]);
    const bytes = Buffer.concat([Buffer.from([0x2a, input.length]), input]);
    const read = decodeModelInferRequest(bytes).inputs[0]!;
    expect(read).toMatchObject({ name: 'X', contents: { counts: { int_contents: 2 } } });
    expect(contentsOf(read.contents!, 'int_contents')).toEqual(new Int32Array([3, 300]));
  });

  it('counts contents without reading them, and refuses framing a value could not come from', () => {
    const request = (contents: number[]): Buffer => {
      const input = Buffer.from([0x0a, 0x01, 0x58, 0x2a, contents.length, ...contents]);
      return Buffer.from([0x2a, input.length, ...input]);
    };
    // packed fp32_contents (6) of 5 bytes: not whole floats
    expect(() => decodeModelInferRequest(request([0x32, 5, 0, 0, 0, 0, 0]))).toThrow('packed fp32_contents is not a whole number of 4-byte values');
    // packed int_contents (2) ending inside a varint, and one of 11 bytes
    expect(() => decodeModelInferRequest(request([0x12, 2, 0x01, 0x80]))).toThrow('truncated varint');
    expect(() => decodeModelInferRequest(request([0x12, 11, ...Array(10).fill(0xff), 0x01]))).toThrow('longer than 10 bytes');
    // fp64_contents (7) as a varint
    expect(() => decodeModelInferRequest(request([0x38, 0x01]))).toThrow('fp64_contents has wire type 0');
    // 3 packed varints and one unpacked: 4, none read
    const counted = decodeModelInferRequest(request([0x12, 3, 1, 2, 3, 0x10, 0x04])).inputs[0]!.contents!;
    expect(counted.counts).toEqual({ int_contents: 4 });
    expect(contentsOf(counted, 'int_contents')).toEqual(new Int32Array([1, 2, 3, 4]));
  });

  it(`refuses a request of more than ${MAX_REQUEST_PARTS} inputs, outputs, raw contents, dimensions and parameters`, () => {
    const name = Buffer.from([0x0a, 0x01, 0x6d]);
    const parts = (tag: number, count: number): Buffer => Buffer.concat([name, Buffer.alloc(2 * count, Buffer.from([tag, 0]))]);
    const refused = `more than ${MAX_REQUEST_PARTS} inputs, outputs, raw contents, dimensions and parameters in one request`;
    for (const tag of [0x2a, 0x32, 0x3a, 0x22]) {
      // inputs (5), outputs (6), raw_input_contents (7), parameters (4): empty ones, 2 bytes each
      expect(() => decodeModelInferRequest(parts(tag, MAX_REQUEST_PARTS + 1))).toThrow(refused);
    }
    expect(decodeModelInferRequest(parts(0x3a, MAX_REQUEST_PARTS)).raw_input_contents).toHaveLength(MAX_REQUEST_PARTS);
    // a packed shape of 65,537 dimensions of 1
    const dims = Buffer.alloc(MAX_REQUEST_PARTS + 1, 1);
    const shape = Buffer.concat([Buffer.from([0x1a, 0x81, 0x80, 0x04]), dims]);
    const input = Buffer.concat([Buffer.from([0x0a, 0x01, 0x58]), shape]);
    const bytes = Buffer.concat([name, Buffer.from([0x2a, 0x88, 0x80, 0x04]), input]);
    expect(input.length).toBe(0x10008);
    expect(() => decodeModelInferRequest(bytes)).toThrow(refused);
  });

  it('refuses truncated requests', () => {
    const bytes = infer.requestSerialize({ model_name: 'model', inputs: [{ name: 'A', datatype: 'FP32', shape: ['2'] }] });
    for (let end = 1; end < bytes.length; end++) {
      let threw = false;
      try {
        const message = decodeModelInferRequest(bytes.subarray(0, end));
        // Cut at a field boundary the message is just shorter: never a field read past the end.
        threw = message.model_name !== 'model' || message.inputs.length === 0;
      } catch {
        threw = true;
      }
      expect(threw).toBe(true);
    }
  });

  it('writes a ModelInferResponse and a ModelStreamInferResponse protobufjs reads, after a free prefix', () => {
    const raw = new Uint8Array(new Int32Array([7, -8]).buffer);
    const response = {
      model_name: 'm',
      model_version: '1',
      id: 'r',
      parameters: { triton_final_response: true, n: 3, s: 'x' },
      outputs: [
        { name: 'OUT', datatype: 'INT32', shape: [1, 2] },
        { name: 'SHM', datatype: 'FP32', shape: [4] },
      ],
      raw_output_contents: [raw, new Uint8Array(0)],
    };
    const bytes = encodeModelInferResponse(response, 5);
    const message = infer.responseDeserialize(bytes.subarray(5)) as Record<string, any>;
    expect(message).toMatchObject({
      model_name: 'm',
      model_version: '1',
      id: 'r',
      outputs: [
        { name: 'OUT', datatype: 'INT32', shape: ['1', '2'] },
        { name: 'SHM', datatype: 'FP32', shape: ['4'] },
      ],
    });
    expect(message.parameters.triton_final_response).toMatchObject({ bool_param: true });
    expect(message.parameters.n).toMatchObject({ int64_param: '3' });
    expect(message.parameters.s).toMatchObject({ string_param: 'x' });
    expect((message.raw_output_contents as Buffer[]).map((b) => b.length)).toEqual([8, 0]);
    expect(Array.from(new Int32Array(new Uint8Array(message.raw_output_contents[0]).buffer))).toEqual([7, -8]);
    const streamed = stream.responseDeserialize(encodeModelStreamInferResponse('', response, 5).subarray(5)) as Record<string, any>;
    expect(streamed.error_message).toBe('');
    expect(streamed.infer_response).toMatchObject({ id: 'r', model_name: 'm' });
    const failed = stream.responseDeserialize(
      encodeModelStreamInferResponse('bad', { ...response, parameters: {}, outputs: [], raw_output_contents: [] }, 5).subarray(5),
    ) as Record<string, any>;
    expect(failed).toMatchObject({ error_message: 'bad', infer_response: { id: 'r', outputs: [] } });
  });
});
