// The part of Triton's backend API (TRITONBACKEND_*) that bound models use,
// declared by this project from the documented ABI. Two directions:
// - the entry points Triton calls in a backend library; the addon defines
//   them (backend.cc) and the test core resolves them with dlsym;
// - the functions libtritonserver.so implements for backends; the addon
//   resolves them with dlsym (loader.cc) and the test core defines them and
//   checks its signatures against this list.
#pragma once

#include "triton_api.h"

extern "C" {
struct TRITONBACKEND_Backend;
struct TRITONBACKEND_Model;
struct TRITONBACKEND_ModelInstance;
struct TRITONBACKEND_Request;
struct TRITONBACKEND_Input;
struct TRITONBACKEND_Response;
struct TRITONBACKEND_ResponseFactory;
struct TRITONBACKEND_Output;
}

enum TRITONBACKEND_ArtifactType : int {
  TRITONBACKEND_ARTIFACT_FILESYSTEM = 0,
};

constexpr uint32_t kTritonBackendApiMajor = 1;
// RequestIsCancelled and ResponseFactoryIsCancelled are the newest calls used.
constexpr uint32_t kTritonBackendApiMinMinor = 17;

// Entry points, by name without the TRITONBACKEND_ prefix.
#define TRITON_BACKEND_ENTRY_POINTS(X)                                        \
  X(Initialize, (TRITONBACKEND_Backend * backend))                            \
  X(Finalize, (TRITONBACKEND_Backend * backend))                              \
  X(ModelInitialize, (TRITONBACKEND_Model * model))                           \
  X(ModelFinalize, (TRITONBACKEND_Model * model))                             \
  X(ModelInstanceInitialize, (TRITONBACKEND_ModelInstance * instance))        \
  X(ModelInstanceFinalize, (TRITONBACKEND_ModelInstance * instance))          \
  X(ModelInstanceExecute,                                                     \
    (TRITONBACKEND_ModelInstance * instance,                                  \
     TRITONBACKEND_Request * *requests, const uint32_t request_count))

