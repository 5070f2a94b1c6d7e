/**
 * The shapes of the public API that the in-process `Server`/`Model` and the
 * remote `Client` (`tritonserver-node/client`) share: requests, responses,
 * metadata, load options, and the `InferenceServer`/`InferenceModel`
 * interfaces both implement, so code written against them moves between one
 * process and a Triton fleet by changing how the server is made. Types only,
 * below the classes that use them: this file imports no runtime and nothing
 * of server.ts, model.ts or inference.ts.
 */
import type { ModelConfig, ModelConfigInput } from './model-config.js';
import type { ModelStatistics } from './observability/statistics.js';
import type { InferenceTrace, TraceOptions } from './observability/tracing.js';
import type { SharedMemoryOutput, SharedMemoryRange } from './shared-memory.js';
import type { InputValue, Tensor } from './tensor.js';
import type { DataType } from './data-types.js';

/**
 * The sequence a request belongs to, for stateful models (sequence batching,
 * see {@link SequenceBatching}): Triton routes the requests of one
 * correlation id to the same model instance, in order.
 */
export interface SequenceOptions {
  /**
   * Correlation id of the sequence (Triton's `correlation_id`): a
   * non-negative integer, a bigint below 2^64, or a non-empty string.
   * Anything else throws `TritonError('INVALID_ARG')`.
   */
  id: number | bigint | string;
  /** First request of the sequence (Triton's START flag). Default false. */
  start?: boolean;
  /** Last request of the sequence (Triton's END flag). Default false. */
  end?: boolean;
}

/** Where Triton should write one output (see `InferenceRequest.outputs`). */
export interface OutputBufferSpec {
  /**
   * Memory Triton writes the output into, without a copy: the response's
   * tensor is then a view of it. Kept from being transferred, like inputs.
   */
  data?: ArrayBufferView;
  /**
   * When `data` is too small for the output: `'error'` (default) fails the
   * request with INVALID_ARG naming both sizes; `'allocate'` gives the output
   * memory of its own, as without `data`.
   */
  ifTooSmall?: 'error' | 'allocate';
  /**
   * Triton's classification extension: instead of the output, its top `k`
   * values per batch row, as BYTES `"<value>:<index>"` (remote servers add
   * `:<label>` where the model has a label file). Not with `data`.
   */
  classification?: number;
  /**
   * In-process server: have Triton write the output into a range of a
   * registered shared memory region (`server.sharedMemory`) instead of
   * returning its bytes; the response lists it in `sharedMemoryOutputs`.
   * A range smaller than the output fails the request (INTERNAL, Triton's
   * "should be at least N bytes to hold the results"). Not with `data` or
   * `classification`.
   */
  sharedMemory?: SharedMemoryRange;
}

/**
 * One inference request, as `model.infer()` and `model.stream()` take it (in
 * process, and the same for the remote client). Fields not named here throw
 * `TritonError('INVALID_ARG')`.
 */
