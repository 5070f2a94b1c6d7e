#include "server-wrap.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <mutex>
#include <string_view>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "backend/backend.h"
#include "core/addon.h"

namespace tsn {

namespace {

std::string GetString(const Napi::CallbackInfo& info, size_t index,
                      const char* what) {
  if (info.Length() <= index || !info[index].IsString())
    throw ToJsError(info.Env(), TRITONSERVER_ERROR_INVALID_ARG,
                    std::string(what) + " must be a string");
  return info[index].As<Napi::String>().Utf8Value();
}

int64_t GetVersion(const Napi::CallbackInfo& info, size_t index) {
  if (info.Length() <= index || !info[index].IsNumber())
    throw ToJsError(info.Env(), TRITONSERVER_ERROR_INVALID_ARG,
                    "model version must be a number");
  return info[index].As<Napi::Number>().Int64Value();
}

// The message's JSON text into *outcome; frees the error or the message.
std::optional<Failure> TakeJson(const TritonApi& api, TRITONSERVER_Error* err,
                                TRITONSERVER_Message* message,
                                Outcome* outcome) {
  if (auto failure = TakeError(api, err)) return failure;
  const char* base = nullptr;
  size_t size = 0;
  auto failure = TakeError(api, api.MessageSerializeToJson(message, &base, &size));
  if (!failure) *outcome = std::string(base, size);
  TakeError(api, api.MessageDelete(message));
  return failure;
}

// Owns the Triton parameters of one call.
struct ParameterList {
  const TritonApi& api;
  std::vector<TRITONSERVER_Parameter*> items;
  explicit ParameterList(const TritonApi& api) : api(api) {}
  ~ParameterList() {
    for (auto* item : items) api.ParameterDelete(item);
  }
  const TRITONSERVER_Parameter** data() {
    return const_cast<const TRITONSERVER_Parameter**>(items.data());
  }
};

struct LoadParameter {
  std::string name;
  bool is_bytes;
  std::string value;
};

}  // namespace

Napi::Function ServerWrap::Define(Napi::Env env) {
  return DefineClass(
      env, "NativeServer",
      {
          InstanceMethod<&ServerWrap::Library>("library"),
          InstanceMethod<&ServerWrap::IsLive>("isLive"),
          InstanceMethod<&ServerWrap::IsReady>("isReady"),
          InstanceMethod<&ServerWrap::Metadata>("metadata"),
          InstanceMethod<&ServerWrap::ModelIndex>("modelIndex"),
          InstanceMethod<&ServerWrap::ModelIsReady>("modelIsReady"),
          InstanceMethod<&ServerWrap::ModelMetadata>("modelMetadata"),
          InstanceMethod<&ServerWrap::ModelConfig>("modelConfig"),
          InstanceMethod<&ServerWrap::ModelStatistics>("modelStatistics"),
          InstanceMethod<&ServerWrap::ModelBatchProperties>(
              "modelBatchProperties"),
          InstanceMethod<&ServerWrap::ModelTransactionProperties>(
              "modelTransactionProperties"),
          InstanceMethod<&ServerWrap::LoadModel>("loadModel"),
          InstanceMethod<&ServerWrap::UnloadModel>("unloadModel"),
          InstanceMethod<&ServerWrap::PollModelRepository>(
              "pollModelRepository"),
          InstanceMethod<&ServerWrap::RegisterModelRepository>(
              "registerModelRepository"),
          InstanceMethod<&ServerWrap::UnregisterModelRepository>(
              "unregisterModelRepository"),
          InstanceMethod<&ServerWrap::Metrics>("metrics"),
          InstanceMethod<&ServerWrap::Stop>("stop"),
          InstanceMethod<&ServerWrap::Cancel>("cancel"),
          InstanceMethod<&ServerWrap::InFlight>("inFlight"),
          InstanceMethod<&ServerWrap::Share>("share"),
          InstanceMethod<&ServerWrap::RemoveAtEnd>("removeAtEnd"),
          InstanceMethod<&ServerWrap::SharedMemory>("sharedMemory"),
      });
}

ServerWrap::ServerWrap(const Napi::CallbackInfo& info)
    : Napi::ObjectWrap<ServerWrap>(info) {
  // Only Wrap() creates these, handing the state over through the addon.
  Addon* addon = info.Env().GetInstanceData<Addon>();
  if (!addon->server_being_wrapped || info.Length() < 1 || !info[0].IsFunction())
    throw ToJsError(info.Env(), TRITONSERVER_ERROR_INVALID_ARG,
                    "NativeServer is created by startServer()");
  state_ = std::move(addon->server_being_wrapped);
  attached_ = addon->wrapping_attached;
  engine_ = InferenceEngine::Create(info.Env(), state_,
                                    info[0].As<Napi::Function>());
  state_->AddEngine(engine_);
  // infer and flush as functions of this object whose data leads here: an
  // instance method unwraps `this` at each call, which cost more than
  // reading the request's arguments.
  call_target_ = std::make_shared<CallTarget>(CallTarget{this});
  Napi::Object self = info.This().As<Napi::Object>();
  auto own_function = [&](const char* name, napi_callback callback) {
    auto* target = new std::shared_ptr<CallTarget>(call_target_);
    napi_value function = nullptr;
    if (napi_create_function(info.Env(), name, NAPI_AUTO_LENGTH, callback, target,
                             &function) != napi_ok ||
        napi_add_finalizer(info.Env(), function, target,
                           [](napi_env, void* data, void*) {
                             delete static_cast<std::shared_ptr<CallTarget>*>(data);
                           },
                           nullptr, nullptr) != napi_ok) {
      delete target;
      throw Napi::Error::New(info.Env(), "could not set up the server's functions");
    }
    self.Set(name, Napi::Value(info.Env(), function));
  };
  own_function("infer", &ServerWrap::Infer);
  own_function("flush", &ServerWrap::Flush);
  napi_add_env_cleanup_hook(info.Env(), &ServerWrap::CleanupHook, this);
  cleanup_hook_added_ = true;
  addon->servers.insert(this);
}

ServerWrap::~ServerWrap() {
  if (call_target_) call_target_->wrap = nullptr;
  if (cleanup_hook_added_)
    napi_remove_env_cleanup_hook(Env(), &ServerWrap::CleanupHook, this);
  if (Addon* addon = Env().GetInstanceData<Addon>()) addon->servers.erase(this);
}

void ServerWrap::SetCopyOutputs(bool copy) { engine_->SetCopyOutputs(copy); }

// The environment is going away (worker exit or terminate, the main thread
// ending): there is no later tick, so end synchronously. A server that was
// never stopped ends here: the response callback's reference keeps the
// wrapper from being collected before.
void ServerWrap::CleanupHook(void* self) {
  auto* wrap = static_cast<ServerWrap*>(self);
  wrap->cleanup_hook_added_ = false;
  wrap->EndWithEnvironment(std::chrono::milliseconds(-1));
}

void ServerWrap::EndAllForExit(Napi::Env env, std::chrono::milliseconds wait) {
  Addon* addon = env.GetInstanceData<Addon>();
  if (addon == nullptr) return;
  std::vector<ServerWrap*> servers(addon->servers.begin(), addon->servers.end());
  for (ServerWrap* wrap : servers) wrap->EndWithEnvironment(wait);
  // A server deleted in the background must not be torn down by the exit
  // itself (static destructors under Triton's threads).
  BackgroundDeletions::Wait(wait + std::chrono::seconds(ServerState::kMinUnloadSeconds));
}

void ServerWrap::EndWithEnvironment(std::chrono::milliseconds wait) {
  if (ended_) return;
  ended_ = true;
  closed_ = true;
  // Bound models this thread serves must not wait for it any more: their
  // requests could never leave Triton.
  EndBoundModels(Env());
  if (!attached_) state_->stopping = true;
  // From here on Triton's threads finish requests themselves: JS may be
  // unable to run, and must not be waited for.
  engine_->Abandon();
  if (attached_) {
    engine_->CancelAll();
  } else {
    state_->shared_memory.Close();
    state_->CancelEverywhere();
  }
  // This thread's requests, or (the owner) every thread's.
  auto wait_until_empty = [this](std::chrono::milliseconds timeout) {
    return attached_ ? engine_->WaitUntilIdle(timeout)
                     : state_->WaitUntilEmpty(timeout);
  };
  bool empty = true;
  if (wait.count() < 0) {
    // Input memory belongs to this environment's heap, which is freed after
    // this hook: Triton must be done reading it, however long that takes.
    if (!wait_until_empty(std::chrono::seconds(5))) {
      std::fprintf(stderr,
                   "tritonserver-node: waiting for request(s) still running "
                   "inside Triton before the environment can end\n");
      wait_until_empty(wait);
    }
  } else {
    empty = wait_until_empty(wait);
  }
  engine_->ReleaseInputsOfFinished();
  if (!remove_at_end_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(remove_at_end_, ignored);
  }
  // An attached thread leaves the server to its owner.
  if (attached_) return;
  // With nothing inside, stopping unloads every model (Python stubs exit,
  // their shared memory goes) and deleting is safe. A process exiting with
  // requests still inside leaves the server to the exit.
  if (empty) state_->StopAndDelete();
}

Napi::Object ServerWrap::Wrap(Napi::Env env,
                              std::shared_ptr<ServerState> state,
                              Napi::Function on_responses, bool attached) {
  Addon* addon = env.GetInstanceData<Addon>();
  addon->server_being_wrapped = std::move(state);
  addon->wrapping_attached = attached;
  return addon->server_class.New({on_responses});
}

Napi::Value ServerWrap::RunWithServer(Napi::Env env, ServerWork work) {
  if (Closed()) {
    auto deferred = Napi::Promise::Deferred::New(env);
    deferred.Reject(ToJsError(env, TRITONSERVER_ERROR_UNAVAILABLE,
                              "the server has been stopped")
                        .Value());
    return deferred.Promise();
  }
  return BlockingCall::Run(
      env, [state = state_, work = std::move(work)](Outcome* outcome) {
        std::shared_lock<std::shared_mutex> lock(state->lifetime);
        if (state->server == nullptr)
          return std::optional<Failure>(Failure{
              TRITONSERVER_ERROR_UNAVAILABLE, "the server has been stopped"});
        return work(state->api, state->server, outcome);
      });
}

Napi::Value ServerWrap::Library(const Napi::CallbackInfo& info) {
  Napi::Object result = Napi::Object::New(info.Env());
  result.Set("path", state_->api.path);
  result.Set("major", state_->api.major);
  result.Set("minor", state_->api.minor);
  return result;
}

// The server queries that answer yes or no.
Napi::Value ServerWrap::ServerFlag(const Napi::CallbackInfo& info,
                                   ServerFlagCall call) {
  return RunWithServer(info.Env(), [call](const TritonApi& api,
                                          TRITONSERVER_Server* server,
                                          Outcome* outcome) {
    bool flag = false;
    auto failure = TakeError(api, call(api, server, &flag));
    *outcome = flag;
    return failure;
  });
}

Napi::Value ServerWrap::IsLive(const Napi::CallbackInfo& info) {
  return ServerFlag(info, [](const TritonApi& api, TRITONSERVER_Server* server,
                             bool* live) { return api.ServerIsLive(server, live); });
}

Napi::Value ServerWrap::IsReady(const Napi::CallbackInfo& info) {
  return ServerFlag(info, [](const TritonApi& api, TRITONSERVER_Server* server,
                             bool* ready) { return api.ServerIsReady(server, ready); });
}

Napi::Value ServerWrap::Metadata(const Napi::CallbackInfo& info) {
  return RunWithServer(info.Env(), [](const TritonApi& api,
                                      TRITONSERVER_Server* server,
                                      Outcome* outcome) {
    TRITONSERVER_Message* message = nullptr;
    TRITONSERVER_Error* err = api.ServerMetadata(server, &message);
    return TakeJson(api, err, message, outcome);
  });
}

Napi::Value ServerWrap::ModelIndex(const Napi::CallbackInfo& info) {
  uint32_t flags = info.Length() > 0 && info[0].ToBoolean().Value()
                       ? TRITONSERVER_INDEX_FLAG_READY
                       : 0;
  return RunWithServer(info.Env(), [flags](const TritonApi& api,
                                           TRITONSERVER_Server* server,
                                           Outcome* outcome) {
    TRITONSERVER_Message* message = nullptr;
    TRITONSERVER_Error* err = api.ServerModelIndex(server, flags, &message);
    return TakeJson(api, err, message, outcome);
  });
}

Napi::Value ServerWrap::ModelIsReady(const Napi::CallbackInfo& info) {
  std::string name = GetString(info, 0, "model name");
  int64_t version = GetVersion(info, 1);
  return RunWithServer(info.Env(), [name, version](const TritonApi& api,
                                                   TRITONSERVER_Server* server,
                                                   Outcome* outcome) {
    bool ready = false;
    auto failure = TakeError(
        api, api.ServerModelIsReady(server, name.c_str(), version, &ready));
    *outcome = ready;
    return failure;
  });
}

// The model queries that answer with a JSON message.
Napi::Value ServerWrap::ModelMessage(const Napi::CallbackInfo& info,
                                     ModelMessageCall call) {
  std::string name = GetString(info, 0, "model name");
  int64_t version = GetVersion(info, 1);
  return RunWithServer(info.Env(), [name, version, call](
                                       const TritonApi& api,
                                       TRITONSERVER_Server* server,
                                       Outcome* outcome) {
    TRITONSERVER_Message* message = nullptr;
    TRITONSERVER_Error* err = call(api, server, name.c_str(), version, &message);
    return TakeJson(api, err, message, outcome);
  });
}

// The model queries that answer with flags.
Napi::Value ServerWrap::ModelFlags(const Napi::CallbackInfo& info,
                                   ModelFlagsCall call) {
  std::string name = GetString(info, 0, "model name");
  int64_t version = GetVersion(info, 1);
  return RunWithServer(info.Env(), [name, version, call](
                                       const TritonApi& api,
                                       TRITONSERVER_Server* server,
                                       Outcome* outcome) {
    uint32_t flags = 0;
    void* unused = nullptr;
    auto failure = TakeError(
        api, call(api, server, name.c_str(), version, &flags, &unused));
    *outcome = flags;
    return failure;
  });
}

Napi::Value ServerWrap::ModelMetadata(const Napi::CallbackInfo& info) {
  return ModelMessage(info, [](const TritonApi& api, TRITONSERVER_Server* server,
                               const char* name, int64_t version,
                               TRITONSERVER_Message** message) {
    return api.ServerModelMetadata(server, name, version, message);
  });
}

Napi::Value ServerWrap::ModelConfig(const Napi::CallbackInfo& info) {
  return ModelMessage(info, [](const TritonApi& api, TRITONSERVER_Server* server,
                               const char* name, int64_t version,
                               TRITONSERVER_Message** message) {
    return api.ServerModelConfig(server, name, version, /*config_version=*/1,
                                 message);
  });
}

Napi::Value ServerWrap::ModelStatistics(const Napi::CallbackInfo& info) {
  return ModelMessage(info, [](const TritonApi& api, TRITONSERVER_Server* server,
                               const char* name, int64_t version,
                               TRITONSERVER_Message** message) {
    return api.ServerModelStatistics(server, name, version, message);
  });
}

Napi::Value ServerWrap::ModelBatchProperties(const Napi::CallbackInfo& info) {
  return ModelFlags(info, [](const TritonApi& api, TRITONSERVER_Server* server,
                             const char* name, int64_t version, uint32_t* flags,
                             void** voidp) {
    return api.ServerModelBatchProperties(server, name, version, flags, voidp);
  });
}

Napi::Value ServerWrap::ModelTransactionProperties(
    const Napi::CallbackInfo& info) {
  return ModelFlags(info, [](const TritonApi& api, TRITONSERVER_Server* server,
                             const char* name, int64_t version, uint32_t* flags,
                             void** voidp) {
    return api.ServerModelTransactionProperties(server, name, version, flags,
                                                voidp);
  });
}

// loadModel(name, parameters?: Array<[name, string | Uint8Array]>): strings
// are sent as STRING parameters (e.g. `config`), bytes as BYTES (`file:...`).
Napi::Value ServerWrap::LoadModel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string name = GetString(info, 0, "model name");
  std::vector<LoadParameter> parameters;
  if (info.Length() > 1 && info[1].IsArray()) {
    Napi::Array list = info[1].As<Napi::Array>();
    for (uint32_t i = 0; i < list.Length(); ++i) {
      Napi::Value entry = list.Get(i);
      if (!entry.IsArray() || entry.As<Napi::Array>().Length() != 2)
        throw ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG,
                        "load parameters must be [name, value] pairs");
      Napi::Array pair = entry.As<Napi::Array>();
      Napi::Value key = pair.Get(0u), value = pair.Get(1u);
      if (!key.IsString())
        throw ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG,
                        "load parameter names must be strings");
      if (value.IsString()) {
        parameters.push_back(
            {key.As<Napi::String>(), false, value.As<Napi::String>()});
      } else if (value.IsTypedArray() &&
                 value.As<Napi::TypedArray>().TypedArrayType() ==
                     napi_uint8_array) {
        auto bytes = value.As<Napi::Uint8Array>();
        parameters.push_back(
            {key.As<Napi::String>(), true,
             std::string(reinterpret_cast<const char*>(bytes.Data()),
                         bytes.ByteLength())});
      } else {
        throw ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG,
                        "load parameter values must be strings or Uint8Arrays");
      }
    }
  }
  return RunWithServer(env, [name, parameters = std::move(parameters)](
                                const TritonApi& api,
                                TRITONSERVER_Server* server, Outcome*) {
    if (parameters.empty())
      return TakeError(api, api.ServerLoadModel(server, name.c_str()));
    ParameterList list(api);
    for (const LoadParameter& parameter : parameters) {
      TRITONSERVER_Parameter* item =
          parameter.is_bytes
              ? api.ParameterBytesNew(parameter.name.c_str(),
                                      parameter.value.data(),
                                      parameter.value.size())
              : api.ParameterNew(parameter.name.c_str(),
                                 TRITONSERVER_PARAMETER_STRING,
                                 parameter.value.c_str());
      if (item == nullptr)
        return std::optional<Failure>(
            Failure{TRITONSERVER_ERROR_INTERNAL,
                    "could not create load parameter " + parameter.name});
      list.items.push_back(item);
    }
    return TakeError(api, api.ServerLoadModelWithParameters(
                              server, name.c_str(), list.data(),
                              list.items.size()));
  });
}

