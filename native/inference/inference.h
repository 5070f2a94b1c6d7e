// Inference for one server (one engine per thread that uses it). Requests
// in: recorded on the JS thread (request.cc), submitted once per tick (here,
// or by the engine's submitter thread: submit.cc). Responses out: read and
// deleted on Triton's threads (output-memory.cc, completions.cc), turned into
// JS values on the JS thread in one drain per tick (drain.cc).
#pragma once

#include <napi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "../core/errors.h"
#include "../core/server.h"

namespace tsn {

// Process-wide counts of live native objects, for tests and leak hunting.
// Each on a cache line of its own: the JS thread counts requests and inputs,
// Triton's threads responses and output buffers, and one shared line moved
// between the cores at every count.
struct LiveCounters {
  alignas(64) std::atomic<int64_t> requests{0};        // request contexts not yet freed
  alignas(64) std::atomic<int64_t> responses{0};       // Triton responses not yet deleted
  alignas(64) std::atomic<int64_t> output_buffers{0};  // output memory not yet freed
  alignas(64) std::atomic<int64_t> input_references{0};  // JS inputs held for Triton
};
LiveCounters& Live();

// A call's arguments as Node-API hands them over: infer() reads them without
// node-addon-api's CallbackInfo, which puts more than six on the heap.
struct CallArgs {
  Napi::Env env;
  const napi_value* values;
  size_t count;
  Napi::Value operator[](size_t i) const {
    return i < count ? Napi::Value(env, values[i]) : env.Undefined();
  }
  size_t Length() const { return count; }
  Napi::Env Env() const { return env; }
};

// A model or input name of a request: shared with the NativeName JS made
// for it (Addon::NativeName), so no request reads it from a JS string.
using SharedName = std::shared_ptr<const std::string>;
// What a NativeName External holds; the tag tells it from other Externals
// (a type-tag check through Node-API costs more than the rest of a request).
struct NameHolder {
  static constexpr uint32_t kTag = 0x6e616d65;  // "name"
  uint32_t tag = kTag;
  SharedName name;
};

class InferenceEngine : public RequestSource {
 public:
  static std::shared_ptr<InferenceEngine> Create(
      Napi::Env env, std::shared_ptr<ServerState> state,
      Napi::Function on_responses);
  ~InferenceEngine();

  // infer(model, version, options, ...inputs) → token (see ParseRequest);
  // the request is recorded, and handed to Triton by the next Flush().
  Napi::Value Infer(const CallArgs& info);
  // Submits what infer() calls of this tick left (see submit.cc); with
  // `wait`, only after the submitter thread's earlier ones.
  void Flush(bool wait = false);
  void Cancel(Napi::Env env, uint64_t token);
  // Cancels every request of this engine still inside Triton (any thread;
  // API >= 1.25).
  void CancelAll() override;
  // Waits until none of this engine's requests is inside Triton; a negative
  // timeout waits for ever. True when none is left.
  bool WaitUntilIdle(std::chrono::milliseconds timeout);
  size_t RequestsInside();
  uint32_t InFlight() const { return static_cast<uint32_t>(requests_.count); }
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
  // One output of a response, read on Triton's thread.
  struct Output {
    std::string name;
    TRITONSERVER_DataType datatype;
    uint32_t rank;
    uint32_t first_dim;  // index into Completion::dims
    // kInline: copied into the completion's inline_bytes at `offset`.
    enum class Memory : uint8_t { kNone, kBlock, kCaller, kInline } memory;
    void* block;  // kBlock: our output block, now owned by the completion
    size_t size;
    uint32_t offset;
  };
  struct Parameter {
    std::string name;
    TRITONSERVER_ParameterType type;
    uint32_t text_offset, text_size;  // STRING: its bytes in Completion::texts
    double number;  // INT (as read) and DOUBLE
    bool flag;
  };
  // What the JS thread gets: a response Triton's thread already read and
  // deleted, and/or the end of the request (Triton holds nothing of it).
  // Completions are recycled with the capacity of their vectors (Push, the
  // drain): a response then costs Triton's thread no allocation and the JS
  // thread no free of memory another thread allocated.
  struct Completion {
    Request* request = nullptr;
    bool has_response = false;
    bool final = false;
    bool done = false;  // the request is deleted: JS may let go of it
    std::optional<Failure> error;
    int64_t version = -1;
    std::vector<Parameter> parameters;
    std::string texts;  // the string parameters' values, one after another
    std::vector<Output> outputs;
    std::vector<int64_t> dims;
    // Small outputs are copied here on Triton's thread, where their bytes
    // are in cache, and their blocks go back to the pool there too.
    static constexpr size_t kInlineBytes = 128;
    uint32_t inline_used = 0;
    alignas(8) char inline_bytes[kInlineBytes];
    // Empty again, its vectors keeping their capacity (no block is held).
    void Reset();
  };
  // The calling thread's completion to fill and push: Push() swaps it with a
  // free slot of the queue, so it comes back with that slot's capacity.
  static Completion& Scratch();
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

