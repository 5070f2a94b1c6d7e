// Writes the fuzzers' seed corpora (test/fuzz/corpus/<harness>/): a handful
// of valid requests each, as clients send them. The files are committed; run
// this again only to change them: npx tsx test/fuzz/make-seeds.ts
//
// gRPC messages come from the package's own encoders: encodeModelInferRequest
// (the remote client's) where it can say the request, proto-loader's codec of
// inference.proto where inputs carry parameters (shared memory), which
// encodeModelInferRequest has no field for.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeModelInferRequest, type WireInferRequest } from '../../lib/kserve/infer-wire.js';
import { loadInferenceMessages } from '../../lib/kserve/proto.js';

const CORPUS = join(import.meta.dirname, 'corpus');

function write(harness: string, name: string, bytes: Uint8Array | string): void {
  const dir = join(CORPUS, harness);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, name), bytes);
}

/** Little-endian tensor bytes of a typed array. */
const bytesOf = (array: Float32Array | Int32Array): Buffer => Buffer.from(array.buffer, array.byteOffset, array.byteLength);

// ---- HTTP: an inference body is [2-byte JSON length][JSON header][binary tensors] for http_infer_fuzzer.

interface HttpBody {
  json: string;
  binary: Buffer;
}

const httpBodies: Record<string, HttpBody> = {
  'binary-fp32': {
    json: JSON.stringify({
      id: 'req-1',
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], parameters: { binary_data_size: 16 } }],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
    }),
    binary: bytesOf(new Float32Array([1, 2, 3, 4])),
  },
  'binary-two-inputs-all-outputs': {
    json: JSON.stringify(
      {
        parameters: { binary_data_output: true },
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [4], parameters: { binary_data_size: 16 } },
          { name: 'INPUT1', datatype: 'INT32', shape: [4], parameters: { binary_data_size: 16 } },
        ],
      },
      null,
      2,
    ),
    binary: bytesOf(new Int32Array([1, 2, 3, 4, 5, 6, 7, 8])),
  },
  'shared-memory': {
    json: JSON.stringify({
      id: 'shm',
      inputs: [
        {
          name: 'INPUT0',
          datatype: 'FP32',
          shape: [1, 16],
          parameters: { shared_memory_region: 'input_data', shared_memory_offset: 0, shared_memory_byte_size: 64 },
        },
        {
          name: 'INPUT1',
          datatype: 'FP32',
          shape: [1, 16],
          parameters: { shared_memory_region: 'input_data', shared_memory_offset: 64, shared_memory_byte_size: 64 },
        },
      ],
      outputs: [
        { name: 'OUTPUT0', parameters: { shared_memory_region: 'output_data', shared_memory_byte_size: 64 } },
        { name: 'OUTPUT1', parameters: { shared_memory_region: 'output_data', shared_memory_offset: 64, shared_memory_byte_size: 64 } },
      ],
    }),
    binary: Buffer.alloc(0),
  },
  'shared-memory-and-binary': {
    json: JSON.stringify({
      parameters: { binary_data_output: true },
      inputs: [
        { name: 'INPUT0', datatype: 'INT64', shape: [2], parameters: { shared_memory_region: 'in', shared_memory_byte_size: 16 } },
        { name: 'INPUT1', datatype: 'UINT8', shape: [3], parameters: { binary_data_size: 3 } },
      ],
      outputs: [],
    }),
    binary: Buffer.from([7, 8, 9]),
  },
  // Not a valid request: kept so every run checks it is refused. 2^32 * 2^32
  // elements wrapped to 0 in a 64-bit product, which matched 0 bytes.
  'regression-shape-overflow': {
    json: JSON.stringify({
      parameters: { binary_data_output: true },
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [2 ** 32, 2 ** 32], parameters: { binary_data_size: 0 } }],
    }),
    binary: Buffer.alloc(0),
  },
};

// ---- HTTP heads for http_head_fuzzer: what a connection buffers (heads, bodies, a pipelined request).

const infer = httpBodies['binary-fp32']!;
const inferBody = Buffer.concat([Buffer.from(infer.json), infer.binary]);
const shm = httpBodies['shared-memory']!;
const heads: Record<string, Buffer> = {
  'binary-infer': Buffer.concat([
    Buffer.from(
      'POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: localhost:8000\r\nUser-Agent: tritonclient\r\n' +
        `Content-Type: application/octet-stream\r\nInference-Header-Content-Length: ${infer.json.length}\r\n` +
        `Content-Length: ${inferBody.length}\r\n\r\n`,
    ),
    inferBody,
  ]),
  'versioned-shared-memory-close': Buffer.from(
    'POST /v2/models/add_sub/versions/1/infer HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n' +
      `content-type: application/json\r\ncontent-length: ${shm.json.length}\r\n\r\n${shm.json}`,
  ),
  'get-ready-pipelined': Buffer.from(
    'GET /v2/health/ready HTTP/1.1\r\nHost: localhost\r\n\r\nGET /v2/models/add_sub HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n',
  ),
  'compressed-cors': Buffer.from(
    'POST /v2/models/simple/infer HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: gzip, deflate\r\nOrigin: http://example.com\r\n' +
      'Content-Encoding: gzip\r\nContent-Length: 0\r\n\r\n',
  ),
  chunked: Buffer.from('POST /v2/models/simple/infer HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'),
  incomplete: Buffer.from('POST /v2/models/simple/versions/3/infer HTTP/1.1\r\nHost: localhost\r\nContent-Len'),
};

