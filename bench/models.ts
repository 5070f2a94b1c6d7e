/**
 * Real models, direct calls: this package in-process (Triton's ONNX Runtime
 * backend, three ways of configuring it) beside onnxruntime-node's
 * `session.run` on the same `.onnx` file, and beside the limit, ONNX Runtime
 * alone at its best batch size with no server. Closed loops at each
 * concurrency, engines alternating within a round, medians over rounds.
 *
 *   /usr/bin/python3 examples/resnet50/make_models.py    # once: the models
 *   TRITONSERVER_LIBRARY=/path/to/lib/libtritonserver.so npm run bench:models
 *
 * Options:
 *   --models resnet50,mobilenet_v2   --concurrency 1,4,16,64   --seconds 6
 *   --rounds 2   --repository DIR (make_models.py's output)   --json FILE
 *
 * Needs real Triton with the ONNX Runtime backend beside its library
 * (docs/development.md) and onnxruntime-node (installed on demand into a
 * cache folder: bench/onnxruntime-node.ts). Reports, never asserts.
 */
import { mkdtempSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Server, formatModelConfig, type Model, type ModelConfigInput } from '../lib/index.js';
import { loadOnnxRuntimeNode, ONNXRUNTIME_NODE_VERSION, type OnnxRuntimeNode } from './onnxruntime-node.js';

const ROOT = resolve(import.meta.dirname, '..');
const { values } = parseArgs({
  options: {
    models: { type: 'string', default: 'resnet50,mobilenet_v2' },
    concurrency: { type: 'string', default: '1,4,16,64' },
    seconds: { type: 'string', default: '6' },
    rounds: { type: 'string', default: '2' },
    repository: { type: 'string', default: join(ROOT, 'examples/resnet50/model_repository') },
    json: { type: 'string' },
  },
});
const MODELS = values.models.split(',');
const CONCURRENCY = values.concurrency.split(',').map(Number);
const SECONDS = Number(values.seconds);
const ROUNDS = Number(values.rounds);
const REPOSITORY = resolve(values.repository);
const IMAGE_ELEMENTS = 3 * 224 * 224;

/** One request's work, resolving when its answer is in hand. */
type Call = () => Promise<void>;

interface Engine {
  name: string;
  /** Builds the call for a model, or says why this engine cannot run it. */
  prepare(model: string): Promise<Call>;
}

interface Point {
  model: string;
  engine: string;
  concurrency: number;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  cpuMsPerRequest: number;
  loopMaxMs: number;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** `concurrency` callers, each calling again as soon as its answer is in, for SECONDS. */
async function closedLoop(call: Call, concurrency: number, requestsPerCall: number): Promise<Omit<Point, 'model' | 'engine' | 'concurrency'>> {
  const latencies: number[] = [];
  const delay = monitorEventLoopDelay({ resolution: 5 });
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  const end = start + SECONDS * 1000;
  delay.enable();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        await call();
        latencies.push(performance.now() - t0);
      }
    }),
  );
  delay.disable();
  const elapsed = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const requests = latencies.length * requestsPerCall;
  latencies.sort((a, b) => a - b);
  return {
    requestsPerSecond: requests / elapsed,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    cpuMsPerRequest: (cpu.user + cpu.system) / 1000 / requests,
    loopMaxMs: delay.max / 1e6,
  };
}

