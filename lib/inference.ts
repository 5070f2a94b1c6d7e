/**
 * Inference for one server: validation against cached model metadata,
 * requests handed to the addon, and the one callback that routes each
 * completion the addon drains (all that arrived, once per JS tick) to its
 * request.
 */
import { TritonError } from './errors.js';
import { native, type NativeInputField, type NativeResponseCallback, type NativeServer } from './native.js';
import {
  buildTrace,
  exportSpans,
  loadOpenTelemetry,
  type InferenceTrace,
  type TraceOptions,
} from './observability/tracing.js';
import type { InferenceObserver } from './observability/package-metrics.js';
import { normalizeInput, outputTensor, type DataType, type InputValue, type Tensor } from './tensor.js';

export interface SequenceOptions {
  /** Correlation id of the sequence (Triton's `correlation_id`). */
  id: number | bigint | string;
  /** First request of the sequence. */
  start?: boolean;
  /** Last request of the sequence. */
  end?: boolean;
}

export interface InferenceRequest {
  /** Input tensors by name. */
  inputs: Record<string, InputValue>;
  /** Output names to return; default all. */
  outputs?: string[];
  /** Request id, echoed in the response. */
  id?: string;
  /** Triton priority level (1 is highest; 0 = the model's default). */
  priority?: number;
  /** Cancel the request if it has not completed after this many ms. */
  timeoutMs?: number;
  /** Aborting cancels the request; the promise rejects with CANCELLED. */
  signal?: AbortSignal;
  /** Request parameters for the model or backend. */
  parameters?: Record<string, string | number | boolean>;
  /** For stateful (sequence batching) models. */
  sequence?: SequenceOptions;
  /** Model version; default: the one the `Model` was made for. */
  modelVersion?: number;
  /**
   * Trace this request through Triton's stages (off by default): the
   * timeline is on `response.trace`; with `tracer` it is also exported as
   * OpenTelemetry spans under the caller's active span.
   */
  trace?: boolean | TraceOptions;
}

export interface InferenceResponse {
  model: { name: string; version: number };
  id: string;
  outputs: Record<string, Tensor>;
  parameters: Record<string, string | number | boolean>;
  /** Triton's FINAL flag: the last response of the request. */
  final: boolean;
  /** The request's timeline, when it was traced (see `InferenceRequest.trace`). */
  trace?: InferenceTrace;
}

interface TensorInfo {
  datatype: DataType;
  shape: number[];
}

interface ModelInfo {
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

const SEQUENCE_START = 1;
const SEQUENCE_END = 2;

/** One completion of a request, as the addon delivered it. */
interface Completion {
  final: boolean;
  error: TritonError | undefined;
  /** Set when the completion carries a response. */
  version: number | undefined;
  parameters: Record<string, string | number | boolean> | undefined;
  /** name, datatype, rank, dims…, bytes for each output. */
  outputs: Array<string | number | ArrayBuffer>;
}

type Handler = (completion: Completion) => void;

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

function toResponse(completion: Completion, model: string, request: InferenceRequest): InferenceResponse {
  const outputs: Record<string, Tensor> = {};
  const fields = completion.outputs;
  for (let i = 0; i < fields.length; ) {
    const name = fields[i++] as string;
    const datatype = fields[i++] as number;
    const rank = fields[i++] as number;
    const shape = fields.slice(i, i + rank) as number[];
    i += rank;
    outputs[name] = outputTensor(name, datatype, shape, fields[i++] as ArrayBuffer);
  }
  return {
    model: { name: model, version: completion.version ?? -1 },
    id: request.id ?? '',
    outputs,
    parameters: completion.parameters ?? {},
    final: completion.final,
  };
}

function formatShape(shape: readonly number[]): string {
  return `[${shape.join(', ')}]`;
}

export class Inference {
  #native: NativeServer | undefined;
  readonly #pending = new Map<number, Handler>();
  readonly #infoLoading = new Map<string, Promise<ModelInfo>>();
  readonly #info = new Map<string, ModelInfo>();
  /** Package metrics, when enabled (`server.packageMetrics()`). */
  observer: InferenceObserver | undefined;

  /** @internal */
  attach(nativeServer: NativeServer): void {
    this.#native = nativeServer;
  }

  /** Receives each completion the addon drains, routed by token. */
  readonly onResponse: NativeResponseCallback = (token, final, error, version, parameters, ...outputs) => {
    const handler = this.#pending.get(token);
    if (final) {
      this.#pending.delete(token);
      this.observer?.finished(token);
    }
    try {
      handler?.({ final, error, version, parameters, outputs });
    } catch (failure) {
      // One broken handler must not cost the others their responses.
      queueMicrotask(() => {
        throw failure;
      });
    }
  };

