/**
 * `Server`: one in-process Triton server. Every call that can block inside
 * Triton runs on libuv's thread pool, so the event loop stays free while
 * models load and unload.
 */
import { existsSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import {
  checkInteger,
  checkName,
  checkObject,
  checkOptionalBoolean,
  checkOptions,
  checkPositiveNumber,
  invalidParameterError,
  isCString,
} from './check.js';
import { TritonError, type ModelLoadFailure } from './errors.js';
import { BoundModels, type BoundHandler, type BoundModelDefinition } from './bound-model.js';
import { Inference } from './inference.js';
import { SharedMemory } from './shared-memory.js';
import { Model } from './model.js';
import type { ServerEventName, ServerEvents } from './model-health.js';
import { validateModelConfig } from './model-config.js';
import { refuseAbortingConfigs } from './model-repository.js';
import {
  findLibrary,
  native,
  pytritonBackendDirectory,
  type LibraryInfo,
  type NativeServer,
  type NativeStopReport,
} from './native.js';
import {
  parseServerOptions,
  serverOptionDefaults,
  serverOptionCalls,
  type OptionCall,
  type ResolvedServerOptions,
  type ServerOptions,
} from './options.js';
import { MetricFamily, type MetricFamilyOptions } from './observability/custom-metrics.js';
import { logIsEnabled, logMessage, type LogLevel } from './observability/logging.js';
import { parseMetricsText, type MetricSample } from './observability/metrics.js';
import { PackageMetrics } from './observability/package-metrics.js';
import { parseStatisticsJson, type ModelStatistics } from './observability/statistics.js';
import type {
  InferenceRequest,
  InferenceResponse,
  InferenceServer,
  LoadModelOptions,
  ModelIndexEntry,
  ModelVersion,
  ServerMetadata,
  UnloadModelOptions,
} from './surface.js';

/** Options of {@link Server.stop}; unknown fields throw `TritonError('INVALID_ARG')`. */
export interface StopOptions {
  /**
   * The bound of this stop, instead of `exitTimeoutSeconds`: `stop()` returns
   * within it. Requests still running after they were cancelled are waited
   * for up to it; Triton's own stop then unloads the models on a thread of
   * its own with an exit timeout of at least 10 s
   * (`TRITONSERVER_ServerSetExitTimeout`, API 1.30), and when that has not
   * finished by the bound `stop()` resolves with `complete: false`: the
   * unloading goes on, and the server is deleted only if it finishes.
   * Without it, `exitTimeoutSeconds` bounds the wait for requests and
   * Triton's stop gets at least 10 s more.
   */
  timeoutMs?: number;
}

/**
 * A server shared with other threads (`server.share()`): a plain value to
 * pass in `workerData` or `postMessage`; `Server.attach(handle)` in the
 * other thread.
 */
export interface SharedServerHandle {
  /** Marks the value as a handle; {@link Server.attach} refuses anything else (INVALID_ARG). */
  readonly kind: 'tritonserver-node/shared-server';
  /** The addon's id of the shared native server (valid in this process only). */
  readonly id: number;
  /** The owner's `exitTimeoutSeconds`, which the attached `Server` uses for its waits. */
  readonly exitTimeoutSeconds: number;
  /** The owner's `outputCopy` option, applied to the attached thread's responses too. */
  readonly outputCopy: boolean;
  /** Whether the owner started with metrics enabled (else the metrics calls reject with UNAVAILABLE). */
  readonly metricsEnabled: boolean;
  /** The owner's model control mode (bound models need 'explicit'). */
  readonly modelControlMode?: 'none' | 'poll' | 'explicit';
  /** The owner's repository of bound models, which attached threads bind theirs in. */
  readonly boundModelRepository?: string;
  /** The owner's model repositories, whose configs a load checks first (see `loadModel`). */
  readonly modelRepositories?: readonly string[];
  /** The owner's `modelConfigName`. */
  readonly modelConfigName?: string;
}

/** What `stop()` left behind. */
export interface StopReport {
  /** Every request finished and every model unloaded in time; the server is deleted. */
  complete: boolean;
  /**
   * Requests still running inside Triton when the exit timeout ran out (their
   * backends ignored cancellation). The server is deleted, and their promises
   * settle, when the last of them comes back — never before.
   */
  requestsInside: number;
  /** Empty when complete; else what was left running, with Triton's message. */
  message: string;
}

const UNLOAD_POLL_MS = 5;
/** How long process.exit() waits for cancelled requests before stopping the servers. */
export const EXIT_WAIT_MS = 5000;
/** The C API minor that brought `ServerOptionsSetModelLoadRetryCount`. */
const RETRY_COUNT_MINOR = 28;
/** The C API minor that brought `ServerSetExitTimeout`. */
const SET_EXIT_TIMEOUT_MINOR = 30;
const LOAD_FIELDS: ReadonlySet<string> = new Set(['config', 'files']);
const UNLOAD_FIELDS: ReadonlySet<string> = new Set(['unloadDependents', 'wait', 'timeoutMs']);
const STOP_FIELDS: ReadonlySet<string> = new Set(['timeoutMs']);
const INDEX_FIELDS: ReadonlySet<string> = new Set(['readyOnly']);

let exitHookInstalled = false;
/**
 * process.exit() runs no environment cleanup hooks: without this, requests
 * in flight would leave Python stub processes and their shared memory
 * behind. Servers are ended synchronously from the 'exit' event instead.
 */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => native.endServersForExit(EXIT_WAIT_MS));
}

