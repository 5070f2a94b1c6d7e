// What `npm pack` ships and whether it installs and loads on a machine with
// no compiler: the package is packed from a copy of this tree (prepack builds
// the N-API prebuild and dist/ there, leaving this tree's build/ alone), then
// installed into a fresh project with PATH holding only node, npm and sh.
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from './helpers.js';

const LIBRARY = process.env.TRITONSERVER_LIBRARY!;
/** Installing the tarball and running a script with it: seconds, minutes on a busy machine. */
const SLOW = 600_000;
/**
 * Packing compiles the addon twice (x64, arm64) and builds dist/: about 80 s
 * on 2 free cores, more when the rest of the suite runs beside it, and over
 * 5 minutes beside `npm run test:stress`'s busy processes and another build.
 * The bound only keeps a hung build from holding the suite.
 */
const PACKING = 1_200_000;

let root: string;
let consumer: string;
/** PATH for everything the consumer runs: node, npm and sh; no g++, cc, make or python. */
let bareBin: string;
let packed: Array<{ path: string }>;

function run(
  command: string,
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(command, args, { cwd, env, encoding: 'utf8', maxBuffer: 64 << 20 }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** The environment of the consumer: no compiler on PATH, no TRITONSERVER_* from the suite. */
function bareEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { HOME: process.env.HOME, PATH: bareBin, npm_config_update_notifier: 'false' };
  if (process.env.npm_config_cache) env.npm_config_cache = process.env.npm_config_cache;
  return env;
}

/**
 * What README.md and docs/deployment.md promise the prebuilds need, as the
 * newest symbol version asked of each library: glibc 2.34, and GCC 4.5's
 * libgcc_s (Node.js itself links libgcc_s); nothing of libstdc++, which is
 * linked into the addon, so GCC 11's (RHEL 9) does.
 */
const PROMISED: Record<string, string> = { GLIBC: '2.34', GCC: '4.5.0' };
/** The prebuilds, the ELF machine each is for (as readelf names it) and glibc's first version there. */
const PREBUILDS = [
  { arch: 'linux-x64', machine: 'Advanced Micro Devices X86-64', firstGlibc: 'GLIBC_2.2.5' },
  { arch: 'linux-arm64', machine: 'AArch64', firstGlibc: 'GLIBC_2.17' },
];
/** The only libraries a prebuild may need: glibc's own, and libgcc_s. */
const LIBRARIES = /^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|ld-linux-(x86-64|aarch64)\.so\.[12]|libgcc_s\.so\.1)$/;

function readelf(args: string[], file: string): string {
  // binutils' readelf reads an ELF file of any architecture.
  return execFileSync('readelf', [...args, '--wide', file], { encoding: 'utf8', maxBuffer: 64 << 20 });
}