// X(return type, name without the TRITONBACKEND_ prefix, parameter list)
#define TRITON_BACKEND_API_FUNCTIONS(X)                                       \
  X(TRITONSERVER_Error*, ApiVersion, (uint32_t * major, uint32_t * minor))    \
  X(TRITONSERVER_Error*, BackendName,                                         \
    (TRITONBACKEND_Backend * backend, const char** name))                     \
  X(TRITONSERVER_Error*, ModelName,                                           \
    (TRITONBACKEND_Model * model, const char** name))                         \
  X(TRITONSERVER_Error*, ModelVersion,                                        \
    (TRITONBACKEND_Model * model, uint64_t * version))                        \
  X(TRITONSERVER_Error*, ModelConfig,                                         \
    (TRITONBACKEND_Model * model, const uint32_t config_version,              \
     TRITONSERVER_Message** model_config))                                    \
  X(TRITONSERVER_Error*, ModelSetState,                                       \
    (TRITONBACKEND_Model * model, void* state))                               \
  X(TRITONSERVER_Error*, ModelState,                                          \
    (TRITONBACKEND_Model * model, void** state))                              \
  X(TRITONSERVER_Error*, ModelInstanceModel,                                  \
    (TRITONBACKEND_ModelInstance * instance, TRITONBACKEND_Model** model))    \
  X(TRITONSERVER_Error*, ModelInstanceName,                                   \
    (TRITONBACKEND_ModelInstance * instance, const char** name))              \
  X(TRITONSERVER_Error*, ModelInstanceSetState,                               \
    (TRITONBACKEND_ModelInstance * instance, void* state))                    \
  X(TRITONSERVER_Error*, ModelInstanceState,                                  \
    (TRITONBACKEND_ModelInstance * instance, void** state))                   \
  X(TRITONSERVER_Error*, ModelInstanceReportStatistics,                       \
    (TRITONBACKEND_ModelInstance * instance, TRITONBACKEND_Request * request, \
     const bool success, const uint64_t exec_start_ns,                        \
     const uint64_t compute_start_ns, const uint64_t compute_end_ns,          \
     const uint64_t exec_end_ns))                                             \
  X(TRITONSERVER_Error*, ModelInstanceReportBatchStatistics,                  \
    (TRITONBACKEND_ModelInstance * instance, const uint64_t batch_size,       \
     const uint64_t exec_start_ns, const uint64_t compute_start_ns,           \
     const uint64_t compute_end_ns, const uint64_t exec_end_ns))              \
  X(TRITONSERVER_Error*, RequestId,                                           \
    (TRITONBACKEND_Request * request, const char** id))                       \
  X(TRITONSERVER_Error*, RequestCorrelationId,                                \
    (TRITONBACKEND_Request * request, uint64_t * id))                         \
  X(TRITONSERVER_Error*, RequestInputCount,                                   \
    (TRITONBACKEND_Request * request, uint32_t * count))                      \
  X(TRITONSERVER_Error*, RequestInputByIndex,                                 \
    (TRITONBACKEND_Request * request, const uint32_t index,                   \
     TRITONBACKEND_Input** input))                                            \
  X(TRITONSERVER_Error*, InputProperties,                                     \
    (TRITONBACKEND_Input * input, const char** name,                          \
     TRITONSERVER_DataType* datatype, const int64_t** shape,                  \
     uint32_t* dims_count, uint64_t* byte_size, uint32_t* buffer_count))      \
  X(TRITONSERVER_Error*, InputBuffer,                                         \
    (TRITONBACKEND_Input * input, const uint32_t index, const void** buffer,  \
     uint64_t* buffer_byte_size, TRITONSERVER_MemoryType* memory_type,        \
     int64_t* memory_type_id))                                                \
  X(TRITONSERVER_Error*, RequestOutputCount,                                  \
    (TRITONBACKEND_Request * request, uint32_t * count))                      \
  X(TRITONSERVER_Error*, RequestOutputName,                                   \
    (TRITONBACKEND_Request * request, const uint32_t index,                   \
     const char** output_name))                                               \
  X(TRITONSERVER_Error*, RequestParameterCount,                               \
    (TRITONBACKEND_Request * request, uint32_t * count))                      \
  X(TRITONSERVER_Error*, RequestParameter,                                    \
    (TRITONBACKEND_Request * request, const uint32_t index, const char** key, \
     TRITONSERVER_ParameterType* type, const void** vvalue))                  \
  X(TRITONSERVER_Error*, RequestIsCancelled,                                  \
    (TRITONBACKEND_Request * request, bool* is_cancelled))                    \
  X(TRITONSERVER_Error*, RequestRelease,                                      \
    (TRITONBACKEND_Request * request, uint32_t release_flags))                \
  X(TRITONSERVER_Error*, ResponseNew,                                         \
    (TRITONBACKEND_Response * *response, TRITONBACKEND_Request * request))    \
  X(TRITONSERVER_Error*, ResponseOutput,                                      \
    (TRITONBACKEND_Response * response, TRITONBACKEND_Output** output,        \
     const char* name, const TRITONSERVER_DataType datatype,                  \
     const int64_t* shape, const uint32_t dims_count))                        \
  X(TRITONSERVER_Error*, OutputBuffer,                                        \
    (TRITONBACKEND_Output * output, void** buffer,                            \
     const uint64_t buffer_byte_size, TRITONSERVER_MemoryType* memory_type,   \
     int64_t* memory_type_id))                                                \
  X(TRITONSERVER_Error*, ResponseSend,                                        \
    (TRITONBACKEND_Response * response, const uint32_t send_flags,            \
     TRITONSERVER_Error* error))                                              \
  X(TRITONSERVER_Error*, ResponseDelete, (TRITONBACKEND_Response * response)) \
  X(TRITONSERVER_Error*, ResponseFactoryNew,                                  \
    (TRITONBACKEND_ResponseFactory * *factory,                                \
     TRITONBACKEND_Request * request))                                        \
  X(TRITONSERVER_Error*, ResponseFactoryDelete,                               \
    (TRITONBACKEND_ResponseFactory * factory))                                \
  X(TRITONSERVER_Error*, ResponseNewFromFactory,                              \
    (TRITONBACKEND_Response * *response,                                      \
     TRITONBACKEND_ResponseFactory * factory))                                \
  X(TRITONSERVER_Error*, ResponseFactorySendFlags,                            \
    (TRITONBACKEND_ResponseFactory * factory, const uint32_t send_flags))     \
  X(TRITONSERVER_Error*, ResponseFactoryIsCancelled,                          \
    (TRITONBACKEND_ResponseFactory * factory, bool* is_cancelled))

#define TSN_BACKEND_FN_TYPE(ret, name, params) \
  using TritonBackendFn_##name = ret(*) params;
TRITON_BACKEND_API_FUNCTIONS(TSN_BACKEND_FN_TYPE)
#undef TSN_BACKEND_FN_TYPE
