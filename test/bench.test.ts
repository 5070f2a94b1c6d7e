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
  workload: { model: string; input: string; datatype: string; shape: number[]; stream: boolean };
  options: { concurrency: number[]; requests: number };
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

describe('bench/perf.ts', () => {
  let dir = '';
  let report: Report;
  let stdout = '';

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tritonserver-node-bench-'));
    const json = join(dir, 'out.json');
    const result = await execFileAsync(
      process.execPath,
      [
        '--expose-gc', '--import', 'tsx', join(REPO_ROOT, 'bench', 'perf.ts'),
        '--requests', '200', '--concurrency', '1:2:x2', '--warmup', '20',
        '--json', json, '--chart', join(dir, 'out.svg'),
      ],
      { cwd: REPO_ROOT, env: process.env, timeout: 60_000 },
    );
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
    expect(report.workload).toMatchObject({ model: 'identity_fp32', input: 'INPUT0', datatype: 'FP32', shape: [1, 16], stream: false });
    expect(report.options).toMatchObject({ concurrency: [1, 2], requests: 200 });
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
      expect(binding.jsThreadUsPerRequest).toBeGreaterThan(0);
      expect(binding.jsThreadUsPerResponse).toBe(binding.jsThreadUsPerRequest);
      expect(binding.processCpuUsPerRequest).toBeGreaterThan(0);
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
    for (const key of ['jsThreadUsPerRequestAtMaxC', 'addedLatencyUsAtC1', 'throughputRatioAtMaxC', 'jsThreadUsPerResponseAtMaxC', 'eventLoopP99MsMax']) {
      expect(typeof report.summary[key], key).toBe('number');
    }
    const svg = await readFile(join(dir, 'out.svg'), 'utf8');
    expect(svg).toMatch(/^<svg /);
    expect(svg).toContain('throughput (requests/s)');
    expect(svg).toContain('p99 latency');
    // One marker per concurrency level and side.
    expect(svg.match(/<circle /g)).toHaveLength(4);
    // Not a TTY: plain lines, no progress bar.
    expect(stdout).not.toContain('\r');
    expect(stdout).toContain('| C | binding req/s');
  });
});
