/**
 * perf_analyzer-style harness: one workload, a concurrency sweep, measured
 * through the binding and through the C++ baseline bench/native_loop.cc on
 * the same libtritonserver.so in the same run. Reports, never asserts (see
 * bench/README.md for every option and what each figure means).
 *
 *   npm run bench -- --scenario small --concurrency 1:64:x2 --json out.json --chart out.svg
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  constants as perfConstants,
  createHistogram,
  monitorEventLoopDelay,
  performance,
  PerformanceObserver,
  type PerformanceEntry,
  type RecordableHistogram,
} from 'node:perf_hooks';
import { parseArgs, promisify } from 'node:util';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { liveObjects, Server, type InferenceRequest, type LiveObjects, type Model } from '../lib/index.js';
import { renderChart } from './chart.js';

const ROOT = resolve(import.meta.dirname, '..');
const MODELS = join(ROOT, 'test', 'models');
const TEST_CORE_DIR = join(ROOT, 'build', 'testcore');
const execFileAsync = promisify(execFile);

// --- options ----------------------------------------------------------------

type DataType = 'FP32' | 'INT32' | 'BYTES';

/** What one request sends; the same for both sides. */
interface Workload {
  model: string;
  input: string;
  datatype: DataType;
  shape: number[];
  /** The model's other required inputs, sent as zeros (e.g. the repeat backend's DELAY and WAIT). */
  zeros: ZeroInput[];
  /** model.stream (decoupled) instead of model.infer. */
  stream: boolean;
  /** Responses each request must yield (checked), or null when unknown. */
  responsesPerRequest: number | null;
  /** --output-buffers: one caller-provided buffer per in-flight slot for `output`, reused. */
  outputBuffers: boolean;
  /** The output those buffers are for (the model's first), or null without --output-buffers. */
  output: string | null;
  /** --dispose: each response's output memory let go at once (response.dispose()). */
  dispose: boolean;
}

interface ZeroInput {
  name: string;
  datatype: string;
  shape: number[];
}

interface Preset {
  model: string;
  shape: number[];
  datatype: DataType;
  concurrency: string;
  requests: number;
  native: boolean;
  soak: boolean;
  outputBuffers: boolean;
  dispose?: boolean;
}

/** The issue's scenarios, one command each (`--scenario NAME`); flags override. */
const SCENARIOS: Record<string, Preset> = {
  small: { model: 'identity_fp32', shape: [1, 16], datatype: 'FP32', concurrency: '1:64:x2', requests: 20_000, native: true, soak: false, outputBuffers: false },
  large: { model: 'identity_fp32', shape: [1, 16_384], datatype: 'FP32', concurrency: '1:64:x2', requests: 5_000, native: true, soak: false, outputBuffers: false },
  // The same 64 KiB workload with the outputs written into reused caller-provided buffers.
  'large-reuse': { model: 'identity_fp32', shape: [1, 16_384], datatype: 'FP32', concurrency: '1:64:x2', requests: 5_000, native: true, soak: false, outputBuffers: true },
  'large-dispose': { model: 'identity_fp32', shape: [1, 16_384], datatype: 'FP32', concurrency: '1:64:x2', requests: 5_000, native: true, soak: false, outputBuffers: false, dispose: true },
  // identity_bytes has max_batch_size 8, so the 32 strings are one batch item's [32].
  bytes: { model: 'identity_bytes', shape: [1, 32], datatype: 'BYTES', concurrency: '1:64:x2', requests: 20_000, native: true, soak: false, outputBuffers: false },
  stream: { model: 'repeat_int32', shape: [64], datatype: 'INT32', concurrency: '1:16:x2', requests: 500, native: true, soak: false, outputBuffers: false },
  // The same stream from Triton's C++ repeat backend, whose thread sends the 64 responses back to back.
  'stream-burst': { model: 'repeat_backend', shape: [64], datatype: 'INT32', concurrency: '1:16:x2', requests: 2_000, native: true, soak: false, outputBuffers: false },
  soak: { model: 'identity_fp32', shape: [1, 16], datatype: 'FP32', concurrency: '16', requests: 1_000_000, native: false, soak: true, outputBuffers: false },
};

/** RSS is sampled when this many requests have completed (and at the end) in a soak. */
const SOAK_FIRST_SAMPLE = 50_000;

/** "1:64:x2" (×2 steps), "1:64:8" (+8 steps), "1,4,16" or "8". */
export function parseSweep(text: string): number[] {
  const fail = (): never => {
    throw new Error(`--concurrency: '${text}' is not N, N,M,..., START:END:xFACTOR or START:END:STEP`);
  };
  const int = (s: string | undefined): number => {
    const n = Number(s);
    if (!Number.isInteger(n) || n < 1) fail();
    return n;
  };
  if (!text.includes(':')) return [...new Set(text.split(',').map(int))];
  const [a, b, step = '1', extra] = text.split(':');
  if (extra !== undefined) fail();
  const start = int(a);
  const end = int(b);
  if (end < start) fail();
  const list: number[] = [];
  if (step.startsWith('x')) {
    const factor = int(step.slice(1));
    if (factor < 2) fail();
    for (let c = start; c <= end; c *= factor) list.push(c);
  } else {
    const add = int(step);
    for (let c = start; c <= end; c += add) list.push(c);
  }
  if (list[list.length - 1] !== end) list.push(end);
  return list;
}

function parseShape(text: string): number[] {
  const shape = text.split(',').map(Number);
  if (shape.length === 0 || shape.some((d) => !Number.isInteger(d) || d < 1)) {
    throw new Error(`--shape: '${text}' is not positive integers separated by commas`);
  }
  return shape;
}

function positive(name: string, text: string | undefined, integer: boolean): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!(n > 0) || (integer && !Number.isInteger(n))) throw new Error(`--${name} needs a positive ${integer ? 'integer' : 'number'}, got '${text}'`);
  return n;
}

// --- inputs -----------------------------------------------------------------

type InputData = Float32Array | Int32Array | string[];

/** The same values bench_native_loop sends: i for numbers, "item-<i>" for BYTES. */
function inputData(datatype: DataType, count: number): InputData {
  if (datatype === 'FP32') return Float32Array.from({ length: count }, (_, i) => i);
  if (datatype === 'INT32') return Int32Array.from({ length: count }, (_, i) => i);
  return Array.from({ length: count }, (_, i) => `item-${i}`);
}

const elementCount = (shape: number[]): number => shape.reduce((a, b) => a * b, 1);

