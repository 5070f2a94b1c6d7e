import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { Worker } from 'node:worker_threads';
import { context, trace as otelTrace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Server, Tensor, buildTrace, isTritonError, liveObjects, liveTraces, type InferenceTrace } from '../lib/index.js';
import { exportSpans } from '../lib/observability/tracing.js';
import { MODELS, REPO_ROOT, collectGarbage, startServer } from './helpers.js';

const ORDER = [
  'REQUEST_START',
  'QUEUE_START',
  'COMPUTE_START',
  'COMPUTE_INPUT_END',
  'COMPUTE_OUTPUT_START',
  'COMPUTE_END',
  'REQUEST_END',
];

let server: Server;
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const contextManager = new AsyncLocalStorageContextManager().enable();

beforeAll(async () => {
  context.setGlobalContextManager(contextManager);
  server = await startServer();
  await server.loadModel('identity_fp32');
  await server.loadModel('repeat_int32');
});

afterAll(async () => {
  await server.stop();
  context.disable();
  await provider.shutdown();
});

afterEach(() => exporter.reset());

const request = () => ({ inputs: { INPUT0: Tensor.from(new Float32Array([1, 2, 3]), { shape: [1, 3] }) } });

function expectOrderedTimeline(trace: InferenceTrace): void {
  const times = trace.activities.map((activity) => activity.ns);
  for (let i = 1; i < times.length; i++) expect(times[i]! >= times[i - 1]!, trace.activities[i]!.name).toBe(true);
}

describe('tracing', () => {
  it('is off by default', async () => {
    const response = await server.model('identity_fp32').infer(request());
    expect(response.trace).toBeUndefined();
  });

  it('gives one request’s timeline, complete and ordered, with durations', async () => {
    const before = process.hrtime.bigint();
    const response = await server.model('identity_fp32').infer({ ...request(), trace: true });
    const after = process.hrtime.bigint();
    const trace = response.trace!;
    expect(trace).toBeDefined();
    expect(trace.model).toBe('identity_fp32');
    expect(trace.version).toBe(1);
    expect(trace.parentId).toBe(0n);
    expect(trace.id).toBeGreaterThan(0n);
    expect(trace.children).toEqual([]);
    expect(trace.activities.map((activity) => activity.name)).toEqual(ORDER);
    expectOrderedTimeline(trace);
    // Triton's timestamps are on the clock of process.hrtime.
    expect(trace.activities[0]!.ns >= before && trace.activities.at(-1)!.ns <= after).toBe(true);
    expect(trace.calledNs >= before && trace.calledNs <= trace.activities[0]!.ns).toBe(true);
    expect(trace.callToStartNs).toBe(trace.activities[0]!.ns - trace.calledNs);
    const { total, queue, computeInput, computeInfer, computeOutput } = trace.durations;
    for (const value of [total, queue, computeInput, computeInfer, computeOutput]) expect(value! >= 0n).toBe(true);
    expect(total).toBe(trace.activities[6]!.ns - trace.activities[0]!.ns);
    expect(queue! + computeInput! + computeInfer! + computeOutput! <= total!).toBe(true);
    // Its outputs are the untraced ones.
    expect([...(response.outputs.OUTPUT0!.data as Float32Array)]).toEqual([1, 2, 3]);
  });

  it('waits for the trace in a process that has nothing else to wait for, then exits', async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', resolve(import.meta.dirname, 'fixtures/traced-infer.ts'), MODELS],
      { cwd: REPO_ROOT, timeout: 30_000 },
    );
    expect(stdout.trim()).toBe(ORDER.join(','));
  });

  it('works in a worker thread that exits without stopping or deleting anything', async () => {
    const worker = new Worker(resolve(import.meta.dirname, 'fixtures/run-ts.mjs'), {
      workerData: { module: resolve(import.meta.dirname, 'fixtures/worker-observability.ts'), modelRepository: MODELS },
    });
    const message = await new Promise((resolveMessage, reject) => {
      worker.once('message', resolveMessage);
      worker.once('error', reject);
    });
    expect(message).toEqual({ counter: 3, inText: true, activities: 7 });
    expect(await new Promise((resolveExit) => worker.once('exit', resolveExit))).toBe(0);
  });

  it('traces concurrent requests each on its own, and frees every request', async () => {
    const model = server.model('identity_fp32');
    const responses = await Promise.all(Array.from({ length: 16 }, () => model.infer({ ...request(), trace: true })));
    const ids = new Set(responses.map((response) => response.trace!.id));
    expect(ids.size).toBe(16);
    for (const response of responses) expect(response.trace!.activities.map((a) => a.name)).toEqual(ORDER);
    await collectGarbage();
    expect(liveObjects().requests).toBe(0);
    // Each trace was deleted once its release callback came.
    expect(liveTraces()).toBe(0);
  });

  it('a traced request Triton refuses frees its trace (the model went away after its metadata was read)', async () => {
    const own = await startServer({ startupModels: ['identity_int32'] });
    const other = await Server.attach(own.share());
    try {
      const input = { inputs: { INPUT0: { shape: [1, 2], data: new Int32Array([1, 2]) } } };
      await own.model('identity_int32').infer(input); // metadata now cached
      // Unloaded through another handle: this one still believes it is there.
      await other.unloadModel('identity_int32');
      const failure = await own.model('identity_int32').infer({ ...input, trace: true }).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(isTritonError(failure)).toBe(true);
      expect(['NOT_FOUND', 'UNAVAILABLE', 'INVALID_ARG']).toContain((failure as { code: string }).code);
      expect(liveTraces()).toBe(0);
    } finally {
      await other.stop();
      await own.stop();
    }
  });

  it('traces a stream: the trace goes to onTrace', async () => {
    let delivered!: (trace: InferenceTrace) => void;
    const traced = new Promise<InferenceTrace>((resolve) => (delivered = resolve));
    let calls = 0;
    const values: number[] = [];
    for await (const response of server.model('repeat_int32').stream({
      inputs: { IN: new Int32Array([7, 8]), DELAY_MS: new Uint32Array([0]) },
      trace: {
        onTrace: (trace) => {
          calls++;
          delivered(trace);
        },
      },
    })) {
      values.push((response.outputs.OUT!.data as Int32Array)[0]!);
    }
    expect(values).toEqual([7, 8]);
    // The FINAL flag came without a response, so no response carries it.
    const trace = await traced;
    expect(calls).toBe(1);
    expect(trace.model).toBe('repeat_int32');
    const names = trace.activities.map((activity) => activity.name);
    expect(names[0]).toBe('REQUEST_START');
    expect(names.at(-1)).toBe('REQUEST_END');
    expectOrderedTimeline(trace);
  });

  it('exports the timeline as spans under the caller’s active span', async () => {
    const tracer = provider.getTracer('test');
    const handler = tracer.startSpan('POST /predict');
    const response = await context.with(otelTrace.setSpan(context.active(), handler), () =>
      server.model('identity_fp32').infer({ ...request(), trace: { tracer } }),
    );
    handler.end();
    const spans = exporter.getFinishedSpans();
    const byName = new Map(spans.map((span) => [span.name, span]));
    expect([...byName.keys()].sort()).toEqual(
      ['POST /predict', 'compute_infer', 'compute_input', 'compute_output', 'queue', 'triton identity_fp32'].sort(),
    );
    const root = byName.get('POST /predict')!;
    const triton = byName.get('triton identity_fp32')!;
    expect(triton.parentSpanContext?.spanId).toBe(root.spanContext().spanId);
    expect(triton.spanContext().traceId).toBe(root.spanContext().traceId);
    expect(triton.attributes).toMatchObject({ 'triton.model': 'identity_fp32', 'triton.model_version': 1 });
    for (const phase of ['queue', 'compute_input', 'compute_infer', 'compute_output']) {
      expect(byName.get(phase)!.parentSpanContext?.spanId, phase).toBe(triton.spanContext().spanId);
    }
    // The span lasts exactly REQUEST_START → REQUEST_END.
    const ns = (time: [number, number]) => BigInt(time[0]) * 1_000_000_000n + BigInt(time[1]);
    expect(ns(triton.endTime) - ns(triton.startTime)).toBe(response.trace!.durations.total);
    const queue = byName.get('queue')!;
    expect(ns(queue.endTime) - ns(queue.startTime)).toBe(response.trace!.durations.queue);
  });
});

