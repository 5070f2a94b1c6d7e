/**
 * `tritonserver-node doctor`: what this machine offers the package — which
 * libtritonserver.so the search finds (and why every other candidate
 * failed), whether an in-process server starts, its backends, GPUs, and the
 * models of a repository checked the way the package checks configs.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { isTritonError } from '../errors.js';
import { checkModelConfig, parseModelConfig, type ModelConfig } from '../model-config.js';
import { allLibraryCandidates, native, type LibraryInfo } from '../native.js';
import { Server, backendDirectoryBeside } from '../server.js';

/** Triton's default when nothing else says where the backends are. */
const DEFAULT_BACKEND_DIRECTORY = '/opt/tritonserver/backends';
const NVIDIA_SMI_TIMEOUT_MS = 5000;

export interface DoctorOptions {
  /** Check this library only (like the `libraryPath` server option). */
  libraryPath?: string;
  backendDirectory?: string;
  /** Check every model of this repository. */
  modelRepository?: string;
  env?: NodeJS.ProcessEnv;
}

export interface LibraryAttempt {
  path: string;
  /** `loaded`: the library the package would use; `not tried`: an earlier one was found. */
  result: 'loaded' | 'failed' | 'not tried';
  reason?: string;
}

export interface BackendReport {
  name: string;
  /** `libtriton_<name>.so`, or `model.py` for a Python-based backend. */
  path: string;
  /** Whether the dynamic loader opens it (libtritonserver.so loaded first, as Triton does). */
  opens: boolean;
  reason?: string;
}

export interface ModelReport {
  name: string;
  /** Problems that would keep Triton from loading it; empty when it looks loadable. */
  problems: string[];
  /** The backend it needs (`ensemble` needs none), undefined when it cannot be told. */
  backend?: string;
  backendPresent?: boolean;
}

