// Test core: inference traces.
//
// Imitates Triton's trace API (core r25.07, src/tritonserver.cc and
// src/infer_trace.h): the deprecated MIN/MAX levels mean TIMESTAMPS; ids are
// unique per process and start at 1; ServerInferAsync stamps the trace with
// the request's model name and version; timestamps are the steady clock in
// nanoseconds. Activities come in the order observed on real Triton for an
// identity request (TRITON_FACTS.md, Tracing): REQUEST_START, QUEUE_START,
// COMPUTE_START, COMPUTE_INPUT_END, COMPUTE_OUTPUT_START, COMPUTE_END,
// REQUEST_END, then the release callback, which owns the trace from then
// on. A request that fails in ServerInferAsync after the trace was attached
// releases it at once (Triton drops the request's trace proxy).
#include "trace.h"

namespace tc {

namespace {
std::atomic<uint64_t> g_next_trace_id{1};
}

void
TraceReport(
    TRITONSERVER_InferenceTrace* trace, TRITONSERVER_InferenceTraceActivity activity,
    uint64_t timestamp_ns)
{
  if (trace == nullptr || trace->activity_fn == nullptr) return;
  if ((trace->level & TRITONSERVER_TRACE_LEVEL_TIMESTAMPS) == 0) return;
  trace->activity_fn(trace, activity, timestamp_ns, trace->userp);
}

void
TraceRelease(TRITONSERVER_InferenceTrace* trace)
{
  if (trace == nullptr) return;
  if (trace->release_fn != nullptr) trace->release_fn(trace, trace->userp);
}

}  // namespace tc

using tc::NullArg;

extern "C" {

TRITONSERVER_Error*
TRITONSERVER_InferenceTraceNew(
    TRITONSERVER_InferenceTrace** trace, TRITONSERVER_InferenceTraceLevel level,
    uint64_t parent_id, TRITONSERVER_InferenceTraceActivityFn_t activity_fn,
    TRITONSERVER_InferenceTraceReleaseFn_t release_fn, void* trace_userp)
{
  if (trace == nullptr) return NullArg("trace");
  int l = level;
  if ((l & TRITONSERVER_TRACE_LEVEL_MIN) != 0) {
    l = (l ^ TRITONSERVER_TRACE_LEVEL_MIN) | TRITONSERVER_TRACE_LEVEL_TIMESTAMPS;
  }
  if ((l & TRITONSERVER_TRACE_LEVEL_MAX) != 0) {
    l = (l ^ TRITONSERVER_TRACE_LEVEL_MAX) | TRITONSERVER_TRACE_LEVEL_TIMESTAMPS;
  }
  auto* t = new TRITONSERVER_InferenceTrace();
  t->level = static_cast<TRITONSERVER_InferenceTraceLevel>(l);
  t->id = tc::g_next_trace_id++;
  t->parent_id = parent_id;
  t->activity_fn = activity_fn;
  t->release_fn = release_fn;
  t->userp = trace_userp;
  *trace = t;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceTraceDelete(TRITONSERVER_InferenceTrace* trace)
{
  delete trace;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceTraceId(TRITONSERVER_InferenceTrace* trace, uint64_t* id)
{
  if (trace == nullptr) return NullArg("trace");
  if (id == nullptr) return NullArg("id");
  *id = trace->id;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceTraceParentId(TRITONSERVER_InferenceTrace* trace, uint64_t* parent_id)
{
  if (trace == nullptr) return NullArg("trace");
  if (parent_id == nullptr) return NullArg("parent_id");
  *parent_id = trace->parent_id;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceTraceModelName(TRITONSERVER_InferenceTrace* trace, const char** model_name)
{
  if (trace == nullptr) return NullArg("trace");
  if (model_name == nullptr) return NullArg("model_name");
  *model_name = trace->model_name.c_str();
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceTraceModelVersion(TRITONSERVER_InferenceTrace* trace, int64_t* model_version)
{
  if (trace == nullptr) return NullArg("trace");
  if (model_version == nullptr) return NullArg("model_version");
  *model_version = trace->model_version;
  return nullptr;
}

}  // extern "C"
