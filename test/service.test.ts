// examples/service/server.ts, the Flask replacement: started as users start
// it (a child process, `node --import tsx examples/service/server.ts`) and
// spoken to over real HTTP; the error paths that need a broken model or a
// stopped Triton run in-process through buildService() and Fastify's inject.
import { spawn, type ChildProcess } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { buildService, type Service } from '../examples/service/server.js';
import { Server, formatModelConfig, parseModelConfig } from '../lib/index.js';
import { serveKServe, type KServeFrontends } from '../lib/kserve/index.js';
import { REPO_ROOT } from './helpers.js';
import { childProcesses, processAlive } from './proc.js';

const SERVER = resolve(REPO_ROOT, 'examples/service/server.ts');
const REPOSITORY = resolve(REPO_ROOT, 'examples/model_repository');

interface Running {
  child: ChildProcess;
  url: string;
  stdout: () => string;
  /** Resolves with the exit code once the process has exited. */
  exited: Promise<number | null>;
}

/** Starts the service on a free port and waits for its "listening on" line. */
function startService(env: Record<string, string> = {}): Promise<Running> {
  const child = spawn(process.execPath, ['--import', 'tsx', SERVER], {
    cwd: REPO_ROOT,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(stdout);
      if (match) resolve({ child, url: match[1]!, stdout: () => stdout, exited });
    });
    void exited.then((code) => reject(new Error(`service exited (${code}) before listening:\n${stdout}\n${stderr}`)));
  });
}

async function post(url: string, body: string | Uint8Array, contentType: string) {
  const response = await fetch(url, { method: 'POST', body, headers: { 'content-type': contentType } });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/**
 * A POST that announces a body of `contentLength` bytes but sends none: a
 * server that refuses the size answers at once (413) from the header alone.
 */
function postAnnounced(url: string, contentLength: number, contentType: string): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'POST', agent: false, headers: { 'content-type': contentType, 'content-length': contentLength } }, (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> });
      });
    });
    req.on('error', reject);
    req.flushHeaders();
  });
}

const scoresBody = z.object({ scores: z.array(z.number().min(0).max(1)) });
const top5Body = z.object({ top5: z.array(z.object({ label: z.string(), probability: z.number() })).length(5) });

describe('service in remote mode (TRITON_URL)', () => {
  let triton: Server;
  let frontends: KServeFrontends;
  beforeAll(async () => {
    triton = await Server.start({ modelRepository: resolve(REPO_ROOT, 'examples/model_repository'), modelControlMode: 'explicit', log: { info: false } });
    await triton.loadModel('text_processor');
    await triton.loadModel('pipeline');
    frontends = await serveKServe(triton, { grpc: { port: 0 }, http: { port: 0 }, metrics: { port: 0 } });
  }, 60_000);
  afterAll(async () => {
    await frontends?.close();
    await triton?.stop();
  });

  it.each(['grpc', 'http'] as const)('serves the same routes from a Triton reached over %s, and exits 0 on SIGTERM', async (protocol) => {
    const port = protocol === 'grpc' ? frontends.grpc!.port : frontends.http!.port;
    const service = await startService({
      TRITON_URL: `${protocol}://127.0.0.1:${port}`,
      TRITON_METRICS_URL: `http://127.0.0.1:${frontends.metrics!.port}/metrics`,
    });
    try {
      const [before] = await triton.model('text_processor').statistics();
      const scored = await post(`${service.url}/v1/sentiment`, JSON.stringify({ texts: ['what a wonderful day', 'this is awful'] }), 'application/json');
      expect(scored.status).toBe(200);
      const { scores } = scoresBody.parse(scored.body);
      expect(scores[0]).toBeGreaterThan(0.5);
      expect(scores[1]).toBeLessThan(0.5);
      // The texts were scored by the Triton behind the front ends, not one in the service's process.
      const [after] = await triton.model('text_processor').statistics();
      expect(after!.inference_count - before!.inference_count).toBe(2);
      const jpeg = await readFile(resolve(REPO_ROOT, 'examples/images/sky.jpg'));
      const classified = await post(`${service.url}/v1/classify`, jpeg, 'image/jpeg');
      expect(top5Body.parse(classified.body).top5[0]!.label).toBe('blue');
      expect((await fetch(`${service.url}/healthz/ready`)).status).toBe(200);
      const metrics = await fetch(`${service.url}/metrics`);
      expect(await metrics.text()).toMatch(/^nv_inference_request_success\{model="text_processor",version="1"\} \d+$/m);
    } finally {
      service.child.kill('SIGTERM');
    }
    expect(await service.exited).toBe(0);
  });
});

