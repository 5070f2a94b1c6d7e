/**
 * Instructions per request, counted by valgrind's callgrind instead of timed:
 * deterministic enough to compare commits on a noisy shared machine.
 *
 *   npm run bench:callgrind -- --requests 20000 [--concurrency 64] [--scenario small]
 *   npm run bench:callgrind -- --scenario stream-burst --requests 500 --concurrency 16 --warmup 100
 *
 * Each side (the binding through bench/perf.ts --no-native, and
 * bench_native_loop) runs twice under `valgrind --tool=callgrind
 * --separate-threads=yes`, with N/5 and N timed requests after the same
 * warm-up; the difference of the two counts divided by the 4N/5 extra
 * requests is the cost per request with start-up, model load and warm-up
 * cancelled out. "main thread" is callgrind's thread 1: the JS thread of
 * node, the issuing thread of the native loop. "all threads" adds Triton's
 * threads, V8's GC and compiler helpers and libuv's pool.
 *
 * The main thread's total moves by several per cent between runs of the same
 * code (V8's compiler and collector choose differently, drains differ in
 * size), so the binding side also reports the addon's own entry points on
 * the JS thread, inclusive (callgrind_annotate): native code that hardly
 * varies, for comparing changes to the addon.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs, promisify } from 'node:util';

const ROOT = resolve(import.meta.dirname, '..');
const MODELS = join(ROOT, 'test', 'models');
const TEST_CORE_DIR = join(ROOT, 'build', 'testcore');
const execFileAsync = promisify(execFile);

/** Workloads bench_native_loop and bench/perf.ts both know, by scenario. */
const WORKLOADS: Record<string, string[]> = {
  small: ['--model', 'identity_fp32', '--datatype', 'FP32', '--shape', '1,16'],
  large: ['--model', 'identity_fp32', '--datatype', 'FP32', '--shape', '1,16384'],
  // The binding side writes the outputs into reused buffers (perf.ts --scenario large-reuse); the native loop as for large.
  'large-reuse': ['--model', 'identity_fp32', '--datatype', 'FP32', '--shape', '1,16384'],
  bytes: ['--model', 'identity_bytes', '--datatype', 'BYTES', '--shape', '1,32'],
  'stream-burst': ['--model', 'repeat_backend', '--input', 'IN', '--datatype', 'INT32', '--shape', '64', '--zeros', 'DELAY:UINT32:64', '--zeros', 'WAIT:UINT32:1'],
};
/** Responses per request of the streaming workloads (also reported per response). */
const STREAMED: Record<string, number> = { 'stream-burst': 64 };

interface Count {
  total: number;
  main: number;
  /** Callgrind's file of the main thread. */
  mainFile: string;
}

/** The addon's functions the JS thread runs per request or response, as callgrind_annotate names them. */
const ADDON_ENTRY_POINTS: ReadonlyArray<[label: string, symbol: string]> = [
  ['infer() (the addon\'s part)', 'tsn::ServerWrap::Infer('],
  ['  reading its arguments', 'tsn::InferenceEngine::ParseRequest('],
  ['a completion into arguments', 'tsn::InferenceEngine::AppendCompletion('],
  ['a request context recycled', 'tsn::InferenceEngine::Finish('],
  ['flush()', 'tsn::ServerWrap::Flush('],
];

/** Inclusive instructions of each entry point in one thread's callgrind file. */
async function addonCounts(file: string): Promise<Map<string, number>> {
  const { stdout } = await execFileAsync('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file], {
    maxBuffer: 64 << 20,
  });
  const counts = new Map<string, number>();
  for (const line of stdout.split('\n')) {
    const match = /^\s*([\d,]+) \([^)]*\)\s+\S*?:(.*)$/.exec(line);
    if (!match) continue;
    for (const [label, symbol] of ADDON_ENTRY_POINTS) {
      if (match[2]!.startsWith(symbol) && !counts.has(label)) counts.set(label, Number(match[1]!.replace(/,/g, '')));
    }
  }
  return counts;
}

/** Sums callgrind's per-thread files `<prefix>-NN`; thread 01 is the main thread. */
function readCounts(dir: string, prefix: string): Count {
  let total = 0;
  let main = 0;
  let mainFile = '';
  for (const name of readdirSync(dir)) {
    const match = name.startsWith(prefix) ? /-(\d+)$/.exec(name) : null;
    if (!match) continue;
    const totals = /^totals:\s+(\d+)/m.exec(readFileSync(join(dir, name), 'utf8'));
    if (!totals) continue;
    const n = Number(totals[1]);
    total += n;
    if (Number(match[1]) === 1) {
      main = n;
      mainFile = join(dir, name);
    }
  }
  if (total === 0) throw new Error(`no callgrind output ${prefix}-NN in ${dir}`);
  return { total, main, mainFile };
}

