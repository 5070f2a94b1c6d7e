/**
 * `Server`: one in-process Triton server. Every call that can block inside
 * Triton runs on libuv's thread pool, so the event loop stays free while
 * models load and unload.
 */
import { existsSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { TritonError } from './errors.js';
import { Inference, type InferenceRequest, type InferenceResponse } from './inference.js';
import { Model, type ModelVersion } from './model.js';
import { validateModelConfig, type ModelConfigInput } from './model-config.js';
import {
  librarySearchPaths,
  native,
  type LibraryInfo,
  type NativeServer,
} from './native.js';
import { parseServerOptions, serverOptionCalls, type ServerOptions } from './options.js';
import { MetricFamily, type MetricFamilyOptions } from './observability/custom-metrics.js';
import { logIsEnabled, logMessage, type LogLevel } from './observability/logging.js';
import { parseMetricsText, type MetricSample } from './observability/metrics.js';
import { PackageMetrics } from './observability/package-metrics.js';
import { parseStatisticsJson, type ModelStatistics } from './observability/statistics.js';

/** `TRITONSERVER_ServerMetadata`. */
export interface ServerMetadata {
  name: string;
  version: string;
  extensions: string[];
}

/** One model of the repository, as `TRITONSERVER_ServerModelIndex` lists it. */
export interface ModelIndexEntry {
  name: string;
  /** Absent for a model that was never loaded. */
  version?: string;
  /** e.g. `READY`, `UNAVAILABLE`, `LOADING`, `UNLOADING`. */
  state?: string;
  reason?: string;
}

export interface LoadModelOptions {
  /**
   * A model configuration to use instead of the repository's config.pbtxt,
   * sent as Triton's `config` load parameter (validated first).
   */
  config?: ModelConfigInput;
  /**
   * Model files by path relative to the model directory (e.g. `1/model.py`),
   * sent as `file:` load parameters so a model loads from memory. Needs
   * `config`.
   */
  files?: Record<string, Uint8Array | string>;
}

export interface UnloadModelOptions {
  /** Also unload models that depend on it (ensembles). Default false. */
  unloadDependents?: boolean;
  /** Resolve only once the model has finished unloading. Default true. */
  wait?: boolean;
}

const UNLOAD_POLL_MS = 5;

/**
 * `<root>/backends` for a library at `<root>/lib/libtritonserver.so` when that
 * directory exists: a Triton install keeps its backends beside its library,
 * wherever it was installed (Triton's own default is /opt/tritonserver/backends).
 */
export function backendDirectoryBeside(libraryPath: string): string | undefined {
  const libDir = dirname(libraryPath);
  if (basename(libDir) !== 'lib') return undefined;
  const backends = join(dirname(libDir), 'backends');
  return existsSync(backends) ? backends : undefined;
}

export class Server implements AsyncDisposable {
  readonly #native: NativeServer;
  readonly #inference: Inference;
  #stopping: Promise<void> | undefined;
  readonly #metricsEnabled: boolean;
  readonly #metricFamilies = new Set<MetricFamily>();
  #packageMetrics: PackageMetrics | undefined;

  private constructor(nativeServer: NativeServer, inference: Inference, metricsEnabled: boolean) {
    this.#native = nativeServer;
    this.#inference = inference;
    this.#metricsEnabled = metricsEnabled;
  }

  /**
   * Starts a server. Options are validated before anything native runs;
   * the library is found as described in the README (libraryPath,
   * TRITONSERVER_LIBRARY, TRITON_HOME, /opt/tritonserver, loader path).
   */
  static async start(options: ServerOptions): Promise<Server> {
    const resolved = parseServerOptions(options);
    const candidates = librarySearchPaths(resolved.libraryPath);
    const calls = serverOptionCalls(resolved);
    if (resolved.backendDirectory === undefined) {
      const backends = backendDirectoryBeside((await native.apiVersion(candidates)).path);
      if (backends !== undefined) calls.push(['ServerOptionsSetBackendDirectory', backends]);
    }
    const inference = new Inference();
    const nativeServer = await native.startServer(
      candidates,
      calls,
      inference.onResponse,
      resolved.outputCopy ?? false,
    );
    const server = new Server(nativeServer, inference, resolved.metrics?.enabled !== false);
    inference.attach(nativeServer);
    return server;
  }

  /** The libtritonserver.so in use and its C API version. */
  get library(): LibraryInfo {
    return this.#native.library();
  }

  /** Whether stop() has been called. */
  get stopped(): boolean {
    return this.#stopping !== undefined;
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
    const text = await this.#call((s) => s.modelIndex(options.readyOnly ?? false));
    return JSON.parse(text) as ModelIndexEntry[];
  }

  /** A handle on a model; `version` -1 (default) means Triton's choice. */
  model(name: string, version: ModelVersion = -1): Model {
    return new Model(this.#native, this.#inference, name, version);
  }

  /**
   * Loads (or reloads) a model (explicit model control mode). With `config`
   * and `files` the model is loaded from memory.
   */
  async loadModel(name: string, options: LoadModelOptions = {}): Promise<Model> {
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
        const bytes = typeof content === 'string' ? new TextEncoder().encode(content) : content;
        parameters.push([`file:${path}`, bytes]);
      }
    }
    this.#inference.forgetModels();
    try {
      await this.#call((s) => s.loadModel(name, parameters));
    } finally {
      this.#inference.forgetModels();
    }
    return this.model(name);
  }

  /** Unloads a model; by default waits until Triton has finished. */
  async unloadModel(name: string, options: UnloadModelOptions = {}): Promise<void> {
    // Triton treats unloading an unknown name as a no-op; say so instead.
    // (Models loaded from memory are not in the index, but are ready.)
    if (!(await this.#busy(name)) && !(await this.modelIndex()).some((entry) => entry.name === name)) {
      throw new TritonError('NOT_FOUND', `model '${name}' is neither loaded nor in the model repository`);
    }
    this.#inference.forgetModels();
    await this.#call((s) => s.unloadModel(name, options.unloadDependents ?? false));
    if (options.wait === false) return;
    // Wait until no version is ready or still unloading.
    while (await this.#busy(name)) await new Promise((resolve) => setTimeout(resolve, UNLOAD_POLL_MS));
  }

  async #busy(name: string): Promise<boolean> {
    const entries = (await this.modelIndex()).filter((entry) => entry.name === name);
    if (entries.some((entry) => entry.state === 'READY' || entry.state === 'UNLOADING')) return true;
    return entries.length === 0 && (await this.model(name).ready());
  }

  /** Re-reads the repositories (poll model control mode). */
  async pollModelRepository(): Promise<void> {
    this.#inference.forgetModels();
    await this.#call((s) => s.pollModelRepository());
  }

  /**
   * Adds a repository (explicit mode). `nameMapping` maps a model directory
   * name in it to the model name to serve it under.
   */
  async registerModelRepository(path: string, nameMapping: Record<string, string> = {}): Promise<void> {
    await this.#call((s) => s.registerModelRepository(path, Object.entries(nameMapping)));
  }

  async unregisterModelRepository(path: string): Promise<void> {
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
  infer(modelName: string, request: InferenceRequest): Promise<InferenceResponse> {
    return this.model(modelName, request.modelVersion ?? -1).infer(request);
  }

  /**
   * Stops the server: requests in flight may finish (up to
   * `exitTimeoutSeconds`), models unload, the server is deleted. Idempotent;
   * every later call rejects with UNAVAILABLE.
   */
  stop(): Promise<void> {
    if (this.#stopping === undefined) {
      // Custom metrics are Triton's process-wide objects: delete them once,
      // here. stop() itself never throws: a refusal leaves that family to Triton.
      for (const family of [...this.#metricFamilies]) {
        try {
          family.delete();
        } catch {
          this.#metricFamilies.delete(family);
        }
      }
      this.#packageMetrics?.close();
    }
    this.#stopping ??= this.#native.stop().then(() => this.#inference.abandonPending());
    return this.#stopping;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  async #call<T>(fn: (s: NativeServer) => Promise<T>): Promise<T> {
    if (this.#stopping !== undefined) {
      throw new TritonError('UNAVAILABLE', 'the server has been stopped');
    }
    return fn(this.#native);
  }
}