// ---- gRPC ModelInferRequest messages (without gRPC's 5-byte prefix) for grpc_infer_fuzzer.

const raw: WireInferRequest = {
  model_name: 'add_sub',
  model_version: '1',
  id: 'req-42',
  parameters: {},
  inputs: [
    { name: 'INPUT0', datatype: 'FP32', shape: [1, 4], bytes: bytesOf(new Float32Array([1, 2, 3, 4])) },
    { name: 'INPUT1', datatype: 'FP32', shape: [1, 4], bytes: bytesOf(new Float32Array([0.5, 0.25, -1, 8])) },
  ],
  outputs: [
    { name: 'OUTPUT0', parameters: undefined },
    { name: 'OUTPUT1', parameters: undefined },
  ],
};

const grpcMessages: Record<string, Buffer> = {
  raw: encodeModelInferRequest(raw),
  // NVIDIA's clients send triton_enable_empty_final_response with every call.
  'raw-empty-final-response': encodeModelInferRequest({
    model_name: 'identity_int32',
    model_version: '',
    id: '',
    parameters: { triton_enable_empty_final_response: false },
    inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [2, 2], bytes: bytesOf(new Int32Array([1, -2, 3, -4])) }],
    outputs: [],
  }),
  'raw-output-shared-memory': encodeModelInferRequest({
    ...raw,
    outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_region: 'output_data', shared_memory_byte_size: 16, shared_memory_offset: 0 } }],
  }),
  // Not a valid request, as its HTTP namesake: a shape whose element count wrapped to 0.
  'regression-shape-overflow': encodeModelInferRequest({
    ...raw,
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [2 ** 32, 2 ** 32], bytes: new Uint8Array(0) }],
    outputs: [],
  }),
};

const { ModelInfer } = await loadInferenceMessages('make-seeds');
const range = (region: string, offset: number, size: number) => ({
  shared_memory_region: { string_param: region },
  shared_memory_offset: { int64_param: offset },
  shared_memory_byte_size: { int64_param: size },
});
grpcMessages['shared-memory'] = ModelInfer!.requestSerialize({
  model_name: 'add_sub',
  model_version: '',
  id: 'shm-1',
  parameters: { triton_enable_empty_final_response: { bool_param: true } },
  inputs: [
    { name: 'INPUT0', datatype: 'FP32', shape: [16], parameters: range('input_data', 0, 64) },
    { name: 'INPUT1', datatype: 'FP32', shape: [16], parameters: range('input_data', 64, 64) },
  ],
  outputs: [
    { name: 'OUTPUT0', parameters: range('output_data', 0, 64) },
    { name: 'OUTPUT1', parameters: range('output_data', 64, 64) },
  ],
});
grpcMessages['shared-memory-and-raw'] = ModelInfer!.requestSerialize({
  model_name: 'add_sub',
  model_version: '2',
  inputs: [
    { name: 'INPUT0', datatype: 'INT64', shape: [1, 2], parameters: range('in', 8, 16) },
    { name: 'INPUT1', datatype: 'BF16', shape: [1, 2] },
  ],
  outputs: [],
  raw_input_contents: [Buffer.from([0x80, 0x3f, 0x00, 0x40])],
});

// ---- HTTP responses for http_response_fuzzer: a piece size byte, then what a server sends on one connection.

const inferJson = JSON.stringify({ model_name: 'identity_fp32', model_version: '1', outputs: [{ name: 'OUTPUT0', datatype: 'FP32', shape: [1, 2], parameters: { binary_data_size: 8 } }] });
const responses: Record<string, Buffer> = {
  'binary-infer': Buffer.concat([
    Buffer.from([7]),
    Buffer.from(
      `HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nInference-Header-Content-Length: ${inferJson.length}\r\n` +
        `Content-Length: ${inferJson.length + 8}\r\n\r\n${inferJson}`,
    ),
    Buffer.from(new Float32Array([1, 2]).buffer),
  ]),
  'chunked-trailers-then-keep-alive': Buffer.from(
    '\x05HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\n{"a"\r\n3\r\n:1}\r\n0\r\nx-t: 1\r\n\r\n' +
      'HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 19\r\n\r\n{"error":"no such"}',
    'latin1',
  ),
  'interim-then-until-close': Buffer.from('\x03HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\nConnection: close\r\n\r\n{"live":true}', 'latin1'),
  'gzip-no-content': Buffer.from('\x40HTTP/1.1 204 No Content\r\nContent-Encoding: gzip\r\nConnection: keep-alive, close\r\n\r\n', 'latin1'),
};

rmSync(CORPUS, { recursive: true, force: true });
for (const [name, body] of Object.entries(httpBodies)) {
  const json = Buffer.from(body.json);
  write('http_infer_fuzzer', name, Buffer.concat([Buffer.from([json.length >> 8, json.length & 0xff]), json, body.binary]));
}
for (const [name, bytes] of Object.entries(heads)) write('http_head_fuzzer', name, bytes);
for (const [name, bytes] of Object.entries(grpcMessages)) write('grpc_infer_fuzzer', name, bytes);
for (const [name, bytes] of Object.entries(responses)) write('http_response_fuzzer', name, bytes);
console.log(`seeds written under ${CORPUS}`);
