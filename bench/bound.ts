/**
 * Bound-model benchmark: a trivial bound model (`ts_identity`, OUTPUT0 =
 * INPUT0, FP32 [1, 16]) against the same contract in Triton's C++ identity
 * backend (`identity_fp32`, the limit) and in the Python backend
 * (`python_identity_fp32`, the peer), in one process and one sitting,
 * closed-loop callers at each concurrency, the three models alternating.
 * Reports throughput ratios and the JS thread's time per request and per
 * batch (event-loop utilization while the model runs), never pass/fail.
 *
 *   npm run bench:bound                       # test core (build/testcore)
 *   npm run bench:bound -- --library /path/to/libtritonserver.so
 *
 * Options: --concurrency 1,4,16,64  --requests N (per point, default 4000)
 *          --repeats N (median of N runs per point, default 3)  --json out.json
 */
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Server, type Model } from '../lib/index.js';

const ROOT = resolve(import.meta.dirname, '..');

const { values } = parseArgs({
  options: {
    library: { type: 'string' },
    concurrency: { type: 'string', default: '1,4,16,64' },
    requests: { type: 'string', default: '4000' },
    repeats: { type: 'string', default: '3' },
    json: { type: 'string' },
  },
});
const levels = values.concurrency.split(',').map(Number);
const requests = Number(values.requests);
const repeats = Number(values.repeats);
const library = values.library ?? process.env.TRITONSERVER_LIBRARY ?? resolve(ROOT, 'build/testcore/libtritonserver.so');

interface Point {
  rate: number; // requests per second
  jsPerRequestUs: number; // JS thread busy time per request
  jsPerBatchUs: number; // JS thread busy time per execution of the model
  batches: number; // executions
}

const MODELS = ['identity_fp32', 'ts_identity', 'python_identity_fp32'] as const;
type ModelName = (typeof MODELS)[number];

const server = await Server.start({
  libraryPath: library,
  modelRepository: [resolve(ROOT, 'test/models'), resolve(ROOT, 'bench/models')],
  modelControlMode: 'explicit',
  startupModels: ['identity_fp32', 'python_identity_fp32'],
  log: { info: false },
});
await server.bindModel(
  {
    name: 'ts_identity',
    maxBatchSize: 8,
    dynamicBatching: true,
    inputs: [{ name: 'INPUT0', datatype: 'FP32', dims: [-1] }],
    outputs: [{ name: 'OUTPUT0', datatype: 'FP32', dims: [-1] }],
  },
  (batch) => batch.map((request) => ({ OUTPUT0: request.inputs.INPUT0! })),
);

const data = new Float32Array(16).map((_, i) => i);
async function executions(model: Model): Promise<number> {
  return (await model.statistics())[0]!.execution_count;
}

/**
 * The execution count once the requests answered so far are all in it:
 * Triton records an execution's statistics just after its responses go out,
 * so a read right after the last answer can miss it (a loaded machine shows it).
 */
async function settledExecutions(model: Model): Promise<number> {
  let last = await executions(model);
  for (let tries = 0; tries < 100; tries++) {
    await new Promise((resolve) => setTimeout(resolve, 5));
    const now = await executions(model);
    if (now === last) return now;
    last = now;
  }
  return last;
}

async function run(name: ModelName, concurrency: number): Promise<Point> {
  const model = server.model(name);
  const request = { inputs: { INPUT0: { shape: [1, 16], data } } };
  // Warm up, then measure.
  await Promise.all(Array.from({ length: concurrency }, () => model.infer(request)));
  const batchesBefore = await settledExecutions(model);
  let next = 0;
  const elu = performance.eventLoopUtilization();
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < requests) {
        const response = await model.infer(request);
        response.dispose();
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  const busyMs = performance.eventLoopUtilization(elu).active;
  const batches = (await settledExecutions(model)) - batchesBefore;
  return {
    rate: requests / seconds,
    jsPerRequestUs: (busyMs * 1000) / requests,
    jsPerBatchUs: (busyMs * 1000) / Math.max(1, batches),
    batches,
  };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

console.log(`bound-model benchmark — ${new Date().toISOString()} — ${server.library.path}`);
console.log(`${requests} requests of FP32 [1,16] per point, median of ${repeats} runs, models alternating\n`);
const rows: Array<{ concurrency: number; points: Record<ModelName, Point> }> = [];
for (const concurrency of levels) {
  const runs: Record<ModelName, Point[]> = { identity_fp32: [], ts_identity: [], python_identity_fp32: [] };
  for (let r = 0; r < repeats; r++) for (const name of MODELS) runs[name].push(await run(name, concurrency));
  const pick = (name: ModelName): Point => {
    const rate = median(runs[name].map((p) => p.rate));
    return runs[name].find((p) => p.rate === rate)!;
  };
  rows.push({ concurrency, points: { identity_fp32: pick('identity_fp32'), ts_identity: pick('ts_identity'), python_identity_fp32: pick('python_identity_fp32') } });
}

const f = (x: number, digits = 0): string => x.toFixed(digits);
console.log('| C | identity (C++) req/s | bound (TS) req/s | Python req/s | bound / identity | bound / Python | bound JS µs/request | bound JS µs/batch | identity JS µs/request |');
console.log('|---|---|---|---|---|---|---|---|---|');
for (const { concurrency, points } of rows) {
  const { identity_fp32: cpp, ts_identity: ts, python_identity_fp32: py } = points;
  console.log(
    `| ${concurrency} | ${f(cpp.rate)} | ${f(ts.rate)} | ${f(py.rate)} | ${f(ts.rate / cpp.rate, 2)}× | ${f(ts.rate / py.rate, 2)}× | ` +
      `${f(ts.jsPerRequestUs, 1)} | ${f(ts.jsPerBatchUs, 1)} | ${f(cpp.jsPerRequestUs, 1)} |`,
  );
}
if (values.json !== undefined) writeFileSync(values.json, JSON.stringify({ library: server.library, requests, repeats, rows }, null, 2));
await server.stop();