const ZERO_ARRAYS: Record<string, new (length: number) => ArrayBufferView> = {
  BOOL: Uint8Array, UINT8: Uint8Array, UINT16: Uint16Array, UINT32: Uint32Array, UINT64: BigUint64Array,
  INT8: Int8Array, INT16: Int16Array, INT32: Int32Array, INT64: BigInt64Array, FP32: Float32Array, FP64: Float64Array,
};

/** Zeros for each of the model's other required inputs: a -1 dimension takes the first input's size there. */
function zeroInputs(
  metaInputs: ReadonlyArray<{ name: string; datatype: string; shape: number[] }>,
  optional: ReadonlySet<string>,
  shape: number[],
): ZeroInput[] {
  return metaInputs.slice(1).filter((input) => !optional.has(input.name)).map((input) => {
    if (!(input.datatype in ZERO_ARRAYS)) throw new Error(`input ${input.name}: ${input.datatype} zeros are not supported`);
    return { name: input.name, datatype: input.datatype, shape: input.shape.map((d, i) => (d === -1 ? (shape[i] ?? 1) : d)) };
  });
}

/**
 * One request of the workload, issued from in-flight slot `slot` (0 ≤ slot <
 * C; a slot has at most one request in flight); resolves with its number of
 * responses.
 */
type OneRequest = (slot: number) => Promise<number>;

function requestFn(model: Model, w: Workload): OneRequest {
  const data = inputData(w.datatype, elementCount(w.shape));
  const inputs: InferenceRequest['inputs'] = { [w.input]: { shape: w.shape, data } };
  for (const z of w.zeros) inputs[z.name] = { shape: z.shape, data: new ZERO_ARRAYS[z.datatype]!(elementCount(z.shape)) } as never;
  if (w.outputBuffers) {
    if (Array.isArray(data) || w.output === null) throw new Error('--output-buffers needs a numeric output');
    const output = w.output;
    // Identity models: the output has the input's type and byte size.
    const buffers: Array<Float32Array | Int32Array> = [];
    const checked: boolean[] = [];
    return async (slot) => {
      const buffer = (buffers[slot] ??= data instanceof Float32Array ? new Float32Array(data.length) : new Int32Array(data.length));
      const response = await model.infer({ inputs, outputs: { [output]: { data: buffer } } });
      if (!checked[slot]) {
        checkOutputBuffer(w, response.outputs[output]?.data, buffer, data);
        checked[slot] = true;
      }
      return 1;
    };
  }
  if (!w.stream) {
    if (w.dispose) {
      return async () => {
        (await model.infer({ inputs })).dispose();
        return 1;
      };
    }
    return async () => {
      await model.infer({ inputs });
      return 1;
    };
  }
  return async () => {
    let responses = 0;
    for await (const response of model.stream({ inputs })) {
      if (w.dispose) response.dispose();
      responses++;
    }
    if (w.responsesPerRequest !== null && responses !== w.responsesPerRequest) {
      throw new Error(`${w.model}: ${responses} responses, expected ${w.responsesPerRequest}`);
    }
    return responses;
  };
}

/** The first response of each slot: written into the slot's buffer (no copy) and, for identity models, equal to the input. */
function checkOutputBuffer(w: Workload, out: unknown, buffer: Float32Array | Int32Array, input: Float32Array | Int32Array): void {
  if (!ArrayBuffer.isView(out) || out.buffer !== buffer.buffer) {
    throw new Error(`${w.model}: ${w.output} was not written into the caller-provided buffer`);
  }
  if (w.model.startsWith('identity_') && buffer.some((v, i) => v !== input[i])) {
    throw new Error(`${w.model}: ${w.output} (in the caller-provided buffer) is not the input`);
  }
}

/** One request whose output is compared with its input (identity models). */
async function checkIdentity(model: Model, w: Workload): Promise<void> {
  if (w.stream || !w.model.startsWith('identity_')) return;
  const data = inputData(w.datatype, elementCount(w.shape));
  const response = await model.infer({ inputs: { [w.input]: { shape: w.shape, data } } });
  const out = response.outputs.OUTPUT0?.data;
  const expected = Array.isArray(data) ? data.map((s) => Buffer.from(s).toString('hex')) : Array.from(data);
  const got = Array.isArray(out)
    ? out.map((b: Uint8Array) => Buffer.from(b).toString('hex'))
    : out && ArrayBuffer.isView(out)
      ? Array.from(out as Float32Array | Int32Array)
      : null;
  if (!got || got.length !== expected.length || got.some((v, i) => v !== expected[i])) {
    throw new Error(`${w.model}: OUTPUT0 is not the input`);
  }
}

// --- measuring --------------------------------------------------------------

