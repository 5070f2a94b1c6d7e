/**
 * `Client`: the in-process `Server`/`Model` surface over KServe v2 to one
 * Triton server, several, or every address a DNS name resolves to.
 */
import { lookup } from 'node:dns/promises';
import { get as httpGet } from 'node:http';
import { get as httpsGet } from 'node:https';
import { checkInteger, checkName, checkObject, checkOptions, checkOptionalBoolean, checkPositiveNumber, invalidParameterError, isCString } from '../check.js';
import { TritonError } from '../errors.js';
import type { InferenceRequest, InferenceResponse, ModelMetadata, ModelVersion, LoadModelOptions, ModelIndexEntry, ServerMetadata, UnloadModelOptions, InferenceModel, InferenceServer } from '../surface.js';
import { checkRequest, REQUEST_FIELDS } from '../request-check.js';
import { validateModelConfig, parseModelConfigJson, type ModelConfig } from '../model-config.js';
import type { ModelStatistics } from '../observability/statistics.js';
import { normalizeInput, outputTensor, type Tensor } from '../tensor.js';
import { DATA_TYPES, DATA_TYPE_INFO, type DataType } from '../data-types.js';
import { parseOptions } from '../kserve/shared.js';
import { grpcTransports } from './grpc.js';
import { httpTransports } from './http.js';
import { clientOptionsSchema, type CallOptions, type ClientOptions, type ResolvedClientOptions } from './options.js';
import { ClientMetrics } from './metrics.js';
import { EndpointPool } from './pool.js';
import { startClientSpan, type ClientSpan } from './tracing.js';
import { authority, parseTargets, type HostPort, type ParsedTargets } from './targets.js';
import { ConnectionError, type Call, type DecodedResponse, type EncodedInput, type EncodedRequest, type LoadParameters, type Transport } from './transport.js';

/** An inference request to a remote model: the in-process request, plus headers for this call. */
export interface RemoteInferenceRequest extends InferenceRequest {
  /** Headers (gRPC metadata) for this call, added to the client's. */
  headers?: Record<string, string>;
}

const REMOTE_REQUEST_FIELDS: ReadonlySet<string> = new Set([...REQUEST_FIELDS, 'headers']);
const CALL_FIELDS = ['timeoutMs', 'signal', 'headers'] as const;
const CALL_FIELD_SET: ReadonlySet<string> = new Set(CALL_FIELDS);
const METRICS_FIELDS: ReadonlySet<string> = new Set(['metricsUrl', ...CALL_FIELDS]);
const LOAD_FIELDS: ReadonlySet<string> = new Set(['config', 'files', ...CALL_FIELDS]);
const UNLOAD_FIELDS: ReadonlySet<string> = new Set(['unloadDependents', 'wait', ...CALL_FIELDS]);
const INDEX_FIELDS: ReadonlySet<string> = new Set(['readyOnly', ...CALL_FIELDS]);
const UNLOAD_POLL_MS = 20;
/** How long `unloadModel` waits for the server to finish by default. */
const DEFAULT_UNLOAD_WAIT_MS = 30_000;

function invalid(message: string): TritonError {
  return new TritonError('INVALID_ARG', message);
}

function checkHeaders(name: string, headers: unknown): void {
  if (headers === undefined) return;
  checkObject(name, headers);
  for (const [key, value] of Object.entries(headers)) {
    // A header name is an HTTP token; a value may not break the header line.
    if (typeof value !== 'string' || /[\r\n\0]/.test(value) || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(key)) {
      throw invalidParameterError(`${name}[${JSON.stringify(key)}]`, 'a header name with a string value of one line', value);
    }
  }
}

/** A response as the package gives it: dispose() is a no-op remotely (received bytes are plain JS memory). */
function asResponse(decoded: DecodedResponse): InferenceResponse {
  const response = decoded as InferenceResponse;
  response.dispose = dispose;
  response[Symbol.dispose] = dispose;
  return response;
}
function dispose(): void {}

/** The settings of one call: its deadline and signal (timeout and the caller's abort in one). */
export class CallScope {
  readonly call: Call;
  readonly #controller = new AbortController();
  readonly #timer: NodeJS.Timeout | undefined;
  readonly #caller: AbortSignal | undefined;
  readonly #timeoutMs: number | undefined;
  timedOut = false;

