import http2 from 'node:http2';
import { deflateSync, gunzipSync, gzipSync, inflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { liveObjects } from '../lib/index.js';
import { serveKServe, type KServeFrontends } from '../lib/kserve/index.js';
import { decodeModelInferResponse, encodeModelInferRequest, type WireInferRequest } from '../lib/kserve/infer-wire.js';
import { expectNoRequestsLive } from './helpers.js';
import { clientFor, defineGrpcSuite, suiteState, unaryCall, unaryFailure } from './kserve-grpc.suite.js';
import { float32Bytes, Segment } from './shared-memory-segments.js';

// Every gRPC test again with the native engine: what it does not answer
// itself reaches the same JS server, and must come out the same.
defineGrpcSuite('native');

const MODEL_INFER = '/inference.GRPCInferenceService/ModelInfer';

interface RawAnswer {
  headers: http2.IncomingHttpHeaders;
  trailers: http2.IncomingHttpHeaders;
  data: Buffer;
}

/** A gRPC message: the 5-byte prefix (its compressed flag, its length), then the bytes. */
function framed(message: Buffer, compressed = false): Buffer {
  const prefix = Buffer.alloc(5);
  prefix[0] = compressed ? 1 : 0;
  prefix.writeUInt32BE(message.length, 1);
  return Buffer.concat([prefix, message]);
}

function inferMessage(request: Partial<WireInferRequest> & Pick<WireInferRequest, 'model_name' | 'inputs'>): Buffer {
  return encodeModelInferRequest({ model_version: '', id: '', parameters: {}, outputs: [], ...request });
}

/** One call over a session of its own, every byte of the answer kept. */
async function rawCall(port: number, message: Buffer, headers: http2.OutgoingHttpHeaders = {}, compressed = false): Promise<RawAnswer> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  try {
    const stream = session.request({ ':method': 'POST', ':path': MODEL_INFER, 'content-type': 'application/grpc', te: 'trailers', ...headers });
    stream.end(framed(message, compressed));
    return await new Promise<RawAnswer>((resolve, reject) => {
      let answer: http2.IncomingHttpHeaders = {};
      let trailers: http2.IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      stream.on('response', (h) => (answer = h));
      stream.on('trailers', (t) => (trailers = t));
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('error', reject);
      stream.on('close', () => resolve({ headers: answer, trailers, data: Buffer.concat(chunks) }));
    });
  } finally {
    session.close();
  }
}

function f32Bytes(values: number[]): Buffer {
  return Buffer.from(new Float32Array(values).buffer);
}

/** Both engines over the suite's server, for the tests that compare them. */
async function withBothEngines(test: (native: KServeFrontends, node: KServeFrontends) => Promise<void>): Promise<void> {
  const { server } = suiteState();
  const native = await serveKServe(server, { grpc: { port: 0, engine: 'native' } });
  const node = await serveKServe(server, { grpc: { port: 0, engine: 'node' } });
  try {
    await test(native, node);
  } finally {
    await Promise.all([native.close(), node.close()]);
  }
}

