import http2 from 'node:http2';
import { resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { liveObjects, type Server } from '../lib/index.js';
import { serveKServe, type KServeFrontends } from '../lib/kserve/index.js';
import { expectNoRequestsLive, startServer } from './helpers.js';

type Unary = (request: object, callback: (error: grpc.ServiceError | null, response: Record<string, unknown>) => void) => void;

export interface Client extends grpc.Client {
  [method: string]: unknown;
}

const definition = protoLoader.loadSync('inference.proto', {
  includeDirs: [resolve(import.meta.dirname, '../lib/kserve/proto')],
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
});
const Service = (grpc.loadPackageDefinition(definition) as unknown as {
  inference: { GRPCInferenceService: new (address: string, credentials: grpc.ChannelCredentials, options?: grpc.ChannelOptions) => Client };
}).inference.GRPCInferenceService;

/** Which gRPC engine serveKServe runs in this file's suite (see defineGrpcSuite). */
let engine: 'node' | 'native' = 'node';
let server: Server;
let frontends: KServeFrontends;
let client: Client;

function call(method: string, request: object, on: Client = client): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    (on[method] as Unary).call(on, request, (error, response) => (error ? reject(error) : resolve(response)));
  });
}

async function failure(method: string, request: object, on: Client = client): Promise<grpc.ServiceError> {
  try {
    await call(method, request, on);
  } catch (error) {
    return error as grpc.ServiceError;
  }
  throw new Error(`${method} succeeded`);
}

/** A request to the `slow` model: answers `value` after `delayMs`. */
function slowRequest(value: number, delayMs: number): object {
  return {
    model_name: 'slow',
    inputs: [
      { name: 'INPUT0', datatype: 'FP32', shape: [1], contents: { fp32_contents: [value] } },
      { name: 'DELAY_MS', datatype: 'UINT32', shape: [1], contents: { uint_contents: [delayMs] } },
    ],
  };
}

/** Starts a ModelInfer call and cancels it once more than `inside` requests are live in Triton. */
function cancelOnceInside(request: object, inside: number): Promise<grpc.ServiceError> {
  return new Promise((resolve) => {
    const handle = (client.ModelInfer as (r: object, cb: (e: grpc.ServiceError | null) => void) => grpc.ClientUnaryCall).call(
      client,
      request,
      (error) => resolve(error as grpc.ServiceError),
    );
    const poll = setInterval(() => {
      if (liveObjects().requests > inside) {
        clearInterval(poll);
        handle.cancel();
      }
    }, 5);
  });
}

function f32(buffer: Buffer): number[] {
  return Array.from(new Float32Array(buffer.buffer.slice(buffer.byteOffset, buffer.byteOffset + buffer.byteLength)));
}

/** The suite's server, front ends and client, for tests of one engine only. */
export function suiteState(): { server: Server; frontends: KServeFrontends; client: Client } {
  return { server, frontends, client };
}

/** Calls `method` (unary) on the suite's client, or `on`. */
export { call as unaryCall, failure as unaryFailure };

