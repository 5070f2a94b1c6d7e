/**
 * Lifetimes and faults: worker threads terminated mid-work, process exit
 * with requests in flight, input buffers detached or shared while Triton
 * reads them, streams left at their end, and a Python stub that dies.
 * (Stopping past the exit timeout is in server.test.ts.)
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { liveObjects, type Server, type TritonError } from '../lib/index.js';
import { MODELS, REPO_ROOT, collectGarbage, rejection, startServer } from './helpers.js';
import { childProcesses, openFileCount, processAlive, stubRegions, threadCount, type ProcessInfo } from './proc.js';

const run = promisify(execFile);
const RUN_TS = resolve(import.meta.dirname, 'fixtures/run-ts.mjs');
const NOTHING_LIVE = { requests: 0, responses: 0, outputBuffers: 0, inputReferences: 0, pending: 0 };

function startWorker(fixture: string): Worker {
  return new Worker(RUN_TS, {
    workerData: { module: resolve(import.meta.dirname, 'fixtures', fixture), modelRepository: MODELS },
  });
}

function nextMessage(worker: Worker): Promise<unknown> {
  return new Promise((resolveMessage, reject) => {
    worker.once('message', resolveMessage);
    worker.once('error', reject);
  });
}

const sleep = (ms: number): Promise<void> => new Promise((resolveSleep) => setTimeout(resolveSleep, ms));

/** Polls until `check` holds or `ms` pass; returns whether it held. */
async function eventually(check: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (check()) return true;
    await sleep(50);
  }
  return check();
}

describe('worker threads', () => {
  it('terminating a worker with a request in flight cancels it and leaks nothing, 20 times', async () => {
    // Warm up what is created once per process (libuv's pool, the loader).
    const first = startWorker('worker-busy.ts');
    await nextMessage(first);
    await first.terminate();
    await collectGarbage();
    const threads = threadCount();
    const files = openFileCount();
    const durations: number[] = [];
    for (let i = 0; i < 20; i++) {
      const worker = startWorker('worker-busy.ts');
      expect(await nextMessage(worker)).toBe('busy');
      await sleep(50);
      const started = Date.now();
      await worker.terminate();
      durations.push(Date.now() - started);
    }
    await collectGarbage();
    // The request would run 30 s and the exit timeout is 30 s: a terminate
    // that waited for either would take that long.
    expect(Math.max(...durations)).toBeLessThan(10_000);
    expect(liveObjects()).toEqual(NOTHING_LIVE);
    expect(await eventually(() => threadCount() <= threads, 5000)).toBe(true);
    expect(openFileCount()).toBeLessThanOrEqual(files);
  }, 180_000);

  it('terminating workers at random points of start, load, infer, stream and stop never takes the process down', async () => {
    let seed = 12345;
    const random = (): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let i = 0; i < 100; i++) {
      const worker = startWorker('worker-churn.ts');
      const errors: unknown[] = [];
      worker.on('error', (error) => errors.push(error));
      if (random() < 0.3) {
        // somewhere in loading tsx, the addon, or Server.start
        await sleep(random() * 400);
      } else {
        await new Promise((resolveGo) => worker.once('message', resolveGo));
        await sleep(random() * 30);
      }
      await worker.terminate();
      expect(errors).toEqual([]);
    }
    await collectGarbage();
    expect(liveObjects()).toEqual(NOTHING_LIVE);
  }, 300_000);
});

describe('stop', () => {
  it('a stopped server leaves none of its threads behind, though its object is still referenced', async () => {
    // What stays once per process (Triton's metrics polling thread, libuv's pool) comes with the first server.
    await (await startServer({ startupModels: ['identity_fp32'] })).stop();
    const threads = threadCount();
    const server = await startServer({ startupModels: ['identity_fp32'] });
    const model = server.model('identity_fp32');
    // Many requests in one tick: the engine hands them to its submitter thread.
    for (let round = 0; round < 5; round++) {
      await Promise.all(Array.from({ length: 32 }, () => model.infer({ inputs: { INPUT0: { shape: [1, 16], data: new Float32Array(16) } } })));
    }
    expect(threadCount()).toBeGreaterThan(threads);
    expect((await server.stop()).complete).toBe(true);
    expect(await eventually(() => threadCount() <= threads, 5000)).toBe(true);
    // Still referenced here: nothing waited for its collection.
    expect(server.attached).toBe(false);
  }, 60_000);
});