export interface DoctorReport {
  /** An in-process server started: the package works on this machine. */
  ok: boolean;
  node: { version: string; napi: string; platform: string; arch: string };
  externalBuffers: boolean;
  library: { attempts: LibraryAttempt[]; found?: LibraryInfo };
  server: { started: boolean; name?: string; version?: string; extensions?: string[]; error?: string };
  backends: {
    directory: string;
    /** How the directory was chosen, in the order Server.start() chooses it. */
    source: 'option' | 'beside the library' | "Triton's default";
    exists: boolean;
    found: BackendReport[];
  };
  cuda: { devices: string[]; note?: string };
  modelRepository?: { path: string; models: ModelReport[]; error?: string };
  /** Every problem found, one line each. */
  problems: string[];
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The loader's reason for one candidate, out of the addon's "tried:" list. */
function reasonFor(path: string, error: unknown): string {
  const text = message(error);
  const line = text.split('\n').find((l) => l.startsWith(`  - ${path}: `));
  return line ? line.slice(`  - ${path}: `.length) : text;
}

/** Tries the candidates one by one, in the search's order, until one loads. */
async function searchLibrary(options: DoctorOptions): Promise<DoctorReport['library']> {
  const candidates = await allLibraryCandidates(options.libraryPath, options.env ?? process.env);
  const attempts: LibraryAttempt[] = [];
  let found: LibraryInfo | undefined;
  for (const path of candidates) {
    if (found) {
      attempts.push({ path, result: 'not tried' });
      continue;
    }
    try {
      found = await native.apiVersion([path]);
      attempts.push({ path, result: 'loaded' });
    } catch (error) {
      attempts.push({ path, result: 'failed', reason: reasonFor(path, error) });
    }
  }
  return found ? { attempts, found } : { attempts };
}

function backendDirectory(options: DoctorOptions, library: LibraryInfo | undefined): DoctorReport['backends'] {
  let directory = DEFAULT_BACKEND_DIRECTORY;
  let source: DoctorReport['backends']['source'] = "Triton's default";
  const beside = library ? backendDirectoryBeside(library.path) : undefined;
  if (options.backendDirectory !== undefined) {
    directory = resolve(options.backendDirectory);
    source = 'option';
  } else if (beside !== undefined) {
    directory = beside;
    source = 'beside the library';
  }
  return { directory, source, exists: existsSync(directory), found: [] };
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function subdirectories(path: string): string[] {
  try {
    return readdirSync(path).filter((name) => isDirectory(join(path, name))).sort();
  } catch {
    return [];
  }
}

/** `<dir>/<name>/libtriton_<name>.so`, or a Python-based backend's `<dir>/<name>/model.py`. */
function backendFile(directory: string, name: string): string | undefined {
  const library = join(directory, name, `libtriton_${name}.so`);
  if (existsSync(library)) return library;
  const python = join(directory, name, 'model.py');
  return existsSync(python) ? python : undefined;
}

/** Opens each backend library; only meaningful once libtritonserver.so is loaded. */
function probeBackends(directory: string, libraryLoaded: boolean): BackendReport[] {
  const reports: BackendReport[] = [];
  for (const name of subdirectories(directory)) {
    const path = backendFile(directory, name);
    if (path === undefined) {
      reports.push({ name, path: join(directory, name), opens: false, reason: `no libtriton_${name}.so or model.py` });
    } else if (path.endsWith('.py')) {
      // Runs through the python backend's library, which is probed itself.
      reports.push({ name, path, opens: true });
    } else if (!libraryLoaded) {
      reports.push({ name, path, opens: false, reason: 'not opened: no libtritonserver.so loaded' });
    } else {
      const reason = native.probeLibrary(path);
      reports.push(reason === null ? { name, path, opens: true } : { name, path, opens: false, reason });
    }
  }
  return reports;
}

/** Triton's platform names and the backends that serve them. */
const PLATFORM_BACKENDS: Record<string, string> = {
  tensorrt_plan: 'tensorrt',
  onnxruntime_onnx: 'onnxruntime',
  pytorch_libtorch: 'pytorch',
  tensorflow_graphdef: 'tensorflow',
  tensorflow_savedmodel: 'tensorflow',
};

/** Default model file names by backend, for configs that name neither backend nor platform. */
const MODEL_FILES: Array<[string, string]> = [
  ['model.py', 'python'],
  ['model.onnx', 'onnxruntime'],
  ['model.plan', 'tensorrt'],
  ['model.pt', 'pytorch'],
  ['model.savedmodel', 'tensorflow'],
  ['model.graphdef', 'tensorflow'],
];

function versionDirectories(modelDir: string): string[] {
  return subdirectories(modelDir).filter((name) => /^\d+$/.test(name));
}

function neededBackend(config: { backend?: string; platform?: string }, modelDir: string): string | undefined {
  if (config.backend) return config.backend;
  if (config.platform === 'ensemble') return 'ensemble';
  if (config.platform) return PLATFORM_BACKENDS[config.platform];
  for (const version of versionDirectories(modelDir)) {
    for (const [file, backend] of MODEL_FILES) if (existsSync(join(modelDir, version, file))) return backend;
  }
  return undefined;
}

function checkModel(repository: string, name: string, backends: string, gpus: number): ModelReport {
  const modelDir = join(repository, name);
  const problems: string[] = [];
  if (versionDirectories(modelDir).length === 0) problems.push('no version directory (e.g. 1/)');
  const configPath = join(modelDir, 'config.pbtxt');
  if (!existsSync(configPath)) {
    problems.push('no config.pbtxt (Triton derives one only with strictModelConfig: false, and only for some backends)');
    return { name, problems };
  }
  let config: ModelConfig;
  try {
    // parseModelConfig applies the schema; checkModelConfig is the rest of validateModelConfig.
    config = parseModelConfig(readFileSync(configPath, 'utf8'));
  } catch (error) {
    problems.push(...message(error).split('\n'));
    return { name, problems };
  }
  config = { ...config, name: config.name || name };
  const invalid = checkModelConfig(config);
  if (invalid.length > 0) {
    problems.push(...invalid);
    return { name, problems };
  }
  if (config.name !== name) problems.push(`config.pbtxt names the model '${config.name}', its directory is '${name}'`);
  // Triton refuses such a model on a server without GPUs (INVALID_ARG at load).
  config.instance_group?.forEach((group, i) => {
    if (group.kind === 'KIND_GPU' && gpus === 0) {
      problems.push(`instance_group[${i}] has kind KIND_GPU, but no CUDA device is visible`);
    }
  });
  const backend = neededBackend(config, modelDir);
  if (backend === undefined) {
    problems.push('cannot tell which backend serves it (no backend, platform or known model file)');
    return { name, problems };
  }
  if (backend === 'ensemble') return { name, problems, backend, backendPresent: true };
  const present = backendFile(backends, backend) !== undefined;
  if (!present) problems.push(`backend '${backend}' not found in ${backends}`);
  return { name, problems, backend, backendPresent: present };
}

function checkRepository(path: string, backends: string, gpus: number): NonNullable<DoctorReport['modelRepository']> {
  const repository = resolve(path);
  if (!isDirectory(repository)) return { path: repository, models: [], error: 'not a directory' };
  return { path: repository, models: subdirectories(repository).map((name) => checkModel(repository, name, backends, gpus)) };
}

/** GPUs as `nvidia-smi -L` lists them; none when it is absent or fails. */
function cudaDevices(env: NodeJS.ProcessEnv): Promise<DoctorReport['cuda']> {
  return new Promise((resolveDevices) => {
    execFile('nvidia-smi', ['-L'], { env, timeout: NVIDIA_SMI_TIMEOUT_MS, encoding: 'utf8' }, (error, stdout) => {
      if (error) {
        const missing = (error as NodeJS.ErrnoException).code === 'ENOENT';
        resolveDevices({ devices: [], note: missing ? 'nvidia-smi not found' : `nvidia-smi failed: ${error.message}` });
        return;
      }
      const devices = stdout.split('\n').map((l) => l.trim()).filter((l) => l.startsWith('GPU '));
      const visible = env.CUDA_VISIBLE_DEVICES;
      resolveDevices(visible === undefined ? { devices } : { devices, note: `CUDA_VISIBLE_DEVICES=${visible}` });
    });
  });
}

/** Starts a server on an empty repository to read what the library reports about itself. */
async function tryServer(library: LibraryInfo, backends: string): Promise<DoctorReport['server']> {
  const repository = mkdtempSync(join(tmpdir(), 'tritonserver-node-doctor-'));
  try {
    const server = await Server.start({
      modelRepository: repository,
      modelControlMode: 'explicit',
      libraryPath: library.path,
      backendDirectory: backends,
      // Info lines go to stdout, where --json writes the report.
      log: { info: false },
    });
    try {
      const { name, version, extensions } = await server.metadata();
      return { started: true, name, version, extensions };
    } finally {
      await server.stop();
    }
  } catch (error) {
    return { started: false, error: isTritonError(error) ? `${error.code}: ${error.message}` : message(error) };
  } finally {
    rmSync(repository, { recursive: true, force: true });
  }
}

export async function doctor(options: DoctorOptions = {}): Promise<DoctorReport> {
  const env = options.env ?? process.env;
  const library = await searchLibrary(options);
  const backends = backendDirectory(options, library.found);
  backends.found = probeBackends(backends.directory, library.found !== undefined);
  const server = library.found
    ? await tryServer(library.found, backends.directory)
    : { started: false, error: 'no library to start' };
  const report: DoctorReport = {
    ok: server.started,
    node: {
      version: process.versions.node,
      napi: process.versions.napi ?? 'unknown',
      platform: process.platform,
      arch: process.arch,
    },
    externalBuffers: native.externalBuffersAllowed(),
    library,
    server,
    backends,
    cuda: await cudaDevices(env),
    problems: [],
  };
  if (options.modelRepository !== undefined) {
    report.modelRepository = checkRepository(options.modelRepository, backends.directory, report.cuda.devices.length);
  }

  const problems = report.problems;
  if (!library.found) problems.push('no usable libtritonserver.so (see the paths tried)');
  if (library.found && !server.started) problems.push(`the server does not start: ${server.error}`);
  if (!backends.exists) problems.push(`backend directory ${backends.directory} does not exist`);
  for (const b of backends.found) if (!b.opens) problems.push(`backend '${b.name}' does not open: ${b.reason}`);
  const repo = report.modelRepository;
  if (repo?.error) problems.push(`model repository ${repo.path}: ${repo.error}`);
  for (const m of repo?.models ?? []) for (const p of m.problems) problems.push(`model '${m.name}': ${p}`);
  return report;
}

/** The report for people. */
export function formatReport(report: DoctorReport): string {
  const lines: string[] = [];
  const mark = (good: boolean): string => (good ? '✓' : '✗');
  lines.push(`Node.js ${report.node.version} (N-API ${report.node.napi}) on ${report.node.platform}-${report.node.arch}`);
  lines.push(`External buffers: ${report.externalBuffers ? 'allowed (zero-copy outputs)' : 'not allowed (outputs are copied)'}`);
  lines.push('', 'libtritonserver.so, in search order:');
  for (const a of report.library.attempts) {
    const tag = a.result === 'loaded' ? '✓ loaded' : a.result === 'failed' ? '✗ failed' : '- not tried';
    lines.push(`  ${tag}  ${a.path}${a.reason ? `: ${a.reason}` : ''}`);
  }
  const found = report.library.found;
  if (found) lines.push(`  using ${found.path} (C API ${found.major}.${found.minor})`);
  const s = report.server;
  lines.push('', `${mark(s.started)} In-process server: ${s.started ? `${s.name} ${s.version}` : s.error}`);
  if (s.extensions) lines.push(`  extensions: ${s.extensions.join(', ')}`);
  const b = report.backends;
  lines.push('', `Backends in ${b.directory} (${b.source})${b.exists ? '' : ': directory does not exist'}`);
  for (const backend of b.found) {
    lines.push(`  ${mark(backend.opens)} ${backend.name}  ${backend.path}${backend.reason ? `: ${backend.reason}` : ''}`);
  }
  if (b.exists && b.found.length === 0) lines.push('  (none)');
  lines.push('', `CUDA devices: ${report.cuda.devices.length > 0 ? '' : 'none'}${report.cuda.note ? ` (${report.cuda.note})` : ''}`);
  for (const device of report.cuda.devices) lines.push(`  ${device}`);
  const repo = report.modelRepository;
  if (repo) {
    lines.push('', `Model repository ${repo.path}${repo.error ? `: ${repo.error}` : ''}`);
    for (const m of repo.models) {
      const backend = m.backend ? ` [${m.backend}${m.backendPresent ? '' : ', missing'}]` : '';
      lines.push(`  ${mark(m.problems.length === 0)} ${m.name}${backend}`);
      for (const p of m.problems) lines.push(`      ${p}`);
    }
  }
  lines.push('');
  if (report.problems.length === 0) lines.push('No problems found.');
  else lines.push(`${report.problems.length} problem(s):`, ...report.problems.map((p) => `  - ${p}`));
  lines.push(report.ok ? 'Result: an in-process server starts.' : 'Result: no in-process server can start here.');
  return lines.join('\n');
}
