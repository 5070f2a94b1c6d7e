// The benchmark harness is not a test, but this one short run keeps it from
// rotting: every figure the JSON report promises is there and plausible.
// Nothing here is timed or compared with a threshold.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from './helpers.js';

const execFileAsync = promisify(execFile);

interface Report {
  scenario: string;
  machine: { node: string; cpus: number; cpuModel: string; loadAverageAtStart: number[]; loadAverageAtEnd: number[] };
  library: string;
  nativeLoop: string | null;
  workload: { model: string; input: string; datatype: string; shape: number[]; stream: boolean; outputBuffers: boolean; output: string | null; dispose: boolean };
  options: { concurrency: number[]; requests: number; outputBuffers: boolean; dispose: boolean; gcStats: boolean };
  points: Array<Record<string, unknown> & { concurrency: number; binding: Record<string, unknown>; native: Record<string, unknown> }>;
  summary: Record<string, unknown>;
  soak: unknown;
}

const LATENCY_KEYS = ['p50', 'p90', 'p99', 'max', 'mean'];

function expectLatency(value: unknown): void {
  const latency = value as Record<string, number>;
  expect(Object.keys(latency).sort()).toEqual([...LATENCY_KEYS].sort());
  for (const key of LATENCY_KEYS) expect(latency[key]).toBeGreaterThan(0);
  expect(latency.p50).toBeLessThanOrEqual(latency.p99!);
  expect(latency.p99).toBeLessThanOrEqual(latency.max!);
}

/** A thread-CPU figure: a number ≥ 0 read from /proc/thread-self/schedstat on Linux, null elsewhere. */
function expectThreadFigure(value: unknown): void {
  if (process.platform === 'linux') {
    expect(typeof value).toBe('number');
    expect(Number.isFinite(value)).toBe(true);
    expect(value as number).toBeGreaterThanOrEqual(0);
  } else {
    expect(value).toBeNull();
  }
}

function expectGcStats(value: unknown): void {
  const gc = value as Record<string, { count: number; ms: number }> & { totalMs: number };
  expect(Object.keys(gc).sort()).toEqual(['incremental', 'major', 'minor', 'totalMs', 'weakcb']);
  let ms = 0;
  for (const kind of ['minor', 'major', 'incremental', 'weakcb']) {
    expect(Number.isInteger(gc[kind]!.count), kind).toBe(true);
    expect(gc[kind]!.count).toBeGreaterThanOrEqual(0);
    expect(gc[kind]!.ms).toBeGreaterThanOrEqual(0);
    if (gc[kind]!.count === 0) expect(gc[kind]!.ms).toBe(0);
    ms += gc[kind]!.ms;
  }
  expect(gc.totalMs).toBeCloseTo(ms, 6);
}

const run = (args: string[]) =>
  execFileAsync(process.execPath, ['--expose-gc', '--import', 'tsx', join(REPO_ROOT, 'bench', 'perf.ts'), ...args], {
    cwd: REPO_ROOT,
    env: process.env,
    timeout: 60_000,
  });

