import { createServer, request as httpRequest, type Server as HttpServer } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { deflateSync, gunzipSync, gzipSync, inflateSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { liveObjects, type Server } from '../lib/index.js';
import { kserveHandler, serveKServe, type KServeFrontends } from '../lib/kserve/index.js';
import { expectNoRequestsLive, startServer } from './helpers.js';

/** Which HTTP engine serveKServe runs in this file's suite (see defineHttpSuite). */
let engine: 'node' | 'native' = 'node';
let server: Server;
let frontends: KServeFrontends;
let base: string;

/**
 * fetch, asking for no compression unless a test asks: undici's own
 * `gzip, deflate` would send every inference through the JS handler, and the
 * native engine is to answer what it can here.
 */
const fetch: typeof globalThis.fetch = (input, init) => {
  const headers = new Headers(init?.headers);
  if (!headers.has('accept-encoding')) headers.set('accept-encoding', 'identity');
  return globalThis.fetch(input, { ...init, headers });
};

const MODELS = ['identity_fp32', 'identity_int32', 'identity_int64', 'identity_bool', 'identity_bytes', 'identity_fp16', 'repeat_int32', 'slow'];

/** The suite's server and front ends, for tests of one engine only. */
export function suiteState(): { server: Server; frontends: KServeFrontends; base: string } {
  return { server, frontends, base };
}

/**
 * The KServe HTTP suite, run once per engine (kserve-http.test.ts for
 * `node`, kserve-http-native.test.ts for `native`): both must answer alike.
 */
export function defineHttpSuite(httpEngine: 'node' | 'native'): void {
  engine = httpEngine;
  beforeAll(async () => {
    server = await startServer();
    for (const name of MODELS) await server.loadModel(name);
    frontends = await serveKServe(server, { http: { port: 0, engine }, metrics: { port: 0 } });
    base = `http://127.0.0.1:${frontends.http?.port}`;
  });

  afterAll(async () => {
    await frontends?.close();
    await server?.stop();
  });

  async function json(path: string, init?: RequestInit): Promise<{ status: number; body: unknown; headers: Headers }> {
    const response = await fetch(base + path, init);
    const text = await response.text();
    return { status: response.status, body: text === '' ? undefined : JSON.parse(text), headers: response.headers };
  }

  function post(path: string, body: unknown): Promise<{ status: number; body: unknown; headers: Headers }> {
    return json(path, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body) });
  }

  /** A binary-extension body: the JSON header, then the tensors' bytes. */
  function binaryBody(header: unknown, ...parts: ArrayBufferView[]): { body: Buffer; headerLength: number } {
    const json = Buffer.from(JSON.stringify(header));
    const bytes = parts.map((part) => Buffer.from(part.buffer, part.byteOffset, part.byteLength));
    return { body: Buffer.concat([json, ...bytes]), headerLength: json.byteLength };
  }

  /** Splits a binary response into its JSON header and the bytes after it. */
  async function binaryResponse(response: Response): Promise<{ header: { outputs: Array<Record<string, unknown>> }; rest: Buffer }> {
    const buffer = Buffer.from(await response.arrayBuffer());
    const length = Number(response.headers.get('inference-header-content-length'));
    return { header: JSON.parse(buffer.subarray(0, length).toString()), rest: buffer.subarray(length) };
  }

  describe('health and metadata', () => {
    it('answers live and ready with 200 and an empty body', async () => {
      for (const path of ['/v2/health/live', '/v2/health/ready']) {
        const response = await fetch(base + path);
        expect(response.status).toBe(200);
        expect(await response.text()).toBe('');
      }
    });

    it('serves server metadata without the extensions it does not implement (CUDA shared memory, logging)', async () => {
      const { status, body } = await json('/v2');
      const triton = await server.metadata();
      expect(status).toBe(200);
      const extensions = (body as { extensions: string[] }).extensions;
      expect(body).toMatchObject({ name: triton.name, version: triton.version });
      expect(extensions).toContain('binary_tensor_data');
      expect(extensions).toContain('model_repository');
      expect(extensions).toContain('system_shared_memory');
      expect(extensions).not.toContain('cuda_shared_memory');
    });

    it('serves model metadata, by version too', async () => {
      const expected = await server.model('identity_fp32').metadata();
      expect(await json('/v2/models/identity_fp32')).toMatchObject({ status: 200, body: expected });
      expect(await json('/v2/models/identity_fp32/versions/1')).toMatchObject({ status: 200, body: expected });
    });

    it('answers model readiness with 200, or 400 and Triton’s message', async () => {
      expect((await fetch(`${base}/v2/models/identity_fp32/ready`)).status).toBe(200);
      expect((await fetch(`${base}/v2/models/identity_fp32/versions/1/ready`)).status).toBe(200);
      expect(await json('/v2/models/does_not_exist/ready')).toMatchObject({ status: 400, body: { error: 'Model version not ready' } });
      expect(await json('/v2/models/identity_fp32/versions/7/ready')).toMatchObject({ status: 400 });
    });

    it('maps an unknown model to 404 with Triton’s message', async () => {
      const { status, body } = await json('/v2/models/does_not_exist');
      expect(status).toBe(404);
      expect((body as { error: string }).error).toContain("'does_not_exist'");
    });

    it('serves the model configuration Triton uses', async () => {
      const { status, body } = await json('/v2/models/identity_fp32/config');
      expect(status).toBe(200);
      expect(body).toMatchObject({ name: 'identity_fp32', backend: 'identity', max_batch_size: 8 });
      expect((body as { input: Array<{ name: string; data_type: string }> }).input[0]).toMatchObject({
        name: 'INPUT0',
        data_type: 'TYPE_FP32',
      });
    });

    it('serves statistics of one model and of every ready model', async () => {
      await post('/v2/models/identity_int32/infer', { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1], data: [1] }] });
      // Triton counts a request when it releases it, which may be just after
      // the response: read until it is counted (a bounded number of reads).
      type Stats = { model_stats: Array<{ name: string; inference_count: number }> };
      let one = await json('/v2/models/identity_int32/stats');
      for (let i = 0; i < 200 && ((one.body as Stats).model_stats?.[0]?.inference_count ?? 0) < 1; i++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
        one = await json('/v2/models/identity_int32/stats');
      }
      expect(one.status).toBe(200);
      const stats = (one.body as Stats).model_stats;
      expect(stats[0]?.name).toBe('identity_int32');
      expect(stats[0]?.inference_count).toBeGreaterThanOrEqual(1);
      const all = await json('/v2/models/stats');
      const names = (all.body as { model_stats: Array<{ name: string }> }).model_stats.map((entry) => entry.name);
      expect(names).toEqual(expect.arrayContaining(MODELS));
    });

    it('answers unknown routes 404 and wrong methods 405, in Triton’s error shape', async () => {
      expect(await json('/v2/nothing/here')).toMatchObject({ status: 404, body: { error: 'Not Found' } });
      expect(await json('/v2/models/identity_fp32/infer')).toMatchObject({ status: 405, body: { error: 'Method Not Allowed' } });
      expect(await json('/v2', { method: 'POST' })).toMatchObject({ status: 405 });
      expect(await json('/v2/models/%E0%A4%A')).toMatchObject({ status: 400, body: { error: expect.stringContaining('invalid URL') } });
    });

    it('answers 501 for logging and trace, which the in-process API does not offer', async () => {
      for (const path of ['/v2/logging', '/v2/trace/setting', '/v2/models/identity_fp32/trace/setting']) {
        const { status, body } = await json(path);
        expect(status).toBe(501);
        expect(typeof (body as { error: string }).error).toBe('string');
      }
    });

    it('keeps repository routes closed unless repositoryControl is set', async () => {
      for (const path of ['/v2/repository/index', '/v2/repository/models/identity_fp32/load', '/v2/repository/models/identity_fp32/unload']) {
        const { status, body } = await post(path, {});
        expect(status).toBe(403);
        expect((body as { error: string }).error).toContain('repositoryControl');
      }
      expect(await server.model('identity_fp32').ready()).toBe(true);
    });
  });

  describe('inference with JSON tensors', () => {
    it('runs a request with nested data and echoes the id', async () => {
      const { status, body, headers } = await post('/v2/models/identity_fp32/infer', {
        id: 'req-1',
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [2, 2], data: [[1.5, 2], [3, -4.25]] }],
      });
      expect(status).toBe(200);
      expect(headers.get('content-type')).toBe('application/json');
      const { parameters, ...rest } = body as { parameters?: unknown };
      expect(rest).toEqual({
        id: 'req-1',
        model_name: 'identity_fp32',
        model_version: '1',
        outputs: [{ name: 'OUTPUT0', datatype: 'FP32', shape: [2, 2], data: [1.5, 2, 3, -4.25] }],
      });
      // Response parameters the backend sets (real Triton's identity backend sets some) pass through.
      const direct = await server.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array(1) } } });
      expect(parameters ?? {}).toEqual(direct.parameters);
    });

    it('carries BOOL, BYTES and INT32 as JSON values', async () => {
      const bools = await post('/v2/models/identity_bool/infer', {
        inputs: [{ name: 'INPUT0', datatype: 'BOOL', shape: [1, 3], data: [true, false, true] }],
      });
      expect((bools.body as { outputs: Array<{ data: unknown }> }).outputs[0]?.data).toEqual([true, false, true]);
      const bytes = await post('/v2/models/identity_bytes/infer', {
        inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 2], data: ['héllo', ''] }],
      });
      expect(bytes.status).toBe(200);
      expect((bytes.body as { outputs: Array<{ data: unknown }> }).outputs[0]).toMatchObject({ datatype: 'BYTES', shape: [1, 2], data: ['héllo', ''] });
      const ints = await post('/v2/models/identity_int32/infer', {
        inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 2], data: [-2147483648, 2147483647] }],
      });
      expect((ints.body as { outputs: Array<{ data: unknown }> }).outputs[0]?.data).toEqual([-2147483648, 2147483647]);
    });

    it('writes 64-bit integers exactly', async () => {
      const big = new BigInt64Array([9007199254740993n, -9223372036854775808n]);
      const { body, headerLength } = binaryBody(
        { inputs: [{ name: 'INPUT0', datatype: 'INT64', shape: [1, 2], parameters: { binary_data_size: 16 } }] },
        big,
      );
      const response = await fetch(`${base}/v2/models/identity_int64/infer`, {
        method: 'POST',
        headers: { 'Inference-Header-Content-Length': String(headerLength) },
        body,
      });
      const text = await response.text();
      expect(text).toContain('"data":[9007199254740993,-9223372036854775808]');
    });

    it('classifies: the top k values as "value:index" strings', async () => {
      const { status, body } = await post('/v2/models/identity_fp32/infer', {
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [2, 3], data: [0.1, 0.9, 0.5, 3, 1, 2] }],
        outputs: [{ name: 'OUTPUT0', parameters: { classification: 2 } }],
      });
      expect(status).toBe(200);
      expect((body as { outputs: unknown[] }).outputs[0]).toEqual({
        name: 'OUTPUT0',
        datatype: 'BYTES',
        shape: [2, 2],
        data: ['0.900000:1', '0.500000:2', '3.000000:0', '2.000000:2'],
      });
    });

    it('rejects bad requests with 400 and a message', async () => {
      const cases: Array<[unknown, string]> = [
        ['{"inputs": [', 'failed to parse the request JSON'],
        [{ inputs: 'no' }, "'inputs'"],
        [{ inputs: [{ name: 'INPUT0', datatype: 'FP99', shape: [1, 1], data: [1] }] }, 'invalid datatype'],
        [{ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1], data: [1] }] }, 'FP32'],
        [{ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], data: [1] }] }, 'expected 2 elements'],
        [{ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [-1], data: [1] }] }, 'shape'],
        [{ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1], data: ['x'] }] }, 'not a number'],
        [{ inputs: [{ name: 'NOPE', datatype: 'FP32', shape: [1, 1], data: [1] }] }, 'NOPE'],
        [{ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1], data: [1] }], parameters: { triton_x: 1 } }, 'reserved'],
        [{ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1], data: [1] }], outputs: [{ name: 'NOPE' }] }, 'NOPE'],
      ];
      for (const [body, message] of cases) {
        const response = await post('/v2/models/identity_fp32/infer', body);
        expect(response.status, JSON.stringify(body)).toBe(400);
        expect((response.body as { error: string }).error).toContain(message);
      }
      const fp16 = await post('/v2/models/identity_fp16/infer', { inputs: [{ name: 'INPUT0', datatype: 'FP16', shape: [1, 1], data: [1] }] });
      expect(fp16).toMatchObject({ status: 400 });
      expect((fp16.body as { error: string }).error).toContain('receiving FP16 data via JSON is not supported');
    });

    it('serves a decoupled model over infer when it sends one response, else 501', async () => {
      const one = await post('/v2/models/repeat_int32/infer', { inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: [9] }] });
      expect(one.status).toBe(200);
      expect((one.body as { outputs: Array<{ name: string; data: unknown }> }).outputs).toMatchObject([{ name: 'OUT', data: [9] }]);
      const several = await post('/v2/models/repeat_int32/infer', { inputs: [{ name: 'IN', datatype: 'INT32', shape: [2], data: [1, 2] }] });
      expect(several.status).toBe(501);
      expect((several.body as { error: string }).error).toContain('2 responses');
    });

    it('gives each of many concurrent requests its own result', async () => {
      const results = await Promise.all(
        Array.from({ length: 200 }, async (_, i) => {
          const { body, headerLength } = binaryBody(
            {
              id: String(i),
              inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 2], parameters: { binary_data_size: 8 } }],
              parameters: { binary_data_output: true },
            },
            new Int32Array([i + 1, -(i + 1)]),
          );
          const response = await fetch(`${base}/v2/models/identity_int32/infer`, {
            method: 'POST',
            headers: { 'Inference-Header-Content-Length': String(headerLength) },
            body,
          });
          const { header, rest } = await binaryResponse(response);
          return [(header as unknown as { id: string }).id, rest.readInt32LE(0), rest.readInt32LE(4)];
        }),
      );
      results.forEach((result, i) => expect(result).toEqual([String(i), i + 1, -(i + 1)]));
    });

    it('answers 404 for an unknown model', async () => {
      const { status, body } = await post('/v2/models/does_not_exist/infer', {
        inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }],
      });
      expect(status).toBe(404);
      expect((body as { error: string }).error).toContain("'does_not_exist'");
    });
  });

  describe('inference with the binary tensor data extension', () => {
    it('reads binary inputs and writes binary outputs', async () => {
      const before = frontends.http?.answeredNatively ?? 0;
      for (const pad of ['', ' ', '  ', '   ']) {
        // Header lengths of every remainder mod 4 exercise the aligned layout of the body.
        const header = JSON.stringify({
          id: `pad${pad.length}`,
          inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3], parameters: { binary_data_size: 12 } }],
          outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
        }) + pad;
        const data = new Float32Array([1.25, -2, 1e30]);
        const response = await fetch(`${base}/v2/models/identity_fp32/infer`, {
          method: 'POST',
          headers: { 'Inference-Header-Content-Length': String(Buffer.byteLength(header)) },
          body: Buffer.concat([Buffer.from(header), Buffer.from(data.buffer)]),
        });
        expect(response.status).toBe(200);
        expect(response.headers.get('content-type')).toBe('application/octet-stream');
        const { header: json, rest } = await binaryResponse(response);
        expect(json.outputs).toEqual([
          { name: 'OUTPUT0', datatype: 'FP32', shape: [1, 3], parameters: { binary_data_size: 12 } },
        ]);
        expect(Array.from(new Float32Array(rest.buffer.slice(rest.byteOffset, rest.byteOffset + 12)))).toEqual(Array.from(data));
      }
      // The native engine answers these itself; the node engine has no such count.
      expect(frontends.http?.answeredNatively).toBe(engine === 'native' ? before + 4 : 0);
    });

    it('reads a chunked body (no Content-Length)', async () => {
      const { body, headerLength } = binaryBody(
        {
          inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3], parameters: { binary_data_size: 12 } }],
          parameters: { binary_data_output: true },
        },
        new Float32Array([7, 8, 9]),
      );
      const response = await new Promise<{ status: number; body: Buffer; headerLength: number }>((resolve, reject) => {
        const request = httpRequest(`${base}/v2/models/identity_fp32/infer`, {
          method: 'POST',
          headers: { 'Inference-Header-Content-Length': String(headerLength), 'Transfer-Encoding': 'chunked' },
        });
        request.on('error', reject);
        request.on('response', (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), headerLength: Number(res.headers['inference-header-content-length']) }),
          );
        });
        // Split inside the JSON and inside the tensor bytes.
        request.write(body.subarray(0, 10));
        request.write(body.subarray(10, headerLength + 5));
        request.end(body.subarray(headerLength + 5));
      });
      expect(response.status).toBe(200);
      const rest = response.body.subarray(response.headerLength);
      expect([rest.readFloatLE(0), rest.readFloatLE(4), rest.readFloatLE(8)]).toEqual([7, 8, 9]);
    });

    it('mixes JSON and binary, and binary_data_output applies to every output', async () => {
      const { body, headerLength } = binaryBody(
        {
          inputs: [{ name: 'INPUT0', datatype: 'FP16', shape: [1, 2], parameters: { binary_data_size: 4 } }],
          parameters: { binary_data_output: true },
        },
        new Uint16Array([0x3c00, 0xc000]),
      );
      const response = await fetch(`${base}/v2/models/identity_fp16/infer`, {
        method: 'POST',
        headers: { 'Inference-Header-Content-Length': String(headerLength) },
        body,
      });
      expect(response.status).toBe(200);
      const { header, rest } = await binaryResponse(response);
      expect(header.outputs[0]).toMatchObject({ datatype: 'FP16', parameters: { binary_data_size: 4 } });
      expect([rest.readUInt16LE(0), rest.readUInt16LE(2)]).toEqual([0x3c00, 0xc000]);
      // binary_data: false on the output overrides binary_data_output.
      const json = await post('/v2/models/identity_int32/infer', {
        inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1], data: [5] }],
        outputs: [{ name: 'OUTPUT0', parameters: { binary_data: false } }],
        parameters: { binary_data_output: true },
      });
      expect((json.body as { outputs: Array<{ data: unknown }> }).outputs[0]?.data).toEqual([5]);
    });

    it('sends BYTES in their length-prefixed form', async () => {
      const wire = Buffer.from([3, 0, 0, 0, 0x61, 0x62, 0x63, 0, 0, 0, 0]);
      const { body, headerLength } = binaryBody(
        {
          inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 2], parameters: { binary_data_size: wire.byteLength } }],
          parameters: { binary_data_output: true },
        },
        wire,
      );
      const response = await fetch(`${base}/v2/models/identity_bytes/infer`, {
        method: 'POST',
        headers: { 'Inference-Header-Content-Length': String(headerLength) },
        body,
      });
      const { header, rest } = await binaryResponse(response);
      expect(header.outputs[0]).toMatchObject({ datatype: 'BYTES', shape: [1, 2], parameters: { binary_data_size: 11 } });
      expect(Buffer.compare(rest, wire)).toBe(0);
    });

    it('rejects binary sizes that lie, and headers that do', async () => {
      const header = { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], parameters: { binary_data_size: 8 } }] };
      const send = async (body: Buffer, headerLength: string | undefined): Promise<{ status: number; error: string }> => {
        const response = await fetch(`${base}/v2/models/identity_fp32/infer`, {
          method: 'POST',
          headers: headerLength === undefined ? {} : { 'Inference-Header-Content-Length': headerLength },
          body,
        });
        return { status: response.status, error: ((await response.json()) as { error: string }).error };
      };
      const short = binaryBody(header, new Float32Array([1]));
      expect(await send(short.body, String(short.headerLength))).toMatchObject({ status: 400, error: expect.stringContaining('unexpected size') });
      const long = binaryBody(header, new Float32Array([1, 2, 3]));
      expect(await send(long.body, String(long.headerLength))).toMatchObject({ status: 400, error: expect.stringContaining('additional input data') });
      const wrongSize = binaryBody(
        { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 3], parameters: { binary_data_size: 8 } }] },
        new Float32Array([1, 2]),
      );
      expect(await send(wrongSize.body, String(wrongSize.headerLength))).toMatchObject({ status: 400, error: expect.stringContaining('unexpected size') });
      const ok = binaryBody(header, new Float32Array([1, 2]));
      expect(await send(ok.body, undefined)).toMatchObject({ status: 400 });
      expect(await send(ok.body, String(ok.body.byteLength + 5))).toMatchObject({ status: 400, error: expect.stringContaining('Inference-Header-Content-Length') });
      expect(await send(ok.body, 'abc')).toMatchObject({ status: 400 });
    });

    it('takes a raw binary request (header length 0): one input, shape from the size', async () => {
      const response = await fetch(`${base}/v2/models/identity_fp32/infer`, {
        method: 'POST',
        headers: { 'Inference-Header-Content-Length': '0' },
        body: Buffer.from(new Float32Array([1, 2, 3]).buffer),
      });
      expect(response.status).toBe(200);
      const { header, rest } = await binaryResponse(response);
      expect(header.outputs[0]).toMatchObject({ name: 'OUTPUT0', datatype: 'FP32', shape: [1, 3], parameters: { binary_data_size: 12 } });
      expect([rest.readFloatLE(0), rest.readFloatLE(4), rest.readFloatLE(8)]).toEqual([1, 2, 3]);
      const odd = await fetch(`${base}/v2/models/identity_fp32/infer`, {
        method: 'POST',
        headers: { 'Inference-Header-Content-Length': '0' },
        body: Buffer.alloc(7),
      });
      expect(odd.status).toBe(400);
      expect(((await odd.json()) as { error: string }).error).toContain('does not fit');
    });
  });

  describe('generate', () => {
    it('maps JSON members to inputs and outputs to members', async () => {
      const { status, body } = await post('/v2/models/identity_int32/generate', { id: 'g', INPUT0: [7, 8] });
      expect(status).toBe(200);
      const direct = await server.model('identity_int32').infer({ inputs: { INPUT0: { shape: [1, 1], data: new Int32Array(1) } } });
      // Response parameters become members too, as in Triton.
      expect(body).toEqual({ id: 'g', model_name: 'identity_int32', model_version: '1', ...direct.parameters, OUTPUT0: [7, 8] });
    });

    it('streams a decoupled model’s responses as server-sent events', async () => {
      const response = await fetch(`${base}/v2/models/repeat_int32/generate_stream`, { method: 'POST', body: JSON.stringify({ IN: [4, 5, 6] }) });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
      const events = (await response.text()).split('\n\n').filter((chunk) => chunk !== '');
      expect(events.map((event) => JSON.parse(event.replace(/^data: /, '')))).toEqual([4, 5, 6].map((value) => ({
        model_name: 'repeat_int32',
        model_version: '1',
        OUT: value,
      })));
    });

    it('refuses generate on a model that sends several responses', async () => {
      const { status, body } = await post('/v2/models/repeat_int32/generate', { IN: [1, 2] });
      expect(status).toBe(500);
      expect((body as { error: string }).error).toContain('exactly 1 response');
    });

    it('answers errors before the first event with a status', async () => {
      const { status, body } = await post('/v2/models/repeat_int32/generate_stream', { IN: ['x'] });
      expect(status).toBe(400);
      expect((body as { error: string }).error).toContain('not a number');
    });
  });

  describe('metrics port', () => {
    it('serves Triton’s metrics as Prometheus text', async () => {
      const response = await fetch(`http://127.0.0.1:${frontends.metrics?.port}/metrics`);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
      expect(await response.text()).toContain('# TYPE nv_inference_request_success counter');
      expect((await fetch(`http://127.0.0.1:${frontends.metrics?.port}/other`)).status).toBe(404);
    });
  });

  describe('robustness', () => {
    it('cancels the Triton request when the client disconnects', async () => {
      // 60 s is past the test timeout: only a cancelled request lets the test finish.
      const body = JSON.stringify({
        inputs: [
          { name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] },
          { name: 'DELAY_MS', datatype: 'UINT32', shape: [1], data: [60000] },
        ],
      });
      await new Promise<void>((resolve) => {
        const request = httpRequest(`${base}/v2/models/slow/infer`, { method: 'POST' });
        request.on('error', () => resolve());
        request.end(body);
        // Wait until the front end has the request in flight, then hang up.
        const poll = setInterval(() => {
          if ((frontends.http?.handler.inFlight ?? 0) > 0 && liveObjects().requests > 0) {
            clearInterval(poll);
            request.destroy();
          }
        }, 5);
      });
      // The slow model polls for cancellation; Triton then releases the request.
      while (liveObjects().requests > 0 || (frontends.http?.handler.inFlight ?? 0) > 0) await new Promise((r) => setTimeout(r, 10));
      expect(liveObjects().requests).toBe(0);
    });

    it('maps the per-request timeout option to the request’s timeoutMs', async () => {
      const limited = await serveKServe(server, { http: { port: 0, engine }, inferTimeoutMs: 50 });
      try {
        const response = await fetch(`http://127.0.0.1:${limited.http?.port}/v2/models/slow/infer`, {
          method: 'POST',
          body: JSON.stringify({
            inputs: [
              { name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] },
              { name: 'DELAY_MS', datatype: 'UINT32', shape: [1], data: [20000] },
            ],
          }),
        });
        expect(response.status).toBe(400);
        expect(((await response.json()) as { error: string }).error).toContain('timed out after 50 ms');
      } finally {
        await limited.close();
      }
    });

    it('refuses bodies above maxBodyBytes', async () => {
      const limited = await serveKServe(server, { http: { port: 0, engine }, maxBodyBytes: 100 });
      try {
        const response = await fetch(`http://127.0.0.1:${limited.http?.port}/v2/models/identity_fp32/infer`, {
          method: 'POST',
          body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 64], data: new Array(64).fill(1) }] }),
        });
        expect(response.status).toBe(400);
        expect(((await response.json()) as { error: string }).error).toContain('exceeds the maximum allowed input size of 100 bytes');
      } finally {
        await limited.close();
      }
    });

    it('reads gzip and deflate request bodies (tritonclient\'s request_compression_algorithm), binary tensors included', async () => {
      const { body, headerLength } = binaryBody(
        { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], parameters: { binary_data_size: 16 } }], outputs: [{ name: 'OUTPUT0', parameters: { binary_data: false } }] },
        new Float32Array([1, 2.5, -3, 4]),
      );
      for (const [encoding, compress] of [['gzip', gzipSync], ['deflate', deflateSync]] as const) {
        const response = await fetch(`${base}/v2/models/identity_fp32/infer`, {
          method: 'POST',
          body: compress(body),
          headers: { 'Content-Encoding': encoding, 'Inference-Header-Content-Length': String(headerLength) },
        });
        expect(response.status).toBe(200);
        const answer = (await response.json()) as { outputs: Array<{ data: number[] }> };
        expect(answer.outputs[0]!.data).toEqual([1, 2.5, -3, 4]);
      }
    });

    it('compresses inference responses for Accept-Encoding as Triton does (tritonclient\'s response_compression_algorithm)', async () => {
      const { body, headerLength } = binaryBody(
        { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], parameters: { binary_data_size: 16 } }], outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }] },
        new Float32Array([1, 2.5, -3, 4]),
      );
      const raw = (acceptEncoding: string, payload: Buffer, headers: Record<string, string>): Promise<{ headers: Record<string, unknown>; body: Buffer }> =>
        new Promise((resolve, reject) => {
          // node:http, not fetch: fetch would inflate the body itself.
          const req = httpRequest(`${base}/v2/models/identity_fp32/infer`, { method: 'POST', headers: { 'Accept-Encoding': acceptEncoding, ...headers } }, (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (chunk: Buffer) => chunks.push(chunk));
            res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
          });
          req.on('error', reject);
          req.end(payload);
        });
      for (const [accept, chosen, inflate] of [
        ['gzip', 'gzip', gunzipSync],
        ['deflate', 'deflate', inflateSync],
        ['deflate;q=0.5, gzip', 'gzip', gunzipSync],
        ['deflate, gzip', 'deflate', inflateSync],
      ] as const) {
        const answer = await raw(accept, body, { 'Inference-Header-Content-Length': String(headerLength) });
        expect(answer.headers['content-encoding']).toBe(chosen);
        expect(Number(answer.headers['content-length'])).toBe(answer.body.length);
        const plain = inflate(answer.body);
        const jsonLength = Number(answer.headers['inference-header-content-length']);
        expect(JSON.parse(plain.subarray(0, jsonLength).toString()).outputs[0]).toMatchObject({ name: 'OUTPUT0', parameters: { binary_data_size: 16 } });
        const rest = plain.subarray(jsonLength);
        expect(Array.from(new Float32Array(rest.buffer.slice(rest.byteOffset, rest.byteOffset + rest.byteLength)))).toEqual([1, 2.5, -3, 4]);
      }
      const json = await raw('gzip', Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], data: [5, 6] }] })), {});
      expect(json.headers['content-type']).toBe('application/json');
      expect(JSON.parse(gunzipSync(json.body).toString()).outputs[0].data).toEqual([5, 6]);
      for (const refused of ['gzip;q=0', 'br', 'identity']) {
        const plain = await raw(refused, body, { 'Inference-Header-Content-Length': String(headerLength) });
        expect(plain.headers['content-encoding']).toBeUndefined();
        expect(Number(plain.headers['inference-header-content-length'])).toBeLessThan(plain.body.length);
      }
    });

    it('applies maxBodyBytes to the inflated size (a zip bomb is a 400, not memory), and refuses a corrupt or unknown encoding', async () => {
      const limited = await serveKServe(server, { http: { port: 0, engine }, maxBodyBytes: 1024 * 1024 });
      const url = `http://127.0.0.1:${limited.http?.port}/v2/models/identity_fp32/infer`;
      try {
        // 64 MiB of zeros gzip to about 64 KiB.
        const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024));
        expect(bomb.length).toBeLessThan(1024 * 1024);
        const before = process.memoryUsage().rss;
        const refused = await fetch(url, { method: 'POST', body: bomb, headers: { 'Content-Encoding': 'gzip' } });
        expect(refused.status).toBe(400);
        expect(((await refused.json()) as { error: string }).error).toContain('exceeds the maximum allowed input size of 1048576 bytes');
        expect(process.memoryUsage().rss - before).toBeLessThan(48 * 1024 * 1024);
        const corrupt = await fetch(url, { method: 'POST', body: Buffer.from('not gzip at all'), headers: { 'Content-Encoding': 'gzip' } });
        expect(corrupt.status).toBe(400);
        expect(((await corrupt.json()) as { error: string }).error).toContain('failed to decompress the gzip request body');
        const unknown = await fetch(url, { method: 'POST', body: Buffer.from('{}'), headers: { 'Content-Encoding': 'br' } });
        expect(unknown.status).toBe(415);
        expect(((await unknown.json()) as { error: string }).error).toBe("unsupported Content-Encoding 'br': use gzip or deflate");
      } finally {
        await limited.close();
      }
    });

    it('answers 431 to huge headers', async () => {
      const response = await fetch(`${base}/v2/health/live`, { headers: { 'X-Big': 'x'.repeat(64 * 1024) } });
      expect(response.status).toBe(431);
    });

    it('drops a slow-loris client after headersTimeoutMs', async () => {
      const guarded = await serveKServe(server, { http: { port: 0, headersTimeoutMs: 200, engine } });
      try {
        const socket = connect(guarded.http?.port ?? 0, '127.0.0.1');
        socket.write('GET /v2/health/live HTTP/1.1\r\nHost: x\r\n');
        let received = '';
        socket.on('data', (chunk) => (received += chunk.toString()));
        await new Promise((resolve) => socket.once('close', resolve));
        expect(received).toContain('408');
      } finally {
        await guarded.close();
      }
    });

    it('close() lets requests in flight finish and refuses new ones', async () => {
      const own = await serveKServe(server, { http: { port: 0, engine } });
      const url = `http://127.0.0.1:${own.http?.port}`;
      const slow = fetch(`${url}/v2/models/slow/infer`, {
        method: 'POST',
        body: JSON.stringify({
          inputs: [
            { name: 'INPUT0', datatype: 'FP32', shape: [1], data: [3] },
            { name: 'DELAY_MS', datatype: 'UINT32', shape: [1], data: [300] },
          ],
        }),
      });
      while ((own.http?.handler.inFlight ?? 0) === 0) await new Promise((r) => setTimeout(r, 5));
      const closing = own.close();
      const response = await slow;
      expect(response.status).toBe(200);
      expect(((await response.json()) as { outputs: Array<{ data: number[] }> }).outputs[0]?.data).toEqual([3]);
      await closing;
      await expect(fetch(`${url}/v2/health/live`)).rejects.toThrow();
    });

    it('a drained handler answers 503 in Triton’s error shape', async () => {
      const handler = kserveHandler(server);
      const http = createServer((req, res) => handler(req, res));
      await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
      try {
        const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/v2/health/live`;
        expect((await fetch(url)).status).toBe(200);
        await handler.drain();
        const refused = await fetch(url);
        expect(refused.status).toBe(503);
        expect(await refused.json()).toEqual({ error: 'the server is shutting down' });
      } finally {
        http.closeAllConnections();
        await new Promise((resolve) => http.close(resolve));
      }
    });

    it('asks authorize() before every route', async () => {
      const guarded = await serveKServe(server, {
        http: { port: 0, engine },
        authorize: ({ headers }) => headers.authorization === 'Bearer good',
      });
      try {
        const url = `http://127.0.0.1:${guarded.http?.port}/v2/health/live`;
        const refused = await fetch(url);
        expect(refused.status).toBe(403);
        expect(((await refused.json()) as { error: string }).error).toContain('not authorized');
        expect((await fetch(url, { headers: { Authorization: 'Bearer good' } })).status).toBe(200);
      } finally {
        await guarded.close();
      }
    });

    it('sends no CORS headers unless asked, and answers preflights when asked', async () => {
      const plain = await fetch(`${base}/v2`, { headers: { Origin: 'http://example.com' } });
      expect(plain.headers.get('access-control-allow-origin')).toBeNull();
      const open = await serveKServe(server, { http: { port: 0, engine }, cors: { origin: ['http://example.com'] } });
      try {
        const url = `http://127.0.0.1:${open.http?.port}/v2/models/identity_fp32/infer`;
        const preflight = await fetch(url, { method: 'OPTIONS', headers: { Origin: 'http://example.com' } });
        expect(preflight.status).toBe(204);
        expect(preflight.headers.get('access-control-allow-origin')).toBe('http://example.com');
        const other = await fetch(`http://127.0.0.1:${open.http?.port}/v2`, { headers: { Origin: 'http://evil.test' } });
        expect(other.headers.get('access-control-allow-origin')).toBeNull();
      } finally {
        await open.close();
      }
    });

    it('binds to loopback unless told otherwise', () => {
      expect(frontends.http?.host).toBe('127.0.0.1');
      const bound = engine === 'node' ? (frontends.http?.server.address() as AddressInfo).address : frontends.http?.host;
      expect(bound).toBe('127.0.0.1');
    });

    it('rejects invalid options with INVALID_ARG', async () => {
      await expect(serveKServe(server, { http: { port: -1, engine } })).rejects.toMatchObject({ code: 'INVALID_ARG' });
      expect(() => kserveHandler(server, { maxBodyBytes: 0 })).toThrow(/maxBodyBytes/);
    });
  });

  describe('kserveHandler mounted under a prefix, with repository control', () => {
    let mounted: HttpServer;
    let url: string;

    beforeAll(async () => {
      const handler = kserveHandler(server, { prefix: '/triton', repositoryControl: true });
      mounted = createServer((req, res) => {
        handler(req, res, () => {
          res.writeHead(200, { 'Content-Type': 'text/plain' }).end('the app');
        });
      });
      await new Promise<void>((resolve) => mounted.listen(0, '127.0.0.1', resolve));
      url = `http://127.0.0.1:${(mounted.address() as AddressInfo).port}/triton`;
    });

    afterAll(async () => {
      await new Promise((resolve) => mounted.close(resolve));
    });

    it('serves the routes under the prefix and passes other paths on', async () => {
      expect((await fetch(`${url}/v2/health/ready`)).status).toBe(200);
      const other = await fetch(`${url.replace('/triton', '')}/app`);
      expect(await other.text()).toBe('the app');
    });

    it('lists the repository, unloads and loads', async () => {
      const index = await fetch(`${url}/v2/repository/index`, { method: 'POST', body: '{"ready": true}' });
      expect(index.status).toBe(200);
      const ready = (await index.json()) as Array<{ name: string; state: string }>;
      expect(ready.find((entry) => entry.name === 'identity_int32')).toMatchObject({ state: 'READY' });
      expect((await fetch(`${url}/v2/repository/models/identity_int32/unload`, { method: 'POST' })).status).toBe(200);
      while (await server.model('identity_int32').ready()) await new Promise((r) => setTimeout(r, 5));
      expect((await fetch(`${url}/v2/repository/models/identity_int32/load`, { method: 'POST' })).status).toBe(200);
      expect(await server.model('identity_int32').ready()).toBe(true);
      const bad = await fetch(`${url}/v2/repository/index`, { method: 'POST', body: '{"ready": 1}' });
      expect(bad.status).toBe(400);
    });

    it('loads a model from a config and base64 files', async () => {
      const config = {
        name: 'kserve_memory',
        backend: 'identity',
        max_batch_size: 0,
        input: [{ name: 'INPUT0', data_type: 'TYPE_INT32', dims: [-1] }],
        output: [{ name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [-1] }],
      };
      const load = await fetch(`${url}/v2/repository/models/kserve_memory/load`, {
        method: 'POST',
        body: JSON.stringify({
          parameters: { config: JSON.stringify(config), 'file:1/README.txt': Buffer.from('identity needs a version directory').toString('base64') },
        }),
      });
      expect(load.status).toBe(200);
      const infer = await fetch(`${url}/v2/models/kserve_memory/infer`, {
        method: 'POST',
        body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [2], data: [1, 2] }] }),
      });
      expect(((await infer.json()) as { outputs: Array<{ data: number[] }> }).outputs[0]?.data).toEqual([1, 2]);
      const unload = await fetch(`${url}/v2/repository/models/kserve_memory/unload`, {
        method: 'POST',
        body: JSON.stringify({ parameters: { unload_dependents: false } }),
      });
      expect(unload.status).toBe(200);
      const missing = await fetch(`${url}/v2/repository/models/not_in_repository/load`, { method: 'POST' });
      expect(missing.status).toBe(500);
      expect(((await missing.json()) as { error: string }).error).toContain("failed to load 'not_in_repository'");
    });
  });

  describe('leaks', () => {
    it('leaves no request, response or buffer alive', async () => {
      await expectNoRequestsLive();
    });
  });
}
