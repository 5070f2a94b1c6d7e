/**
 * Inference for one server: validation against cached model metadata,
 * requests handed to the addon, and the one callback that routes each
 * completion the addon drains (all that arrived, once per JS tick) to its
 * request.
 */
import { markAsUntransferable } from 'node:worker_threads';
import { isCString, isObject } from './check.js';
import { TritonError } from './errors.js';
import { native, OUTPUT_WHERE, pendingRequests, type NativeInputField, type NativeName, type NativeResponseCallback, type NativeServer, type NativeSharedMemorySpan, type ResponseField } from './native.js';
import {
  buildTrace,
  exportSpans,
  loadOpenTelemetry,
  type InferenceTrace,
  type TraceOptions,
} from './observability/tracing.js';
import type { InferenceObserver } from './observability/package-metrics.js';
import { checkRequest } from './request-check.js';
import { TokenTable } from './token-table.js';
import { ModelHealth } from './model-health.js';
import { isSharedMemoryInput, sharedMemorySpan, type SharedMemoryInput, type SharedMemoryOutput } from './shared-memory.js';
import type { InferenceRequest, InferenceResponse, OutputBufferSpec } from './surface.js';
import { appendPlainInput, dataTypeEnum, normalizeInput, outputTensor, Tensor, tensorBytes, type InputValue } from './tensor.js';
import { dataTypeFromEnum, type DataType } from './data-types.js';

interface TensorInfo {
  datatype: DataType;
  shape: number[];
  nativeName: NativeName;
}

interface ModelInfo {
  nativeModel: NativeName;
  inputs: Map<string, TensorInfo>;
  outputs: Set<string>;
  required: string[];
  maxBatchSize: number;
}

interface MetadataJson {
  inputs?: Array<{ name: string; datatype: DataType; shape: number[] }>;
  outputs?: Array<{ name: string; datatype: DataType; shape: number[] }>;
}

interface ConfigJson {
  max_batch_size?: number | string;
  input?: Array<{ name: string; optional?: boolean }>;
}

/** A stream left early: its remaining completions only free their resources. */
const IGNORE_COMPLETIONS: Waiter = { complete() {} };

const SEQUENCE_START = 1;
const SEQUENCE_END = 2;

/** One completion of a request, as the addon delivered it. */
interface Completion {
  final: boolean;
  error: TritonError | undefined;
  /** Set when the completion carries a response. */
  version: number | undefined;
  /** How many name, value pairs end `fields`. */
  parameterCount: number | undefined;
  /** name, datatype, rank, dims…, bytes for each output, then the parameters. */
  fields: ResponseField[];
}

/** What waits for a request's completions (routed by its token). */
interface Waiter {
  /** The model the request was sent to, and the health epoch when it started (lib/model-health.ts). */
  readonly model?: string;
  readonly epoch?: number;
  complete(
    final: boolean,
    error: TritonError | undefined,
    version: number | undefined,
    parameterCount: number | undefined,
    fields: ResponseField[],
  ): void;
}

/** A traced request's settings, fixed when `infer()`/`stream()` is called. */
interface Tracing {
  options: TraceOptions;
  /** The caller's active OpenTelemetry context, when a tracer is given. */
  parent: unknown;
  api: Awaited<ReturnType<typeof loadOpenTelemetry>> | undefined;
}

async function prepareTracing(trace: InferenceRequest['trace']): Promise<Tracing | undefined> {
  if (trace === undefined || trace === false) return undefined;
  const options = trace === true ? {} : trace;
  if (options.tracer === undefined) return { options, parent: undefined, api: undefined };
  const api = await loadOpenTelemetry();
  // Still the caller's async context here: awaits keep it.
  return { options, parent: api.context.active(), api };
}

/** The trace once Triton released it, exported and reported as asked. */
async function finishTrace(tracing: Tracing, records: Promise<Array<bigint | string | number>>, calledNs: bigint): Promise<InferenceTrace> {
  const trace = buildTrace(await records, calledNs);
  if (tracing.options.tracer !== undefined && tracing.api !== undefined) {
    exportSpans(trace, tracing.options.tracer, tracing.api, tracing.parent);
  }
  tracing.options.onTrace?.(trace);
  return trace;
}

function cancelled(message: string, cause?: unknown): TritonError {
  return new TritonError('CANCELLED', message, cause === undefined ? undefined : { cause });
}

function invalid(message: string): TritonError {
  return new TritonError('INVALID_ARG', message);
}

/** A completion that carries a response (not just the FINAL flag). */
function hasResponse(completion: Completion): boolean {
  return completion.error !== undefined || completion.version !== undefined;
}

/** The names responses repeat, filled in by the addon: a field names one by its index. */
const RESPONSE_NAMES = native.responseNames;

function fieldName(field: ResponseField): string {
  return typeof field === 'number' ? RESPONSE_NAMES[field]! : (field as string);
}