export interface InferenceRequest {
  /** Input tensors by name. */
  inputs: Record<string, InputValue>;
  /**
   * Outputs to return (default all): their names, or a record of name →
   * `{ data }` to have Triton write an output straight into your buffer
   * (a service can reuse one buffer per worker, no GC at all).
   */
  outputs?: string[] | Record<string, OutputBufferSpec>;
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

/**
 * One response of a request: `model.infer()` resolves to the (only or last)
 * one, `model.stream()` yields each one a decoupled model sends.
 */
export interface InferenceResponse {
  /** The model that answered. */
  model: {
    /** The model's name. */
    name: string;
    /** The version that ran the request (-1 when Triton did not say). */
    version: number;
  };
  /** The request's id ({@link InferenceRequest.id}); `''` when it had none. */
  id: string;
  /**
   * Output tensors by name: every output the model produced, or those asked
   * for in {@link InferenceRequest.outputs}. In process their data are views
   * of the output memory itself (no copy; a copy with the `outputCopy`
   * option), or of the caller's own buffer given in `outputs`; that memory
   * is kept until {@link InferenceResponse.dispose} or garbage collection.
   */
  outputs: Record<string, Tensor>;
  /**
   * Outputs Triton wrote into shared memory (`OutputBufferSpec.sharedMemory`),
   * by name: where and how many bytes, rather than a copy. They are not in
   * `outputs`. Absent when no output was requested into shared memory.
   */
  sharedMemoryOutputs?: Record<string, SharedMemoryOutput>;
  /** Parameters the model or backend set on the response (empty when none). */
  parameters: Record<string, string | number | boolean>;
  /** Triton's FINAL flag: the last response of the request. */
  final: boolean;
  /** The request's timeline, when it was traced (see `InferenceRequest.trace`). */
  trace?: InferenceTrace;
  /**
   * Lets go of the outputs' memory now rather than when the garbage
   * collector finds them unused: their data become empty (detached). For
   * large outputs this avoids V8's full collections that memory outside its
   * heap triggers (one per 64 MB). Outputs written into buffers the caller
   * gave (`InferenceRequest.outputs`) stay untouched. Idempotent; also
   * `using response = await model.infer(...)`.
   */
  dispose(): void;
  /** The same as {@link InferenceResponse.dispose}, for `using`. */
  [Symbol.dispose](): void;
}

/** A model version number; -1 lets Triton choose (the version policy's latest). */
export type ModelVersion = number;

/** An input or output as model metadata describes it. */
export interface TensorMetadata {
  /** The tensor's name. */
  name: string;
  /** Its data type (the metadata's name, `FP32`, not the config's `TYPE_FP32`). */
  datatype: DataType;
  /** Includes the batch dimension (-1) when the model batches. */
  shape: number[];
}

/** `TRITONSERVER_ServerModelMetadata`. */
export interface ModelMetadata {
  /** The model's name. */
  name: string;
  /** The versions the metadata is for, as decimal strings (the handle's version, or every ready one). */
  versions: string[];
  /** The model's platform or backend, such as `onnxruntime_onnx`, `pytorch_libtorch`, `python`, `ensemble`. */
  platform: string;
  /** The model's inputs. */
  inputs: TensorMetadata[];
  /** The model's outputs. */
  outputs: TensorMetadata[];
}

/** `TRITONSERVER_ServerMetadata`. */
export interface ServerMetadata {
  /** The server's id: the `serverId` option (Triton's default `triton`). */
  name: string;
  /** Triton's version, such as `2.59.0`. */
  version: string;
  /** The protocol extensions Triton supports (`classification`, `sequence`, `model_repository`, `statistics`, `logging`, ...). */
  extensions: string[];
}

/** One model of the repository, as `TRITONSERVER_ServerModelIndex` lists it. */
export interface ModelIndexEntry {
  /** The model's name. */
  name: string;
  /** Absent for a model that was never loaded. */
  version?: string;
  /** e.g. `READY`, `UNAVAILABLE`, `LOADING`, `UNLOADING`. */
  state?: string;
  /** Why the model is in that state: Triton's load error for a model that failed to load, `unloaded` after an unload. */
  reason?: string;
}

/** Options of {@link Server.loadModel}; unknown fields throw `TritonError('INVALID_ARG')`. */
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

/** Options of {@link Server.unloadModel}; unknown fields throw `TritonError('INVALID_ARG')`. */
export interface UnloadModelOptions {
  /** Also unload models that depend on it (ensembles). Default false. */
  unloadDependents?: boolean;
  /** Resolve only once the model has finished unloading. Default true. */
  wait?: boolean;
  /**
   * How long to wait for the unload, in ms; then reject with UNAVAILABLE
   * (the unload goes on in Triton). Default: the exit timeout. A Python
   * model whose stub died never finishes unloading (Triton r25.07).
   */
  timeoutMs?: number;
}

/** One model (and version) of a Triton server, in-process or remote. */
export interface InferenceModel {
  /** The model's name. */
  readonly name: string;
  /** -1: the server chooses (the version policy's latest). */
  readonly version: ModelVersion;
  /** Whether this model (version) can serve requests; false for a model the server does not know. */
  ready(): Promise<boolean>;
  /** The model's metadata: versions, platform, inputs and outputs with data types and shapes. */
  metadata(): Promise<ModelMetadata>;
  /** The configuration the server uses, all defaults filled in. */
  config(): Promise<ModelConfig>;
  /** Triton's statistics of this model's ready versions. */
  statistics(): Promise<ModelStatistics[]>;
  /** Runs one inference; resolves with the model's single response. */
  infer(request: InferenceRequest): Promise<InferenceResponse>;
  /** Runs one inference and yields every response; leaving the loop early ends the request. */
  stream(request: InferenceRequest): AsyncIterable<InferenceResponse>;
}

/** A Triton server, in-process (`Server`) or remote (`Client`). */
export interface InferenceServer {
  /** Whether the server is live. */
  live(): Promise<boolean>;
  /** Whether the server is ready (with strict readiness, every model too). */
  ready(): Promise<boolean>;
  /** The server's name, version and protocol extensions. */
  metadata(): Promise<ServerMetadata>;
  /** Every model of the repositories, with version, state and reason where the server gives them. */
  modelIndex(options?: { readyOnly?: boolean }): Promise<ModelIndexEntry[]>;
  /** Loads (or reloads) a model (explicit model control mode). */
  loadModel(name: string, options?: LoadModelOptions): Promise<InferenceModel>;
  /** Unloads a model (explicit model control mode). */
  unloadModel(name: string, options?: UnloadModelOptions): Promise<void>;
  /** A handle on a model; `version` -1 (default) lets the server choose. */
  model(name: string, version?: ModelVersion): InferenceModel;
  /** Statistics of every ready model version. */
  statistics(): Promise<ModelStatistics[]>;
  /** Triton's metrics in Prometheus text format. */
  metrics(): Promise<string>;
}
