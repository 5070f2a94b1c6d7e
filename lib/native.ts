/**
 * Loads the addon (the file `addon-file.ts` finds) and sets it up, and types
 * everything it exports: the rest of lib/ never sees an untyped native
 * value. The one other user of the file is the client's native transport
 * (`client/native-grpc.ts`), which takes only its channel class, typed here.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { checkName, checkOptions } from './check.js';
import { TritonError, isTritonError } from './errors.js';
import { loadAddonFile } from './addon-file.js';

const API_VERSION_FIELDS: ReadonlySet<string> = new Set(['libraryPath']);


/**
 * The addon calls this with a batch of completions, all that one JS tick
 * drained in a row, each as six arguments and its fields: the request's
 * token, Triton's FINAL flag, an error or undefined, the model version
 * (undefined without a response), the number of response parameters
 * (undefined for none), the number of fields that follow; the fields are
 * each output flat as name, datatype + 16 × where (OUTPUT_WHERE), rank,
 * dims…, then its bytes as `where` says, and last the parameters as name,
 * value pairs. A name is its index in `responseNames`, or the name itself
 * past that table's room. A FINAL flag without a response, and a failure,
 * have no fields.
 */
export type NativeResponseCallback = (...completions: Array<ResponseField | TritonError | undefined>) => void;

/**
 * Where an output's bytes are, after its dims: its own ArrayBuffer; a buffer
 * shared with the drain's other small outputs (64 bytes or less), offset,
 * size (to be copied out: a typed array that small lives in V8's heap); or
 * the caller's buffer for it, whose size follows.
 */
export const OUTPUT_WHERE = { own: 0, shared: 1, caller: 2 } as const;

/** One field of a response the addon delivers (see NativeResponseCallback). */
export type ResponseField = string | number | boolean | ArrayBuffer;

/**
 * A request's options for the addon, positionally (undefined = not set):
 * outputs wanted (undefined = all), id, priority, timeout in µs, sequence
 * flags, correlation id, parameters, caller output buffers as
 * [name, view, allocate if too small].
 */
export type NativeRequestOptions = [
  outputs: string[] | undefined,
  id: string | undefined,
  priority: number | undefined,
  timeoutUs: number | undefined,
  flags: number | undefined,
  correlationId: number | bigint | string | undefined,
  parameters: Array<[string, string | number | bigint | boolean]> | undefined,
  outputBuffers: Array<[string, ArrayBufferView | NativeSharedMemorySpan, boolean]> | undefined,
];

/** A range of a registered shared memory region (native/core/shared-memory.h): region, offset, byteSize. */
export type NativeSharedMemorySpan = [region: string, offset: number, byteSize: number];

/**
 * A model or input name held by the addon (`nativeName()`): infer() shares
 * it instead of reading a JS string at every request.
 */
export type NativeName = { readonly nativeName: unique symbol };

/** One field of an input flattened for the addon: name, datatype (enum), rank, dims…, data. */
export type NativeInputField = NativeName | number | ArrayBufferView | NativeSharedMemorySpan;

/** The libtritonserver.so that was loaded, and the C API version it reports. */
export interface LibraryInfo {
  /** The path the library was opened by (the search candidate that worked). */
  path: string;
  /** `TRITONSERVER_API_VERSION_MAJOR` of the library (`TRITONSERVER_ApiVersion`). */
  major: number;
  /** `TRITONSERVER_API_VERSION_MINOR` of the library. */
  minor: number;
}

export interface NativeLiveObjects {
  /** Request contexts not yet freed (in flight or awaiting release). */
  requests: number;
  /** Triton responses not yet deleted. */
  responses: number;
  /** Output buffers not yet freed (JS-held outputs count until collected). */
  outputBuffers: number;
  /** Requests still holding their JS input memory for Triton. */
  inputReferences: number;
}

/**
 * Counts of the addon's live native objects (across every server of this
 * thread) and of pending requests, as {@link liveObjects} returns them: all
 * zero once every request completed and its outputs were collected or disposed.
 */
