// The HTTP routes mounted in Express and Fastify under a prefix, next to the
// app's own routes and body parsers.
import type { AddressInfo } from 'node:net';
import type { Server as HttpServer } from 'node:http';
import express from 'express';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from '../lib/index.js';
import { kserveFastifyPlugin, kserveHandler } from '../lib/kserve/index.js';
import { startServer } from './helpers.js';

let server: Server;

beforeAll(async () => {
  server = await startServer();
  await server.loadModel('identity_fp32');
});

afterAll(async () => {
  await server?.stop();
});

/** A binary inference round trip against `url` (…/v2/models/identity_fp32/infer). */
async function binaryInfer(url: string): Promise<number[]> {
  const header = JSON.stringify({
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], parameters: { binary_data_size: 8 } }],
    parameters: { binary_data_output: true },
  });
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': String(header.length) },
    body: Buffer.concat([Buffer.from(header), Buffer.from(new Float32Array([0.5, 8]).buffer)]),
  });
  expect(response.status).toBe(200);
  const body = Buffer.from(await response.arrayBuffer());
  const length = Number(response.headers.get('inference-header-content-length'));
  return [body.readFloatLE(length), body.readFloatLE(length + 4)];
}

async function jsonInfer(url: string): Promise<unknown> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1], data: [4] }] }),
  });
  return ((await response.json()) as { outputs: Array<{ data: unknown }> }).outputs[0]?.data;
}

describe('Express', () => {
  let http: HttpServer;
  let base: string;

  beforeAll(async () => {
    const app = express();
    app.use('/triton', kserveHandler(server));
    app.use(express.json());
    app.post('/echo', (req, res) => {
      res.json({ echoed: req.body });
    });
    http = await new Promise<HttpServer>((resolve) => {
      const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
    });
    base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise((resolve) => http.close(resolve));
  });

  it('serves the routes under the mount path, binary tensors included', async () => {
    expect((await fetch(`${base}/triton/v2/health/ready`)).status).toBe(200);
    expect(await binaryInfer(`${base}/triton/v2/models/identity_fp32/infer`)).toEqual([0.5, 8]);
    expect(await jsonInfer(`${base}/triton/v2/models/identity_fp32/infer`)).toEqual([4]);
  });

  it('passes the app’s own paths on to its routes and parsers', async () => {
    const response = await fetch(`${base}/echo`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"a":1}' });
    expect(await response.json()).toEqual({ echoed: { a: 1 } });
    expect((await fetch(`${base}/triton/elsewhere`)).status).toBe(404);
  });

  it('says so when a body parser ran first', async () => {
    const app = express();
    app.use(express.json());
    app.use('/triton', kserveHandler(server));
    const late = await new Promise<HttpServer>((resolve) => {
      const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
    });
    try {
      const response = await fetch(`http://127.0.0.1:${(late.address() as AddressInfo).port}/triton/v2/models/identity_fp32/infer`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: '{"inputs":[]}',
      });
      expect(response.status).toBe(500);
      expect(((await response.json()) as { error: string }).error).toContain('before body parsers');
    } finally {
      await new Promise((resolve) => late.close(resolve));
    }
  });
});

describe('Fastify', () => {
  let app: FastifyInstance;
  let base: string;

  beforeAll(async () => {
    app = Fastify();
    await app.register(kserveFastifyPlugin(server), { prefix: '/triton' });
    app.post('/echo', async (request) => ({ echoed: request.body }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await app.close();
  });

  it('serves the routes under the prefix, binary tensors included', async () => {
    expect((await fetch(`${base}/triton/v2/health/live`)).status).toBe(200);
    const metadata = await fetch(`${base}/triton/v2`);
    expect(((await metadata.json()) as { name: string }).name).toBe('triton');
    expect(await binaryInfer(`${base}/triton/v2/models/identity_fp32/infer`)).toEqual([0.5, 8]);
    expect(await jsonInfer(`${base}/triton/v2/models/identity_fp32/infer`)).toEqual([4]);
    const missing = await fetch(`${base}/triton/v2/models/does_not_exist`);
    expect(missing.status).toBe(404);
  });

  it('leaves the app’s own JSON parsing alone', async () => {
    const response = await fetch(`${base}/echo`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"b":2}' });
    expect(await response.json()).toEqual({ echoed: { b: 2 } });
  });
});