/** Numeric version compare of e.g. '2.2.5' and '2.34'. */
function compareVersions(a: string, b: string): number {
  const x = a.split('.').map(Number);
  const y = b.split('.').map(Number);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/**
 * What an ELF shared object needs from the loader (machine, libraries,
 * versions with the symbols that use each) and what it exports.
 */
function dynamicNeeds(file: string): {
  machine: string;
  libraries: string[];
  versions: Map<string, { library: string; symbols: string[] }>;
  exports: string[];
} {
  const machine = /^\s*Machine:\s+(.+?)\s*$/m.exec(readelf(['--file-header'], file))?.[1] ?? '';
  const libraries = [...readelf(['--dynamic'], file).matchAll(/\(NEEDED\)\s+Shared library: \[(.+?)\]/g)].map((m) => m[1]!);
  const versions = new Map<string, { library: string; symbols: string[] }>();
  const info = readelf(['--version-info'], file);
  let library = '';
  for (const line of info.slice(info.indexOf("Version needs section '.gnu.version_r'")).split('\n')) {
    const fileLine = /File: (\S+)/.exec(line);
    if (fileLine) library = fileLine[1]!;
    const name = /Name: (\S+)/.exec(line);
    if (name) versions.set(name[1]!, { library, symbols: [] });
  }
  const exports: string[] = [];
  for (const line of readelf(['--dyn-syms', '--demangle'], file).split('\n')) {
    const symbol = /\sUND\s+(.+)@([A-Za-z0-9_.]+)(?: \(\d+\))?$/.exec(line);
    if (symbol) versions.get(symbol[2]!)?.symbols.push(symbol[1]!);
    const defined = /^\s*\d+:\s+\S+\s+\d+\s+\S+\s+(?:GLOBAL|WEAK|UNIQUE)\s+\S+\s+(?!UND)\S+\s+(.+)$/.exec(line);
    if (defined) exports.push(defined[1]!);
  }
  return { machine, libraries, versions, exports };
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'tritonserver-node-pack-'));
  // The tree as git would commit it (tracked and new files, nothing ignored).
  const source = join(root, 'source');
  const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
  })
    .split('\0')
    .filter((f) => f !== '');
  for (const file of files) {
    mkdirSync(dirname(join(source, file)), { recursive: true });
    cpSync(join(REPO_ROOT, file), join(source, file), { dereference: false });
  }
  symlinkSync(join(REPO_ROOT, 'node_modules'), join(source, 'node_modules'));

  const pack = join(root, 'pack');
  mkdirSync(pack);
  const result = await run('npm', ['pack', '--json', '--pack-destination', pack], source, { ...process.env, JOBS: '2' });
  expect(result.code, result.stderr).toBe(0);
  // npm prints the JSON last, after whatever the prepack scripts printed
  // (which may hold '[' too, e.g. under CI=true): its first line is "[".
  const lines = result.stdout.split('\n');
  const jsonStart = lines.lastIndexOf('[');
  expect(jsonStart, result.stdout).toBeGreaterThanOrEqual(0);
  const [info] = JSON.parse(lines.slice(jsonStart).join('\n')) as Array<{ filename: string; files: Array<{ path: string }> }>;
  packed = info!.files;
  // Kept for test/arm64-smoke.sh (.ci/run runs it next), which would pack again without it.
  mkdirSync(join(REPO_ROOT, 'build', 'pack'), { recursive: true });
  cpSync(join(pack, info!.filename), join(REPO_ROOT, 'build', 'pack', info!.filename));

  bareBin = join(root, 'bin');
  mkdirSync(bareBin);
  symlinkSync(process.execPath, join(bareBin, 'node'));
  // sh too: npm runs every script through it.
  for (const tool of ['npm', 'npx', 'sh']) {
    symlinkSync(execFileSync('/bin/sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).trim(), join(bareBin, tool));
  }

  consumer = join(root, 'consumer');
  mkdirSync(consumer);
  writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module' }));
  // npm 11 skips a dependency's install script until it is approved: the
  // prebuild must load without it.
  const install = await run(
    'npm',
    ['install', join(pack, info!.filename), '--prefer-offline', '--no-audit', '--no-fund'],
    consumer,
    bareEnv(),
  );
  expect(install.code, install.stderr).toBe(0);
}, PACKING);

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

describe('npm pack', () => {
  it('ships dist/, the types, the linux-x64 prebuild and the native sources', () => {
    const paths = packed.map((f) => f.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        'package.json',
        'README.md',
        'dist/index.js',
        'dist/index.cjs',
        'dist/index.d.ts',
        'dist/index.d.cts',
        'dist/cli.js',
        'dist/client.js',
        'dist/client.cjs',
        'dist/client.d.ts',
        'dist/proto/inference.proto',
        'prebuilds/linux-x64/tritonserver-node.node',
        'prebuilds/linux-arm64/tritonserver-node.node',
        'binding.gyp',
        'native/addon.cc',
        'native/core/loader.cc',
        'native/core/triton_api.h',
      ]),
    );
  });

  it('ships no tests, fixtures, benchmarks or build directories', () => {
    const unwanted = packed.map((f) => f.path).filter((p) => /^(test|bench|build|examples|deploy|lib|\.ci)\//.test(p) || /\.test\./.test(p));
    expect(unwanted).toEqual([]);
  });
});

