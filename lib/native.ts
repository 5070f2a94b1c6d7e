/**
 * The single place that loads the addon, and the types of everything it
 * exports: the rest of lib/ never sees an untyped native value.
 */
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TritonError } from './errors.js';


/**
 * The addon calls this once per completion of a request, all that one JS
 * tick drained in a row: the request's token, Triton's FINAL flag, then
 * either an error, or the model version, response parameters and each
 * output flat as name, datatype, rank, dims…, bytes. A FINAL flag without a
 * response has only the first two arguments.
 */
export type NativeResponseCallback = (
  token: number,
  final: boolean,
  error: TritonError | undefined,
  version?: number,
  parameters?: Record<string, string | number | boolean>,
  ...outputs: Array<string | number | ArrayBuffer>
) => void;

/** One field of an input flattened for the addon: name, datatype (enum), rank, dims…, data. */
export type NativeInputField = string | number | ArrayBufferView;

export interface LibraryInfo {
  path: string;
  major: number;
  minor: number;
}

export interface LiveObjects {
  /** Request contexts not yet freed (in flight or awaiting release). */
  requests: number;
  /** Triton responses not yet deleted. */
  responses: number;
  /** Output buffers not yet freed (JS-held outputs count until collected). */
  outputBuffers: number;
  /** Requests still holding their JS input memory for Triton. */
  inputReferences: number;
}

export interface NativeServer {
  library(): LibraryInfo;
  isLive(): Promise<boolean>;
  isReady(): Promise<boolean>;
  metadata(): Promise<string>;
  modelIndex(readyOnly: boolean): Promise<string>;
  modelIsReady(name: string, version: number): Promise<boolean>;
  modelMetadata(name: string, version: number): Promise<string>;
  modelConfig(name: string, version: number): Promise<string>;
  modelStatistics(name: string, version: number): Promise<string>;
  modelBatchProperties(name: string, version: number): Promise<number>;
  modelTransactionProperties(name: string, version: number): Promise<number>;
  loadModel(name: string, parameters?: Array<[string, string | Uint8Array]>): Promise<void>;
  unloadModel(name: string, unloadDependents: boolean): Promise<void>;
  pollModelRepository(): Promise<void>;
  registerModelRepository(path: string, mapping: Array<[string, string]>): Promise<void>;
  unregisterModelRepository(path: string): Promise<void>;
  metrics(): Promise<string>;
  stop(): Promise<void>;
  /**
   * Starts a request; throws synchronously when Triton refuses it. Options
   * come positionally (undefined = not set), then each input flat as name,
   * datatype (enum), rank, dims…, data.
   */
  infer(
    model: string,
    version: number,
    outputs: string[] | null,
    id: string | undefined,
    priority: number | undefined,
    timeoutUs: number | undefined,
    flags: number | undefined,
    correlationId: number | bigint | string | undefined,
    parameters: Array<[string, string | number | bigint | boolean]> | undefined,
    ...inputs: NativeInputField[]
  ): number;
  cancel(token: number): void;
  inFlight(): number;
}

export type OptionCallArgs = ReadonlyArray<string | number | boolean>;

/** An opaque native object (a custom metric family or metric). */
export type NativeHandle = { readonly __brand: 'NativeHandle' };

/** Observability functions of the addon (native/metrics.cc, native/logging.cc). */
export interface NativeObservability {
  metricFamilyNew(libraryPath: string, kind: number, name: string, description: string): NativeHandle;
  metricFamilyDelete(family: NativeHandle): void;
  /** labels flat as name, value, …; buckets for histograms. */
  metricNew(family: NativeHandle, labels: string[], buckets: number[] | undefined): NativeHandle;
  metricDelete(metric: NativeHandle): void;
  metricValue(metric: NativeHandle): number;
  metricIncrement(metric: NativeHandle, amount: number): void;
  metricSet(metric: NativeHandle, value: number): void;
  metricObserve(metric: NativeHandle, value: number): void;
  metricKind(metric: NativeHandle): number;
  logIsEnabled(libraryPath: string, level: number): boolean;
  logMessage(libraryPath: string, level: number, file: string, line: number, message: string): void;
  /**
   * Arms a TIMESTAMPS trace for the next request this thread submits
   * (native/trace.cc). Resolves once Triton released it, with its records
   * flat as trace id, parent id, model, version, activity, timestamp (ns).
   */
  traceNext(libraryPath: string): Promise<Array<bigint | string | number>>;
  /** Drops the armed trace when the request was not submitted. */
  traceCancel(): void;
  /** Triton trace objects not yet deleted. */
  liveTraces(): number;
}

export interface NativeAddon extends NativeObservability {
  setErrorClass(errorClass: typeof TritonError): void;
  apiVersion(candidates: string[]): Promise<LibraryInfo>;
  startServer(
    candidates: string[],
    optionCalls: ReadonlyArray<readonly [string, ...OptionCallArgs]>,
    onResponse: NativeResponseCallback,
    copyOutputs: boolean,
  ): Promise<NativeServer>;
  liveObjects(): LiveObjects;
}

function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('tritonserver-node: package.json not found');
    dir = parent;
  }
  return dir;
}

function loadAddon(): NativeAddon {
  const require = createRequire(import.meta.url);
  const load = require('node-gyp-build') as (dir: string) => NativeAddon;
  const addon = load(packageRoot());
  addon.setErrorClass(TritonError);
  return addon;
}

export const native: NativeAddon = loadAddon();

/**
 * Where libtritonserver.so is looked for, in order: `TRITONSERVER_LIBRARY`,
 * `$TRITON_HOME/lib`, NVIDIA's container path, then the dynamic loader's
 * own search path. An explicit `libraryPath` option is the only candidate:
 * asking for one library and silently getting another would be worse than
 * an error.
 */
export function librarySearchPaths(
  libraryPath: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): string[] {
  if (libraryPath) return [libraryPath];
  const paths: string[] = [];
  if (env.TRITONSERVER_LIBRARY) paths.push(env.TRITONSERVER_LIBRARY);
  if (env.TRITON_HOME) paths.push(join(env.TRITON_HOME, 'lib', 'libtritonserver.so'));
  paths.push('/opt/tritonserver/lib/libtritonserver.so', 'libtritonserver.so');
  return [...new Set(paths)];
}

/** Counts of live native objects, for tests and leak hunting. */
export function liveObjects(): LiveObjects {
  return native.liveObjects();
}

/** The C API version of the library that `libraryPath` (or the search) finds. */
export async function apiVersion(options: { libraryPath?: string } = {}): Promise<{ major: number; minor: number }> {
  const { major, minor } = await native.apiVersion(librarySearchPaths(options.libraryPath));
  return { major, minor };
}