  constructor(timeoutMs: number | undefined, signal: AbortSignal | undefined, headers: Record<string, string> | undefined) {
    this.#caller = signal;
    this.#timeoutMs = timeoutMs;
    if (signal?.aborted) throw new TritonError('CANCELLED', 'the request was aborted before it started', { cause: signal.reason });
    signal?.addEventListener('abort', this, { once: true });
    if (timeoutMs !== undefined) {
      this.#timer = setTimeout(() => {
        this.timedOut = true;
        this.#controller.abort();
      }, timeoutMs);
    }
    this.call = {
      // A backstop for the transport; the timer above is what ends the call on time.
      deadline: timeoutMs === undefined ? undefined : Date.now() + timeoutMs + 1000,
      signal: this.#controller.signal,
      headers: headers ?? {},
    };
  }

  handleEvent(): void {
    this.#controller.abort();
  }

  /** `promise`, or CANCELLED as soon as the call times out or is aborted. */
  race<T>(promise: Promise<T>): Promise<T> {
    const signal = this.#controller.signal;
    if (signal.aborted) return Promise.reject(new TritonError('CANCELLED', 'the call ended'));
    return new Promise<T>((resolve, reject) => {
      const onAbort = (): void => reject(new TritonError('CANCELLED', 'the call ended'));
      signal.addEventListener('abort', onAbort, { once: true });
      promise.then(
        (value) => {
          signal.removeEventListener('abort', onAbort);
          resolve(value);
        },
        (error: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(error);
        },
      );
    });
  }

  /** The error to report: a timeout or an abort as the in-process API says them. */
  error(error: unknown): unknown {
    if (this.timedOut) return Object.assign(new TritonError('CANCELLED', `the request timed out after ${this.#timeoutMs} ms`, { cause: error }), { endpoint: (error as TritonError).endpoint });
    if (this.#caller?.aborted) return Object.assign(new TritonError('CANCELLED', 'the request was aborted', { cause: this.#caller.reason }), { endpoint: (error as TritonError).endpoint });
    return error;
  }

  end(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#caller?.removeEventListener('abort', this);
  }
}

export class Client implements InferenceServer, AsyncDisposable {
  readonly #pool: EndpointPool;
  readonly #options: ResolvedClientOptions;
  readonly #targets: ParsedTargets;
  /** Input data types by model key, fetched once (inputs given without a data type take the model's). */
  readonly #inputTypes = new Map<string, Promise<Map<string, DataType>>>();
  /** The same once fetched: a request reads them without waiting on a promise. */
  readonly #knownInputTypes = new Map<string, Map<string, DataType>>();
  #resolveTimer: NodeJS.Timeout | undefined;
  #metrics: ClientMetrics | undefined;
  #closed = false;

  private constructor(pool: EndpointPool, options: ResolvedClientOptions, targets: ParsedTargets, transport: 'native' | 'js') {
    this.#pool = pool;
    this.#options = options;
    this.#targets = targets;
    this.transport = transport;
  }

