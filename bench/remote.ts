/**
 * Remote-mode benchmark: this package's client (`tritonserver-node/client`)
 * against one KServe v2 endpoint, beside the limit (NVIDIA's C++
 * perf_analyzer) and the peer (NVIDIA's Python tritonclient), all on the same
 * endpoint, model and concurrency, alternating in one sitting; and, for what
 * the network hop costs, the same load through `model.infer()` in-process.
 *
 *   npm run bench:remote                      # a Triton of its own: in-process behind serveKServe
 *   npm run bench:remote -- --grpc 127.0.0.1:8001 --http 127.0.0.1:8000   # any server, e.g. tritonserver
 *
 * Options: --model (identity_fp32), --sizes (16,16384: FP32 [1, size]),
 * --concurrency (1,16), --window-ms (2000), --rounds (2; medians are
 * reported), --protocols (grpc,http), --perf-analyzer PATH (or
 * PERF_ANALYZER), --tritonclient PYTHON (a python3 that imports
 * tritonclient, e.g. with PYTHONPATH set), --in-process (also run the load
 * in-process on TRITONSERVER_LIBRARY, or the test core, with test/models),
 * --json FILE. Rows whose tool is not given are left out.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { Server } from '../lib/index.js';
import { Client } from '../lib/client/index.js';
import { serveKServe, type KServeFrontends } from '../lib/kserve/index.js';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '..');

const { values: args } = parseArgs({
  options: {
    grpc: { type: 'string' },
    http: { type: 'string' },
    model: { type: 'string', default: 'identity_fp32' },
    sizes: { type: 'string', default: '16,16384' },
    concurrency: { type: 'string', default: '1,16' },
    'window-ms': { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '2' },
    protocols: { type: 'string', default: 'grpc,http' },
    'perf-analyzer': { type: 'string', default: process.env.PERF_ANALYZER },
    tritonclient: { type: 'string' },
    'in-process': { type: 'boolean', default: false },
    json: { type: 'string' },
  },
});

const windowMs = Number(args['window-ms']);
const rounds = Number(args.rounds);
const sizes = args.sizes.split(',').map(Number);
const concurrencies = args.concurrency.split(',').map(Number);
const protocols = args.protocols.split(',') as Array<'grpc' | 'http'>;
const model = args.model;

interface Measure {
  throughput: number;
  p99us: number;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** `concurrency` closed loops of `infer` for one window (after a short warm-up). */
async function closedLoop(infer: () => Promise<unknown>, concurrency: number): Promise<Measure> {
  const warmUntil = performance.now() + Math.min(500, windowMs / 4);
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (performance.now() < warmUntil) await infer();
  }));
  const latencies: number[] = [];
  const started = performance.now();
  const end = started + windowMs;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        await infer();
        latencies.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return { throughput: latencies.length / seconds, p99us: Math.round((latencies[Math.floor(latencies.length * 0.99)] ?? 0) * 1000) };
}

