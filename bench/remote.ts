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
 * --server-pid PID (the endpoint's server process, e.g. tritonserver's: its
 * CPU per call is reported too), --transport (auto, native or js: the
 * client's option), --ca FILE (gRPC over TLS: grpcs://, trusting the CA in
 * FILE, for perf_analyzer and the Python client too, e.g. against
 * `tritonserver --grpc-use-ssl`), --compression gzip (this client's
 * `compression`, perf_analyzer's `--grpc-compression-algorithm` (gRPC; its
 * HTTP client has none), the Python client's `compression_algorithm` (gRPC)
 * or request/response compression (HTTP)), --json FILE. Rows whose tool is not given
 * are left out.
 *
 * CPU per call: this client's is the bench process's CPU over the window
 * (only with an endpoint in another process); tritonclient's its own
 * process's over the window; perf_analyzer's its whole run's (/usr/bin/time)
 * over the requests the server counted during that run. The server's, with
 * --server-pid, is its CPU over the same span divided by the same calls.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
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
    'server-pid': { type: 'string' },
    /** The client's transport (the client option): auto, native or js. */
    transport: { type: 'string', default: 'auto' },
    ca: { type: 'string' },
    compression: { type: 'string', default: 'none' },
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
  /** CPU µs per call of the client's process, where it is apart from the server. */
  clientCpuUs?: number;
  /** CPU µs per call of the server's process (--server-pid). */
  serverCpuUs?: number;
}

const serverPid = args['server-pid'] === undefined ? undefined : Number(args['server-pid']);

/** user+system CPU seconds of a process (Linux /proc; USER_HZ 100). */
function processCpuSeconds(pid: number): number {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}
const serverCpu = (): number => (serverPid === undefined ? NaN : processCpuSeconds(serverPid));
const perCallUs = (seconds: number, calls: number): number | undefined => (Number.isFinite(seconds) && calls > 0 ? (seconds * 1e6) / calls : undefined);

/** `measure` with the CPU per call of the client and of the server, where they are known. */
function withCpu(measure: Measure, client: { seconds: number; calls: number }, server: { seconds: number; calls: number }): Measure {
  const clientCpuUs = perCallUs(client.seconds, client.calls);
  const serverCpuUs = perCallUs(server.seconds, server.calls);
  if (clientCpuUs !== undefined) measure.clientCpuUs = clientCpuUs;
  if (serverCpuUs !== undefined) measure.serverCpuUs = serverCpuUs;
  return measure;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/**
 * `concurrency` closed loops of `infer` for one window (after a short warm-up).
 * `remote`: the calls go to a server in another process, so the client's and
 * the server's CPU can be told apart.
 */
async function closedLoop(infer: () => Promise<unknown>, concurrency: number, remote: boolean): Promise<Measure> {
  const warmUntil = performance.now() + Math.min(500, windowMs / 4);
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (performance.now() < warmUntil) await infer();
  }));
  const latencies: number[] = [];
  const cpu0 = process.cpuUsage();
  const server0 = serverCpu();
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
  const cpu = process.cpuUsage(cpu0);
  const serverSeconds = serverCpu() - server0;
  latencies.sort((a, b) => a - b);
  const measure: Measure = { throughput: latencies.length / seconds, p99us: Math.round((latencies[Math.floor(latencies.length * 0.99)] ?? 0) * 1000) };
  if (!remote) return measure;
  const calls = latencies.length;
  return withCpu(measure, { seconds: (cpu.user + cpu.system) / 1e6, calls }, { seconds: serverSeconds, calls });
}

/** Successful inferences the endpoint's server has counted for the model (all versions). */
async function serverCount(client: Client): Promise<number> {
  const stats = await client.model(model).statistics();
  return stats.reduce((sum, s) => sum + Number(s.inference_stats.success.count), 0);
}

/** Runs another process's load: its result, the calls the server counted meanwhile, and the server's CPU seconds. */
async function serverSpan<T>(client: Client, load: () => Promise<T>): Promise<{ result: T; server: { seconds: number; calls: number } }> {
  const count0 = await serverCount(client);
  const cpu0 = serverCpu();
  const result = await load();
  return { result, server: { seconds: serverCpu() - cpu0, calls: (await serverCount(client)) - count0 } };
}