describe('service over HTTP', () => {
  let service: Running;
  beforeAll(async () => {
    service = await startService();
  }, 60_000);
  afterAll(async () => {
    service?.child.kill('SIGTERM');
    expect(await service?.exited).toBe(0);
  });

  it('answers liveness, readiness and metrics', async () => {
    const live = await fetch(`${service.url}/healthz/live`);
    expect(live.status).toBe(200);
    expect(await live.json()).toEqual({ live: true });
    const ready = await fetch(`${service.url}/healthz/ready`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ ready: true });
    const metrics = await fetch(`${service.url}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get('content-type')).toBe('text/plain; version=0.0.4');
    expect(await metrics.text()).toMatch(/^nv_inference_request_success\{model="text_processor",version="1"\} \d+$/m);
  });

  it('scores concurrent requests, which Triton runs in fewer executions', async () => {
    const texts = ['what a wonderful day', 'this is awful', 'fine', 'not good'];
    const before = (await (await fetch(`${service.url}/v1/stats`)).json()) as Record<string, { inference_count: number; execution_count: number }>;
    const results = await Promise.all(
      Array.from({ length: 64 }, (_, i) =>
        post(`${service.url}/v1/sentiment`, JSON.stringify({ texts: [texts[i % 4]!, texts[(i + 1) % 4]!] }), 'application/json'),
      ),
    );
    for (const [i, result] of results.entries()) {
      expect(result.status).toBe(200);
      const { scores } = scoresBody.parse(result.body);
      expect(scores).toHaveLength(2);
      const first = texts[i % 4]!;
      if (first === 'what a wonderful day' || first === 'fine') expect(scores[0]).toBeGreaterThan(0.5);
      else expect(scores[0]).toBeLessThan(0.5);
    }
    // Triton records a batch's statistics just after sending its responses:
    // poll until all 128 requests are counted.
    let after = (await (await fetch(`${service.url}/v1/stats`)).json()) as typeof before;
    while (after.text_processor!.inference_count - before.text_processor!.inference_count < 128) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      after = (await (await fetch(`${service.url}/v1/stats`)).json()) as typeof before;
    }
    const requests = after.text_processor!.inference_count - before.text_processor!.inference_count;
    const executions = after.text_processor!.execution_count - before.text_processor!.execution_count;
    expect(requests).toBe(128);
    expect(executions).toBeGreaterThan(0);
    expect(executions).toBeLessThan(requests);
  });

  it('classifies a JPEG and raw RGB pixels', async () => {
    const jpeg = await readFile(resolve(REPO_ROOT, 'examples/images/sky.jpg'));
    const fromJpeg = await post(`${service.url}/v1/classify`, jpeg, 'image/jpeg');
    expect(fromJpeg.status).toBe(200);
    expect(top5Body.parse(fromJpeg.body).top5[0]!.label).toBe('blue');

    const red = new Uint8Array(4 * 3 * 3);
    for (let i = 0; i < red.length; i += 3) red.set([220, 25, 25], i);
    const fromRaw = await post(`${service.url}/v1/classify?width=4&height=3`, red, 'application/octet-stream');
    expect(fromRaw.status).toBe(200);
    expect(top5Body.parse(fromRaw.body).top5[0]!.label).toBe('red');
  });

  it('answers bad bodies with 400, 413 or 415 and a message, and keeps serving', async () => {
    const sentiment = `${service.url}/v1/sentiment`;
    const badJson = await post(sentiment, '{"texts": [', 'application/json');
    expect(badJson.status).toBe(400);
    expect(badJson.body.error).toMatch(/JSON/i);

    const notAnArray = await post(sentiment, JSON.stringify({ texts: 'hello' }), 'application/json');
    expect(notAnArray.status).toBe(400);
    expect(notAnArray.body.error).toMatch(/^texts: /);

    const notStrings = await post(sentiment, JSON.stringify({ texts: [1, 2] }), 'application/json');
    expect(notStrings.status).toBe(400);
    expect(notStrings.body.error).toMatch(/^texts\.0: /);

    const empty = await post(sentiment, JSON.stringify({ texts: [] }), 'application/json');
    expect(empty.status).toBe(400);

    const extra = await post(sentiment, JSON.stringify({ texts: ['a'], lang: 'en' }), 'application/json');
    expect(extra.status).toBe(400);
    expect(extra.body.error).toMatch(/lang/);

    const tooMany = await post(sentiment, JSON.stringify({ texts: Array.from({ length: 257 }, () => 'x') }), 'application/json');
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error).toBe('texts: at most 256 per request (got 257)');

    const tooLarge = await postAnnounced(sentiment, 5 * 1024 * 1024, 'application/json');
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body.error).toMatch(/body/i);

    const wrongType = await post(sentiment, 'hello', 'text/plain');
    expect(wrongType.status).toBe(415);
    expect(wrongType.body.error).toBe('content-type: expected application/json, got text/plain');
    const jsonImage = await post(`${service.url}/v1/classify`, '{}', 'application/json');
    expect(jsonImage.status).toBe(415);

    const notAnImage = await post(`${service.url}/v1/classify`, new TextEncoder().encode('not a jpeg'), 'image/jpeg');
    expect(notAnImage.status).toBe(400);
    expect(notAnImage.body.error).toMatch(/^body: not an image/);

    const shortRaw = await post(`${service.url}/v1/classify?width=4&height=4`, new Uint8Array(10), 'application/octet-stream');
    expect(shortRaw.status).toBe(400);
    expect(shortRaw.body.error).toBe('body: raw RGB of 4x4 is 48 bytes, got 10');

    const noSize = await post(`${service.url}/v1/classify`, new Uint8Array(12), 'application/octet-stream');
    expect(noSize.status).toBe(400);
    expect(noSize.body.error).toMatch(/^width: /);

    const ok = await post(sentiment, JSON.stringify({ texts: ['great'] }), 'application/json');
    expect(ok.status).toBe(200);
  });
});

/**
 * A POST with `Expect: 100-continue`: `accepted` resolves on the server's
 * "100 Continue" (the server has the request), and the body is sent only
 * when `send()` is called.
 */
function heldRequest(port: string, path: string, body: string) {
  let send!: () => void;
  let accepted!: () => void;
  const acceptedPromise = new Promise<void>((resolve) => (accepted = resolve));
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path,
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), expect: '100-continue' },
      },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.on('continue', () => accepted());
    send = () => req.end(body);
    req.flushHeaders();
  });
  return { accepted: acceptedPromise, send: () => send(), answer };
}

describe('service shutdown', () => {
  it('on SIGTERM finishes the requests in flight, stops Triton and exits 0; nothing listens afterwards', async () => {
    const service = await startService();
    const { port } = new URL(service.url);
    const texts = ['a wonderful ending', 'a bad ending', 'great', 'awful'];
    const held = texts.map((text) => heldRequest(port, '/v1/sentiment', JSON.stringify({ texts: [text, text] })));
    await Promise.all(held.map((h) => h.accepted));

    service.child.kill('SIGTERM');
    while (!service.stdout().includes('SIGTERM: finishing requests in flight')) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    for (const h of held) h.send(); // the bodies arrive while the service is shutting down

    const answers = await Promise.all(held.map((h) => h.answer));
    answers.forEach(({ status, body }, i) => {
      expect(status).toBe(200);
      const { scores } = scoresBody.parse(JSON.parse(body));
      expect(scores).toHaveLength(2);
      if (i % 2 === 0) expect(scores[0]).toBeGreaterThan(0.5);
      else expect(scores[0]).toBeLessThan(0.5);
    });
    expect(await service.exited).toBe(0);
    await expect(fetch(`${service.url}/healthz/live`)).rejects.toThrow();
  }, 60_000);
});

describe('service error mapping (in-process)', () => {
  let repository: string;
  let service: Service | undefined;
  beforeAll(async () => {
    // The example repository with a text_processor whose model answers with
    // an error. Without its warmup: Triton runs warmup samples at load, and a
    // failing one fails the load.
    repository = await mkdtemp(join(tmpdir(), 'service-test-'));
    await cp(REPOSITORY, repository, { recursive: true });
    const configPath = join(repository, 'text_processor/config.pbtxt');
    const { model_warmup: _warmup, ...config } = parseModelConfig(await readFile(configPath, 'utf8'));
    await writeFile(configPath, formatModelConfig(config));
    await writeFile(
      join(repository, 'text_processor/1/model.py'),
      [
        'import triton_python_backend_utils as pb_utils',
        '',
        'class TritonPythonModel:',
        '    def execute(self, requests):',
        '        return [pb_utils.InferenceResponse(error=pb_utils.TritonError("lexicon is gone")) for _ in requests]',
        '',
      ].join('\n'),
    );
  });
  afterAll(async () => {
    await service?.close();
    await rm(repository, { recursive: true, force: true });
  });

  it('validates its options before starting Triton', async () => {
    await expect(buildService({ bodyLimitBytes: -1 })).rejects.toBeInstanceOf(z.ZodError);
  });

  it('answers a model error with 500 and Triton\'s code and message, and 503 once Triton is stopped', async () => {
    service = await buildService({ modelRepository: repository });
    const failed = await service.app.inject({ method: 'POST', url: '/v1/sentiment', payload: { texts: ['hello'] } });
    expect(failed.statusCode).toBe(500);
    expect(failed.json()).toEqual({ error: expect.stringContaining('lexicon is gone'), code: 'INTERNAL' });

    await (service.server as Server).stop();
    const stopped = await service.app.inject({ method: 'POST', url: '/v1/sentiment', payload: { texts: ['hello'] } });
    expect(stopped.statusCode).toBe(503);
    expect(stopped.json()).toMatchObject({ code: 'UNAVAILABLE' });
    const ready = await service.app.inject({ method: 'GET', url: '/healthz/ready' });
    expect(ready.statusCode).toBe(503);
  });
});

describe('service readiness when a model’s Python stub dies (in-process)', () => {
  let service: Service | undefined;
  afterAll(async () => {
    // A dead instance never finishes unloading on real Triton r25.07: a bounded stop.
    await (service?.server as Server | undefined)?.stop({ timeoutMs: 2000 });
    await service?.app.close();
  });

  it('/healthz/ready answers 503 while text_processor’s stub is dead, and 200 once the model is loaded again', async () => {
    const before = new Set(childProcesses(process.pid, 'triton_python_backend_stub').map((stub) => stub.pid));
    service = await buildService({ modelRepository: REPOSITORY, recoverUnhealthyModels: false });
    const ready = async () => (await service!.app.inject({ method: 'GET', url: '/healthz/ready' })).statusCode;
    const sentiment = () => service!.app.inject({ method: 'POST', url: '/v1/sentiment', payload: { texts: ['I love it'] } });
    expect(await ready()).toBe(200);
    expect((await sentiment()).statusCode).toBe(200);

    const stubs = childProcesses(process.pid, 'triton_python_backend_stub').filter(
      (stub) => !before.has(stub.pid) && stub.cmdline.includes('text_processor'),
    );
    expect(stubs).toHaveLength(1);
    process.kill(stubs[0]!.pid, 'SIGKILL');
    await vi.waitFor(() => expect(processAlive(stubs[0]!.pid)).toBe(false));
    const failed = await sentiment();
    expect(failed.statusCode).toBe(500);
    expect(failed.json()).toMatchObject({ code: 'INTERNAL', error: expect.stringContaining("Stub process 'text_processor_0_0' is not healthy") });
    expect(await ready()).toBe(503);

    // The README's recipe (recoverUnhealthyModels does it by itself): load the model again.
    await (service.server as Server).loadModel('text_processor');
    expect(await ready()).toBe(200);
    const healed = await sentiment();
    expect(healed.statusCode).toBe(200);
    expect((healed.json() as { scores: number[] }).scores[0]).toBeGreaterThan(0.5);
  }, 60_000);

  it('with recoverUnhealthyModels (the default) it is ready again by itself', async () => {
    await (service?.server as Server | undefined)?.stop({ timeoutMs: 2000 });
    await service?.app.close();
    const before = new Set(childProcesses(process.pid, 'triton_python_backend_stub').map((stub) => stub.pid));
    service = await buildService({ modelRepository: REPOSITORY });
    const ready = async () => (await service!.app.inject({ method: 'GET', url: '/healthz/ready' })).statusCode;
    const sentiment = () => service!.app.inject({ method: 'POST', url: '/v1/sentiment', payload: { texts: ['I love it'] } });
    expect((await sentiment()).statusCode).toBe(200);
    const stubs = childProcesses(process.pid, 'triton_python_backend_stub').filter(
      (stub) => !before.has(stub.pid) && stub.cmdline.includes('text_processor'),
    );
    expect(stubs).toHaveLength(1);
    process.kill(stubs[0]!.pid, 'SIGKILL');
    await vi.waitFor(() => expect(processAlive(stubs[0]!.pid)).toBe(false));
    expect((await sentiment()).statusCode).toBe(500);
    await vi.waitFor(async () => expect(await ready()).toBe(200), { timeout: 30_000, interval: 100 });
    expect((await sentiment()).statusCode).toBe(200);
  }, 60_000);
});