describe('bench/perf.ts', () => {
  let dir = '';
  let report: Report;
  let stdout = '';

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tritonserver-node-bench-'));
    const json = join(dir, 'out.json');
    const result = await run([
      '--requests', '200', '--concurrency', '1:2:x2', '--warmup', '20', '--gc-stats',
      '--json', json, '--chart', join(dir, 'out.svg'),
    ]);
    stdout = result.stdout;
    report = JSON.parse(await readFile(json, 'utf8')) as Report;
  }, 60_000);

  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('reports the run, the machine and the workload', () => {
    expect(report.scenario).toBe('small');
    expect(report.machine.cpus).toBeGreaterThan(0);
    expect(report.machine.cpuModel).not.toBe('');
    expect(report.machine.loadAverageAtStart).toHaveLength(3);
    expect(report.machine.loadAverageAtEnd).toHaveLength(3);
    expect(report.library).toBe(resolve(process.env.TRITONSERVER_LIBRARY!));
    expect(report.nativeLoop).toMatch(/bench_native_loop$/);
    expect(report.workload).toMatchObject({
      model: 'identity_fp32', input: 'INPUT0', datatype: 'FP32', shape: [1, 16], stream: false, outputBuffers: false, output: null,
    });
    expect(report.options).toMatchObject({ concurrency: [1, 2], requests: 200, outputBuffers: false, gcStats: true });
    expect(report.soak).toBeNull();
  });

  it('has every figure of both sides for each concurrency level', () => {
    expect(report.points.map((p) => p.concurrency)).toEqual([1, 2]);
    for (const point of report.points) {
      for (const side of [point.binding, point.native]) {
        expect(side.requests).toBe(200);
        expect(side.responses).toBe(200);
        expect(side.seconds).toBeGreaterThan(0);
        // seconds is rounded in the JSON; the rate is computed from the exact value.
        expect(Math.abs((side.throughput as number) * (side.seconds as number) - 200)).toBeLessThan(2);
        expectLatency(side.latencyUs);
      }
      const binding = point.binding as Record<string, number | Record<string, number>>;
      expect(binding.threads).toBe(1);
      expect(Object.keys(binding.eventLoopDelayMs as object).sort()).toEqual(['max', 'p50', 'p99']);
      expect(binding.eventLoopUtilization).toBeGreaterThan(0);
      expect(binding.eventLoopUtilization).toBeLessThanOrEqual(1);
      expect(binding.eluActiveUsPerRequest).toBeGreaterThan(0);
      expect(binding.eluActiveUsPerResponse).toBe(binding.eluActiveUsPerRequest);
      expectThreadFigure(binding.jsCpuUsPerRequest);
      expect(binding.jsCpuUsPerResponse).toBe(binding.jsCpuUsPerRequest);
      expectThreadFigure(binding.jsRunQueueUsPerRequest);
      expect(binding.processCpuUsPerRequest).toBeGreaterThan(0);
      expectGcStats(binding.gc);
      const native = point.native as Record<string, number>;
      expect(native.issuerCpuUsPerRequest).toBeGreaterThan(0);
      expect(native.processCpuUsPerRequest).toBeGreaterThan(0);
      const ratios = point.ratios as Record<string, number>;
      expect(Object.keys(ratios).sort()).toEqual(['p50Latency', 'p99Latency', 'throughput']);
      for (const r of Object.values(ratios)) expect(r).toBeGreaterThan(0);
      const added = point.addedLatencyUs as Record<string, number>;
      expect(added.p50).toBeCloseTo(
        (point.binding.latencyUs as Record<string, number>).p50! - (point.native.latencyUs as Record<string, number>).p50!,
        6,
      );
    }
  });

  it('summarizes the targets and writes the chart', async () => {
    expect(report.summary).toMatchObject({ maxConcurrency: 2 });
    for (const key of [
      'eluActiveUsPerRequestAtMaxC', 'nativeIssuerCpuUsPerRequestAtMaxC', 'addedLatencyUsAtC1', 'throughputRatioAtMaxC',
      'eluActiveUsPerResponseAtMaxC', 'eventLoopP99MsMax',
    ]) {
      expect(typeof report.summary[key], key).toBe('number');
    }
    expectThreadFigure(report.summary.jsCpuUsPerRequestAtMaxC);
    expectThreadFigure(report.summary.jsCpuUsPerResponseAtMaxC);
    expect(report.summary.jsCpuUsPerRequestAtMaxC).toBe(report.points[1]!.binding.jsCpuUsPerRequest);
    const svg = await readFile(join(dir, 'out.svg'), 'utf8');
    expect(svg).toMatch(/^<svg /);
    expect(svg).toContain('throughput (requests/s)');
    expect(svg).toContain('p99 latency');
    // One marker per concurrency level and side.
    expect(svg.match(/<circle /g)).toHaveLength(4);
    // Not a TTY: plain lines, no progress bar.
    expect(stdout).not.toContain('\r');
    expect(stdout).toContain('| C | binding req/s');
    expect(stdout).toContain('JS CPU µs/req');
    expect(stdout).toMatch(/^GC C=1: \d+ minor/m);
    expect(stdout).toMatch(/^GC C=2: \d+ minor/m);
    expect(stdout).toMatch(/^summary: JS-thread CPU /m);
  });
});