export interface LiveObjects extends NativeLiveObjects {
  /** Requests whose promise or stream still waits for a completion (lib/inference.ts). */
  pending: number;
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
  /**
   * Cancels what is in flight, waits up to waitSeconds for it, then stops and
   * deletes the server (at once, or once the last request is back).
   */
  stop(waitMs: number, bounded?: boolean): Promise<NativeStopReport>;
  /**
   * Queues a request (throws on bad arguments); `flush()` hands this tick's
   * requests to Triton, whose refusal then arrives as the request's one,
   * final, failed completion. Options are undefined when none is set (the
   * addon then reads no more of them), then each input flat as name,
   * datatype (enum), rank, dims…, data.
   */
  infer(model: NativeName, version: number, options: NativeRequestOptions | undefined, ...inputs: NativeInputField[]): number;
  /** Submits the requests queued since the last call (once per tick). */
  flush(): void;
  cancel(token: number): void;
  inFlight(): number;
  /** The id another thread attaches with (`attachServer`). */
  share(): number;
  /** A directory removed if this thread's environment ends before stop() (worker terminated, process exit). */
  removeAtEnd(path: string): void;
  /** System shared memory regions of this server (native/core/shared-memory.cc). */
  sharedMemory(op: 'register', name: string, key: string, offset: number, byteSize: number): void;
  sharedMemory(op: 'unregister', name?: string): void;
  sharedMemory(op: 'status', name?: string): NativeSharedMemoryStatus[];
}

/** One registered region as the addon reports it. */
export interface NativeSharedMemoryStatus {
  name: string;
  key: string;
  offset: number;
  byteSize: number;
}

export interface NativeStopReport {
  complete: boolean;
  requestsInside: number;
  /** Triton's message when its stop ran out of time, else ''. */
  message: string;
  /** A bounded stop returned before Triton's own stop (still running on a thread of its own) finished. */
  unfinished: boolean;
}

export type OptionCallArgs = ReadonlyArray<string | number | boolean>;

/** An opaque native object (a custom metric family or metric). */
export type NativeHandle = { readonly __brand: 'NativeHandle' };

/** Observability functions of the addon (native/observability/metrics.cc, native/observability/logging.cc). */
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
   * (native/observability/trace.cc). Resolves once Triton released it, with its records
   * flat as trace id, parent id, model, version, activity, timestamp (ns).
   */
  traceNext(libraryPath: string): Promise<Array<bigint | string | number>>;
  /** Drops the armed trace when the request was not submitted. */
  traceCancel(): void;
  /** Triton trace objects not yet deleted. */
  liveTraces(): number;
}

export interface NativeAddon extends NativeObservability {
  /** The names responses repeat (outputs, parameters), appended to by the addon; fields name them by index. */
  readonly responseNames: readonly string[];
  setErrorClass(errorClass: typeof TritonError): void;
  apiVersion(candidates: string[]): Promise<LibraryInfo>;
  startServer(
    candidates: string[],
    optionCalls: ReadonlyArray<readonly [string, ...OptionCallArgs]>,
    onResponse: NativeResponseCallback,
    copyOutputs: boolean,
  ): Promise<NativeServer>;
  liveObjects(): NativeLiveObjects;
  /** The client's native gRPC channel; absent where the addon was built without nghttp2's header. */
  readonly GrpcChannel?: NativeGrpcChannelClass;
  /** The client's native HTTP/1.1 channel. */
  readonly HttpChannel: NativeHttpChannelClass;
  /** Whether the native client channels and engines can do TLS here (Node exports OpenSSL 3 to addons). */
  readonly nativeTls: boolean;
  /** Whether the native channels and engines can compress here (Node exports its zlib to addons). */
  readonly nativeCompression: boolean;
  /** Whether the native gRPC engine can run here (built with nghttp2's header, and Node exports nghttp2). */
  readonly nativeGrpc: boolean;
  /** glibc's malloc_trim(0); false where the C library has none. */
  trimMallocHeap(): boolean;
  /** Synchronously ends every server of this environment (process 'exit'). */
  endServersForExit(waitMs: number): void;
  /** This thread's way into a server another thread started and shared. */
  attachServer(shareId: number, onResponse: NativeResponseCallback, copyOutputs: boolean): NativeServer;
  /** The name held natively, for infer() (see NativeName). */
  nativeName(name: string): NativeName;
  /** Detaches each ArrayBuffer (response.dispose()); already detached ones are skipped. */
  detachBuffers(...buffers: ArrayBuffer[]): void;
  /** null when the dynamic loader opens `path` (RTLD_NOW), else its reason. */
  probeLibrary(path: string): string | null;
  externalBuffersAllowed(): boolean;
  /** Shared memory mappings not yet unmapped, process-wide. */
  liveSharedMemoryMappings(): number;
  /** The backend side of bound models (native/backend/backend.cc). */
  readonly boundModels: NativeBoundModels;
  /** The native HTTP/1.1 front end (native/kserve/http-frontend.cc). */
  readonly NativeHttpFrontend: new (
    server: NativeServer,
    options: NativeHttpOptions,
    onEvent: (kind: NativeHttpEvent, connection: number, bytes: Buffer | undefined) => void,
  ) => NativeHttpFrontend;
}