async function callgrind(dir: string, prefix: string, command: string, args: string[]): Promise<Count> {
  await execFileAsync(
    'valgrind',
    ['--tool=callgrind', '--separate-threads=yes', `--callgrind-out-file=${join(dir, prefix)}.%p`, command, ...args],
    { maxBuffer: 16 << 20 },
  );
  return readCounts(dir, prefix);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      requests: { type: 'string', default: '20000' },
      concurrency: { type: 'string', default: '64' },
      warmup: { type: 'string', default: '1000' },
      scenario: { type: 'string', default: 'small' },
      library: { type: 'string' },
      'native-loop': { type: 'string' },
    },
  });
  const requests = Number(values.requests);
  const concurrency = Number(values.concurrency);
  const warmup = Number(values.warmup);
  for (const [name, v, min] of [['requests', requests, 10], ['concurrency', concurrency, 1], ['warmup', warmup, 0]] as const) {
    if (!Number.isInteger(v) || v < min) throw new Error(`--${name} needs an integer >= ${min}`);
  }
  const workload = WORKLOADS[values.scenario];
  if (!workload) throw new Error(`--scenario: one of ${Object.keys(WORKLOADS).join(', ')}`);
  const library = resolve(values.library ?? process.env.TRITONSERVER_LIBRARY ?? join(TEST_CORE_DIR, 'libtritonserver.so'));
  const nativeLoop = resolve(values['native-loop'] ?? join(TEST_CORE_DIR, 'bench_native_loop'));
  const backends = join(dirname(dirname(library)), 'backends');

  const small = Math.max(1, Math.round(requests / 5));
  const dir = mkdtempSync(join(tmpdir(), 'bench-callgrind-'));
  try {
    const common = ['--concurrency', String(concurrency), '--warmup', String(warmup)];
    const native = (n: number): string[] => [
      library, MODELS, ...workload, ...common, '--requests', String(n),
      ...(readdirSafe(backends) ? ['--backend-directory', backends] : []),
    ];
    const binding = (n: number): string[] => [
      '--expose-gc', '--import', 'tsx', join(ROOT, 'bench', 'perf.ts'),
      '--scenario', values.scenario, '--no-native', '--library', library, ...common, '--requests', String(n),
    ];
    console.log(
      `callgrind: ${values.scenario} workload, C=${concurrency}, ${small} and ${requests} requests per side ` +
        `(warm-up ${warmup}); this takes a few minutes`,
    );
    const rows: Array<[string, Count, Count]> = [];
    for (const [side, command, args] of [
      ['native loop', nativeLoop, native],
      ['binding', process.execPath, binding],
    ] as const) {
      const a = await callgrind(dir, `${side === 'binding' ? 'b' : 'n'}-small`, command, args(small));
      const b = await callgrind(dir, `${side === 'binding' ? 'b' : 'n'}-large`, command, args(requests));
      rows.push([side, a, b]);
    }
    const extra = requests - small;
    console.log('\n| side | instructions/request, all threads | main thread |');
    console.log('|:--|--:|--:|');
    const per: Record<string, { total: number; main: number }> = {};
    for (const [side, a, b] of rows) {
      const cost = { total: (b.total - a.total) / extra, main: (b.main - a.main) / extra };
      per[side] = cost;
      console.log(`| ${side} | ${Math.round(cost.total).toLocaleString('en-US')} | ${Math.round(cost.main).toLocaleString('en-US')} |`);
    }
    const n = per['native loop']!;
    const bi = per.binding!;
    console.log(
      `\nbinding − native: ${Math.round(bi.total - n.total).toLocaleString('en-US')} instructions/request (all threads), ` +
        `${Math.round(bi.main - n.main).toLocaleString('en-US')} on the main thread`,
    );
    const [, a, b] = rows.find(([side]) => side === 'binding')!;
    const [countsA, countsB] = await Promise.all([addonCounts(a.mainFile), addonCounts(b.mainFile)]);
    console.log('\n| the addon on the JS thread, inclusive | instructions/request |');
    console.log('|:--|--:|');
    for (const [label] of ADDON_ENTRY_POINTS) {
      const perRequest = ((countsB.get(label) ?? 0) - (countsA.get(label) ?? 0)) / extra;
      console.log(`| ${label} | ${Math.round(perRequest).toLocaleString('en-US')} |`);
    }
    const streamed = STREAMED[values.scenario];
    if (streamed !== undefined) {
      console.log(
        `per streamed response (${streamed} per request): binding main thread ${Math.round(bi.main / streamed).toLocaleString('en-US')}, ` +
          `native ${Math.round(n.main / streamed).toLocaleString('en-US')} instructions`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function readdirSafe(path: string): boolean {
  try {
    readdirSync(path);
    return true;
  } catch {
    return false;
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
});