export interface Latency {
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

export interface SideResult {
  requests: number;
  responses: number;
  seconds: number;
  /** Requests per second. */
  throughput: number;
  latencyUs: Latency;
}

export interface NativeResult extends SideResult {
  /** CPU time of the native loop's issuing (main) thread / requests (CLOCK_THREAD_CPUTIME_ID). */
  issuerCpuUsPerRequest: number;
  /** getrusage(RUSAGE_SELF) user + system (all threads, Triton's too) / requests. */
  processCpuUsPerRequest: number;
}

export interface GcKind {
  count: number;
  /** Summed duration of these GCs (the JS thread's pause, wall time), ms. */
  ms: number;
}

/** GCs of the JS thread(s) during the timed part, by kind (PerformanceObserver 'gc' entries). */
export interface GcStats {
  /** Scavenges of the young generation. */
  minor: GcKind;
  /** Mark-compacts (external memory, such as 64 KiB output buffers, triggers these). */
  major: GcKind;
  /** Incremental marking steps. */
  incremental: GcKind;
  /** Weak-callback processing. */
  weakcb: GcKind;
  totalMs: number;
}

export interface BindingResult extends SideResult {
  threads: number;
  /** monitorEventLoopDelay (1 ms resolution) of the main thread during the timed part. */
  eventLoopDelayMs: { p50: number; p99: number; max: number };
  /** performance.eventLoopUtilization of the JS thread(s) during the timed part. */
  eventLoopUtilization: number;
  /**
   * CPU time of the JS thread(s) / requests (Linux: /proc/thread-self/schedstat,
   * summed over the workers' threads with --threads); null elsewhere.
   */
  jsCpuUsPerRequest: number | null;
  /** The same per response (streams: per streamed response). */
  jsCpuUsPerResponse: number | null;
  /**
   * Time the JS thread(s) were runnable but waited for a core / requests
   * (schedstat's run-queue delay); null off Linux.
   */
  jsRunQueueUsPerRequest: number | null;
  /**
   * ELU active time (summed over JS threads) / requests: wall time the JS
   * thread was outside its poll phase, including time it was descheduled.
   */
  eluActiveUsPerRequest: number;
  /** The same per response. */
  eluActiveUsPerResponse: number;
  /** process.cpuUsage (all threads, Triton's too) / requests. */
  processCpuUsPerRequest: number;
  /** With --gc-stats; otherwise null. */
  gc: GcStats | null;
}

export interface Soak {
  requests: number;
  rssAtStartMiB: number;
  rssAt50kMiB: number;
  /** After the last request, sampled as rssAt50kMiB (nothing in flight, full GCs, finalizers run). */
  rssAtEndMiB: number;
  /** rssAtEndMiB − rssAt50kMiB. */
  rssGrowthMiB: number;
  withinTenMiB: boolean;
  /** After the run and the server's last completions, full GCs again. */
  rssIdleAfterGcMiB: number;
  /** [completed requests, RSS MiB] every 50,000 requests. */
  rssSeriesMiB: Array<[number, number]>;
  /** Whether the samples followed a full GC (node --expose-gc). */
  gcBeforeEnd: boolean;
  liveObjects: LiveObjects;
  liveObjectsZero: boolean;
  eventLoopP99Ms: number;
}

export interface Point {
  concurrency: number;
  binding: BindingResult;
  native: NativeResult | null;
  /** binding ÷ native. */
  ratios: { throughput: number; p50Latency: number; p99Latency: number } | null;
  /** binding − native latency (µs): what the binding adds per request. */
  addedLatencyUs: { p50: number; p99: number } | null;
}

function latencyOf(h: RecordableHistogram): Latency {
  // Recorded in ns; reported in µs.
  const us = (ns: number): number => Math.round(ns / 10) / 100;
  return { p50: us(h.percentile(50)), p90: us(h.percentile(90)), p99: us(h.percentile(99)), max: us(h.max), mean: us(h.mean) };
}

const SCHEDSTAT = '/proc/thread-self/schedstat';
const HAS_SCHEDSTAT = process.platform === 'linux' && existsSync(SCHEDSTAT);

interface ThreadTimes {
  /** Time on a CPU, ns. */
  cpuNs: number;
  /** Time runnable on a run queue, waiting for a CPU, ns. */
  runQueueNs: number;
}

/**
 * The calling thread's own scheduler times (Linux), null elsewhere. A sync
 * read runs on the calling thread, so in a worker these are the worker's.
 * The kernel updates them at scheduler events and ticks, so each reading
 * may lag by up to one tick; over a timed part of many requests that is noise.
 */
function threadTimes(): ThreadTimes | null {
  if (!HAS_SCHEDSTAT) return null;
  const [cpu, wait] = readFileSync(SCHEDSTAT, 'latin1').split(' ');
  const cpuNs = Number(cpu);
  const runQueueNs = Number(wait);
  // A kernel without scheduler statistics prints "0 0 0"; a running thread has never run for 0 ns.
  return cpuNs > 0 && Number.isFinite(cpuNs) && Number.isFinite(runQueueNs) ? { cpuNs, runQueueNs } : null;
}

function threadTimesSince(t0: ThreadTimes | null): ThreadTimes | null {
  const t1 = threadTimes();
  return t0 && t1 ? { cpuNs: t1.cpuNs - t0.cpuNs, runQueueNs: t1.runQueueNs - t0.runQueueNs } : null;
}

const emptyGc = (): GcStats => ({
  minor: { count: 0, ms: 0 },
  major: { count: 0, ms: 0 },
  incremental: { count: 0, ms: 0 },
  weakcb: { count: 0, ms: 0 },
  totalMs: 0,
});

const GC_KINDS: Array<[number, 'minor' | 'major' | 'incremental' | 'weakcb']> = [
  [perfConstants.NODE_PERFORMANCE_GC_MINOR, 'minor'],
  [perfConstants.NODE_PERFORMANCE_GC_MAJOR, 'major'],
  [perfConstants.NODE_PERFORMANCE_GC_INCREMENTAL, 'incremental'],
  [perfConstants.NODE_PERFORMANCE_GC_WEAKCB, 'weakcb'],
];

/** Counts this thread's GCs from now until stop() (entries that started in between). */
function recordGc(): { stop: () => Promise<GcStats> } {
  const stats = emptyGc();
  const start = performance.now();
  let end = Infinity;
  const add = (entries: PerformanceEntry[]): void => {
    for (const e of entries) {
      if (e.startTime < start || e.startTime > end) continue;
      const kind = (e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
      const name = GC_KINDS.find(([k]) => k === kind)?.[1];
      if (!name) continue;
      stats[name].count++;
      stats[name].ms += e.duration;
      stats.totalMs += e.duration;
    }
  };
  const observer = new PerformanceObserver((list) => add(list.getEntries()));
  observer.observe({ entryTypes: ['gc'] });
  return {
    stop: async () => {
      end = performance.now();
      // Node queues a GC's entry from a later task; let the last ones arrive.
      await new Promise((done) => setImmediate(done));
      add(observer.takeRecords());
      observer.disconnect();
      return stats;
    },
  };
}

function sumGc(list: Array<GcStats | null>): GcStats | null {
  if (list.some((g) => g === null)) return null;
  const total = emptyGc();
  for (const g of list as GcStats[]) {
    for (const [, name] of GC_KINDS) {
      total[name].count += g[name].count;
      total[name].ms += g[name].ms;
    }
    total.totalMs += g.totalMs;
  }
  return total;
}

/** The progress bar's state; drawn only on a TTY. */
const progress = { label: '', done: 0, total: 0, deadline: 0, started: 0, tty: process.stdout.isTTY === true };

function drawProgress(): void {
  const fraction =
    progress.deadline > 0
      ? (performance.now() - progress.started) / (progress.deadline - progress.started)
      : progress.done / Math.max(1, progress.total);
  const f = Math.min(1, Math.max(0, fraction));
  const width = 30;
  const bar = '#'.repeat(Math.round(f * width)).padEnd(width, '-');
  process.stdout.write(`\r[${bar}] ${String(Math.round(f * 100)).padStart(3)}% ${progress.label}\x1b[K`);
}

function clearProgress(): void {
  if (progress.tty) process.stdout.write('\r\x1b[K');
}

interface Plan {
  requests: number;
  /** Seconds; > 0 replaces the request count. */
  duration: number;
  warmup: number;
  /** --gc-stats: count GCs during each timed part. */
  gcStats: boolean;
}

interface LoopResult {
  requests: number;
  responses: number;
  seconds: number;
}

/** A pause of the whole loop: every `every` completions (and after the last), once nothing is in flight. */
interface Checkpoint {
  every: number;
  run: (completed: number) => Promise<void>;
}

/**
 * At most `concurrency` requests in flight, a completion issues the next,
 * until `plan` is done; each request's latency goes into `h` (ns). Time
 * spent in checkpoints is not counted in `seconds`.
 */
async function closedLoop(
  one: OneRequest,
  concurrency: number,
  plan: { requests: number; duration: number },
  h: RecordableHistogram | null,
  checkpoint?: Checkpoint,
): Promise<LoopResult> {
  let issued = 0;
  let completed = 0;
  let responses = 0;
  let inFlight = 0;
  let pausedMs = 0;
  let gate: Promise<void> | null = null;
  let drained: (() => void) | null = null;
  const start = performance.now();
  const deadline = plan.duration > 0 ? start + plan.duration * 1000 : 0;
  const more = (): boolean => (deadline > 0 ? performance.now() < deadline : issued < plan.requests);
  const pause = async (at: number): Promise<void> => {
    const t0 = performance.now();
    if (inFlight > 0) await new Promise<void>((done) => (drained = done));
    drained = null;
    await checkpoint!.run(at);
    pausedMs += performance.now() - t0;
  };
  const worker = async (slot: number): Promise<void> => {
    for (;;) {
      while (gate) await gate;
      if (!more()) return;
      issued++;
      inFlight++;
      const t0 = performance.now();
      const n = await one(slot);
      responses += n;
      h?.record(Math.max(1, Math.round((performance.now() - t0) * 1e6)));
      inFlight--;
      completed++;
      progress.done = completed;
      if (checkpoint && !gate && (completed % checkpoint.every === 0 || (deadline === 0 && completed === plan.requests))) {
        gate = pause(completed).finally(() => (gate = null));
      }
      if (inFlight === 0) drained?.();
    }
  };
  const lanes = deadline > 0 ? concurrency : Math.min(concurrency, plan.requests);
  await Promise.all(Array.from({ length: lanes }, (_, slot) => worker(slot)));
  return { requests: completed, responses, seconds: (performance.now() - start - pausedMs) / 1000 };
}

const mib = (bytes: number): number => Math.round((bytes / 2 ** 20) * 100) / 100;

async function collectGarbage(): Promise<boolean> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) return false;
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((done) => setImmediate(done));
  }
  return true;
}