/** A model repository of symlinked `.onnx` files, one model per configuration. */
function benchRepository(models: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'tritonserver-node-bench-models-'));
  const variants: Record<string, Partial<ModelConfigInput>> = {
    i1: { instance_group: [{ count: 1, kind: 'KIND_CPU' }] },
    i2: { instance_group: [{ count: 2, kind: 'KIND_CPU' }] },
    // The article's: two instances, dynamic batching (preferred 8/16/32, 500 us).
    batch: {
      instance_group: [{ count: 2, kind: 'KIND_CPU' }],
      dynamic_batching: { preferred_batch_size: [8, 16, 32], max_queue_delay_microseconds: 500 },
    },
  };
  for (const model of models) {
    for (const [suffix, variant] of Object.entries(variants)) {
      const name = `${model}_${suffix}`;
      mkdirSync(join(dir, name, '1'), { recursive: true });
      symlinkSync(join(REPOSITORY, `${model}_onnx`, '1', 'model.onnx'), join(dir, name, '1', 'model.onnx'));
      const config: ModelConfigInput = {
        name,
        backend: 'onnxruntime',
        max_batch_size: 32,
        input: [{ name: 'input__0', data_type: 'TYPE_FP32', dims: [3, 224, 224] }],
        output: [{ name: 'output__0', data_type: 'TYPE_FP32', dims: [1000] }],
        ...variant,
      };
      writeFileSync(join(dir, name, 'config.pbtxt'), formatModelConfig(config));
    }
  }
  return dir;
}

const inputs = readFileSync(join(REPOSITORY, 'reference', 'inputs.f32'));
const image = new Float32Array(inputs.buffer, inputs.byteOffset, IMAGE_ELEMENTS);

const ort: OnnxRuntimeNode =
  loadOnnxRuntimeNode({ install: true }) ??
  ((): never => {
    throw new Error('onnxruntime-node could not be installed');
  })();
const repository = benchRepository(MODELS);
const server = await Server.start({ modelRepository: repository, modelControlMode: 'explicit', log: { info: false } });

const loaded = new Map<string, Model>();
async function tritonCall(name: string): Promise<Call> {
  let model = loaded.get(name);
  if (model === undefined) {
    model = await server.loadModel(name);
    loaded.set(name, model);
  }
  const request = { inputs: { input__0: { shape: [1, 3, 224, 224], data: image } } };
  const ready = model;
  return async () => {
    const response = await ready.infer(request);
    if (response.outputs.output__0 === undefined) throw new Error('no output__0');
  };
}

const sessions = new Map<string, Awaited<ReturnType<OnnxRuntimeNode['InferenceSession']['create']>>>();
async function session(model: string) {
  let s = sessions.get(model);
  if (s === undefined) {
    s = await ort.InferenceSession.create(join(REPOSITORY, `${model}_onnx`, '1', 'model.onnx'));
    sessions.set(model, s);
  }
  return s;
}

const engines: Engine[] = [
  { name: 'tritonserver-node, 1 instance', prepare: (model) => tritonCall(`${model}_i1`) },
  { name: 'tritonserver-node, 2 instances', prepare: (model) => tritonCall(`${model}_i2`) },
  { name: 'tritonserver-node, 2 instances + dynamic batching', prepare: (model) => tritonCall(`${model}_batch`) },
  {
    name: `onnxruntime-node ${ONNXRUNTIME_NODE_VERSION} session.run`,
    prepare: async (model) => {
      const s = await session(model);
      const tensor = new ort.Tensor('float32', image, [1, 3, 224, 224]);
      return async () => {
        await s.run({ input__0: tensor });
      };
    },
  },
];