describe('native gRPC engine', () => {
  it('answers plain ModelInfer calls itself, byte for byte as the JS engine does', async () => {
    await withBothEngines(async (native, node) => {
      const calls: Buffer[] = [
        inferMessage({ model_name: 'identity_fp32', id: 'n1', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3], bytes: f32Bytes([1, 2.5, -3]) }] }),
        inferMessage({ model_name: 'identity_fp32', model_version: '1', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 0], bytes: Buffer.alloc(0) }] }),
        inferMessage({
          model_name: 'identity_int64',
          inputs: [{ name: 'INPUT0', datatype: 'INT64', shape: [1, 2], bytes: Buffer.from(new BigInt64Array([-1n, 9007199254740993n]).buffer) }],
          outputs: [{ name: 'OUTPUT0', parameters: {} }],
        }),
        // As NVIDIA's clients send every call: triton_enable_empty_final_response, which only streams read.
        inferMessage({ model_name: 'identity_fp32', id: '7021', parameters: { triton_enable_empty_final_response: true }, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], bytes: f32Bytes([4, 5]) }], outputs: [{ name: 'OUTPUT0', parameters: undefined }] }),
        inferMessage({ model_name: 'identity_bool', inputs: [{ name: 'INPUT0', datatype: 'BOOL', shape: [1, 2], bytes: Buffer.from([1, 0]) }] }),
        inferMessage({ model_name: 'identity_fp16', inputs: [{ name: 'INPUT0', datatype: 'FP16', shape: [1, 1], bytes: Buffer.from([0x00, 0x3c]) }] }),
        inferMessage({ model_name: 'identity_fp32', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16384], bytes: f32Bytes(Array.from({ length: 16384 }, (_, i) => i)) }] }),
      ];
      const before = native.grpc?.answeredNatively ?? 0;
      for (const message of calls) {
        const [mine, theirs] = await Promise.all([rawCall(native.grpc?.port ?? 0, message), rawCall(node.grpc?.port ?? 0, message)]);
        expect(mine.trailers['grpc-status']).toBe('0');
        expect(mine.headers['content-type']).toBe('application/grpc');
        expect(mine.data.length).toBeGreaterThan(5);
        expect(mine.data.equals(theirs.data)).toBe(true);
        expect(mine.trailers['grpc-status']).toBe(theirs.trailers['grpc-status']);
      }
      expect((native.grpc?.answeredNatively ?? 0) - before).toBe(calls.length);
      expect(node.grpc?.answeredNatively).toBe(0);
    });
    await expectNoRequestsLive();
  });

  it('answers errors Triton gives after running a call as the JS engine does', async () => {
    await withBothEngines(async (native, node) => {
      const calls: Buffer[] = [
        // The model's own error (INTERNAL).
        inferMessage({ model_name: 'fail', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [2], bytes: f32Bytes([1, 2]) }] }),
        // A decoupled model through ModelInfer: more than one response.
        inferMessage({ model_name: 'repeat_int32', inputs: [{ name: 'IN', datatype: 'INT32', shape: [3], bytes: Buffer.from(new Int32Array([4, 5, 6]).buffer) }] }),
      ];
      for (const message of calls) {
        const [mine, theirs] = await Promise.all([rawCall(native.grpc?.port ?? 0, message), rawCall(node.grpc?.port ?? 0, message)]);
        expect(mine.headers['grpc-status']).not.toBe('0');
        expect(mine.headers['grpc-status']).toBe(theirs.headers['grpc-status']);
        expect(mine.headers['grpc-message']).toBe(theirs.headers['grpc-message']);
        expect(mine.data.length).toBe(0);
      }
      expect(native.grpc?.answeredNatively).toBe(calls.length);
    });
  });

  it('passes on to JS what it does not read itself, which answers as with the node engine', async () => {
    await withBothEngines(async (native, node) => {
      const cases: Array<[Buffer, http2.OutgoingHttpHeaders]> = [
        // An unknown model and a wrong input: refused before running, so JS says why.
        [inferMessage({ model_name: 'does_not_exist', inputs: [{ name: 'X', datatype: 'FP32', shape: [1], bytes: f32Bytes([1]) }] }), {}],
        [inferMessage({ model_name: 'identity_fp32', inputs: [{ name: 'NOPE', datatype: 'FP32', shape: [1, 1], bytes: f32Bytes([1]) }] }), {}],
        // Raw bytes that do not match the shape.
        [inferMessage({ model_name: 'identity_fp32', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], bytes: Buffer.alloc(12) }] }), {}],
        // BYTES, request parameters.
        [inferMessage({ model_name: 'identity_bytes', inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 1], bytes: Buffer.from([1, 0, 0, 0, 0x61]) }] }), {}],
        [inferMessage({ model_name: 'identity_fp32', parameters: { triton_enable_empty_final_response: 'yes' }, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1], bytes: f32Bytes([7]) }] }), {}],
        [inferMessage({ model_name: 'identity_fp32', parameters: { priority: 1 }, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1], bytes: f32Bytes([7]) }] }), {}],
        // Malformed protobuf.
        [Buffer.from([0x0a, 0xff, 0xff]), {}],
        // A deadline is the JS call's to keep.
        [inferMessage({ model_name: 'identity_fp32', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1], bytes: f32Bytes([8]) }] }), { 'grpc-timeout': '10S' }],
      ];
      for (const [message, headers] of cases) {
        const [mine, theirs] = await Promise.all([rawCall(native.grpc?.port ?? 0, message, headers), rawCall(node.grpc?.port ?? 0, message, headers)]);
        expect(mine.data.equals(theirs.data)).toBe(true);
        expect(mine.headers['grpc-status'] ?? mine.trailers['grpc-status']).toBe(theirs.headers['grpc-status'] ?? theirs.trailers['grpc-status']);
        expect(mine.headers['grpc-message'] ?? mine.trailers['grpc-message']).toBe(theirs.headers['grpc-message'] ?? theirs.trailers['grpc-message']);
      }
      expect(native.grpc?.answeredNatively).toBe(0);
    });
  });

  it('reads inputs from and writes outputs into system shared memory itself, as the JS engine does', async () => {
    const { server } = suiteState();
    const seg = new Segment(4096, 'grpc-native');
    const values = Array.from({ length: 16 }, (_, i) => i * 1.5 - 3);
    seg.write(0, float32Bytes(values));
    await server.sharedMemory.register('in', { key: seg.key, byteSize: 64 });
    await server.sharedMemory.register('out', { key: seg.key, offset: 1024, byteSize: 64 });
    const region = (name: string, byteSize: number): Record<string, unknown> => ({
      shared_memory_region: { string_param: name },
      shared_memory_byte_size: { int64_param: byteSize },
    });
    const request = (outputBytes: number, input = 'in'): object => ({
      model_name: 'identity_fp32',
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], parameters: region(input, 64) }],
      outputs: [{ name: 'OUTPUT0', parameters: region('out', outputBytes) }],
    });
    try {
      await withBothEngines(async (native, node) => {
        const mine = clientFor(native.grpc?.port ?? 0);
        const theirs = clientFor(node.grpc?.port ?? 0);
        try {
          const answer = await unaryCall('ModelInfer', request(64), mine);
          expect(answer).toEqual(await unaryCall('ModelInfer', request(64), theirs));
          expect(answer.outputs).toMatchObject([{ name: 'OUTPUT0', datatype: 'FP32', shape: [1, 16] }]);
          expect((answer.raw_output_contents as Buffer[]).map((b) => b.length)).toEqual([0]);
          expect(seg.readFloat32(1024, 16)).toEqual(values);
          expect(native.grpc?.answeredNatively).toBe(1);
          // A region too small for the output: Triton's allocator says so, here as in JS.
          const [small, smallJs] = await Promise.all([unaryFailure('ModelInfer', request(32), mine), unaryFailure('ModelInfer', request(32), theirs)]);
          expect({ code: small.code, details: small.details }).toEqual({ code: smallJs.code, details: smallJs.details });
          expect(native.grpc?.answeredNatively).toBe(2);
          // A region not registered: refused before running, so JS answers it.
          const [missing, missingJs] = await Promise.all([
            unaryFailure('ModelInfer', request(64, 'nowhere'), mine),
            unaryFailure('ModelInfer', request(64, 'nowhere'), theirs),
          ]);
          expect({ code: missing.code, details: missing.details }).toEqual({ code: missingJs.code, details: missingJs.details });
          expect(missing.details).toContain('nowhere');
          expect(native.grpc?.answeredNatively).toBe(2);
        } finally {
          mine.close();
          theirs.close();
        }
      });
    } finally {
      await server.sharedMemory.unregister();
      seg.unlink();
    }
    await expectNoRequestsLive();
  });

  it('keeps the fast path off where JS must see each call (authorize, inferTimeoutMs)', async () => {
    const { server } = suiteState();
    const message = inferMessage({ model_name: 'identity_fp32', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1], bytes: f32Bytes([3]) }] });
    for (const options of [{ authorize: () => true }, { inferTimeoutMs: 10_000 }]) {
      const own = await serveKServe(server, { grpc: { port: 0, engine: 'native' }, ...options });
      try {
        const answer = await rawCall(own.grpc?.port ?? 0, message);
        expect(answer.trailers['grpc-status']).toBe('0');
        expect(own.grpc?.engine).toBe('native');
        expect(own.grpc?.answeredNatively).toBe(0);
      } finally {
        await own.close();
      }
    }
  });

  it('is the default, and refuses TLS without a key and certificate', async () => {
    const { server } = suiteState();
    const plain = await serveKServe(server, { grpc: { port: 0 } });
    try {
      expect(plain.grpc?.engine).toBe('native');
    } finally {
      await plain.close();
    }
    await expect(serveKServe(server, { grpc: { port: 0, engine: 'native', tls: {} } })).rejects.toMatchObject({
      code: 'INVALID_ARG',
      message: expect.stringContaining('tls.cert and tls.key do not load'),
    });
  });

  it('answers gzip and deflate calls itself, and compresses answers for clients that accept it (responseCompression)', async () => {
    const { server } = suiteState();
    const values = Array.from({ length: 16384 }, (_, i) => (i % 13) - 6);
    const message = inferMessage({ model_name: 'identity_fp32', id: 'z', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, values.length], bytes: f32Bytes(values) }] });
    const packers = { gzip: gzipSync, deflate: deflateSync };
    const unpackers = { gzip: gunzipSync, deflate: inflateSync };
    for (const answers of ['gzip', 'deflate'] as const) {
      const own = await serveKServe(server, { grpc: { port: 0, engine: 'native', responseCompression: answers } });
      try {
        for (const sent of ['gzip', 'deflate'] as const) {
          for (const accepts of [`identity,${answers}`, 'identity']) {
            const before = own.grpc?.answeredNatively ?? 0;
            const answer = await rawCall(own.grpc!.port, packers[sent](message), { 'grpc-encoding': sent, 'grpc-accept-encoding': accepts }, true);
            expect(answer.trailers['grpc-status']).toBe('0');
            expect(own.grpc?.answeredNatively).toBe(before + 1);
            const packed = accepts.includes(answers);
            expect(answer.headers['grpc-encoding']).toBe(packed ? answers : undefined);
            expect(answer.data[0]).toBe(packed ? 1 : 0);
            expect(answer.data.readUInt32BE(1)).toBe(answer.data.length - 5);
            const body = packed ? unpackers[answers](answer.data.subarray(5)) : answer.data.subarray(5);
            const decoded = decodeModelInferResponse(body);
            expect(decoded.id).toBe('z');
            const raw = decoded.raw_output_contents[0]!;
            expect(Array.from(new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength)))).toEqual(values);
          }
        }
      } finally {
        await own.close();
      }
    }
    await expectNoRequestsLive();
  });

  it('passes on compressed messages it cannot read: a bomb past the limit, corrupt bytes, trailing bytes', async () => {
    const { server } = suiteState();
    const own = await serveKServe(server, { grpc: { port: 0, engine: 'native', maxReceiveMessageBytes: 64 * 1024 } });
    try {
      const port = own.grpc!.port;
      const bomb = await rawCall(port, gzipSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 }), { 'grpc-encoding': 'gzip' }, true);
      expect(bomb.headers['grpc-status'] ?? bomb.trailers['grpc-status']).toBe('8');
      const message = inferMessage({ model_name: 'identity_fp32', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], bytes: f32Bytes([1, 2]) }] });
      const zipped = gzipSync(message);
      for (const bad of [zipped.subarray(0, zipped.length - 3), Buffer.concat([zipped, Buffer.from('tail')]), Buffer.from('not gzip at all')]) {
        const answer = await rawCall(port, bad, { 'grpc-encoding': 'gzip' }, true);
        expect(answer.headers['grpc-status'] ?? answer.trailers['grpc-status']).toBe('13');
      }
      // A compressed flag under grpc-encoding identity is the JS engine's to refuse.
      const unflagged = await rawCall(port, message, { 'grpc-encoding': 'identity' }, true);
      expect(unflagged.headers['grpc-status'] ?? unflagged.trailers['grpc-status']).not.toBe('0');
      expect(own.grpc?.answeredNatively).toBe(0);
      // What it can read, it still answers.
      expect((await rawCall(port, zipped, { 'grpc-encoding': 'gzip' }, true)).trailers['grpc-status']).toBe('0');
      expect(own.grpc?.answeredNatively).toBe(1);
    } finally {
      await own.close();
    }
    await expectNoRequestsLive();
  });

  it('counts what compressed messages inflate to in the connection budget while Triton holds them', async () => {
    const { server } = suiteState();
    const own = await serveKServe(server, { grpc: { port: 0, engine: 'native', maxConnectionBytes: 3 * 1024 * 1024 } });
    const session = http2.connect(`http://127.0.0.1:${own.grpc!.port}`);
    try {
      // 1 MiB each once inflated (about 1 KiB sent), held by the slow model for 500 ms.
      const message = inferMessage({
        model_name: 'slow',
        inputs: [
          { name: 'INPUT0', datatype: 'FP32', shape: [256 * 1024], bytes: Buffer.alloc(1024 * 1024) },
          { name: 'DELAY_MS', datatype: 'UINT32', shape: [1], bytes: Buffer.from(new Uint32Array([500]).buffer) },
        ],
      });
      const zipped = framed(gzipSync(message), true);
      const statuses = await Promise.all(
        Array.from({ length: 4 }, () => new Promise<string>((resolve, reject) => {
          const stream = session.request({ ':method': 'POST', ':path': MODEL_INFER, 'content-type': 'application/grpc', te: 'trailers', 'grpc-encoding': 'gzip' });
          let status = '';
          stream.on('response', (h) => (status = String(h['grpc-status'] ?? status)));
          stream.on('trailers', (t) => (status = String(t['grpc-status'] ?? status)));
          stream.on('data', () => undefined);
          stream.on('error', reject);
          stream.on('close', () => resolve(status));
          stream.end(zipped);
        })),
      );
      // Two fit (2 MiB held; a third would pass 3 MiB with what else the connection holds); the others are told to retry (UNAVAILABLE).
      expect(statuses.sort()).toEqual(['0', '0', '14', '14']);
    } finally {
      session.close();
      await own.close();
    }
    await expectNoRequestsLive();
  });

  it('cancels its Triton request when the client resets the call', async () => {
    const { frontends } = suiteState();
    const session = http2.connect(`http://127.0.0.1:${frontends.grpc?.port}`);
    try {
      const message = inferMessage({
        model_name: 'slow',
        inputs: [
          { name: 'INPUT0', datatype: 'FP32', shape: [1], bytes: f32Bytes([1]) },
          // 60 s is past the test timeout: only a cancelled request lets the test finish.
          { name: 'DELAY_MS', datatype: 'UINT32', shape: [1], bytes: Buffer.from(new Uint32Array([60_000]).buffer) },
        ],
      });
      const before = frontends.grpc?.answeredNatively ?? 0;
      const stream = session.request({ ':method': 'POST', ':path': MODEL_INFER, 'content-type': 'application/grpc', te: 'trailers' });
      stream.end(framed(message));
      await expect.poll(() => liveObjects().requests, { timeout: 5000, interval: 5 }).toBe(1);
      stream.close(http2.constants.NGHTTP2_CANCEL);
      await expect.poll(() => liveObjects().requests, { timeout: 20_000, interval: 10 }).toBe(0);
      // Answered (cancelled) by the addon, not passed on.
      expect(frontends.grpc?.answeredNatively).toBe(before + 1);
    } finally {
      session.close();
    }
    await expectNoRequestsLive();
  });

  it('close() answers the calls in flight, then closes', async () => {
    const { server } = suiteState();
    const own = await serveKServe(server, { grpc: { port: 0, engine: 'native' } });
    const session = http2.connect(`http://127.0.0.1:${own.grpc?.port}`);
    session.on('error', () => undefined);
    const message = inferMessage({
      model_name: 'slow',
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [1], bytes: f32Bytes([5]) },
        { name: 'DELAY_MS', datatype: 'UINT32', shape: [1], bytes: Buffer.from(new Uint32Array([200]).buffer) },
      ],
    });
    const stream = session.request({ ':method': 'POST', ':path': MODEL_INFER, 'content-type': 'application/grpc', te: 'trailers' });
    const answer = new Promise<{ status: unknown; data: Buffer }>((resolve) => {
      const chunks: Buffer[] = [];
      let status: unknown;
      stream.on('trailers', (t) => (status = t['grpc-status']));
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('close', () => resolve({ status, data: Buffer.concat(chunks) }));
    });
    stream.end(framed(message));
    await expect.poll(() => liveObjects().requests, { timeout: 5000, interval: 5 }).toBe(1);
    const closed = own.close();
    const { status, data } = await answer;
    expect(status).toBe('0');
    expect(data.subarray(data.length - 4).equals(f32Bytes([5]))).toBe(true);
    await closed;
    expect(own.grpc?.answeredNatively).toBe(1);
    // Nothing listens any more.
    const refused = http2.connect(`http://127.0.0.1:${own.grpc?.port}`);
    await expect(new Promise((resolve, reject) => refused.once('connect', resolve).once('error', reject))).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    session.destroy();
  });

  it('serves many concurrent calls on one connection, mixed with calls passed on', async () => {
    const { frontends } = suiteState();
    const session = http2.connect(`http://127.0.0.1:${frontends.grpc?.port}`);
    try {
      const before = frontends.grpc?.answeredNatively ?? 0;
      const answers = await Promise.all(
        Array.from({ length: 64 }, async (_, i) => {
          const values = Array.from({ length: 1024 + i }, (_, k) => i * 1e4 + k);
          // Every fourth call carries a request parameter: JS answers it.
          const message = inferMessage({
            model_name: 'identity_fp32',
            ...(i % 4 === 0 ? { parameters: { tag: `c${i}` } } : {}),
            inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, values.length], bytes: f32Bytes(values) }],
          });
          const stream = session.request({ ':method': 'POST', ':path': MODEL_INFER, 'content-type': 'application/grpc', te: 'trailers' });
          stream.end(framed(message));
          const chunks: Buffer[] = [];
          stream.on('data', (chunk: Buffer) => chunks.push(chunk));
          await new Promise((resolve) => stream.on('close', resolve));
          return { values, data: Buffer.concat(chunks) };
        }),
      );
      for (const { values, data } of answers) expect(data.subarray(data.length - values.length * 4).equals(f32Bytes(values))).toBe(true);
      expect((frontends.grpc?.answeredNatively ?? 0) - before).toBe(48);
    } finally {
      session.close();
    }
    await expectNoRequestsLive();
  });
});