/** Failed models of a model index: UNAVAILABLE with a reason other than an unload. */
function failedModels(index: ModelIndexEntry[], only?: string): ModelLoadFailure[] {
  return index
    .filter((entry) => (only === undefined || entry.name === only) && entry.state === 'UNAVAILABLE')
    .filter((entry) => entry.reason !== undefined && entry.reason !== '' && entry.reason !== 'unloaded')
    .map((entry) => ({ name: entry.name, version: entry.version ?? '', reason: entry.reason ?? '' }));
}

/** Triton's error with every failed model and its reason added, as text and as `error.models`. */
function withReasons(error: TritonError, models: ModelLoadFailure[]): TritonError {
  const missing = models.filter((model) => !error.message.includes(model.reason));
  if (missing.length === 0) return error;
  const lines = missing.map((model) => `  - '${model.name}'${model.version ? ` version ${model.version}` : ''}: ${model.reason}`);
  return new TritonError(error.code, `${error.message}:\n${lines.join('\n')}`, { cause: error, models });
}

/**
 * `<root>/backends` for a library at `<root>/lib/libtritonserver.so` when that
 * directory exists: a Triton install keeps its backends beside its library,
 * wherever it was installed (Triton's own default is /opt/tritonserver/backends).
 * A library from PyTriton's wheel gets the wheel's backends.
 */
export function backendDirectoryBeside(libraryPath: string): string | undefined {
  return installFolderBeside(libraryPath, 'backends') ?? pytritonBackendDirectory(libraryPath);
}

/**
 * `<root>/caches` for a library at `<root>/lib/libtritonserver.so` when that
 * directory exists, as for backends: where a Triton install keeps its response
 * caches (`caches/local/libtritoncache_local.so`; Triton's own default is
 * /opt/tritonserver/caches).
 */
export function cacheDirectoryBeside(libraryPath: string): string | undefined {
  return installFolderBeside(libraryPath, 'caches');
}

function installFolderBeside(libraryPath: string, folder: string): string | undefined {
  const libDir = dirname(libraryPath);
  if (basename(libDir) !== 'lib') return undefined;
  const path = join(dirname(libDir), folder);
  return existsSync(path) ? path : undefined;
}

function stopReport(report: NativeStopReport, bound: string, died: string[] = []): StopReport {
  if (report.complete) return { complete: true, requestsInside: 0, message: '' };
  const left = report.requestsInside;
  // Requests queued on a Python instance whose stub died come back about one
  // a second (one execution at a time), cancelled or not: name the cause.
  const deadStubs =
    died.length === 0
      ? ''
      : ` (${died.map((name) => `'${name}'`).join(', ')} had an instance whose Python stub died: Triton fails the requests` +
        ` queued on such an instance one execution at a time, each after about a second, cancelled or not)`;
  const message =
    left > 0
      ? `${left} request${left === 1 ? ' was' : 's were'} still running inside Triton when the exit timeout (${bound}) ran out${deadStubs};` +
        ` the server stops, unloads its models and is deleted once ${left === 1 ? 'it comes' : 'they come'} back`
      : report.unfinished
        ? `Triton's stop had not finished unloading the models when stop()'s bound (${bound}) ran out (a model that does not` +
          ` unload, such as a Python model whose stub died); it goes on in the background, and the server is deleted only if it finishes`
        : `Triton did not finish stopping (${report.message}); the server is left undeleted`;
  process.emitWarning(message, { code: 'TRITONSERVER_STOP_INCOMPLETE' });
  return { complete: false, requestsInside: left, message };
}