function toResponse(
  version: number | undefined,
  parameterCount: number | undefined,
  fields: ResponseField[],
  final: boolean,
  model: string,
  request: InferenceRequest,
): InferenceResponse {
  const outputs: Record<string, Tensor> = {};
  let inSharedMemory: Record<string, SharedMemoryOutput> | undefined;
  const outputsEnd = fields.length - 2 * (parameterCount ?? 0);
  for (let i = 0; i < outputsEnd; ) {
    const name = fieldName(fields[i++]!);
    const code = fields[i++] as number;
    const rank = fields[i++] as number;
    // A loop: slice() costs more than these few dims.
    const shape: number[] = [];
    for (const end = i + rank; i < end; i++) shape.push(fields[i] as number);
    const datatype = code & 15;
    const where = code >> 4;
    if (where === OUTPUT_WHERE.shared) {
      // In the shared buffer of small outputs: copied out.
      outputs[name] = outputTensor(name, datatype, shape, fields[i] as ArrayBuffer, fields[i + 1] as number, fields[i + 2] as number, true);
      i += 3;
    } else if (where === OUTPUT_WHERE.own) {
      outputs[name] = outputTensor(name, datatype, shape, fields[i++] as ArrayBuffer);
    } else {
      const spec = (request.outputs as Record<string, OutputBufferSpec>)[name]!;
      const range = spec.sharedMemory;
      if (range !== undefined) {
        // Written into a shared memory region: where, not a copy.
        (inSharedMemory ??= {})[name] = {
          name,
          datatype: dataTypeFromEnum(datatype),
          shape,
          sharedMemory: { region: range.region, offset: range.offset ?? 0, byteSize: fields[i++] as number },
        };
        continue;
      }
      // Written into the caller's own buffer: a view of it.
      const given = spec.data!;
      outputs[name] = outputTensor(name, datatype, shape, given.buffer as ArrayBuffer, given.byteOffset, fields[i++] as number);
    }
  }
  const parameters: Record<string, string | number | boolean> = {};
  for (let i = outputsEnd; i < fields.length; i += 2) {
    parameters[fieldName(fields[i]!)] = fields[i + 1] as string | number | boolean;
  }
  const response = new OwnedResponse({ name: model, version: version ?? -1 }, request.id ?? '', outputs, parameters, final, fields, outputsEnd);
  if (inSharedMemory !== undefined) response.sharedMemoryOutputs = inSharedMemory;
  return response;
}

/** A response whose output memory the package allocated (see dispose()). */
class OwnedResponse implements InferenceResponse {
  declare trace?: InferenceTrace;
  declare sharedMemoryOutputs?: Record<string, SharedMemoryOutput>;
  /** The addon's fields: the ArrayBuffers among them are the package's own. */
  readonly #fields: ResponseField[];
  /** Where the outputs' fields end (the parameters follow). */
  readonly #outputsEnd: number;

  constructor(
    readonly model: { name: string; version: number },
    readonly id: string,
    readonly outputs: Record<string, Tensor>,
    readonly parameters: Record<string, string | number | boolean>,
    readonly final: boolean,
    fields: ResponseField[],
    outputsEnd: number,
  ) {
    this.#fields = fields;
    this.#outputsEnd = outputsEnd;
  }