Napi::Value ServerWrap::UnloadModel(const Napi::CallbackInfo& info) {
  std::string name = GetString(info, 0, "model name");
  bool dependents = info.Length() > 1 && info[1].ToBoolean().Value();
  return RunWithServer(info.Env(), [name, dependents](
                                       const TritonApi& api,
                                       TRITONSERVER_Server* server, Outcome*) {
    return TakeError(api, dependents ? api.ServerUnloadModelAndDependents(
                                           server, name.c_str())
                                     : api.ServerUnloadModel(server,
                                                             name.c_str()));
  });
}

Napi::Value ServerWrap::PollModelRepository(const Napi::CallbackInfo& info) {
  return RunWithServer(info.Env(), [](const TritonApi& api,
                                      TRITONSERVER_Server* server, Outcome*) {
    return TakeError(api, api.ServerPollModelRepository(server));
  });
}

// registerModelRepository(path, mapping: Array<[directory, modelName]>)
Napi::Value ServerWrap::RegisterModelRepository(
    const Napi::CallbackInfo& info) {
  std::string path = GetString(info, 0, "repository path");
  std::vector<std::pair<std::string, std::string>> mapping;
  if (info.Length() > 1 && info[1].IsArray()) {
    Napi::Array list = info[1].As<Napi::Array>();
    for (uint32_t i = 0; i < list.Length(); ++i) {
      Napi::Value entry = list.Get(i);
      Napi::Array pair = entry.IsArray() ? entry.As<Napi::Array>()
                                         : Napi::Array::New(info.Env());
      if (pair.Length() != 2 || !pair.Get(0u).IsString() ||
          !pair.Get(1u).IsString())
        throw ToJsError(info.Env(), TRITONSERVER_ERROR_INVALID_ARG,
                        "name mapping entries must be [directory, name] "
                        "string pairs");
      mapping.emplace_back(pair.Get(0u).As<Napi::String>(),
                           pair.Get(1u).As<Napi::String>());
    }
  }
  return RunWithServer(info.Env(), [path, mapping](const TritonApi& api,
                                                   TRITONSERVER_Server* server,
                                                   Outcome*) {
    ParameterList list(api);
    for (const auto& [directory, model] : mapping)
      list.items.push_back(api.ParameterNew(
          directory.c_str(), TRITONSERVER_PARAMETER_STRING, model.c_str()));
    return TakeError(api, api.ServerRegisterModelRepository(
                              server, path.c_str(), list.data(),
                              static_cast<uint32_t>(list.items.size())));
  });
}