/** The addon's server behind a Server, for the native HTTP front end (lib/kserve/native-http.ts); not public. */
export let nativeServerOf: (server: Server) => NativeServer;

export class Server implements InferenceServer, AsyncDisposable {
  static {
    nativeServerOf = (server) => server.#native;
  }
  readonly #native: NativeServer;
  readonly #inference: Inference;
  #stopping: Promise<StopReport> | undefined;

  readonly #exitTimeoutSeconds: number;
  readonly #outputCopy: boolean;
  /** Attached to a server another thread started (`Server.attach`). */
  readonly attached: boolean;
  readonly #metricsEnabled: boolean;
  readonly #metricFamilies = new Set<MetricFamily>();
  #packageMetrics: PackageMetrics | undefined;
  readonly #modelControlMode: 'none' | 'poll' | 'explicit';
  readonly #repositories: readonly string[];
  readonly #configName: string;
  readonly #bound: BoundModels;
  /**
   * System shared memory regions of this server (Triton's system shared
   * memory extension): register a range of a POSIX shared memory segment,
   * then name it in a request in place of an input's data
   * (`{ datatype, shape, sharedMemory: { region, offset, byteSize } }`) or as
   * where an output goes (`outputs: { Y: { sharedMemory: ... } }`).
   * Unregistered when the server stops. See docs/shared-memory.md.
   */
  readonly sharedMemory: SharedMemory;

