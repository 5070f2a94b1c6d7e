/**
 * Triton's system shared memory extension on the KServe front ends, with
 * the requests NVIDIA's clients send (tritonclient's shm utilities,
 * perf_analyzer --shared-memory system): register / status / unregister
 * routes and RPCs, inputs read from and outputs written into regions, CUDA
 * shared memory refused, and the hostile cases with Triton's statuses.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { liveObjects, liveSharedMemoryMappings, type Server } from '../lib/index.js';
import { serveKServe, type KServeFrontends } from '../lib/kserve/index.js';
import { collectGarbage, expectNoRequestsLive, startServer } from './helpers.js';
import { clientFor, type Client } from './kserve-grpc.suite.js';
import { Segment, float32Bytes } from './shared-memory-segments.js';

type Unary = (request: object, callback: (error: grpc.ServiceError | null, response: Record<string, unknown>) => void) => void;

let server: Server;
let frontends: KServeFrontends;
let base: string;
let client: Client;
const segments: Segment[] = [];

function segment(byteSize: number): Segment {
  const made = new Segment(byteSize, 'kserve');
  segments.push(made);
  return made;
}

beforeAll(async () => {
  server = await startServer({ startupModels: ['identity_fp32', 'add_sub', 'slow'] });
  frontends = await serveKServe(server, { http: { port: 0 }, grpc: { port: 0 } });
  base = `http://127.0.0.1:${frontends.http?.port}`;
  client = clientFor(frontends.grpc?.port ?? 0);
});
afterEach(async () => {
  await server.sharedMemory.unregister();
  for (const made of segments.splice(0)) made.unlink();
  await expectNoRequestsLive();
  await collectGarbage();
  expect(liveObjects()).toMatchObject({ requests: 0, responses: 0, inputReferences: 0, pending: 0 });
  await vi.waitFor(() => expect(liveSharedMemoryMappings()).toBe(0), { timeout: 5_000 });
});
afterAll(async () => {
  client?.close();
  await frontends?.close();
  await server?.stop();
});

async function http(path: string, body?: unknown): Promise<{ status: number; body: unknown; text: string }> {
  const response = await fetch(base + path, body === undefined ? undefined : { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, text, body: text === '' ? undefined : JSON.parse(text) };
}

function call(method: string, request: object): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    (client[method] as Unary).call(client, request, (error, response) => (error ? reject(error) : resolve(response)));
  });
}

async function failure(method: string, request: object): Promise<grpc.ServiceError> {
  try {
    await call(method, request);
  } catch (error) {
    return error as grpc.ServiceError;
  }
  throw new Error(`${method} succeeded`);
}

const values = Array.from({ length: 16 }, (_, i) => i - 7.25);

/** An identity_fp32 request as tritonclient's HTTP client sends it with shm input and output. */
function httpShmRequest(input: Record<string, unknown>, output: Record<string, unknown> = { shared_memory_region: 'output_data', shared_memory_byte_size: 64 }) {
  return {
    inputs: [{ name: 'INPUT0', shape: [1, 16], datatype: 'FP32', parameters: input }],
    outputs: [{ name: 'OUTPUT0', parameters: output }],
  };
}