describe('the installed package, without a compiler', () => {
  const installed = (): string => join(consumer, 'node_modules', 'tritonserver-node');

  it('ships the prebuild, and nothing was compiled', () => {
    expect(readFileSync(join(installed(), 'prebuilds', 'linux-x64', 'tritonserver-node.node')).length).toBeGreaterThan(0);
    // node-gyp would have left build/ behind.
    expect(existsSync(join(installed(), 'build'))).toBe(false);
  });

  it('ships each prebuild for its machine (ELF x86-64, AArch64)', () => {
    for (const { arch, machine } of PREBUILDS) {
      expect(dynamicNeeds(join(installed(), 'prebuilds', arch, 'tritonserver-node.node')).machine, arch).toBe(machine);
    }
  });

  it(`ships prebuilds that need at most glibc ${PROMISED.GLIBC} and GCC ${PROMISED.GCC}'s libgcc_s, no libstdc++, as the README promises`, () => {
    const problems: string[] = [];
    for (const { arch, firstGlibc } of PREBUILDS) {
      const needs = dynamicNeeds(join(installed(), 'prebuilds', arch, 'tritonserver-node.node'));
      for (const [name, { library, symbols }] of needs.versions) {
        const [, namespace = '', version = ''] = /^([A-Z]+)_(\d+(?:\.\d+)*)$/.exec(name) ?? [];
        const newest = PROMISED[namespace];
        if (newest === undefined || compareVersions(version, newest) > 0) {
          problems.push(`${arch}: ${library} ${name} for ${symbols.slice(0, 2).join(', ')}${symbols.length > 2 ? ', …' : ''}`);
        }
      }
      for (const library of needs.libraries) {
        if (!LIBRARIES.test(library)) problems.push(`${arch}: needs ${library}`);
      }
      // The tables were read: every prebuild needs glibc's oldest symbols.
      expect([...needs.versions.keys()], arch).toContain(firstGlibc);
    }
    expect(problems).toEqual([]);
    for (const doc of ['README.md', 'docs/deployment.md']) {
      expect(readFileSync(join(REPO_ROOT, doc), 'utf8').replace(/\s+/g, ' '), doc).toContain(`glibc ≥ ${PROMISED.GLIBC}`);
    }
  });

  it("exports only Node-API's and the nodejs backend's entry points: its own libstdc++ stays inside", () => {
    for (const { arch } of PREBUILDS) {
      const { exports } = dynamicNeeds(join(installed(), 'prebuilds', arch, 'tritonserver-node.node'));
      expect(exports, arch).toContain('napi_register_module_v1');
      expect(exports, arch).toContain('TRITONBACKEND_ModelInstanceExecute');
      expect(exports.filter((name) => !/^(napi_register_module_v1|node_api_module_get_api_version_v1|TRITONBACKEND_\w+)$/.test(name)), arch).toEqual([]);
    }
  });

  it('runs its approved install script (node-gyp-build), which finds the prebuild and compiles nothing', async () => {
    const approve = await run('npm', ['install-scripts', 'approve', 'tritonserver-node'], consumer, bareEnv());
    expect(approve.code, approve.stderr).toBe(0);
    const allowed = JSON.parse(readFileSync(join(consumer, 'package.json'), 'utf8')) as { allowScripts?: Record<string, boolean> };
    // From the registry the key is tritonserver-node@<version>; from a tarball, its file: spec.
    expect(Object.entries(allowed.allowScripts ?? {})).toEqual([[expect.stringContaining('tritonserver-node'), true]]);
    const rebuild = await run('npm', ['rebuild', 'tritonserver-node', '--foreground-scripts'], consumer, bareEnv());
    expect(rebuild.code, rebuild.stdout + rebuild.stderr).toBe(0);
    const { version } = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(rebuild.stdout).toContain(`> tritonserver-node@${version} install\n> node-gyp-build`);
    expect(rebuild.stdout).toContain('rebuilt dependencies successfully');
    expect(existsSync(join(installed(), 'build'))).toBe(false);
  }, SLOW);

  it('imports from ESM and opens the library', async () => {
    const script = `
      import { Server, TritonError, apiVersion } from 'tritonserver-node';
      console.log(JSON.stringify({
        start: typeof Server.start,
        error: new TritonError('NOT_FOUND', 'x').code,
        version: await apiVersion({ libraryPath: ${JSON.stringify(LIBRARY)} }),
      }));`;
    const { code, stdout, stderr } = await run('node', ['--input-type=module', '-e', script], consumer, bareEnv());
    expect(code, stderr).toBe(0);
    expect(JSON.parse(stdout)).toEqual({ start: 'function', error: 'NOT_FOUND', version: { major: 1, minor: expect.any(Number) } });
  });

  it('requires from CommonJS and opens the library', async () => {
    const script = `
      const { Server, apiVersion } = require('tritonserver-node');
      apiVersion({ libraryPath: ${JSON.stringify(LIBRARY)} }).then((version) =>
        console.log(JSON.stringify({ start: typeof Server.start, version })));`;
    const { code, stdout, stderr } = await run('node', ['--input-type=commonjs', '-e', script], consumer, bareEnv());
    expect(code, stderr).toBe(0);
    expect(JSON.parse(stdout)).toEqual({ start: 'function', version: { major: 1, minor: expect.any(Number) } });
  });

  it('imports tritonserver-node/client from ESM and CommonJS; without its optional transport it says what to install', async () => {
    // Plain HTTP goes through the addon (no undici needed: the refused connection is the error);
    // the JS transport needs undici, which this consumer lacks.
    const esm = `
      import { Client, TritonError } from 'tritonserver-node/client';
      const refused = { connectTimeoutMs: 300, retry: { attempts: 1 } };
      const native = await Client.connect('http://127.0.0.1:1', refused).catch((e) => e);
      const error = await Client.connect('http://127.0.0.1:1', { ...refused, transport: 'js' }).catch((e) => e);
      console.log(JSON.stringify({ connect: typeof Client.connect, native: native.message, isTritonError: error instanceof TritonError, code: error.code, message: error.message }));`;
    const fromEsm = await run('node', ['--input-type=module', '-e', esm], consumer, bareEnv());
    expect(fromEsm.code, fromEsm.stderr).toBe(0);
    expect(JSON.parse(fromEsm.stdout)).toEqual({
      connect: 'function',
      native: expect.stringContaining('ECONNREFUSED'),
      isTritonError: true,
      code: 'UNAVAILABLE',
      message: expect.stringContaining('needs the optional peer dependency undici: npm install undici'),
    });
    const cjs = `
      const { Client } = require('tritonserver-node/client');
      Client.connect('grpc://127.0.0.1:1').catch((e) => console.log(JSON.stringify({ code: e.code, message: e.message })));`;
    const fromCjs = await run('node', ['--input-type=commonjs', '-e', cjs], consumer, bareEnv());
    expect(fromCjs.code, fromCjs.stderr).toBe(0);
    expect(JSON.parse(fromCjs.stdout)).toEqual({ code: 'UNAVAILABLE', message: expect.stringContaining('npm install @grpc/proto-loader') });
  });

  it('runs `npx tritonserver-node doctor`', async () => {
    const { code, stdout, stderr } = await run('npx', ['--no-install', 'tritonserver-node', 'doctor', '--json', '--library', LIBRARY], consumer, bareEnv());
    expect(code, stderr).toBe(0);
    const report = JSON.parse(stdout) as { ok: boolean; library: { found?: { path: string } } };
    expect(report.ok).toBe(true);
    expect(report.library.found?.path).toBe(LIBRARY);
  }, SLOW);

  it("type-checks a consumer's ESM and CommonJS code against the shipped types", async () => {
    writeFileSync(
      join(consumer, 'esm.ts'),
      `import { Server, TritonError, type ServerOptions, type InferenceResponse } from 'tritonserver-node';
const options: ServerOptions = { modelRepository: '/models', modelControlMode: 'explicit' };
// @ts-expect-error modelControlMode is one of 'none' | 'poll' | 'explicit'
const wrong: ServerOptions = { modelRepository: '/models', modelControlMode: 'auto' };
export async function main(): Promise<InferenceResponse | TritonError> {
  const server = await Server.start(options);
  const model = await server.loadModel('identity_fp32');
  return model.infer({ inputs: { INPUT0: new Float32Array([1, 2]) } });
}
export { wrong };
`,
    );
    writeFileSync(
      join(consumer, 'cjs.cts'),
      `import triton = require('tritonserver-node');
export const started: Promise<triton.Server> = triton.Server.start({ modelRepository: '/models' });
`,
    );
    writeFileSync(
      join(consumer, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          lib: ['ES2022', 'ESNext.Disposable'],
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          // The consumer's code is checked against the shipped types; their
          // own bodies (and zod's) are not re-checked, which costs most of
          // the time. A type that resolved to any would show: the expected
          // error in esm.ts would then be missing (TS2578, unused directive).
          skipLibCheck: true,
          types: ['node'],
          typeRoots: [join(REPO_ROOT, 'node_modules', '@types')],
        },
        files: ['esm.ts', 'cjs.cts'],
      }),
    );
    const tsc = join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const { code, stdout, stderr } = await run('node', [tsc, '-p', 'tsconfig.json'], consumer, bareEnv());
    expect(code, stdout + stderr).toBe(0);
    // The check can fail: a type error in consumer code is reported.
    writeFileSync(join(consumer, 'esm.ts'), `import { Server } from 'tritonserver-node';\nexport const n: number = Server.start;\n`);
    const broken = await run('node', [tsc, '-p', 'tsconfig.json'], consumer, bareEnv());
    expect(broken.code).not.toBe(0);
    expect(broken.stdout).toContain("esm.ts(2,14): error TS2322");
  }, SLOW);
});
