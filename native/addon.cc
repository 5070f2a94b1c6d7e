// Registration only: the functions lib/native.ts sees.
#include "core/addon.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "backend/backend.h"
#include "core/blocking.h"
#include "core/probe.h"
#include "inference/inference.h"
#include "client/grpc-channel.h"
#include "client/http-channel.h"
#include "kserve/http-frontend.h"
#include "observability/observability.h"
#include "observability/trace.h"
#include "server-wrap.h"

namespace tsn {

namespace {

std::vector<std::string> Candidates(Napi::Value value) {
  std::vector<std::string> paths;
  if (!value.IsArray())
    throw ToJsError(value.Env(), TRITONSERVER_ERROR_INVALID_ARG,
                    "library candidates must be an array of paths");
  Napi::Array list = value.As<Napi::Array>();
  for (uint32_t i = 0; i < list.Length(); ++i)
    paths.push_back(list.Get(i).ToString());
  return paths;
}

OptionArg ToOptionArg(Napi::Value value) {
  if (value.IsString()) return value.As<Napi::String>().Utf8Value();
  if (value.IsBoolean()) return value.As<Napi::Boolean>().Value();
  if (value.IsNumber()) return value.As<Napi::Number>().DoubleValue();
  throw ToJsError(value.Env(), TRITONSERVER_ERROR_INVALID_ARG,
                  "server option arguments must be strings, numbers or "
                  "booleans");
}

}  // namespace

Addon::Addon(Napi::Env env, Napi::Object exports) {
  server_class = Napi::Persistent(ServerWrap::Define(env));
  DefineAddon(exports,
              {
                  InstanceMethod<&Addon::SetErrorClass>("setErrorClass"),
                  InstanceMethod<&Addon::ApiVersion>("apiVersion"),
                  InstanceMethod<&Addon::StartServer>("startServer"),
                  InstanceMethod<&Addon::LiveObjects>("liveObjects"),
                  InstanceMethod<&Addon::TrimMallocHeap>("trimMallocHeap"),
                  InstanceMethod<&Addon::EndServersForExit>("endServersForExit"),
                  InstanceMethod<&Addon::AttachServer>("attachServer"),
                  InstanceMethod<&Addon::DetachBuffers>("detachBuffers"),
                  InstanceMethod<&Addon::NativeName>("nativeName"),
              });
  response_name_table_ = Napi::Persistent(Napi::Array::New(env));
  exports.Set("responseNames", response_name_table_.Value());
  DefineProbes(env, exports);
  RegisterHttpFrontend(env, exports);
  RegisterGrpcChannel(env, exports);
  RegisterHttpChannel(env, exports);
  RegisterMetrics(env, exports);
  RegisterLogging(env, exports);
  RegisterTrace(env, exports);
  RegisterSharedMemory(env, exports);
  RegisterBoundModels(env, exports);
}

Napi::Value Addon::SetErrorClass(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsFunction())
    throw Napi::TypeError::New(info.Env(), "setErrorClass(TritonError)");
  error_class = Napi::Persistent(info[0].As<Napi::Function>());
  return info.Env().Undefined();
}

// apiVersion(candidates) → Promise<{ path, major, minor }>
Napi::Value Addon::ApiVersion(const Napi::CallbackInfo& info) {
  std::vector<std::string> candidates = Candidates(info[0]);
  auto api = std::make_shared<const TritonApi*>(nullptr);
  return BlockingCall::Run(
      info.Env(),
      [candidates, api](Outcome*) -> std::optional<Failure> {
        std::string error;
        *api = LoadTritonApi(candidates, &error);
        if (*api == nullptr)
          return Failure{TRITONSERVER_ERROR_UNAVAILABLE, error};
        return std::nullopt;
      },
      [api](Napi::Env env, Outcome&) -> Napi::Value {
        Napi::Object result = Napi::Object::New(env);
        result.Set("path", (*api)->path);
        result.Set("major", (*api)->major);
        result.Set("minor", (*api)->minor);
        return result;
      });
}

// startServer(candidates, optionCalls, onResponses, copyOutputs)
//   → Promise<NativeServer>
Napi::Value Addon::StartServer(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::vector<std::string> candidates = Candidates(info[0]);
  if (info.Length() < 3 || !info[1].IsArray() || !info[2].IsFunction())
    throw ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG,
                    "startServer(candidates, optionCalls, onResponses)");
  std::vector<OptionCall> calls;
  Napi::Array list = info[1].As<Napi::Array>();
  for (uint32_t i = 0; i < list.Length(); ++i) {
    Napi::Value entry = list.Get(i);
    if (!entry.IsArray() || entry.As<Napi::Array>().Length() == 0 ||
        !entry.As<Napi::Array>().Get(0u).IsString())
      throw ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG,
                      "server option calls must be [function, ...args]");
    Napi::Array call = entry.As<Napi::Array>();
    OptionCall option{call.Get(0u).As<Napi::String>(), {}};
    for (uint32_t a = 1; a < call.Length(); ++a)
      option.args.push_back(ToOptionArg(call.Get(a)));
    calls.push_back(std::move(option));
  }
  bool copy_outputs = info.Length() > 3 && info[3].ToBoolean().Value();
  auto on_responses = std::make_shared<Napi::FunctionReference>(
      Napi::Persistent(info[2].As<Napi::Function>()));
  auto state = std::make_shared<std::shared_ptr<ServerState>>();

  return BlockingCall::Run(
      env,
      [candidates, calls, state](Outcome*) -> std::optional<Failure> {
        std::string error;
        const TritonApi* api = LoadTritonApi(candidates, &error);
        if (api == nullptr) return Failure{TRITONSERVER_ERROR_UNAVAILABLE, error};
        TRITONSERVER_ServerOptions* options = nullptr;
        if (auto failure = TakeError(*api, api->ServerOptionsNew(&options)))
          return failure;
        std::optional<Failure> failure;
        for (const OptionCall& call : calls) {
          failure = ApplyOptionCall(*api, options, call);
          if (failure) break;
        }
        TRITONSERVER_Server* server = nullptr;
        if (!failure) failure = TakeError(*api, api->ServerNew(&server, options));
        TakeError(*api, api->ServerOptionsDelete(options));
        if (failure) return failure;
        *state = std::make_shared<ServerState>(*api);
        (*state)->server = server;
        return std::nullopt;
      },
      [state, on_responses, copy_outputs](Napi::Env env, Outcome&) -> Napi::Value {
        Napi::Object server =
            ServerWrap::Wrap(env, *state, on_responses->Value());
        if (copy_outputs)
          ServerWrap::Unwrap(server)->SetCopyOutputs(true);
        return server;
      });
}

