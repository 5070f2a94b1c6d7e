// Test core: inference traces (TRITONSERVER_InferenceTrace*).
#pragma once

#include "common.h"

struct TRITONSERVER_InferenceTrace {
  TRITONSERVER_InferenceTraceLevel level = TRITONSERVER_TRACE_LEVEL_DISABLED;
  uint64_t id = 0;
  uint64_t parent_id = 0;
  TRITONSERVER_InferenceTraceActivityFn_t activity_fn = nullptr;
  TRITONSERVER_InferenceTraceReleaseFn_t release_fn = nullptr;
  void* userp = nullptr;
  std::string model_name;
  int64_t model_version = -1;
};

namespace tc {
// Reports one activity (TIMESTAMPS level only) on the calling thread.
void TraceReport(
    TRITONSERVER_InferenceTrace* trace, TRITONSERVER_InferenceTraceActivity activity,
    uint64_t timestamp_ns);
// Hands the trace back to its owner through the release callback.
void TraceRelease(TRITONSERVER_InferenceTrace* trace);
}  // namespace tc
