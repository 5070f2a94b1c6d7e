/**
 * Inference benchmark: the binding (`model.infer`, `model.stream`) against
 * the C++ baseline bench/native_loop.cc running the same workload on the
 * same libtritonserver.so and the same model repository, measured in the
 * same run. Reports ratios, never pass/fail (see bench/README.md).
 *
 *   npm run bench:ratios                 # full run
 *   npm run bench:ratios -- --quick      # short run (a tenth of the requests)
 *
 * Options:
 *   --quick              a tenth of the requests per scenario
 *   --repeats N          runs per side and scenario, median reported (default 3)
 *   --library PATH       libtritonserver.so (default: TRITONSERVER_LIBRARY,
 *                        else build/testcore/libtritonserver.so)
 *   --native-loop PATH   the baseline executable (default: BENCH_NATIVE_LOOP,
 *                        else bench_native_loop beside the library, else
 *                        build/testcore/bench_native_loop)
 *   --no-event-loop      skip the event-loop delay measurement
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { parseArgs, promisify } from 'node:util';
import { Server, type Model } from '../lib/index.js';

const ROOT = resolve(import.meta.dirname, '..');
const MODELS = join(ROOT, 'test', 'models');
const TEST_CORE_DIR = join(ROOT, 'build', 'testcore');
/** A model that loads and unloads while the event loop is watched. */
const CYCLE_MODEL = 'add_sub';

interface Scenario {
  /** Label in the table. */
  name: string;
  model: 'identity_fp32' | 'repeat_int32';
  /** identity_fp32: elements of the [1, E] input; repeat_int32: responses per request. */
  elements: number;
  concurrency: number;
  requests: number;
  warmup: number;
}

interface NativeResult {
  model: string;
  requests: number;
  elements: number;
  concurrency: number;
  responses: number;
  seconds: number;
  perSecond: number;
}

interface Row {
  scenario: Scenario;
  native: number;
  binding: number;
  nativeRuns: number[];
  bindingRuns: number[];
}

const execFileAsync = promisify(execFile);

