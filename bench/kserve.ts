/**
 * KServe front-end benchmark: NVIDIA's perf_analyzer against serveKServe
 * (HTTP with binary tensors, and gRPC), identity_fp32 with FP32 [1,16] and
 * [1,16384], at concurrency 1, 16 and 64. Baselines, measured in the same
 * run: the same load through `model.infer()` in-process (no protocol), and,
 * when TRITONSERVER_BINARY names Triton's own `tritonserver`, perf_analyzer
 * against that server (same library, models and machine), alternating with
 * serveKServe point by point.
 *
 *   npm run bench:kserve                          # test core
 *   TRITONSERVER_LIBRARY=/path/libtritonserver.so npm run bench:kserve
 *   TRITONSERVER_LIBRARY=/path/lib/libtritonserver.so TRITONSERVER_BINARY=/path/bin/tritonserver \
 *     TRITON_BACKEND_DIRECTORY=/path/backends npm run bench:kserve
 *
 * serveKServe runs from the built package (dist/, `npm run build:ts`, which
 * `npm run bench:kserve` does first): what users run, not the sources
 * through tsx, whose transform adds calls of its own to every closure.
 *
 * perf_analyzer is found through PERF_ANALYZER, PATH, or
 * /tmp/triton-client/install/bin; HTTP runs synchronous, gRPC asynchronous
 * requests, both with binary tensors; `http` and `grpc` are serveKServe's
 * `node` engines, `http-native` and `grpc-native` its `native` ones. Options
 * (env): BENCH_WINDOW_MS (2000), BENCH_CONCURRENCY ("1,16,64"), BENCH_SIZES
 * ("16,16384"), BENCH_PROTOCOLS ("http,http-native,grpc,grpc-native"),
 * BENCH_TLS_DIR (a folder with ca.pem, server.pem and server.key, the
 * server's certificate for 127.0.0.1): every listener serves TLS with them,
 * perf_analyzer verifies them (`--ssl-grpc-*`, `--ssl-https-*`), and
 * tritonserver serves gRPC with `--grpc-use-ssl` (its HTTP front end has no
 * TLS: HTTPS rows have no tritonserver column then), BENCH_COMPRESSION
 * (gzip or deflate: perf_analyzer compresses its gRPC requests with
 * `--grpc-compression-algorithm`; with BENCH_RESPONSE_COMPRESSION=1 the
 * servers compress their answers too: serveKServe's `responseCompression`,
 * tritonserver's `--grpc-infer-response-compression-level=high`).
 * At [1,16384] and concurrency 16 perf_analyzer itself falls behind (it
 * keeps every response's outputs and sorts them out per window, in time
 * quadratic in a window's records): measure that point alone with
 * BENCH_WINDOW_MS=500 (gRPC) or 250 (HTTP).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { pathToFileURL } from 'node:url';
import type { Server as ServerType } from '../lib/index.js';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '..');
process.env.TRITONSERVER_LIBRARY ??= join(root, 'build/testcore/libtritonserver.so');

if (!existsSync(join(root, 'dist/kserve.js'))) throw new Error('dist/ is not built: run `npm run build:ts` (npm run bench:kserve does)');
const { Server } = (await import(pathToFileURL(join(root, 'dist/index.js')).href)) as typeof import('../lib/index.js');
const { serveKServe } = (await import(pathToFileURL(join(root, 'dist/kserve.js')).href)) as typeof import('../lib/kserve/index.js');

const windowMs = Number(process.env.BENCH_WINDOW_MS ?? 2000);
const concurrencies = (process.env.BENCH_CONCURRENCY ?? '1,16,64').split(',').map(Number);
const sizes = (process.env.BENCH_SIZES ?? '16,16384').split(',').map(Number);
// http, grpc: the `node` engines; http-native, grpc-native: the `native` ones (same handlers behind them).
const protocols = (process.env.BENCH_PROTOCOLS ?? 'http,http-native,grpc,grpc-native').split(',') as Array<'http' | 'http-native' | 'grpc' | 'grpc-native'>;
const tlsDir = process.env.BENCH_TLS_DIR;
const compression = process.env.BENCH_COMPRESSION as 'gzip' | 'deflate' | undefined;
const responseCompression = compression !== undefined && process.env.BENCH_RESPONSE_COMPRESSION === '1' ? compression : 'none';
const tls = tlsDir === undefined ? undefined : { key: await readFile(join(tlsDir, 'server.key')), cert: await readFile(join(tlsDir, 'server.pem')), ca: join(tlsDir, 'ca.pem') };

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
    const secure = tls === undefined ? [] : protocol === 'grpc'
      ? ['--ssl-grpc-use-ssl', '--ssl-grpc-root-certifications-file', tls.ca]
      : ['--ssl-https-verify-peer', '1', '--ssl-https-verify-host', '2', '--ssl-https-ca-certificates-file', tls.ca];
    await run(
      binary,
      [
        '-m', 'identity_fp32', '-u', tls !== undefined && protocol === 'http' ? `https://${url}` : url, '-i', protocol, '--shape', `INPUT0:${size}`,
        ...secure,
        ...(compression !== undefined && protocol === 'grpc' ? ['--grpc-compression-algorithm', compression] : []),
        // Stability on average latency, loosely (max/min of 3 windows within 10×):
        // on a shared machine tighter bounds never settle. The CSV has p99 anyway.
        '--concurrency-range', String(concurrency), '--measurement-interval', String(windowMs),
        '--stability-percentage', '900', '--max-trials', '10', '-f', csv,
        ...(protocol === 'grpc' ? ['--async'] : []),
      ],
      { env: { ...process.env, LD_LIBRARY_PATH: [libDir, process.env.LD_LIBRARY_PATH ?? ''].join(delimiter) }, maxBuffer: 1 << 24 },
    ).catch(async (error: unknown) => {
      // perf_analyzer r25.07 crashes as it exits after a run over TLS, its CSV written (TRITON_FACTS.md).
      if ((await readFile(csv, 'utf8').catch(() => '')).trim().split('\n').length < 2) throw error;
    });
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
async function inProcess(server: ServerType, size: number, concurrency: number): Promise<Result> {
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

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((done) => probe.listen(0, '127.0.0.1', done));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((done) => probe.close(() => done()));
  return port;
}

interface Tritonserver {
  child: ChildProcess;
  http: number;
  grpc: number;
}

/** Triton's own server over the same model repository, once its model is ready. */
async function startTritonserver(binary: string, libraryPath: string): Promise<Tritonserver> {
  const [http, grpc, metrics] = [await freePort(), await freePort(), await freePort()];
  const backends = process.env.TRITON_BACKEND_DIRECTORY ?? join(dirname(dirname(libraryPath)), 'backends');
  const child = spawn(
    binary,
    [
      `--model-repository=${join(root, 'test/models')}`, `--backend-directory=${backends}`, '--model-control-mode=explicit',
      '--load-model=identity_fp32', `--http-port=${http}`, `--grpc-port=${grpc}`, `--metrics-port=${metrics}`,
      '--http-address=127.0.0.1', '--grpc-address=127.0.0.1', '--metrics-address=127.0.0.1', '--log-info=false',
      ...(responseCompression === 'none' ? [] : ['--grpc-infer-response-compression-level=high']),
      ...(tlsDir === undefined ? [] : ['--grpc-use-ssl=true', `--grpc-server-cert=${join(tlsDir, 'server.pem')}`, `--grpc-server-key=${join(tlsDir, 'server.key')}`, `--grpc-root-cert=${join(tlsDir, 'ca.pem')}`]),
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`tritonserver exited with ${child.exitCode}`);
    try {
      if ((await fetch(`http://127.0.0.1:${http}/v2/models/identity_fp32/ready`)).ok) return { child, http, grpc };
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error('tritonserver did not get identity_fp32 ready within 60 s');
    }
    await new Promise((done) => setTimeout(done, 250));
  }
}

