export { TritonError, isTritonError, ERROR_CODES, type TritonErrorCode, type ModelLoadFailure } from './errors.js';
export { Server, type StopOptions, type StopReport, type SharedServerHandle } from './server.js';
export {
  boundModelDefinitionSchema,
  liveBoundBatches,
  type BoundModelDefinition,
  type BoundHandler,
  type BoundRequest,
  type BoundContext,
  type BoundOutputs,
  type BoundOutputValue,
  type BoundResult,
  type BoundStream,
} from './bound-model.js';
export type {
  ServerEvents,
  ServerEventName,
  ModelUnhealthyEvent,
  ModelRecoveredEvent,
  ModelRecoveryFailedEvent,
} from './model-health.js';
export { Model, type ModelStatistics, type ModelBatchProperties, type ModelTransactionProperties } from './model.js';
export type {
  InferenceServer,
  InferenceModel,
  InferenceRequest,
  InferenceResponse,
  SequenceOptions,
  OutputBufferSpec,
  ServerMetadata,
  ModelIndexEntry,
  LoadModelOptions,
  UnloadModelOptions,
  ModelVersion,
  ModelMetadata,
  TensorMetadata,
} from './surface.js';
export { DATA_TYPES, DATA_TYPE_INFO, dataTypeFromEnum, type DataType, type DataTypeInfo } from './data-types.js';
export {
  Tensor,
  dataTypeEnum,
  encodeBytes,
  decodeBytes,
  float32ToFloat16Bits,
  float16BitsToFloat32,
  float32ToBfloat16Bits,
  bfloat16BitsToFloat32,
  type TypedArray,
  type Float16ArrayLike,
  type TensorData,
  type TensorDataMap,
  type TensorArrayMap,
  type InputData,
  type TensorInit,
  type InputValue,
  type InferDataType,
  type TensorFromOptions,
} from './tensor.js';
export {
  SharedMemory,
  sharedMemoryRegisterOptionsSchema,
  sharedMemoryRangeSchema,
  liveSharedMemoryMappings,
  type SharedMemoryRegisterOptions,
  type SharedMemoryRange,
  type SharedMemoryInput,
  type SharedMemoryOutput,
  type SharedMemoryRegion,
} from './shared-memory.js';
export {
  serverOptionsSchema,
  serverOptionDefaults,
  parseServerOptions,
  type ServerOptions,
  type ResolvedServerOptions,
} from './options.js';
export {
  modelConfigSchema,
  validateModelConfig,
  checkModelConfig,
  parseModelConfig,
  parseModelConfigJson,
  formatModelConfig,
  type ModelConfig,
  type ModelConfigInput,
  type ModelInput,
  type ModelOutput,
  type DataTypeName,
  type InstanceGroup,
  type DynamicBatching,
  type SequenceBatching,
  type EnsembleScheduling,
  type EnsembleStep,
  type VersionPolicy,
} from './model-config.js';
export {
  onnxRuntimeParameters,
  pytorchParameters,
  readOnnxRuntimeParameters,
  readPyTorchParameters,
  type OnnxRuntimeParameters,
  type PyTorchParameters,
  type ModelParameterValue,
  type BackendParameterSource,
} from './backend-parameters.js';
export { writeModelRepository, type ModelRepositoryEntry } from './model-repository.js';
export { apiVersion, liveObjects, librarySearchPaths, type LibraryInfo, type LiveObjects } from './native.js';
export {
  parseMetricsText,
  type MetricSample,
  type MetricType,
} from './observability/metrics.js';
export {
  MetricFamily,
  Metric,
  metricFamilyOptionsSchema,
  type MetricFamilyOptions,
  type MetricKind,
} from './observability/custom-metrics.js';
export {
  modelStatisticsSchema,
  parseStatisticsJson,
  type DurationStat,
  type InferenceStats,
  type BatchStats,
  type ResponseStats,
  type MemoryUsage,
} from './observability/statistics.js';
export {
  metricsHandler,
  collectMetricsText,
  PROMETHEUS_CONTENT_TYPE,
  type MetricsHandler,
  type MetricsHandlerOptions,
  type MetricsRegistryLike,
  type MetricsSource,
  type ReplyLike,
} from './observability/handler.js';
export {
  parseTritonLogLine,
  followTritonLog,
  type LogLevel,
  type TritonLogRecord,
  type TritonLogSink,
  type PinoLikeLogger,
  type FollowLogOptions,
  type TritonLogFollower,
} from './observability/logging.js';
export {
  buildTrace,
  liveTraces,
  TRACE_ACTIVITIES,
  type InferenceTrace,
  type RequestTrace,
  type TraceActivity,
  type TraceActivityName,
  type TraceDurations,
  type TraceOptions,
  type TracerLike,
  type SpanLike,
} from './observability/tracing.js';
export { PackageMetrics } from './observability/package-metrics.js';
