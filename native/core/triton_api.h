// The part of Triton's in-process C API (libtritonserver.so) that this
// package uses, declared by this project from the documented ABI: opaque
// handle types, enum values, and one X-macro list of functions with their
// signatures. The addon resolves the list with dlsym (loader.cc); the test
// core defines the same functions and checks its signatures against it.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {
struct TRITONSERVER_Error;
struct TRITONSERVER_InferenceRequest;
struct TRITONSERVER_InferenceResponse;
struct TRITONSERVER_InferenceTrace;
struct TRITONSERVER_Message;
struct TRITONSERVER_Metrics;
struct TRITONSERVER_Parameter;
struct TRITONSERVER_ResponseAllocator;
struct TRITONSERVER_Server;
struct TRITONSERVER_ServerOptions;
struct TRITONSERVER_MetricFamily;
struct TRITONSERVER_Metric;
struct TRITONSERVER_MetricArgs;
}

// Enums are C `int`-sized in the ABI; the values are Triton's.
enum TRITONSERVER_DataType : int {
  TRITONSERVER_TYPE_INVALID = 0,
  TRITONSERVER_TYPE_BOOL = 1,
  TRITONSERVER_TYPE_UINT8 = 2,
  TRITONSERVER_TYPE_UINT16 = 3,
  TRITONSERVER_TYPE_UINT32 = 4,
  TRITONSERVER_TYPE_UINT64 = 5,
  TRITONSERVER_TYPE_INT8 = 6,
  TRITONSERVER_TYPE_INT16 = 7,
  TRITONSERVER_TYPE_INT32 = 8,
  TRITONSERVER_TYPE_INT64 = 9,
  TRITONSERVER_TYPE_FP16 = 10,
  TRITONSERVER_TYPE_FP32 = 11,
  TRITONSERVER_TYPE_FP64 = 12,
  TRITONSERVER_TYPE_BYTES = 13,
  TRITONSERVER_TYPE_BF16 = 14,
};

enum TRITONSERVER_MemoryType : int {
  TRITONSERVER_MEMORY_CPU = 0,
  TRITONSERVER_MEMORY_CPU_PINNED = 1,
  TRITONSERVER_MEMORY_GPU = 2,
};

enum TRITONSERVER_ParameterType : int {
  TRITONSERVER_PARAMETER_STRING = 0,
  TRITONSERVER_PARAMETER_INT = 1,
  TRITONSERVER_PARAMETER_BOOL = 2,
  TRITONSERVER_PARAMETER_DOUBLE = 3,
  TRITONSERVER_PARAMETER_BYTES = 4,
};

enum TRITONSERVER_InstanceGroupKind : int {
  TRITONSERVER_INSTANCEGROUPKIND_AUTO = 0,
  TRITONSERVER_INSTANCEGROUPKIND_CPU = 1,
  TRITONSERVER_INSTANCEGROUPKIND_GPU = 2,
  TRITONSERVER_INSTANCEGROUPKIND_MODEL = 3,
};

enum TRITONSERVER_LogFormat : int {
  TRITONSERVER_LOG_DEFAULT = 0,
  TRITONSERVER_LOG_ISO8601 = 1,
};

enum TRITONSERVER_Error_Code : int {
  TRITONSERVER_ERROR_UNKNOWN = 0,
  TRITONSERVER_ERROR_INTERNAL = 1,
  TRITONSERVER_ERROR_NOT_FOUND = 2,
  TRITONSERVER_ERROR_INVALID_ARG = 3,
  TRITONSERVER_ERROR_UNAVAILABLE = 4,
  TRITONSERVER_ERROR_UNSUPPORTED = 5,
  TRITONSERVER_ERROR_ALREADY_EXISTS = 6,
  TRITONSERVER_ERROR_CANCELLED = 7,
};

enum TRITONSERVER_MetricFormat : int {
  TRITONSERVER_METRIC_PROMETHEUS = 0,
};

enum TRITONSERVER_ModelControlMode : int {
  TRITONSERVER_MODEL_CONTROL_NONE = 0,
  TRITONSERVER_MODEL_CONTROL_POLL = 1,
  TRITONSERVER_MODEL_CONTROL_EXPLICIT = 2,
};