describe('process exit', () => {
  it('process.exit() with a Python request in flight leaves no stub process and no shared memory behind', async () => {
    const { stdout } = await run(
      process.execPath,
      ['--import', 'tsx', resolve(import.meta.dirname, 'fixtures/exit-in-flight.ts'), MODELS],
      { cwd: REPO_ROOT, timeout: 60_000 },
    );
    const stubs = JSON.parse(stdout.trim().split('\n').pop() ?? '[]') as ProcessInfo[];
    expect(stubs.length).toBeGreaterThan(0);
    const regions = stubs.flatMap((stub) => stubRegions(stub.cmdline));
    expect(regions.length).toBeGreaterThan(0);
    // An orphaned stub outlives its parent (for good in real Triton).
    expect(await eventually(() => stubs.every((stub) => !processAlive(stub.pid)), 5000)).toBe(true);
    expect(regions.filter((region) => existsSync(region))).toEqual([]);
  }, 90_000);
});

describe('bound models and process exit', () => {
  it('process.exit() while a bound model’s handler holds a batch exits at once, without a hang, a crash or a leftover directory', async () => {
    const started = Date.now();
    // The bound models' repository is made under the child's own temporary directory.
    const temporary = await mkdtemp(join(tmpdir(), 'tsn-exit-bound-'));
    try {
      const { stdout } = await run(
        process.execPath,
        ['--import', 'tsx', resolve(import.meta.dirname, 'fixtures/exit-bound.ts'), MODELS],
        { cwd: REPO_ROOT, timeout: 60_000, env: { ...process.env, TMPDIR: temporary } },
      );
      expect(stdout.trim().split('\n')).toContain('handler running');
      // Well under Triton's exit timeout: nothing waited for the JS thread that was exiting.
      expect(Date.now() - started).toBeLessThan(30_000);
      expect((await readdir(temporary)).filter((entry) => entry.startsWith('tritonserver-node-bound-'))).toEqual([]);
    } finally {
      await rm(temporary, { recursive: true, force: true });
    }
  }, 90_000);

  it('terminating a worker that owns a server while its bound model’s handler holds a batch leaves no directory behind', async () => {
    const temporary = await mkdtemp(join(tmpdir(), 'tsn-worker-bound-'));
    try {
      const worker = new Worker(RUN_TS, {
        workerData: { module: resolve(import.meta.dirname, 'fixtures/worker-owns-bound.ts'), modelRepository: MODELS },
        env: { ...process.env, TMPDIR: temporary },
      });
      const errors: unknown[] = [];
      worker.on('error', (error) => errors.push(error));
      expect(await new Promise((resolveMessage) => worker.once('message', resolveMessage))).toBe('handler running');
      expect((await readdir(temporary)).filter((entry) => entry.startsWith('tritonserver-node-bound-'))).toHaveLength(1);
      await worker.terminate();
      expect(errors).toEqual([]);
      expect((await readdir(temporary)).filter((entry) => entry.startsWith('tritonserver-node-bound-'))).toEqual([]);
    } finally {
      await rm(temporary, { recursive: true, force: true });
    }
  }, 90_000);
});