describe('HTTP system shared memory', () => {
  it('advertises the extension and serves register, status and unregister as Triton does', async () => {
    const metadata = (await http('/v2')).body as { extensions: string[] };
    expect(metadata.extensions).toContain('system_shared_memory');
    expect(metadata.extensions).not.toContain('cuda_shared_memory');

    const seg = segment(4096);
    let reply = await http('/v2/systemsharedmemory/region/input_data/register', { key: seg.key, offset: 0, byte_size: 64 });
    expect(reply).toMatchObject({ status: 200, text: '' });
    reply = await http('/v2/systemsharedmemory/region/output_data/register', { key: seg.key, offset: 64, byte_size: 64 });
    expect(reply.status).toBe(200);
    expect(await http('/v2/systemsharedmemory/status')).toEqual({
      status: 200,
      text: expect.any(String),
      body: [
        { name: 'input_data', key: seg.key, offset: 0, byte_size: 64 },
        { name: 'output_data', key: seg.key, offset: 64, byte_size: 64 },
      ],
    });
    expect((await http('/v2/systemsharedmemory/region/output_data/status')).body).toEqual([
      { name: 'output_data', key: seg.key, offset: 64, byte_size: 64 },
    ]);
    expect(await http('/v2/systemsharedmemory/region/input_data/unregister', '')).toMatchObject({ status: 200, text: '' });
    expect((await http('/v2/systemsharedmemory/status')).body).toEqual([{ name: 'output_data', key: seg.key, offset: 64, byte_size: 64 }]);
    expect((await http('/v2/systemsharedmemory/unregister', '')).status).toBe(200);
    expect((await http('/v2/systemsharedmemory/status')).body).toEqual([]);
  });

  it('answers bad registrations with Triton’s statuses and messages', async () => {
    const seg = segment(128);
    expect((await http('/v2/systemsharedmemory/region/r/register', { key: seg.key, byte_size: 128 })).status).toBe(200);
    const cases: Array<[string, unknown, number, string]> = [
      ['/v2/systemsharedmemory/region/r/register', { key: seg.key, byte_size: 16 }, 400, "shared memory region 'r' already in manager"],
      ['/v2/systemsharedmemory/region/s/register', { key: '/tsn-no-such-segment', byte_size: 16 }, 500, "Unable to open shared memory region: '/tsn-no-such-segment'"],
      ['/v2/systemsharedmemory/region/s/register', { key: seg.key, offset: 64, byte_size: 65 }, 400, "failed to register shared memory region 's': invalid args"],
      ['/v2/systemsharedmemory/region/s/register', { byte_size: 16 }, 400, "Shared memory register request has no 'key' field"],
      ['/v2/systemsharedmemory/region/s/register', { key: seg.key }, 400, "Shared memory register request has no 'byte_size' field"],
      ['/v2/systemsharedmemory/register', { key: seg.key, byte_size: 16 }, 400, "'region name' is necessary to register system shared memory region"],
    ];
    for (const [path, body, status, error] of cases) {
      expect(await http(path, body)).toMatchObject({ status, body: { error } });
    }
    expect(await http('/v2/systemsharedmemory/region/s/status')).toMatchObject({
      status: 404,
      body: { error: "Unable to find system shared memory region: 's'" },
    });
    expect((await http('/v2/systemsharedmemory/region/r/register')).status).toBe(405);
    expect(liveSharedMemoryMappings()).toBe(1);
  });

  it('refuses to register CUDA shared memory (501, it needs a GPU build) and lists none, as a CPU build of Triton', async () => {
    const reply = await http('/v2/cudasharedmemory/region/c/register', { raw_handle: { b64: '' }, device_id: 0, byte_size: 16 });
    expect(reply.status).toBe(501);
    expect((reply.body as { error: string }).error).toContain("failed to register CUDA shared memory region: 'c', GPUs not supported");
    expect((reply.body as { error: string }).error).toContain('GPU build');
    expect(await http('/v2/cudasharedmemory/status')).toMatchObject({ status: 200, body: [] });
    expect(await http('/v2/cudasharedmemory/region/c/status')).toMatchObject({
      status: 404,
      body: { error: "Unable to find cuda shared memory region: 'c'" },
    });
    expect(await http('/v2/cudasharedmemory/unregister', '')).toMatchObject({ status: 200, text: '' });
    expect(await http('/v2/cudasharedmemory/region/c/unregister', '')).toMatchObject({ status: 200, text: '' });
  });

  it('reads inputs from and writes outputs into regions (tritonclient’s JSON)', async () => {
    const seg = segment(4096);
    seg.write(0, float32Bytes(values));
    await http('/v2/systemsharedmemory/region/input_data/register', { key: seg.key, offset: 0, byte_size: 64 });
    await http('/v2/systemsharedmemory/region/output_data/register', { key: seg.key, offset: 1024, byte_size: 64 });
    const reply = await http('/v2/models/identity_fp32/infer', httpShmRequest({ shared_memory_region: 'input_data', shared_memory_byte_size: 64 }));
    expect(reply.status).toBe(200);
    // No data and no parameters for an output in shared memory (as Triton).
    expect(reply.body).toMatchObject({ model_name: 'identity_fp32', model_version: '1' });
    expect((reply.body as { outputs: unknown }).outputs).toEqual([{ name: 'OUTPUT0', datatype: 'FP32', shape: [1, 16] }]);
    expect(seg.readFloat32(1024, 16)).toEqual(values);

    // An input in shared memory, the output returned as binary data.
    seg.write(0, float32Bytes(values.map((v) => v * 2)));
    const mixed = await fetch(`${base}/v2/models/identity_fp32/infer`, {
      method: 'POST',
      body: JSON.stringify({
        inputs: [{ name: 'INPUT0', shape: [1, 16], datatype: 'FP32', parameters: { shared_memory_region: 'input_data', shared_memory_byte_size: 64 } }],
        outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
      }),
    });
    const buffer = Buffer.from(await mixed.arrayBuffer());
    const headerLength = Number(mixed.headers.get('inference-header-content-length'));
    const out = buffer.subarray(headerLength);
    expect(Array.from(new Float32Array(out.buffer.slice(out.byteOffset, out.byteOffset + 64)))).toEqual(values.map((v) => v * 2));
  });

  it('writes an output over its own input when both name one range of a region', async () => {
    const seg = segment(4096);
    seg.write(0, float32Bytes(values));
    await http('/v2/systemsharedmemory/region/in_place/register', { key: seg.key, offset: 0, byte_size: 64 });
    const shared = { shared_memory_region: 'in_place', shared_memory_byte_size: 64 };
    const reply = await http('/v2/models/identity_fp32/infer', httpShmRequest(shared, shared));
    expect(reply.status).toBe(200);
    expect((reply.body as { outputs: unknown }).outputs).toEqual([{ name: 'OUTPUT0', datatype: 'FP32', shape: [1, 16] }]);
    expect(seg.readFloat32(0, 16)).toEqual(values);
  });

  it('answers bad shared memory tensors with Triton’s statuses and messages', async () => {
    const seg = segment(4096);
    seg.write(0, float32Bytes(values));
    await server.sharedMemory.register('input_data', { key: seg.key, byteSize: 64 });
    await server.sharedMemory.register('output_data', { key: seg.key, offset: 1024, byteSize: 64 });
    const infer = (body: unknown) => http('/v2/models/identity_fp32/infer', body);

    expect(await infer(httpShmRequest({ shared_memory_region: 'nowhere', shared_memory_byte_size: 64 }))).toMatchObject({
      status: 404,
      body: { error: "Unable to find shared memory region: 'nowhere'" },
    });
    expect(await infer(httpShmRequest({ shared_memory_region: 'input_data', shared_memory_offset: 8, shared_memory_byte_size: 64 }))).toMatchObject({
      status: 400,
      body: { error: "Invalid offset + byte size for shared memory region: 'input_data'" },
    });
    const mismatch = await infer(httpShmRequest({ shared_memory_region: 'input_data', shared_memory_byte_size: 60 }));
    expect(mismatch.status).toBe(400);
    expect((mismatch.body as { error: string }).error).toContain("input byte size mismatch for input 'INPUT0' for model 'identity_fp32'. Expected 64, got 60");
    const both = await infer({
      inputs: [{ name: 'INPUT0', shape: [1, 16], datatype: 'FP32', data: values, parameters: { shared_memory_region: 'input_data', shared_memory_byte_size: 64 } }],
    });
    expect(both).toMatchObject({
      status: 400,
      body: {
        error:
          "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', 'shared_memory_region' in 'parameters'. But set 'data' 'shared_memory_region'",
      },
    });
    expect(
      await infer(httpShmRequest({ shared_memory_region: 'input_data', shared_memory_byte_size: 64 }, { shared_memory_region: 'output_data', binary_data: true })),
    ).toMatchObject({ status: 400, body: { error: "Output can't set both 'shared_memory_region' and 'binary_data'" } });
    const small = await infer(httpShmRequest({ shared_memory_region: 'input_data', shared_memory_byte_size: 64 }, { shared_memory_region: 'output_data', shared_memory_byte_size: 32 }));
    expect(small.status).toBe(500);
    expect((small.body as { error: string }).error).toContain(
      "shared memory size specified with the request for output 'OUTPUT0' (32 bytes) should be at least 64 bytes to hold the results",
    );
  });

  it('finishes a request whose region is unregistered, or whose segment is unlinked, while it runs', async () => {
    const seg = segment(4096);
    seg.write(0, float32Bytes(values));
    await http('/v2/systemsharedmemory/region/busy/register', { key: seg.key, byte_size: 4096 });
    seg.unlink();
    const running = http('/v2/models/slow/infer', {
      inputs: [
        { name: 'INPUT0', shape: [16], datatype: 'FP32', parameters: { shared_memory_region: 'busy', shared_memory_byte_size: 64 } },
        { name: 'DELAY_MS', shape: [1], datatype: 'UINT32', data: [300] },
      ],
      outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_region: 'busy', shared_memory_offset: 2048, shared_memory_byte_size: 64 } }],
    });
    await vi.waitFor(() => expect(liveObjects().requests).toBe(1));
    expect((await http('/v2/systemsharedmemory/region/busy/unregister', '')).status).toBe(200);
    expect((await http('/v2/systemsharedmemory/status')).body).toEqual([]);
    expect(liveSharedMemoryMappings()).toBe(1);
    expect(await running).toMatchObject({ status: 200, body: { outputs: [{ name: 'OUTPUT0', datatype: 'FP32', shape: [16] }] } });
    await vi.waitFor(() => expect(liveSharedMemoryMappings()).toBe(0), { timeout: 5_000 });
  });
});