/** What the native front end tells JS: bytes for Node's parser, a client gone, the loop ended. */
/**
 * The client's native gRPC channel (native/client/grpc-channel.cc): HTTP/2
 * calls on this thread's event loop. A call's messages go without their
 * 5-byte gRPC prefix (the channel writes it); `start` returns the call's id.
 */
export interface NativeGrpcChannel {
  start(path: string, grpcTimeout: string | undefined, headers: string[], message: Uint8Array | undefined, last: boolean): number;
  send(id: number, message: Uint8Array | undefined, last: boolean): void;
  /** Resets the call's stream; no event comes for it any more. */
  cancel(id: number): void;
  /** No new call; the connection closes once the calls in flight are over. */
  close(): void;
}

/**
 * Events of a native channel's calls, flat, in batches, five values each:
 * a message `id, 0, bytes, status, headerLength` (gRPC: a response message
 * as a Buffer, status and headerLength 0; HTTP: see NativeHttpChannel) or
 * the call's end `id, 1, code, message, fault`: a gRPC status code, the
 * message (gRPC: grpc-message as sent), and 0, or where the connection
 * failed 1 when the request may have reached the server and 2 when it
 * surely did not.
 */
export type NativeChannelEvents = (...events: Array<number | string | Uint8Array>) => void;

/**
 * The client's native HTTP/1.1 channel (native/client/http-channel.cc): up
 * to `connections` keep-alive connections, one request at a time on each.
 * `start` takes the request's head (request line and headers, the blank
 * line included) and its body's pieces (written in order, without a copy),
 * and returns the request's id; its response
 * comes as `id, 0, body, status, inferenceHeaderLength (-1: none)`, the body
 * a Uint8Array whose binary part starts 8-byte aligned, or it ends as
 * `id, 1, code, message, fault` (a gRPC status code: 8 for a response past
 * maxMessageBytes, 13 for one it could not read, 14 where the connection
 * failed; fault as NativeChannelEvents').
 */
export interface NativeHttpChannel {
  start(head: string, body: readonly Uint8Array[]): number;
  /** Closes the request's connection; no event comes for it any more. */
  cancel(id: number): void;
  /** No new request; the connections close once the requests in flight are over. */
  close(): void;
}

export type NativeHttpChannelClass = new (
  host: string,
  port: number,
  settings: [connectTimeoutMs: number, keepAliveMs: number, maxMessageBytes: number, connections: number, compress: 0 | 1],
  onEvents: NativeChannelEvents,
  tls?: NativeTlsSettings,
) => NativeHttpChannel;

export type NativeGrpcChannelClass = new (
  host: string,
  port: number,
  authority: string,
  settings: [connectTimeoutMs: number, keepAliveMs: number, maxMessageBytes: number, connections: 1, compress: 0 | 1],
  onEvents: NativeChannelEvents,
  tls?: NativeTlsSettings,
) => NativeGrpcChannel;

/**
 * TLS for a native channel, PEM text: the CAs to trust, the client's
 * certificate (and chain) and key for mutual TLS ('' for none), and the
 * name or address the server's certificate must carry (sent as SNI where
 * it is a name). The channel offers ALPN h2 (gRPC) or http/1.1.
 */
export type NativeTlsSettings = [ca: string, cert: string, key: string, name: string];

export const NATIVE_HTTP_EVENT = { data: 0, close: 1, closed: 2 } as const;
export type NativeHttpEvent = (typeof NATIVE_HTTP_EVENT)[keyof typeof NATIVE_HTTP_EVENT];

