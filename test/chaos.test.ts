/**
 * The chaos harness's short form (bench/chaos.ts, docs/chaos.md): a seeded
 * run of the mixed workload with every kind of fault, on the library the
 * suite uses; every invariant of its summary holds.
 */
import { execFile } from 'node:child_process';
import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from './helpers.js';

const run = promisify(execFile);

describe('chaos harness (short, seeded)', () => {
  it('settles every request once, crashes never, leaks nothing, and injects every kind of fault', async () => {
    const json = join(tmpdir(), `tritonserver-node-chaos-${process.pid}.json`);
    const library = process.env.TRITONSERVER_LIBRARY!;
    await run(
      process.execPath,
      ['--expose-gc', '--import', 'tsx', 'bench/chaos.ts', '--seed', '7', '--requests', '15000', '--duration', '40', '--faults', '24', '--library', library, '--json', json, '--quiet'],
      { cwd: REPO_ROOT, maxBuffer: 16 * 1024 * 1024 },
    );
    const result = JSON.parse(await readFile(json, 'utf8')) as {
      summary: Record<string, unknown>;
      health: Record<string, number>;
      rss: { endMiB: number; endTrimmedMiB: number };
    };
    await rm(json, { force: true });
    const { summary } = result;
    expect(summary).toMatchObject({ lost: 0, settledTwice: 0, hangs: 0, crashes: 0, leaks: 0, wrong: 0 });
    expect(summary.requests).toBeGreaterThanOrEqual(1000);
    const faults = summary.faults as Record<string, number>;
    expect(faults.stopInFlight).toBe(1);
    expect(Object.values(faults).reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(10);
    expect((summary.outcomes as Record<string, number>).OK).toBeGreaterThan(0);
    // RSS is reported both ways; handing glibc's free pages back never adds memory.
    expect(summary.rssGrowthTrimmedMiB).toEqual(expect.any(Number));
    expect(result.rss.endTrimmedMiB).toBeLessThanOrEqual(result.rss.endMiB + 1);
  }, 400_000);
});