describe('ensemble timelines', () => {
  // The records real Triton (r25.07) reported for an ensemble of two identity
  // steps: the ensemble's own trace has REQUEST_START, QUEUE_START and
  // REQUEST_END; each step is a child trace with the full seven activities.
  const step = (id: bigint, t0: bigint) =>
    ORDER.flatMap((_, i) => [id, 1n, 'identity_fp32', 1, i, t0 + BigInt(i) * 10n]);
  const records = [
    ...[1n, 0n, 'ens', 1, 0, 1000n],
    ...[1n, 0n, 'ens', 1, 1, 1005n],
    ...step(2n, 1010n),
    ...step(3n, 1100n),
    ...[1n, 0n, 'ens', 1, 6, 1200n],
  ];

  it('nests each step under the ensemble’s trace', () => {
    const trace = buildTrace(records, 990n);
    expect(trace).toMatchObject({ id: 1n, parentId: 0n, model: 'ens', callToStartNs: 10n, durations: { total: 200n } });
    expect(trace.activities.map((a) => a.name)).toEqual(['REQUEST_START', 'QUEUE_START', 'REQUEST_END']);
    expect(trace.children.map((child) => [child.id, child.parentId, child.model])).toEqual([
      [2n, 1n, 'identity_fp32'],
      [3n, 1n, 'identity_fp32'],
    ]);
    expect(trace.children[1]!.durations).toEqual({ total: 60n, queue: 10n, computeInput: 10n, computeInfer: 10n, computeOutput: 10n });
  });

  it('exports one span tree per step under the ensemble’s span', async () => {
    const api = await import('@opentelemetry/api');
    const tracer = provider.getTracer('test');
    exportSpans(buildTrace(records, 990n), tracer, api, api.context.active());
    const spans = exporter.getFinishedSpans();
    const ensemble = spans.find((span) => span.name === 'triton ens')!;
    const steps = spans.filter((span) => span.name === 'triton identity_fp32');
    expect(steps).toHaveLength(2);
    for (const s of steps) expect(s.parentSpanContext?.spanId).toBe(ensemble.spanContext().spanId);
    const phases = spans.filter((span) => span.parentSpanContext?.spanId === steps[0]!.spanContext().spanId);
    expect(phases.map((span) => span.name).sort()).toEqual(['compute_infer', 'compute_input', 'compute_output', 'queue']);
    // The ensemble has no compute phases of its own.
    expect(spans.filter((span) => span.parentSpanContext?.spanId === ensemble.spanContext().spanId)).toHaveLength(2);
  });
});