  private constructor(
    nativeServer: NativeServer,
    inference: Inference,
    settings: {
      exitTimeoutSeconds: number;
      outputCopy: boolean;
      attached: boolean;
      metricsEnabled: boolean;
      recover?: boolean;
      modelControlMode: 'none' | 'poll' | 'explicit';
      boundModelRepository?: string;
      modelRepositories: readonly string[];
      modelConfigName?: string;
    },
  ) {
    this.#native = nativeServer;
    this.#inference = inference;
    this.#exitTimeoutSeconds = settings.exitTimeoutSeconds;
    this.#outputCopy = settings.outputCopy;
    this.attached = settings.attached;
    this.#metricsEnabled = settings.metricsEnabled;
    this.#modelControlMode = settings.modelControlMode;
    this.#repositories = settings.modelRepositories;
    this.#configName = settings.modelConfigName ?? '';
    this.#bound = new BoundModels({
      registerModelRepository: (path) => this.registerModelRepository(path),
      loadModel: async (name, config) => void (await this.loadModel(name, { config })),
      unloadModel: (name) => this.unloadModel(name),
      removeAtEnd: (path) => nativeServer.removeAtEnd(path),
    }, settings.boundModelRepository);
    inference.health.configure(
      {
        reload: async (name) => void (await this.loadModel(name)),
        modelOfInstance: async (instance) => {
          const names = (await this.modelIndex()).map((entry) => entry.name);
          return names.filter((name) => instance.startsWith(`${name}_`)).sort((a, b) => b.length - a.length)[0];
        },
      },
      { recover: settings.recover === true, owner: !settings.attached },
    );
    this.sharedMemory = new SharedMemory(() => {
      if (this.#stopping !== undefined) throw new TritonError('UNAVAILABLE', 'the server has been stopped');
      return this.#native;
    });
  }

  /**
   * A handle other threads attach to this server with (`Server.attach`):
   * one Triton for every event loop, batching across all of them.
   */
  share(): SharedServerHandle {
    if (this.#stopping !== undefined) throw new TritonError('UNAVAILABLE', 'the server has been stopped');
    const id = this.#native.share();
    // Attached threads report unhealthy models to this one, which recovers them.
    this.#inference.health.join(id);
    return {
      kind: 'tritonserver-node/shared-server',
      id,
      exitTimeoutSeconds: this.#exitTimeoutSeconds,
      outputCopy: this.#outputCopy,
      metricsEnabled: this.#metricsEnabled,
      modelControlMode: this.#modelControlMode,
      boundModelRepository: this.#bound.directory(),
      modelRepositories: this.#repositories,
      modelConfigName: this.#configName,
    };
  }

  /**
   * This thread's `Server` over a server another thread started and shared:
   * the same API, with its own completion queue. Its `stop()` lets go of
   * the server (cancelling this thread's requests) and leaves it serving the
   * others; when the owner stops, every call here rejects with UNAVAILABLE.
   * A worker that exits lets go by itself.
   */
  static async attach(handle: SharedServerHandle): Promise<Server> {
    checkObject('Server.attach(handle)', handle);
    if (handle.kind !== 'tritonserver-node/shared-server' || typeof handle.id !== 'number') {
      throw invalidParameterError('Server.attach(handle)', 'a handle from server.share()', handle);
    }
    const inference = new Inference();
    const nativeServer = native.attachServer(handle.id, inference.onResponse, handle.outputCopy === true);
    inference.attach(nativeServer);
    inference.health.join(handle.id);
    installExitHook();
    return new Server(nativeServer, inference, {
      exitTimeoutSeconds: handle.exitTimeoutSeconds,
      outputCopy: handle.outputCopy === true,
      attached: true,
      metricsEnabled: handle.metricsEnabled !== false,
      modelControlMode: handle.modelControlMode ?? 'explicit',
      ...(handle.boundModelRepository === undefined ? {} : { boundModelRepository: handle.boundModelRepository }),
      modelRepositories: Array.isArray(handle.modelRepositories) ? handle.modelRepositories : [],
      modelConfigName: typeof handle.modelConfigName === 'string' ? handle.modelConfigName : '',
    });
  }

  /**
   * Starts a server. Options are validated before anything native runs;
   * the library is found as described in the README (libraryPath,
   * TRITONSERVER_LIBRARY, TRITON_HOME, /opt/tritonserver, loader path,
   * PyTriton's wheel).
   */
  static async start(options: ServerOptions): Promise<Server> {
    const resolved = parseServerOptions(options);
    const library = await findLibrary(resolved.libraryPath);
    const candidates = [library.path];
    const calls = serverOptionCalls(resolved);
    if (resolved.backendDirectory === undefined) {
      const backends = backendDirectoryBeside(library.path);
      if (backends !== undefined) calls.push(['ServerOptionsSetBackendDirectory', backends]);
    }
    if (resolved.cacheDirectory === undefined) {
      const caches = cacheDirectoryBeside(library.path);
      if (caches !== undefined) calls.push(['ServerOptionsSetCacheDirectory', caches]);
    }
    // Triton's documented default is 0, but the in-process options leave the
    // count unset, and then a failing load is retried without end.
    if (resolved.modelLoadRetryCount === undefined && library.minor >= RETRY_COUNT_MINOR) {
      calls.push(['ServerOptionsSetModelLoadRetryCount', 0]);
    }
    // Models Triton loads as it starts: none of them may abort the process.
    const mode = resolved.modelControlMode ?? 'none';
    const startup = resolved.startupModels ?? [];
    if (mode !== 'explicit' || startup.length > 0) {
      const models = mode !== 'explicit' || startup.includes('*') ? undefined : startup;
      await refuseAbortingConfigs(resolved.modelRepository, models, resolved.modelConfigName);
    }
    let started: { nativeServer: NativeServer; inference: Inference };
    try {
      started = await Server.#startNative(candidates, calls, resolved);
    } catch (error) {
      throw await Server.#explainStartFailure(error, candidates, calls, resolved);
    }
    installExitHook();
    return new Server(started.nativeServer, started.inference, {
      exitTimeoutSeconds: resolved.exitTimeoutSeconds ?? serverOptionDefaults.exitTimeoutSeconds,
      outputCopy: resolved.outputCopy ?? false,
      attached: false,
      metricsEnabled: resolved.metrics?.enabled !== false,
      recover: resolved.recoverUnhealthyModels === true,
      modelControlMode: resolved.modelControlMode ?? 'none',
      modelRepositories: resolved.modelRepository,
      modelConfigName: resolved.modelConfigName ?? '',
    });
  }

  static async #startNative(
    candidates: string[],
    calls: readonly OptionCall[],
    resolved: ResolvedServerOptions,
  ): Promise<{ nativeServer: NativeServer; inference: Inference }> {
    const inference = new Inference();
    const nativeServer = await native.startServer(candidates, calls, inference.onResponse, resolved.outputCopy ?? false);
    inference.attach(nativeServer);
    return { nativeServer, inference };
  }

  /**
   * With exitOnError (the default) Triton says only "failed to load all
   * models". The reasons are in a model index, which needs a server: one is
   * started for a moment with exitOnError off, read, and stopped.
   */
  static async #explainStartFailure(
    error: unknown,
    candidates: string[],
    calls: readonly OptionCall[],
    resolved: ResolvedServerOptions,
  ): Promise<unknown> {
    if (!(error instanceof TritonError) || error.code !== 'INTERNAL' || !error.message.includes('failed to load all models')) {
      return error;
    }
    if (resolved.exitOnError === false) return error;
    const diagnostic = [
      ...calls.filter(([fn]) => fn !== 'ServerOptionsSetExitOnError'),
      ['ServerOptionsSetExitOnError', false],
    ] as OptionCall[];
    let probe: NativeServer | undefined;
    try {
      probe = (await Server.#startNative(candidates, diagnostic, resolved)).nativeServer;
      const index = JSON.parse(await probe.modelIndex(false)) as ModelIndexEntry[];
      return withReasons(error, failedModels(index));
    } catch {
      return error;
    } finally {
      await probe?.stop(serverOptionDefaults.exitTimeoutSeconds * 1000).catch(() => undefined);
    }
  }

  /** The libtritonserver.so in use and its C API version. */
  get library(): LibraryInfo {
    return this.#native.library();
  }

  /** Whether stop() has been called. */
  get stopped(): boolean {
    return this.#stopping !== undefined;
  }

  /**
   * Listens for a server event: `modelUnhealthy` (a model's instance was
   * found unhealthy — a Python model whose stub process died — so its
   * requests fail and `model.ready()` is false), `modelRecovered` (it serves
   * again) and `modelRecoveryFailed` (a reload by `recoverUnhealthyModels`
   * failed). Listeners run on this thread; one that throws does not stop
   * the others. See docs/lifetimes.md "Models that heal".
   */
  on<K extends ServerEventName>(event: K, listener: ServerEvents[K]): this {
    this.#inference.health.on(event, listener);
    return this;
  }

  /** Removes a listener added by {@link Server.on}. */
  off<K extends ServerEventName>(event: K, listener: ServerEvents[K]): this {
    this.#inference.health.off(event, listener);
    return this;
  }

  live(): Promise<boolean> {
    return this.#call((s) => s.isLive());
  }

  ready(): Promise<boolean> {
    return this.#call((s) => s.isReady());
  }

  async metadata(): Promise<ServerMetadata> {
    return JSON.parse(await this.#call((s) => s.metadata())) as ServerMetadata;
  }

  async modelIndex(options: { readyOnly?: boolean } = {}): Promise<ModelIndexEntry[]> {
    const { readyOnly } = checkOptions('modelIndex options', options, INDEX_FIELDS);
    checkOptionalBoolean('modelIndex options.readyOnly', readyOnly);
    const text = await this.#call((s) => s.modelIndex(readyOnly ?? false));
    return JSON.parse(text) as ModelIndexEntry[];
  }

  /** A handle on a model; `version` -1 (default) means Triton's choice. */
  model(name: string, version: ModelVersion = -1): Model {
    checkName('model name', name);
    checkInteger('model version', version, -1);
    return new Model(this.#native, this.#inference, name, version);
  }

  /**
   * Loads (or reloads) a model (explicit model control mode). With `config`
   * and `files` the model is loaded from memory. Without `config`, Triton
   * reads the repository's `config.pbtxt`; one whose framework-backend
   * parameter would abort the process (see `abortingParameterProblems` in
   * backend-parameters.ts) is refused first with `INVALID_ARG`.
   */
  async loadModel(name: string, options: LoadModelOptions = {}): Promise<Model> {
    checkName('model name', name);
    checkOptions('loadModel options', options, LOAD_FIELDS);
    if (options.config !== undefined) checkObject('loadModel options.config', options.config);
    if (options.files !== undefined) checkObject('loadModel options.files', options.files);
    const parameters: Array<[string, string | Uint8Array]> = [];
    if (options.config !== undefined) {
      const config = validateModelConfig({ ...options.config, name: options.config.name ?? name });
      if (config.name !== name) {
        throw new TritonError(
          'INVALID_ARG',
          `config.name '${config.name}' does not match the model name '${name}'`,
        );
      }
      parameters.push(['config', JSON.stringify(config)]);
    }
    if (options.files !== undefined) {
      if (options.config === undefined) {
        throw new TritonError('INVALID_ARG', `loading model '${name}' from files needs a config too`);
      }
      for (const [path, content] of Object.entries(options.files)) {
        if (path.startsWith('/') || path.split('/').includes('..')) {
          throw new TritonError('INVALID_ARG', `model file path '${path}' must be relative to the model directory`);
        }
        if (!isCString(path) || path === '') throw invalidParameterError('a model file path', 'a relative path without NUL characters', path);
        if (typeof content !== 'string' && !(content instanceof Uint8Array)) {
          throw invalidParameterError(`model file '${path}'`, 'a string or a Uint8Array', content);
        }
        const bytes = typeof content === 'string' ? new TextEncoder().encode(content) : content;
        parameters.push([`file:${path}`, bytes]);
      }
    }
    // Triton reads the repository's config.pbtxt: refuse one that would abort the process.
    if (options.config === undefined) await this.#call(() => refuseAbortingConfigs(this.#repositories, [name], this.#configName));
    this.#inference.forgetModels();
    try {
      // An instance found unhealthy stays on a plain reload of unchanged
      // files, and never finishes unloading (Triton r25.07): ask for the
      // unload without waiting, so that the load starts a new instance.
      if (this.#inference.health.isUnhealthy(name) && parameters.length === 0) {
        await this.#call((s) => s.unloadModel(name, false));
      }
      await this.#call((s) => s.loadModel(name, parameters));
    } catch (error) {
      throw await this.#withIndexReasons(error, name);
    } finally {
      this.#inference.forgetModels();
    }
    this.#inference.health.replaced(name, 'loaded');
    return this.model(name);
  }

  /** A load error with the reasons Triton's model index gives (which its message may lack). */
  async #withIndexReasons(error: unknown, only?: string): Promise<unknown> {
    if (!(error instanceof TritonError) || this.#stopping !== undefined) return error;
    try {
      return withReasons(error, failedModels(await this.modelIndex(), only));
    } catch {
      return error;
    }
  }

  /** Unloads a model; by default waits until Triton has finished. */
  async unloadModel(name: string, options: UnloadModelOptions = {}): Promise<void> {
    checkName('model name', name);
    checkOptions('unloadModel options', options, UNLOAD_FIELDS);
    checkOptionalBoolean('unloadModel options.unloadDependents', options.unloadDependents);
    checkOptionalBoolean('unloadModel options.wait', options.wait);
    if (options.timeoutMs !== undefined) checkPositiveNumber('unloadModel options.timeoutMs', options.timeoutMs);
    // Triton treats unloading an unknown name as a no-op; say so instead.
    // (Models loaded from memory are not in the index, but are ready.)
    if (!(await this.#busy(name)) && !(await this.modelIndex()).some((entry) => entry.name === name)) {
      throw new TritonError('NOT_FOUND', `model '${name}' is neither loaded nor in the model repository`);
    }
    this.#inference.forgetModels();
    await this.#call((s) => s.unloadModel(name, options.unloadDependents ?? false));
    this.#inference.health.replaced(name, 'unloaded');
    // A bound model ends with its unload (its requests in flight still finish).
    this.#bound.unloaded(name);
    if (options.wait === false) return;
    // Wait until no version is ready or still unloading.
    const timeoutMs = options.timeoutMs ?? this.#exitTimeoutSeconds * 1000;
    const deadline = Date.now() + timeoutMs;
    while (await this.#busy(name)) {
      if (Date.now() >= deadline) {
        throw new TritonError(
          'UNAVAILABLE',
          `model '${name}' is still unloading after ${timeoutMs} ms (its backend has not let go; a Python model whose stub died never does). ` +
            `The unload goes on in Triton; loadModel('${name}') loads a new instance meanwhile.`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, UNLOAD_POLL_MS));
    }
  }

  async #busy(name: string): Promise<boolean> {
    const entries = (await this.modelIndex()).filter((entry) => entry.name === name);
    if (entries.some((entry) => entry.state === 'READY' || entry.state === 'UNLOADING')) return true;
    return entries.length === 0 && (await this.model(name).ready());
  }

  /**
   * Serves `handler` as a Triton model (a bound model): Triton schedules and
   * batches its requests like any model's, and hands each batch to the
   * handler on this thread. It is a real Triton model: in ensembles, served
   * by `serveKServe`, in statistics and metrics. Needs model control mode
   * 'explicit'. See docs/bound-models.md.
   * @throws {@link TritonError} INVALID_ARG for a bad definition,
   *   ALREADY_EXISTS when a model of that name is bound in this process,
   *   UNSUPPORTED in another model control mode, and load errors.
   */
  async bindModel(definition: BoundModelDefinition, handler: BoundHandler): Promise<Model> {
    if (this.#stopping !== undefined) throw new TritonError('UNAVAILABLE', 'the server has been stopped');
    if (this.#modelControlMode !== 'explicit') {
      throw new TritonError(
        'UNSUPPORTED',
        `bindModel needs modelControlMode 'explicit' (the server runs in '${this.#modelControlMode}' mode): a bound model is loaded from a repository of its own`,
      );
    }
    return this.model(await this.#bound.bind(definition, handler));
  }

  /** Unloads a bound model (waiting, as unloadModel does) and lets go of its handler. */
  async unbindModel(name: string): Promise<void> {
    checkName('model name', name);
    await this.#bound.unbind(name);
  }

  /** Re-reads the repositories (poll model control mode). */
  async pollModelRepository(): Promise<void> {
    await this.#call(() => refuseAbortingConfigs(this.#repositories, undefined, this.#configName));
    this.#inference.forgetModels();
    try {
      await this.#call((s) => s.pollModelRepository());
    } catch (error) {
      throw await this.#withIndexReasons(error);
    }
  }

  /**
   * Adds a repository (explicit mode). `nameMapping` maps a model directory
   * name in it to the model name to serve it under.
   */
  async registerModelRepository(path: string, nameMapping: Record<string, string> = {}): Promise<void> {
    checkName('repository path', path);
    checkObject('nameMapping', nameMapping);
    for (const [directory, model] of Object.entries(nameMapping)) {
      checkName('nameMapping key', directory);
      checkName(`nameMapping['${directory}']`, model);
    }
    await this.#call((s) => s.registerModelRepository(path, Object.entries(nameMapping)));
  }

  /**
   * Removes a repository added with {@link Server.registerModelRepository}
   * (explicit mode): Triton no longer looks for models in it.
   *
   * @throws {@link TritonError} Triton's error when `path` is not a
   *   registered repository; `UNAVAILABLE` once the server stopped.
   */
  async unregisterModelRepository(path: string): Promise<void> {
    checkName('repository path', path);
    this.#inference.forgetModels();
    await this.#call((s) => s.unregisterModelRepository(path));
  }

  /** Triton's metrics in Prometheus text format (custom families included). */
  async metrics(): Promise<string> {
    this.#checkMetrics();
    return this.#call((s) => s.metrics());
  }

  /** Triton's metrics parsed: one sample per line of the text. */
  async metricsSamples(): Promise<MetricSample[]> {
    return parseMetricsText(await this.metrics());
  }

  /**
   * A custom metric family in Triton's registry, served with Triton's own
   * metrics. Deleted by `family.delete()` or when the server stops.
   * Histograms need C API 1.34 (UNSUPPORTED on older libraries).
   */
  metricFamily(options: MetricFamilyOptions): MetricFamily {
    if (this.#stopping !== undefined) throw new TritonError('UNAVAILABLE', 'the server has been stopped');
    this.#checkMetrics();
    const family = new MetricFamily(this.library.path, options, (deleted) => this.#metricFamilies.delete(deleted));
    this.#metricFamilies.add(family);
    return family;
  }

  /**
   * The package's own metrics (`tritonserver_node_*`: requests in flight per
   * model, time from `infer()` until Triton accepted the request, event-loop
   * delay). Off until first called; `metricsHandler(server, {
   * packageMetrics: true })` calls it.
   */
  packageMetrics(): PackageMetrics {
    if (this.#stopping !== undefined) throw new TritonError('UNAVAILABLE', 'the server has been stopped');
    if (this.#packageMetrics === undefined) {
      this.#packageMetrics = new PackageMetrics();
      this.#inference.observer = this.#packageMetrics;
    }
    return this.#packageMetrics;
  }

  #checkMetrics(): void {
    if (!this.#metricsEnabled) {
      throw new TritonError('UNAVAILABLE', 'metrics are disabled: the server was started with metrics: { enabled: false }');
    }
  }

  /** Statistics of every ready model version, typed (see `Model.statistics`). */
  async statistics(): Promise<ModelStatistics[]> {
    return parseStatisticsJson(await this.#call((s) => s.modelStatistics('', -1)));
  }

  /**
   * Writes one record through Triton's logger (`TRITONSERVER_LogMessage`),
   * so it lands where Triton's own lines go, in Triton's format. Triton's
   * logger is process-wide.
   */
  log(level: LogLevel, message: string, where: { file?: string; line?: number } = {}): void {
    logMessage(this.library.path, level, message, where.file ?? 'tritonserver-node', where.line ?? 0);
  }

  /** Whether Triton's logger writes records of this level (`TRITONSERVER_LogIsEnabled`). */
  logEnabled(level: LogLevel): boolean {
    return logIsEnabled(this.library.path, level);
  }

  /** Runs one inference on the named model; see `Model.infer`. */
  async infer(modelName: string, request: InferenceRequest): Promise<InferenceResponse> {
    checkObject('request', request);
    return this.model(modelName, request.modelVersion ?? -1).infer(request);
  }

  /**
   * Stops the server: requests in flight are cancelled, Triton waits for
   * those still running (up to the exit timeout) and unloads the models, and
   * the server is deleted — never while a request is still inside it: past
   * the timeout, deletion waits for the last one (see `StopReport`).
   * Idempotent; every later call rejects with UNAVAILABLE.
   */
  stop(options: StopOptions = {}): Promise<StopReport> {
    if (this.#stopping !== undefined) return this.#stopping;
    let boundMs: number | undefined;
    try {
      const { timeoutMs } = checkOptions('stop options', options, STOP_FIELDS);
      if (timeoutMs !== undefined) {
        if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs < 0 || timeoutMs > 0xffff_ffff * 1000) {
          throw invalidParameterError('stop options.timeoutMs', 'a non-negative number of milliseconds', timeoutMs);
        }
        if (this.library.minor < SET_EXIT_TIMEOUT_MINOR) {
          throw new TritonError(
            'UNSUPPORTED',
            `stop({ timeoutMs }) needs TRITONSERVER_ServerSetExitTimeout (C API 1.${SET_EXIT_TIMEOUT_MINOR}); the loaded library (${this.library.path}) implements 1.${this.library.minor}`,
          );
        }
        boundMs = timeoutMs;
      }
    } catch (error) {
      return Promise.reject(error);
    }
    // Custom metrics are Triton's process-wide objects: delete them once,
    // here. A refusal leaves that family to Triton.
    for (const family of [...this.#metricFamilies]) {
      try {
        family.delete();
      } catch {
        this.#metricFamilies.delete(family);
      }
    }
    this.#packageMetrics?.close();
    const died = this.#inference.health.diedModels();
    this.#inference.health.close();
    // With a timeout the whole stop returns by it; without one, the exit
    // timeout bounds the wait for requests, and Triton's own stop gets at
    // least 10 s more to unload the models.
    const waitMs = boundMs ?? this.#exitTimeoutSeconds * 1000;
    const bound = boundMs === undefined ? `${this.#exitTimeoutSeconds} s` : boundMs % 1000 === 0 ? `${boundMs / 1000} s` : `${boundMs} ms`;
    this.#stopping = this.#native.stop(waitMs, boundMs !== undefined).then((report) => {
      this.#bound.close();
      return stopReport(report, bound, died);
    });
    return this.#stopping;
  }

  /**
   * `await using server = await Server.start(...)`: the same as
   * {@link Server.stop} with no options, the report dropped (a stop that
   * leaves something running still warns, `TRITONSERVER_STOP_INCOMPLETE`).
   */
  async [Symbol.asyncDispose](): Promise<void> {
    // The report is dropped here; stop() warns when something was left running.
    await this.stop();
  }

  async #call<T>(fn: (s: NativeServer) => Promise<T>): Promise<T> {
    if (this.#stopping !== undefined) {
      throw new TritonError('UNAVAILABLE', 'the server has been stopped');
    }
    return fn(this.#native);
  }
}
