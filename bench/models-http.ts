/**
 * Real models as services over HTTP: the Flask-to-Triton article's ResNet-50
 * endpoint (POST /predict, a JPEG in, the top-5 out) served by
 *   - the article's Flask app (examples/resnet50/flask_app.py: torch in Python)
 *     in one process, and under gunicorn with one worker per core;
 *   - a Fastify service (examples/resnet50/service.ts) on onnxruntime-node;
 *   - the same service on this package in-process (ONNX Runtime and PyTorch backends);
 *   - the same service on this package's remote client to Triton's own
 *     `tritonserver` (the sidecar), over gRPC.
 * A closed loop of N connections at each count (undici's Pool: one request in
 * flight per connection, a new connection where the server closed one);
 * requests/s, p50 and p99 latency, CPU
 * per request of the serving processes (a service, its workers and, for the
 * sidecar, tritonserver too), and for the Node services the event loop's
 * worst delay while loaded.
 *
 *   /usr/bin/python3 examples/resnet50/make_models.py    # once: the models
 *   TRITONSERVER_LIBRARY=/path/to/lib/libtritonserver.so npm run bench:models-http
 *
 * Options: --concurrency 1,4,16,64  --seconds 10  --services a,b (names below)
 *          --repository DIR  --tritonserver PATH (default: bin/tritonserver beside the library)  --json FILE
 * Reports, never asserts.
 *
 * Not autocannon: Flask's own server (Werkzeug 2.2) closes the connection after
 * every answer, and gunicorn's sync workers do too; autocannon's latency is
 * then wrong by an order of magnitude (p50 1,962 ms at 10.9 requests/s on one
 * connection, where each call took 92 ms measured by a plain loop).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { loadOnnxRuntimeNode } from './onnxruntime-node.js';

const ROOT = resolve(import.meta.dirname, '..');
const LIBRARY = process.env.TRITONSERVER_LIBRARY;
const { values } = parseArgs({
  options: {
    concurrency: { type: 'string', default: '1,4,16,64' },
    seconds: { type: 'string', default: '10' },
    services: { type: 'string' },
    repository: { type: 'string', default: join(ROOT, 'examples/resnet50/model_repository') },
    tritonserver: { type: 'string', default: LIBRARY ? join(dirname(dirname(resolve(LIBRARY))), 'bin', 'tritonserver') : '' },
    json: { type: 'string' },
  },
});
const CONCURRENCY = values.concurrency.split(',').map(Number);
const SECONDS = Number(values.seconds);
const REPOSITORY = resolve(values.repository);
const IMAGE = readFileSync(join(ROOT, 'examples/images/orange.jpg'));
const CORES = availableParallelism();

interface Target {
  name: string;
  /** Started before the service (the sidecar), stopped after it. */
  sidecar?: { command: string; args: string[]; ready: () => Promise<boolean> };
  command: string;
  args: string[];
  env: Record<string, string>;
  /** Printed once the service listens; the URL is read from it. */
  ready: RegExp;
  /** Node services answer GET /debug/event-loop. */
  node: boolean;
}

const service = (name: string, engine: string, env: Record<string, string> = {}): Target => ({
  name,
  command: process.execPath,
  args: ['--import', 'tsx', join(ROOT, 'examples/resnet50/service.ts')],
  env: { PORT: '0', ENGINE: engine, MODEL_REPOSITORY: REPOSITORY, ...env },
  ready: /listening on (http:\/\/\S+)/,
  node: true,
});
const flask = (name: string, args: string[], ready: RegExp): Target => ({
  name,
  command: '/usr/bin/python3',
  args,
  env: { MODEL_REPOSITORY: REPOSITORY, PORT: '5611' },
  ready,
  node: false,
});

