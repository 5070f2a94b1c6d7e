/** `Model`: a handle on one model (and version) of a server. */
import { checkInteger, checkName } from './check.js';
import { TritonError } from './errors.js';
import { classificationTensor } from './classification.js';
import type { Inference } from './inference.js';
import { checkRequest } from './request-check.js';
import { parseModelConfigJson, type ModelConfig } from './model-config.js';
import type { NativeServer } from './native.js';
import type { InferenceModel, InferenceRequest, InferenceResponse, ModelMetadata, ModelVersion, OutputBufferSpec } from './surface.js';
import { parseStatisticsJson, type ModelStatistics } from './observability/statistics.js';

/** How a model batches (`TRITONSERVER_ServerModelBatchProperties`). */
export interface ModelBatchProperties {
  /** `first-dim`: the first dimension of every input/output is the batch. */
  batching: 'first-dim' | 'unknown';
}

/** How a model answers requests (`TRITONSERVER_ServerModelTransactionProperties`). */
export interface ModelTransactionProperties {
  /** One response per request. */
  oneToOne: boolean;
  /** Any number of responses per request (use `Model.stream`). */
  decoupled: boolean;
}

export type { ModelStatistics } from './observability/statistics.js';

/** Outputs asked for as classifications (name → k), or undefined for none (the common case, checked cheaply). */
function classifications(request: InferenceRequest): Map<string, number> | undefined {
  const outputs = request?.outputs;
  if (outputs === undefined || Array.isArray(outputs) || typeof outputs !== 'object' || outputs === null) return undefined;
  let found: Map<string, number> | undefined;
  for (const name in outputs) {
    const k = (outputs[name] as OutputBufferSpec | undefined)?.classification;
    if (k !== undefined) (found ??= new Map()).set(name, k);
  }
  return found;
}

/** The request as Triton gets it: classified outputs requested plainly (checked first, with the rest). */
function withoutClassification(request: InferenceRequest): InferenceRequest {
  checkRequest(request);
  const outputs: Record<string, OutputBufferSpec> = {};
  for (const [name, spec] of Object.entries(request.outputs as Record<string, OutputBufferSpec>)) {
    const { classification: _, ...rest } = spec;
    outputs[name] = rest;
  }
  return { ...request, outputs };
}

function classified(response: InferenceResponse, classes: Map<string, number>, batched: boolean): InferenceResponse {
  for (const [name, k] of classes) {
    const tensor = response.outputs[name];
    if (tensor !== undefined) response.outputs[name] = classificationTensor(tensor, k, batched);
  }
  return response;
}

const BATCH_FIRST_DIM = 2;
const TXN_ONE_TO_ONE = 1;
const TXN_DECOUPLED = 2;

export class Model implements InferenceModel {
  readonly name: string;
  readonly version: ModelVersion;
  readonly #native: NativeServer;
  readonly #inference: Inference;

  /** @internal Use `server.model(name)` or `server.loadModel(name)`. */
  constructor(nativeServer: NativeServer, inference: Inference, name: string, version: ModelVersion) {
    checkName('model name', name);
    checkInteger('model version', version, -1);
    this.#native = nativeServer;
    this.#inference = inference;
    this.name = name;
    this.version = version;
  }

  /**
   * Whether this model (version) can serve requests. A model Triton does
   * not know or has unloaded is not ready (Triton's own call says NOT_FOUND),
   * nor is one this thread found unhealthy (its Python stub died, see
   * `server.on('modelUnhealthy')`) until it serves again.
   */
  async ready(): Promise<boolean> {
    // Triton keeps a model whose Python stub died READY; the package knows better (lib/model-health.ts).
    if (this.#inference.health.isUnhealthy(this.name)) return false;
    try {
      return await this.#native.modelIsReady(this.name, this.version);
    } catch (error) {
      if (error instanceof TritonError && error.code === 'NOT_FOUND') return false;
      throw error;
    }
  }

  async metadata(): Promise<ModelMetadata> {
    const text = await this.#native.modelMetadata(this.name, this.version);
    return JSON.parse(text) as ModelMetadata;
  }

  /** The configuration Triton uses, all defaults filled in. */
  async config(): Promise<ModelConfig> {
    const text = await this.#native.modelConfig(this.name, this.version);
    return parseModelConfigJson(JSON.parse(text));
  }

  /**
   * Statistics of this model's ready versions (one entry per version; just
   * this one when the handle names a version), typed and checked. Durations
   * (`ns`) are bigint: see lib/observability/statistics.ts.
   */
  async statistics(): Promise<ModelStatistics[]> {
    return parseStatisticsJson(await this.#native.modelStatistics(this.name, this.version));
  }

  /**
   * How the model batches (Triton's batch properties): `first-dim` when the
   * first dimension of every input and output is the batch.
   *
   * @throws {@link TritonError} Triton's error when the model (version) is
   *   not available (`NOT_FOUND` for a model it does not know);
   *   `UNAVAILABLE` once the server stopped.
   */
  async batchProperties(): Promise<ModelBatchProperties> {
    const flags = await this.#native.modelBatchProperties(this.name, this.version);
    return { batching: flags & BATCH_FIRST_DIM ? 'first-dim' : 'unknown' };
  }

  /**
   * How the model answers (Triton's transaction properties): one response
   * per request, or decoupled (any number, read them with {@link Model.stream}).
   *
   * @throws {@link TritonError} Triton's error when the model (version) is
   *   not available (`NOT_FOUND` for a model it does not know);
   *   `UNAVAILABLE` once the server stopped.
   */
  async transactionProperties(): Promise<ModelTransactionProperties> {
    const flags = await this.#native.modelTransactionProperties(this.name, this.version);
    return { oneToOne: (flags & TXN_ONE_TO_ONE) !== 0, decoupled: (flags & TXN_DECOUPLED) !== 0 };
  }

  /** Runs one inference; resolves with the model's single response. */
  infer(request: InferenceRequest): Promise<InferenceResponse> {
    const classes = classifications(request);
    if (classes === undefined) return this.#inference.infer(this.name, this.version, request);
    return this.#classifyInfer(request, classes);
  }

  /**
   * Runs one inference and yields every response (decoupled models send any
   * number; others exactly one). Leaving the loop early cancels the request.
   */
  stream(request: InferenceRequest): AsyncIterable<InferenceResponse> {
    const classes = classifications(request);
    if (classes === undefined) return this.#inference.stream(this.name, this.version, request);
    return this.#classifyStream(request, classes);
  }

  async #classifyInfer(request: InferenceRequest, classes: Map<string, number>): Promise<InferenceResponse> {
    const [batched, response] = await Promise.all([this.#batched(), this.#inference.infer(this.name, this.version, withoutClassification(request))]);
    return classified(response, classes, batched);
  }

  async *#classifyStream(request: InferenceRequest, classes: Map<string, number>): AsyncGenerator<InferenceResponse, void, undefined> {
    const batched = await this.#batched();
    for await (const response of this.#inference.stream(this.name, this.version, withoutClassification(request))) {
      yield classified(response, classes, batched);
    }
  }

  /** Whether the first dimension is the batch (classification ranks per batch row). */
  async #batched(): Promise<boolean> {
    return ((await this.config()).max_batch_size ?? 0) > 0;
  }
}