/** The limit: ONNX Runtime alone, one batch after another, at the batch size that gives the most images/s. */
async function limit(model: string): Promise<{ batch: number; imagesPerSecond: number }> {
  const s = await session(model);
  let best = { batch: 1, imagesPerSecond: 0 };
  for (const batch of [1, 4, 8, 16]) {
    const data = new Float32Array(batch * IMAGE_ELEMENTS);
    for (let i = 0; i < batch; i++) data.set(image, i * IMAGE_ELEMENTS);
    const tensor = new ort.Tensor('float32', data, [batch, 3, 224, 224]);
    await s.run({ input__0: tensor });
    const result = await closedLoop(() => s.run({ input__0: tensor }).then(() => undefined), 1, batch);
    console.error(`limit ${model} batch ${batch}: ${result.requestsPerSecond.toFixed(1)} images/s`);
    if (result.requestsPerSecond > best.imagesPerSecond) best = { batch, imagesPerSecond: result.requestsPerSecond };
  }
  return best;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const points: Point[] = [];
const limits: Record<string, { batch: number; imagesPerSecond: number }> = {};
try {
  for (const model of MODELS) {
    limits[model] = await limit(model);
    const calls = new Map<string, Call>();
    for (const engine of engines) {
      const call = await engine.prepare(model);
      for (let i = 0; i < 4; i++) await call(); // warm-up: first runs allocate and plan
      calls.set(engine.name, call);
    }
    for (const concurrency of CONCURRENCY) {
      const runs = new Map<string, Array<Omit<Point, 'model' | 'engine' | 'concurrency'>>>();
      for (let round = 0; round < ROUNDS; round++) {
        // Alternate which engine goes first, so drift on a shared machine does not favour one.
        const order = round % 2 === 0 ? engines : [...engines].reverse();
        for (const engine of order) {
          const result = await closedLoop(calls.get(engine.name)!, concurrency, 1);
          console.error(
            `${model} C=${concurrency} ${engine.name}: ${result.requestsPerSecond.toFixed(1)}/s p50 ${result.p50Ms.toFixed(1)} ms loop max ${result.loopMaxMs.toFixed(0)} ms`,
          );
          runs.set(engine.name, [...(runs.get(engine.name) ?? []), result]);
        }
      }
      for (const engine of engines) {
        const r = runs.get(engine.name)!;
        points.push({
          model,
          engine: engine.name,
          concurrency,
          requestsPerSecond: median(r.map((x) => x.requestsPerSecond)),
          p50Ms: median(r.map((x) => x.p50Ms)),
          p99Ms: median(r.map((x) => x.p99Ms)),
          cpuMsPerRequest: median(r.map((x) => x.cpuMsPerRequest)),
          loopMaxMs: Math.max(...r.map((x) => x.loopMaxMs)),
        });
      }
    }
  }
} finally {
  await server.stop();
  for (const s of sessions.values()) await s.release();
  rmSync(repository, { recursive: true, force: true });
}

const peer = `onnxruntime-node ${ONNXRUNTIME_NODE_VERSION} session.run`;
const lines = [
  `Direct calls, one image per request (FP32 [1,3,224,224]); ${SECONDS} s per point, median of ${ROUNDS} alternating rounds;`,
  `${cpus().length} × ${cpus()[0]?.model ?? 'CPU'}, load average ${loadavg()[0]!.toFixed(1)} at the end; library ${server.library.path}.`,
  '',
  '| model | engine | C | requests/s | ÷ onnxruntime-node | ÷ limit | p50 ms | p99 ms | CPU ms/request | event loop max ms |',
  '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|',
];
for (const p of points) {
  const base = points.find((q) => q.model === p.model && q.concurrency === p.concurrency && q.engine === peer)!;
  lines.push(
    `| ${p.model} | ${p.engine} | ${p.concurrency} | ${p.requestsPerSecond.toFixed(1)} | ${(p.requestsPerSecond / base.requestsPerSecond).toFixed(2)} | ${(p.requestsPerSecond / limits[p.model]!.imagesPerSecond).toFixed(2)} | ${p.p50Ms.toFixed(1)} | ${p.p99Ms.toFixed(1)} | ${p.cpuMsPerRequest.toFixed(1)} | ${p.loopMaxMs.toFixed(0)} |`,
  );
}
lines.push('');
for (const [model, l] of Object.entries(limits)) {
  lines.push(`Limit, ${model}: ONNX Runtime alone (onnxruntime-node, batches back to back, no server): ${l.imagesPerSecond.toFixed(1)} images/s at batch ${l.batch}.`);
}
console.log(lines.join('\n'));
if (values.json) {
  writeFileSync(values.json, `${JSON.stringify({ seconds: SECONDS, rounds: ROUNDS, cpus: availableParallelism(), limits, points }, null, 2)}\n`);
}