  void Push(Completion& completion);  // any thread; `completion` comes back empty
  void Signal();
  // After Abandon(): a completion dropped on the thread it arrived on.
  static void CompleteNatively(Completion& completion);
  // Triton's thread: the response read into `completion`, which then owns
  // its output memory.
  void ReadResponse(TRITONSERVER_InferenceResponse* response,
                    Completion* completion);
  // Each request waits for two events (release, final response); the second
  // one, whichever thread sees it, deletes the request and reports it done.
  void TritonEvent(Request* request);
  void DeleteInTriton(Request* request);
  // A request handed to Triton (JS thread), or refused by it after all.
  void Entered(Request* request);
  void NotEntered();
  void DrainOnJsThread(Napi::Env env, Napi::Function callback);
  // The small outputs (≤ 64 B) of one drain round, copied into one JS
  // buffer (drain.cc OpenSmallOutputs).
  struct SmallOutputs {
    napi_value buffer = nullptr;
    char* data = nullptr;
    size_t used = 0;
    // Each starts 8-byte aligned: right for any element type.
    static size_t Room(size_t size) { return (size + 7) / 8 * 8; }
  };
  // Where an output's bytes are, for JS: its own ArrayBuffer; the drain's
  // shared buffer of small outputs, offset, size; or the caller's buffer
  // (its size).
  enum class OutputWhere { kOwn = 0, kShared = 1, kCaller = 2 };
  void AppendCompletion(Napi::Env env, Completion& completion,
                        SmallOutputs& small, std::vector<napi_value>& args);
  // A batch is delivered once its arguments reach this many (a call's
  // arguments live on the stack).
  static constexpr size_t kBatchArgs = 4096;
  void AppendParameters(Napi::Env env, const Completion& completion,
                        std::vector<napi_value>& args);
  // A completion's numbers as JS values. Most are small and repeat (names'
  // indices, data types, ranks, dims, sizes, counts): each of 0..kRoundIntegers-1
  // is made once per drain round and its handle reused, valid as long as the
  // round's handle scope.
  static constexpr int64_t kRoundIntegers = 128;
  napi_value round_integers_[kRoundIntegers] = {};
  napi_value Integer(napi_env env, int64_t value);
  napi_value Name(Napi::Env env, int64_t index, const std::string& name);
  // A string parameter's value, by its name's index: one JS string per drain
  // round while the value repeats (JS strings are immutable, so responses
  // can share one). Values up to kRoundTextBytes are kept to compare.
  struct RoundText {
    std::string text;
    napi_value value = nullptr;
  };
  static constexpr size_t kRoundTextBytes = 256;
  RoundText round_texts_[kRoundIntegers];
  napi_value Text(napi_env env, int64_t name_index, const char* data, size_t size);
  Napi::Value OutputBuffer(Napi::Env env, Output& output);
  static bool IsSmall(const Output& output);
  SmallOutputs OpenSmallOutputs(Napi::Env env);
  static void FreeOutputs(Completion& completion);
  Request* NewRequest();
  void Finish(Napi::Env env, Request* request);
  void ParseRequest(const CallArgs& info, Request* request);
  void ParseOptions(Napi::Value options, Request* request);
  void ParseParameter(Napi::Env env, const std::string& key, Napi::Value value,
                      Request* request);
  // shared-memory.h: an input's or output's [region, offset, byteSize].
  bool ReadSharedMemorySpan(Napi::Env env, napi_value value, const std::string& what,
                            Request* request, const void** data, size_t* size);
  Napi::Value InputsToKeep(Napi::Env env);
  // Makes the Triton request and hands it over (any thread).
  void Submit(Request* request);
  void SubmitterLoop();
  void LetSubmitterExit();

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
  // Requests from infer() until JS is done with them, by token: a token has
  // a fixed slot (token mod kSlots), so a request costs no allocation here;
  // one whose slot an older request still holds (a long stream) goes to the
  // map.
  struct RequestTable {
    static constexpr uint64_t kSlots = 4096;
    std::vector<Request*> slots = std::vector<Request*>(kSlots, nullptr);
    std::unordered_map<uint64_t, Request*> overflow;
    size_t count = 0;
    void Add(Request* request);
    Request* Find(uint64_t token) const;
    bool Remove(Request* request);  // whether it was there
    std::vector<Request*> All() const;
    bool empty() const { return count == 0; }
  };
  RequestTable requests_;
  std::vector<Request*> free_requests_;
  std::vector<int64_t> shape_scratch_;
  // Slots [0, draining_count_) are being delivered; the rest are free.
  std::vector<Completion> draining_;
  size_t draining_count_ = 0;
  // Free slots kept past a drain: more are given back (a burst's worth).
  static constexpr size_t kSpareCompletions = 1024;
  std::vector<napi_value> args_scratch_;
  std::vector<napi_value> input_views_;  // of the request being built
  std::vector<Request*> unsubmitted_;    // infer() calls since the last flush
  std::vector<Request*> submitting_here_;  // Flush()'s own, on this thread

  // The submitter thread: batches of requests handed over by Flush().
  std::thread submitter_;
  std::mutex submit_mutex_;
  std::condition_variable submit_wanted_;
  std::condition_variable submit_idle_;
  std::vector<Request*> submit_queue_;
  bool submitting_ = false;
  bool submitter_exit_ = false;

  // Requests inside Triton, for cancelling them from any thread (the owner
  // of a shared server stopping it) and waiting for them.
  std::mutex inside_mutex_;
  std::condition_variable inside_changed_;
  Request* inside_head_ = nullptr;  // those handed to Triton, not yet deleted
  void LinkInside(Request* request);    // under inside_mutex_
  void UnlinkInside(Request* request);  // under inside_mutex_; if linked
  size_t inside_count_ = 0;  // from infer() until Triton holds nothing of it
  uint64_t cancel_generation_ = 0;  // CancelAll() calls

  // Shared with Triton's threads.
  std::mutex queue_mutex_;
  std::vector<Completion> queue_;  // slots [0, queued_) are queued; the rest are free
  size_t queued_ = 0;
  bool drain_scheduled_ = false;
  int signalling_ = 0;  // Signal() calls under way
  std::condition_variable signalled_;
  bool abandoned_ = false;
};

}  // namespace tsn
