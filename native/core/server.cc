#include "server.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string_view>
#include <thread>
#include <functional>
#include <limits>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <utility>

namespace tsn {

ServerState::~ServerState() {
  // The last owner is gone, so no request is inside any more.
  StopAndDelete();
}

void ServerState::SetUnloadTimeout(uint32_t seconds) {
  std::shared_lock<std::shared_mutex> lock(lifetime);
  // Triton's stop needs time to unload the models (a Python model's stub
  // takes about a second to exit); without it the server could not be
  // deleted. API >= 1.30, else the exitTimeoutSeconds option applies.
  if (server != nullptr && api.ServerSetExitTimeout != nullptr)
    TakeError(api, api.ServerSetExitTimeout(
                       server, std::max(seconds, kMinUnloadSeconds)));
}

std::optional<std::string> ServerState::StopAndDelete() {
  std::unique_lock<std::shared_mutex> lock(lifetime);
  if (server == nullptr) return std::nullopt;
  TRITONSERVER_Server* stopping_server = server;
  server = nullptr;
  // Nothing of ours is inside: Triton's stop unloads every model and waits
  // for it (up to its exit timeout).
  if (auto failure = TakeError(api, api.ServerStop(stopping_server))) {
    // Deleting now would free the server under the models it is still
    // unloading (observed on r25.07: a crash in a model's destructor). The
    // server is left to the process.
    std::fprintf(stderr,
                 "tritonserver-node: Triton did not finish stopping (%s); the "
                 "server is left undeleted\n",
                 failure->message.c_str());
    return failure->message;
  }
  if (auto failure = TakeError(api, api.ServerDelete(stopping_server))) {
    std::fprintf(stderr, "tritonserver-node: could not delete the server: %s\n",
                 failure->message.c_str());
    return failure->message;
  }
  return std::nullopt;
}

void ServerState::AddEngine(const std::shared_ptr<RequestSource>& engine) {
  std::lock_guard<std::mutex> lock(engines_mutex_);
  engines_.push_back(engine);
}

void ServerState::CancelEverywhere() {
  std::vector<std::shared_ptr<RequestSource>> engines;
  {
    std::lock_guard<std::mutex> lock(engines_mutex_);
    for (const auto& weak : engines_)
      if (auto engine = weak.lock()) engines.push_back(std::move(engine));
  }
  for (const auto& engine : engines) engine->CancelAll();
}

namespace {
std::mutex g_shared_mutex;
// Servers other threads may attach to, by share id.
std::unordered_map<uint64_t, std::weak_ptr<ServerState>> g_shared;
uint64_t g_next_share_id = 1;
}  // namespace

uint64_t ServerState::ShareId() {
  std::lock_guard<std::mutex> lock(g_shared_mutex);
  if (share_id_ == 0) {
    share_id_ = g_next_share_id++;
    g_shared[share_id_] = weak_from_this();
  }
  return share_id_;
}

std::shared_ptr<ServerState> FindSharedServer(uint64_t id) {
  std::lock_guard<std::mutex> lock(g_shared_mutex);
  auto found = g_shared.find(id);
  if (found == g_shared.end()) return nullptr;
  std::shared_ptr<ServerState> state = found->second.lock();
  if (!state || state->stopping) {
    g_shared.erase(found);
    return nullptr;
  }
  return state;
}

namespace {
std::mutex g_background_mutex;
std::condition_variable g_background_done;
int g_background_deletions = 0;
}  // namespace

void BackgroundDeletions::Started() {
  std::lock_guard<std::mutex> lock(g_background_mutex);
  ++g_background_deletions;
}

void BackgroundDeletions::Finished() {
  {
    std::lock_guard<std::mutex> lock(g_background_mutex);
    --g_background_deletions;
  }
  g_background_done.notify_all();
}

bool BackgroundDeletions::Wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(g_background_mutex);
  return g_background_done.wait_for(lock, timeout,
                                    [] { return g_background_deletions == 0; });
}

