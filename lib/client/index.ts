/**
 * `tritonserver-node/client`: remote mode. The in-process `Server`/`Model`
 * surface (`InferenceServer`/`InferenceModel`) over KServe v2, gRPC
 * (node:http2 with @grpc/proto-loader) or HTTP (undici), to one Triton server or a fleet. The
 * in-process core never imports this; its transports load their optional
 * peer dependency only when a target of that protocol is used.
 */
export { Client, RemoteModel, type RemoteInferenceRequest } from './client.js';
export {
  clientOptionsSchema,
  type ClientOptions,
  type ResolvedClientOptions,
  type ClientTlsOptions,
  type ClientRetryOptions,
  type CallOptions,
} from './options.js';
export { ClientMetrics } from './metrics.js';
export { metricsHandler, collectMetricsText, PROMETHEUS_CONTENT_TYPE, type MetricsHandler, type MetricsHandlerOptions, type MetricsSource } from '../observability/handler.js';
export { TritonError, isTritonError, type TritonErrorCode } from '../errors.js';
export type { InferenceServer, InferenceModel, InferenceRequest, InferenceResponse, SequenceOptions, OutputBufferSpec } from '../surface.js';
export { Tensor, type InputValue, type TensorInit } from '../tensor.js';
export { type DataType } from '../data-types.js';