const SIDECAR_HTTP = 18620;
const all: Record<string, Target> = {
  flask: flask('Flask, one process (torch in Python)', [join(ROOT, 'examples/resnet50/flask_app.py')], /Running on (http:\/\/127\.0\.0\.1:\d+)/),
  gunicorn: flask(
    `Flask + gunicorn, ${CORES} workers (torch in Python)`,
    ['-m', 'gunicorn', '--chdir', join(ROOT, 'examples/resnet50'), '-w', String(CORES), '-b', '127.0.0.1:5612', 'flask_app:app'],
    /Listening at: (http:\/\/127\.0\.0\.1:\d+)/,
  ),
  'onnxruntime-node': service('Fastify + onnxruntime-node (preprocessing in JS)', 'onnxruntime-node'),
  'triton-onnx': service('Fastify + tritonserver-node in-process, pipeline_onnx (ONNX Runtime)', 'triton-onnx'),
  'triton-pytorch': service('Fastify + tritonserver-node in-process, pipeline (PyTorch)', 'triton-pytorch'),
  remote: {
    ...service('Fastify + tritonserver-node/client → tritonserver (gRPC), pipeline_onnx', 'remote', {
      TRITON_URL: `grpc://127.0.0.1:${SIDECAR_HTTP + 1}`,
    }),
    sidecar: {
      command: values.tritonserver,
      args: [
        `--model-repository=${REPOSITORY}`,
        `--backend-directory=${join(dirname(dirname(values.tritonserver)), 'backends')}`,
        '--model-control-mode=explicit',
        '--load-model=pipeline_onnx',
        `--http-port=${SIDECAR_HTTP}`,
        `--grpc-port=${SIDECAR_HTTP + 1}`,
        `--metrics-port=${SIDECAR_HTTP + 2}`,
        '--log-info=false',
      ],
      ready: async () => (await fetch(`http://127.0.0.1:${SIDECAR_HTTP}/v2/models/pipeline_onnx/ready`).catch(() => undefined))?.status === 200,
    },
  },
};

function available(name: string): string | undefined {
  if (name === 'flask' || name === 'gunicorn') {
    const module = name === 'flask' ? 'flask, torch, PIL' : 'flask, gunicorn, torch, PIL';
    return spawnSync('/usr/bin/python3', ['-c', `import ${module}`]).status === 0 ? undefined : `no ${module} in /usr/bin/python3`;
  }
  if (name === 'onnxruntime-node') return loadOnnxRuntimeNode({ install: true }) ? undefined : 'onnxruntime-node did not install';
  if (name === 'remote' && !existsSync(values.tritonserver)) return `no tritonserver at ${values.tritonserver}`;
  return undefined;
}

/** user+system CPU seconds of a process and all its descendants (Linux /proc). */
function treeCpuSeconds(root: number): number {
  const tick = 100; // USER_HZ on Linux
  const stats = new Map<number, { parent: number; cpu: number }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const text = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
      stats.set(Number(entry), { parent: Number(fields[1]), cpu: (Number(fields[11]) + Number(fields[12])) / tick });
    } catch {
      // the process ended while listed
    }
  }
  let total = 0;
  const visit = (pid: number): void => {
    total += stats.get(pid)?.cpu ?? 0;
    for (const [child, s] of stats) if (s.parent === pid) visit(child);
  };
  visit(root);
  return total;
}

