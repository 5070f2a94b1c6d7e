// Bound models: TypeScript functions served as Triton models (server.bindModel).
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Server, liveBoundBatches, liveObjects, type BoundOutputs, type BoundRequest } from '../lib/index.js';
import { expectNoRequestsLive, rejection, startServer } from './helpers.js';

const RUN_TS = resolve(import.meta.dirname, 'fixtures/run-ts.mjs');

let server: Server;

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server?.stop();
  expect(liveBoundBatches()).toBe(0);
});

const X4 = { name: 'X', datatype: 'FP32', dims: [4] } as const;
const Y4 = { name: 'Y', datatype: 'FP32', dims: [4] } as const;

function double(requests: BoundRequest[]): BoundOutputs[] {
  return requests.map((r) => ({ Y: (r.inputs.X!.data as Float32Array).map((v) => v * 2) }));
}

/** A promise and the function that resolves it (Promise.withResolvers is Node 22+). */
function signalled(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

async function expectNoBatchesLive(): Promise<void> {
  await vi.waitFor(() => expect(liveBoundBatches()).toBe(0), { timeout: 5000, interval: 20 });
  await expectNoRequestsLive();
}

describe('bindModel', () => {
  it('serves a handler as a Triton model, with its config visible', async () => {
    const model = await server.bindModel({ name: 'ts_double', maxBatchSize: 8, inputs: [X4], outputs: [Y4] }, double);
    try {
      const response = await model.infer({ inputs: { X: { shape: [1, 4], data: new Float32Array([1, 2, 3, 4]) } } });
      expect(response.outputs.Y!.shape).toEqual([1, 4]);
      expect([...(response.outputs.Y!.data as Float32Array)]).toEqual([2, 4, 6, 8]);
      expect(await model.ready()).toBe(true);
      const config = await model.config();
      expect(config.backend).toBe('nodejs');
      expect(config.max_batch_size).toBe(8);
      expect(config.input?.[0]).toMatchObject({ name: 'X', data_type: 'TYPE_FP32', dims: [4] });
      const metadata = await model.metadata();
      expect(metadata.outputs).toEqual([{ name: 'Y', datatype: 'FP32', shape: [-1, 4] }]);
    } finally {
      await server.unbindModel('ts_double');
    }
    expect(await server.model('ts_double').ready()).toBe(false);
    await expectNoBatchesLive();
  });

  it('gets the batches Triton’s dynamic batcher formed, and each caller its own rows', async () => {
    const sizes: number[] = [];
    const model = await server.bindModel(
      {
        name: 'ts_batched',
        maxBatchSize: 64,
        dynamicBatching: { maxQueueDelayMicroseconds: 50_000 },
        inputs: [X4],
        outputs: [Y4],
      },
      (requests, context) => {
        sizes.push(context.batchSize);
        return double(requests);
      },
    );
    try {
      const callers = Array.from({ length: 16 }, (_, i) =>
        model.infer({ inputs: { X: { shape: [1, 4], data: new Float32Array([i, i + 1, i + 2, i + 3]) } } }),
      );
      const responses = await Promise.all(callers);
      responses.forEach((response, i) => expect([...(response.outputs.Y!.data as Float32Array)]).toEqual([2 * i, 2 * i + 2, 2 * i + 4, 2 * i + 6]));
      expect(Math.max(...sizes)).toBeGreaterThan(1);
      const [stats] = await model.statistics();
      expect(stats!.inference_count).toBe(16);
      expect(stats!.execution_count).toBe(sizes.length);
      expect(stats!.execution_count).toBeLessThan(stats!.inference_count);
      expect(stats!.inference_stats.success.count).toBe(16);
    } finally {
      await server.unbindModel('ts_batched');
    }
    await expectNoBatchesLive();
  });

  it('hands large inputs over as views of Triton’s memory, detached when the batch ends; small ones as copies', async () => {
    const kept: Float32Array[] = [];
    const model = await server.bindModel(
      { name: 'ts_sum', inputs: [{ name: 'X', datatype: 'FP32', dims: [-1] }], outputs: [{ name: 'S', datatype: 'FP32', dims: [1] }] },
      (requests) =>
        requests.map((r) => {
          const x = r.inputs.X!.data as Float32Array;
          kept.push(x);
          return { S: new Float32Array([x.reduce((a, b) => a + b, 0)]) };
        }),
    );
    try {
      const large = new Float32Array(16_384).fill(0.5); // 64 KiB
      const small = new Float32Array([1, 2, 3]);
      expect([...((await model.infer({ inputs: { X: large } })).outputs.S!.data as Float32Array)]).toEqual([8192]);
      expect([...((await model.infer({ inputs: { X: small } })).outputs.S!.data as Float32Array)]).toEqual([6]);
      expect(kept[0]!.length).toBe(0); // the view went with the batch
      expect([...kept[1]!]).toEqual([1, 2, 3]); // a copy stays
      expect(large[0]).toBe(0.5); // the caller's memory is untouched
    } finally {
      await server.unbindModel('ts_sum');
    }
    await expectNoBatchesLive();
  });

  it('passes BYTES, parameters, ids and requested outputs through', async () => {
    const seen: BoundRequest[] = [];
    const model = await server.bindModel(
      {
        name: 'ts_upper',
        inputs: [{ name: 'TEXT', datatype: 'BYTES', dims: [-1] }],
        outputs: [
          { name: 'UPPER', datatype: 'BYTES', dims: [-1] },
          { name: 'LENGTH', datatype: 'INT32', dims: [-1] },
        ],
      },
      (requests) => {
        seen.push(...requests.map((r) => ({ ...r, inputs: {} })));
        return requests.map((r) => {
          const words = r.inputs.TEXT!.data as Uint8Array[];
          const text = words.map((w) => new TextDecoder().decode(w));
          return { UPPER: text.map((t) => t.toUpperCase()), LENGTH: new Int32Array(text.map((t) => t.length)) };
        });
      },
    );
    try {
      const response = await model.infer({
        id: 'req-7',
        inputs: { TEXT: ['héllo', 'triton'] },
        outputs: ['UPPER'],
        parameters: { mode: 'fast', n: 3, on: true },
      });
      expect(response.id).toBe('req-7');
      expect((response.outputs.UPPER!.data as Uint8Array[]).map((w) => new TextDecoder().decode(w))).toEqual(['HÉLLO', 'TRITON']);
      expect(response.outputs.LENGTH).toBeUndefined();
      expect(seen[0]).toMatchObject({ id: 'req-7', requestedOutputs: ['UPPER'], parameters: { mode: 'fast', n: 3, on: true } });
      const both = await model.infer({ inputs: { TEXT: ['ab'] } });
      expect([...(both.outputs.LENGTH!.data as Int32Array)]).toEqual([2]);
    } finally {
      await server.unbindModel('ts_upper');
    }
  });

  it('fails the batch with the handler’s error, and keeps serving', async () => {
    let calls = 0;
    const model = await server.bindModel({ name: 'ts_flaky', inputs: [X4], outputs: [Y4] }, async (requests) => {
      calls++;
      if (calls === 1) throw new Error('tokenizer exploded');
      if (calls === 2) return [new Error('this one request is bad')];
      if (calls === 3) return [{ Z: new Float32Array(4) } as BoundOutputs];
      if (calls === 4) return [{ Y: new Float32Array(3) }];
      return double(requests);
    });
    try {
      const request = { inputs: { X: new Float32Array([1, 1, 1, 1]) } };
      const thrown = await rejection(model.infer(request));
      expect(thrown.code).toBe('INTERNAL');
      expect(thrown.message).toContain("bound model 'ts_flaky': tokenizer exploded");
      expect((await rejection(model.infer(request))).message).toContain('this one request is bad');
      expect((await rejection(model.infer(request))).message).toContain("returned output 'Z', which the model does not declare");
      expect((await rejection(model.infer(request))).message).toContain("output 'Y' has 3 elements, which do not fill shape [4]");
      const ok = await model.infer(request);
      expect([...(ok.outputs.Y!.data as Float32Array)]).toEqual([2, 2, 2, 2]);
      const [stats] = await model.statistics();
      expect(stats!.inference_stats.fail.count).toBe(4);
      expect(stats!.inference_stats.success.count).toBe(1);
    } finally {
      await server.unbindModel('ts_flaky');
    }
    await expectNoBatchesLive();
  });

  it('hands cancellation to the handler’s AbortSignal', async () => {
    let aborted: unknown;
    const started = signalled();
    const model = await server.bindModel({ name: 'ts_slow', inputs: [X4], outputs: [Y4] }, async (requests) => {
      started.resolve();
      await new Promise<void>((resolve) => requests[0]!.signal.addEventListener('abort', () => resolve(), { once: true }));
      aborted = requests[0]!.signal.reason;
      return [new Error('gave up')];
    });
    try {
      const controller = new AbortController();
      const pending = model.infer({ inputs: { X: new Float32Array(4) }, signal: controller.signal });
      await started.promise;
      controller.abort();
      expect((await rejection(pending)).code).toBe('CANCELLED');
      await vi.waitFor(() => expect(aborted).toBeDefined());
      expect((aborted as Error).message).toBe('the request was cancelled');
    } finally {
      await server.unbindModel('ts_slow');
    }
    await expectNoBatchesLive();
  });

  it('a request’s timeoutMs reaches the handler’s AbortSignal', async () => {
    let reason: unknown;
    const model = await server.bindModel({ name: 'ts_timeout', inputs: [X4], outputs: [Y4] }, async (requests) => {
      const { signal } = requests[0]!;
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      reason = signal.reason;
      throw signal.reason;
    });
    try {
      const error = await rejection(model.infer({ inputs: { X: new Float32Array(4) }, timeoutMs: 100 }));
      expect(error.code).toBe('CANCELLED');
      await vi.waitFor(() => expect(reason).toBeDefined());
      expect((reason as Error).message).toBe('the request was cancelled');
    } finally {
      await server.unbindModel('ts_timeout');
    }
    await expectNoBatchesLive();
  });

  it('streams a decoupled model’s responses', async () => {
    const model = await server.bindModel(
      {
        name: 'ts_count',
        decoupled: true,
        inputs: [{ name: 'N', datatype: 'INT32', dims: [1] }],
        outputs: [{ name: 'I', datatype: 'INT32', dims: [1] }],
      },
      (requests) =>
        requests.map(async function* (r) {
          const n = (r.inputs.N!.data as Int32Array)[0]!;
          for (let i = 0; i < n; i++) yield { I: new Int32Array([i]) };
        }),
    );
    try {
      const seen: number[] = [];
      for await (const response of model.stream({ inputs: { N: new Int32Array([4]) } })) {
        if (response.outputs.I) seen.push((response.outputs.I.data as Int32Array)[0]!);
      }
      expect(seen).toEqual([0, 1, 2, 3]);
    } finally {
      await server.unbindModel('ts_count');
    }
    await expectNoBatchesLive();
  });

  it('is a step of an ensemble, in front of a C++ model', async () => {
    const repo = await mkdtemp(join(tmpdir(), 'tsn-bound-ensemble-'));
    await mkdir(join(repo, 'ts_then_identity', '1'), { recursive: true });
    await writeFile(
      join(repo, 'ts_then_identity', 'config.pbtxt'),
      `name: "ts_then_identity"
platform: "ensemble"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling { step [
  { model_name: "ts_pre" model_version: -1 input_map { key: "X" value: "X" } output_map { key: "Y" value: "doubled" } },
  { model_name: "identity_fp32" model_version: -1 input_map { key: "INPUT0" value: "doubled" } output_map { key: "OUTPUT0" value: "OUT" } }
] }
`,
    );
    await server.bindModel({ name: 'ts_pre', maxBatchSize: 8, inputs: [X4], outputs: [Y4] }, double);
    await server.loadModel('identity_fp32');
    await server.registerModelRepository(repo);
    try {
      const ensemble = await server.loadModel('ts_then_identity');
      const response = await ensemble.infer({ inputs: { X: { shape: [2, 4], data: new Float32Array([1, 2, 3, 4, 5, 6, 7, 8]) } } });
      expect([...(response.outputs.OUT!.data as Float32Array)]).toEqual([2, 4, 6, 8, 10, 12, 14, 16]);
    } finally {
      await server.unloadModel('ts_then_identity');
      await server.unregisterModelRepository(repo);
      await server.unbindModel('ts_pre');
      await server.unloadModel('identity_fp32');
      await rm(repo, { recursive: true, force: true });
    }
    await expectNoBatchesLive();
  });

  it('unloadModel ends a bound model too; its name can be bound again', async () => {
    await server.bindModel({ name: 'ts_again', inputs: [X4], outputs: [Y4] }, double);
    await server.unloadModel('ts_again');
    expect(await server.model('ts_again').ready()).toBe(false);
    expect((await rejection(server.unbindModel('ts_again'))).code).toBe('NOT_FOUND');
    const again = await server.bindModel({ name: 'ts_again', inputs: [X4], outputs: [Y4] }, (requests) =>
      requests.map(() => ({ Y: new Float32Array([7, 7, 7, 7]) })),
    );
    try {
      expect([...((await again.infer({ inputs: { X: new Float32Array(4) } })).outputs.Y!.data as Float32Array)]).toEqual([7, 7, 7, 7]);
    } finally {
      await server.unbindModel('ts_again');
    }
  });

  it('refuses bad definitions, duplicate names and unknown unbinds', async () => {
    const bad = await rejection(server.bindModel({ name: 'x', inputs: [], outputs: [Y4] }, double));
    expect(bad.code).toBe('INVALID_ARG');
    expect(bad.message).toContain('inputs');
    const batching = await rejection(server.bindModel({ name: 'x', dynamicBatching: true, inputs: [X4], outputs: [Y4] }, double));
    expect(batching.message).toContain('dynamicBatching: needs maxBatchSize > 0');
    const noHandler = await rejection(server.bindModel({ name: 'x', inputs: [X4], outputs: [Y4] }, 'nope' as never));
    expect(noHandler.message).toContain('the handler must be a function');
    await server.bindModel({ name: 'ts_once', inputs: [X4], outputs: [Y4] }, double);
    try {
      const twice = await rejection(server.bindModel({ name: 'ts_once', inputs: [X4], outputs: [Y4] }, double));
      expect(twice.code).toBe('ALREADY_EXISTS');
    } finally {
      await server.unbindModel('ts_once');
    }
    expect((await rejection(server.unbindModel('ts_never'))).code).toBe('NOT_FOUND');
  });

  it('needs explicit model control mode', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'tsn-empty-repo-'));
    const other = await startServer({ modelControlMode: 'none', modelRepository: empty });
    try {
      const error = await rejection(other.bindModel({ name: 'ts_x', inputs: [X4], outputs: [Y4] }, double));
      expect(error.code).toBe('UNSUPPORTED');
      expect(error.message).toContain("needs modelControlMode 'explicit'");
    } finally {
      await other.stop();
      await rm(empty, { recursive: true, force: true });
    }
  });
});