enum TRITONSERVER_RateLimitMode : int {
  TRITONSERVER_RATE_LIMIT_OFF = 0,
  TRITONSERVER_RATE_LIMIT_EXEC_COUNT = 1,
};

// Observability (custom metrics, logging, tracing).
enum TRITONSERVER_MetricKind : int {
  TRITONSERVER_METRIC_KIND_COUNTER = 0,
  TRITONSERVER_METRIC_KIND_GAUGE = 1,
  TRITONSERVER_METRIC_KIND_HISTOGRAM = 2,
};

enum TRITONSERVER_LogLevel : int {
  TRITONSERVER_LOG_INFO = 0,
  TRITONSERVER_LOG_WARN = 1,
  TRITONSERVER_LOG_ERROR = 2,
  TRITONSERVER_LOG_VERBOSE = 3,
};

enum TRITONSERVER_InferenceTraceLevel : int {
  TRITONSERVER_TRACE_LEVEL_DISABLED = 0,
  TRITONSERVER_TRACE_LEVEL_MIN = 1,
  TRITONSERVER_TRACE_LEVEL_MAX = 2,
  TRITONSERVER_TRACE_LEVEL_TIMESTAMPS = 0x4,
  TRITONSERVER_TRACE_LEVEL_TENSORS = 0x8,
};

enum TRITONSERVER_InferenceTraceActivity : int {
  TRITONSERVER_TRACE_REQUEST_START = 0,
  TRITONSERVER_TRACE_QUEUE_START = 1,
  TRITONSERVER_TRACE_COMPUTE_START = 2,
  TRITONSERVER_TRACE_COMPUTE_INPUT_END = 3,
  TRITONSERVER_TRACE_COMPUTE_OUTPUT_START = 4,
  TRITONSERVER_TRACE_COMPUTE_END = 5,
  TRITONSERVER_TRACE_REQUEST_END = 6,
  TRITONSERVER_TRACE_TENSOR_QUEUE_INPUT = 7,
  TRITONSERVER_TRACE_TENSOR_BACKEND_INPUT = 8,
  TRITONSERVER_TRACE_TENSOR_BACKEND_OUTPUT = 9,
  TRITONSERVER_TRACE_CUSTOM_ACTIVITY = 10,
};

using TRITONSERVER_InferenceTraceActivityFn_t = void (*)(
    TRITONSERVER_InferenceTrace* trace,
    TRITONSERVER_InferenceTraceActivity activity, uint64_t timestamp_ns,
    void* userp);
using TRITONSERVER_InferenceTraceReleaseFn_t = void (*)(
    TRITONSERVER_InferenceTrace* trace, void* userp);

// Flag values (passed as uint32_t).
constexpr uint32_t TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1;
constexpr uint32_t TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2;
constexpr uint32_t TRITONSERVER_REQUEST_RELEASE_ALL = 1;
constexpr uint32_t TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1;
constexpr uint32_t TRITONSERVER_BATCH_UNKNOWN = 1;
constexpr uint32_t TRITONSERVER_BATCH_FIRST_DIM = 2;
constexpr uint32_t TRITONSERVER_INDEX_FLAG_READY = 1;
constexpr uint32_t TRITONSERVER_TXN_ONE_TO_ONE = 1;
constexpr uint32_t TRITONSERVER_TXN_DECOUPLED = 2;

// Callback types.
using TRITONSERVER_ResponseAllocatorAllocFn_t = TRITONSERVER_Error* (*)(
    TRITONSERVER_ResponseAllocator* allocator, const char* tensor_name,
    size_t byte_size, TRITONSERVER_MemoryType memory_type,
    int64_t memory_type_id, void* userp, void** buffer, void** buffer_userp,
    TRITONSERVER_MemoryType* actual_memory_type,
    int64_t* actual_memory_type_id);
using TRITONSERVER_ResponseAllocatorReleaseFn_t = TRITONSERVER_Error* (*)(
    TRITONSERVER_ResponseAllocator* allocator, void* buffer, void* buffer_userp,
    size_t byte_size, TRITONSERVER_MemoryType memory_type,
    int64_t memory_type_id);
using TRITONSERVER_ResponseAllocatorStartFn_t = TRITONSERVER_Error* (*)(
    TRITONSERVER_ResponseAllocator* allocator, void* userp);