export interface NativeHttpOptions {
  /** `grpc`: the listener speaks gRPC (HTTP/2) and hands JS one HTTP/2 connection per client connection. */
  protocol: 'http' | 'grpc';
  host: string;
  port: number;
  maxBodyBytes: number;
  keepAliveTimeoutMs: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  /** false: every request goes to JS. */
  fastPath: boolean;
  /** gRPC: SETTINGS_MAX_CONCURRENT_STREAMS of each connection. */
  maxConcurrentStreams?: number;
  /** gRPC: SETTINGS_MAX_HEADER_LIST_SIZE (bytes of a request's headers as HTTP/2 counts them). */
  maxHeaderListBytes?: number;
  /** gRPC: bytes one connection may hold, both ways, before new calls are refused. */
  maxConnectionBytes?: number;
  /** Serve TLS (lib/kserve/native-tls.ts); absent: plain TCP. */
  tls?: NativeServerTls;
  /** gRPC: compress answers with this where the client accepts it (its grpc-accept-encoding). */
  responseCompression?: 'none' | 'gzip' | 'deflate';
}

/** The native engines' TLS: PEM text, and whether clients must show certificates. */
export interface NativeServerTls {
  cert: string;
  key: string;
  passphrase: string;
  /** CAs the clients' certificates are checked against (requestCert). */
  ca: string;
  requestCert: boolean;
  rejectUnauthorized: boolean;
}

/** The listener; connections are numbered, and JS answers on the ones it was handed. */
export interface NativeHttpFrontend {
  readonly port: number;
  /** The address bound. */
  readonly address: string;
  /** Requests answered natively so far (the rest went to JS). */
  readonly answered: number;
  write(connection: number, bytes: Uint8Array): void;
  /** JS has read `bytes` of what the connection handed it so far: the addon reads on while little is unread. */
  read(connection: number, bytes: number): void;
  /** JS finished answering the request it was handed (HTTP/1.1). */
  done(connection: number): void;
  /** Close once what was written went out. */
  end(connection: number): void;
  destroy(connection: number): void;
  /** New requests all go to JS (which answers 503 while draining). */
  drain(): void;
  /** Stop listening; the `closed` event comes once every connection closed and no request is inside Triton. */
  close(): void;
  /** Waits for the front end's thread (after `closed`). */
  join(): void;
}

/**
 * A request of a batch Triton handed to a bound model: id, inputs as
 * [name, datatype (enum), shape, buffer, byte offset, byte length] (small
 * inputs copied into one buffer the batch's inputs share; larger ones a view
 * of Triton's memory, detached when the batch ends), parameters, requested
 * outputs, correlation id.
 */
export type NativeBoundRequest = [
  id: string,
  inputs: Array<[name: string, datatype: number, shape: number[], data: ArrayBuffer, byteOffset: number, byteLength: number]>,
  parameters: Array<[string, string | number | boolean]>,
  outputs: string[],
  correlationId: number,
];

/** An output sent for a bound model: name, datatype (enum), shape, bytes. */
export type NativeBoundOutput = [name: string, datatype: number, shape: number[], data: ArrayBufferView];

/** A failure for a bound model's request or batch: Triton's error code (enum) and message. */
export type NativeBoundFailure = [code: number, message: string];

/** Called on this thread with a batch to run, or (requests null) that request `cancelledIndex` was cancelled. */
export type NativeBoundDispatcher = (
  model: string,
  batchId: number,
  requests: NativeBoundRequest[] | null,
  cancelledIndex?: number,
) => void;

export interface NativeBoundModels {
  /** Once per thread: where this thread's batches go; `copyInputs` when external ArrayBuffers are not allowed. */
  setDispatcher(dispatcher: NativeBoundDispatcher, copyInputs: boolean): void;
  /** Makes `name` a model this thread serves (process-wide name); ALREADY_EXISTS if bound. */
  bind(name: string, decoupled: boolean, batching: boolean): void;
  /** False when this thread has no model of that name bound. */
  unbind(name: string): boolean;
  /**
   * Answers request `index` of a batch (a decoupled model's final response
   * may have outputs null: only the end of its stream). Returns the message
   * of a failure that replaced bad outputs, else undefined.
   */
  send(batchId: number, index: number, outputs: NativeBoundOutput[] | null, failure: NativeBoundFailure | null, final: boolean): string | undefined;
  /**
   * Ends a batch, after answering each request with `answers` (outputs, or
   * a failure) when given: requests left unanswered fail (with `failure`,
   * else INTERNAL). False if it had ended.
   */
  finish(batchId: number, failure?: NativeBoundFailure | null, answers?: Array<NativeBoundOutput[] | NativeBoundFailure>): boolean;
  /** The addon file, which Triton loads as the bound models' backend. */
  addonPath(): string;
  /** Batches Triton handed over and not yet released, process-wide. */
  liveBatches(): number;
}