  /**
   * The server was deleted: Triton will not complete what is still pending
   * (requests that outlived the exit timeout), so settle it here.
   */
  abandonPending(): void {
    const handlers = [...this.#pending.values()];
    for (const token of this.#pending.keys()) this.observer?.finished(token);
    this.#pending.clear();
    const stopped = new TritonError('UNAVAILABLE', 'the server stopped before the request completed');
    for (const handler of handlers) {
      handler({ final: true, error: stopped, version: undefined, parameters: undefined, outputs: [] });
    }
  }

  /** Drops cached metadata (a model was loaded, unloaded or reloaded). */
  forgetModels(): void {
    this.#info.clear();
    this.#infoLoading.clear();
  }

  async infer(model: string, version: number, request: InferenceRequest): Promise<InferenceResponse> {
    const calledNs = this.observer !== undefined || request.trace ? process.hrtime.bigint() : undefined;
    const key = `${model}\u0000${version}`;
    const info = this.#info.get(key) ?? (await this.#modelInfo(key, model, version));
    const tracing = request.trace ? await prepareTracing(request.trace) : undefined;
    const signal = request.signal;
    return new Promise<InferenceResponse>((resolve, reject) => {
      let token: number;
      let trace: Promise<InferenceTrace> | undefined;
      if (tracing === undefined) token = this.#start(model, version, info, request, calledNs);
      else ({ token, trace } = this.#startTraced(model, version, info, request, tracing, calledNs));
      let response: Completion | undefined;
      let extraResponses = 0;
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const settle = (): boolean => {
        if (settled) return false;
        settled = true;
        if (timer !== undefined) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        return true;
      };
      const onAbort = (): void => {
        if (!settle()) return;
        this.#cancel(token);
        reject(cancelled('the request was aborted', signal?.reason));
      };
      this.#pending.set(token, (completion) => {
        if (settled) return;
        const error = completion.error;
        if (error !== undefined) {
          if (settle()) reject(error);
          return;
        }
        if (hasResponse(completion)) {
          if (response === undefined) response = completion;
          else extraResponses++;
        }
        if (!completion.final || !settle()) return;
        if (response === undefined) {
          reject(new TritonError('INTERNAL', `model '${model}' completed the request without a response`));
        } else if (extraResponses > 0) {
          reject(
            new TritonError(
              'UNSUPPORTED',
              `model '${model}' sent ${extraResponses + 1} responses to one request; use model.stream() for decoupled models`,
            ),
          );
        } else {
          try {
            const result = toResponse(response, model, request);
            if (trace === undefined) {
              resolve(result);
            } else {
              trace.then((timeline) => {
                result.trace = timeline;
                resolve(result);
              }, reject);
            }
          } catch (error) {
            reject(error);
          }
        }
      });
      signal?.addEventListener('abort', onAbort, { once: true });
      if (request.timeoutMs !== undefined) {
        timer = setTimeout(() => {
          if (!settle()) return;
          this.#cancel(token);
          reject(cancelled(`the request timed out after ${request.timeoutMs} ms`));
        }, request.timeoutMs);
      }
    });
  }

  async *stream(model: string, version: number, request: InferenceRequest): AsyncGenerator<InferenceResponse> {
    const calledNs = this.observer !== undefined || request.trace ? process.hrtime.bigint() : undefined;
    const key = `${model}\u0000${version}`;
    const info = this.#info.get(key) ?? (await this.#modelInfo(key, model, version));
    const tracing = request.trace ? await prepareTracing(request.trace) : undefined;
    const signal = request.signal;
    let token: number;
    let trace: Promise<InferenceTrace> | undefined;
    if (tracing === undefined) token = this.#start(model, version, info, request, calledNs);
    else ({ token, trace } = this.#startTraced(model, version, info, request, tracing, calledNs));
    const queue: Completion[] = [];
    let wake: (() => void) | undefined;
    let failure: TritonError | undefined;
    let finished = false;
    const notify = (): void => {
      const resume = wake;
      wake = undefined;
      resume?.();
    };
    this.#pending.set(token, (completion) => {
      queue.push(completion);
      notify();
    });
    const onAbort = (): void => {
      failure ??= cancelled('the request was aborted', signal?.reason);
      notify();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    const timer =
      request.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            failure ??= cancelled(`the request timed out after ${request.timeoutMs} ms`);
            notify();
          }, request.timeoutMs);
    try {
      for (;;) {
        if (failure !== undefined) throw failure;
        const completion = queue.shift();
        if (completion === undefined) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          continue;
        }
        if (completion.error !== undefined) {
          finished = completion.final;
          throw completion.error;
        }
        if (hasResponse(completion)) {
          const response = toResponse(completion, model, request);
          // The last response carries the trace; a bare FINAL flag cannot (onTrace can).
          if (completion.final && trace !== undefined) response.trace = await trace;
          yield response;
        }
        if (completion.final) {
          finished = true;
          return;
        }
      }
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (!finished) {
        // Left early (break, error, abort): stop the work in Triton; the
        // remaining completions still arrive and free their resources.
        this.#pending.set(token, () => {});
        this.#cancel(token);
      }
    }
  }

  /** Validates the request and hands it to the addon; returns its token. */
  #start(model: string, version: number, info: ModelInfo, request: InferenceRequest, calledNs: bigint | undefined): number {
    const inputs = prepareInputs(model, info, request);
    const signal = request.signal;
    if (signal?.aborted) throw cancelled('the request was aborted before it started', signal.reason);
    const token = startRequest(this.#server(), model, version, inputs, request);
    if (calledNs !== undefined) this.observer?.submitted(token, model, calledNs);
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
      token = startRequest(nativeServer, model, version, inputs, request);
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

  #modelInfo(key: string, model: string, version: number): Promise<ModelInfo> {
    let loading = this.#infoLoading.get(key);
    if (loading === undefined) {
      const nativeServer = this.#server();
      loading = Promise.all([nativeServer.modelMetadata(model, version), nativeServer.modelConfig(model, version)]).then(
        ([metadataText, configText]) => {
          const info = buildModelInfo(JSON.parse(metadataText) as MetadataJson, JSON.parse(configText) as ConfigJson);
          if (this.#infoLoading.get(key) === loading) this.#info.set(key, info);
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

function buildModelInfo(metadata: MetadataJson, config: ConfigJson): ModelInfo {
  const optional = new Set((config.input ?? []).filter((input) => input.optional === true).map((input) => input.name));
  const inputs = new Map<string, TensorInfo>();
  for (const input of metadata.inputs ?? []) {
    inputs.set(input.name, {
      datatype: input.datatype,
      shape: input.shape.map(Number),
    });
  }
  return {
    inputs,
    outputs: new Set((metadata.outputs ?? []).map((output) => output.name)),
    required: [...inputs.keys()].filter((name) => !optional.has(name)),
    maxBatchSize: Number(config.max_batch_size ?? 0),
  };
}

/** Checked inputs, flat as the addon takes them: name, datatype, shape, data, … */
function prepareInputs(model: string, info: ModelInfo, request: InferenceRequest): NativeInputField[] {
  if (request === null || typeof request !== 'object' || request.inputs === null || typeof request.inputs !== 'object') {
    throw invalid(`a request to model '${model}' needs an 'inputs' object`);
  }
  const prepared: NativeInputField[] = [];
  for (const name of Object.keys(request.inputs)) {
    const expected = info.inputs.get(name);
    if (expected === undefined) {
      throw invalid(`model '${model}' has no input '${name}' (its inputs: ${[...info.inputs.keys()].join(', ')})`);
    }
    // normalizeInput also refuses data of another type than the model's.
    const input = normalizeInput(name, request.inputs[name] as InputValue, expected.datatype);
    checkShape(model, name, input.shape, expected.shape, info.maxBatchSize);
    prepared.push(input.name, input.datatype, input.shape.length, ...input.shape, input.data);
  }
  for (const name of info.required) {
    if (!(name in request.inputs)) throw invalid(`model '${model}' needs input '${name}'`);
  }
  for (const name of request.outputs ?? []) {
    if (!info.outputs.has(name)) {
      throw invalid(`model '${model}' has no output '${name}' (its outputs: ${[...info.outputs].join(', ')})`);
    }
  }
  return prepared;
}

function checkShape(model: string, name: string, shape: number[], dims: number[], maxBatchSize: number): void {
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
  model: string,
  version: number,
  inputs: NativeInputField[],
  request: InferenceRequest,
): number {
  const { id, priority, timeoutMs, sequence, parameters } = request;
  if (priority !== undefined && !(Number.isInteger(priority) && priority >= 0)) {
    throw invalid('priority must be a non-negative integer');
  }
  if (timeoutMs !== undefined && !(timeoutMs > 0 && Number.isFinite(timeoutMs))) {
    throw invalid('timeoutMs must be a positive number');
  }
  let flags: number | undefined;
  if (sequence !== undefined) {
    const sequenceId = sequence.id;
    if (typeof sequenceId !== 'string' && typeof sequenceId !== 'bigint' && !(Number.isSafeInteger(sequenceId) && sequenceId >= 0)) {
      throw invalid('sequence.id must be a non-negative integer, bigint or string');
    }
    flags = (sequence.start ? SEQUENCE_START : 0) | (sequence.end ? SEQUENCE_END : 0);
  }
  let parameterList: Array<[string, string | number | boolean]> | undefined;
  if (parameters !== undefined) {
    parameterList = Object.entries(parameters);
    for (const [key, value] of parameterList) {
      if (!['string', 'number', 'boolean'].includes(typeof value)) {
        throw invalid(`parameter '${key}' must be a string, number or boolean`);
      }
    }
  }
  return nativeServer.infer(
    model,
    version,
    request.outputs ?? null,
    id === undefined ? undefined : String(id),
    priority,
    timeoutMs === undefined ? undefined : Math.round(timeoutMs * 1000),
    flags,
    sequence?.id,
    parameterList,
    ...inputs,
  );
}