using TRITONSERVER_ResponseAllocatorQueryFn_t = TRITONSERVER_Error* (*)(
    TRITONSERVER_ResponseAllocator* allocator, void* userp,
    const char* tensor_name, size_t* byte_size,
    TRITONSERVER_MemoryType* memory_type, int64_t* memory_type_id);
using TRITONSERVER_InferenceRequestReleaseFn_t = void (*)(
    TRITONSERVER_InferenceRequest* request, const uint32_t flags, void* userp);
using TRITONSERVER_InferenceResponseCompleteFn_t = void (*)(
    TRITONSERVER_InferenceResponse* response, const uint32_t flags,
    void* userp);

// The API minor version this package needs at least; functions listed with a
// higher minor are optional (null when the library is older).
constexpr uint32_t kTritonApiMajor = 1;
constexpr uint32_t kTritonApiMinMinor = 17;

// X(minor the function appeared in, return type, name without the
//   TRITONSERVER_ prefix, parameter list)
#define TRITON_API_FUNCTIONS(X)                                                \
  X(0, TRITONSERVER_Error*, ApiVersion, (uint32_t * major, uint32_t * minor))  \
  /* errors */                                                                 \
  X(0, TRITONSERVER_Error*, ErrorNew,                                          \
    (TRITONSERVER_Error_Code code, const char* msg))                          \
  X(0, void, ErrorDelete, (TRITONSERVER_Error * error))                        \
  X(0, TRITONSERVER_Error_Code, ErrorCode, (TRITONSERVER_Error * error))       \
  X(0, const char*, ErrorCodeString, (TRITONSERVER_Error * error))             \
  X(0, const char*, ErrorMessage, (TRITONSERVER_Error * error))                \
  /* parameters */                                                             \
  X(0, TRITONSERVER_Parameter*, ParameterNew,                                  \
    (const char* name, const TRITONSERVER_ParameterType type,                  \
     const void* value))                                                       \
  X(0, TRITONSERVER_Parameter*, ParameterBytesNew,                             \
    (const char* name, const void* byte_ptr, const uint64_t size))             \
  X(0, void, ParameterDelete, (TRITONSERVER_Parameter * parameter))            \
  /* response allocator */                                                     \
  X(0, TRITONSERVER_Error*, ResponseAllocatorNew,                              \
    (TRITONSERVER_ResponseAllocator * *allocator,                              \
     TRITONSERVER_ResponseAllocatorAllocFn_t alloc_fn,                         \
     TRITONSERVER_ResponseAllocatorReleaseFn_t release_fn,                     \
     TRITONSERVER_ResponseAllocatorStartFn_t start_fn))                        \
  X(0, TRITONSERVER_Error*, ResponseAllocatorSetQueryFunction,                 \
    (TRITONSERVER_ResponseAllocator * allocator,                               \
     TRITONSERVER_ResponseAllocatorQueryFn_t query_fn))                        \
  X(0, TRITONSERVER_Error*, ResponseAllocatorDelete,                           \
    (TRITONSERVER_ResponseAllocator * allocator))                              \
  /* messages and metrics */                                                   \
  X(0, TRITONSERVER_Error*, MessageDelete, (TRITONSERVER_Message * message))   \
  X(0, TRITONSERVER_Error*, MessageSerializeToJson,                            \
    (TRITONSERVER_Message * message, const char** base, size_t* byte_size))    \
  X(0, TRITONSERVER_Error*, MetricsDelete, (TRITONSERVER_Metrics * metrics))   \
  X(0, TRITONSERVER_Error*, MetricsFormatted,                                  \
    (TRITONSERVER_Metrics * metrics, TRITONSERVER_MetricFormat format,         \
     const char** base, size_t* byte_size))                                    \
  /* inference requests */                                                     \
  X(0, TRITONSERVER_Error*, InferenceRequestNew,                               \
    (TRITONSERVER_InferenceRequest * *inference_request,                       \
     TRITONSERVER_Server * server, const char* model_name,                     \
     const int64_t model_version))                                             \
  X(0, TRITONSERVER_Error*, InferenceRequestDelete,                            \
    (TRITONSERVER_InferenceRequest * inference_request))                       \
  X(0, TRITONSERVER_Error*, InferenceRequestSetId,                             \
    (TRITONSERVER_InferenceRequest * inference_request, const char* id))       \
  X(0, TRITONSERVER_Error*, InferenceRequestSetFlags,                          \
    (TRITONSERVER_InferenceRequest * inference_request, uint32_t flags))       \
  X(0, TRITONSERVER_Error*, InferenceRequestSetCorrelationId,                  \
    (TRITONSERVER_InferenceRequest * inference_request,                        \
     uint64_t correlation_id))                                                 \
  X(0, TRITONSERVER_Error*, InferenceRequestSetCorrelationIdString,            \
    (TRITONSERVER_InferenceRequest * inference_request,                        \
     const char* correlation_id))                                              \
  X(0, TRITONSERVER_Error*, InferenceRequestSetPriority,                       \
    (TRITONSERVER_InferenceRequest * inference_request, uint32_t priority))    \
  X(0, TRITONSERVER_Error*, InferenceRequestSetTimeoutMicroseconds,            \
    (TRITONSERVER_InferenceRequest * inference_request, uint64_t timeout_us))  \
  X(0, TRITONSERVER_Error*, InferenceRequestAddInput,                          \
    (TRITONSERVER_InferenceRequest * inference_request, const char* name,      \
     const TRITONSERVER_DataType datatype, const int64_t* shape,               \
     uint64_t dim_count))                                                      \
  X(0, TRITONSERVER_Error*, InferenceRequestAppendInputData,                   \
    (TRITONSERVER_InferenceRequest * inference_request, const char* name,      \
     const void* base, size_t byte_size, TRITONSERVER_MemoryType memory_type,  \
     int64_t memory_type_id))                                                  \
  X(0, TRITONSERVER_Error*, InferenceRequestAddRequestedOutput,                \
    (TRITONSERVER_InferenceRequest * inference_request, const char* name))     \
  X(0, TRITONSERVER_Error*, InferenceRequestSetReleaseCallback,                \
    (TRITONSERVER_InferenceRequest * inference_request,                        \
     TRITONSERVER_InferenceRequestReleaseFn_t request_release_fn,              \
     void* request_release_userp))                                             \
  X(0, TRITONSERVER_Error*, InferenceRequestSetResponseCallback,               \
    (TRITONSERVER_InferenceRequest * inference_request,                        \
     TRITONSERVER_ResponseAllocator * response_allocator,                      \
     void* response_allocator_userp,                                           \
     TRITONSERVER_InferenceResponseCompleteFn_t response_fn,                   \
     void* response_userp))                                                    \
  X(21, TRITONSERVER_Error*, InferenceRequestSetStringParameter,               \
    (TRITONSERVER_InferenceRequest * request, const char* key,                 \
     const char* value))                                                       \
  X(21, TRITONSERVER_Error*, InferenceRequestSetIntParameter,                  \
    (TRITONSERVER_InferenceRequest * request, const char* key,                 \
     const int64_t value))                                                     \
  X(21, TRITONSERVER_Error*, InferenceRequestSetBoolParameter,                 \
    (TRITONSERVER_InferenceRequest * request, const char* key,                 \
     const bool value))                                                        \
  X(28, TRITONSERVER_Error*, InferenceRequestSetDoubleParameter,               \
    (TRITONSERVER_InferenceRequest * request, const char* key,                 \
     const double value))                                                      \
  X(25, TRITONSERVER_Error*, InferenceRequestCancel,                           \
    (TRITONSERVER_InferenceRequest * inference_request))                       \
  /* inference responses */                                                    \
  X(0, TRITONSERVER_Error*, InferenceResponseDelete,                           \
    (TRITONSERVER_InferenceResponse * inference_response))                     \
  X(0, TRITONSERVER_Error*, InferenceResponseError,                            \
    (TRITONSERVER_InferenceResponse * inference_response))                     \
  X(0, TRITONSERVER_Error*, InferenceResponseModel,                            \
    (TRITONSERVER_InferenceResponse * inference_response,                      \
     const char** model_name, int64_t* model_version))                         \
  X(0, TRITONSERVER_Error*, InferenceResponseId,                               \
    (TRITONSERVER_InferenceResponse * inference_response,                      \
     const char** request_id))                                                 \
  X(0, TRITONSERVER_Error*, InferenceResponseParameterCount,                   \
    (TRITONSERVER_InferenceResponse * inference_response, uint32_t * count))   \
  X(0, TRITONSERVER_Error*, InferenceResponseParameter,                        \
    (TRITONSERVER_InferenceResponse * inference_response,                      \
     const uint32_t index, const char** name,                                  \
     TRITONSERVER_ParameterType* type, const void** vvalue))                   \
  X(0, TRITONSERVER_Error*, InferenceResponseOutputCount,                      \
    (TRITONSERVER_InferenceResponse * inference_response, uint32_t * count))   \
  X(0, TRITONSERVER_Error*, InferenceResponseOutput,                           \
    (TRITONSERVER_InferenceResponse * inference_response,                      \
     const uint32_t index, const char** name,                                  \
     TRITONSERVER_DataType* datatype, const int64_t** shape,                   \
     uint64_t* dim_count, const void** base, size_t* byte_size,                \
     TRITONSERVER_MemoryType* memory_type, int64_t* memory_type_id,            \
     void** userp))                                                            \
  /* server options */                                                         \
  X(0, TRITONSERVER_Error*, ServerOptionsNew,                                  \
    (TRITONSERVER_ServerOptions * *options))                                   \
  X(0, TRITONSERVER_Error*, ServerOptionsDelete,                               \
    (TRITONSERVER_ServerOptions * options))                                    \
  X(0, TRITONSERVER_Error*, ServerOptionsSetServerId,                          \
    (TRITONSERVER_ServerOptions * options, const char* server_id))             \
  X(0, TRITONSERVER_Error*, ServerOptionsSetModelRepositoryPath,               \
    (TRITONSERVER_ServerOptions * options, const char* model_repository_path)) \
  X(0, TRITONSERVER_Error*, ServerOptionsSetModelControlMode,                  \
    (TRITONSERVER_ServerOptions * options,                                     \
     TRITONSERVER_ModelControlMode mode))                                      \
  X(0, TRITONSERVER_Error*, ServerOptionsSetStartupModel,                      \
    (TRITONSERVER_ServerOptions * options, const char* model_name))            \
  X(0, TRITONSERVER_Error*, ServerOptionsSetStrictModelConfig,                 \
    (TRITONSERVER_ServerOptions * options, bool strict))                       \
  X(31, TRITONSERVER_Error*, ServerOptionsSetModelConfigName,                  \
    (TRITONSERVER_ServerOptions * options, const char* model_config_name))     \
  X(0, TRITONSERVER_Error*, ServerOptionsSetRateLimiterMode,                   \
    (TRITONSERVER_ServerOptions * options, TRITONSERVER_RateLimitMode mode))   \
  X(0, TRITONSERVER_Error*, ServerOptionsAddRateLimiterResource,               \
    (TRITONSERVER_ServerOptions * options, const char* resource_name,          \
     const size_t resource_count, const int device))                           \
  X(0, TRITONSERVER_Error*, ServerOptionsSetPinnedMemoryPoolByteSize,          \
    (TRITONSERVER_ServerOptions * options, uint64_t size))                     \
  X(0, TRITONSERVER_Error*, ServerOptionsSetCudaMemoryPoolByteSize,            \
    (TRITONSERVER_ServerOptions * options, int gpu_device, uint64_t size))     \
  X(20, TRITONSERVER_Error*, ServerOptionsSetCacheConfig,                      \
    (TRITONSERVER_ServerOptions * options, const char* cache_name,             \
     const char* config_json))                                                 \
  X(20, TRITONSERVER_Error*, ServerOptionsSetCacheDirectory,                   \
    (TRITONSERVER_ServerOptions * options, const char* cache_dir))             \
  X(0, TRITONSERVER_Error*, ServerOptionsSetMinSupportedComputeCapability,     \
    (TRITONSERVER_ServerOptions * options, double cc))                         \
  X(0, TRITONSERVER_Error*, ServerOptionsSetExitOnError,                       \
    (TRITONSERVER_ServerOptions * options, bool exit))                         \
  X(0, TRITONSERVER_Error*, ServerOptionsSetStrictReadiness,                   \
    (TRITONSERVER_ServerOptions * options, bool strict))                       \
  X(0, TRITONSERVER_Error*, ServerOptionsSetExitTimeout,                       \
    (TRITONSERVER_ServerOptions * options, unsigned int timeout))              \
  X(0, TRITONSERVER_Error*, ServerOptionsSetBufferManagerThreadCount,          \
    (TRITONSERVER_ServerOptions * options, unsigned int thread_count))         \
  X(0, TRITONSERVER_Error*, ServerOptionsSetModelLoadThreadCount,              \
    (TRITONSERVER_ServerOptions * options, unsigned int thread_count))         \
  X(28, TRITONSERVER_Error*, ServerOptionsSetModelLoadRetryCount,              \
    (TRITONSERVER_ServerOptions * options, unsigned int retry_count))          \
  X(18, TRITONSERVER_Error*, ServerOptionsSetModelNamespacing,                 \
    (TRITONSERVER_ServerOptions * options, bool enable_namespace))             \
  X(32, TRITONSERVER_Error*, ServerOptionsSetEnablePeerAccess,                 \
    (TRITONSERVER_ServerOptions * options, bool enable_peer_access))           \
  X(0, TRITONSERVER_Error*, ServerOptionsSetLogFile,                           \
    (TRITONSERVER_ServerOptions * options, const char* file))                  \
  X(0, TRITONSERVER_Error*, ServerOptionsSetLogInfo,                           \
    (TRITONSERVER_ServerOptions * options, bool log))                          \
  X(0, TRITONSERVER_Error*, ServerOptionsSetLogWarn,                           \
    (TRITONSERVER_ServerOptions * options, bool log))                          \
  X(0, TRITONSERVER_Error*, ServerOptionsSetLogError,                          \
    (TRITONSERVER_ServerOptions * options, bool log))                          \
  X(0, TRITONSERVER_Error*, ServerOptionsSetLogFormat,                         \
    (TRITONSERVER_ServerOptions * options, const TRITONSERVER_LogFormat format)) \
  X(0, TRITONSERVER_Error*, ServerOptionsSetLogVerbose,                        \
    (TRITONSERVER_ServerOptions * options, int level))                         \
  X(0, TRITONSERVER_Error*, ServerOptionsSetMetrics,                           \
    (TRITONSERVER_ServerOptions * options, bool metrics))                      \
  X(0, TRITONSERVER_Error*, ServerOptionsSetGpuMetrics,                        \
    (TRITONSERVER_ServerOptions * options, bool gpu_metrics))                  \
  X(0, TRITONSERVER_Error*, ServerOptionsSetCpuMetrics,                        \
    (TRITONSERVER_ServerOptions * options, bool cpu_metrics))                  \
  X(0, TRITONSERVER_Error*, ServerOptionsSetMetricsInterval,                   \
    (TRITONSERVER_ServerOptions * options, uint64_t metrics_interval_ms))      \
  X(22, TRITONSERVER_Error*, ServerOptionsSetMetricsConfig,                    \
    (TRITONSERVER_ServerOptions * options, const char* name,                   \
     const char* setting, const char* value))                                  \
  X(0, TRITONSERVER_Error*, ServerOptionsSetBackendDirectory,                  \
    (TRITONSERVER_ServerOptions * options, const char* backend_dir))           \
  X(0, TRITONSERVER_Error*, ServerOptionsSetRepoAgentDirectory,                \
    (TRITONSERVER_ServerOptions * options, const char* repoagent_dir))         \
  X(0, TRITONSERVER_Error*, ServerOptionsSetModelLoadDeviceLimit,              \
    (TRITONSERVER_ServerOptions * options,                                     \
     const TRITONSERVER_InstanceGroupKind kind, const int device_id,           \
     const double fraction))                                                   \
  X(0, TRITONSERVER_Error*, ServerOptionsSetBackendConfig,                     \
    (TRITONSERVER_ServerOptions * options, const char* backend_name,           \
     const char* setting, const char* value))                                  \
  X(0, TRITONSERVER_Error*, ServerOptionsSetHostPolicy,                        \
    (TRITONSERVER_ServerOptions * options, const char* policy_name,            \
     const char* setting, const char* value))                                  \
  /* server */                                                                 \
  X(0, TRITONSERVER_Error*, ServerNew,                                         \
    (TRITONSERVER_Server * *server, TRITONSERVER_ServerOptions * options))     \
  X(0, TRITONSERVER_Error*, ServerDelete, (TRITONSERVER_Server * server))      \
  X(0, TRITONSERVER_Error*, ServerStop, (TRITONSERVER_Server * server))        \
  X(30, TRITONSERVER_Error*, ServerSetExitTimeout,                              \
    (TRITONSERVER_Server * server, unsigned int timeout))                      \
  X(0, TRITONSERVER_Error*, ServerRegisterModelRepository,                     \
    (TRITONSERVER_Server * server, const char* repository_path,                \
     const TRITONSERVER_Parameter** name_mapping,                              \
     const uint32_t mapping_count))                                            \
  X(0, TRITONSERVER_Error*, ServerUnregisterModelRepository,                   \
    (TRITONSERVER_Server * server, const char* repository_path))               \
  X(0, TRITONSERVER_Error*, ServerPollModelRepository,                         \
    (TRITONSERVER_Server * server))                                            \
  X(0, TRITONSERVER_Error*, ServerIsLive,                                      \
    (TRITONSERVER_Server * server, bool* live))                                \
  X(0, TRITONSERVER_Error*, ServerIsReady,                                     \
    (TRITONSERVER_Server * server, bool* ready))                               \
  X(0, TRITONSERVER_Error*, ServerModelIsReady,                                \
    (TRITONSERVER_Server * server, const char* model_name,                     \
     const int64_t model_version, bool* ready))                                \
  X(0, TRITONSERVER_Error*, ServerModelBatchProperties,                        \
    (TRITONSERVER_Server * server, const char* model_name,                     \
     const int64_t model_version, uint32_t* flags, void** voidp))              \
  X(0, TRITONSERVER_Error*, ServerModelTransactionProperties,                  \
    (TRITONSERVER_Server * server, const char* model_name,                     \
     const int64_t model_version, uint32_t* txn_flags, void** voidp))          \
  X(0, TRITONSERVER_Error*, ServerMetadata,                                    \
    (TRITONSERVER_Server * server, TRITONSERVER_Message * *server_metadata))   \
  X(0, TRITONSERVER_Error*, ServerModelMetadata,                               \
    (TRITONSERVER_Server * server, const char* model_name,                     \
     const int64_t model_version, TRITONSERVER_Message** model_metadata))      \
  X(0, TRITONSERVER_Error*, ServerModelStatistics,                             \
    (TRITONSERVER_Server * server, const char* model_name,                     \
     const int64_t model_version, TRITONSERVER_Message** model_stats))         \
  X(0, TRITONSERVER_Error*, ServerModelConfig,                                 \
    (TRITONSERVER_Server * server, const char* model_name,                     \
     const int64_t model_version, const uint32_t config_version,               \
     TRITONSERVER_Message** model_config))                                     \
  X(0, TRITONSERVER_Error*, ServerModelIndex,                                  \
    (TRITONSERVER_Server * server, uint32_t flags,                             \
     TRITONSERVER_Message * *model_index))                                     \
  X(0, TRITONSERVER_Error*, ServerLoadModel,                                   \
    (TRITONSERVER_Server * server, const char* model_name))                    \
  X(0, TRITONSERVER_Error*, ServerLoadModelWithParameters,                     \
    (TRITONSERVER_Server * server, const char* model_name,                     \
     const TRITONSERVER_Parameter** parameters,                                \
     const uint64_t parameter_count))                                          \
  X(0, TRITONSERVER_Error*, ServerUnloadModel,                                 \
    (TRITONSERVER_Server * server, const char* model_name))                    \
  X(0, TRITONSERVER_Error*, ServerUnloadModelAndDependents,                    \
    (TRITONSERVER_Server * server, const char* model_name))                    \
  X(0, TRITONSERVER_Error*, ServerMetrics,                                     \
    (TRITONSERVER_Server * server, TRITONSERVER_Metrics * *metrics))           \
  X(0, TRITONSERVER_Error*, ServerInferAsync,                                  \
    (TRITONSERVER_Server * server,                                             \
     TRITONSERVER_InferenceRequest * inference_request,                        \
     TRITONSERVER_InferenceTrace * trace))                                    \
  /* custom metrics (native/observability/metrics.cc) */                                   \
  X(11, TRITONSERVER_Error*, MetricFamilyNew,                                \
    (TRITONSERVER_MetricFamily * *family, const TRITONSERVER_MetricKind kind, \
     const char* name, const char* description))                             \
  X(11, TRITONSERVER_Error*, MetricFamilyDelete,                             \
    (TRITONSERVER_MetricFamily * family))                                    \
  X(11, TRITONSERVER_Error*, MetricNew,                                      \
    (TRITONSERVER_Metric * *metric, TRITONSERVER_MetricFamily * family,      \
     const TRITONSERVER_Parameter** labels, const uint64_t label_count))     \
  X(11, TRITONSERVER_Error*, MetricDelete, (TRITONSERVER_Metric * metric))   \
  X(11, TRITONSERVER_Error*, MetricValue,                                    \
    (TRITONSERVER_Metric * metric, double* value))                           \
  X(11, TRITONSERVER_Error*, MetricIncrement,                                \
    (TRITONSERVER_Metric * metric, double value))                            \
  X(11, TRITONSERVER_Error*, MetricSet,                                      \
    (TRITONSERVER_Metric * metric, double value))                            \
  X(11, TRITONSERVER_Error*, GetMetricKind,                                  \
    (TRITONSERVER_Metric * metric, TRITONSERVER_MetricKind * kind))          \
  X(34, TRITONSERVER_Error*, MetricArgsNew, (TRITONSERVER_MetricArgs * *args)) \
  X(34, TRITONSERVER_Error*, MetricArgsSetHistogram,                         \
    (TRITONSERVER_MetricArgs * args, const double* buckets,                  \
     const uint64_t buckets_count))                                          \
  X(34, TRITONSERVER_Error*, MetricArgsDelete, (TRITONSERVER_MetricArgs * args)) \
  X(34, TRITONSERVER_Error*, MetricNewWithArgs,                              \
    (TRITONSERVER_Metric * *metric, TRITONSERVER_MetricFamily * family,      \
     const TRITONSERVER_Parameter** labels, const uint64_t label_count,      \
     const TRITONSERVER_MetricArgs* args))                                   \
  X(34, TRITONSERVER_Error*, MetricObserve,                                  \
    (TRITONSERVER_Metric * metric, double value))                            \
  /* logging (native/observability/logging.cc) */                                          \
  X(0, bool, LogIsEnabled, (TRITONSERVER_LogLevel level))                    \
  X(0, TRITONSERVER_Error*, LogMessage,                                      \
    (TRITONSERVER_LogLevel level, const char* filename, const int line,      \
     const char* msg))                                                       \
  /* tracing (native/observability/trace.cc) */                                            \
  X(0, TRITONSERVER_Error*, InferenceTraceNew,                               \
    (TRITONSERVER_InferenceTrace * *trace,                                   \
     TRITONSERVER_InferenceTraceLevel level, uint64_t parent_id,             \
     TRITONSERVER_InferenceTraceActivityFn_t activity_fn,                    \
     TRITONSERVER_InferenceTraceReleaseFn_t release_fn, void* trace_userp))  \
  X(0, TRITONSERVER_Error*, InferenceTraceDelete,                            \
    (TRITONSERVER_InferenceTrace * trace))                                   \
  X(0, TRITONSERVER_Error*, InferenceTraceId,                                \
    (TRITONSERVER_InferenceTrace * trace, uint64_t * id))                    \
  X(0, TRITONSERVER_Error*, InferenceTraceParentId,                          \
    (TRITONSERVER_InferenceTrace * trace, uint64_t * parent_id))             \
  X(0, TRITONSERVER_Error*, InferenceTraceModelName,                         \
    (TRITONSERVER_InferenceTrace * trace, const char** model_name))          \
  X(0, TRITONSERVER_Error*, InferenceTraceModelVersion,                      \
    (TRITONSERVER_InferenceTrace * trace, int64_t * model_version))

// One function-pointer type per entry: TritonFn_<Name>.
#define TRITON_API_DECLARE_FN_TYPE(minor, ret, name, params) \
  using TritonFn_##name = ret(*) params;
TRITON_API_FUNCTIONS(TRITON_API_DECLARE_FN_TYPE)
#undef TRITON_API_DECLARE_FN_TYPE