void ServerState::RequestEntered() {
  std::lock_guard<std::mutex> lock(inside_mutex_);
  ++inside_;
}

void ServerState::RequestLeft() {
  std::shared_ptr<ServerState> self;
  {
    std::lock_guard<std::mutex> lock(inside_mutex_);
    --inside_;
    if (inside_ == 0 && delete_when_empty_) {
      delete_when_empty_ = false;
      self = shared_from_this();
    }
    // Under the lock: a waiter that sees 0 may let this state go at once.
    inside_changed_.notify_all();
  }
  // This may be a Triton thread (or the JS thread): never delete the server
  // from under it, do it on a thread of its own.
  if (self) {
    BackgroundDeletions::Started();
    std::thread([self = std::move(self)] {
      self->SetUnloadTimeout(kMinUnloadSeconds);
      self->StopAndDelete();
      BackgroundDeletions::Finished();
    }).detach();
  }
}

size_t ServerState::RequestsInside() {
  std::lock_guard<std::mutex> lock(inside_mutex_);
  return inside_;
}

bool ServerState::WaitUntilEmpty(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(inside_mutex_);
  auto empty = [this] { return inside_ == 0; };
  if (timeout.count() < 0) {
    inside_changed_.wait(lock, empty);
    return true;
  }
  return inside_changed_.wait_for(lock, timeout, empty);
}

void ServerState::DeleteWhenEmpty() {
  {
    std::lock_guard<std::mutex> lock(inside_mutex_);
    if (inside_ != 0) {
      delete_when_empty_ = true;
      return;
    }
  }
  StopAndDelete();
}

// ---------------------------------------------------------------------------
// Server options: lib/options.ts turns options into a list of C calls; this
// table applies them by name with checked argument conversion.