Napi::Value Addon::LiveObjects(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  LiveCounters& live = Live();
  Napi::Object result = Napi::Object::New(env);
  result.Set("requests", Napi::Number::New(env, static_cast<double>(live.requests)));
  result.Set("responses", Napi::Number::New(env, static_cast<double>(live.responses)));
  result.Set("outputBuffers",
             Napi::Number::New(env, static_cast<double>(live.output_buffers)));
  result.Set("inputReferences",
             Napi::Number::New(env, static_cast<double>(live.input_references)));
  return result;
}

// trimMallocHeap() → boolean: glibc's malloc_trim(0), which hands the free
// pages its arenas keep back to the system; for telling memory something
// holds from memory the allocator caches (leak hunting). false where the C
// library has no such call.
Napi::Value Addon::TrimMallocHeap(const Napi::CallbackInfo& info) {
#if defined(__GLIBC__)
  malloc_trim(0);
  return Napi::Boolean::New(info.Env(), true);
#else
  return Napi::Boolean::New(info.Env(), false);
#endif
}

// attachServer(shareId, onResponses, copyOutputs) → NativeServer: this
// thread's own way into a server another thread started (its own
// completion queue and thread-safe function, Triton's batching shared).
Napi::Value Addon::AttachServer(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsFunction())
    throw ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG,
                    "attachServer(shareId, onResponses, copyOutputs)");
  auto id = static_cast<uint64_t>(info[0].As<Napi::Number>().Int64Value());
  std::shared_ptr<ServerState> state = FindSharedServer(id);
  if (!state)
    throw ToJsError(env, TRITONSERVER_ERROR_UNAVAILABLE,
                    "the shared server has been stopped");
  Napi::Object server = ServerWrap::Wrap(env, state, info[1].As<Napi::Function>(),
                                         /*attached=*/true);
  if (info.Length() > 2 && info[2].ToBoolean().Value())
    ServerWrap::Unwrap(server)->SetCopyOutputs(true);
  return server;
}

int64_t Addon::ResponseName(Napi::Env env, const std::string& name) {
  uint32_t index = next_name_;
  if (index >= response_names_.size() || response_names_[index] != name) {
    // At most kMaxNames short strings: a scan, the sizes compared first.
    index = 0;
    while (index < response_names_.size() && response_names_[index] != name) ++index;
    if (index == response_names_.size()) {
      if (index == kMaxNames) return -1;
      response_name_table_.Value().Set(index, Napi::String::New(env, name));
      response_names_.push_back(name);
    }
  }
  next_name_ = index + 1;
  return index;
}

// nativeName(name): the name held natively, for infer() to share instead of
// reading a JS string at every request (InferenceEngine ReadName). A request
// holds its own reference, so the name outlives the JS object if need be.
Napi::Value Addon::NativeName(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsString())
    throw ToJsError(info.Env(), TRITONSERVER_ERROR_INVALID_ARG, "nativeName(name)");
  auto* holder = new NameHolder{NameHolder::kTag,
                                 std::make_shared<const std::string>(info[0].As<Napi::String>().Utf8Value())};
  return Napi::External<NameHolder>::New(info.Env(), holder, [](Napi::Env, NameHolder* held) { delete held; });
}

// detachBuffers(...arrayBuffers): response.dispose(). Detaching an output's
// ArrayBuffer frees its memory now (the finalizer of an adopted block runs,
// V8's count of external memory drops) instead of at a later GC, which for
// large outputs is a full mark-compact every 64 MB. Buffers that cannot be
// detached are left as they are.
Napi::Value Addon::DetachBuffers(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  for (size_t i = 0; i < info.Length(); ++i) {
    bool detached = false;
    napi_value value = info[i];
    if (!info[i].IsArrayBuffer()) continue;
    if (napi_is_detached_arraybuffer(env, value, &detached) != napi_ok || detached) continue;
    napi_detach_arraybuffer(env, value);
  }
  return env.Undefined();
}

// endServersForExit(waitMs): process.exit() runs no environment cleanup
// hooks, so lib/ calls this from the 'exit' event: every server of this
// environment is stopped synchronously, waiting at most waitMs for requests
// inside Triton (then Python stubs exit and their shared memory goes).
Napi::Value Addon::EndServersForExit(const Napi::CallbackInfo& info) {
  double wait_ms = info.Length() > 0 && info[0].IsNumber()
                       ? info[0].As<Napi::Number>().DoubleValue()
                       : 0;
  ServerWrap::EndAllForExit(
      info.Env(), std::chrono::milliseconds(static_cast<int64_t>(wait_ms < 0 ? 0 : wait_ms)));
  return info.Env().Undefined();
}

}  // namespace tsn

using TritonServerNodeAddon = tsn::Addon;
NODE_API_NAMED_ADDON(tritonserver_node, TritonServerNodeAddon)
