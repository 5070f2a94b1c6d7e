// ServerWrap: the JS object behind lib/server.ts (NativeServer), one per
// thread that started or attached to a server; it joins the rooms: the
// server's state (core), this thread's inference engine, the bound models.
#pragma once

#include <napi.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/server.h"
#include "inference/inference.h"

namespace tsn {

class ServerWrap : public Napi::ObjectWrap<ServerWrap> {
 public:
  static Napi::Function Define(Napi::Env env);
  ServerWrap(const Napi::CallbackInfo& info);
  ~ServerWrap();

  // Creates the JS object for a server that ServerNew just made.
  static Napi::Object Wrap(Napi::Env env, std::shared_ptr<ServerState> state,
                           Napi::Function on_responses, bool attached = false);
  void SetCopyOutputs(bool copy);
  // The server for a native front end to send requests to; null once closed.
  std::shared_ptr<ServerState> StateForFrontEnd() const { return Closed() ? nullptr : state_; }

 private:
  Napi::Value Library(const Napi::CallbackInfo& info);
  Napi::Value IsLive(const Napi::CallbackInfo& info);
  Napi::Value IsReady(const Napi::CallbackInfo& info);
  Napi::Value Metadata(const Napi::CallbackInfo& info);
  Napi::Value ModelIndex(const Napi::CallbackInfo& info);
  Napi::Value ModelIsReady(const Napi::CallbackInfo& info);
  Napi::Value ModelMetadata(const Napi::CallbackInfo& info);
  Napi::Value ModelConfig(const Napi::CallbackInfo& info);
  Napi::Value ModelStatistics(const Napi::CallbackInfo& info);
  Napi::Value ModelBatchProperties(const Napi::CallbackInfo& info);
  Napi::Value ModelTransactionProperties(const Napi::CallbackInfo& info);
  Napi::Value LoadModel(const Napi::CallbackInfo& info);
  Napi::Value UnloadModel(const Napi::CallbackInfo& info);
  Napi::Value PollModelRepository(const Napi::CallbackInfo& info);
  Napi::Value RegisterModelRepository(const Napi::CallbackInfo& info);
  Napi::Value UnregisterModelRepository(const Napi::CallbackInfo& info);
  Napi::Value Metrics(const Napi::CallbackInfo& info);
  Napi::Value Stop(const Napi::CallbackInfo& info);
  // infer and flush run per request: functions of the object itself, whose
  // data leads to the wrapper (see the constructor).
  static napi_value Infer(napi_env env, napi_callback_info info);
  static napi_value Flush(napi_env env, napi_callback_info info);
  Napi::Value Cancel(const Napi::CallbackInfo& info);
  Napi::Value InFlight(const Napi::CallbackInfo& info);
  Napi::Value Share(const Napi::CallbackInfo& info);
  Napi::Value RemoveAtEnd(const Napi::CallbackInfo& info);
  Napi::Value SharedMemory(const Napi::CallbackInfo& info);
  Napi::Value Detach(Napi::Env env, std::chrono::milliseconds wait);
  // This wrapper is closed (stopped, or detached from a shared server), or
  // the server itself is stopping.
  bool Closed() const { return closed_ || state_->stopping; }

  using ServerFlagCall = TRITONSERVER_Error* (*)(
      const TritonApi& api, TRITONSERVER_Server* server, bool* flag);
  Napi::Value ServerFlag(const Napi::CallbackInfo& info, ServerFlagCall call);
  using ModelMessageCall = TRITONSERVER_Error* (*)(
      const TritonApi& api, TRITONSERVER_Server* server, const char* name,
      int64_t version, TRITONSERVER_Message** message);
  using ModelFlagsCall = TRITONSERVER_Error* (*)(
      const TritonApi& api, TRITONSERVER_Server* server, const char* name,
      int64_t version, uint32_t* flags, void** voidp);
  Napi::Value ModelMessage(const Napi::CallbackInfo& info,
                           ModelMessageCall call);
  Napi::Value ModelFlags(const Napi::CallbackInfo& info, ModelFlagsCall call);

  // Runs `work` with the live server on the thread pool, or rejects with
  // UNAVAILABLE once the server is stopping.
  using ServerWork = std::function<std::optional<Failure>(
      const TritonApi& api, TRITONSERVER_Server* server, Outcome* outcome)>;
  Napi::Value RunWithServer(Napi::Env env, ServerWork work);

  static void CleanupHook(void* self);
  // Ends the server synchronously on the JS thread, delivering nothing more
  // to JS: the environment is going away (cleanup hook, wait for ever) or the
  // process is exiting (wait at most `wait`).
  void EndWithEnvironment(std::chrono::milliseconds wait);

 public:
  // process.exit(): every server of this environment, synchronously.
  static void EndAllForExit(Napi::Env env, std::chrono::milliseconds wait);

 private:

  // What infer and flush reach: this wrapper while it lives (either may be
  // collected first).
  struct CallTarget {
    ServerWrap* wrap;
  };
  std::shared_ptr<CallTarget> call_target_;

  std::shared_ptr<ServerState> state_;
  std::shared_ptr<InferenceEngine> engine_;
  bool cleanup_hook_added_ = false;
  bool ended_ = false;
  // Attached to a server another thread started (Server.attach): stopping
  // or ending detaches this thread only.
  bool attached_ = false;
  bool closed_ = false;
  // A directory of this thread's (the bound models' repository) that goes
  // when the environment ends: a terminated worker or an exit runs no JS.
  std::string remove_at_end_;
};

}  // namespace tsn