Napi::Value ServerWrap::UnregisterModelRepository(
    const Napi::CallbackInfo& info) {
  std::string path = GetString(info, 0, "repository path");
  return RunWithServer(info.Env(), [path](const TritonApi& api,
                                          TRITONSERVER_Server* server,
                                          Outcome*) {
    return TakeError(api,
                     api.ServerUnregisterModelRepository(server, path.c_str()));
  });
}

Napi::Value ServerWrap::Metrics(const Napi::CallbackInfo& info) {
  return RunWithServer(info.Env(), [](const TritonApi& api,
                                      TRITONSERVER_Server* server,
                                      Outcome* outcome) {
    TRITONSERVER_Metrics* metrics = nullptr;
    if (auto failure = TakeError(api, api.ServerMetrics(server, &metrics)))
      return failure;
    const char* base = nullptr;
    size_t size = 0;
    auto failure = TakeError(
        api, api.MetricsFormatted(metrics, TRITONSERVER_METRIC_PROMETHEUS,
                                  &base, &size));
    if (!failure) *outcome = std::string(base, size);
    TakeError(api, api.MetricsDelete(metrics));
    return failure;
  });
}

// stop(waitMs, bounded) → Promise<{ complete, requestsInside, message,
// unfinished }>.
// Requests in flight are cancelled first, so models that honour
// cancellation finish at once; the others get waitMs to come back.
// Only then is Triton's stop called — with nothing of ours inside it, so it
// unloads every model and the server can be deleted. A request that is
// still inside after the wait defers both (ServerState::DeleteWhenEmpty):
// Triton offers no way to unload models after a stop that ran out of time,
// and deleting a server whose models are loaded crashes in their
// destructors. Triton's own stop gets waitMs too, at least
// kMinUnloadSeconds (SetUnloadTimeout).
// `bounded` (stop({ timeoutMs })): the whole stop returns by waitMs. Triton's
// stop then runs on a thread of its own (still with at least
// kMinUnloadSeconds, so that it can finish and the server be deleted); when
// it has not finished by the bound the report says `unfinished`, and the
// thread deletes the server only if Triton's stop succeeds. Idempotent.
Napi::Value ServerWrap::Stop(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const double wait_arg = info.Length() > 0 && info[0].IsNumber()
                              ? info[0].As<Napi::Number>().DoubleValue()
                              : 30000.0;
  const auto wait = std::chrono::milliseconds(static_cast<int64_t>(
      std::clamp(wait_arg, 0.0, 4294967295000.0)));
  const bool bounded = info.Length() > 1 && info[1].IsBoolean() &&
                       info[1].As<Napi::Boolean>().Value();
  if (attached_) return Detach(env, wait);
  state_->stopping = true;
  // Regions go now; requests still using one keep it mapped until released.
  state_->shared_memory.Close();
  state_->CancelEverywhere();
  struct Report {
    size_t inside = 0;
    std::string message;
    bool unfinished = false;
  };
  auto report = std::make_shared<Report>();
  return BlockingCall::Run(
      env,
      [state = state_, wait, bounded, report](Outcome*) -> std::optional<Failure> {
        using Clock = std::chrono::steady_clock;
        const auto deadline = Clock::now() + wait;
        if (!state->WaitUntilEmpty(wait)) {
          report->inside = state->RequestsInside();
          state->DeleteWhenEmpty();
          return std::nullopt;
        }
        const uint32_t seconds = static_cast<uint32_t>(
            std::min<int64_t>((wait.count() + 999) / 1000, 0xffffffffLL));
        if (!bounded) {
          state->SetUnloadTimeout(seconds);
          if (auto message = state->StopAndDelete()) report->message = *message;
          return std::nullopt;
        }
        struct Done {
          std::mutex mutex;
          std::condition_variable changed;
          bool finished = false;
          std::optional<std::string> message;
        };
        auto done = std::make_shared<Done>();
        BackgroundDeletions::Started();
        std::thread([state, seconds, done] {
          state->SetUnloadTimeout(seconds);
          std::optional<std::string> message = state->StopAndDelete();
          {
            std::lock_guard<std::mutex> lock(done->mutex);
            done->finished = true;
            done->message = std::move(message);
          }
          done->changed.notify_all();
          BackgroundDeletions::Finished();
        }).detach();
        std::unique_lock<std::mutex> lock(done->mutex);
        if (done->changed.wait_until(lock, deadline,
                                     [&done] { return done->finished; })) {
          if (done->message) report->message = *done->message;
        } else {
          report->unfinished = true;
        }
        return std::nullopt;
      },
      [engine = engine_, report](Napi::Env env, Outcome&) -> Napi::Value {
        engine->Close();
        Napi::Object result = Napi::Object::New(env);
        result.Set("complete", report->inside == 0 && report->message.empty() &&
                                   !report->unfinished);
        result.Set("requestsInside",
                   Napi::Number::New(env, static_cast<double>(report->inside)));
        result.Set("message", report->message);
        result.Set("unfinished", report->unfinished);
        return result;
      });
}

