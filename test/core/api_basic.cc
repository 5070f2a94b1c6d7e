// Test core: API version, errors, parameters, response allocators,
// messages and metrics handles.
//
// Imitates the small value objects of Triton's C API: errors owned by the
// caller (ErrorCodeString uses Triton's code names), parameters of the five
// types (BYTES parameters made with ParameterBytesNew), response allocators
// holding the caller's callbacks, JSON messages serialized once, and
// metrics snapshots in Prometheus text format. Also checks at compile time
// that every exported function has exactly the signature listed in
// native/core/triton_api.h.
#include <type_traits>

#include "server.h"

#ifndef TESTCORE_API_MINOR
#define TESTCORE_API_MINOR 34
#endif

// Every function of the project's list is defined with its exact type.
#define TC_CHECK_SIGNATURE(minor, ret, name, params)                    \
  static_assert(                                                        \
      std::is_same_v<decltype(&TRITONSERVER_##name), TritonFn_##name>, \
      "signature mismatch for TRITONSERVER_" #name);
TRITON_API_FUNCTIONS(TC_CHECK_SIGNATURE)
#undef TC_CHECK_SIGNATURE

const void*
TRITONSERVER_Parameter::ValuePointer() const
{
  switch (type) {
    case TRITONSERVER_PARAMETER_STRING:
      return str.c_str();
    case TRITONSERVER_PARAMETER_INT:
      return &i;
    case TRITONSERVER_PARAMETER_BOOL:
      return &b;
    case TRITONSERVER_PARAMETER_DOUBLE:
      return &d;
    case TRITONSERVER_PARAMETER_BYTES:
      return bytes.data();
    default:
      return nullptr;
  }
}

using tc::NullArg;

extern "C" {

TRITONSERVER_Error*
TRITONSERVER_ApiVersion(uint32_t* major, uint32_t* minor)
{
  if (major == nullptr) return NullArg("major");
  if (minor == nullptr) return NullArg("minor");
  *major = 1;
  *minor = TESTCORE_API_MINOR;
  return nullptr;
}

// ---- errors ----
TRITONSERVER_Error*
TRITONSERVER_ErrorNew(TRITONSERVER_Error_Code code, const char* msg)
{
  return new TRITONSERVER_Error{code, msg == nullptr ? "" : msg};
}

void
TRITONSERVER_ErrorDelete(TRITONSERVER_Error* error)
{
  delete error;
}

TRITONSERVER_Error_Code
TRITONSERVER_ErrorCode(TRITONSERVER_Error* error)
{
  return error == nullptr ? TRITONSERVER_ERROR_UNKNOWN : error->code;
}

const char*
TRITONSERVER_ErrorCodeString(TRITONSERVER_Error* error)
{
  if (error == nullptr) {
    return "<invalid code>";
  }
  return tc::CodeString(error->code);
}

const char*
TRITONSERVER_ErrorMessage(TRITONSERVER_Error* error)
{
  return error == nullptr ? "" : error->msg.c_str();
}

// ---- parameters ----
TRITONSERVER_Parameter*
TRITONSERVER_ParameterNew(
    const char* name, const TRITONSERVER_ParameterType type, const void* value)
{
  if (name == nullptr || value == nullptr) {
    return nullptr;
  }
  auto* p = new TRITONSERVER_Parameter();
  p->name = name;
  p->type = type;
  switch (type) {
    case TRITONSERVER_PARAMETER_STRING:
      p->str = static_cast<const char*>(value);
      break;
    case TRITONSERVER_PARAMETER_INT:
      p->i = *static_cast<const int64_t*>(value);
      break;
    case TRITONSERVER_PARAMETER_BOOL:
      p->b = *static_cast<const bool*>(value);
      break;
    case TRITONSERVER_PARAMETER_DOUBLE:
      p->d = *static_cast<const double*>(value);
      break;
    default:
      // Like Triton: BYTES needs ParameterBytesNew; unknown types fail.
      delete p;
      return nullptr;
  }
  return p;
}

TRITONSERVER_Parameter*
TRITONSERVER_ParameterBytesNew(
    const char* name, const void* byte_ptr, const uint64_t size)
{
  if (name == nullptr || (byte_ptr == nullptr && size > 0)) {
    return nullptr;
  }
  auto* p = new TRITONSERVER_Parameter();
  p->name = name;
  p->type = TRITONSERVER_PARAMETER_BYTES;
  const char* b = static_cast<const char*>(byte_ptr);
  p->bytes.assign(b, b + size);
  return p;
}

void
TRITONSERVER_ParameterDelete(TRITONSERVER_Parameter* parameter)
{
  delete parameter;
}

// ---- response allocator ----
TRITONSERVER_Error*
TRITONSERVER_ResponseAllocatorNew(
    TRITONSERVER_ResponseAllocator** allocator,
    TRITONSERVER_ResponseAllocatorAllocFn_t alloc_fn,
    TRITONSERVER_ResponseAllocatorReleaseFn_t release_fn,
    TRITONSERVER_ResponseAllocatorStartFn_t start_fn)
{
  if (allocator == nullptr) return NullArg("allocator");
  if (alloc_fn == nullptr) return NullArg("alloc_fn");
  if (release_fn == nullptr) return NullArg("release_fn");
  auto* a = new TRITONSERVER_ResponseAllocator();
  a->alloc_fn = alloc_fn;
  a->release_fn = release_fn;
  a->start_fn = start_fn;
  *allocator = a;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ResponseAllocatorSetQueryFunction(
    TRITONSERVER_ResponseAllocator* allocator,
    TRITONSERVER_ResponseAllocatorQueryFn_t query_fn)
{
  if (allocator == nullptr) return NullArg("allocator");
  allocator->query_fn = query_fn;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ResponseAllocatorDelete(TRITONSERVER_ResponseAllocator* allocator)
{
  delete allocator;
  return nullptr;
}

// ---- messages ----
TRITONSERVER_Error*
TRITONSERVER_MessageDelete(TRITONSERVER_Message* message)
{
  delete message;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MessageSerializeToJson(
    TRITONSERVER_Message* message, const char** base, size_t* byte_size)
{
  if (message == nullptr) return NullArg("message");
  if (base == nullptr) return NullArg("base");
  if (byte_size == nullptr) return NullArg("byte_size");
  *base = message->json.c_str();
  *byte_size = message->json.size();
  return nullptr;
}

// ---- metrics ----
TRITONSERVER_Error*
TRITONSERVER_MetricsDelete(TRITONSERVER_Metrics* metrics)
{
  delete metrics;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MetricsFormatted(
    TRITONSERVER_Metrics* metrics, TRITONSERVER_MetricFormat format,
    const char** base, size_t* byte_size)
{
  if (metrics == nullptr) return NullArg("metrics");
  if (base == nullptr) return NullArg("base");
  if (byte_size == nullptr) return NullArg("byte_size");
  if (format != TRITONSERVER_METRIC_PROMETHEUS) {
    return tc::NewError(
        TRITONSERVER_ERROR_INVALID_ARG,
        "unknown metrics format '" + std::to_string(static_cast<int>(format)) +
            "'");
  }
  metrics->text = tc::SerializeMetrics(metrics->pinned_pool_bytes, metrics->cpu_metrics);
  *base = metrics->text.c_str();
  *byte_size = metrics->text.size();
  return nullptr;
}

}  // extern "C"
