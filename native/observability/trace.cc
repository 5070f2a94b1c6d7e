#include "trace.h"

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "../core/errors.h"
#include "observability.h"

namespace tsn {

namespace {

struct Record {
  uint64_t id;
  uint64_t parent_id;
  std::string model;
  int64_t version;
  int activity;
  uint64_t timestamp_ns;
};

struct TraceContext;
void Deliver(Napi::Env env, Napi::Function, TraceContext* context, std::nullptr_t*);
using TraceTsfn = Napi::TypedThreadSafeFunction<TraceContext, std::nullptr_t, &Deliver>;

// One traced request: its root trace and every child trace Triton spawns
// (ensemble steps). Freed when the last trace is released and JS has had
// the records, whichever is later.
struct TraceContext {
  const TritonApi* api = nullptr;
  Napi::Promise::Deferred deferred;
  TraceTsfn tsfn;
  TRITONSERVER_InferenceTrace* root = nullptr;
  uint64_t root_id = 0;

  std::mutex mutex;
  std::vector<Record> records;
  std::set<uint64_t> live;  // trace ids seen and not yet released
  bool root_released = false;
  bool delivered = false;
  int refs = 1;  // live traces + the pending delivery

  explicit TraceContext(Napi::Env env) : deferred(Napi::Promise::Deferred::New(env)) {}

