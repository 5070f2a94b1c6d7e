// Inference for one server: requests in, responses out, on Triton's threads
// only what must happen there (allocate, enqueue), everything else on the JS
// thread in one drain per tick.
#pragma once

#include <napi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <unordered_set>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "server.h"

namespace tsn {

// Process-wide counts of live native objects, for tests and leak hunting.
struct LiveCounters {
  std::atomic<int64_t> requests{0};        // request contexts not yet freed
  std::atomic<int64_t> responses{0};       // Triton responses not yet deleted
  std::atomic<int64_t> output_buffers{0};  // output memory not yet freed
  std::atomic<int64_t> input_references{0};  // JS inputs held for Triton
};
LiveCounters& Live();

class InferenceEngine {
 public:
  static std::shared_ptr<InferenceEngine> Create(
      Napi::Env env, std::shared_ptr<ServerState> state,
      Napi::Function on_responses);
  ~InferenceEngine();

  // infer(model, version, outputs, id, priority, timeoutUs, flags,
  //       correlationId, parameters, outputBuffers, ...inputs) → token.
  Napi::Value Infer(const Napi::CallbackInfo& info);
  void Cancel(Napi::Env env, uint64_t token);
  // Cancels every request of this engine still inside Triton (any thread;
  // API >= 1.25).
  void CancelAll();
  // Waits until none of this engine's requests is inside Triton; a negative
  // timeout waits for ever. True when none is left.
  bool WaitUntilIdle(std::chrono::milliseconds timeout);
  size_t RequestsInside();
  uint32_t InFlight() const { return static_cast<uint32_t>(requests_.size()); }
  // Forces outputs to be copied into JS memory (runtimes without external
  // buffers); set by the outputCopy option or when Node-API refuses them.
  void SetCopyOutputs(bool copy) { copy_outputs_ = copy; }
  bool CopyOutputs() const { return copy_outputs_; }
  // The server was deleted: release the thread-safe function once idle.
  void Close();
  // JS can no longer be called (environment ending): from now on Triton's
  // threads finish requests themselves, JS is never called again.
  void Abandon();
  // JS thread, after Abandon(): lets go of the inputs of requests Triton's
  // threads finished.
  void ReleaseInputsOfFinished();

 private:
  struct Request;
  struct Completion {
    Request* request;
    TRITONSERVER_InferenceResponse* response;  // null for a release
    uint32_t flags;
    bool is_release;
  };
  static void Drain(Napi::Env env, Napi::Function callback,
                    InferenceEngine* engine, std::nullptr_t* unused);
  using Tsfn = Napi::TypedThreadSafeFunction<InferenceEngine, std::nullptr_t,
                                             &InferenceEngine::Drain>;

  explicit InferenceEngine(std::shared_ptr<ServerState> state);

  static TRITONSERVER_Error* Allocate(
      TRITONSERVER_ResponseAllocator* allocator, const char* tensor_name,
      size_t byte_size, TRITONSERVER_MemoryType memory_type,
      int64_t memory_type_id, void* userp, void** buffer, void** buffer_userp,
      TRITONSERVER_MemoryType* actual_memory_type,
      int64_t* actual_memory_type_id);
  static TRITONSERVER_Error* ReleaseBuffer(
      TRITONSERVER_ResponseAllocator* allocator, void* buffer,
      void* buffer_userp, size_t byte_size, TRITONSERVER_MemoryType memory_type,
      int64_t memory_type_id);
  static TRITONSERVER_Error* Query(TRITONSERVER_ResponseAllocator* allocator,
                                   void* userp, const char* tensor_name,
                                   size_t* byte_size,
                                   TRITONSERVER_MemoryType* memory_type,
                                   int64_t* memory_type_id);
  static void OnResponse(TRITONSERVER_InferenceResponse* response,
                         const uint32_t flags, void* userp);
  static void OnRelease(TRITONSERVER_InferenceRequest* request,
                        const uint32_t flags, void* userp);

  void Push(const Completion& completion);  // any thread
  // After Abandon(): a completion handled on the thread it arrived on.
  void CompleteNatively(const Completion& completion);
  // Each request waits for two events (release, final response); true for
  // the second one, whichever thread sees it.
  static bool LastEvent(Request* request);
  // A request handed to Triton (JS thread); taken off the cancel list before
  // it is deleted; completely back (any thread, last).
  void Entered(Request* request);
  void Unlist(Request* request);
  void Left();
  void DrainOnJsThread(Napi::Env env, Napi::Function callback);
  void DeliverResponse(Napi::Env env, Napi::Function callback,
                       Request* request,
                       TRITONSERVER_InferenceResponse* response,
                       uint32_t flags);
  Napi::Value ResponseParameters(Napi::Env env,
                                 TRITONSERVER_InferenceResponse* response);
  Napi::Value OutputBuffer(Napi::Env env, const void* base, size_t size);
  Request* NewRequest();
  void Finish(Napi::Env env, Request* request);
  void BuildRequest(const Napi::CallbackInfo& info, Request* request);
  Napi::Value InputsToKeep(Napi::Env env);
  void SetParameter(Napi::Env env, TRITONSERVER_InferenceRequest* triton,
                    const std::string& key, Napi::Value value);

  std::shared_ptr<ServerState> state_;
  const TritonApi& api_;
  TRITONSERVER_ResponseAllocator* allocator_ = nullptr;
  Tsfn tsfn_;
  bool tsfn_released_ = false;
  bool closing_ = false;
  bool copy_outputs_ = false;

  // JS thread only.
  // Tokens stay exact as JS numbers and never wrap in practice (2^53).
  uint64_t next_token_ = 1;
  std::unordered_map<uint64_t, Request*> requests_;
  std::vector<Request*> free_requests_;
  std::vector<int64_t> shape_scratch_;
  std::vector<Completion> draining_;
  std::vector<napi_value> args_scratch_;
  std::vector<napi_value> input_views_;  // of the request being built

  // Requests inside Triton, for cancelling them from any thread (the owner
  // of a shared server stopping it) and waiting for them.
  std::mutex inside_mutex_;
  std::condition_variable inside_changed_;
  std::unordered_set<TRITONSERVER_InferenceRequest*> inside_;
  size_t inside_count_ = 0;  // until each is finished, deleted included

  // Shared with Triton's threads.
  std::mutex queue_mutex_;
  std::vector<Completion> queue_;
  bool drain_scheduled_ = false;
  bool abandoned_ = false;
};

}  // namespace tsn