describe('gRPC system shared memory', () => {
  it('advertises the extension and serves the register, status and unregister RPCs', async () => {
    expect((await call('ServerMetadata', {})).extensions).toContain('system_shared_memory');
    const seg = segment(4096);
    expect(await call('SystemSharedMemoryRegister', { name: 'input_data', key: seg.key, offset: 0, byte_size: 64 })).toEqual({});
    expect(await call('SystemSharedMemoryRegister', { name: 'output_data', key: seg.key, offset: 64, byte_size: 64 })).toEqual({});
    expect(await call('SystemSharedMemoryStatus', {})).toEqual({
      regions: {
        input_data: { name: 'input_data', key: seg.key, offset: 0, byte_size: 64 },
        output_data: { name: 'output_data', key: seg.key, offset: 64, byte_size: 64 },
      },
    });
    expect(await call('SystemSharedMemoryStatus', { name: 'input_data' })).toEqual({
      regions: { input_data: { name: 'input_data', key: seg.key, offset: 0, byte_size: 64 } },
    });
    expect(await call('SystemSharedMemoryUnregister', { name: 'input_data' })).toEqual({});
    expect(Object.keys((await call('SystemSharedMemoryStatus', {})).regions as object)).toEqual(['output_data']);
    expect(await call('SystemSharedMemoryUnregister', {})).toEqual({});
    expect(await call('SystemSharedMemoryStatus', {})).toEqual({ regions: {} });
  });

  it('answers bad registrations and CUDA shared memory with Triton’s codes', async () => {
    const seg = segment(128);
    await call('SystemSharedMemoryRegister', { name: 'r', key: seg.key, byte_size: 128 });
    const cases: Array<[object, number, string]> = [
      [{ name: 'r', key: seg.key, byte_size: 16 }, grpc.status.ALREADY_EXISTS, "shared memory region 'r' already in manager"],
      [{ name: 's', key: '/tsn-no-such-segment', byte_size: 16 }, grpc.status.INTERNAL, "Unable to open shared memory region: '/tsn-no-such-segment'"],
      [{ name: 's', key: seg.key, offset: 100, byte_size: 100 }, grpc.status.INVALID_ARGUMENT, "failed to register shared memory region 's': invalid args"],
    ];
    for (const [request, code, details] of cases) {
      expect(await failure('SystemSharedMemoryRegister', request)).toMatchObject({ code, details });
    }
    expect(await failure('SystemSharedMemoryStatus', { name: 's' })).toMatchObject({
      code: grpc.status.NOT_FOUND,
      details: "Unable to find system shared memory region: 's'",
    });
    const cuda = await failure('CudaSharedMemoryRegister', { name: 'c', raw_handle: Buffer.alloc(64), device_id: 0, byte_size: 16 });
    expect(cuda.code).toBe(grpc.status.UNIMPLEMENTED);
    expect(cuda.details).toContain('GPU build');
    expect(await call('CudaSharedMemoryStatus', {})).toEqual({ regions: {} });
    expect(await failure('CudaSharedMemoryStatus', { name: 'c' })).toMatchObject({ code: grpc.status.NOT_FOUND });
    expect(await call('CudaSharedMemoryUnregister', {})).toEqual({});
  });

  it('reads inputs from and writes outputs into regions (tritonclient’s parameters), mixed with raw contents', async () => {
    const seg = segment(4096);
    seg.write(0, float32Bytes(values));
    await call('SystemSharedMemoryRegister', { name: 'input_data', key: seg.key, offset: 0, byte_size: 64 });
    await call('SystemSharedMemoryRegister', { name: 'output_data', key: seg.key, offset: 1024, byte_size: 64 });
    const response = await call('ModelInfer', {
      model_name: 'identity_fp32',
      inputs: [
        {
          name: 'INPUT0',
          datatype: 'FP32',
          shape: [1, 16],
          parameters: { shared_memory_region: { string_param: 'input_data' }, shared_memory_byte_size: { int64_param: 64 } },
        },
      ],
      outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_region: { string_param: 'output_data' }, shared_memory_byte_size: { int64_param: 64 } } }],
    });
    expect(response.outputs).toMatchObject([{ name: 'OUTPUT0', datatype: 'FP32', shape: [1, 16], parameters: {} }]);
    expect((response.raw_output_contents as Buffer[]).map((b) => b.length)).toEqual([0]);
    expect(seg.readFloat32(1024, 16)).toEqual(values);

    // add_sub: INPUT0 from shared memory, INPUT1 as the one raw_input_contents entry.
    seg.write(2048, float32Bytes([1, 2, 3, 4]));
    await call('SystemSharedMemoryRegister', { name: 'four', key: seg.key, offset: 2048, byte_size: 16 });
    const mixed = await call('ModelInfer', {
      model_name: 'add_sub',
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [4], parameters: { shared_memory_region: { string_param: 'four' }, shared_memory_byte_size: { int64_param: 16 } } },
        { name: 'INPUT1', datatype: 'FP32', shape: [4] },
      ],
      outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT1' }],
      raw_input_contents: [Buffer.from(Float32Array.from([10, 20, 30, 40]).buffer)],
    });
    const raw = mixed.raw_output_contents as Buffer[];
    const named = Object.fromEntries((mixed.outputs as Array<{ name: string }>).map((o, i) => [o.name, Array.from(new Float32Array(raw[i]!.buffer.slice(raw[i]!.byteOffset, raw[i]!.byteOffset + 16)))]));
    expect(named).toEqual({ OUTPUT0: [11, 22, 33, 44], OUTPUT1: [-9, -18, -27, -36] });
  });

  it('answers bad shared memory tensors with Triton’s codes', async () => {
    const seg = segment(4096);
    await call('SystemSharedMemoryRegister', { name: 'input_data', key: seg.key, byte_size: 64 });
    const request = (parameters: object, outputs: object[] = []) => ({
      model_name: 'identity_fp32',
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], parameters }],
      outputs,
    });
    expect(
      await failure('ModelInfer', request({ shared_memory_region: { string_param: 'nowhere' }, shared_memory_byte_size: { int64_param: 64 } })),
    ).toMatchObject({ code: grpc.status.NOT_FOUND, details: "Unable to find shared memory region: 'nowhere'" });
    expect(
      await failure(
        'ModelInfer',
        request({ shared_memory_region: { string_param: 'input_data' }, shared_memory_offset: { int64_param: 32 }, shared_memory_byte_size: { int64_param: 64 } }),
      ),
    ).toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: "Invalid offset + byte size for shared memory region: 'input_data'" });
    expect(await failure('ModelInfer', request({ shared_memory_byte_size: { int64_param: 64 } }))).toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: "'shared_memory_byte_size' can not be specified without 'shared_memory_region' parameter for tensor 'INPUT0'",
    });
    expect(await failure('ModelInfer', request({ shared_memory_region: { int64_param: 1 } }))).toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: "invalid value type for 'shared_memory_region' parameter for tensor 'INPUT0', expected string_param.",
    });
    const small = await failure(
      'ModelInfer',
      request({ shared_memory_region: { string_param: 'input_data' }, shared_memory_byte_size: { int64_param: 64 } }, [
        { name: 'OUTPUT0', parameters: { shared_memory_region: { string_param: 'input_data' }, shared_memory_byte_size: { int64_param: 16 } } },
      ]),
    );
    expect(small.code).toBe(grpc.status.INTERNAL);
    expect(small.details).toContain("should be at least 64 bytes to hold the results");
  });
});
