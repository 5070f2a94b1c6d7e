// The HTTP front end as a client not written here sees it: curl, with bodies
// made by printf into files, as in Triton's guides.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Server } from '../lib/index.js';
import { serveKServe, type KServeFrontends } from '../lib/kserve/index.js';
import { expectNoRequestsLive, startServer } from './helpers.js';

const run = promisify(execFile);

let server: Server;
let open: KServeFrontends;
let closed: KServeFrontends;
let dir: string;

beforeAll(async () => {
  server = await startServer();
  await server.loadModel('identity_int32');
  await server.loadModel('repeat_int32');
  open = await serveKServe(server, { http: { port: 0 }, metrics: { port: 0 }, repositoryControl: true });
  closed = await serveKServe(server, { http: { port: 0 } });
  dir = await mkdtemp(join(tmpdir(), 'kserve-curl-'));
});

afterAll(async () => {
  await open?.close();
  await closed?.close();
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** curl's body and status code (`-w` appends it on its own line). */
async function curl(...args: string[]): Promise<{ body: string; status: number }> {
  const { stdout } = await run('curl', ['-s', '-w', '\n%{http_code}', ...args]);
  const at = stdout.lastIndexOf('\n');
  return { body: stdout.slice(0, at), status: Number(stdout.slice(at + 1)) };
}

function url(path: string, frontends = open): string {
  return `http://127.0.0.1:${frontends.http?.port}${path}`;
}

/** Runs a shell line (printf into files). */
async function sh(line: string): Promise<void> {
  await run('sh', ['-c', line], { cwd: dir });
}

describe('curl against serveKServe', () => {
  it('health, server metadata and model metadata', async () => {
    expect(await curl(url('/v2/health/live'))).toEqual({ body: '', status: 200 });
    expect(await curl(url('/v2/health/ready'))).toEqual({ body: '', status: 200 });
    const metadata = await curl(url('/v2'));
    expect(metadata.status).toBe(200);
    expect(JSON.parse(metadata.body)).toMatchObject({ name: 'triton' });
    const model = await curl(url('/v2/models/identity_int32'));
    expect(JSON.parse(model.body)).toEqual(await server.model('identity_int32').metadata());
    expect((await curl(url('/v2/models/identity_int32/ready'))).status).toBe(200);
    expect(JSON.parse((await curl(url('/v2/models/identity_int32/config'))).body)).toMatchObject({ name: 'identity_int32' });
    expect(JSON.parse((await curl(url('/v2/models/identity_int32/stats'))).body).model_stats[0].name).toBe('identity_int32');
    expect(JSON.parse((await curl(url('/v2/models/stats'))).body).model_stats.length).toBeGreaterThanOrEqual(2);
  });

  it('the guides’ load command, and index and unload', async () => {
    const load = await curl('-X', 'POST', url('/v2/repository/models/identity_fp32/load'));
    expect(load).toEqual({ body: '', status: 200 });
    expect(await server.model('identity_fp32').ready()).toBe(true);
    const index = await curl('-X', 'POST', url('/v2/repository/index'));
    expect(JSON.parse(index.body)).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'identity_fp32', state: 'READY' })]));
    expect(await curl('-X', 'POST', url('/v2/repository/models/identity_fp32/unload'))).toEqual({ body: '', status: 200 });
    const refused = await curl('-X', 'POST', url('/v2/repository/models/identity_fp32/load', closed));
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body).error).toContain('restricted');
  });

  it('a JSON inference request', async () => {
    const { body, status } = await curl(
      '-X', 'POST', url('/v2/models/identity_int32/infer'),
      '-H', 'Content-Type: application/json',
      '-d', '{"inputs":[{"name":"INPUT0","shape":[1,4],"datatype":"INT32","data":[1,2,3,4]}]}',
    );
    expect(status).toBe(200);
    expect(JSON.parse(body)).toMatchObject({
      model_name: 'identity_int32',
      model_version: '1',
      outputs: [{ name: 'OUTPUT0', datatype: 'INT32', shape: [1, 4], data: [1, 2, 3, 4] }],
    });
  });

  it('a binary inference request built with printf', async () => {
    const header = '{"inputs":[{"name":"INPUT0","shape":[1,2],"datatype":"INT32","parameters":{"binary_data_size":8}}],"parameters":{"binary_data_output":true}}';
    await sh(`printf '%s' '${header}' > body.bin && printf '\\001\\000\\000\\000\\376\\377\\377\\377' >> body.bin`);
    const { status } = await curl(
      '-X', 'POST', url('/v2/models/identity_int32/infer'),
      '-H', 'Content-Type: application/octet-stream',
      '-H', `Inference-Header-Content-Length: ${header.length}`,
      '--data-binary', `@${join(dir, 'body.bin')}`,
      '-D', join(dir, 'headers.txt'),
      '-o', join(dir, 'out.bin'),
    );
    expect(status).toBe(200);
    const headers = await readFile(join(dir, 'headers.txt'), 'utf8');
    const length = Number(/inference-header-content-length: (\d+)/i.exec(headers)?.[1]);
    expect(headers).toMatch(/content-type: application\/octet-stream/i);
    const out = await readFile(join(dir, 'out.bin'));
    expect(JSON.parse(out.subarray(0, length).toString()).outputs[0]).toEqual({
      name: 'OUTPUT0', datatype: 'INT32', shape: [1, 2], parameters: { binary_data_size: 8 },
    });
    expect([out.readInt32LE(length), out.readInt32LE(length + 4)]).toEqual([1, -2]);
  });

  it('malformed JSON and lying sizes get Triton’s error shape', async () => {
    const bad = await curl('-X', 'POST', url('/v2/models/identity_int32/infer'), '-d', '{"inputs": [');
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body).error).toContain('failed to parse');
    const header = '{"inputs":[{"name":"INPUT0","shape":[1,2],"datatype":"INT32","parameters":{"binary_data_size":8}}]}';
    await sh(`printf '%s' '${header}' > short.bin && printf '\\001\\000\\000\\000' >> short.bin`);
    const short = await curl(
      '-X', 'POST', url('/v2/models/identity_int32/infer'),
      '-H', `Inference-Header-Content-Length: ${header.length}`,
      '--data-binary', `@${join(dir, 'short.bin')}`,
    );
    expect(short.status).toBe(400);
    expect(JSON.parse(short.body).error).toContain('unexpected size');
  });

  it('generate_stream as server-sent events', async () => {
    const { body, status } = await curl('-N', '-X', 'POST', url('/v2/models/repeat_int32/generate_stream'), '-d', '{"IN":[1,2]}');
    expect(status).toBe(200);
    expect(body).toBe(
      'data: {"model_name":"repeat_int32","model_version":"1","OUT":1}\n\ndata: {"model_name":"repeat_int32","model_version":"1","OUT":2}\n\n',
    );
  });

  it('the metrics port', async () => {
    const { body, status } = await curl(`http://127.0.0.1:${open.metrics?.port}/metrics`);
    expect(status).toBe(200);
    expect(body).toContain('nv_inference_request_success{model="identity_int32",version="1"}');
  });

  it('leaves nothing in flight', async () => {
    await expectNoRequestsLive();
  });
});