  dispose(): void {
    const buffers: ArrayBuffer[] = [];
    const fields = this.#fields;
    // The outputs' fields, as toResponse reads them.
    for (let i = 0; i < this.#outputsEnd; ) {
      const name = fieldName(fields[i]!);
      const where = (fields[i + 1] as number) >> 4;
      i += 3 + (fields[i + 2] as number);
      if (where === OUTPUT_WHERE.shared) {
        // Each small output has its own copy of its bytes.
        buffers.push(tensorBytes(this.outputs[name]!).buffer as ArrayBuffer);
        i += 3;
      } else {
        if (where === OUTPUT_WHERE.own) buffers.push(fields[i] as ArrayBuffer);
        i += 1;
      }
    }
    if (buffers.length > 0) native.detachBuffers(...buffers);
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/**
 * The pending inferences listening to one abort signal, linked through
 * their own fields. A signal gets one 'abort' listener, whatever the number
 * of requests that share it (a connection's, a shutdown signal): adding and
 * removing an EventTarget listener per request costs more than the rest of
 * the request's JS on a server's hot path.
 */
class AbortWatchers {
  head: PendingInference | undefined;

  static #bySignal = new WeakMap<AbortSignal, AbortWatchers>();

  static watch(signal: AbortSignal, waiter: PendingInference): void {
    let watchers = AbortWatchers.#bySignal.get(signal);
    if (watchers === undefined) {
      const created = new AbortWatchers();
      watchers = created;
      AbortWatchers.#bySignal.set(signal, created);
      signal.addEventListener('abort', () => created.abortAll(), { once: true });
    }
    waiter.abortList = watchers;
    waiter.abortNext = watchers.head;
    if (watchers.head !== undefined) watchers.head.abortPrev = waiter;
    watchers.head = waiter;
  }

  static unwatch(waiter: PendingInference): void {
    const watchers = waiter.abortList;
    if (watchers === undefined) return;
    const { abortPrev: prev, abortNext: next } = waiter;
    if (prev !== undefined) prev.abortNext = next;
    else watchers.head = next;
    if (next !== undefined) next.abortPrev = prev;
    waiter.abortList = waiter.abortPrev = waiter.abortNext = undefined;
  }

  abortAll(): void {
    // Each one unlinks itself as it settles.
    while (this.head !== undefined) this.head.handleEvent();
  }
}

/**
 * One infer() call waiting for its response: one object per request, which
 * is also its abort listener (`handleEvent`), rather than a set of closures.
 */
class PendingInference implements Waiter {
  token = 0;
  /** Its place among the requests listening to the same signal (AbortWatchers). */
  abortList: AbortWatchers | undefined;
  abortPrev: PendingInference | undefined;
  abortNext: PendingInference | undefined;
  epoch = 0;
  trace: Promise<InferenceTrace> | undefined;
  #version: number | undefined;
  #parameterCount: number | undefined;
  #fields: ResponseField[] | undefined;
  #extraResponses = 0;
  #settled = false;
  #timer: NodeJS.Timeout | undefined;

  constructor(
    readonly model: string,
    readonly request: InferenceRequest,
    readonly resolve: (response: InferenceResponse) => void,
    readonly reject: (error: unknown) => void,
    readonly cancel: (token: number) => void,
  ) {}

  /** Listens for the caller's abort signal and timeout. */
  arm(): void {
    const { signal, timeoutMs } = this.request;
    if (signal !== undefined) AbortWatchers.watch(signal, this);
    if (timeoutMs !== undefined) {
      this.#timer = setTimeout(() => {
        if (!this.#settle()) return;
        this.cancel(this.token);
        this.reject(cancelled(`the request timed out after ${timeoutMs} ms`));
      }, timeoutMs);
    }
  }

  /** The abort signal fired. */
  handleEvent(): void {
    if (!this.#settle()) return;
    this.cancel(this.token);
    this.reject(cancelled('the request was aborted', this.request.signal?.reason));
  }

  complete(
    final: boolean,
    error: TritonError | undefined,
    version: number | undefined,
    parameterCount: number | undefined,
    fields: ResponseField[],
  ): void {
    if (this.#settled) return;
    if (error !== undefined) {
      if (this.#settle()) this.reject(error);
      return;
    }
    if (version !== undefined) {
      if (this.#fields === undefined) {
        this.#version = version;
        this.#parameterCount = parameterCount;
        this.#fields = fields;
      } else {
        this.#extraResponses++;
      }
    }
    if (!final || !this.#settle()) return;
    const model = this.model;
    if (this.#fields === undefined) {
      this.reject(new TritonError('INTERNAL', `model '${model}' completed the request without a response`));
    } else if (this.#extraResponses > 0) {
      this.reject(
        new TritonError(
          'UNSUPPORTED',
          `model '${model}' sent ${this.#extraResponses + 1} responses to one request; use model.stream() for decoupled models`,
        ),
      );
    } else {
      try {
        const result = toResponse(this.#version, this.#parameterCount, this.#fields, true, model, this.request);
        const trace = this.trace;
        if (trace === undefined) {
          this.resolve(result);
        } else {
          trace.then((timeline) => {
            result.trace = timeline;
            this.resolve(result);
          }, this.reject);
        }
      } catch (failure) {
        this.reject(failure);
      }
    }
  }

  #settle(): boolean {
    if (this.#settled) return false;
    this.#settled = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    AbortWatchers.unwatch(this);
    return true;
  }
}

function formatShape(shape: readonly number[]): string {
  return `[${shape.join(', ')}]`;
}

/** What a ResponseStream needs of its Inference. */
interface StreamHost {
  /** Checks and starts the request, its completions going to `waiter`. */
  start(
    model: string,
    defaultVersion: number,
    request: InferenceRequest,
    waiter: Waiter,
  ): Promise<{ token: number; trace: Promise<InferenceTrace> | undefined }>;
  /** Left before its FINAL: the rest only frees resources, and Triton stops the work. */
  leave(token: number): void;
}

interface NextCall {
  resolve(result: IteratorResult<InferenceResponse>): void;
  reject(error: unknown): void;
}

const StreamState = { Idle: 0, Starting: 1, Running: 2, Closed: 3 } as const;

const done = (): IteratorResult<InferenceResponse> => ({ value: undefined, done: true });

/**
 * model.stream(): an async iterator written out rather than an async
 * generator, so a response goes straight from the drain to the waiting
 * next() (a generator's yield costs more promise turns than a response
 * costs otherwise). Like a generator it starts at the first next(), and
 * leaving early (return(), a failure, an abort or timeout) cancels the
 * request in Triton.
 */
class ResponseStream implements AsyncIterableIterator<InferenceResponse> {
  readonly #host: StreamHost;
  readonly #model: string;
  readonly #defaultVersion: number;
  readonly #request: InferenceRequest;
  #state: number = StreamState.Idle;
  #token = 0;
  #trace: Promise<InferenceTrace> | undefined;
  readonly #completions: Completion[] = [];
  readonly #calls: NextCall[] = [];
  /** An abort or timeout, reported at the next next(). */
  #failure: TritonError | undefined;
  /** The FINAL completion arrived: nothing left to cancel. */
  #finished = false;
  #timer: NodeJS.Timeout | undefined;

  constructor(host: StreamHost, model: string, defaultVersion: number, request: InferenceRequest, epoch: number) {
    this.#host = host;
    this.#model = model;
    this.#defaultVersion = defaultVersion;
    this.#request = request;
    this.#waiter = {
      model,
      epoch,
      complete: (final, error, version, parameterCount, fields) => {
        this.#completions.push({ final, error, version, parameterCount, fields });
        if (this.#calls.length > 0) this.#deliver();
      },
    };
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<InferenceResponse>> {
    return new Promise((resolve, reject) => {
      this.#calls.push({ resolve, reject });
      if (this.#state === StreamState.Idle) this.#begin();
      else this.#deliver();
    });
  }

  return(): Promise<IteratorResult<InferenceResponse>> {
    this.#close();
    this.#deliver();
    return Promise.resolve(done());
  }

  throw(error: unknown): Promise<IteratorResult<InferenceResponse>> {
    this.#close();
    this.#deliver();
    return Promise.reject(error);
  }

  // Not methods of the iterator, which the caller holds.
  readonly #waiter: Waiter;
  readonly #onAbort = (): void => this.#fail(cancelled('the request was aborted', this.#request.signal?.reason));

  #fail(failure: TritonError): void {
    this.#failure ??= failure;
    if (this.#calls.length > 0) this.#deliver();
  }

  #begin(): void {
    this.#state = StreamState.Starting;
    this.#host.start(this.#model, this.#defaultVersion, this.#request, this.#waiter).then(
      ({ token, trace }) => {
        this.#token = token;
        this.#trace = trace;
        // return() while starting: stopped at once.
        if (this.#state === StreamState.Closed) {
          this.#host.leave(token);
          trace?.catch(() => undefined);
          return;
        }
        this.#state = StreamState.Running;
        this.#request.signal?.addEventListener('abort', this.#onAbort, { once: true });
        const timeoutMs = this.#request.timeoutMs;
        if (timeoutMs !== undefined) {
          this.#timer = setTimeout(() => this.#fail(cancelled(`the request timed out after ${timeoutMs} ms`)), timeoutMs);
        }
        this.#deliver();
      },
      (error: unknown) => {
        this.#state = StreamState.Closed;
        this.#calls.shift()?.reject(error);
        this.#deliver();
      },
    );
  }

  /** Settles waiting next() calls, in order, with what is there to give. */
  #deliver(): void {
    const calls = this.#calls;
    while (calls.length > 0 && this.#state !== StreamState.Starting) {
      if (this.#state !== StreamState.Running) {
        calls.shift()!.resolve(done());
        continue;
      }
      if (this.#failure !== undefined) {
        this.#close();
        calls.shift()!.reject(this.#failure);
        continue;
      }
      const completion = this.#completions.shift();
      if (completion === undefined) return;
      if (completion.final) this.#finished = true;
      if (completion.error !== undefined) {
        this.#close();
        calls.shift()!.reject(completion.error);
        continue;
      }
      if (!hasResponse(completion)) {
        if (completion.final) this.#close();
        continue;
      }
      const call = calls.shift()!;
      let response: InferenceResponse;
      try {
        response = toResponse(completion.version, completion.parameterCount, completion.fields, completion.final, this.#model, this.#request);
      } catch (error) {
        this.#close();
        call.reject(error);
        continue;
      }
      if (completion.final) {
        this.#close();
        // The last response carries the trace; a bare FINAL flag cannot (onTrace can).
        if (this.#trace !== undefined) {
          this.#trace.then((trace) => {
            response.trace = trace;
            call.resolve({ value: response, done: false });
          }, call.reject);
          continue;
        }
      }
      call.resolve({ value: response, done: false });
    }
  }

  /** Ends the stream; before its FINAL, the request is cancelled in Triton. */
  #close(): void {
    const wasRunning = this.#state === StreamState.Running;
    this.#state = StreamState.Closed;
    if (!wasRunning) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#request.signal?.removeEventListener('abort', this.#onAbort);
    this.#completions.length = 0;
    if (!this.#finished) this.#host.leave(this.#token);
  }
}

export class Inference {
  #native: NativeServer | undefined;
  readonly #pending = new TokenTable<Waiter>();
  readonly #infoLoading = new Map<string, Promise<ModelInfo>>();
  /** Model name → version → what infer() checks requests against. */
  readonly #info = new Map<string, Map<number, ModelInfo>>();
  readonly #cancelToken = (token: number): void => this.#cancel(token);
  /** Package metrics, when enabled (`server.packageMetrics()`). */
  observer: InferenceObserver | undefined;
  /** What the package knows of its models' health (lib/model-health.ts). */
  readonly health = new ModelHealth();

  /** @internal */
  attach(nativeServer: NativeServer): void {
    this.#native = nativeServer;
  }

  #flushQueued = false;
  /**
   * The addon queues requests and submits them once per tick, at the end of
   * the microtasks that started them: one request directly, many through
   * its submitter thread, so Triton's own submission cost is not paid on
   * the JS thread under load.
   */
  readonly #flush = (): void => {
    this.#flushQueued = false;
    this.#native?.flush();
  };

  /** Receives the completions the addon drains (see NativeResponseCallback), routed by token. */
  readonly onResponse: NativeResponseCallback = (...completions) => {
    for (let i = 0; i < completions.length; ) {
      const token = completions[i] as number;
      const final = completions[i + 1] as boolean;
      let error = completions[i + 2] as TritonError | undefined;
      const version = completions[i + 3] as number | undefined;
      const parameterCount = completions[i + 4] as number | undefined;
      const fieldsEnd = i + 6 + (completions[i + 5] as number);
      const fields = completions.slice(i + 6, fieldsEnd) as ResponseField[];
      i = fieldsEnd;
      const waiter = this.#pending.get(token);
      // Rare: a failure (a dead Python stub?), or a success while a model is marked unhealthy.
      if ((error !== undefined || this.health.count !== 0) && waiter?.model !== undefined) {
        if (error === undefined) this.health.served(waiter.model, waiter.epoch ?? 0);
        else if (error.code === 'INTERNAL') error = this.health.failed(waiter.model, waiter.epoch ?? 0, error);
      }
      if (final) {
        if (this.#pending.delete(token)) pendingRequests.count--;
        this.observer?.finished(token);
      }
      try {
        waiter?.complete(final, error, version, parameterCount, fields);
      } catch (failure) {
        // One broken handler must not cost the others their responses.
        queueMicrotask(() => {
          throw failure;
        });
      }
    }
  };

  /** Waits for the request's completions (until its FINAL one). */
  #await(token: number, waiter: Waiter): void {
    if (!this.#pending.has(token)) pendingRequests.count++;
    this.#pending.set(token, waiter);
  }

  /** Drops cached metadata (a model was loaded, unloaded or reloaded). */
  forgetModels(): void {
    this.#info.clear();
    this.#infoLoading.clear();
  }

  /** `version` applies unless the request names its own `modelVersion`. */
  infer(model: string, defaultVersion: number, request: InferenceRequest): Promise<InferenceResponse> {
    let version: number;
    let info: ModelInfo | undefined;
    try {
      checkRequest(request);
      pinInputs(request.inputs, request.outputs);
      version = request.modelVersion ?? defaultVersion;
      info = this.#info.get(model)?.get(version);
      // The common case without an await (one promise, no extra tick).
      if (info !== undefined && !request.trace && this.observer === undefined) {
        return this.#run(model, version, info, request, undefined, undefined);
      }
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#inferAfterLookups(model, version, info, request);
  }

  /** infer() when the model's metadata must be fetched, or the request is traced or observed. */
  async #inferAfterLookups(
    model: string,
    version: number,
    known: ModelInfo | undefined,
    request: InferenceRequest,
  ): Promise<InferenceResponse> {
    const calledNs = this.observer !== undefined || request.trace ? process.hrtime.bigint() : undefined;
    const info = known ?? (await this.#modelInfo(model, version));
    const tracing = request.trace ? await prepareTracing(request.trace) : undefined;
    return this.#run(model, version, info, request, tracing, calledNs);
  }

  /** Starts the request and settles with its single response. */
  #run(
    model: string,
    version: number,
    info: ModelInfo,
    request: InferenceRequest,
    tracing: Tracing | undefined,
    calledNs: bigint | undefined,
  ): Promise<InferenceResponse> {
    return new Promise<InferenceResponse>((resolve, reject) => {
      const pending = new PendingInference(model, request, resolve, reject, this.#cancelToken);
      pending.epoch = this.health.epoch;
      if (tracing === undefined) pending.token = this.#start(model, version, info, request, calledNs);
      else ({ token: pending.token, trace: pending.trace } = this.#startTraced(model, version, info, request, tracing, calledNs));
      this.#await(pending.token, pending);
      pending.arm();
    });
  }

  /** The request starts at the first `next()`; see ResponseStream. */
  stream(model: string, defaultVersion: number, request: InferenceRequest): AsyncIterableIterator<InferenceResponse> {
    return new ResponseStream(this.#streams, model, defaultVersion, request, this.health.epoch);
  }

  readonly #streams: StreamHost = {
    start: (model, defaultVersion, request, waiter) => this.#startStream(model, defaultVersion, request, waiter),
    leave: (token) => {
      // Its FINAL may be here already, unread: then nothing is left to wait for.
      if (this.#pending.has(token)) this.#pending.set(token, IGNORE_COMPLETIONS);
      this.#cancel(token);
    },
  };

  async #startStream(
    model: string,
    defaultVersion: number,
    request: InferenceRequest,
    waiter: Waiter,
  ): Promise<{ token: number; trace: Promise<InferenceTrace> | undefined }> {
    checkRequest(request);
    pinInputs(request.inputs, request.outputs);
    const calledNs = this.observer !== undefined || request.trace ? process.hrtime.bigint() : undefined;
    const version = request.modelVersion ?? defaultVersion;
    const info = this.#info.get(model)?.get(version) ?? (await this.#modelInfo(model, version));
    const tracing = request.trace ? await prepareTracing(request.trace) : undefined;
    let token: number;
    let trace: Promise<InferenceTrace> | undefined;
    if (tracing === undefined) token = this.#start(model, version, info, request, calledNs);
    else ({ token, trace } = this.#startTraced(model, version, info, request, tracing, calledNs));
    this.#await(token, waiter);
    return { token, trace };
  }

  /** Validates the request and hands it to the addon; returns its token. */
  #start(model: string, version: number, info: ModelInfo, request: InferenceRequest, calledNs: bigint | undefined): number {
    const inputs = prepareInputs(model, info, request);
    const signal = request.signal;
    if (signal?.aborted) throw cancelled('the request was aborted before it started', signal.reason);
    const nativeServer = this.#server();
    const token = startRequest(nativeServer, info.nativeModel, version, inputs, request);
    if (calledNs !== undefined && this.observer !== undefined) {
      // Observed: submitted now, so the submit time it reports is Triton's
      // acceptance, not the queueing.
      nativeServer.flush();
      this.observer.submitted(token, model, calledNs);
    } else if (!this.#flushQueued) {
      this.#flushQueued = true;
      queueMicrotask(this.#flush);
    }
    return token;
  }

  /** `#start` for a traced request: arms its trace first; also returns the trace's promise. */
  #startTraced(
    model: string,
    version: number,
    info: ModelInfo,
    request: InferenceRequest,
    tracing: Tracing,
    calledNs: bigint | undefined,
  ): { token: number; trace: Promise<InferenceTrace> } {
    const inputs = prepareInputs(model, info, request);
    const signal = request.signal;
    if (signal?.aborted) throw cancelled('the request was aborted before it started', signal.reason);
    const nativeServer = this.#server();
    calledNs ??= process.hrtime.bigint();
    const records = native.traceNext(nativeServer.library().path);
    let token: number;
    try {
      token = startRequest(nativeServer, info.nativeModel, version, inputs, request);
    } catch (error) {
      native.traceCancel();
      records.catch(() => undefined);
      throw error;
    }
    this.observer?.submitted(token, model, calledNs);
    const trace = finishTrace(tracing, records, calledNs);
    // A request that fails is still traced; nobody may be waiting for it.
    trace.catch(() => undefined);
    return { token, trace };
  }

  #server(): NativeServer {
    if (this.#native === undefined) throw new TritonError('UNAVAILABLE', 'the server is not started');
    return this.#native;
  }

  #cancel(token: number): void {
    try {
      this.#native?.cancel(token);
    } catch {
      // An old library without cancellation: the request runs to its end
      // and its completion is dropped; the caller was already told.
    }
  }

  #modelInfo(model: string, version: number): Promise<ModelInfo> {
    const key = `${model}\u0000${version}`;
    let loading = this.#infoLoading.get(key);
    if (loading === undefined) {
      const nativeServer = this.#server();
      loading = Promise.all([nativeServer.modelMetadata(model, version), nativeServer.modelConfig(model, version)]).then(
        ([metadataText, configText]) => {
          const info = buildModelInfo(model, JSON.parse(metadataText) as MetadataJson, JSON.parse(configText) as ConfigJson);
          if (this.#infoLoading.get(key) === loading) {
            let versions = this.#info.get(model);
            if (versions === undefined) this.#info.set(model, (versions = new Map()));
            versions.set(version, info);
          }
          return info;
        },
      );
      this.#infoLoading.set(key, loading);
      // A failed lookup (unknown model, stopped server) is not cached.
      loading.catch(() => {
        if (this.#infoLoading.get(key) === loading) this.#infoLoading.delete(key);
      });
    }
    return loading;
  }
}

/**
 * Input memory is handed to Triton without a copy, so it must not be
 * detached (transferred) while Triton may read it: each input's buffer is
 * marked untransferable (`worker_threads.markAsUntransferable`). Where the
 * runtime would still let such a buffer be detached, inputs are copied.
 */
const MARKING_PINS: boolean = (() => {
  const probe = new ArrayBuffer(8);
  markAsUntransferable(probe);
  try {
    structuredClone(probe, { transfer: [probe] });
  } catch {
    // Refusing the transfer is just as good as copying it.
  }
  const transfer = (probe as { transfer?: () => ArrayBuffer }).transfer;
  if (typeof transfer === 'function') {
    try {
      transfer.call(probe);
    } catch {
      // refused
    }
  }
  return probe.byteLength === 8;
})();

/**
 * Marks the inputs' buffers untransferable as soon as infer() is called:
 * before the request starts (its model's metadata may still be on its way),
 * a transfer would already pull the memory from under it.
 */
function pinInputs(inputs: Record<string, unknown>, outputs: InferenceRequest['outputs']): void {
  if (!MARKING_PINS) return;
  if (outputs !== undefined && !Array.isArray(outputs)) {
    for (const name in outputs) {
      const data = outputs[name]?.data;
      if (data !== undefined && data.buffer instanceof ArrayBuffer && data.buffer.byteLength > 0) markAsUntransferable(data.buffer);
    }
  }
  for (const name in inputs) {
    const value = inputs[name];
    // A Tensor's storage: reading a BYTES tensor's `data` would split it into a view per element.
    const data = ArrayBuffer.isView(value)
      ? value
      : value instanceof Tensor
        ? tensorBytes(value)
        : isObject(value) && ArrayBuffer.isView(value.data)
        ? value.data
        : undefined;
    if (data !== undefined && data.buffer instanceof ArrayBuffer && data.buffer.byteLength > 0) {
      markAsUntransferable(data.buffer);
    }
  }
}

/**
 * The view's memory, safe to hand to Triton until the request is released
 * (pinInputs marked the caller's buffers already; the package's own, made
 * from arrays, are never seen by the caller). `label` names it in errors
 * ("input 'X'"); an output's memory is never copied (Triton must write into
 * the caller's own).
 */
function pinned(kind: 'input' | 'output', name: string, view: ArrayBufferView, copyIfUnpinnable = true): ArrayBufferView {
  const buffer = view.buffer;
  // Shared memory cannot be detached (but see the README on writing to it).
  if (!(buffer instanceof ArrayBuffer)) return view;
  if (view.byteLength === 0 && isDetached(buffer)) {
    throw invalid(`${kind} '${name}': its ArrayBuffer is detached (transferred or closed)`);
  }
  if (MARKING_PINS || !copyIfUnpinnable) return view;
  return new Uint8Array(buffer.slice(view.byteOffset, view.byteOffset + view.byteLength));
}

function isDetached(buffer: ArrayBuffer): boolean {
  try {
    new Uint8Array(buffer, 0, 0);
    return false;
  } catch {
    return true;
  }
}

function buildModelInfo(model: string, metadata: MetadataJson, config: ConfigJson): ModelInfo {
  const optional = new Set((config.input ?? []).filter((input) => input.optional === true).map((input) => input.name));
  const inputs = new Map<string, TensorInfo>();
  for (const input of metadata.inputs ?? []) {
    inputs.set(input.name, {
      datatype: input.datatype,
      shape: input.shape.map(Number),
      nativeName: native.nativeName(input.name),
    });
  }
  return {
    nativeModel: native.nativeName(model),
    inputs,
    outputs: new Set((metadata.outputs ?? []).map((output) => output.name)),
    required: [...inputs.keys()].filter((name) => !optional.has(name)),
    maxBatchSize: Number(config.max_batch_size ?? 0),
  };
}

/** Checked inputs, flat as the addon takes them: name, datatype, shape, data, … */
function prepareInputs(model: string, info: ModelInfo, request: InferenceRequest): NativeInputField[] {
  const prepared: NativeInputField[] = [];
  const inputs = request.inputs;
  for (const name of Object.keys(inputs)) {
    const expected = info.inputs.get(name);
    if (expected === undefined) {
      if (!isCString(name)) throw invalid(`input name ${JSON.stringify(name)} contains a NUL character`);
      throw invalid(`model '${model}' has no input '${name}' (its inputs: ${[...info.inputs.keys()].join(', ')})`);
    }
    const value = inputs[name] as InputValue;
    if (isSharedMemoryInput(value)) {
      prepareSharedMemoryInput(prepared, model, name, expected, value, info.maxBatchSize);
      continue;
    }
    // The common forms without intermediate objects; normalizeInput for the
    // rest (it also refuses data of another type than the model's).
    let shape = appendPlainInput(prepared, expected.nativeName, value, expected.datatype);
    if (shape === undefined) {
      const input = normalizeInput(name, value, expected.datatype);
      prepared.push(expected.nativeName, input.datatype, input.shape.length, ...input.shape, input.data);
      shape = input.shape;
    }
    checkShape(model, name, shape, expected.shape, info.maxBatchSize);
    const data = prepared[prepared.length - 1] as ArrayBufferView;
    prepared[prepared.length - 1] = pinned('input', name, data);
  }
  for (const name of info.required) {
    if (!(name in inputs)) throw invalid(`model '${model}' needs input '${name}'`);
  }
  const outputs = request.outputs;
  if (outputs !== undefined) {
    for (const name of Array.isArray(outputs) ? outputs : Object.keys(outputs)) {
      if (!info.outputs.has(name)) {
        throw invalid(`model '${model}' has no output '${name}' (its outputs: ${[...info.outputs].join(', ')})`);
      }
    }
  }
  return prepared;
}

/** An input in a shared memory region: name, datatype, rank, dims…, [region, offset, byteSize]. */
function prepareSharedMemoryInput(
  prepared: NativeInputField[],
  model: string,
  name: string,
  expected: TensorInfo,
  value: SharedMemoryInput,
  maxBatchSize: number,
): void {
  const label = `input '${name}'`;
  const { datatype, shape } = value as { datatype?: unknown; shape?: unknown };
  if (datatype !== expected.datatype) {
    throw invalid(`${label}: datatype ${String(datatype)} was given but the model expects ${expected.datatype}`);
  }
  if (!Array.isArray(shape) || !shape.every((dim) => Number.isSafeInteger(dim) && (dim as number) >= 0)) {
    throw invalid(`${label}: { datatype, shape, sharedMemory } needs a shape of non-negative integers`);
  }
  checkShape(model, name, shape as number[], expected.shape, maxBatchSize);
  const span = sharedMemorySpan(value.sharedMemory, label);
  prepared.push(expected.nativeName, dataTypeEnum(expected.datatype), shape.length, ...(shape as number[]), span);
}

function checkShape(model: string, name: string, shape: readonly number[], dims: readonly number[], maxBatchSize: number): void {
  const fits = shape.length === dims.length && dims.every((dim, i) => dim === -1 || dim === shape[i]);
  if (!fits) {
    throw invalid(`input '${name}' of model '${model}' has shape ${formatShape(shape)}; the model expects ${formatShape(dims)}`);
  }
  const batch = shape[0] ?? 0;
  if (maxBatchSize > 0 && batch > maxBatchSize) {
    throw invalid(`input '${name}' of model '${model}' has batch size ${batch}, above the model's max_batch_size ${maxBatchSize}`);
  }
}

/** Checks the request's options and hands the request to the addon. */
function startRequest(
  nativeServer: NativeServer,
  model: NativeName,
  version: number,
  inputs: NativeInputField[],
  request: InferenceRequest,
): number {
  // Every field was checked by checkRequest().
  const { id, priority, timeoutMs, sequence, parameters, outputs } = request;
  if (id === undefined && priority === undefined && timeoutMs === undefined && sequence === undefined && parameters === undefined && outputs === undefined) {
    return nativeServer.infer(model, version, undefined, ...inputs);
  }
  const flags = sequence === undefined ? undefined : (sequence.start ? SEQUENCE_START : 0) | (sequence.end ? SEQUENCE_END : 0);
  return nativeServer.infer(
    model,
    version,
    [
      outputNames(outputs),
      id === undefined ? undefined : String(id),
      priority,
      timeoutMs === undefined ? undefined : Math.round(timeoutMs * 1000),
      flags,
      sequence?.id,
      parameters === undefined ? undefined : Object.entries(parameters),
      outputBuffers(outputs),
    ],
    ...inputs,
  );
}

function outputNames(outputs: InferenceRequest['outputs']): string[] | undefined {
  if (outputs === undefined || Array.isArray(outputs)) return outputs;
  return Object.keys(outputs);
}

/** [name, view, fallback] for each output the caller gave memory for. */
function outputBuffers(outputs: InferenceRequest['outputs']): Array<[string, ArrayBufferView | NativeSharedMemorySpan, boolean]> | undefined {
  if (outputs === undefined || Array.isArray(outputs)) return undefined;
  let buffers: Array<[string, ArrayBufferView | NativeSharedMemorySpan, boolean]> | undefined;
  for (const name in outputs) {
    const spec = outputs[name]!;
    if (spec.sharedMemory !== undefined) {
      (buffers ??= []).push([name, sharedMemorySpan(spec.sharedMemory, `output '${name}'`), false]);
      continue;
    }
    if (spec.data === undefined) continue;
    (buffers ??= []).push([name, pinned('output', name, spec.data, false), spec.ifTooSmall === 'allocate']);
  }
  return buffers;
}