async function runBindingPoint(
  model: Model,
  w: Workload,
  concurrency: number,
  plan: Plan,
  soak: boolean,
): Promise<{ result: BindingResult; soak: Soak | null }> {
  const one = requestFn(model, w);
  await closedLoop(one, concurrency, { requests: plan.warmup, duration: 0 }, null);

  const h = createHistogram();
  const delay = monitorEventLoopDelay({ resolution: 1 });
  const rssAtStart = process.memoryUsage.rss();
  let rssAt50k = 0;
  let rssAtLast = 0;
  const series: Array<[number, number]> = [];
  // Each sample with nothing in flight and after full GCs whose finalizers
  // ran, so uncollected garbage and external buffers do not count as growth.
  const checkpoint: Checkpoint | undefined = soak
    ? {
        every: SOAK_FIRST_SAMPLE,
        run: async (completed) => {
          await collectGarbage();
          const rss = process.memoryUsage.rss();
          series.push([completed, mib(rss)]);
          if (completed === SOAK_FIRST_SAMPLE) rssAt50k = rss;
          rssAtLast = rss;
        },
      }
    : undefined;
  delay.enable();
  const gc = plan.gcStats ? recordGc() : null;
  const elu0 = performance.eventLoopUtilization();
  const cpu0 = process.cpuUsage();
  const thread0 = threadTimes();
  const loop = await closedLoop(one, concurrency, plan, h, checkpoint);
  const thread = threadTimesSince(thread0);
  const cpu = process.cpuUsage(cpu0);
  const elu = performance.eventLoopUtilization(elu0);
  delay.disable();
  const gcStats = gc ? await gc.stop() : null;

  const result: BindingResult = {
    ...loop,
    throughput: loop.requests / loop.seconds,
    latencyUs: latencyOf(h),
    threads: 1,
    eventLoopDelayMs: {
      p50: delay.percentile(50) / 1e6,
      p99: delay.percentile(99) / 1e6,
      max: delay.max / 1e6,
    },
    eventLoopUtilization: elu.utilization,
    jsCpuUsPerRequest: thread ? thread.cpuNs / 1000 / loop.requests : null,
    jsCpuUsPerResponse: thread ? thread.cpuNs / 1000 / Math.max(1, loop.responses) : null,
    jsRunQueueUsPerRequest: thread ? thread.runQueueNs / 1000 / loop.requests : null,
    eluActiveUsPerRequest: (elu.active * 1000) / loop.requests,
    eluActiveUsPerResponse: (elu.active * 1000) / Math.max(1, loop.responses),
    processCpuUsPerRequest: (cpu.user + cpu.system) / loop.requests,
    gc: gcStats,
  };
  if (!soak) return { result, soak: null };

  const gcBeforeEnd = await collectGarbage();
  const rssIdle = process.memoryUsage.rss();
  const live = liveObjects();
  const growth = mib(rssAtLast - rssAt50k);
  return {
    result,
    soak: {
      requests: loop.requests,
      rssAtStartMiB: mib(rssAtStart),
      rssAt50kMiB: mib(rssAt50k),
      rssAtEndMiB: mib(rssAtLast),
      rssGrowthMiB: growth,
      withinTenMiB: rssAt50k > 0 && rssAtLast > 0 && Math.abs(growth) <= 10,
      rssIdleAfterGcMiB: mib(rssIdle),
      rssSeriesMiB: series,
      gcBeforeEnd,
      liveObjects: live,
      liveObjectsZero: Object.values(live).every((v) => v === 0),
      eventLoopP99Ms: result.eventLoopDelayMs.p99,
    },
  };
}

// --- worker threads sharing one server (--threads N) -------------------------

interface WorkerInput {
  kind: 'bench-worker';
  handle: unknown;
  workload: Workload;
  concurrency: number;
  plan: Plan;
}

interface WorkerReport {
  latenciesNs: Float64Array;
  requests: number;
  responses: number;
  eluActiveMs: number;
  /** The worker's own thread over its timed part (null off Linux). */
  thread: ThreadTimes | null;
  gc: GcStats | null;
}

type Attach = (handle: unknown) => Server | Promise<Server>;

/**
 * Workers do not inherit tsx's loader from `--import tsx` on Node 20, so
 * each worker registers it before importing this file.
 */
const WORKER_BOOTSTRAP = `import(${JSON.stringify(
  pathToFileURL(createRequire(import.meta.url).resolve('tsx/esm/api')).href,
)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(import.meta.url)}); })`;

