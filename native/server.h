// The JS object behind lib/server.ts: one in-process Triton server.
#pragma once

#include <napi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <variant>
#include <vector>

#include "blocking.h"
#include "loader.h"
#include "shared-memory.h"

namespace tsn {

class InferenceEngine;

// Shared by the JS wrapper, blocking calls on the thread pool and requests
// in flight, so whichever finishes last frees it.
//
// Rule: the server is never deleted while a request is inside Triton (handed
// over by ServerInferAsync, release or final response still to come):
// deleting a Triton server frees it under its backends' threads.
struct ServerState : std::enable_shared_from_this<ServerState> {
  explicit ServerState(const TritonApi& api) : api(api) {}
  ~ServerState();

  const TritonApi& api;
  // Calls that use `server` hold it shared; deleting the server holds it
  // exclusively, so no call ever sees a deleted server.
  std::shared_mutex lifetime;
  TRITONSERVER_Server* server = nullptr;
  std::atomic<bool> stopping{false};
  // System shared memory regions registered with this server (every thread
  // attached to it sees the same ones); closed when the owner stops it.
  SharedMemoryRegistry shared_memory;

  // A request was handed to Triton (JS thread) / is completely back (any thread).
  void RequestEntered();
  void RequestLeft();
  size_t RequestsInside();
  // Waits until no request is inside Triton; a negative timeout waits for
  // ever. True when none is left.
  bool WaitUntilEmpty(std::chrono::milliseconds timeout);
  // Stops and deletes the server now if no request is inside Triton, else on
  // a thread of its own as soon as the last one is back. Never blocks on
  // requests.
  void DeleteWhenEmpty();
  // The exit timeout of Triton's own stop: at least kMinUnloadSeconds.
  void SetUnloadTimeout(uint32_t seconds);
  static constexpr uint32_t kMinUnloadSeconds = 10;
  // Every engine (one per attached thread) that sends requests to this
  // server, so the owner's stop can cancel them all.
  void AddEngine(const std::shared_ptr<InferenceEngine>& engine);
  void CancelEverywhere();
  // The id other threads attach with (server.share()); made on first use.
  uint64_t ShareId();

  // Stops and deletes the server (blocks while Triton unloads models); only
  // when no request is inside. Triton's message if its stop failed (then
  // the server is left undeleted: deleting it would crash).
  std::optional<std::string> StopAndDelete();

 private:
  std::mutex inside_mutex_;
  std::condition_variable inside_changed_;
  size_t inside_ = 0;
  bool delete_when_empty_ = false;
  std::mutex engines_mutex_;
  std::vector<std::weak_ptr<InferenceEngine>> engines_;
  uint64_t share_id_ = 0;
};

// A shared server by its share id, or null when it is gone or stopping.
std::shared_ptr<ServerState> FindSharedServer(uint64_t id);

// Servers stopped and deleted on threads of their own (after a stop that
// left requests inside), which process exit must wait for.
struct BackgroundDeletions {
  static void Started();
  static void Finished();
  static bool Wait(std::chrono::milliseconds timeout);
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
  Napi::Value SharedMemory(const Napi::CallbackInfo& info);  // shared-memory.cc
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
