/**
 * KServe front-end benchmark: NVIDIA's perf_analyzer against serveKServe
 * (HTTP with binary tensors, and gRPC), identity_fp32 with FP32 [1,16] and
 * [1,16384], at concurrency 1, 16 and 64. The baseline, measured in the same
 * run, is the same load through `model.infer()` in-process (no protocol).
 *
 *   npm run bench:kserve                          # test core
 *   TRITONSERVER_LIBRARY=/path/libtritonserver.so npm run bench:kserve
 *
 * perf_analyzer is found through PERF_ANALYZER, PATH, or
 * /tmp/triton-client/install/bin; HTTP runs synchronous, gRPC asynchronous
 * requests, both with binary tensors. Options (env): BENCH_WINDOW_MS (2000),
 * BENCH_CONCURRENCY ("1,16,64"), BENCH_SIZES ("16,16384"), BENCH_PROTOCOLS ("http,grpc").
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { Server } from '../lib/index.js';
import { serveKServe } from '../lib/kserve/index.js';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '..');
process.env.TRITONSERVER_LIBRARY ??= join(root, 'build/testcore/libtritonserver.so');

const windowMs = Number(process.env.BENCH_WINDOW_MS ?? 2000);
const concurrencies = (process.env.BENCH_CONCURRENCY ?? '1,16,64').split(',').map(Number);
const sizes = (process.env.BENCH_SIZES ?? '16,16384').split(',').map(Number);
const protocols = (process.env.BENCH_PROTOCOLS ?? 'http,grpc').split(',') as Array<'http' | 'grpc'>;

function findPerfAnalyzer(): string {
  const candidates = [
    process.env.PERF_ANALYZER,
    ...(process.env.PATH ?? '').split(delimiter).map((dir) => join(dir, 'perf_analyzer')),
    '/tmp/triton-client/install/bin/perf_analyzer',
  ];
  const found = candidates.find((path) => path !== undefined && existsSync(path));
  if (found === undefined) throw new Error('perf_analyzer not found: set PERF_ANALYZER or put it on PATH');
  return found;
}

interface Result {
  throughput: number;
  p99us: number;
}

/** One perf_analyzer run; its CSV gives throughput and p99. */
async function perfAnalyzer(binary: string, protocol: 'http' | 'grpc', url: string, size: number, concurrency: number): Promise<Result> {
  const dir = await mkdtemp(join(tmpdir(), 'bench-kserve-'));
  try {
    const csv = join(dir, 'out.csv');
    const libDir = join(dirname(dirname(binary)), 'lib');
    await run(
      binary,
      [
        '-m', 'identity_fp32', '-u', url, '-i', protocol, '--shape', `INPUT0:${size}`,
        // Stability on average latency, loosely (max/min of 3 windows within 10×):
        // on a shared machine tighter bounds never settle. The CSV has p99 anyway.
        '--concurrency-range', String(concurrency), '--measurement-interval', String(windowMs),
        '--stability-percentage', '900', '--max-trials', '10', '-f', csv,
        ...(protocol === 'grpc' ? ['--async'] : []),
      ],
      { env: { ...process.env, LD_LIBRARY_PATH: [libDir, process.env.LD_LIBRARY_PATH ?? ''].join(delimiter) }, maxBuffer: 1 << 24 },
    );
    const [header, row] = (await readFile(csv, 'utf8')).trim().split('\n');
    const columns = (header ?? '').split(',');
    const values = (row ?? '').split(',');
    const column = (name: string): number => Number(values[columns.indexOf(name)]);
    return { throughput: column('Inferences/Second'), p99us: column('p99 latency') };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The baseline: `concurrency` closed loops of model.infer() for one window. */
async function inProcess(server: Server, size: number, concurrency: number): Promise<Result> {
  const model = server.model('identity_fp32');
  const data = new Float32Array(size);
  const latencies: number[] = [];
  const end = performance.now() + windowMs;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const start = performance.now();
        await model.infer({ inputs: { INPUT0: { shape: [1, size], data } } });
        latencies.push(performance.now() - start);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  return {
    throughput: latencies.length / (windowMs / 1000),
    p99us: Math.round((latencies[Math.floor(latencies.length * 0.99)] ?? 0) * 1000),
  };
}

const perf = findPerfAnalyzer();
const server = await Server.start({ modelRepository: join(root, 'test/models'), modelControlMode: 'explicit', log: { info: false } });
await server.loadModel('identity_fp32');
const frontends = await serveKServe(server, { http: { port: 0 }, grpc: { port: 0 } });
console.log(`library: ${server.library.path} (C API ${server.library.major}.${server.library.minor}); perf_analyzer: ${perf}`);
console.log(`window ${windowMs} ms; throughput in infer/s, p99 in µs; ratio = KServe / in-process\n`);
console.log('| protocol | shape | concurrency | infer/s | p99 µs | in-process infer/s | in-process p99 µs | ratio |');
console.log('|---|---|---|---|---|---|---|---|');
try {
  for (const size of sizes) {
    for (const concurrency of concurrencies) {
      const baseline = await inProcess(server, size, concurrency);
      for (const protocol of protocols) {
        const url = `127.0.0.1:${protocol === 'http' ? frontends.http?.port : frontends.grpc?.port}`;
        let cells: string;
        try {
          const result = await perfAnalyzer(perf, protocol, url, size, concurrency);
          cells = `${Math.round(result.throughput)} | ${result.p99us} | ${Math.round(baseline.throughput)} | ${baseline.p99us} | ${(result.throughput / baseline.throughput).toFixed(2)}`;
        } catch (error) {
          cells = `failed: ${((error as { stderr?: string }).stderr ?? String(error)).trim().split('\n').pop()} | | | | `;
        }
        console.log(`| ${protocol} | [1,${size}] | ${concurrency} | ${cells} |`);
      }
    }
  }
} finally {
  await frontends.close();
  await server.stop();
}
