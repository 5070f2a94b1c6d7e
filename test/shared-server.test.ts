/**
 * One in-process Triton shared by several threads (server.share() /
 * Server.attach()): Triton batches across them, the owner's stop ends every
 * attachment, a worker that exits lets go of its own.
 */
import { resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { Server, liveObjects, type SharedServerHandle } from '../lib/index.js';
import { collectGarbage, rejection, startServer } from './helpers.js';

const RUN_TS = resolve(import.meta.dirname, 'fixtures/run-ts.mjs');
const NOTHING_LIVE = { requests: 0, responses: 0, outputBuffers: 0, inputReferences: 0, pending: 0 };

/** Each worker's exit, listened for from its start (it may exit right after its last message). */
const exits = new WeakMap<Worker, Promise<number>>();

function attachedWorker(handle: SharedServerHandle, task: string, id = 0): Worker {
  const worker = new Worker(RUN_TS, {
    workerData: { module: resolve(import.meta.dirname, 'fixtures/worker-attached.ts'), handle, task, id },
  });
  exits.set(worker, new Promise((resolveExit) => worker.once('exit', resolveExit)));
  return worker;
}

function message(worker: Worker): Promise<unknown> {
  return new Promise((resolveMessage, reject) => {
    worker.once('message', resolveMessage);
    worker.once('error', reject);
  });
}

function exit(worker: Worker): Promise<number> {
  return exits.get(worker)!;
}

let server: Server | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

describe('one server, many threads', () => {
  it('batches requests from three threads together, each getting its own results', async () => {
    server = await startServer({ startupModels: ['identity_fp32'] });
    const handle = server.share();
    const workers = [1, 2, 3].map((id) => attachedWorker(handle, 'infer', id));
    const results = await Promise.all(workers.map(message));
    for (const result of results) {
      expect(result).toEqual({ correct: 100, report: { complete: true, requestsInside: 0, message: '' } });
    }
    await Promise.all(workers.map(exit));
    // Statistics are recorded just after the responses are sent.
    let stats = (await server.model('identity_fp32').statistics())[0]!;
    for (let i = 0; i < 100 && stats.inference_count < 300; i++) {
      await new Promise((resolveWait) => setTimeout(resolveWait, 10));
      stats = (await server.model('identity_fp32').statistics())[0]!;
    }
    expect(stats.inference_count).toBe(300);
    expect(stats.execution_count).toBeLessThan(stats.inference_count);
    // The attachments let go; the owner still serves.
    const response = await server.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array([9]) } } });
    expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual([9]);
    await collectGarbage();
    expect(liveObjects()).toEqual(NOTHING_LIVE);
  }, 60_000);

  it('the owner’s stop cancels the workers’ requests and ends their attachments', async () => {
    server = await startServer({ startupModels: ['slow'] });
    const handle = server.share();
    const workers = [1, 2].map((id) => attachedWorker(handle, 'busy', id));
    await Promise.all(workers.map(message));
    await new Promise((resolveWait) => setTimeout(resolveWait, 100));
    const results = workers.map(message);
    const report = await server.stop();
    expect(report.complete).toBe(true);
    for (const result of await Promise.all(results)) {
      const { first, later } = result as { first: string; later: string };
      expect(['CANCELLED', 'UNAVAILABLE']).toContain(first);
      expect(later).toBe('UNAVAILABLE');
    }
    await Promise.all(workers.map(exit));
    // A handle of a stopped server attaches no more.
    expect((await rejection(Server.attach(handle))).code).toBe('UNAVAILABLE');
    expect(() => server!.share()).toThrow(/stopped/);
  }, 60_000);

  it('a worker that crashes leaves the server serving, with nothing of it left', async () => {
    server = await startServer({ startupModels: ['slow', 'identity_fp32'] });
    const worker = attachedWorker(server.share(), 'crash');
    expect(await message(worker)).toBe('started');
    const error = await new Promise((resolveError) => worker.once('error', resolveError));
    expect(String(error)).toMatch(/the worker crashes/);
    await exit(worker);
    const response = await server.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array([3]) } } });
    expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual([3]);
    await collectGarbage();
    expect(liveObjects()).toEqual(NOTHING_LIVE);
  }, 60_000);

  it('refuses a handle that is not one', async () => {
    expect((await rejection(Server.attach({ kind: 'x' } as never))).code).toBe('INVALID_ARG');
    expect((await rejection(Server.attach(undefined as never))).code).toBe('INVALID_ARG');
  });
});