  // Drops one reference; frees the context at zero. Call without the lock.
  void Unref() {
    bool last;
    {
      std::lock_guard<std::mutex> lock(mutex);
      last = --refs == 0;
    }
    if (last) delete this;
  }
};

// Triton trace objects not yet deleted (root and child traces), for tests.
std::atomic<int64_t> g_live_traces{0};

thread_local TraceContext* t_armed = nullptr;
// The context TakeArmedTrace just handed out, for TraceSubmitFailed.
thread_local TraceContext* t_submitting = nullptr;

void OnActivity(TRITONSERVER_InferenceTrace* trace,
                TRITONSERVER_InferenceTraceActivity activity,
                uint64_t timestamp_ns, void* userp) {
  auto* context = static_cast<TraceContext*>(userp);
  const TritonApi& api = *context->api;
  Record record{0, 0, "", -1, static_cast<int>(activity), timestamp_ns};
  TakeError(api, api.InferenceTraceId(trace, &record.id));
  TakeError(api, api.InferenceTraceParentId(trace, &record.parent_id));
  const char* model = nullptr;
  if (!TakeError(api, api.InferenceTraceModelName(trace, &model)) && model)
    record.model = model;
  TakeError(api, api.InferenceTraceModelVersion(trace, &record.version));
  std::lock_guard<std::mutex> lock(context->mutex);
  // A child trace (ensemble step) is first seen through its activity.
  if (record.id != context->root_id && context->live.insert(record.id).second) {
    context->refs++;
    g_live_traces++;
  }
  context->records.push_back(std::move(record));
}

void OnRelease(TRITONSERVER_InferenceTrace* trace, void* userp) {
  auto* context = static_cast<TraceContext*>(userp);
  const TritonApi& api = *context->api;
  uint64_t id = 0;
  TakeError(api, api.InferenceTraceId(trace, &id));
  // The release callback owns the trace: delete it exactly once, here.
  TakeError(api, api.InferenceTraceDelete(trace));
  bool deliver = false;
  bool counted = false;
  {
    std::lock_guard<std::mutex> lock(context->mutex);
    if (id == context->root_id) {
      context->root_released = true;
      deliver = !context->delivered;
      context->delivered = true;
      counted = true;  // the root's reference is the delivery's
    } else {
      // A child released without any activity was never counted.
      counted = context->live.erase(id) > 0;
    }
  }
  if (counted) g_live_traces--;
  if (deliver) {
    if (context->tsfn.NonBlockingCall() != napi_ok) {
      // The environment is gone: nobody will read the records.
      context->Unref();
    }
    return;
  }
  if (counted) context->Unref();
}

// JS thread: the records as one flat array, then the promise settles.
void Deliver(Napi::Env env, Napi::Function, TraceContext* context, std::nullptr_t*) {
  // Nothing may be thrown out of here (it would terminate the process), e.g.
  // while the environment is being torn down and JS cannot run.
  if (env != nullptr) try {
    std::vector<Record> records;
    {
      std::lock_guard<std::mutex> lock(context->mutex);
      records.swap(context->records);
    }
    Napi::Array flat = Napi::Array::New(env, records.size() * 6);
    uint32_t i = 0;
    for (const Record& r : records) {
      flat.Set(i++, Napi::BigInt::New(env, r.id));
      flat.Set(i++, Napi::BigInt::New(env, r.parent_id));
      flat.Set(i++, Napi::String::New(env, r.model));
      flat.Set(i++, Napi::Number::New(env, static_cast<double>(r.version)));
      flat.Set(i++, Napi::Number::New(env, r.activity));
      flat.Set(i++, Napi::BigInt::New(env, r.timestamp_ns));
    }
    context->deferred.Resolve(flat);
  } catch (const Napi::Error&) {
    // The environment is going away: nobody is left to read the trace.
  }
  context->tsfn.Release();
  context->Unref();
}

// traceNext(libraryPath) → Promise<flat records>: arms a trace for the next
// request this thread submits.
Napi::Value TraceNext(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const TritonApi& api = LoadedApi(env, info[0]);
  if (t_armed != nullptr)
    throw ToJsError(env, TRITONSERVER_ERROR_INTERNAL, "a trace is already armed");
  auto* context = new TraceContext(env);
  context->api = &api;
  if (auto failure = TakeError(
          api, api.InferenceTraceNew(&context->root,
                                     TRITONSERVER_TRACE_LEVEL_TIMESTAMPS, 0,
                                     &OnActivity, &OnRelease, context))) {
    delete context;
    throw ToJsError(env, *failure);
  }
  g_live_traces++;
  TakeError(api, api.InferenceTraceId(context->root, &context->root_id));
  // Stays referenced until delivered: Triton may release the trace after the
  // response, and the caller awaits it (like a request in flight).
  context->tsfn = TraceTsfn::New(env, "tritonserver-node trace", 0, 1, context);
  t_armed = context;
  return context->deferred.Promise();
}

// traceCancel(): the armed trace was not used (infer threw before submitting).
Napi::Value TraceCancel(const Napi::CallbackInfo& info) {
  TraceContext* context = t_armed;
  t_armed = nullptr;
  if (context != nullptr) {
    TakeError(*context->api, context->api->InferenceTraceDelete(context->root));
    g_live_traces--;
    context->deferred.Reject(
        ToJsError(info.Env(), TRITONSERVER_ERROR_CANCELLED,
                  "the traced request was not submitted")
            .Value());
    context->tsfn.Release();
    delete context;  // the thread-safe function only holds a pointer
  }
  return info.Env().Undefined();
}

}  // namespace

TRITONSERVER_InferenceTrace* TakeArmedTrace() {
  TraceContext* context = t_armed;
  t_armed = nullptr;
  t_submitting = context;
  return context == nullptr ? nullptr : context->root;
}

void TraceSubmitFailed(TRITONSERVER_InferenceTrace* trace) {
  TraceContext* context = t_submitting;
  t_submitting = nullptr;
  if (trace == nullptr || context == nullptr || context->root != trace) return;
  // Triton either released the trace inside ServerInferAsync (its records
  // then reach JS as usual) or never took it, and then it is still ours.
  // Either way no other thread holds it any more.
  bool released;
  {
    std::lock_guard<std::mutex> lock(context->mutex);
    released = context->root_released;
  }
  if (released) return;
  TakeError(*context->api, context->api->InferenceTraceDelete(trace));
  g_live_traces--;
  context->deferred.Reject(
      ToJsError(context->deferred.Env(), TRITONSERVER_ERROR_CANCELLED,
                "the traced request was not submitted")
          .Value());
  context->tsfn.Release();
  delete context;
}

void RegisterTrace(Napi::Env env, Napi::Object exports) {
  exports.Set("traceNext", Napi::Function::New<TraceNext>(env));
  exports.Set("traceCancel", Napi::Function::New<TraceCancel>(env));
  exports.Set("liveTraces", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(g_live_traces.load()));
  }));
}

}  // namespace tsn