async function perfAnalyzer(binary: string, protocol: 'grpc' | 'http', url: string, size: number, concurrency: number): Promise<Measure> {
  const dir = await mkdtemp(join(tmpdir(), 'bench-remote-'));
  try {
    const csv = join(dir, 'out.csv');
    await run(binary, [
      '-m', model, '-u', url, '-i', protocol, '--shape', `INPUT0:${size}`, // without the batch dimension (batch size 1)
      '--concurrency-range', String(concurrency), '--measurement-interval', String(windowMs),
      // Loose stability: a shared 2-vCPU machine never settles to perf_analyzer's default 10 %.
      '--stability-percentage', '900', '--max-trials', '10', '-f', csv,
      ...(protocol === 'grpc' ? ['--async'] : []),
    ], { maxBuffer: 1 << 24 });
    const [header, row] = (await readFile(csv, 'utf8')).trim().split('\n');
    const columns = (header ?? '').split(',');
    const cells = (row ?? '').split(',');
    const column = (name: string): number => Number(cells[columns.indexOf(name)]);
    return { throughput: column('Inferences/Second'), p99us: column('p99 latency') };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function tritonclient(python: string, protocol: 'grpc' | 'http', url: string, size: number, concurrency: number): Promise<Measure> {
  const { stdout } = await run(python, [join(root, 'bench/tritonclient_loop.py'), protocol, url, model, String(size), String(concurrency), String(windowMs / 1000)], {
    maxBuffer: 1 << 20,
  });
  const result = JSON.parse(stdout.trim().split('\n').pop()!) as { requests: number; seconds: number; p99_us: number };
  return { throughput: result.requests / result.seconds, p99us: result.p99_us };
}

// The endpoints: given, or a Triton of our own behind serveKServe.
let own: { server: Server; frontends: KServeFrontends } | undefined;
let inProcessServer: Server | undefined;
const endpoints: Partial<Record<'grpc' | 'http', string>> = { grpc: args.grpc, http: args.http };
if (args.grpc === undefined && args.http === undefined) {
  process.env.TRITONSERVER_LIBRARY ??= join(root, 'build/testcore/libtritonserver.so');
  const server = await Server.start({ modelRepository: join(root, 'test/models'), modelControlMode: 'explicit', log: { info: false } });
  await server.loadModel(model);
  const frontends = await serveKServe(server, { http: { port: 0 }, grpc: { port: 0 }, maxBodyBytes: 256 * 1024 * 1024 });
  own = { server, frontends };
  endpoints.grpc = `127.0.0.1:${frontends.grpc!.port}`;
  endpoints.http = `127.0.0.1:${frontends.http!.port}`;
  inProcessServer = server;
} else if (args['in-process']) {
  process.env.TRITONSERVER_LIBRARY ??= join(root, 'build/testcore/libtritonserver.so');
  inProcessServer = await Server.start({ modelRepository: join(root, 'test/models'), modelControlMode: 'explicit', log: { info: false } });
  await inProcessServer.loadModel(model);
}

const clients: Partial<Record<'grpc' | 'http', Client>> = {};
for (const protocol of protocols) {
  const url = endpoints[protocol];
  if (url !== undefined) clients[protocol] = await Client.connect(`${protocol}://${url}`);
}

interface Row {
  protocol: 'grpc' | 'http';
  size: number;
  concurrency: number;
  client: Measure;
  perfAnalyzer?: Measure;
  tritonclient?: Measure;
  inProcess?: Measure;
}
const rows: Row[] = [];
const fmt = (m: Measure | undefined): string => (m === undefined ? '–' : `${Math.round(m.throughput)}`);
const ratio = (a: Measure | undefined, b: Measure | undefined): string => (a === undefined || b === undefined ? '–' : (a.throughput / b.throughput).toFixed(2));

console.log(`model ${model}, FP32 [1, size], window ${windowMs} ms, medians of ${rounds} alternating rounds; infer/s`);
console.log(`endpoints: ${JSON.stringify(endpoints)}${own ? ' (serveKServe in this process)' : ''}; in-process library: ${inProcessServer?.library.path ?? '–'}\n`);
console.log('| protocol | shape | C | this client | perf_analyzer | tritonclient (Python) | in-process | client / perf_analyzer | client / tritonclient | remote / in-process |');
console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|');
try {
  for (const size of sizes) {
    const data = new Float32Array(size).map((_, i) => i);
    for (const concurrency of concurrencies) {
      for (const protocol of protocols) {
        const client = clients[protocol];
        const url = endpoints[protocol];
        if (client === undefined || url === undefined) continue;
        const remoteModel = client.model(model);
        const samples: Record<'client' | 'perfAnalyzer' | 'tritonclient' | 'inProcess', Measure[]> = { client: [], perfAnalyzer: [], tritonclient: [], inProcess: [] };
        for (let round = 0; round < rounds; round++) {
          samples.client.push(await closedLoop(() => remoteModel.infer({ inputs: { INPUT0: { shape: [1, size], data } } }), concurrency));
          // A tool that fails leaves its cell empty (and says why on stderr) rather than ending the run.
          const measure = async (list: Measure[], tool: string, run: () => Promise<Measure>): Promise<void> => {
            try {
              list.push(await run());
            } catch (error) {
              const text = (error as { stderr?: string }).stderr?.trim().split('\n').pop() ?? String(error);
              console.error(`${tool} failed (${protocol} [1,${size}] C=${concurrency}): ${text}`);
            }
          };
          const pa = args['perf-analyzer'];
          if (pa !== undefined) await measure(samples.perfAnalyzer, 'perf_analyzer', () => perfAnalyzer(pa, protocol, url, size, concurrency));
          const tc = args.tritonclient;
          if (tc !== undefined) await measure(samples.tritonclient, 'tritonclient', () => tritonclient(tc, protocol, url, size, concurrency));
          if (inProcessServer !== undefined) {
            const local = inProcessServer.model(model);
            samples.inProcess.push(await closedLoop(() => local.infer({ inputs: { INPUT0: { shape: [1, size], data } } }), concurrency));
          }
        }
        const pick = (list: Measure[]): Measure | undefined =>
          list.length === 0 ? undefined : { throughput: median(list.map((m) => m.throughput)), p99us: median(list.map((m) => m.p99us)) };
        const row: Row = { protocol, size, concurrency, client: pick(samples.client)! };
        const pa = pick(samples.perfAnalyzer);
        const tc = pick(samples.tritonclient);
        const ip = pick(samples.inProcess);
        if (pa) row.perfAnalyzer = pa;
        if (tc) row.tritonclient = tc;
        if (ip) row.inProcess = ip;
        rows.push(row);
        console.log(
          `| ${protocol} | [1,${size}] | ${concurrency} | ${fmt(row.client)} | ${fmt(pa)} | ${fmt(tc)} | ${fmt(ip)} | ${ratio(row.client, pa)} | ${ratio(row.client, tc)} | ${ratio(row.client, ip)} |`,
        );
      }
    }
  }
  if (args.json !== undefined) await writeFile(args.json, `${JSON.stringify({ model, windowMs, rounds, endpoints, rows }, null, 2)}\n`);
} finally {
  for (const client of Object.values(clients)) await client?.close();
  if (own !== undefined) await own.frontends.close();
  await inProcessServer?.stop();
}
