// Per-request inference traces (TRITONSERVER_InferenceTrace*, TIMESTAMPS
// level). JS arms a trace with traceNext() right before infer(); the next
// request the engine submits on this thread takes it (TakeArmedTrace).
// Activities and releases arrive on Triton's threads and are recorded in
// native memory; when the request's trace is released the records go to JS
// in one call through the trace's own thread-safe function, resolving the
// promise traceNext() returned. Nothing of this exists when tracing is off.
#pragma once

#include <napi.h>

#include "../core/loader.h"

namespace tsn {

// The trace armed by traceNext() on this thread, or null. Ownership passes
// to the caller, who hands it to TRITONSERVER_ServerInferAsync and calls
// TraceSubmitFailed when that fails.
TRITONSERVER_InferenceTrace* TakeArmedTrace();

// ServerInferAsync failed: frees the trace unless Triton already released it.
void TraceSubmitFailed(TRITONSERVER_InferenceTrace* trace);

void RegisterTrace(Napi::Env env, Napi::Object exports);

}  // namespace tsn
