/**
 * What in-process and remote share: the in-process `Server`/`Model` and the
 * remote `Client` (`tritonserver-node/client`) both implement these, so code
 * written against them moves between one process and a Triton fleet by
 * changing how the server is made. Types only: this file imports no runtime.
 */
import type { InferenceRequest, InferenceResponse } from './inference.js';
import type { ModelConfig } from './model-config.js';
import type { ModelMetadata, ModelVersion } from './model.js';
import type { ModelStatistics } from './observability/statistics.js';
import type { LoadModelOptions, ModelIndexEntry, ServerMetadata, UnloadModelOptions } from './server.js';

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
