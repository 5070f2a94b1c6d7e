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

// What sends requests to a server (an inference engine, one per attached
// thread): the owner's stop cancels every one. Declared here so the server
// needs nothing of the engine's room.
class RequestSource {
 public:
  virtual ~RequestSource() = default;
  // Cancels every request of this source still inside Triton (any thread).
  virtual void CancelAll() = 0;
};

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
  void AddEngine(const std::shared_ptr<RequestSource>& engine);
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
  std::vector<std::weak_ptr<RequestSource>> engines_;
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

}  // namespace tsn