describe('input memory', () => {
  let server: Server;
  beforeAll(async () => {
    server = await startServer({ startupModels: ['slow', 'identity_fp32', 'repeat_int32'] });
  });
  afterAll(async () => {
    await server.stop();
  });

  it('an input buffer transferred away while its request is queued stays readable: Triton reads the right data', async () => {
    const slow = server.model('slow');
    const busy = slow.infer({ inputs: { INPUT0: new Float32Array(1), DELAY_MS: new Uint32Array([300]) } });
    const input = new Float32Array(1 << 20).fill(1.5);
    const queued = slow.infer({ inputs: { INPUT0: input, DELAY_MS: new Uint32Array([0]) } });
    // Inputs are marked untransferable: transferring copies instead of detaching.
    const copy = structuredClone(input.buffer, { transfer: [input.buffer] });
    expect(input.buffer.byteLength).toBe(4 << 20);
    expect(copy.byteLength).toBe(4 << 20);
    globalThis.gc?.();
    await busy;
    const output = (await queued).outputs.OUTPUT0!.data as Float32Array;
    expect(output.length).toBe(1 << 20);
    expect(output.every((value) => value === 1.5)).toBe(true);
  });

  it('reads inputs over a SharedArrayBuffer', async () => {
    const shared = new Float32Array(new SharedArrayBuffer(16));
    shared.set([1, 2, 3, 4]);
    const response = await server.model('identity_fp32').infer({ inputs: { INPUT0: { shape: [1, 4], data: shared } } });
    expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual([1, 2, 3, 4]);
  });

  it('leaving stream() at its final response leaves no pending entry', async () => {
    for (let i = 0; i < 3000; i++) {
      for await (const response of server.model('identity_fp32').stream({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array([i]) } } })) {
        void response;
        break;
      }
    }
    for (let i = 0; i < 300; i++) {
      // a decoupled model's final flag comes without a response
      for await (const response of server.model('repeat_int32').stream({ inputs: { IN: new Int32Array([i]) } })) void response;
    }
    await collectGarbage();
    expect(liveObjects()).toEqual(NOTHING_LIVE);
  }, 60_000);
});

describe('a Python stub that dies', () => {
  it('fails the model’s requests with Triton’s message until the model is loaded anew', async () => {
    const server = await startServer({ startupModels: ['slow'], exitTimeoutSeconds: 30 });
    try {
      const slow = server.model('slow');
      const stubs = childProcesses(process.pid, 'triton_python_backend_stub').filter((stub) => stub.cmdline.includes('slow'));
      expect(stubs.length).toBe(1);
      const inFlight = rejection(slow.infer({ inputs: { INPUT0: new Float32Array(1), DELAY_MS: new Uint32Array([500]) } }));
      await sleep(50);
      process.kill(stubs[0]!.pid, 'SIGKILL'); // as an OOM kill would
      const error = await inFlight;
      expect(error.code).toBe('INTERNAL');
      expect(error.message).toMatch(/Stub process 'slow_0' is not healthy\./);
      const later = await rejection(slow.infer({ inputs: { INPUT0: new Float32Array(1), DELAY_MS: new Uint32Array([0]) } }));
      expect(later.message).toMatch(/Stub process 'slow_0' is not healthy\./);
      // Unload (without waiting: on real Triton an instance whose stub
      // died never finishes unloading) and load again: a new stub serves.
      await server.unloadModel('slow', { wait: false });
      await server.loadModel('slow');
      const response = await slow.infer({ inputs: { INPUT0: new Float32Array([5]), DELAY_MS: new Uint32Array([0]) } });
      expect(Array.from(response.outputs.OUTPUT0!.data as Float32Array)).toEqual([5]);
    } finally {
      // Bounded, whatever the dead instance does; nothing of ours is left inside.
      const report = await server.stop({ timeoutMs: 2000 });
      expect(report.requestsInside).toBe(0);
    }
  }, 60_000);

  it('stop({ timeoutMs }) keeps its bound while the dead instance never unloads, and frees nothing under Triton', async () => {
    const server = await startServer({ startupModels: ['slow', 'identity_fp32'], exitTimeoutSeconds: 30 });
    const warnings: Error[] = [];
    const onWarning = (warning: Error): void => void warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const stub = childProcesses(process.pid, 'triton_python_backend_stub').find((s) => s.cmdline.includes('slow'));
      expect(stub).toBeDefined();
      process.kill(stub!.pid, 'SIGKILL');
      // Dead before the request is sent (one that reaches it in its last moments may still succeed).
      expect(await eventually(() => !processAlive(stub!.pid), 5000)).toBe(true);
      const error = await rejection(server.model('slow').infer({ inputs: { INPUT0: new Float32Array(1), DELAY_MS: new Uint32Array([0]) } }));
      expect(error.message).toMatch(/Stub process 'slow_0' is not healthy\./);
      const started = Date.now();
      const report = await server.stop({ timeoutMs: 2000 });
      // Triton's own stop needs 10 s or more here (it never unloads the dead
      // instance); stop() returned at its bound instead.
      expect(Date.now() - started).toBeLessThan(8000);
      expect(report.complete).toBe(false);
      expect(report.requestsInside).toBe(0);
      expect(report.message).toMatch(/Triton's stop had not finished unloading the models when stop\(\)'s bound \(2 s\) ran out/);
      await new Promise((resolveTick) => setImmediate(resolveTick));
      expect(warnings.map((w) => w.message)).toContain(report.message);
      expect((await rejection(server.live())).code).toBe('UNAVAILABLE');
      // Triton's stop runs out of its own (at least 10 s) exit timeout in the
      // background and the server is left undeleted: the process goes on.
      await sleep(11_000);
      expect(liveObjects()).toMatchObject({ requests: 0, pending: 0 });
    } finally {
      process.off('warning', onWarning);
    }
  }, 60_000);
});

