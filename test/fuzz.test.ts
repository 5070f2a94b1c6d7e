// The libFuzzer harnesses of the addon's network parsers (test/fuzz/:
// native/kserve/http-wire.cc and native/kserve/grpc-wire.cc under ASan and UBSan), built
// with clang and run briefly from their committed seeds with a fixed seed,
// so a run is the same each time: a crash, a sanitizer report or a broken
// invariant fails the test. test/fuzz/run.sh runs one harness for longer.
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);

// Not test/helpers.ts's REPO_ROOT: that module loads the package, which
// these harnesses never touch.
const REPO_ROOT = resolve(import.meta.dirname, '..');
const BUILD = resolve(REPO_ROOT, 'build/fuzz');
const HARNESSES = ['http_head_fuzzer', 'http_infer_fuzzer', 'grpc_infer_fuzzer', 'http_response_fuzzer'];
const RUNS = 200_000;

interface Outcome {
  code: number;
  output: string;
}

/** Runs a command to its end, whatever its exit status. */
async function outcome(file: string, args: string[], cwd: string, timeout: number): Promise<Outcome> {
  try {
    const { stdout, stderr } = await run(file, args, { cwd, timeout, maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, output: `${stdout}${stderr}` };
  } catch (error) {
    const failed = error as { code?: number | string; signal?: string; stdout?: string; stderr?: string };
    return { code: typeof failed.code === 'number' ? failed.code : -1, output: `${failed.stdout ?? ''}${failed.stderr ?? ''}${failed.signal ?? ''}` };
  }
}

describe('native parser fuzzers', () => {
  beforeAll(async () => {
    // Incremental: only what changed (a harness, a parser) is compiled again.
    await run('cmake', ['-S', 'test/fuzz', '-B', BUILD, '-DCMAKE_CXX_COMPILER=clang++'], { cwd: REPO_ROOT });
    await run('cmake', ['--build', BUILD, '-j', '2'], { cwd: REPO_ROOT, maxBuffer: 16 * 1024 * 1024 });
  }, 120_000);

  it.each(HARNESSES)(`%s: ${RUNS} runs from its seeds find nothing`, async (harness) => {
    // The fuzzer adds what it finds to its corpus: a copy, so the committed seeds stay as they are.
    const corpus = await mkdtemp(join(tmpdir(), `tritonserver-node-${harness}-`));
    const artifacts = join(BUILD, 'artifacts');
    await mkdir(artifacts, { recursive: true });
    try {
      await cp(join(REPO_ROOT, 'test/fuzz/corpus', harness), corpus, { recursive: true });
      const { code, output } = await outcome(
        join(BUILD, harness),
        // A crashing input is kept under build/fuzz/artifacts/ to reproduce it with: build/fuzz/HARNESS FILE
        [`-runs=${RUNS}`, '-seed=1', '-max_len=65536', `-artifact_prefix=${artifacts}/${harness}-`, corpus],
        corpus,
        60_000,
      );
      // What libFuzzer and the sanitizers print when they stop a run; the
      // end of the output (the report, the input's bytes) is the message.
      const reports = ['ERROR: AddressSanitizer', 'ERROR: LeakSanitizer', 'runtime error:', 'invariant broken', 'deadly signal'];
      const report = output.slice(-4000);
      expect(reports.filter((text) => output.includes(text)), report).toEqual([]);
      expect(code, report).toBe(0);
      expect(output, report).toContain(`Done ${RUNS} runs`);
    } finally {
      await rm(corpus, { recursive: true, force: true });
    }
  }, 70_000);
});