/** A grpc-js client of the KServe service at `port` (close it after use). */
export function clientFor(port: number): Client {
  return new Service(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
}

/**
 * The KServe gRPC suite, run once per engine (kserve-grpc.test.ts for
 * `node`, kserve-grpc-native.test.ts for `native`): both must answer alike.
 */
export function defineGrpcSuite(grpcEngine: 'node' | 'native'): void {
  engine = grpcEngine;
  beforeAll(async () => {
    server = await startServer();
    for (const name of ['identity_fp32', 'identity_int32', 'identity_bytes', 'identity_int64', 'identity_bool', 'identity_fp16', 'repeat_int32', 'slow', 'fail']) await server.loadModel(name);
    frontends = await serveKServe(server, { grpc: { port: 0, engine }, repositoryControl: true });
    client = new Service(`127.0.0.1:${frontends.grpc?.port}`, grpc.credentials.createInsecure());
  });

  afterAll(async () => {
    client?.close();
    await frontends?.close();
    await server?.stop();
  });

  describe('gRPC health and metadata', () => {
    it('answers ServerLive, ServerReady and ModelReady', async () => {
      expect(await call('ServerLive', {})).toEqual({ live: true });
      expect(await call('ServerReady', {})).toEqual({ ready: true });
      expect(await call('ModelReady', { name: 'identity_fp32', version: '' })).toEqual({ ready: true });
      expect(await call('ModelReady', { name: 'identity_fp32', version: '1' })).toEqual({ ready: true });
      expect(await call('ModelReady', { name: 'does_not_exist' })).toEqual({ ready: false });
    });

    it('serves server and model metadata', async () => {
      const metadata = await server.metadata();
      const served = await call('ServerMetadata', {});
      expect(served).toMatchObject({ name: metadata.name, version: metadata.version });
      expect(served.extensions).toContain('binary_tensor_data');
      expect(await call('ModelMetadata', { name: 'identity_fp32' })).toEqual(await server.model('identity_fp32').metadata());
      const unknown = await failure('ModelMetadata', { name: 'does_not_exist' });
      expect(unknown.code).toBe(grpc.status.NOT_FOUND);
      expect(unknown.details).toContain("'does_not_exist'");
    });

    it('serves the model configuration as the ModelConfig message', async () => {
      const { config } = (await call('ModelConfig', { name: 'repeat_int32' })) as { config: Record<string, unknown> };
      expect(config).toMatchObject({
        name: 'repeat_int32',
        backend: 'python',
        max_batch_size: 0,
        model_transaction_policy: { decoupled: true },
      });
      expect((config.input as Array<Record<string, unknown>>)[0]).toMatchObject({ name: 'IN', data_type: 'TYPE_INT32', dims: [-1] });
      const batching = (await call('ModelConfig', { name: 'identity_fp32' })) as { config: Record<string, unknown> };
      expect(batching.config).toMatchObject({ max_batch_size: 8, scheduling_choice: 'dynamic_batching' });
    });

    it('serves statistics of one model and of all', async () => {
      const one = (await call('ModelStatistics', { name: 'identity_fp32' })) as { model_stats: Array<Record<string, unknown>> };
      expect(one.model_stats[0]).toMatchObject({ name: 'identity_fp32', version: '1' });
      expect(one.model_stats[0]?.inference_stats).toHaveProperty('success');
      const all = (await call('ModelStatistics', {})) as { model_stats: Array<{ name: string }> };
      expect(all.model_stats.map((entry) => entry.name)).toEqual(expect.arrayContaining(['identity_fp32', 'repeat_int32']));
    });

    it('lists, unloads and loads through the repository calls', async () => {
      const index = (await call('RepositoryIndex', { ready: true })) as { models: Array<{ name: string; state: string }> };
      expect(index.models.find((entry) => entry.name === 'identity_int32')).toMatchObject({ state: 'READY' });
      await call('RepositoryModelUnload', { model_name: 'identity_int32' });
      while (await server.model('identity_int32').ready()) await new Promise((r) => setTimeout(r, 5));
      await call('RepositoryModelLoad', { model_name: 'identity_int32' });
      expect(await server.model('identity_int32').ready()).toBe(true);
      const config = JSON.stringify({
        name: 'grpc_memory',
        backend: 'identity',
        max_batch_size: 0,
        input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
        output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [-1] }],
      });
      await call('RepositoryModelLoad', {
        model_name: 'grpc_memory',
        parameters: { config: { string_param: config }, 'file:1/README.txt': { bytes_param: Buffer.from('x') } },
      });
      expect(await server.model('grpc_memory').ready()).toBe(true);
      await server.unloadModel('grpc_memory');
      const repo = await failure('RepositoryIndex', { repository_name: 'other' });
      expect(repo.code).toBe(grpc.status.UNIMPLEMENTED);
    });

    it('keeps repository calls closed unless repositoryControl is set', async () => {
      const closed = await serveKServe(server, { grpc: { port: 0, engine } });
      const other = new Service(`127.0.0.1:${closed.grpc?.port}`, grpc.credentials.createInsecure());
      try {
        for (const method of ['RepositoryIndex', 'RepositoryModelLoad', 'RepositoryModelUnload']) {
          expect((await failure(method, { model_name: 'identity_fp32' }, other)).code).toBe(grpc.status.PERMISSION_DENIED);
        }
      } finally {
        other.close();
        await closed.close();
      }
    });
  });

  describe('gRPC ModelInfer', () => {
    it('takes raw_input_contents and answers raw_output_contents', async () => {
      const data = new Float32Array([1, 2.5, -3]);
      const response = await call('ModelInfer', {
        model_name: 'identity_fp32',
        id: 'g1',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3] }],
        raw_input_contents: [Buffer.from(data.buffer)],
      });
      expect(response).toMatchObject({
        model_name: 'identity_fp32',
        model_version: '1',
        id: 'g1',
        outputs: [{ name: 'OUTPUT0', datatype: 'FP32', shape: [1, 3] }],
      });
      expect(f32((response.raw_output_contents as Buffer[])[0] as Buffer)).toEqual([1, 2.5, -3]);
    });

    it('takes typed contents too (int, int64, bytes)', async () => {
      const ints = await call('ModelInfer', {
        model_name: 'identity_int32',
        inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 2], contents: { int_contents: [-5, 6] } }],
      });
      const raw = (ints.raw_output_contents as Buffer[])[0] as Buffer;
      expect([raw.readInt32LE(0), raw.readInt32LE(4)]).toEqual([-5, 6]);
      const longs = await call('ModelInfer', {
        model_name: 'identity_int64',
        inputs: [{ name: 'INPUT0', datatype: 'INT64', shape: [1, 1], contents: { int64_contents: [-42] } }],
      });
      expect(((longs.raw_output_contents as Buffer[])[0] as Buffer).readBigInt64LE(0)).toBe(-42n);
      // Beyond 2^53 too: int64 contents are kept exact.
      const exact = await call('ModelInfer', {
        model_name: 'identity_int64',
        inputs: [{ name: 'INPUT0', datatype: 'INT64', shape: [1, 2], contents: { int64_contents: ['9223372036854775807', '-9007199254740993'] } }],
      });
      const exactRaw = (exact.raw_output_contents as Buffer[])[0] as Buffer;
      expect([exactRaw.readBigInt64LE(0), exactRaw.readBigInt64LE(8)]).toEqual([9223372036854775807n, -9007199254740993n]);
      const bytes = await call('ModelInfer', {
        model_name: 'identity_bytes',
        inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 2], contents: { bytes_contents: [Buffer.from('ab'), Buffer.from('')] } }],
      });
      expect(Buffer.compare((bytes.raw_output_contents as Buffer[])[0] as Buffer, Buffer.from([2, 0, 0, 0, 0x61, 0x62, 0, 0, 0, 0]))).toBe(0);
    });

    it('maps errors to Triton’s gRPC status codes', async () => {
      const unknown = await failure('ModelInfer', { model_name: 'does_not_exist', inputs: [{ name: 'X', datatype: 'FP32', shape: [1], contents: { fp32_contents: [1] } }] });
      expect(unknown.code).toBe(grpc.status.NOT_FOUND);
      const wrongType = await failure('ModelInfer', {
        model_name: 'identity_fp32',
        inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1], contents: { int_contents: [1] } }],
      });
      expect(wrongType.code).toBe(grpc.status.INVALID_ARGUMENT);
      const lying = await failure('ModelInfer', {
        model_name: 'identity_fp32',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4] }],
        raw_input_contents: [Buffer.alloc(12)],
      });
      expect(lying.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(lying.details).toContain('unexpected size');
      const missing = await failure('ModelInfer', { model_name: 'identity_fp32', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1] }] });
      expect(missing.details).toContain('no data');
    });

    it('cancels the Triton request when the client cancels the call', async () => {
      // 60 s is past the test timeout: only a cancelled request lets the test finish.
      expect((await cancelOnceInside(slowRequest(1, 60_000), 0)).code).toBe(grpc.status.CANCELLED);
      while (liveObjects().requests > 0 || (frontends.grpc?.inFlight ?? 0) > 0) await new Promise((r) => setTimeout(r, 10));
      expect(liveObjects().requests).toBe(0);
    });

    it('answers each of many concurrent large calls with its own tensor', async () => {
      // Large responses are encoded into reused memory: none may be reused before it is sent.
      for (let round = 0; round < 8; round++) {
        const sizes = Array.from({ length: 16 }, (_, i) => 16384 + 1024 * i + round);
        const answers = await Promise.all(
          sizes.map((size, i) => {
            const data = Float32Array.from({ length: size }, (_, k) => round * 1e6 + i * 1e4 + (k % 9973));
            return call('ModelInfer', {
              model_name: 'identity_fp32',
              inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, size] }],
              raw_input_contents: [Buffer.from(data.buffer)],
            }).then((response) => ({ data, got: (response.raw_output_contents as Buffer[])[0] as Buffer }));
          }),
        );
        for (const { data, got } of answers) expect(got.equals(Buffer.from(data.buffer))).toBe(true);
      }
    });

    it('cancels only the call the client cancels, before and after calls that finished', async () => {
      const quick = async (value: number): Promise<number[]> =>
        f32(((await call('ModelInfer', slowRequest(value, 0))).raw_output_contents as Buffer[])[0] as Buffer);
      // Calls that finished leave their cancellation state to later calls.
      for (let i = 0; i < 4; i++) expect(await quick(i)).toEqual([i]);
      const neighbour = call('ModelInfer', slowRequest(7, 300));
      expect((await cancelOnceInside(slowRequest(8, 60_000), 1)).code).toBe(grpc.status.CANCELLED);
      expect(f32(((await neighbour).raw_output_contents as Buffer[])[0] as Buffer)).toEqual([7]);
      // Several at once, so that every state left behind is taken again.
      expect(await Promise.all([10, 11, 12, 13].map(quick))).toEqual([[10], [11], [12], [13]]);
      while (liveObjects().requests > 0 || (frontends.grpc?.inFlight ?? 0) > 0) await new Promise((r) => setTimeout(r, 10));
      expect(liveObjects().requests).toBe(0);
    });
  });

  describe('gRPC ModelStreamInfer', () => {
    function stream(requests: object[]): Promise<Array<Record<string, unknown>>> {
      return new Promise((resolve, reject) => {
        const duplex = (client.ModelStreamInfer as () => grpc.ClientDuplexStream<object, Record<string, unknown>>).call(client);
        const received: Array<Record<string, unknown>> = [];
        duplex.on('data', (message) => received.push(message));
        duplex.on('error', reject);
        duplex.on('end', () => resolve(received));
        for (const request of requests) duplex.write(request);
        duplex.end();
      });
    }

    it('streams every response of a decoupled model, with the final flag', async () => {
      const messages = await stream([
        {
          model_name: 'repeat_int32',
          id: 's1',
          inputs: [{ name: 'IN', datatype: 'INT32', shape: [3], contents: { int_contents: [4, 5, 6] } }],
          parameters: { triton_enable_empty_final_response: { bool_param: true } },
        },
      ]);
      const responses = messages.map((message) => message.infer_response as Record<string, unknown>);
      expect(messages.every((message) => message.error_message === '')).toBe(true);
      const values = responses.slice(0, 3).map((response) => ((response.raw_output_contents as Buffer[])[0] as Buffer).readInt32LE(0));
      expect(values).toEqual([4, 5, 6]);
      const finals = responses.map((response) => (response.parameters as Record<string, { bool_param: boolean }>).triton_final_response?.bool_param);
      expect(finals).toEqual([false, false, false, true]);
      expect(responses[3]).toMatchObject({ id: 's1', model_name: 'repeat_int32', outputs: [] });
    });

    it('serves several requests on one stream, errors as error_message', async () => {
      const messages = await stream([
        { model_name: 'identity_fp32', id: 'a', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1] }], raw_input_contents: [Buffer.from(new Float32Array([7]).buffer)] },
        { model_name: 'does_not_exist', id: 'b', inputs: [] },
      ]);
      expect(messages).toHaveLength(2);
      const ok = messages.find((message) => (message.infer_response as { id: string }).id === 'a');
      const bad = messages.find((message) => (message.infer_response as { id: string }).id === 'b');
      expect(f32(((ok?.infer_response as Record<string, unknown>).raw_output_contents as Buffer[])[0] as Buffer)).toEqual([7]);
      expect(bad?.error_message).toContain("'does_not_exist'");
    });
  });

  describe('gRPC ModelStreamInfer cancellation', () => {
    it('cancels the Triton requests of a stream the client cancels', async () => {
      // 60 s is past the test timeout: only a cancelled request lets the test finish.
      await new Promise<void>((resolve) => {
        const duplex = (client.ModelStreamInfer as () => grpc.ClientDuplexStream<object, Record<string, unknown>>).call(client);
        duplex.on('error', () => resolve());
        duplex.on('data', () => {});
        duplex.write(slowRequest(1, 60_000));
        const poll = setInterval(() => {
          if (liveObjects().requests > 0) {
            clearInterval(poll);
            duplex.cancel();
          }
        }, 5);
      });
      while (liveObjects().requests > 0 || (frontends.grpc?.inFlight ?? 0) > 0) await new Promise((r) => setTimeout(r, 10));
      expect(liveObjects().requests).toBe(0);
    });
  });

  describe('gRPC front end lifecycle', () => {
    it('asks authorize() with the call’s metadata', async () => {
      const guarded = await serveKServe(server, { grpc: { port: 0, engine }, authorize: ({ protocol, headers }) => protocol === 'grpc' && headers['x-key'] === 'k' });
      const other = new Service(`127.0.0.1:${guarded.grpc?.port}`, grpc.credentials.createInsecure());
      try {
        expect((await failure('ServerLive', {}, other)).code).toBe(grpc.status.PERMISSION_DENIED);
        const metadata = new grpc.Metadata();
        metadata.set('x-key', 'k');
        const live = await new Promise((resolve, reject) => {
          (other.ServerLive as (r: object, m: grpc.Metadata, cb: (e: Error | null, v: unknown) => void) => void).call(other, {}, metadata, (e, v) =>
            e ? reject(e) : resolve(v),
          );
        });
        expect(live).toEqual({ live: true });
      } finally {
        other.close();
        await guarded.close();
      }
    });

    it('close() waits for calls in flight', async () => {
      const own = await serveKServe(server, { grpc: { port: 0, engine } });
      const other = new Service(`127.0.0.1:${own.grpc?.port}`, grpc.credentials.createInsecure());
      const slow = call('ModelInfer', slowRequest(9, 300), other);
      while ((own.grpc?.inFlight ?? 0) === 0) await new Promise((r) => setTimeout(r, 5));
      const closing = own.close();
      const response = await slow;
      expect(f32((response.raw_output_contents as Buffer[])[0] as Buffer)).toEqual([9]);
      await closing;
      other.close();
    });

    it('leaves no request or response alive', async () => {
      await expectNoRequestsLive();
    });
  });

  describe('gRPC transport (node:http2)', () => {
    it('ends a call past its deadline with DEADLINE_EXCEEDED and cancels the Triton request', async () => {
      const error = await new Promise<grpc.ServiceError>((resolve) => {
        (client.ModelInfer as (r: object, m: grpc.Metadata, o: grpc.CallOptions, cb: (e: grpc.ServiceError | null) => void) => void).call(
          client,
          slowRequest(3, 60_000),
          new grpc.Metadata(),
          { deadline: Date.now() + 300 },
          (e) => resolve(e as grpc.ServiceError),
        );
      });
      expect(error.code).toBe(grpc.status.DEADLINE_EXCEEDED);
      while (liveObjects().requests > 0 || (frontends.grpc?.inFlight ?? 0) > 0) await new Promise((r) => setTimeout(r, 10));
      expect(liveObjects().requests).toBe(0);
    });

    it('takes gzip and deflate requests and compresses responses when asked (responseCompression)', async () => {
      const own = await serveKServe(server, { grpc: { port: 0, engine, responseCompression: 'gzip' } });
      const input = new Float32Array(4096).map((_, i) => i % 7);
      try {
        for (const algorithm of [1, 2]) {
          // grpc-js channel option: 1 deflate, 2 gzip (requests compressed; gzip responses taken).
          const other = new Service(`127.0.0.1:${own.grpc?.port}`, grpc.credentials.createInsecure(), {
            'grpc.default_compression_algorithm': algorithm,
          } as grpc.ChannelOptions);
          try {
            const response = await call(
              'ModelInfer',
              { model_name: 'identity_fp32', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4096] }], raw_input_contents: [Buffer.from(input.buffer)] },
              other,
            );
            expect(f32((response.raw_output_contents as Buffer[])[0] as Buffer)).toEqual(Array.from(input));
          } finally {
            other.close();
          }
        }
        // On the wire: the response message is flagged compressed and inflates to the answer.
        const { message, headers } = await rawCall(own.grpc?.port as number, 'ServerLive', Buffer.alloc(0), false);
        expect(headers['grpc-encoding']).toBe('gzip');
        expect(message.compressed).toBe(true);
      } finally {
        await own.close();
      }
    });

    it('refuses messages past maxReceiveMessageBytes, compressed ones by their inflated size', async () => {
      const own = await serveKServe(server, { grpc: { port: 0, engine, maxReceiveMessageBytes: 64 * 1024 } });
      try {
        const other = new Service(`127.0.0.1:${own.grpc?.port}`, grpc.credentials.createInsecure());
        const big = await failure(
          'ModelInfer',
          { model_name: 'identity_fp32', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 32768] }], raw_input_contents: [Buffer.alloc(131072)] },
          other,
        );
        other.close();
        expect(big.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
        expect(big.details).toContain('larger than max');
        // 64 MiB of zeros gzip to about 64 KiB: refused while inflating, not after.
        const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 });
        expect(bomb.byteLength).toBeLessThan(64 * 1024);
        const { status } = await rawCall(own.grpc?.port as number, 'ModelInfer', bomb, true);
        expect(status).toMatchObject({ code: grpc.status.RESOURCE_EXHAUSTED });
        expect(status.message).toContain('larger than max');
        expect(own.grpc?.inFlight).toBe(0);
      } finally {
        await own.close();
      }
    });

    it('ends a stream whose compressed message cannot be read, while the client still has it open', async () => {
      const session = http2.connect(`http://127.0.0.1:${frontends.grpc?.port}`);
      try {
        const stream = session.request({
          ':method': 'POST',
          ':path': '/inference.GRPCInferenceService/ModelStreamInfer',
          'content-type': 'application/grpc',
          te: 'trailers',
          'grpc-encoding': 'gzip',
        });
        const corrupt = Buffer.from('not gzip at all');
        const framed = Buffer.alloc(5 + corrupt.length);
        framed[0] = 1;
        framed.writeUInt32BE(corrupt.length, 1);
        corrupt.copy(framed, 5);
        stream.write(framed); // and no end: the failure must not wait for it
        const status = await new Promise<{ code: number; message: string }>((resolve, reject) => {
          let headers: http2.IncomingHttpHeaders = {};
          stream.on('response', (h) => {
            headers = h;
          });
          // The server's status comes with its RST_STREAM NO_ERROR: the stream closes although this side never ended it.
          stream.on('trailers', (h) => resolve({ code: Number(h['grpc-status']), message: decodeURIComponent(String(h['grpc-message'] ?? '')) }));
          stream.on('close', () => resolve({ code: Number(headers['grpc-status']), message: decodeURIComponent(String(headers['grpc-message'] ?? '')) }));
          stream.on('error', reject);
          stream.on('data', () => {});
        });
        expect(status.code).toBe(grpc.status.INTERNAL);
        expect(status.message).toContain('could not decompress a gzip message');
      } finally {
        session.close();
      }
      while ((frontends.grpc?.inFlight ?? 0) > 0) await new Promise((r) => setTimeout(r, 10));
      expect(await call('ServerLive', {})).toEqual({ live: true });
    });

    it('answers an unknown method UNIMPLEMENTED and a malformed message INVALID_ARGUMENT', async () => {
      const port = frontends.grpc?.port as number;
      const unknown = await rawCall(port, 'NoSuchMethod', Buffer.alloc(0), false);
      expect(unknown.status.code).toBe(grpc.status.UNIMPLEMENTED);
      const malformed = await rawCall(port, 'ModelInfer', Buffer.from([0x0a, 0xff, 0xff, 0x7f]), false);
      expect(malformed.status.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(malformed.status.message).toContain('failed to parse the ModelInferRequest message');
      // A frame that says it is longer than what comes: the call ends, nothing waits for the rest.
      const short = await rawCall(port, 'ModelInfer', Buffer.alloc(10), false, 100);
      expect(short.status).toEqual({ code: grpc.status.INTERNAL, message: 'the request ended inside a message' });
      // A gzip message whose trailer lies about its size, and a corrupt one.
      const zipped = gzipSync(Buffer.from('not a request at all'));
      zipped.writeUInt32LE(1, zipped.length - 4);
      const lying = await rawCall(port, 'ModelInfer', zipped, true);
      expect(lying.status.code).toBe(grpc.status.INTERNAL);
      expect(lying.status.message).toContain('could not decompress a gzip message');
      expect(frontends.grpc?.inFlight).toBe(0);
    });
  });

  /** One call with node:http2: what a client that is not grpc-js sends and sees. */
  async function rawCall(
    port: number,
    method: string,
    message: Buffer,
    compressed: boolean,
    declaredLength = message.length,
  ): Promise<{ headers: http2.IncomingHttpHeaders; status: { code: number; message: string }; message: { compressed: boolean; bytes: Buffer } }> {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    try {
      const stream = session.request({
        ':method': 'POST',
        ':path': `/inference.GRPCInferenceService/${method}`,
        'content-type': 'application/grpc',
        te: 'trailers',
        'grpc-encoding': compressed ? 'gzip' : 'identity',
        'grpc-accept-encoding': 'identity,gzip',
      });
      const framed = Buffer.alloc(5 + message.length);
      framed[0] = compressed ? 1 : 0;
      framed.writeUInt32BE(declaredLength, 1);
      message.copy(framed, 5);
      stream.end(framed);
      return await new Promise((resolve, reject) => {
        let headers: http2.IncomingHttpHeaders = {};
        const chunks: Buffer[] = [];
        let trailers: http2.IncomingHttpHeaders = {};
        stream.on('response', (h) => {
          headers = h;
        });
        stream.on('data', (chunk: Buffer) => chunks.push(chunk));
        stream.on('trailers', (h) => {
          trailers = h;
        });
        stream.on('error', reject);
        stream.on('close', () => {
          const all = Buffer.concat(chunks);
          const statusFrom = trailers['grpc-status'] !== undefined ? trailers : headers;
          resolve({
            headers,
            status: { code: Number(statusFrom['grpc-status']), message: decodeURIComponent(String(statusFrom['grpc-message'] ?? '')) },
            message: { compressed: all[0] === 1, bytes: all.subarray(5) },
          });
        });
      });
    } finally {
      session.close();
    }
  }
}
