// The JS object behind lib/server.ts: one in-process Triton server.
#pragma once

#include <napi.h>

#include <atomic>
#include <memory>
#include <shared_mutex>
#include <string>
#include <variant>
#include <vector>

#include "blocking.h"
#include "loader.h"

namespace tsn {

class InferenceEngine;

// Shared by the JS wrapper, blocking calls on the thread pool and requests
// in flight, so whichever finishes last frees it.
struct ServerState {
  explicit ServerState(const TritonApi& api) : api(api) {}
  ~ServerState();
  // Stops and deletes the server if it still exists. Blocks: Triton waits
  // for requests in flight, up to the exit timeout.
  void StopAndDelete();

  const TritonApi& api;
  // Calls that use `server` hold it shared; deleting the server holds it
  // exclusively, so no call ever sees a deleted server.
  std::shared_mutex lifetime;
  TRITONSERVER_Server* server = nullptr;
  std::atomic<bool> stopping{false};
};

using OptionArg = std::variant<std::string, double, bool>;
struct OptionCall {
  std::string function;
  std::vector<OptionArg> args;
};

// Applies one ServerOptions call; unknown names and wrong arguments fail.
std::optional<Failure> ApplyOptionCall(const TritonApi& api,
                                       TRITONSERVER_ServerOptions* options,
                                       const OptionCall& call);

class ServerWrap : public Napi::ObjectWrap<ServerWrap> {
 public:
  static Napi::Function Define(Napi::Env env);
  ServerWrap(const Napi::CallbackInfo& info);
  ~ServerWrap();

  // Creates the JS object for a server that ServerNew just made.
  static Napi::Object Wrap(Napi::Env env, std::shared_ptr<ServerState> state,
                           Napi::Function on_responses);
  void SetCopyOutputs(bool copy);

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
  Napi::Value Infer(const Napi::CallbackInfo& info);
  Napi::Value Cancel(const Napi::CallbackInfo& info);
  Napi::Value InFlight(const Napi::CallbackInfo& info);

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
  void StopNow();

  std::shared_ptr<ServerState> state_;
  std::shared_ptr<InferenceEngine> engine_;
  bool cleanup_hook_added_ = false;
};

}  // namespace tsn
