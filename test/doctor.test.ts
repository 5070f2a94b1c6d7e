// `tritonserver-node doctor` against the library the suite uses, a missing
// library, a repository with broken models and a missing backend.
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { doctor, type DoctorReport } from '../lib/cli/doctor.js';
import { MODELS, REPO_ROOT } from './helpers.js';

const LIBRARY = process.env.TRITONSERVER_LIBRARY!;

let root: string;
let backends: string;
let repository: string;

/** Runs the CLI from source; resolves with its exit code and output. */
function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'lib/cli/bin.ts', ...args],
      { cwd: REPO_ROOT, env: process.env, encoding: 'utf8' },
      (error, stdout, stderr) => {
        const code = error ? Number((error as { code?: unknown }).code ?? 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

const IDENTITY_CONFIG = (name: string, backend = 'identity', dims = '[ -1 ]'): string => `name: "${name}"
backend: "${backend}"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: ${dims} } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: ${dims} } ]
`;

async function model(name: string, config: string | undefined, version = true): Promise<void> {
  await mkdir(join(repository, name), { recursive: true });
  if (version) await mkdir(join(repository, name, '1'));
  if (config !== undefined) await writeFile(join(repository, name, 'config.pbtxt'), config);
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tritonserver-node-doctor-test-'));
  // A backend directory: one library that opens (a link to the library the
  // suite uses: any loadable .so does), one that is not ELF, one empty.
  backends = join(root, 'backends');
  await mkdir(join(backends, 'identity'), { recursive: true });
  await symlink(LIBRARY, join(backends, 'identity', 'libtriton_identity.so'));
  await mkdir(join(backends, 'broken'));
  await writeFile(join(backends, 'broken', 'libtriton_broken.so'), 'not a shared library');
  await mkdir(join(backends, 'empty'));

  repository = join(root, 'models');
  await model('good', IDENTITY_CONFIG('good'));
  await model('syntax', 'name: "syntax"\nbackend: "identity"\nmax_batch_size: 8\ninput [ { name: "INPUT0" \n');
  await model('bad_dims', IDENTITY_CONFIG('bad_dims', 'identity', '[ -2 ]'));
  await model('no_version', IDENTITY_CONFIG('no_version'), false);
  await model('other_name', IDENTITY_CONFIG('not_other_name'));
  await model('needs_missing_backend', IDENTITY_CONFIG('needs_missing_backend', 'no_such_backend'));
  await model('no_config', undefined);
  await cp(join(MODELS, 'add_sub'), join(repository, 'add_sub'), { recursive: true });
  await model('on_gpu', `${IDENTITY_CONFIG('on_gpu')}instance_group [ { kind: KIND_GPU count: 1 } ]\n`);
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('doctor', () => {
  it('finds the library, starts a server, probes backends and exits 0', async () => {
    const { code, stdout } = await cli(['doctor', '--json', '--backend-directory', backends]);
    expect(code).toBe(0);
    const report = JSON.parse(stdout) as DoctorReport;
    expect(report.ok).toBe(true);
    expect(report.library.found?.path).toBe(LIBRARY);
    expect(report.library.found?.major).toBe(1);
    expect(report.library.attempts[0]).toEqual({ path: LIBRARY, result: 'loaded' });
    // Everything after the library found is listed but not opened.
    expect(report.library.attempts.slice(1).every((a) => a.result === 'not tried')).toBe(true);
    expect(report.server.started).toBe(true);
    expect(report.server.name).toBe('triton');
    expect(report.server.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(report.server.extensions).toContain('model_repository');
    expect(report.node).toEqual({
      version: process.versions.node,
      napi: process.versions.napi,
      platform: process.platform,
      arch: process.arch,
    });
    expect(report.externalBuffers).toBe(true);
    expect(report.backends).toMatchObject({ directory: backends, source: 'option', exists: true });
    const byName = Object.fromEntries(report.backends.found.map((b) => [b.name, b]));
    expect(Object.keys(byName)).toEqual(['broken', 'empty', 'identity']);
    expect(byName.identity).toEqual({ name: 'identity', path: join(backends, 'identity', 'libtriton_identity.so'), opens: true });
    expect(byName.broken?.opens).toBe(false);
    expect(byName.broken?.reason).toMatch(/invalid ELF header|file too short/);
    expect(byName.empty).toMatchObject({ opens: false, reason: 'no libtriton_empty.so or model.py' });
    expect(report.problems).toEqual([
      `backend 'broken' does not open: ${byName.broken?.reason}`,
      "backend 'empty' does not open: no libtriton_empty.so or model.py",
    ]);
  });

  it('prints the same for people', async () => {
    const { code, stdout } = await cli(['doctor', '--backend-directory', backends]);
    expect(code).toBe(0);
    expect(stdout).toContain(`✓ loaded  ${LIBRARY}`);
    expect(stdout).toMatch(/✓ In-process server: triton \d+\.\d+/);
    expect(stdout).toContain(`✓ identity  ${join(backends, 'identity', 'libtriton_identity.so')}`);
    expect(stdout).toContain('Result: an in-process server starts.');
  });

  it('exits 1 and says why when the library does not load', async () => {
    const missing = '/nonexistent/lib/libtritonserver.so';
    const { code, stdout } = await cli(['doctor', '--json', '--library', missing]);
    expect(code).toBe(1);
    const report = JSON.parse(stdout) as DoctorReport;
    expect(report.ok).toBe(false);
    expect(report.library.found).toBeUndefined();
    expect(report.library.attempts).toEqual([
      { path: missing, result: 'failed', reason: `${missing}: cannot open shared object file: No such file or directory` },
    ]);
    expect(report.server).toEqual({ started: false, error: 'no library to start' });
    expect(report.problems).toContain('no usable libtritonserver.so (see the paths tried)');
  });

  it('rejects unknown commands and options with exit code 2', async () => {
    expect((await cli(['fix'])).code).toBe(2);
    const unknown = await cli(['doctor', '--frobnicate']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("Unknown option '--frobnicate'");
  });

  it("lists PyTriton's bundled library after the usual places", async () => {
    const venv = join(root, 'venv');
    const libs = join(venv, 'lib', 'python3.12', 'site-packages', 'nvidia_pytriton.libs');
    await mkdir(libs, { recursive: true });
    const wheel = join(libs, 'libtritonserver-90a4cf82.so');
    await symlink(LIBRARY, wheel);
    const missing = join(root, 'missing', 'libtritonserver.so');
    const env = { PATH: join(root, 'no-bin'), HOME: root, VIRTUAL_ENV: venv, TRITONSERVER_LIBRARY: missing };
    const report = await doctor({ env, backendDirectory: backends });
    const paths = report.library.attempts.map((a) => a.path);
    expect(paths.slice(0, 3)).toEqual([missing, '/opt/tritonserver/lib/libtritonserver.so', 'libtritonserver.so']);
    expect(paths).toContain(wheel);
    expect(report.library.attempts[0]).toMatchObject({ result: 'failed', reason: expect.stringContaining('cannot open shared object file') });
    // Whichever library loads first (the wheel here, Triton's own inside its container), a server starts.
    expect(report.ok).toBe(true);
  });

  it("checks every model's config and the backend it needs", async () => {
    // No nvidia-smi on this PATH (and no python3): no CUDA device is visible.
    const env = { ...process.env, PATH: join(root, 'no-bin') };
    const report = await doctor({ modelRepository: repository, backendDirectory: backends, env });
    expect(report.cuda).toEqual({ devices: [], note: 'nvidia-smi not found' });
    // Broken models do not keep a server from starting.
    expect(report.ok).toBe(true);
    const models = Object.fromEntries((report.modelRepository?.models ?? []).map((m) => [m.name, m]));
    expect(Object.keys(models)).toEqual([
      'add_sub',
      'bad_dims',
      'good',
      'needs_missing_backend',
      'no_config',
      'no_version',
      'on_gpu',
      'other_name',
      'syntax',
    ]);
    expect(models.good).toEqual({ name: 'good', problems: [], backend: 'identity', backendPresent: true });
    expect(models.needs_missing_backend).toEqual({
      name: 'needs_missing_backend',
      problems: [`backend 'no_such_backend' not found in ${backends}`],
      backend: 'no_such_backend',
      backendPresent: false,
    });
    // add_sub is a Python model: the python backend is not in this directory.
    expect(models.add_sub).toMatchObject({ backend: 'python', backendPresent: false });
    expect(models.syntax?.problems).toHaveLength(1);
    expect(models.syntax?.problems[0]).toMatch(/^config\.pbtxt:\d+:\d+: /);
    expect(models.bad_dims?.problems).toEqual([
      'input[0].dims[0]: must be a positive integer or -1 (got -2)',
      'output[0].dims[0]: must be a positive integer or -1 (got -2)',
    ]);
    expect(models.no_version?.problems).toEqual(['no version directory (e.g. 1/)']);
    expect(models.other_name?.problems).toEqual([
      "config.pbtxt names the model 'not_other_name', its directory is 'other_name'",
    ]);
    expect(models.no_config?.problems[0]).toMatch(/^no config\.pbtxt/);
    expect(models.on_gpu?.problems).toEqual(['instance_group[0] has kind KIND_GPU, but no CUDA device is visible']);
    expect(report.problems).toContain(`model 'needs_missing_backend': backend 'no_such_backend' not found in ${backends}`);
  });
});