function startService(target: Target): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(target.command, target.args, { env: { ...process.env, ...target.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  return new Promise((resolvePromise, reject) => {
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      const match = target.ready.exec(output);
      if (match) resolvePromise({ child, url: match[1]! });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${target.name} exited (${code}):\n${output.slice(-2000)}`)));
  });
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  await exited;
  clearTimeout(timer);
}

interface Point {
  service: string;
  connections: number;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  cpuMsPerRequest: number;
  loopMaxMs?: number;
}

interface Load {
  requestsPerSecond: number;
  requests: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
}

/** `connections` loops, each posting the image and waiting for the whole answer before the next. */
async function closedLoop(url: string, connections: number, seconds: number): Promise<Load> {
  const { origin, pathname } = new URL(url);
  const pool = new Pool(origin, { connections, pipelining: 1, headersTimeout: 60_000, bodyTimeout: 60_000 });
  const latencies: number[] = [];
  let errors = 0;
  const start = performance.now();
  const end = start + seconds * 1000;
  const loop = async (): Promise<void> => {
    while (performance.now() < end) {
      const sent = performance.now();
      try {
        const answer = await pool.request({ path: pathname, method: 'POST', headers: { 'content-type': 'image/jpeg' }, body: IMAGE });
        await answer.body.arrayBuffer();
        if (answer.statusCode === 200) latencies.push(performance.now() - sent);
        else errors++;
      } catch {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: connections }, loop));
  const elapsed = (performance.now() - start) / 1000;
  await pool.close();
  latencies.sort((a, b) => a - b);
  const at = (q: number): number => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return { requestsPerSecond: latencies.length / elapsed, requests: latencies.length, p50Ms: at(0.5), p99Ms: at(0.99), errors };
}

const names = values.services?.split(',') ?? Object.keys(all);
const points: Point[] = [];
for (const name of names) {
  const target = all[name];
  if (target === undefined) throw new Error(`unknown service ${name}; known: ${Object.keys(all).join(', ')}`);
  const why = available(name);
  if (why !== undefined) {
    console.error(`skipping ${name}: ${why}`);
    continue;
  }
  let sidecar: ChildProcess | undefined;
  if (target.sidecar) {
    sidecar = spawn(target.sidecar.command, target.sidecar.args, { stdio: 'ignore' });
    const deadline = Date.now() + 120_000;
    while (!(await target.sidecar.ready())) {
      if (Date.now() > deadline || sidecar.exitCode !== null) throw new Error('tritonserver did not get ready');
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  const { child, url } = await startService(target);
  try {
    const predict = `${url}/predict`;
    // Listening is not serving: gunicorn's workers load torch and the model after its master listens.
    const deadline = Date.now() + 180_000;
    while ((await fetch(predict, { method: 'POST', headers: { 'content-type': 'image/jpeg' }, body: IMAGE }).catch(() => undefined))?.status !== 200) {
      if (Date.now() > deadline) throw new Error(`${target.name} did not answer /predict`);
      await new Promise((r) => setTimeout(r, 500));
    }
    await closedLoop(predict, 2, 3); // warm-up: first runs allocate and plan
    for (const connections of CONCURRENCY) {
      if (target.node) await fetch(`${url}/debug/event-loop`);
      const cpu0 = treeCpuSeconds(child.pid!) + (sidecar ? treeCpuSeconds(sidecar.pid!) : 0);
      const load = await closedLoop(predict, connections, SECONDS);
      const cpu = treeCpuSeconds(child.pid!) + (sidecar ? treeCpuSeconds(sidecar.pid!) : 0) - cpu0;
      const loop = target.node ? ((await (await fetch(`${url}/debug/event-loop`)).json()) as { maxMs: number }).maxMs : undefined;
      const point: Point = {
        service: target.name,
        connections,
        requestsPerSecond: load.requestsPerSecond,
        p50Ms: load.p50Ms,
        p99Ms: load.p99Ms,
        errors: load.errors,
        cpuMsPerRequest: load.requests > 0 ? (cpu * 1000) / load.requests : NaN,
        loopMaxMs: loop,
      };
      console.error(JSON.stringify(point));
      points.push(point);
    }
  } finally {
    await stopProcess(child);
    if (sidecar) await stopProcess(sidecar);
  }
}

const lines = [
  `POST /predict, ${IMAGE.length}-byte JPEG (200x150), closed loops ${SECONDS} s per row; ${CORES} × ${cpus()[0]?.model ?? 'CPU'}, load average ${loadavg()[0]!.toFixed(1)} at the end.`,
  '',
  '| service | connections | requests/s | p50 ms | p99 ms | errors | CPU ms/request | event loop max ms |',
  '|---|---:|---:|---:|---:|---:|---:|---:|',
  ...points.map(
    (p) =>
      `| ${p.service} | ${p.connections} | ${p.requestsPerSecond.toFixed(1)} | ${p.p50Ms.toFixed(0)} | ${p.p99Ms.toFixed(0)} | ${p.errors} | ${p.cpuMsPerRequest.toFixed(0)} | ${p.loopMaxMs === undefined ? '—' : p.loopMaxMs.toFixed(0)} |`,
  ),
];
console.log(lines.join('\n'));
if (values.json) writeFileSync(values.json, `${JSON.stringify({ seconds: SECONDS, cpus: CORES, points }, null, 2)}\n`);