function scenarios(quick: boolean): Scenario[] {
  const scale = quick ? 0.1 : 1;
  const n = (count: number): number => Math.max(100, Math.round(count * scale));
  const list: Array<Omit<Scenario, 'name' | 'warmup'>> = [
    { model: 'identity_fp32', elements: 16, concurrency: 1, requests: n(20_000) },
    { model: 'identity_fp32', elements: 16, concurrency: 64, requests: n(20_000) },
    { model: 'identity_fp32', elements: 16_384, concurrency: 1, requests: n(5_000) },
    { model: 'identity_fp32', elements: 16_384, concurrency: 64, requests: n(5_000) },
    { model: 'repeat_int32', elements: 16, concurrency: 1, requests: n(2_000) },
    { model: 'repeat_int32', elements: 16, concurrency: 16, requests: n(2_000) },
  ];
  return list.map((s) => ({
    ...s,
    name:
      s.model === 'identity_fp32'
        ? `infer  identity_fp32 E=${s.elements} C=${s.concurrency}`
        : `stream repeat_int32 ×${s.elements} C=${s.concurrency}`,
    warmup: Math.max(50, Math.round(s.requests / 10)),
  }));
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

// --- the baseline -----------------------------------------------------------

async function runNative(nativeLoop: string, library: string, s: Scenario): Promise<number> {
  const args = [
    library,
    MODELS,
    '--model', s.model,
    '--requests', String(s.requests),
    '--elements', String(s.elements),
    '--concurrency', String(s.concurrency),
    '--warmup', String(s.warmup),
  ];
  const { stdout } = await execFileAsync(nativeLoop, args, { maxBuffer: 1 << 20 });
  const line = stdout.trim().split('\n').pop() ?? '';
  const result = JSON.parse(line) as NativeResult;
  const expected = s.model === 'repeat_int32' ? s.requests * s.elements : s.requests;
  if (result.responses !== expected) {
    throw new Error(`native loop: ${result.responses} responses, expected ${expected}`);
  }
  return result.perSecond;
}

// --- the binding ------------------------------------------------------------

/** Runs `count` requests with at most `concurrency` in flight; returns seconds. */
async function runWorkload(concurrency: number, count: number, one: () => Promise<void>): Promise<number> {
  let issued = 0;
  const worker = async (): Promise<void> => {
    while (issued < count) {
      issued++;
      await one();
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return (performance.now() - start) / 1000;
}

function bindingRequest(model: Model, s: Scenario): () => Promise<void> {
  if (s.model === 'identity_fp32') {
    const data = Float32Array.from({ length: s.elements }, (_, i) => i);
    const shape = [1, s.elements];
    return async () => {
      await model.infer({ inputs: { INPUT0: { shape, data } } });
    };
  }
  const data = Int32Array.from({ length: s.elements }, (_, i) => i);
  return async () => {
    let responses = 0;
    for await (const _response of model.stream({ inputs: { IN: data } })) responses++;
    if (responses !== s.elements) throw new Error(`stream: ${responses} responses, expected ${s.elements}`);
  };
}

/** One request, its output compared with the input: the workload does what it says. */
async function checkOutputs(model: Model, s: Scenario): Promise<void> {
  if (s.model !== 'identity_fp32') return; // repeat_int32 counts its responses on every request
  const data = Float32Array.from({ length: s.elements }, (_, i) => i);
  const response = await model.infer({ inputs: { INPUT0: { shape: [1, s.elements], data } } });
  const output = response.outputs.OUTPUT0?.data;
  if (!(output instanceof Float32Array) || output.length !== data.length || output.some((v, i) => v !== data[i])) {
    throw new Error(`${s.model}: OUTPUT0 is not the input`);
  }
}

async function runBinding(model: Model, s: Scenario): Promise<number> {
  const one = bindingRequest(model, s);
  await runWorkload(s.concurrency, s.warmup, one);
  const seconds = await runWorkload(s.concurrency, s.requests, one);
  return s.requests / seconds;
}

// --- event-loop delay -------------------------------------------------------

interface LoopDelay {
  cycles: number;
  seconds: number;
  maxMs: number;
  p99Ms: number;
  idleMaxMs: number;
  idleP99Ms: number;
}

/** Load/unload cycles until both minimums are reached, the event loop watched throughout. */
async function measureLoopDelay(server: Server, minCycles: number, minSeconds: number): Promise<LoopDelay> {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  const start = performance.now();
  let cycles = 0;
  while (cycles < minCycles || performance.now() - start < minSeconds * 1000) {
    await server.loadModel(CYCLE_MODEL);
    await server.unloadModel(CYCLE_MODEL);
    cycles++;
  }
  const seconds = (performance.now() - start) / 1000;
  histogram.disable();
  const busy = { maxMs: histogram.max / 1e6, p99Ms: histogram.percentile(99) / 1e6 };

  // Baseline: the same histogram over an idle event loop for as long.
  histogram.reset();
  histogram.enable();
  await new Promise((done) => setTimeout(done, Math.max(50, seconds * 1000)));
  histogram.disable();
  return {
    cycles,
    seconds,
    ...busy,
    idleMaxMs: histogram.max / 1e6,
    idleP99Ms: histogram.percentile(99) / 1e6,
  };
}

// --- report -----------------------------------------------------------------

function formatRate(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}

/** Half the range of the runs, relative to their median: how far to trust one row. */
function spread(runs: number[]): string {
  return `±${Math.round(((Math.max(...runs) - Math.min(...runs)) / 2 / median(runs)) * 100)}%`;
}

function printTable(rows: Row[]): void {
  const header = ['scenario', 'requests', 'native req/s', 'binding req/s', 'binding/native', 'overhead µs/req', 'spread n / b'];
  const lines = rows.map((row) => [
    row.scenario.name,
    String(row.scenario.requests),
    formatRate(row.native),
    formatRate(row.binding),
    (row.binding / row.native).toFixed(3),
    (1e6 / row.binding - 1e6 / row.native).toFixed(2),
    `${spread(row.nativeRuns)} / ${spread(row.bindingRuns)}`,
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const format = (cells: string[]): string =>
    `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
  console.log(format(header));
  console.log(`|${widths.map((w, i) => (i === 0 ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`);
  for (const line of lines) console.log(format(line));
}

// --- main -------------------------------------------------------------------

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      repeats: { type: 'string', default: '3' },
      library: { type: 'string' },
      'native-loop': { type: 'string' },
      'no-event-loop': { type: 'boolean', default: false },
    },
  });
  const repeats = Number(values.repeats);
  if (!Number.isInteger(repeats) || repeats < 1) throw new Error('--repeats needs a positive integer');
  const library = resolve(
    values.library ?? process.env.TRITONSERVER_LIBRARY ?? join(TEST_CORE_DIR, 'libtritonserver.so'),
  );
  const nativeLoop = resolve(
    values['native-loop'] ??
      process.env.BENCH_NATIVE_LOOP ??
      [join(dirname(library), 'bench_native_loop'), join(TEST_CORE_DIR, 'bench_native_loop')].find((p) =>
        existsSync(p),
      ) ??
      join(TEST_CORE_DIR, 'bench_native_loop'),
  );
  for (const [what, path] of [
    ['library', library],
    ['native loop', nativeLoop],
  ] as const) {
    if (!existsSync(path)) {
      throw new Error(
        `${what} not found: ${path}\n` +
          'Build both with `npm run build:testcore` (or pass --library / --native-loop).',
      );
    }
  }

  const list = scenarios(values.quick);
  console.log(`tritonserver-node inference benchmark — ${new Date().toISOString()}`);
  console.log(
    `node ${process.version}, ${cpus().length} × ${cpus()[0]?.model.trim() ?? 'unknown CPU'}, ` +
      `load average ${loadavg()[0]!.toFixed(2)}, ${repeats} run(s) per side, median shown` +
      (values.quick ? ', --quick' : ''),
  );
  console.log(`library:     ${library}`);
  console.log(`native loop: ${nativeLoop}\n`);

  const server = await Server.start({
    modelRepository: MODELS,
    modelControlMode: 'explicit',
    log: { info: false },
    libraryPath: library,
  });
  try {
    const models = new Map<string, Model>();
    for (const name of new Set(list.map((s) => s.model))) models.set(name, await server.loadModel(name));

    // Compile the JS path once (V8 tiers up over the first thousands of
    // calls) so the first scenario is not measured on cold code.
    for (const s of list) await runWorkload(s.concurrency, s.warmup, bindingRequest(models.get(s.model)!, s));

    const rows: Row[] = [];
    for (const s of list) {
      const model = models.get(s.model)!;
      await checkOutputs(model, s);
      const nativeRuns: number[] = [];
      const bindingRuns: number[] = [];
      // Alternate the sides so drift (clock, heat, neighbours) hits both.
      for (let i = 0; i < repeats; i++) {
        nativeRuns.push(await runNative(nativeLoop, library, s));
        bindingRuns.push(await runBinding(model, s));
      }
      const row = { scenario: s, native: median(nativeRuns), binding: median(bindingRuns), nativeRuns, bindingRuns };
      rows.push(row);
      process.stderr.write(
        `${s.name}: native ${nativeRuns.map(formatRate).join(' / ')}, ` +
          `binding ${bindingRuns.map(formatRate).join(' / ')} req/s\n`,
      );
    }
    console.log('');
    printTable(rows);
    console.log(
      '\nbinding/native: throughput ratio (1 = as fast as the C API used directly). ' +
        'overhead: 1/binding − 1/native per request. spread: ±half the range of the runs / median.',
    );
    console.log(`load average at the end: ${loadavg()[0]!.toFixed(2)}`);

    if (!values['no-event-loop']) {
      const delay = await measureLoopDelay(server, values.quick ? 5 : 20, values.quick ? 0.25 : 1);
      console.log(
        `\nevent-loop delay while ${CYCLE_MODEL} loads and unloads (${delay.cycles} cycles, ` +
          `${delay.seconds.toFixed(2)} s): max ${delay.maxMs.toFixed(2)} ms, p99 ${delay.p99Ms.toFixed(2)} ms; ` +
          `idle loop for as long: max ${delay.idleMaxMs.toFixed(2)} ms, p99 ${delay.idleP99Ms.toFixed(2)} ms`,
      );
    }
  } finally {
    await server.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