// Raw Node-API: a request's arguments fit on the stack here.
napi_value ServerWrap::Infer(napi_env env, napi_callback_info info) {
  constexpr size_t kStackArgs = 32;
  napi_value stack[kStackArgs];
  size_t argc = kStackArgs;
  void* data = nullptr;
  if (napi_get_cb_info(env, info, &argc, stack, nullptr, &data) != napi_ok) return nullptr;
  std::vector<napi_value> heap;
  const napi_value* argv = stack;
  if (argc > kStackArgs) {
    heap.resize(argc);
    napi_get_cb_info(env, info, &argc, heap.data(), nullptr, nullptr);
    argv = heap.data();
  }
  try {
    ServerWrap* wrap = (*static_cast<std::shared_ptr<CallTarget>*>(data))->wrap;
    if (wrap == nullptr || wrap->Closed())
      throw ToJsError(Napi::Env(env), TRITONSERVER_ERROR_UNAVAILABLE,
                      "the server has been stopped");
    return wrap->engine_->Infer(CallArgs{Napi::Env(env), argv, argc});
  } catch (const Napi::Error& error) {
    error.ThrowAsJavaScriptException();
    return nullptr;
  }
}

napi_value ServerWrap::Flush(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  void* data = nullptr;
  if (napi_get_cb_info(env, info, &argc, nullptr, nullptr, &data) != napi_ok) return nullptr;
  if (ServerWrap* wrap = (*static_cast<std::shared_ptr<CallTarget>*>(data))->wrap)
    wrap->engine_->Flush();
  return nullptr;
}