const cell = async (run: () => Promise<Result>): Promise<Result | string> => {
  try {
    return await run();
  } catch (error) {
    return `failed: ${((error as { stderr?: string }).stderr ?? String(error)).trim().split('\n').pop()}`;
  }
};
const show = (result: Result | string): string =>
  typeof result === 'string' ? `${result} | ` : `${Math.round(result.throughput)} | ${result.p99us}`;
const ratio = (ours: Result | string, theirs: Result | string): string =>
  typeof ours === 'string' || typeof theirs === 'string' ? '' : (ours.throughput / theirs.throughput).toFixed(2);

const perf = findPerfAnalyzer();
const server = await Server.start({ modelRepository: join(root, 'test/models'), modelControlMode: 'explicit', log: { info: false } });
await server.loadModel('identity_fp32');
const serving = tls === undefined ? {} : { tls: { key: tls.key, cert: tls.cert } };
const frontends = await serveKServe(server, { http: { port: 0, engine: 'node', ...serving }, grpc: { port: 0, engine: 'node', responseCompression, ...serving } });
const natives = await serveKServe(server, { http: { port: 0, engine: 'native', ...serving }, grpc: { port: 0, engine: 'native', responseCompression, ...serving } });
const binary = process.env.TRITONSERVER_BINARY;
const triton = binary === undefined ? undefined : await startTritonserver(binary, server.library.path);
console.log(`library: ${server.library.path} (C API ${server.library.major}.${server.library.minor}); perf_analyzer: ${perf}`);
if (binary !== undefined) console.log(`tritonserver: ${binary}`);
if (tlsDir !== undefined) console.log(`TLS: ${tlsDir} (tritonserver: gRPC only)`);
if (compression !== undefined) console.log(`gRPC requests compressed: ${compression}; answers: ${responseCompression}`);
console.log(`window ${windowMs} ms; throughput in infer/s, p99 in µs; each ratio is serveKServe's throughput over the other's\n`);
const headings = ['protocol', 'shape', 'concurrency', 'serveKServe infer/s', 'p99 µs', 'in-process infer/s', 'p99 µs', '÷ in-process'];
if (triton !== undefined) headings.push('tritonserver infer/s', 'p99 µs', '÷ tritonserver');
console.log(`| ${headings.join(' | ')} |`);
console.log(`|${headings.map(() => '---|').join('')}`);
try {
  for (const size of sizes) {
    for (const concurrency of concurrencies) {
      const baseline = await inProcess(server, size, concurrency);
      for (const protocol of protocols) {
        const port = { http: frontends.http?.port, 'http-native': natives.http?.port, grpc: frontends.grpc?.port, 'grpc-native': natives.grpc?.port }[protocol];
        const wire = protocol.startsWith('grpc') ? 'grpc' : 'http';
        const ours = await cell(() => perfAnalyzer(perf, wire, `127.0.0.1:${port}`, size, concurrency));
        let row = `| ${protocol} | [1,${size}] | ${concurrency} | ${show(ours)} | ${show(baseline)} | ${ratio(ours, baseline)}`;
        if (triton !== undefined && !(tls !== undefined && wire === 'http')) {
          const theirs = await cell(() => perfAnalyzer(perf, wire, `127.0.0.1:${wire === 'http' ? triton.http : triton.grpc}`, size, concurrency));
          row += ` | ${show(theirs)} | ${ratio(ours, theirs)}`;
        }
        console.log(`${row} |`);
      }
    }
  }
} finally {
  triton?.child.kill('SIGTERM');
  await frontends.close();
  await natives.close();
  await server.stop();
}