  /**
   * Connects to Triton: `grpc://host:8001`, `grpcs://…`, `http://host:8000`,
   * `https://…`, a list of them (one protocol), or `dns:///name:port` (every
   * address the name resolves to, resolved again as it changes). Resolves
   * once an endpoint answers its health route; rejects with UNAVAILABLE when
   * none does within `connectTimeoutMs`.
   */
  static async connect(target: string | readonly string[], options: ClientOptions = {}): Promise<Client> {
    const resolved = parseOptions(clientOptionsSchema, options, 'client options');
    const targets = parseTargets(target, resolved.protocol);
    const tls = targets.tls || resolved.tls !== undefined;
    let pool: EndpointPool;
    let resolve: (() => Promise<void>) | undefined;
    const scheme = targets.protocol === 'grpc' ? (tls ? 'grpcs' : 'grpc') : tls ? 'https' : 'http';
    const endpointOf = (address: HostPort): string => `${scheme}://${authority(address)}`;
    let make: (address: HostPort, servername?: string) => Transport;
    let native = false;
    if (targets.protocol === 'grpc') {
      const grpc = await grpcTransports(resolved, tls);
      native = grpc.native;
      make = (address, servername) => grpc.make({ endpoint: endpointOf(address), host: address.host, port: address.port, tls, ...(servername === undefined ? {} : { servername }) });
    } else {
      const http = await httpTransports(tls, resolved);
      native = http.native;
      make = http.make;
    }
    pool = new EndpointPool(targets.addresses.map((address) => make(address)), resolved);
    const dns = targets.dns;
    if (dns !== undefined) {
      // Every address of the name is an endpoint of the pool; the name is resolved again every resolveIntervalMs.
      resolve = async () => {
        const found = await lookup(dns.host, { all: true });
        pool.replace(
          found.map(({ address }) => {
            const where: HostPort = { host: address, port: dns.port };
            return { endpoint: endpointOf(where), make: () => make(where, dns.host) };
          }),
        );
      };
      try {
        await resolve();
      } catch (error) {
        throw new TritonError('UNAVAILABLE', `could not resolve '${dns.host}': ${(error as Error).message}`, { cause: error });
      }
    }
    const client = new Client(pool, resolved, targets, native ? 'native' : 'js');
    if (resolve !== undefined) {
      const again = resolve;
      const tick = (): void => {
        client.#resolveTimer = setTimeout(() => {
          // A failed resolution keeps the endpoints it had.
          again().catch(() => undefined).finally(() => {
            if (!client.#closed) tick();
          });
        }, resolved.resolveIntervalMs).unref();
      };
      tick();
    }
    try {
      await client.#waitForAnEndpoint();
    } catch (error) {
      await client.close();
      throw error;
    }
    return client;
  }

  /** Every endpoint's health route is asked at once; the first to answer lets connect() resolve. */
  async #waitForAnEndpoint(): Promise<void> {
    const ms = this.#options.connectTimeoutMs;
    if (await this.#pool.whenHealthy(ms)) return;
    const endpoints = this.#pool.endpoints.join(', ') || '(none)';
    const failure = this.#pool.lastFailure;
    const detail = failure === undefined || (failure instanceof TritonError && failure.code === 'CANCELLED') || (failure as Error).name === 'TimeoutError'
      ? `no answer within ${ms} ms (connectTimeoutMs)`
      : (failure as Error).message;
    throw new TritonError('UNAVAILABLE', `could not connect to Triton at ${endpoints}: ${detail}`, { cause: failure });
  }

  /** The endpoints in use now (a `dns:///` HTTP target: one per address). */
  get endpoints(): string[] {
    return this.#pool.endpoints;
  }

  /** The endpoints in the pool now: those whose health route answered and that have not failed since. */
  get healthyEndpoints(): string[] {
    return this.#pool.healthyEndpoints;
  }

  /** The protocol every call uses. */
  get protocol(): 'grpc' | 'http' {
    return this.#targets.protocol;
  }

  /** Who makes the calls: the addon (`'native'`) or `node:http2`/undici (`'js'`); see the `transport` option. */
  readonly transport: 'native' | 'js';

  /** @internal Runs one call on an endpoint, with the call's deadline and abort, retried when `repeatable`. */
  async run<T>(options: CallOptions | undefined, repeatable: boolean, fn: (transport: Transport, call: Call) => Promise<T>): Promise<T> {
    const scope = this.scope(options);
    try {
      return await this.runIn(scope, repeatable, fn);
    } catch (error) {
      throw scope.error(error);
    } finally {
      scope.end();
    }
  }

  /** @internal The deadline and abort of one call (or of several steps that make one call). */
  scope(options: CallOptions | undefined): CallScope {
    return new CallScope(options?.timeoutMs ?? this.#options.timeoutMs, options?.signal, options?.headers);
  }

  /**
   * @internal Runs `fn` on an endpoint within `scope` (whose owner reports
   * its errors and ends it). With `attemptTimeoutMs`, an endpoint that does
   * not answer in that time counts as down: the call moves on to another.
   */
  runIn<T>(scope: CallScope, repeatable: boolean, fn: (transport: Transport, call: Call) => Promise<T>, attemptTimeoutMs?: number): Promise<T> {
    if (attemptTimeoutMs === undefined) return this.#pool.run((transport) => fn(transport, scope.call), repeatable, scope.call.signal, scope.call.deadline);
    return this.#pool.run(
      async (transport) => {
        const attempt = AbortSignal.timeout(attemptTimeoutMs);
        const signal = AbortSignal.any([scope.call.signal!, attempt]);
        try {
          return await fn(transport, { ...scope.call, signal });
        } catch (error) {
          if (attempt.aborted && !scope.call.signal!.aborted) throw new ConnectionError(`no answer within ${attemptTimeoutMs} ms`, transport.endpoint, { cause: error });
          throw error;
        }
      },
      repeatable,
      scope.call.signal,
      scope.call.deadline,
    );
  }

  /** Whether the server is live (a server that cannot be reached rejects with UNAVAILABLE). */
  async live(options?: CallOptions): Promise<boolean> {
    checkCallOptions('live options', options);
    return this.run(options, true, (t, call) => t.live(call));
  }

  async ready(options?: CallOptions): Promise<boolean> {
    checkCallOptions('ready options', options);
    return this.run(options, true, (t, call) => t.ready(call));
  }

  async metadata(options?: CallOptions): Promise<ServerMetadata> {
    checkCallOptions('metadata options', options);
    return this.run(options, true, (t, call) => t.metadata(call));
  }

  async modelIndex(options: { readyOnly?: boolean } & CallOptions = {}): Promise<ModelIndexEntry[]> {
    checkCallOptions('modelIndex options', options, INDEX_FIELDS);
    checkOptionalBoolean('modelIndex options.readyOnly', options.readyOnly);
    return this.run(options, true, (t, call) => t.modelIndex(options.readyOnly ?? false, call));
  }

  /** A handle on a remote model; `version` -1 (default) lets the server choose. */
  model(name: string, version: ModelVersion = -1): RemoteModel {
    checkName('model name', name);
    checkInteger('model version', version, -1);
    return new RemoteModel(this, name, version);
  }

  /** Loads (or reloads) a model on the server (explicit model control mode); `config` and `files` load it from memory. */
  async loadModel(name: string, options: LoadModelOptions & CallOptions = {}): Promise<RemoteModel> {
    checkName('model name', name);
    checkCallOptions('loadModel options', options, LOAD_FIELDS);
    const parameters: LoadParameters = { config: undefined, files: [] };
    if (options.config !== undefined) {
      checkObject('loadModel options.config', options.config);
      const config = validateModelConfig({ ...options.config, name: options.config.name ?? name });
      if (config.name !== name) throw invalid(`config.name '${config.name}' does not match the model name '${name}'`);
      parameters.config = JSON.stringify(config);
    }
    if (options.files !== undefined) {
      checkObject('loadModel options.files', options.files);
      if (options.config === undefined) throw invalid(`loading model '${name}' from files needs a config too`);
      for (const [path, content] of Object.entries(options.files)) {
        if (path.startsWith('/') || path.split('/').includes('..')) throw invalid(`model file path '${path}' must be relative to the model directory`);
        if (!isCString(path) || path === '') throw invalidParameterError('a model file path', 'a relative path without NUL characters', path);
        if (typeof content !== 'string' && !(content instanceof Uint8Array)) throw invalidParameterError(`model file '${path}'`, 'a string or a Uint8Array', content);
        parameters.files.push([path, typeof content === 'string' ? new TextEncoder().encode(content) : content]);
      }
    }
    this.#forget(name);
    try {
      await this.run(options, false, (t, call) => t.loadModel(name, parameters, call));
    } finally {
      this.#forget(name);
    }
    return this.model(name);
  }

  /** Unloads a model; by default waits (up to `timeoutMs`, else 30 s) until the server has finished. */
  async unloadModel(name: string, options: UnloadModelOptions & CallOptions = {}): Promise<void> {
    checkName('model name', name);
    checkCallOptions('unloadModel options', options, UNLOAD_FIELDS);
    checkOptionalBoolean('unloadModel options.unloadDependents', options.unloadDependents);
    checkOptionalBoolean('unloadModel options.wait', options.wait);
    this.#forget(name);
    const started = Date.now();
    await this.run(options, false, (t, call) => t.unloadModel(name, options.unloadDependents ?? false, call));
    if (options.wait === false) return;
    const timeoutMs = options.timeoutMs ?? this.#options.timeoutMs ?? DEFAULT_UNLOAD_WAIT_MS;
    const deadline = started + timeoutMs;
    for (;;) {
      const left = deadline - Date.now();
      const entries = (await this.modelIndex({ signal: options.signal, headers: options.headers, timeoutMs: Math.max(1, left) })).filter((e) => e.name === name);
      if (!entries.some((entry) => entry.state === 'READY' || entry.state === 'UNLOADING')) return;
      if (Date.now() >= deadline) {
        throw new TritonError('UNAVAILABLE', `model '${name}' is still unloading after ${timeoutMs} ms; the unload goes on in Triton`);
      }
      await new Promise((resolve) => setTimeout(resolve, UNLOAD_POLL_MS));
    }
  }

  /** Statistics of every ready model version. */
  async statistics(options?: CallOptions): Promise<ModelStatistics[]> {
    checkCallOptions('statistics options', options);
    return this.run(options, true, (t, call) => t.statistics('', -1, call));
  }

  /**
   * Triton's metrics (Prometheus text) from an endpoint's metrics port:
   * `metricsUrl` when given, else port 8002 of the first endpoint's host.
   */
  async metrics(options: CallOptions & { metricsUrl?: string } = {}): Promise<string> {
    checkCallOptions('metrics options', options, METRICS_FIELDS);
    if (options.metricsUrl !== undefined && !(typeof options.metricsUrl === 'string' && /^https?:\/\/./.test(options.metricsUrl))) {
      throw invalidParameterError('metrics options.metricsUrl', 'an http:// or https:// URL', options.metricsUrl);
    }
    const url = options.metricsUrl ?? this.#options.metricsUrl ?? this.#metricsUrl();
    const timeoutMs = options.timeoutMs ?? this.#options.timeoutMs ?? this.#options.connectTimeoutMs;
    return fetchText(url, { ...this.#options.headers, ...options.headers }, timeoutMs, options.signal, this.#options);
  }

  #metricsUrl(): string {
    const address = this.#targets.dns ?? this.#targets.addresses[0]!;
    const tls = this.#targets.tls || this.#options.tls !== undefined;
    return `${tls ? 'https' : 'http'}://${authority({ host: address.host, port: 8002 })}/metrics`;
  }

  /** @internal The data types of a model's inputs, fetched once per model (and version). */
  inputTypes(name: string, version: number, scope: CallScope): Map<string, DataType> | Promise<Map<string, DataType>> {
    const key = `${name}\u0000${version}`;
    const known = this.#knownInputTypes.get(key);
    if (known !== undefined) return known;
    let types = this.#inputTypes.get(key);
    if (types === undefined) {
      // Shared by the requests waiting for it, so bound by no one request's deadline: an endpoint
      // that does not answer within the connect timeout is left for another.
      const shared = new CallScope(undefined, undefined, undefined);
      const fetching: Promise<Map<string, DataType>> = this.runIn(shared, true, (t, call) => t.modelMetadata(name, version, call), this.#options.connectTimeoutMs).then(
        (metadata) => {
          const map = new Map(metadata.inputs.map((input) => [input.name, input.datatype]));
          // Unless the model was forgotten (loaded, unloaded) meanwhile.
          if (this.#inputTypes.get(key) === fetching) this.#knownInputTypes.set(key, map);
          return map;
        },
      );
      fetching.catch(() => {
        if (this.#inputTypes.get(key) === fetching) this.#inputTypes.delete(key);
      });
      types = fetching;
      this.#inputTypes.set(key, types);
    }
    return scope.race(types);
  }

  #forget(name: string): void {
    const prefix = `${name}\u0000`;
    for (const key of this.#inputTypes.keys()) if (key.startsWith(prefix)) this.#inputTypes.delete(key);
    for (const key of this.#knownInputTypes.keys()) if (key.startsWith(prefix)) this.#knownInputTypes.delete(key);
  }

  /**
   * The client's own metrics (`tritonserver_node_client_*`: requests,
   * failures, retries, latency by model and endpoint), recorded from the
   * first call of this on; `metricsHandler(client, { packageMetrics: true })`
   * serves them with Triton's.
   */
  packageMetrics(): ClientMetrics {
    if (this.#metrics === undefined) {
      const metrics = new ClientMetrics();
      this.#metrics = metrics;
      this.#pool.observer = { retry: (endpoint) => metrics.retried(endpoint) };
    }
    return this.#metrics;
  }

  /** @internal One inference ended: metrics and its span. */
  observe(model: string, endpoint: string | undefined, started: number, error: unknown, span: ClientSpan | undefined): void {
    const failure = error === undefined ? undefined : error instanceof TritonError ? error : new TritonError('UNKNOWN', String(error));
    const at = endpoint ?? failure?.endpoint;
    this.#metrics?.finished(model, at ?? '', (performance.now() - started) / 1000, failure?.code);
    span?.end(at, failure);
  }

  /** @internal Forgets what is known of a model (its inputs' data types) after the server refused a request. */
  forget(name: string): void {
    this.#forget(name);
  }

  /** @internal */
  get options(): ResolvedClientOptions {
    return this.#options;
  }

  /**
   * Closes the client: later calls reject with UNAVAILABLE; HTTP calls in
   * flight are aborted, gRPC calls in flight finish on their connection,
   * which then closes. Idempotent.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#resolveTimer !== undefined) clearTimeout(this.#resolveTimer);
    this.#pool.close();
  }

  /** `await using client = await Client.connect(...)`: the same as {@link Client.close}. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/** Checks a method's options: only `known` keys, and the per-call ones well formed. */
function checkCallOptions(name: string, options: CallOptions | undefined, known: ReadonlySet<string> = CALL_FIELD_SET): void {
  if (options === undefined) return;
  checkOptions(name, options, known);
  if (options.timeoutMs !== undefined) checkPositiveNumber(`${name}.timeoutMs`, options.timeoutMs);
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) throw invalidParameterError(`${name}.signal`, 'an AbortSignal', options.signal);
  checkHeaders(`${name}.headers`, options.headers);
}

/** A model of a remote server: the in-process `Model` surface. */
export class RemoteModel implements InferenceModel {
  readonly name: string;
  readonly version: ModelVersion;
  readonly #client: Client;

  /** @internal Use `client.model(name)`. */
  constructor(client: Client, name: string, version: ModelVersion) {
    this.#client = client;
    this.name = name;
    this.version = version;
  }

  /** Whether this model (version) can serve requests; false for a model the server does not know. */
  async ready(options?: CallOptions): Promise<boolean> {
    checkCallOptions('ready options', options);
    try {
      return await this.#client.run(options, true, (t, call) => t.modelReady(this.name, this.version, call));
    } catch (error) {
      if (error instanceof TritonError && error.code === 'NOT_FOUND') return false;
      throw error;
    }
  }

  async metadata(options?: CallOptions): Promise<ModelMetadata> {
    checkCallOptions('metadata options', options);
    return this.#client.run(options, true, (t, call) => t.modelMetadata(this.name, this.version, call));
  }

  async config(options?: CallOptions): Promise<ModelConfig> {
    checkCallOptions('config options', options);
    return parseModelConfigJson(await this.#client.run(options, true, (t, call) => t.modelConfig(this.name, this.version, call)));
  }

  async statistics(options?: CallOptions): Promise<ModelStatistics[]> {
    checkCallOptions('statistics options', options);
    return this.#client.run(options, true, (t, call) => t.statistics(this.name, this.version, call));
  }

  /** Runs one inference; resolves with the model's single response. */
  async infer(request: RemoteInferenceRequest): Promise<InferenceResponse> {
    const repeatable = this.#client.options.retry.inference && request?.sequence === undefined;
    const { started, span, scope } = await this.#begin(request);
    let endpoint: string | undefined;
    try {
      const encoded = await this.#encode(request, scope);
      const decoded = await this.#client.runIn(scope, repeatable, (t, call) => {
        endpoint = t.endpoint;
        return t.infer(encoded, call);
      });
      this.#client.observe(this.name, endpoint, started, undefined, span);
      return asResponse(intoBuffers(decoded, request.outputs));
    } catch (caught) {
      if (caught instanceof TritonError && caught.code === 'INVALID_ARG') this.#client.forget(this.name);
      const error = scope.error(caught);
      this.#client.observe(this.name, endpoint, started, error, span);
      throw error;
    } finally {
      scope.end();
    }
  }

  /**
   * Runs one inference and yields every response (decoupled models send any
   * number; others one; over HTTP, only models that are not decoupled).
   * Leaving the loop early or aborting cancels the request on the server.
   */
  async *stream(request: RemoteInferenceRequest): AsyncGenerator<InferenceResponse, void, undefined> {
    const { started, span, scope } = await this.#begin(request);
    let endpoint: string | undefined;
    const queue: InferenceResponse[] = [];
    let failure: unknown;
    let ended = false;
    let wake: (() => void) | undefined;
    const notify = (): void => {
      wake?.();
      wake = undefined;
    };
    let handle: { cancel(): void } | undefined;
    let streaming = true;
    // The transport cancels the call itself on this signal; here the iterator ends.
    scope.call.signal?.addEventListener('abort', () => {
      if (!ended) {
        ended = true;
        failure = scope.error(new TritonError('CANCELLED', 'the request was cancelled'));
        notify();
      }
    }, { once: true });
    try {
      const encoded = await this.#encode(request, scope).catch((error: unknown) => {
        throw scope.error(error);
      });
      // The stream starts on an endpoint the pool picks; its own failures are not retried.
      await this.#client.runIn(scope, false, async (transport) => {
        streaming = transport.streaming;
        endpoint = transport.endpoint;
        handle = transport.stream(encoded, scope.call, {
          response: (response) => {
            queue.push(asResponse(intoBuffers(response, request.outputs)));
            notify();
          },
          error: (error) => {
            if (ended) return;
            ended = true;
            failure = error;
            notify();
          },
          end: () => {
            ended = true;
            notify();
          },
        });
      });
      for (;;) {
        const next = queue.shift();
        if (next !== undefined) {
          yield next;
          continue;
        }
        if (ended) break;
        await new Promise<void>((resolve) => (wake = resolve));
      }
      if (failure !== undefined) throw await this.#streamFailure(failure, streaming);
      this.#client.observe(this.name, endpoint, started, undefined, span);
    } catch (error) {
      this.#client.observe(this.name, endpoint, started, error, span);
      throw error;
    } finally {
      if (!ended) {
        ended = true;
        handle?.cancel();
        // Left early by the caller: the stream ends as cancelled.
        this.#client.observe(this.name, endpoint, started, new TritonError('CANCELLED', 'the stream was left early'), span);
      }
      scope.end();
    }
  }

  /** Over HTTP, a decoupled model's refusal says what to do instead. */
  async #streamFailure(failure: unknown, streaming: boolean): Promise<unknown> {
    if (streaming || !(failure instanceof TritonError) || failure instanceof ConnectionError || failure.code === 'CANCELLED') return failure;
    try {
      const config = await this.config();
      if (config.model_transaction_policy?.decoupled !== true) return failure;
    } catch {
      return failure;
    }
    return Object.assign(
      new TritonError(
        'UNSUPPORTED',
        `model '${this.name}' is decoupled, and KServe HTTP has no streaming inference: connect with a grpc:// target to stream it (${failure.endpoint ?? 'http'})`,
        { cause: failure },
      ),
      { endpoint: failure.endpoint },
    );
  }

  /**
   * Checks the request, starts its span (`trace: { tracer }`) and its scope:
   * one deadline for the whole call, the model's metadata (first call only)
   * and the inference. A request aborted already ends its span at once.
   */
  async #begin(request: RemoteInferenceRequest): Promise<{ started: number; span: ClientSpan | undefined; scope: CallScope }> {
    checkRequest(request, REMOTE_REQUEST_FIELDS);
    checkHeaders('request.headers', request.headers);
    const outputs = request.outputs;
    if (outputs !== undefined && !Array.isArray(outputs)) {
      for (const name of Object.keys(outputs)) {
        if (outputs[name]!.sharedMemory !== undefined) {
          throw invalid(`request.outputs.${name}: shared memory outputs are written by the in-process server only (server.sharedMemory)`);
        }
      }
    }
    const started = performance.now();
    const span = await startClientSpan(request, this.name, this.#client.protocol);
    try {
      const scope = this.#client.scope(span === undefined ? request : { ...request, headers: { ...request.headers, ...span.headers } });
      return { started, span, scope };
    } catch (error) {
      this.#client.observe(this.name, undefined, started, error, span);
      throw error;
    }
  }

  async #encode(request: RemoteInferenceRequest, scope: CallScope): Promise<EncodedRequest> {
    const version = request.modelVersion ?? this.version;
    const found = this.#client.inputTypes(this.name, version, scope);
    const types = found instanceof Map ? found : await found;
    const inputs: EncodedInput[] = [];
    let byteLength = 0;
    for (const name of Object.keys(request.inputs)) {
      const value = request.inputs[name]!;
      const native = normalizeInput(name, value, types.get(name));
      const data = native.data;
      const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
      inputs.push({ name, datatype: DATA_TYPES[native.datatype - 1]!, shape: native.shape, bytes });
      byteLength += bytes.byteLength;
    }
    const max = this.#client.options.maxMessageBytes;
    if (byteLength > max) {
      throw invalid(`the request's tensors are ${byteLength} bytes, more than maxMessageBytes (${max}); raise it on the client (and the server's limit)`);
    }
    const parameters: EncodedRequest['parameters'] = { ...request.parameters };
    for (const key of Object.keys(parameters)) {
      if (key.startsWith('triton_')) throw invalid("parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.");
    }
    if (request.priority !== undefined) parameters.priority = request.priority;
    if (request.timeoutMs !== undefined) parameters.timeout = Math.round(request.timeoutMs * 1000);
    const sequence = request.sequence;
    if (sequence !== undefined) {
      parameters.sequence_id = sequence.id;
      if (sequence.start === true) parameters.sequence_start = true;
      if (sequence.end === true) parameters.sequence_end = true;
    }
    const requested = request.outputs;
    const outputs = requested === undefined
      ? undefined
      : Array.isArray(requested)
        ? requested.map((name) => ({ name, classification: undefined }))
        : Object.keys(requested).map((name) => ({ name, classification: requested[name]!.classification }));
    return { model: this.name, version, id: request.id ?? '', parameters, inputs, outputs, byteLength };
  }
}

