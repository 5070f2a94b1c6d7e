// The test core's own C++ smoke test (test/core/smoke_test.cc): the C API
// and the backend API (with the fixture backend, libtriton_fixture.so) driven
// directly, without the addon. It checks the test double itself, so it runs
// on the test core whatever library the rest of the suite uses.
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from './helpers.js';

const run = promisify(execFile);

describe('test core smoke test', () => {
  it('passes every check, backend API included', async () => {
    const { stdout, stderr } = await run(resolve(REPO_ROOT, 'build/testcore/testcore_smoke'), [], { cwd: REPO_ROOT, timeout: 120_000 });
    expect(`${stdout}${stderr}`).toMatch(/smoke test: OK \(0 failures/);
  }, 150_000);
});