/** The lead's shared-server API (server.share() / Server.attach(handle)), when this build has it. */
function sharingApi(server: Server): { share: () => unknown; attach: Attach } | null {
  const attach = (Server as unknown as { attach?: unknown }).attach;
  const share = (server as unknown as { share?: unknown }).share;
  if (typeof attach !== 'function' || typeof share !== 'function') return null;
  return { share: () => (share as () => unknown).call(server), attach: attach as Attach };
}

async function workerMain(input: WorkerInput): Promise<void> {
  const attach = (Server as unknown as { attach?: Attach }).attach;
  if (typeof attach !== 'function') throw new Error('bench worker: Server.attach(handle) is missing');
  const server = await attach.call(Server, input.handle);
  const model = server.model(input.workload.model);
  const one = requestFn(model, input.workload);
  await closedLoop(one, input.concurrency, { requests: input.plan.warmup, duration: 0 }, null);
  const latencies: number[] = [];
  await new Promise<void>((go) => {
    parentPort!.once('message', () => go());
    parentPort!.postMessage('ready');
  });
  const gc = input.plan.gcStats ? recordGc() : null;
  const elu0 = performance.eventLoopUtilization();
  const thread0 = threadTimes();
  let requests = 0;
  let responses = 0;
  const deadline = input.plan.duration > 0 ? performance.now() + input.plan.duration * 1000 : 0;
  const share = Math.ceil(input.plan.requests);
  let issued = 0;
  const lane = async (slot: number): Promise<void> => {
    while (deadline > 0 ? performance.now() < deadline : issued < share) {
      issued++;
      const t0 = performance.now();
      const n = await one(slot);
      responses += n;
      latencies.push((performance.now() - t0) * 1e6);
      requests++;
    }
  };
  await Promise.all(Array.from({ length: input.concurrency }, (_, slot) => lane(slot)));
  const thread = threadTimesSince(thread0);
  const eluActiveMs = performance.eventLoopUtilization(elu0).active;
  const report: WorkerReport = {
    latenciesNs: Float64Array.from(latencies),
    requests,
    responses,
    eluActiveMs,
    thread,
    gc: gc ? await gc.stop() : null,
  };
  parentPort!.postMessage(report, [report.latenciesNs.buffer as ArrayBuffer]);
}

async function runThreadsPoint(
  handle: unknown,
  w: Workload,
  threads: number,
  concurrency: number,
  plan: Plan,
): Promise<BindingResult> {
  if (concurrency < threads) throw new Error(`--threads ${threads} needs a concurrency of at least ${threads}, got ${concurrency}`);
  const workers: Worker[] = [];
  const ready: Array<Promise<void>> = [];
  const reports: Array<Promise<WorkerReport>> = [];
  const exits: Array<Promise<unknown>> = [];
  for (let i = 0; i < threads; i++) {
    // Total in flight stays `concurrency`, split as evenly as it goes.
    const lanes = Math.floor(concurrency / threads) + (i < concurrency % threads ? 1 : 0);
    const input: WorkerInput = {
      kind: 'bench-worker',
      handle,
      workload: w,
      concurrency: lanes,
      plan: { ...plan, requests: Math.max(1, Math.round((plan.requests * lanes) / concurrency)) },
    };
    const worker = new Worker(WORKER_BOOTSTRAP, { eval: true, workerData: input });
    workers.push(worker);
    // Listened for now: a worker may exit before its report is handled.
    exits.push(new Promise((exited) => worker.once('exit', exited)));
    let messages = 0;
    ready.push(new Promise((done, fail) => {
      worker.on('message', () => {
        if (messages++ === 0) done();
      });
      worker.once('error', fail);
    }));
    reports.push(new Promise((done, fail) => {
      worker.on('message', (m: WorkerReport | string) => {
        if (typeof m !== 'string') done(m);
      });
      worker.once('error', fail);
      worker.once('exit', (code) => fail(new Error(`bench worker exited with code ${code} before reporting`)));
    }));
  }
  await Promise.all(ready);
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  for (const worker of workers) worker.postMessage('go');
  const done = await Promise.all(reports);
  const seconds = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  delay.disable();
  await Promise.all(exits);

  const h = createHistogram();
  for (const r of done) for (const ns of r.latenciesNs) h.record(Math.max(1, Math.round(ns)));
  const requests = done.reduce((a, r) => a + r.requests, 0);
  const responses = done.reduce((a, r) => a + r.responses, 0);
  const active = done.reduce((a, r) => a + r.eluActiveMs, 0);
  // Summed over the workers' JS threads; null when any could not read its own.
  const cpuNs = done.every((r) => r.thread) ? done.reduce((a, r) => a + r.thread!.cpuNs, 0) : null;
  const runQueueNs = done.every((r) => r.thread) ? done.reduce((a, r) => a + r.thread!.runQueueNs, 0) : null;
  return {
    requests,
    responses,
    seconds,
    throughput: requests / seconds,
    latencyUs: latencyOf(h),
    threads,
    eventLoopDelayMs: { p50: delay.percentile(50) / 1e6, p99: delay.percentile(99) / 1e6, max: delay.max / 1e6 },
    eventLoopUtilization: active / (seconds * 1000 * threads),
    jsCpuUsPerRequest: cpuNs === null ? null : cpuNs / 1000 / requests,
    jsCpuUsPerResponse: cpuNs === null ? null : cpuNs / 1000 / Math.max(1, responses),
    jsRunQueueUsPerRequest: runQueueNs === null ? null : runQueueNs / 1000 / requests,
    eluActiveUsPerRequest: (active * 1000) / requests,
    eluActiveUsPerResponse: (active * 1000) / Math.max(1, responses),
    processCpuUsPerRequest: (cpu.user + cpu.system) / requests,
    gc: plan.gcStats ? sumGc(done.map((r) => r.gc)) : null,
  };
}

// --- the baseline -----------------------------------------------------------