describe('bench/perf.ts --output-buffers', () => {
  /** Runs the harness with `--json` into a temporary directory and returns the report. */
  async function runReport(args: string[]): Promise<Report> {
    const dir = await mkdtemp(join(tmpdir(), 'tritonserver-node-bench-'));
    try {
      const json = join(dir, 'out.json');
      await run([...args, '--json', json]);
      return JSON.parse(await readFile(json, 'utf8')) as Report;
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  it('runs large-dispose, letting go of each response at once', async () => {
    const report = await runReport(['--scenario', 'large-dispose', '--no-native', '--requests', '100', '--concurrency', '2', '--warmup', '0']);
    expect(report.scenario).toBe('large-dispose');
    expect(report.workload).toMatchObject({ model: 'identity_fp32', shape: [1, 16384], dispose: true, outputBuffers: false });
    expect(report.options).toMatchObject({ dispose: true });
    expect(report.points.map((p) => [p.concurrency, p.binding.requests])).toEqual([[2, 100]]);
  }, 60_000);

  it('runs large-reuse with one caller-provided buffer per slot (each slot checked inside the harness)', async () => {
    const report = await runReport(['--scenario', 'large-reuse', '--no-native', '--requests', '100', '--concurrency', '1,4', '--warmup', '0']);
    expect(report.scenario).toBe('large-reuse');
    expect(report.workload).toMatchObject({ model: 'identity_fp32', shape: [1, 16384], outputBuffers: true, output: 'OUTPUT0' });
    expect(report.options).toMatchObject({ outputBuffers: true, gcStats: false });
    expect(report.points.map((p) => [p.concurrency, p.binding.requests, p.native])).toEqual([[1, 100, null], [4, 100, null]]);
    for (const point of report.points) {
      expect(point.binding.gc).toBeNull();
      expectThreadFigure(point.binding.jsCpuUsPerRequest);
    }
  }, 60_000);

  it('runs stream-burst on both sides, sending the repeat backend’s other inputs as zeros', async () => {
    const report = await runReport(['--scenario', 'stream-burst', '--requests', '20', '--concurrency', '2', '--warmup', '0']);
    expect(report.workload).toMatchObject({
      model: 'repeat_backend',
      input: 'IN',
      shape: [64],
      stream: true,
      zeros: [
        { name: 'DELAY', datatype: 'UINT32', shape: [64] },
        { name: 'WAIT', datatype: 'UINT32', shape: [1] },
      ],
    });
    const [point] = report.points;
    expect(point!.concurrency).toBe(2);
    expect([point!.binding.requests, point!.binding.responses]).toEqual([20, 20 * 64]);
    expect([point!.native.requests, point!.native.responses]).toEqual([20, 20 * 64]);
    expectThreadFigure(point!.binding.jsCpuUsPerResponse);
  }, 60_000);

  it('refuses a BYTES model with a message saying why', async () => {
    const error = await run(['--scenario', 'bytes', '--output-buffers', '--no-native', '--requests', '10']).then(
      () => null,
      (e: unknown) => e as { code: number; stderr: string },
    );
    expect(error?.code).toBe(1);
    expect(error?.stderr).toContain('--output-buffers: identity_bytes sends or returns BYTES');
  }, 60_000);
});

describe('bench/remote.ts (remote mode), one short run against serveKServe in its own process', () => {
  it('reports this client per protocol, with the in-process figure beside it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'bench-remote-test-'));
    try {
      const json = join(dir, 'remote.json');
      const { stdout } = await execFileAsync(
        process.execPath,
        ['--import', 'tsx', resolve(REPO_ROOT, 'bench/remote.ts'), '--window-ms', '300', '--rounds', '1', '--sizes', '16', '--concurrency', '2', '--json', json],
        { cwd: REPO_ROOT, timeout: 60_000 },
      );
      expect(stdout).toContain('| protocol | shape | C | this client |');
      const report = JSON.parse(await readFile(json, 'utf8')) as {
        model: string;
        rows: Array<{ protocol: string; size: number; concurrency: number; client: { throughput: number; p99us: number }; inProcess?: { throughput: number } }>;
      };
      expect(report.model).toBe('identity_fp32');
      expect(report.rows.map((row) => [row.protocol, row.size, row.concurrency])).toEqual([
        ['grpc', 16, 2],
        ['http', 16, 2],
      ]);
      for (const row of report.rows) {
        expect(row.client.throughput).toBeGreaterThan(0);
        expect(row.client.p99us).toBeGreaterThan(0);
        expect(row.inProcess?.throughput).toBeGreaterThan(0);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('bench/bound.ts (bound models), one short run', () => {
  it('reports the bound model beside the C++ and Python identity models at each concurrency', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'bench-bound-test-'));
    try {
      const json = join(dir, 'bound.json');
      const { stdout } = await execFileAsync(
        process.execPath,
        ['--import', 'tsx', resolve(REPO_ROOT, 'bench/bound.ts'), '--requests', '200', '--repeats', '1', '--concurrency', '1,8', '--json', json],
        { cwd: REPO_ROOT, timeout: 120_000 },
      );
      expect(stdout).toContain('| C | identity (C++) req/s | bound (TS) req/s | Python req/s |');
      const report = JSON.parse(await readFile(json, 'utf8')) as {
        rows: Array<{ concurrency: number; points: Record<string, { rate: number; jsPerRequestUs: number; jsPerBatchUs: number; batches: number }> }>;
      };
      expect(report.rows.map((row) => row.concurrency)).toEqual([1, 8]);
      for (const row of report.rows) {
        expect(Object.keys(row.points).sort()).toEqual(['identity_fp32', 'python_identity_fp32', 'ts_identity']);
        for (const point of Object.values(row.points)) {
          expect(point.rate).toBeGreaterThan(0);
          expect(point.batches).toBeGreaterThan(0);
          expect(point.batches).toBeLessThanOrEqual(200);
          expect(point.jsPerRequestUs).toBeGreaterThan(0);
        }
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