/**
 * Runs perf_analyzer under /usr/bin/time. Its r25.07 build crashes as it
 * exits after a run over TLS (SIGSEGV, its results already written): a CSV
 * with a row counts as a result, whatever the exit.
 */
async function runPerfAnalyzer(csv: string, timeArgs: string[]): Promise<void> {
  try {
    await run('/usr/bin/time', timeArgs, { maxBuffer: 1 << 24 });
  } catch (error) {
    const written = await readFile(csv, 'utf8').catch(() => '');
    if (written.trim().split('\n').length < 2) throw error;
  }
}

async function perfAnalyzer(binary: string, protocol: 'grpc' | 'http', url: string, size: number, concurrency: number, client: Client): Promise<Measure> {
  const dir = await mkdtemp(join(tmpdir(), 'bench-remote-'));
  try {
    const csv = join(dir, 'out.csv');
    const times = join(dir, 'time.txt');
    const { server } = await serverSpan(client, () => runPerfAnalyzer(csv, ['-f', '%U %S', '-o', times, binary,
      '-m', model, '-u', url, '-i', protocol, '--shape', `INPUT0:${size}`, // without the batch dimension (batch size 1)
      '--concurrency-range', String(concurrency), '--measurement-interval', String(windowMs),
      // Loose stability: a shared 2-vCPU machine never settles to perf_analyzer's default 10 %.
      '--stability-percentage', '900', '--max-trials', '10', '-f', csv,
      ...(protocol === 'grpc' ? ['--async'] : []),
      ...(protocol === 'grpc' && args.ca !== undefined ? ['--ssl-grpc-use-ssl', '--ssl-grpc-root-certifications-file', args.ca] : []),
      ...(protocol === 'grpc' && args.compression !== 'none' ? ['--grpc-compression-algorithm', args.compression] : []),
    ]));
    const [header, row] = (await readFile(csv, 'utf8')).trim().split('\n');
    const columns = (header ?? '').split(',');
    const cells = (row ?? '').split(',');
    const column = (name: string): number => Number(cells[columns.indexOf(name)]);
    const [user, system] = (await readFile(times, 'utf8')).trim().split('\n').pop()!.split(' ').map(Number);
    // perf_analyzer's own CPU over every request it sent, as the server counted them.
    return withCpu({ throughput: column('Inferences/Second'), p99us: column('p99 latency') }, { seconds: user! + system!, calls: server.calls }, server);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function tritonclient(python: string, protocol: 'grpc' | 'http', url: string, size: number, concurrency: number, client: Client): Promise<Measure> {
  const { result: { stdout }, server } = await serverSpan(client, () =>
    run(python, [join(root, 'bench/tritonclient_loop.py'), protocol, url, model, String(size), String(concurrency), String(windowMs / 1000), ...(protocol === 'grpc' && args.ca !== undefined ? [args.ca] : [])], { maxBuffer: 1 << 20, env: { ...process.env, COMPRESSION: args.compression } }),
  );
  const result = JSON.parse(stdout.trim().split('\n').pop()!) as { requests: number; seconds: number; p99_us: number; cpu_seconds: number };
  return withCpu({ throughput: result.requests / result.seconds, p99us: result.p99_us }, { seconds: result.cpu_seconds, calls: result.requests }, server);
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
  const tls = protocol === 'grpc' && args.ca !== undefined ? { ca: readFileSync(args.ca) } : undefined;
  if (url !== undefined) clients[protocol] = await Client.connect(`${protocol}${tls ? 's' : ''}://${url}`, { transport: args.transport as 'auto' | 'native' | 'js', compression: args.compression as 'none' | 'gzip', ...(tls ? { tls } : {}) });
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
const cpuCells = (a: Measure | undefined, b: Measure | undefined, c: Measure | undefined, key: 'clientCpuUs' | 'serverCpuUs'): string =>
  [a, b, c].map((m) => (m?.[key] === undefined ? '–' : String(Math.round(m[key])))).join(' / ');
const fmt = (m: Measure | undefined): string => (m === undefined ? '–' : `${Math.round(m.throughput)}`);
const ratio = (a: Measure | undefined, b: Measure | undefined): string => (a === undefined || b === undefined ? '–' : (a.throughput / b.throughput).toFixed(2));

console.log(`model ${model}, FP32 [1, size], window ${windowMs} ms, medians of ${rounds} alternating rounds; infer/s`);
console.log(`endpoints: ${JSON.stringify(endpoints)}${own ? ' (serveKServe in this process)' : ''}; in-process library: ${inProcessServer?.library.path ?? '–'}`);
console.log(`this client's transport: gRPC ${clients.grpc?.transport ?? '–'}, HTTP ${clients.http?.transport ?? '–'}\n`);
console.log('| protocol | shape | C | this client | perf_analyzer | tritonclient (Python) | in-process | client / perf_analyzer | client / tritonclient | remote / in-process | p99 µs: client / perf_analyzer / tritonclient | client CPU µs/call: this / perf_analyzer / tritonclient | server CPU µs/call: this / perf_analyzer / tritonclient |');
console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|');
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
          // With serveKServe in this process (no endpoint given) client and server share it.
          samples.client.push(await closedLoop(() => remoteModel.infer({ inputs: { INPUT0: { shape: [1, size], data } } }), concurrency, own === undefined));
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
          if (pa !== undefined) await measure(samples.perfAnalyzer, 'perf_analyzer', () => perfAnalyzer(pa, protocol, url, size, concurrency, client));
          const tc = args.tritonclient;
          if (tc !== undefined) await measure(samples.tritonclient, 'tritonclient', () => tritonclient(tc, protocol, url, size, concurrency, client));
          if (inProcessServer !== undefined) {
            const local = inProcessServer.model(model);
            samples.inProcess.push(await closedLoop(() => local.infer({ inputs: { INPUT0: { shape: [1, size], data } } }), concurrency, false));
          }
        }
        const pick = (list: Measure[]): Measure | undefined => {
          if (list.length === 0) return undefined;
          const picked: Measure = { throughput: median(list.map((m) => m.throughput)), p99us: median(list.map((m) => m.p99us)) };
          const client = list.flatMap((m) => (m.clientCpuUs === undefined ? [] : [m.clientCpuUs]));
          const server = list.flatMap((m) => (m.serverCpuUs === undefined ? [] : [m.serverCpuUs]));
          if (client.length > 0) picked.clientCpuUs = median(client);
          if (server.length > 0) picked.serverCpuUs = median(server);
          return picked;
        };
        const row: Row = { protocol, size, concurrency, client: pick(samples.client)! };
        const pa = pick(samples.perfAnalyzer);
        const tc = pick(samples.tritonclient);
        const ip = pick(samples.inProcess);
        if (pa) row.perfAnalyzer = pa;
        if (tc) row.tritonclient = tc;
        if (ip) row.inProcess = ip;
        rows.push(row);
        console.log(
          `| ${protocol} | [1,${size}] | ${concurrency} | ${fmt(row.client)} | ${fmt(pa)} | ${fmt(tc)} | ${fmt(ip)} | ${ratio(row.client, pa)} | ${ratio(row.client, tc)} | ${ratio(row.client, ip)} | ${[row.client, pa, tc].map((m) => (m === undefined ? '–' : String(m.p99us))).join(' / ')} | ${cpuCells(row.client, pa, tc, 'clientCpuUs')} | ${cpuCells(row.client, pa, tc, 'serverCpuUs')} |`,
        );
      }
    }
  }
  const transport = { grpc: clients.grpc?.transport, http: clients.http?.transport };
  if (args.json !== undefined) await writeFile(args.json, `${JSON.stringify({ model, windowMs, rounds, endpoints, transport, rows }, null, 2)}\n`);
} finally {
  for (const client of Object.values(clients)) await client?.close();
  if (own !== undefined) await own.frontends.close();
  await inProcessServer?.stop();
}