Napi::Value ServerWrap::Cancel(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsNumber())
    throw ToJsError(info.Env(), TRITONSERVER_ERROR_INVALID_ARG,
                    "cancel() takes a request token");
  engine_->Cancel(info.Env(), static_cast<uint64_t>(
                                  info[0].As<Napi::Number>().Int64Value()));
  return info.Env().Undefined();
}

// share() → the id Server.attach() takes in another thread.
Napi::Value ServerWrap::Share(const Napi::CallbackInfo& info) {
  if (Closed())
    throw ToJsError(info.Env(), TRITONSERVER_ERROR_UNAVAILABLE,
                    "the server has been stopped");
  return Napi::Number::New(info.Env(), static_cast<double>(state_->ShareId()));
}

// removeAtEnd(path): a directory removed if the environment ends before
// stop() (which leaves removing it to JS).
Napi::Value ServerWrap::RemoveAtEnd(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsString())
    throw ToJsError(info.Env(), TRITONSERVER_ERROR_INVALID_ARG,
                    "removeAtEnd() takes a path");
  remove_at_end_ = info[0].As<Napi::String>().Utf8Value();
  return info.Env().Undefined();
}

// An attached thread's stop(): cancels this thread's requests, waits for
// them (up to waitSeconds), and lets go of the server — which goes on
// serving its owner and other threads.
Napi::Value ServerWrap::Detach(Napi::Env env, std::chrono::milliseconds wait) {
  closed_ = true;
  engine_->CancelAll();
  auto inside = std::make_shared<size_t>(0);
  return BlockingCall::Run(
      env,
      [engine = engine_, wait, inside](Outcome*) -> std::optional<Failure> {
        if (!engine->WaitUntilIdle(wait))
          *inside = engine->RequestsInside();
        return std::nullopt;
      },
      [engine = engine_, inside](Napi::Env env, Outcome&) -> Napi::Value {
        engine->Close();
        Napi::Object result = Napi::Object::New(env);
        result.Set("complete", *inside == 0);
        result.Set("requestsInside",
                   Napi::Number::New(env, static_cast<double>(*inside)));
        result.Set("message", "");
        result.Set("unfinished", false);
        return result;
      });
}

Napi::Value ServerWrap::SharedMemory(const Napi::CallbackInfo& info) {
  return SharedMemoryCall(info, state_->shared_memory, Closed());
}

Napi::Value ServerWrap::InFlight(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), engine_->InFlight());
}

}  // namespace tsn