/** Outputs the caller gave buffers for are copied into them (the tensor then views the caller's buffer). */
function intoBuffers(response: DecodedResponse, outputs: InferenceRequest['outputs']): DecodedResponse {
  if (outputs === undefined || Array.isArray(outputs)) return response;
  for (const name of Object.keys(outputs)) {
    const spec = outputs[name]!;
    const tensor = response.outputs[name];
    if (spec.data === undefined || tensor === undefined || tensor.datatype === 'BYTES') continue;
    const source = tensor.data as ArrayBufferView;
    const target = spec.data;
    if (source.byteLength > target.byteLength) {
      if (spec.ifTooSmall === 'allocate') continue;
      throw new TritonError(
        'INVALID_ARG',
        `the buffer given for output '${name}' is ${target.byteLength} bytes, but the output is ${source.byteLength} bytes`,
      );
    }
    new Uint8Array(target.buffer, target.byteOffset, source.byteLength).set(new Uint8Array(source.buffer, source.byteOffset, source.byteLength));
    response.outputs[name] = outputTensor(name, DATA_TYPE_INFO[tensor.datatype].enum, tensor.shape, target.buffer, target.byteOffset, source.byteLength) as Tensor;
  }
  return response;
}

/** GET of a text resource (the metrics port), with the client's TLS settings. */
function fetchText(
  url: string,
  headers: Record<string, string>,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  options: ResolvedClientOptions,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const tls = url.startsWith('https:');
    const get = tls ? httpsGet : httpGet;
    const settings: Record<string, unknown> = { headers, timeout: timeoutMs, signal };
    if (tls && options.tls !== undefined) Object.assign(settings, options.tls);
    const request = get(url, settings, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('error', (error) => reject(new TritonError('UNAVAILABLE', `metrics from ${url}: ${error.message}`, { cause: error })));
      response.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (response.statusCode === 200) resolve(text);
        else reject(new TritonError('UNAVAILABLE', `metrics from ${url}: HTTP ${response.statusCode}: ${text.slice(0, 200)}`));
      });
    });
    request.on('timeout', () => request.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    request.on('error', (error) => {
      const code = signal?.aborted ? 'CANCELLED' : 'UNAVAILABLE';
      reject(new TritonError(code, `metrics from ${url}: ${error.message}`, { cause: error }));
    });
  });
}