async function runNativePoint(
  nativeLoop: string,
  library: string,
  backendDirectory: string | undefined,
  w: Workload,
  concurrency: number,
  plan: Plan,
): Promise<NativeResult> {
  const args = [
    library, MODELS,
    '--model', w.model,
    '--input', w.input,
    ...w.zeros.flatMap((z) => ['--zeros', `${z.name}:${z.datatype}:${z.shape.join(',')}`]),
    '--datatype', w.datatype,
    '--shape', w.shape.join(','),
    '--concurrency', String(concurrency),
    '--warmup', String(plan.warmup),
    ...(plan.duration > 0 ? ['--duration', String(plan.duration)] : ['--requests', String(plan.requests)]),
    ...(backendDirectory ? ['--backend-directory', backendDirectory] : []),
  ];
  const { stdout } = await execFileAsync(nativeLoop, args, { maxBuffer: 1 << 20 });
  const r = JSON.parse(stdout.trim().split('\n').pop() ?? '') as {
    requests: number;
    responses: number;
    seconds: number;
    perSecond: number;
    latencyUs: Latency;
    issuerCpuUsPerRequest?: number;
    processCpuUsPerRequest?: number;
  };
  if (typeof r.issuerCpuUsPerRequest !== 'number' || typeof r.processCpuUsPerRequest !== 'number') {
    throw new Error(`native loop ${nativeLoop} prints no CPU times: rebuild it (npm run build:testcore)`);
  }
  if (w.responsesPerRequest !== null && r.responses !== r.requests * w.responsesPerRequest) {
    throw new Error(`native loop: ${r.responses} responses to ${r.requests} requests, expected ${w.responsesPerRequest} each`);
  }
  return {
    requests: r.requests,
    responses: r.responses,
    seconds: r.seconds,
    throughput: r.perSecond,
    latencyUs: r.latencyUs,
    issuerCpuUsPerRequest: r.issuerCpuUsPerRequest,
    processCpuUsPerRequest: r.processCpuUsPerRequest,
  };
}

// --- report -----------------------------------------------------------------

function table(points: Point[], stream: boolean): string {
  const header = [
    'C', 'binding req/s', 'native req/s', 'b/n', 'p50 b / n µs', 'p99 b / n µs', 'max b µs',
    'added p50 µs', 'JS CPU µs/req', ...(stream ? ['JS CPU µs/resp'] : []), 'n issuer CPU µs/req',
    'ELU µs/req', 'proc CPU µs/req b / n', 'EL p99 ms',
  ];
  const f = (v: number | null | undefined, digits = 1): string => (v === undefined || v === null ? '—' : v.toFixed(digits));
  const rate = (v: number | undefined): string => (v === undefined ? '—' : Math.round(v).toLocaleString('en-US'));
  const rows = points.map((p) => [
    String(p.concurrency),
    rate(p.binding.throughput),
    rate(p.native?.throughput),
    p.ratios ? p.ratios.throughput.toFixed(3) : '—',
    `${f(p.binding.latencyUs.p50)} / ${f(p.native?.latencyUs.p50)}`,
    `${f(p.binding.latencyUs.p99)} / ${f(p.native?.latencyUs.p99)}`,
    f(p.binding.latencyUs.max),
    f(p.addedLatencyUs?.p50),
    f(p.binding.jsCpuUsPerRequest, 2),
    ...(stream ? [f(p.binding.jsCpuUsPerResponse, 2)] : []),
    f(p.native?.issuerCpuUsPerRequest, 2),
    f(p.binding.eluActiveUsPerRequest, 2),
    `${f(p.binding.processCpuUsPerRequest, 2)} / ${f(p.native?.processCpuUsPerRequest, 2)}`,
    f(p.binding.eventLoopDelayMs.p99, 2),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]): string => `| ${cells.map((c, i) => c.padStart(widths[i]!)).join(' | ')} |`;
  return [line(header), `|${widths.map((w) => `${'-'.repeat(w + 1)}:`).join('|')}`.concat('|'), ...rows.map(line)].join('\n');
}

/** One line per point: the GCs of the timed part (--gc-stats). */
function gcLine(p: Point): string | null {
  const g = p.binding.gc;
  if (!g) return null;
  const part = (name: string, k: GcKind): string => `${k.count} ${name} (${k.ms.toFixed(1)} ms)`;
  const share = (g.totalMs / (p.binding.seconds * 1000 * p.binding.threads)) * 100;
  return `GC C=${p.concurrency}: ${part('minor', g.minor)}, ${part('major', g.major)}, ${part('incremental', g.incremental)}, ` +
    `${part('weak-callback', g.weakcb)}; ${g.totalMs.toFixed(1)} ms in all, ${share.toFixed(1)} % of the timed part` +
    ` (${((g.major.count + g.minor.count) / (p.binding.requests / 1000)).toFixed(2)} minor + major per 1000 requests)`;
}

export interface Summary {
  /** JS-thread CPU time per request at the highest concurrency (schedstat; null off Linux): the issue's target. */
  jsCpuUsPerRequestAtMaxC: number | null;
  /** The native loop's issuing-thread CPU time per request at the highest concurrency. */
  nativeIssuerCpuUsPerRequestAtMaxC: number | null;
  /** ELU active time per request at the highest concurrency (includes time the JS thread was descheduled). */
  eluActiveUsPerRequestAtMaxC: number;
  maxConcurrency: number;
  /** binding p50 − native p50 at C=1, when C=1 was measured with the baseline. */
  addedLatencyUsAtC1: number | null;
  throughputRatioAtMaxC: number | null;
  /** JS-thread CPU time per response at the highest concurrency (streams). */
  jsCpuUsPerResponseAtMaxC: number | null;
  /** ELU active time per response at the highest concurrency (streams). */
  eluActiveUsPerResponseAtMaxC: number;
  /** The worst event-loop p99 of the sweep. */
  eventLoopP99MsMax: number;
}

function summarize(points: Point[]): Summary {
  const last = points[points.length - 1]!;
  const c1 = points.find((p) => p.concurrency === 1);
  return {
    jsCpuUsPerRequestAtMaxC: last.binding.jsCpuUsPerRequest,
    nativeIssuerCpuUsPerRequestAtMaxC: last.native?.issuerCpuUsPerRequest ?? null,
    eluActiveUsPerRequestAtMaxC: last.binding.eluActiveUsPerRequest,
    maxConcurrency: last.concurrency,
    addedLatencyUsAtC1: c1?.addedLatencyUs?.p50 ?? null,
    throughputRatioAtMaxC: last.ratios?.throughput ?? null,
    jsCpuUsPerResponseAtMaxC: last.binding.jsCpuUsPerResponse,
    eluActiveUsPerResponseAtMaxC: last.binding.eluActiveUsPerResponse,
    eventLoopP99MsMax: Math.max(...points.map((p) => p.binding.eventLoopDelayMs.p99)),
  };
}

// --- main -------------------------------------------------------------------