describe('bound model lifetimes', () => {
  it('stop() with a handler running: the request is cancelled, nothing is left', async () => {
    const own = await startServer();
    const started = signalled();
    const model = await own.bindModel({ name: 'ts_stuck', inputs: [X4], outputs: [Y4] }, async (requests) => {
      started.resolve();
      const { signal } = requests[0]!;
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      throw signal.reason;
    });
    const pending = rejection(model.infer({ inputs: { X: new Float32Array(4) } }));
    await started.promise;
    const report = await own.stop({ timeoutMs: 5000 });
    const error = await pending;
    expect(error.code).toBe('CANCELLED');
    expect(report.complete).toBe(true);
    await expectNoBatchesLive();
    expect(liveObjects()).toMatchObject({ requests: 0, responses: 0 });
  });

  it('a handler in a worker thread serves the main thread; terminating the worker fails its batch', async () => {
    const worker = new Worker(RUN_TS, {
      workerData: { module: resolve(import.meta.dirname, 'fixtures/worker-bound.ts'), handle: server.share() },
    });
    const message = await new Promise((resolveMessage) => worker.once('message', resolveMessage));
    expect(message).toBe('bound');
    const model = server.model('ts_worker');
    const response = await model.infer({ inputs: { X: new Float32Array([1, 2, 3, 4]) } });
    expect([...(response.outputs.Y!.data as Float32Array)]).toEqual([101, 102, 103, 104]);
    // A request the worker never answers: terminating the worker ends it.
    const stuck = rejection(model.infer({ inputs: { X: new Float32Array([99, 0, 0, 0]) } }));
    await vi.waitFor(() => expect(liveBoundBatches()).toBe(1));
    await worker.terminate();
    const gone = "bound model 'ts_worker': the JavaScript thread that serves it has ended";
    const error = await stuck;
    expect(error.code).toBe('UNAVAILABLE');
    expect(error.message).toContain(gone);
    // The model is still loaded, with nobody to serve it.
    const later = await rejection(model.infer({ inputs: { X: new Float32Array(4) } }));
    expect(later.message).toContain(gone);
    await server.unloadModel('ts_worker');
    await expectNoBatchesLive();
  });
});