function loadAddon(): NativeAddon {
  let addon: NativeAddon;
  try {
    addon = loadAddonFile() as NativeAddon;
  } catch (error) {
    // No prebuild for this platform and no local build: npm 11 skips a
    // dependency's install script (the fallback compile) until approved.
    throw new Error(
      `tritonserver-node: the native addon could not be loaded (${process.platform}-${process.arch}): ${(error as Error).message}\n` +
        'Prebuilds ship for linux-x64 and linux-arm64 (glibc >= 2.34). Elsewhere the addon is compiled at install time, ' +
        'which needs g++, make and python3 ' +
        'and an approved install script: `npm install-scripts approve tritonserver-node && npm rebuild tritonserver-node`.',
      { cause: error },
    );
  }
  addon.setErrorClass(TritonError);
  return addon;
}

export const native: NativeAddon = loadAddon();

/**
 * Where libtritonserver.so is looked for first, in order: `TRITONSERVER_LIBRARY`,
 * `$TRITON_HOME/lib`, NVIDIA's container path, then the dynamic loader's
 * own search path. An explicit `libraryPath` option is the only candidate:
 * asking for one library and silently getting another would be worse than
 * an error. When none of these opens, `findLibrary()` goes on to a
 * Triton bundled by a Python package (`pythonBundledLibraries()`).
 */
export function librarySearchPaths(
  libraryPath: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): string[] {
  if (libraryPath !== undefined) checkName('libraryPath', libraryPath);
  if (libraryPath) return [libraryPath];
  const paths: string[] = [];
  if (env.TRITONSERVER_LIBRARY) paths.push(env.TRITONSERVER_LIBRARY);
  if (env.TRITON_HOME) paths.push(join(env.TRITON_HOME, 'lib', 'libtritonserver.so'));
  paths.push('/opt/tritonserver/lib/libtritonserver.so', 'libtritonserver.so');
  return [...new Set(paths)];
}

/**
 * PyTriton's wheel (`pip install nvidia-pytriton`) ships Triton inside
 * site-packages: auditwheel moves the library into `nvidia_pytriton.libs/`
 * under a hashed name (`libtritonserver-<hash>.so`), the backends stay in
 * `pytriton/tritonserver/backends/`.
 */
const PYTRITON_LIBS = 'nvidia_pytriton.libs';
const PYTRITON_BACKENDS = ['pytriton', 'tritonserver', 'backends'];
const PYTRITON_LIBRARY = /^libtritonserver(-[0-9a-f]+)?\.so$/;
const PYTHON_QUERY_TIMEOUT_MS = 3000;

/** The libtritonserver.so files PyTriton installed under one site-packages directory. */
export function pytritonLibraries(sitePackages: string): string[] {
  const libs = join(sitePackages, PYTRITON_LIBS);
  return entries(libs)
    .filter((name) => PYTRITON_LIBRARY.test(name))
    .sort()
    .map((name) => join(libs, name));
}

/** PyTriton's backend directory for a library found by {@link pytritonLibraries}, when it exists. */
export function pytritonBackendDirectory(libraryPath: string): string | undefined {
  const libs = dirname(libraryPath);
  if (basename(libs) !== PYTRITON_LIBS) return undefined;
  const backends = join(dirname(libs), ...PYTRITON_BACKENDS);
  return existsSync(backends) ? backends : undefined;
}