namespace {

Failure BadOption(const OptionCall& call, const std::string& why) {
  return Failure{TRITONSERVER_ERROR_INVALID_ARG,
                 "TRITONSERVER_" + call.function + ": " + why};
}

template <typename T>
bool ConvertArg(const OptionArg& arg, T* out) {
  if constexpr (std::is_same_v<T, const char*>) {
    auto* text = std::get_if<std::string>(&arg);
    if (text == nullptr) return false;
    *out = text->c_str();
    return true;
  } else if constexpr (std::is_same_v<T, bool>) {
    auto* flag = std::get_if<bool>(&arg);
    if (flag == nullptr) return false;
    *out = *flag;
    return true;
  } else if constexpr (std::is_floating_point_v<T>) {
    auto* number = std::get_if<double>(&arg);
    if (number == nullptr) return false;
    *out = static_cast<T>(*number);
    return true;
  } else {
    // Integers and enums: whole numbers within the C type's range.
    using Int = std::conditional_t<std::is_enum_v<T>, int, T>;
    auto* number = std::get_if<double>(&arg);
    if (number == nullptr || std::trunc(*number) != *number) return false;
    if (*number < static_cast<double>(std::numeric_limits<Int>::lowest()) ||
        *number > static_cast<double>(std::numeric_limits<Int>::max()))
      return false;
    *out = static_cast<T>(static_cast<Int>(*number));
    return true;
  }
}

template <typename... Args, size_t... I>
std::optional<Failure> CallWithArgs(
    const TritonApi& api,
    TRITONSERVER_Error* (*fn)(TRITONSERVER_ServerOptions*, Args...),
    TRITONSERVER_ServerOptions* options, const OptionCall& call,
    std::index_sequence<I...>) {
  std::tuple<std::remove_cv_t<Args>...> values;
  bool ok = (ConvertArg(call.args[I], &std::get<I>(values)) && ...);
  if (!ok) return BadOption(call, "argument of the wrong type or range");
  return TakeError(api, fn(options, std::get<I>(values)...));
}

template <typename... Args>
std::optional<Failure> CallOption(
    const TritonApi& api,
    TRITONSERVER_Error* (*fn)(TRITONSERVER_ServerOptions*, Args...),
    TRITONSERVER_ServerOptions* options, const OptionCall& call) {
  if (call.args.size() != sizeof...(Args))
    return BadOption(call, "expects " + std::to_string(sizeof...(Args)) +
                               " arguments");
  return CallWithArgs(api, fn, options, call,
                      std::index_sequence_for<Args...>{});
}

using OptionApplier = std::function<std::optional<Failure>(
    const TritonApi&, TRITONSERVER_ServerOptions*, const OptionCall&)>;

#define TSN_OPTION_FUNCTIONS(X)                                          \
  X(ServerOptionsSetServerId)                                            \
  X(ServerOptionsSetModelRepositoryPath)                                 \
  X(ServerOptionsSetModelControlMode)                                    \
  X(ServerOptionsSetStartupModel)                                        \
  X(ServerOptionsSetStrictModelConfig)                                   \
  X(ServerOptionsSetModelConfigName)                                     \
  X(ServerOptionsSetRateLimiterMode)                                     \
  X(ServerOptionsAddRateLimiterResource)                                 \
  X(ServerOptionsSetPinnedMemoryPoolByteSize)                            \
  X(ServerOptionsSetCudaMemoryPoolByteSize)                              \
  X(ServerOptionsSetCacheConfig)                                         \
  X(ServerOptionsSetCacheDirectory)                                      \
  X(ServerOptionsSetMinSupportedComputeCapability)                       \
  X(ServerOptionsSetExitOnError)                                         \
  X(ServerOptionsSetStrictReadiness)                                     \
  X(ServerOptionsSetExitTimeout)                                         \
  X(ServerOptionsSetBufferManagerThreadCount)                            \
  X(ServerOptionsSetModelLoadThreadCount)                                \
  X(ServerOptionsSetModelLoadRetryCount)                                 \
  X(ServerOptionsSetModelNamespacing)                                    \
  X(ServerOptionsSetEnablePeerAccess)                                    \
  X(ServerOptionsSetLogFile)                                             \
  X(ServerOptionsSetLogInfo)                                             \
  X(ServerOptionsSetLogWarn)                                             \
  X(ServerOptionsSetLogError)                                            \
  X(ServerOptionsSetLogFormat)                                           \
  X(ServerOptionsSetLogVerbose)                                          \
  X(ServerOptionsSetMetrics)                                             \
  X(ServerOptionsSetGpuMetrics)                                          \
  X(ServerOptionsSetCpuMetrics)                                          \
  X(ServerOptionsSetMetricsInterval)                                     \
  X(ServerOptionsSetMetricsConfig)                                       \
  X(ServerOptionsSetBackendDirectory)                                    \
  X(ServerOptionsSetRepoAgentDirectory)                                  \
  X(ServerOptionsSetModelLoadDeviceLimit)                                \
  X(ServerOptionsSetBackendConfig)                                       \
  X(ServerOptionsSetHostPolicy)

const std::unordered_map<std::string, OptionApplier>& OptionAppliers() {
  static const auto* table = new std::unordered_map<std::string, OptionApplier>{
#define TSN_APPLIER(name)                                                   \
  {#name, [](const TritonApi& api, TRITONSERVER_ServerOptions* options,     \
             const OptionCall& call) -> std::optional<Failure> {            \
     if (api.name == nullptr) return Unsupported(api, #name);               \
     return CallOption(api, api.name, options, call);                       \
   }},
      TSN_OPTION_FUNCTIONS(TSN_APPLIER)
#undef TSN_APPLIER
  };
  return *table;
}

}  // namespace

std::optional<Failure> ApplyOptionCall(const TritonApi& api,
                                       TRITONSERVER_ServerOptions* options,
                                       const OptionCall& call) {
  auto found = OptionAppliers().find(call.function);
  if (found == OptionAppliers().end())
    return BadOption(call, "not a server option function");
  return found->second(api, options, call);
}

}  // namespace tsn