describe('requests held while thousands of others pass', () => {
  it('requests 4,096 apart, the older still in flight, are each cancelled and released', async () => {
    const server = await startServer({ startupModels: ['slow', 'identity_fp32'] });
    try {
      const slow = server.model('slow');
      const identity = server.model('identity_fp32');
      // Tokens count up by one per infer() call, and the addon and the
      // package index requests in flight by token in 4,096 slots: the second
      // band below shares the first band's slots while the first is held.
      const band = 8;
      const hold = (): { controller: AbortController; error: Promise<TritonError> } => {
        const controller = new AbortController();
        const inputs = { INPUT0: new Float32Array([1]), DELAY_MS: new Uint32Array([30_000]) };
        return { controller, error: rejection(slow.infer({ inputs, signal: controller.signal })) };
      };
      const first = Array.from({ length: band }, hold);
      for (let sent = 0; sent < 4096 - band; sent += 64) {
        const count = Math.min(64, 4096 - band - sent);
        const responses = await Promise.all(
          Array.from({ length: count }, (_, i) => identity.infer({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array([sent + i]) } } })),
        );
        responses.forEach((response, i) => expect((response.outputs.OUTPUT0!.data as Float32Array)[0]).toBe(sent + i));
      }
      const second = Array.from({ length: band }, hold);
      // A request passing by both bands is delivered.
      const passing = await identity.infer({ inputs: { INPUT0: { shape: [1, 1], data: new Float32Array([7]) } } });
      expect(Array.from(passing.outputs.OUTPUT0!.data as Float32Array)).toEqual([7]);
      for (const { controller } of [...second, ...first]) controller.abort();
      for (const { error } of [...first, ...second]) expect((await error).code).toBe('CANCELLED');
      // Triton lets them go within the model's 5 ms steps only if each was
      // found to be cancelled (otherwise each sleeps its 30 s).
      expect(await eventually(() => liveObjects().requests === 0, 10_000)).toBe(true);
      await collectGarbage();
      expect(liveObjects()).toEqual(NOTHING_LIVE);
    } finally {
      const report = await server.stop({ timeoutMs: 2000 });
      expect(report.requestsInside).toBe(0);
    }
  }, 60_000);
});