const USAGE = `usage: npm run bench -- [--scenario small|large|large-reuse|large-dispose|bytes|stream|stream-burst|soak] [--model NAME]
  [--shape D0,D1,..] [--datatype FP32|INT32|BYTES] [--batch N] [--concurrency 1:64:x2]
  [--requests N | --duration S] [--warmup N] [--library PATH] [--native-loop PATH]
  [--backend-directory DIR] [--no-native] [--threads N] [--output-buffers] [--dispose] [--gc-stats]
  [--json FILE] [--chart FILE]`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      scenario: { type: 'string' },
      model: { type: 'string' },
      shape: { type: 'string' },
      datatype: { type: 'string' },
      batch: { type: 'string' },
      concurrency: { type: 'string' },
      duration: { type: 'string' },
      requests: { type: 'string' },
      warmup: { type: 'string' },
      library: { type: 'string' },
      'native-loop': { type: 'string' },
      'backend-directory': { type: 'string' },
      'no-native': { type: 'boolean', default: false },
      threads: { type: 'string' },
      'output-buffers': { type: 'boolean' },
      dispose: { type: 'boolean' },
      'gc-stats': { type: 'boolean', default: false },
      json: { type: 'string' },
      chart: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const scenarioName = values.scenario ?? (values.model ? 'custom' : 'small');
  const preset = SCENARIOS[scenarioName] ?? (values.model ? SCENARIOS.small : undefined);
  if (!preset) throw new Error(`--scenario: '${scenarioName}' is not one of ${Object.keys(SCENARIOS).join(', ')}\n${USAGE}`);
  const modelName = values.model ?? preset.model;
  const shape = values.shape ? parseShape(values.shape) : [...preset.shape];
  const batch = positive('batch', values.batch, true);
  if (batch !== undefined) shape[0] = batch; // the first dimension is the batch
  const sweep = parseSweep(values.concurrency ?? preset.concurrency);
  const duration = positive('duration', values.duration, false) ?? 0;
  const requests = positive('requests', values.requests, true) ?? preset.requests;
  const warmup = values.warmup !== undefined ? Number(values.warmup) : Math.min(2_000, Math.max(50, Math.round(requests / 10)));
  if (!Number.isInteger(warmup) || warmup < 0) throw new Error(`--warmup needs an integer >= 0, got '${values.warmup}'`);
  const threads = positive('threads', values.threads, true) ?? 0;
  const plan: Plan = { requests, duration, warmup, gcStats: values['gc-stats'] };
  const outputBuffers = values['output-buffers'] ?? preset.outputBuffers;
  const dispose = values.dispose ?? preset.dispose ?? false;

  const library = resolve(values.library ?? process.env.TRITONSERVER_LIBRARY ?? join(TEST_CORE_DIR, 'libtritonserver.so'));
  if (!existsSync(library)) throw new Error(`library not found: ${library} (npm run build:testcore, or --library PATH)`);
  // Server.start's default: <root>/backends beside <root>/lib/libtritonserver.so; the baseline gets the same.
  const besideBackends = join(dirname(dirname(library)), 'backends');
  const backendDirectory = values['backend-directory'] ?? (existsSync(besideBackends) ? besideBackends : undefined);
  const withNative = preset.native && !values['no-native'];
  const nativeLoop = resolve(
    values['native-loop'] ??
      process.env.BENCH_NATIVE_LOOP ??
      [join(dirname(library), 'bench_native_loop'), join(TEST_CORE_DIR, 'bench_native_loop')].find((p) => existsSync(p)) ??
      join(TEST_CORE_DIR, 'bench_native_loop'),
  );
  if (withNative && !existsSync(nativeLoop)) {
    throw new Error(`native loop not found: ${nativeLoop} (npm run build:testcore, --native-loop PATH, or --no-native)`);
  }

  const load0 = loadavg();
  const machine = {
    node: process.version,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    loadAverageAtStart: load0.map((v) => Math.round(v * 100) / 100),
  };
  const log = (text: string): void => {
    clearProgress();
    console.log(text);
  };
  log(`tritonserver-node perf — ${new Date().toISOString()} — scenario ${scenarioName}`);
  log(`node ${machine.node}, ${machine.cpus} × ${machine.cpuModel}, load average ${machine.loadAverageAtStart.join(' ')}`);
  log(`library ${library}${withNative ? `\nnative loop ${nativeLoop}` : ' (no native baseline)'}`);

  const server = await Server.start({
    modelRepository: MODELS,
    modelControlMode: 'explicit',
    log: { info: false },
    libraryPath: library,
    ...(values['backend-directory'] ? { backendDirectory: values['backend-directory'] } : {}),
  });
  let ticker: NodeJS.Timeout | undefined;
  try {
    const model = await server.loadModel(modelName);
    const meta = await model.metadata();
    const input = meta.inputs[0];
    if (!input) throw new Error(`${modelName} has no inputs`);
    const datatype = (values.datatype ?? (values.model ? input.datatype : preset.datatype)) as DataType;
    if (!['FP32', 'INT32', 'BYTES'].includes(datatype)) throw new Error(`--datatype: ${datatype} is not FP32, INT32 or BYTES`);
    const decoupled = (await model.transactionProperties()).decoupled;
    const output = meta.outputs[0];
    if (outputBuffers) {
      if (decoupled) throw new Error(`--output-buffers: ${modelName} is decoupled (model.stream); the option is for model.infer of identity models`);
      if (!output) throw new Error(`--output-buffers: ${modelName} has no outputs`);
      if (datatype === 'BYTES' || output.datatype === 'BYTES') {
        throw new Error(
          `--output-buffers: ${modelName} sends or returns BYTES, whose output size is known only from the response; ` +
            'the option needs a numeric (FP32 or INT32) identity model, whose output has the input\'s byte size',
        );
      }
    }
    const w: Workload = {
      model: modelName,
      input: input.name,
      datatype,
      shape,
      zeros: zeroInputs(meta.inputs, new Set((await model.config()).input?.filter((i) => i.optional).map((i) => i.name)), shape),
      stream: decoupled,
      // The repeat models answer once per element; for other models the count is not known.
      responsesPerRequest: modelName === 'repeat_int32' || modelName === 'repeat_backend' ? elementCount(shape) : decoupled ? null : 1,
      outputBuffers,
      output: outputBuffers ? output!.name : null,
      dispose,
    };
    log(`workload ${w.model} ${w.input} ${w.datatype} [${w.shape.join(', ')}]${w.stream ? ' (stream)' : ''}, ` +
      `C ${sweep.join(' ')}, ${duration > 0 ? `${duration} s` : `${requests} requests`} per point, warm-up ${warmup}` +
      (threads > 0 ? `, ${threads} worker threads sharing the server` : '') +
      (outputBuffers ? `, ${w.output} into a caller-provided buffer per in-flight slot` : '') +
      (dispose ? ', each response disposed at once' : ''));
    await checkIdentity(model, w);

    let handle: unknown;
    if (threads > 0) {
      const api = sharingApi(server);
      if (!api) {
        throw new Error(
          '--threads needs the shared-server API — server.share() and Server.attach(handle) — ' +
            'which this build of tritonserver-node does not have',
        );
      }
      handle = api.share();
    }

    if (progress.tty) ticker = setInterval(drawProgress, 200);
    const points: Point[] = [];
    let soak: Soak | null = null;
    for (const c of sweep) {
      let native: NativeResult | null = null;
      if (withNative) {
        progress.label = `C=${c} native`;
        native = await runNativePoint(nativeLoop, library, backendDirectory, w, c, plan);
      }
      progress.label = `C=${c} binding`;
      progress.done = 0;
      progress.total = requests;
      progress.started = performance.now();
      progress.deadline = duration > 0 ? progress.started + duration * 1000 : 0;
      let binding: BindingResult;
      if (threads > 0) {
        binding = await runThreadsPoint(handle, w, threads, c, plan);
      } else {
        const r = await runBindingPoint(model, w, c, plan, preset.soak);
        binding = r.result;
        soak = r.soak ?? soak;
      }
      const point: Point = {
        concurrency: c,
        binding,
        native,
        ratios: native
          ? {
              throughput: binding.throughput / native.throughput,
              p50Latency: binding.latencyUs.p50 / native.latencyUs.p50,
              p99Latency: binding.latencyUs.p99 / native.latencyUs.p99,
            }
          : null,
        addedLatencyUs: native
          ? { p50: binding.latencyUs.p50 - native.latencyUs.p50, p99: binding.latencyUs.p99 - native.latencyUs.p99 }
          : null,
      };
      points.push(point);
      if (!progress.tty) {
        log(`C=${c}: binding ${Math.round(binding.throughput)} req/s p99 ${binding.latencyUs.p99} µs` +
          (binding.jsCpuUsPerRequest !== null ? ` JS CPU ${binding.jsCpuUsPerRequest.toFixed(2)} µs/req` : '') +
          (native ? `; native ${Math.round(native.throughput)} req/s p99 ${native.latencyUs.p99} µs` : ''));
      }
    }
    if (ticker) clearInterval(ticker);
    ticker = undefined;
    const load1 = loadavg().map((v) => Math.round(v * 100) / 100);
    const summary = summarize(points);

    log('');
    log(table(points, w.stream));
    for (const p of points) {
      const line = gcLine(p);
      if (line) log(line);
    }
    log(
      '\nb/n: binding ÷ native throughput. added p50: binding p50 − native p50 latency. ' +
        'JS CPU µs/req: CPU time of the JS thread(s) ÷ requests (/proc/thread-self/schedstat; — off Linux). ' +
        'n issuer CPU µs/req: the same for the native loop\'s issuing thread. ' +
        'ELU µs/req: event-loop-utilization active time ÷ requests (wall time, counts time the JS thread was runnable but descheduled). ' +
        'proc CPU: all threads of each process (Triton\'s too) ÷ requests. EL p99: event-loop delay p99 of the main thread.',
    );
    const us = (v: number | null): string => (v === null ? '—' : v.toFixed(2));
    log(
      `summary: JS-thread CPU ${us(summary.jsCpuUsPerRequestAtMaxC)} µs/request at C=${summary.maxConcurrency}` +
        (summary.nativeIssuerCpuUsPerRequestAtMaxC !== null ? ` (native issuing thread ${us(summary.nativeIssuerCpuUsPerRequestAtMaxC)})` : '') +
        `, ELU active ${us(summary.eluActiveUsPerRequestAtMaxC)} µs/request` +
        (summary.addedLatencyUsAtC1 !== null ? `, added latency at C=1 ${summary.addedLatencyUsAtC1.toFixed(1)} µs` : '') +
        (summary.throughputRatioAtMaxC !== null ? `, throughput ratio at C=${summary.maxConcurrency} ${summary.throughputRatioAtMaxC.toFixed(3)}` : '') +
        (w.stream
          ? `, JS-thread CPU ${us(summary.jsCpuUsPerResponseAtMaxC)} µs (ELU active ${us(summary.eluActiveUsPerResponseAtMaxC)} µs) per streamed response`
          : '') +
        `, event-loop p99 ≤ ${summary.eventLoopP99MsMax.toFixed(2)} ms`,
    );
    if (soak) {
      log(
        `soak: ${soak.requests} requests; RSS ${soak.rssAt50kMiB} MiB at ${SOAK_FIRST_SAMPLE}, ${soak.rssAtEndMiB} MiB at the end ` +
          `(${soak.rssGrowthMiB >= 0 ? '+' : ''}${soak.rssGrowthMiB} MiB, ${soak.withinTenMiB ? 'within' : 'NOT within'} 10 MiB` +
          `${soak.gcBeforeEnd ? `, each with nothing in flight after full GCs` : ', no --expose-gc: no GC before the samples'}); live objects ${JSON.stringify(soak.liveObjects)}` +
          ` (${soak.liveObjectsZero ? 'all 0' : 'NOT all 0'}); event-loop p99 ${soak.eventLoopP99Ms.toFixed(2)} ms`,
      );
    }
    log(`load average at the end: ${load1.join(' ')} (other processes share these cores)`);

    if (values.json) {
      const report = {
        date: new Date().toISOString(),
        scenario: scenarioName,
        machine: { ...machine, loadAverageAtEnd: load1 },
        library,
        nativeLoop: withNative ? nativeLoop : null,
        workload: w,
        options: { concurrency: sweep, requests, duration, warmup, threads, outputBuffers, dispose, gcStats: plan.gcStats },
        points,
        summary,
        soak,
      };
      writeFileSync(values.json, `${JSON.stringify(report, null, 2)}\n`);
      log(`wrote ${values.json}`);
    }
    if (values.chart) {
      const series = [
        { name: 'binding', color: '#d62728', points: points.map((p) => ({ concurrency: p.concurrency, throughput: p.binding.throughput, p99Us: p.binding.latencyUs.p99 })) },
        ...(withNative
          ? [{ name: 'native (C API)', color: '#1f77b4', points: points.map((p) => ({ concurrency: p.concurrency, throughput: p.native!.throughput, p99Us: p.native!.latencyUs.p99 })) }]
          : []),
      ];
      writeFileSync(
        values.chart,
        renderChart(`${w.model} ${w.datatype} [${w.shape.join(', ')}] — throughput vs p99 latency`, series),
      );
      log(`wrote ${values.chart}`);
    }
  } finally {
    if (ticker) clearInterval(ticker);
    clearProgress();
    await server.stop();
  }
}

if (!isMainThread && (workerData as { kind?: string } | null)?.kind === 'bench-worker') {
  workerMain(workerData as WorkerInput).catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
} else if (isMainThread) {
  main().catch((error: unknown) => {
    clearProgress();
    console.error(error instanceof Error ? error.message : error);
    process.exitCode = 1;
  });
}