function entries(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** `<prefix>/lib/python3.X/<leaf>` for every python3.X directory there. */
function versionedDirs(prefix: string, leaf: string): string[] {
  const lib = join(prefix, 'lib');
  return entries(lib)
    .filter((name) => /^python3(\.\d+)?$/.test(name))
    .map((name) => join(lib, name, leaf));
}

/** Site-packages directories at the usual places: the active venv or conda env, the user's, the system's. */
function knownSitePackages(env: NodeJS.ProcessEnv): string[] {
  const dirs: string[] = [];
  for (const prefix of [env.VIRTUAL_ENV, env.CONDA_PREFIX]) {
    if (prefix) dirs.push(...versionedDirs(prefix, 'site-packages'));
  }
  const home = env.HOME ?? homedir();
  dirs.push(...versionedDirs(join(home, '.local'), 'site-packages'));
  dirs.push(...versionedDirs('/usr/local', 'dist-packages'), ...versionedDirs('/usr/local', 'site-packages'));
  dirs.push('/usr/lib/python3/dist-packages', ...versionedDirs('/usr', 'site-packages'));
  return dirs;
}

/** The site-packages directories the `python3` on PATH reports; none when it is absent, slow or fails. */
export function pythonSitePackages(env: NodeJS.ProcessEnv = process.env): Promise<string[]> {
  const script = 'import site; print("\\n".join([*site.getsitepackages(), site.getusersitepackages()]))';
  return new Promise((resolve) => {
    execFile('python3', ['-c', script], { env, timeout: PYTHON_QUERY_TIMEOUT_MS, encoding: 'utf8' }, (error, stdout) => {
      resolve(error ? [] : stdout.split('\n').map((line) => line.trim()).filter((line) => line !== ''));
    });
  });
}

/**
 * Libraries bundled by Python packages on this machine (today: PyTriton),
 * searched in the site-packages directories `python3` reports, then in the
 * usual site-packages locations. Only files that exist are returned.
 */
export async function pythonBundledLibraries(env: NodeJS.ProcessEnv = process.env): Promise<string[]> {
  const dirs = [...(await pythonSitePackages(env)), ...knownSitePackages(env)];
  return [...new Set(dirs.flatMap(pytritonLibraries))];
}

/**
 * Every candidate in search order: {@link librarySearchPaths}, then (without
 * an explicit `libraryPath`) {@link pythonBundledLibraries}.
 */
export async function allLibraryCandidates(
  libraryPath: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string[]> {
  const first = librarySearchPaths(libraryPath, env);
  if (libraryPath) return first;
  return [...new Set([...first, ...(await pythonBundledLibraries(env))])];
}

/**
 * Loads the first library of the search that works. Python packages are
 * asked (a `python3` process) only when nothing before them opened; the error
 * then lists every path tried with the loader's reason for each.
 */
export function findLibrary(
  libraryPath: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Promise<LibraryInfo> {
  const first = librarySearchPaths(libraryPath, env);
  return libraryPath ? native.apiVersion(first) : loadFirstOf(first, env);
}

/** `first`, then the Python-bundled libraries when none of `first` opens. */
export async function loadFirstOf(first: string[], env: NodeJS.ProcessEnv): Promise<LibraryInfo> {
  try {
    return await native.apiVersion(first);
  } catch (error) {
    if (!isTritonError(error) || error.code !== 'UNAVAILABLE') throw error;
    const more = [...new Set([...first, ...(await pythonBundledLibraries(env))])];
    if (more.length === first.length) throw error;
    return native.apiVersion(more);
  }
}

/** Requests waiting for a completion, across every server of this thread (kept by lib/inference.ts). */
export const pendingRequests = { count: 0 };

/** Counts of live native objects and pending requests, for tests and leak hunting. */
export function liveObjects(): LiveObjects {
  return { ...native.liveObjects(), pending: pendingRequests.count };
}

/**
 * Asks the C library to return the free memory its allocator keeps to the
 * system (glibc's `malloc_trim`), so RSS shows what is held rather than what
 * is cached for reuse: for leak hunting (the chaos harness), not for
 * production use. False where the C library has no such call.
 */
export function trimMallocHeap(): boolean {
  return native.trimMallocHeap();
}

/**
 * The C API version of the library that `libraryPath` (or the search, see
 * {@link librarySearchPaths}) finds, without starting a server.
 *
 * @throws {@link TritonError} `UNAVAILABLE` when no candidate library opens
 *   (the message lists each path tried and why); `INVALID_ARG` for unknown
 *   options.
 */
export async function apiVersion(options: { libraryPath?: string } = {}): Promise<{
  /** `TRITONSERVER_API_VERSION_MAJOR` of the library. */
  major: number;
  /** `TRITONSERVER_API_VERSION_MINOR` of the library. */
  minor: number;
}> {
  const { libraryPath } = checkOptions('apiVersion options', options, API_VERSION_FIELDS);
  const { major, minor } = await findLibrary(libraryPath as string | undefined);
  return { major, minor };
}
