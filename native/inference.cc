#include "inference.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "addon.h"
#include "trace.h"

namespace tsn {

LiveCounters& Live() {
  static LiveCounters counters;
  return counters;
}

namespace {

// Output memory is one block: this header, then the tensor bytes. Once JS
// adopts the bytes as an external ArrayBuffer, the allocator's release
// function leaves the block alone and the buffer's finalizer gives it back,
// so the Triton response can be deleted right away.
struct alignas(64) BufferHeader {
  bool adopted;
  uint8_t size_class;  // kUnpooled, or the pool's class it goes back to
};
constexpr size_t kHeaderSize = sizeof(BufferHeader);
// Outputs up to this size are copied into JS memory (see OutputBuffer).
constexpr size_t kCopyUpToBytes = 4096;
// Outputs up to this size are copied into one JS buffer per drain round, out
// of which JS slices each: a typed array this small lives in V8's heap, so
// no backing store is made (and swept, and counted as external memory) for
// each of them. V8's limit for typed arrays in its heap is 64 bytes.
constexpr size_t kSmallUpToBytes = 64;

// buffer_userp of an output Triton wrote into memory the caller gave.
char kCallerMemory;

// Output blocks are taken on Triton's threads and given back on the JS
// thread (or by a finalizer): recycled by size class (powers of two from
// 256 B to 4 MiB) rather than malloc'd and freed each time, which makes the
// JS thread free into Triton's threads' malloc arenas under their lock, and
// makes large blocks fresh pages (page faults) every time. Process-wide, as
// blocks outlive the engine that made them; bounded in what it keeps.
class BlockPool {
 public:
  static constexpr uint8_t kUnpooled = 0xff;

  static BlockPool& Get() {
    static BlockPool* pool = new BlockPool();  // never destroyed: finalizers may run late
    return *pool;
  }

  BufferHeader* Take(size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
    // Under AddressSanitizer every block is malloc'd and freed, so a use
    // after it went back is reported instead of reading a recycled block.
    const uint8_t size_class = kUnpooled;
#else
    const uint8_t size_class = ClassOf(bytes);
#endif
    BufferHeader* header = nullptr;
    if (size_class != kUnpooled) {
      Class& c = classes_[size_class];
      std::lock_guard<std::mutex> lock(c.mutex);
      if (!c.free.empty()) {
        header = c.free.back();
        c.free.pop_back();
        kept_bytes_ -= BytesOf(size_class);
      }
    }
    if (header == nullptr) {
      const size_t capacity = size_class == kUnpooled ? bytes : BytesOf(size_class);
      header = static_cast<BufferHeader*>(std::malloc(kHeaderSize + capacity));
      if (header == nullptr) return nullptr;
      header->size_class = size_class;
    }
    header->adopted = false;
    Live().output_buffers++;
    return header;
  }

  void Give(BufferHeader* header) {
    Live().output_buffers--;
    const uint8_t size_class = header->size_class;
    if (size_class != kUnpooled) {
      Class& c = classes_[size_class];
      std::lock_guard<std::mutex> lock(c.mutex);
      if (kept_bytes_ + BytesOf(size_class) <= kMaxKeptBytes &&
          c.free.size() < kMaxKeptPerClass) {
        c.free.push_back(header);
        kept_bytes_ += BytesOf(size_class);
        return;
      }
    }
    std::free(header);
  }

 private:
  static constexpr size_t kMinShift = 8;   // 256 B
  static constexpr size_t kMaxShift = 22;  // 4 MiB
  static constexpr size_t kClasses = kMaxShift - kMinShift + 1;
  static constexpr size_t kMaxKeptBytes = size_t{64} << 20;
  static constexpr size_t kMaxKeptPerClass = 4096;

  struct Class {
    std::mutex mutex;
    std::vector<BufferHeader*> free;
  };

  static uint8_t ClassOf(size_t bytes) {
    size_t shift = kMinShift;
    while (shift <= kMaxShift && (size_t{1} << shift) < bytes) ++shift;
    return shift > kMaxShift ? kUnpooled : static_cast<uint8_t>(shift - kMinShift);
  }
  static size_t BytesOf(uint8_t size_class) { return size_t{1} << (size_class + kMinShift); }

  Class classes_[kClasses];
  std::atomic<size_t> kept_bytes_{0};  // approximate across classes: a bound, not a count
};

void FreeBlock(BufferHeader* header) { BlockPool::Get().Give(header); }

Napi::Error InvalidArg(Napi::Env env, const std::string& message) {
  return ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG, message);
}

}  // namespace

struct InferenceEngine::Request {
  InferenceEngine* engine = nullptr;
  uint64_t token = 0;
  // Made by Submit(); set under inside_mutex_ once handed to Triton.
  TRITONSERVER_InferenceRequest* triton = nullptr;
  Napi::Reference<Napi::Value> inputs;  // keeps input memory alive
  bool counted_inside = false;          // Entered() counted it
  bool final_seen = false;              // JS saw the FINAL response
  // Release and FINAL response still to come from Triton (its threads).
  std::atomic<int> triton_events{2};
  // Under inside_mutex_: Triton holds nothing of it any more (deleted, or
  // refused), so no cancel may touch it and its inputs are no longer read.
  bool triton_done = false;
  bool cancel_requested = false;  // under inside_mutex_
  // Under inside_mutex_: in the engine's list of requests inside Triton.
  bool inside = false;
  Request* inside_prev = nullptr;
  Request* inside_next = nullptr;
  uint64_t cancel_generation = 0;  // CancelAll()s before it was made

  // What infer() asked for, read on the JS thread (ParseRequest) and turned
  // into a Triton request by Submit() on whichever thread submits it. The
  // context is reused, so its strings and vectors keep their memory.
  struct Input {
    SharedName name;
    TRITONSERVER_DataType datatype;
    uint32_t first_dim;  // into dims
    uint32_t rank;
    const void* data;
    size_t size;
  };
  struct Parameter {
    std::string key;
    TRITONSERVER_ParameterType type;
    std::string text;
    int64_t integer;
    double real;
    bool flag;
  };
  enum class Correlation : uint8_t { kNone, kNumber, kText };
  SharedName model;
  int64_t version = -1;
  std::vector<Input> inputs_spec;
  std::vector<int64_t> dims;
  std::vector<std::string> outputs_wanted;
  bool has_id = false, has_priority = false, has_timeout = false, has_flags = false;
  std::string id;
  uint32_t priority = 0;
  uint64_t timeout_us = 0;
  uint32_t flags = 0;
  Correlation correlation = Correlation::kNone;
  uint64_t correlation_id = 0;
  std::string correlation_text;
  std::vector<Parameter> parameters;
  TRITONSERVER_InferenceTrace* trace = nullptr;
  // Outputs to write into the caller's memory (infer's outputs record);
  // read by Allocate on Triton's threads, set before ServerInferAsync.
  struct CallerBuffer {
    std::string name;
    void* data;
    size_t size;
    bool fallback;  // allocate as usual when it is too small
    bool shared_memory;  // a range of a shared memory region
  };
  std::vector<CallerBuffer> caller_buffers;
  // Shared memory regions its inputs and outputs use, kept mapped until the
  // request is done with (shared-memory.h).
  std::vector<SharedMemoryRef> shared_memory;
};

std::shared_ptr<InferenceEngine> InferenceEngine::Create(
    Napi::Env env, std::shared_ptr<ServerState> state,
    Napi::Function on_responses) {
  std::shared_ptr<InferenceEngine> engine(new InferenceEngine(std::move(state)));
  // The thread-safe function owns a reference so the engine outlives every
  // drain, however the server ends.
  auto* keep = new std::shared_ptr<InferenceEngine>(engine);
  engine->tsfn_ = Tsfn::New(
      env, on_responses, "tritonserver-node:responses", 0, 1, engine.get(),
      [](Napi::Env, std::shared_ptr<InferenceEngine>* keep, InferenceEngine*) {
        delete keep;
      },
      keep);
  // Only requests in flight keep the event loop alive.
  engine->tsfn_.Unref(env);
  return engine;
}

InferenceEngine::InferenceEngine(std::shared_ptr<ServerState> state)
    : state_(std::move(state)), api_(state_->api) {
  auto failure = TakeError(
      api_, api_.ResponseAllocatorNew(&allocator_, &InferenceEngine::Allocate,
                                      &InferenceEngine::ReleaseBuffer, nullptr));
  if (!failure)
    failure = TakeError(api_, api_.ResponseAllocatorSetQueryFunction(
                                  allocator_, &InferenceEngine::Query));
  // A failure leaves allocator_ null and Infer() reports it.
}

InferenceEngine::~InferenceEngine() {
  if (submitter_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(submit_mutex_);
      submitter_exit_ = true;
    }
    submit_wanted_.notify_one();
    submitter_.join();
  }
  if (allocator_ != nullptr)
    TakeError(api_, api_.ResponseAllocatorDelete(allocator_));
  for (Request* request : free_requests_) delete request;
}

// --- Triton's threads -------------------------------------------------------

TRITONSERVER_Error* InferenceEngine::Allocate(
    TRITONSERVER_ResponseAllocator*, const char* tensor_name, size_t byte_size,
    TRITONSERVER_MemoryType, int64_t, void* userp, void** buffer,
    void** buffer_userp, TRITONSERVER_MemoryType* actual_memory_type,
    int64_t* actual_memory_type_id) {
  // Host memory whatever was asked for: JS can only read host memory.
  *actual_memory_type = TRITONSERVER_MEMORY_CPU;
  *actual_memory_type_id = 0;
  *buffer = nullptr;
  *buffer_userp = nullptr;
  if (byte_size == 0) return nullptr;
  auto* request = static_cast<Request*>(userp);
  for (const Request::CallerBuffer& given : request->caller_buffers) {
    if (given.name != tensor_name) continue;
    if (byte_size <= given.size) {
      *buffer = given.data;
      *buffer_userp = &kCallerMemory;
      return nullptr;
    }
    if (given.fallback) break;
    if (given.shared_memory)
      return request->engine->api_.ErrorNew(
          TRITONSERVER_ERROR_INTERNAL,
          (std::string("shared memory size specified with the request for output '") +
           tensor_name + "' (" + std::to_string(given.size) +
           " bytes) should be at least " + std::to_string(byte_size) +
           " bytes to hold the results")
              .c_str());
    return request->engine->api_.ErrorNew(
        TRITONSERVER_ERROR_INVALID_ARG,
        (std::string("output '") + tensor_name + "' is " +
         std::to_string(byte_size) + " bytes; the buffer given for it holds " +
         std::to_string(given.size))
            .c_str());
  }
  BufferHeader* header = BlockPool::Get().Take(byte_size);
  if (header == nullptr) {
    const TritonApi& api = static_cast<Request*>(userp)->engine->api_;
    return api.ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                        (std::string("out of memory allocating output '") +
                         tensor_name + "'")
                            .c_str());
  }
  *buffer = reinterpret_cast<char*>(header) + kHeaderSize;
  *buffer_userp = header;
  return nullptr;
}

TRITONSERVER_Error* InferenceEngine::ReleaseBuffer(
    TRITONSERVER_ResponseAllocator*, void*, void* buffer_userp, size_t,
    TRITONSERVER_MemoryType, int64_t) {
  if (buffer_userp == &kCallerMemory) return nullptr;  // the caller's own
  auto* header = static_cast<BufferHeader*>(buffer_userp);
  if (header != nullptr && !header->adopted) FreeBlock(header);
  return nullptr;
}

TRITONSERVER_Error* InferenceEngine::Query(TRITONSERVER_ResponseAllocator*,
                                           void*, const char*, size_t*,
                                           TRITONSERVER_MemoryType* memory_type,
                                           int64_t* memory_type_id) {
  *memory_type = TRITONSERVER_MEMORY_CPU;
  *memory_type_id = 0;
  return nullptr;
}

// Triton's threads read and delete each response and the request
// themselves, as a C client of Triton would: the JS thread only turns what
// they read into JS values (its time per request is the package's ceiling).
void InferenceEngine::OnResponse(TRITONSERVER_InferenceResponse* response,
                                 const uint32_t flags, void* userp) {
  auto* request = static_cast<Request*>(userp);
  InferenceEngine* engine = request->engine;
  Completion& completion = Scratch();
  completion.request = request;
  completion.final = (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0;
  if (response != nullptr) {
    Live().responses++;
    completion.has_response = true;
    engine->ReadResponse(response, &completion);
    TakeError(engine->api_, engine->api_.InferenceResponseDelete(response));
    Live().responses--;
  }
  if (!completion.final) {
    engine->Push(completion);
    return;
  }
  // Released already: this is the last event, one completion says both.
  if (request->triton_events.load() == 1) {
    request->triton_events.store(0);
    engine->DeleteInTriton(request);
    completion.done = true;
    engine->Push(completion);
    engine->NotEntered();  // last: see NotEntered
    return;
  }
  // Queued before the count drops, so the release thread's "done" (if it is
  // the last event after all) always follows this response.
  engine->Push(completion);
  engine->TritonEvent(request);
}

void InferenceEngine::OnRelease(TRITONSERVER_InferenceRequest*,
                                const uint32_t flags, void* userp) {
  if ((flags & TRITONSERVER_REQUEST_RELEASE_ALL) == 0) return;
  auto* request = static_cast<Request*>(userp);
  request->engine->TritonEvent(request);
}

void InferenceEngine::TritonEvent(Request* request) {
  if (request->triton_events.fetch_sub(1) != 1) return;
  DeleteInTriton(request);
  Completion& done = Scratch();
  done.request = request;
  done.done = true;
  Push(done);
  NotEntered();  // last: see NotEntered
}

// The request's last event: Triton's request is deleted (the caller then
// reports it done and calls NotEntered()).
void InferenceEngine::DeleteInTriton(Request* request) {
  TRITONSERVER_InferenceRequest* triton = request->triton;
  {
    std::lock_guard<std::mutex> lock(inside_mutex_);
    UnlinkInside(request);
    request->triton_done = true;
  }
  TakeError(api_, api_.InferenceRequestDelete(triton));
}

void InferenceEngine::ReadResponse(TRITONSERVER_InferenceResponse* response,
                                   Completion* completion) {
  if ((completion->error = TakeError(api_, api_.InferenceResponseError(response))))
    return;
  const char* model_name = nullptr;
  if ((completion->error = TakeError(
           api_, api_.InferenceResponseModel(response, &model_name,
                                             &completion->version))))
    return;
  uint32_t parameter_count = 0;
  TakeError(api_, api_.InferenceResponseParameterCount(response, &parameter_count));
  completion->parameters.reserve(parameter_count);
  for (uint32_t i = 0; i < parameter_count; ++i) {
    const char* name = nullptr;
    TRITONSERVER_ParameterType type = TRITONSERVER_PARAMETER_STRING;
    const void* value = nullptr;
    if (TakeError(api_, api_.InferenceResponseParameter(response, i, &name,
                                                        &type, &value)) ||
        name == nullptr || value == nullptr)
      continue;
    Parameter parameter{name, type, 0, 0, 0, false};
    switch (type) {
      case TRITONSERVER_PARAMETER_STRING: {
        const char* text = static_cast<const char*>(value);
        parameter.text_offset = static_cast<uint32_t>(completion->texts.size());
        completion->texts.append(text);
        parameter.text_size =
            static_cast<uint32_t>(completion->texts.size() - parameter.text_offset);
        break;
      }
      case TRITONSERVER_PARAMETER_INT:
        parameter.number = static_cast<double>(*static_cast<const int64_t*>(value));
        break;
      case TRITONSERVER_PARAMETER_BOOL:
        parameter.flag = *static_cast<const bool*>(value);
        break;
      case TRITONSERVER_PARAMETER_DOUBLE:
        parameter.number = *static_cast<const double*>(value);
        break;
      default:
        continue;
    }
    completion->parameters.push_back(std::move(parameter));
  }

  uint32_t output_count = 0;
  if ((completion->error = TakeError(
           api_, api_.InferenceResponseOutputCount(response, &output_count))))
    return;
  completion->outputs.reserve(output_count);
  for (uint32_t i = 0; i < output_count; ++i) {
    const char* name = nullptr;
    TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
    const int64_t* shape = nullptr;
    uint64_t dim_count = 0;
    const void* base = nullptr;
    size_t byte_size = 0;
    TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
    int64_t memory_type_id = 0;
    void* buffer_userp = nullptr;
    auto failure = TakeError(
        api_, api_.InferenceResponseOutput(response, i, &name, &datatype, &shape,
                                           &dim_count, &base, &byte_size,
                                           &memory_type, &memory_type_id,
                                           &buffer_userp));
    if (!failure && memory_type == TRITONSERVER_MEMORY_GPU)
      failure = Failure{TRITONSERVER_ERROR_UNSUPPORTED,
                        std::string("output '") + name + "' is in GPU memory"};
    if (failure) {
      FreeOutputs(*completion);
      completion->error = std::move(failure);
      return;
    }
    Output output{name, datatype, static_cast<uint32_t>(dim_count),
                  static_cast<uint32_t>(completion->dims.size()),
                  Output::Memory::kNone, nullptr, byte_size, 0};
    completion->dims.insert(completion->dims.end(), shape, shape + dim_count);
    const size_t inline_room = SmallOutputs::Room(byte_size);
    if (byte_size == 0 || base == nullptr) {
      output.size = 0;
    } else if (buffer_userp == &kCallerMemory) {
      output.memory = Output::Memory::kCaller;
    } else if (byte_size <= kSmallUpToBytes &&
               completion->inline_used + inline_room <= Completion::kInlineBytes) {
      // Deleting the response gives an own block back (not adopted).
      std::memcpy(completion->inline_bytes + completion->inline_used, base, byte_size);
      output.memory = Output::Memory::kInline;
      output.offset = completion->inline_used;
      completion->inline_used += static_cast<uint32_t>(inline_room);
    } else if (buffer_userp == nullptr) {
      // Host memory our allocator did not hand out: copied while it lives.
      BufferHeader* header = BlockPool::Get().Take(byte_size);
      if (header == nullptr) {
        FreeOutputs(*completion);
        completion->error = Failure{TRITONSERVER_ERROR_INTERNAL,
                                    std::string("out of memory copying output '") + name + "'"};
        return;
      }
      header->adopted = true;
      std::memcpy(reinterpret_cast<char*>(header) + kHeaderSize, base, byte_size);
      output.memory = Output::Memory::kBlock;
      output.block = header;
    } else {
      // Ours: deleting the response leaves it to the completion.
      auto* header = static_cast<BufferHeader*>(buffer_userp);
      header->adopted = true;
      output.memory = Output::Memory::kBlock;
      output.block = header;
    }
    completion->outputs.push_back(std::move(output));
  }
}

void InferenceEngine::FreeOutputs(Completion& completion) {
  for (Output& output : completion.outputs) {
    if (output.memory == Output::Memory::kBlock && output.block != nullptr)
      FreeBlock(static_cast<BufferHeader*>(output.block));
    output.block = nullptr;
  }
  completion.outputs.clear();
}

void InferenceEngine::Completion::Reset() {
  request = nullptr;
  has_response = final = done = false;
  error.reset();
  version = -1;
  parameters.clear();
  texts.clear();
  outputs.clear();
  dims.clear();
  inline_used = 0;
}

// Not reentrant: a thread fills it and pushes it before it pushes another.
InferenceEngine::Completion& InferenceEngine::Scratch() {
  thread_local Completion scratch;
  scratch.Reset();
  return scratch;
}

void InferenceEngine::Push(Completion& completion) {
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    if (!abandoned_) {
      if (queued_ == queue_.size()) queue_.emplace_back();
      std::swap(queue_[queued_++], completion);
      queued = true;
      if (drain_scheduled_) return;
      drain_scheduled_ = true;
      ++signalling_;
    }
  }
  if (queued) {
    Signal();
  } else {
    CompleteNatively(completion);
  }
}

// Schedules a drain (signalling_ was counted under the lock). Outside the
// queue's lock: the call takes the thread-safe function's own lock and makes
// a syscall, and the JS thread must not wait for that to take the queue.
void InferenceEngine::Signal() {
  // Never blocks: the queue has no limit.
  const napi_status status = tsfn_.NonBlockingCall(nullptr);
  std::vector<Completion> left;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    // The thread-safe function is closing: no drain will ever come.
    if (status != napi_ok && !abandoned_) {
      abandoned_ = true;
      left.swap(queue_);
      left.resize(queued_);
      queued_ = 0;
    }
    --signalling_;
    // Under the lock: Abandon() may let the engine go once it sees 0.
    signalled_.notify_all();
  }
  for (Completion& c : left) CompleteNatively(c);
}

// Nothing is delivered any more: the memory of the outputs goes; the request
// itself was deleted by Triton's thread, and the JS thread lets go of its
// inputs (ReleaseInputsOfFinished).
void InferenceEngine::CompleteNatively(Completion& completion) {
  FreeOutputs(completion);
}

void InferenceEngine::Entered(Request* request) {
  state_->RequestEntered();
  std::lock_guard<std::mutex> lock(inside_mutex_);
  ++inside_count_;
  request->counted_inside = true;
  request->cancel_generation = cancel_generation_;
}

// The request is no longer counted inside: Triton holds nothing of it, or
// never got it. The caller's last use of this engine: whoever waits for the
// count may let the engine go at once (an ending environment), so only the
// server's state, which outlives the count it keeps, is used after it.
// Does not touch the request, which JS may be reusing already.
void InferenceEngine::NotEntered() {
  ServerState* state = state_.get();
  {
    std::lock_guard<std::mutex> lock(inside_mutex_);
    --inside_count_;
    inside_changed_.notify_all();
  }
  state->RequestLeft();
}

bool InferenceEngine::WaitUntilIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(inside_mutex_);
  auto idle = [this] { return inside_count_ == 0; };
  if (timeout.count() < 0) {
    inside_changed_.wait(lock, idle);
    return true;
  }
  return inside_changed_.wait_for(lock, timeout, idle);
}

size_t InferenceEngine::RequestsInside() {
  std::lock_guard<std::mutex> lock(inside_mutex_);
  return inside_count_;
}

// --- JS thread --------------------------------------------------------------

void InferenceEngine::Drain(Napi::Env env, Napi::Function callback,
                            InferenceEngine* engine, std::nullptr_t*) {
  if (env == nullptr) return;  // the thread-safe function is finalizing
  engine->DrainOnJsThread(env, callback);
}

// Delivers what Triton's threads queued, and what they queue meanwhile: the
// drain stays scheduled while it runs, so their pushes need no new signal
// (each one takes the thread-safe function's lock and a syscall). After a few
// rounds the event loop gets its turn back and a new signal follows.
void InferenceEngine::DrainOnJsThread(Napi::Env env, Napi::Function callback) {
  constexpr int kRounds = 4;
  std::optional<Napi::Error> thrown;
  for (int round = 1;; ++round) {
    {
      std::lock_guard<std::mutex> lock(queue_mutex_);
      // The queue gets the drained slots back, all free.
      draining_.swap(queue_);
      draining_count_ = queued_;
      queued_ = 0;
      if (draining_count_ == 0) {
        drain_scheduled_ = false;
        break;
      }
    }
    Napi::HandleScope scope(env);
    std::fill(std::begin(round_integers_), std::end(round_integers_), nullptr);
    for (RoundText& cached : round_texts_) cached.value = nullptr;
    SmallOutputs small;
    if (!thrown) {
      try {
        small = OpenSmallOutputs(env);
      } catch (const Napi::Error& error) {
        thrown = error;
      }
    }
    // One call per batch of completions: a call into JS per completion
    // cost more than reading its arguments. JS may be unable to run (a
    // worker being terminated): then nothing is delivered, but every
    // resource is still given back.
    std::vector<napi_value>& args = args_scratch_;
    args.clear();
    auto deliver = [&] {
      if (!thrown && !args.empty()) {
        try {
          callback.Call(args);
        } catch (const Napi::Error& error) {
          thrown = error;
        }
      }
      args.clear();
    };
    for (size_t i = 0; i < draining_count_; ++i) {
      Completion& completion = draining_[i];
      Request* request = completion.request;
      if (completion.has_response || completion.final) {
        if (!thrown) {
          try {
            AppendCompletion(env, completion, small, args);
          } catch (const Napi::Error& error) {
            thrown = error;
          }
        }
        FreeOutputs(completion);  // what was not handed to JS
        if (completion.final) request->final_seen = true;
      }
      // The request goes back to the free list; JS never needs it to read
      // a completion already in `args`.
      if (completion.done) Finish(env, request);
      completion.Reset();
      if (args.size() >= kBatchArgs) deliver();
    }
    deliver();
    draining_count_ = 0;
    if (draining_.size() > kSpareCompletions) draining_.resize(kSpareCompletions);
    if (round == kRounds) {
      bool more;
      {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        more = queued_ > 0 && !abandoned_;
        drain_scheduled_ = more;
        if (more) ++signalling_;
      }
      if (more) Signal();
      break;
    }
  }
  // Never let a C++ exception out of the thread-safe function's callback;
  // a JS error becomes an uncaught exception, as for any callback (and is
  // swallowed when the environment is ending: NODE_API_SWALLOW_...).
  if (thrown) thrown->ThrowAsJavaScriptException();
}

// Straight from Node-API: node-addon-api's Number adds a status check and a
// wrapper to each (the call fails only for a bad environment).
napi_value InferenceEngine::Integer(napi_env env, int64_t value) {
  const bool small = value >= 0 && value < kRoundIntegers;
  if (small && round_integers_[value] != nullptr) return round_integers_[value];
  napi_value number = nullptr;
  napi_create_int64(env, value, &number);
  if (small) round_integers_[value] = number;
  return number;
}

napi_value InferenceEngine::Name(Napi::Env env, int64_t index, const std::string& name) {
  if (index >= 0) return Integer(env, index);
  return Napi::String::New(env, name);
}

napi_value InferenceEngine::Text(napi_env env, int64_t name_index, const char* data,
                                 size_t size) {
  if (name_index < 0 || name_index >= kRoundIntegers) return Napi::String::New(env, data, size);
  RoundText& cached = round_texts_[name_index];
  if (cached.value != nullptr && cached.text.size() == size &&
      std::memcmp(cached.text.data(), data, size) == 0)
    return cached.value;
  napi_value value = Napi::String::New(env, data, size);
  if (size <= kRoundTextBytes) {
    cached.text.assign(data, size);
    cached.value = value;
  }
  return value;
}

// Appends one completion to the callback's arguments as token, final,
// error, version, parameterCount, fieldCount, then its fields: each output
// flat as name, datatype + 16 * where, rank, dims..., then what `where`
// says, then parameterCount name, value pairs (lib/native.ts
// NativeResponseCallback). Arguments rather than arrays: setting array
// elements from C++ costs more than everything else in a response. Names are
// indices into the names table (Addon::ResponseName); the model name and
// request id are the caller's own and are not rebuilt as JS strings.
void InferenceEngine::AppendCompletion(Napi::Env env, Completion& completion,
                                       SmallOutputs& small,
                                       std::vector<napi_value>& args) {
  args.push_back(Integer(env, static_cast<int64_t>(completion.request->token)));
  args.push_back(Napi::Boolean::New(env, completion.final));
  const napi_value undefined = env.Undefined();
  if (!completion.has_response || completion.error) {
    // A FINAL flag without a response, or a failure.
    args.push_back(completion.error ? ToJsError(env, *completion.error).Value() : undefined);
    args.push_back(undefined);
    args.push_back(undefined);
    args.push_back(Integer(env, 0));
    return;
  }
  args.push_back(undefined);
  args.push_back(Integer(env, completion.version));
  const size_t parameter_count = completion.parameters.size();
  args.push_back(parameter_count == 0
                     ? undefined
                     : Integer(env, static_cast<int64_t>(parameter_count)));
  // The field count, filled in once the fields are there.
  const size_t count_at = args.size();
  args.push_back(undefined);
  Addon* addon = env.GetInstanceData<Addon>();
  for (Output& output : completion.outputs) {
    args.push_back(Name(env, addon->ResponseName(env, output.name), output.name));
    const OutputWhere where = output.memory == Output::Memory::kCaller ? OutputWhere::kCaller
                              : small.data != nullptr && IsSmall(output) ? OutputWhere::kShared
                                                                          : OutputWhere::kOwn;
    args.push_back(Integer(env, output.datatype + 16 * static_cast<int>(where)));
    args.push_back(Integer(env, output.rank));
    for (uint32_t d = 0; d < output.rank; ++d)
      args.push_back(Integer(env, completion.dims[output.first_dim + d]));
    if (where == OutputWhere::kCaller) {
      // Written into the caller's buffer: JS knows which; only the size.
      args.push_back(Integer(env, static_cast<int64_t>(output.size)));
    } else if (where == OutputWhere::kShared) {
      // buffer, offset, size: JS copies it out (lib/inference.ts toResponse).
      // Copied on Triton's thread already, or (past the completion's room)
      // still in its block.
      auto* header = static_cast<BufferHeader*>(output.block);
      const char* bytes = output.memory == Output::Memory::kInline
                              ? completion.inline_bytes + output.offset
                              : reinterpret_cast<char*>(header) + kHeaderSize;
      std::memcpy(small.data + small.used, bytes, output.size);
      if (output.memory == Output::Memory::kBlock) {
        output.block = nullptr;
        FreeBlock(header);
      }
      args.push_back(small.buffer);
      args.push_back(Integer(env, static_cast<int64_t>(small.used)));
      args.push_back(Integer(env, static_cast<int64_t>(output.size)));
      small.used += SmallOutputs::Room(output.size);
    } else {
      args.push_back(OutputBuffer(env, output));
    }
  }
  AppendParameters(env, completion, args);
  args[count_at] = Integer(env, static_cast<int64_t>(args.size() - count_at - 1));
}

// Appends the response's parameters as name, value pairs: JS makes the
// object (its keyed stores cost less than setting properties from here).
void InferenceEngine::AppendParameters(Napi::Env env, const Completion& completion,
                                       std::vector<napi_value>& args) {
  if (completion.parameters.empty()) return;
  Addon* addon = env.GetInstanceData<Addon>();
  for (const Parameter& parameter : completion.parameters) {
    const int64_t index = addon->ResponseName(env, parameter.name);
    args.push_back(Name(env, index, parameter.name));
    switch (parameter.type) {
      case TRITONSERVER_PARAMETER_STRING:
        args.push_back(Text(env, index, completion.texts.data() + parameter.text_offset,
                            parameter.text_size));
        break;
      case TRITONSERVER_PARAMETER_BOOL:
        args.push_back(Napi::Boolean::New(env, parameter.flag));
        break;
      case TRITONSERVER_PARAMETER_INT:
        args.push_back(Integer(env, static_cast<int64_t>(parameter.number)));
        break;
      default:  // DOUBLE
        args.push_back(Napi::Number::New(env, parameter.number));
        break;
    }
  }
}

bool InferenceEngine::IsSmall(const Output& output) {
  return output.memory == Output::Memory::kInline ||
         (output.memory == Output::Memory::kBlock && output.size <= kSmallUpToBytes);
}

// One buffer for the small outputs of a drain round, made before the round
// delivers anything: it is sized for all of them. Throws when JS cannot run
// (a worker being terminated); the drain then frees what it holds.
InferenceEngine::SmallOutputs InferenceEngine::OpenSmallOutputs(Napi::Env env) {
  size_t bytes = 0;
  for (size_t i = 0; i < draining_count_; ++i)
    for (const Output& output : draining_[i].outputs)
      if (IsSmall(output)) bytes += SmallOutputs::Room(output.size);
  SmallOutputs small;
  if (bytes == 0) return small;
  Napi::ArrayBuffer buffer = Napi::ArrayBuffer::New(env, bytes);
  small.buffer = buffer;
  small.data = static_cast<char*>(buffer.Data());
  return small;
}

// The tensor bytes as an ArrayBuffer: adopted without a copy where Node-API
// allows external buffers, copied where it does not. Small outputs are
// copied too: an external buffer's finalizer and GC bookkeeping cost more
// than copying a few KiB. Either way the block leaves `output`.
Napi::Value InferenceEngine::OutputBuffer(Napi::Env env, Output& output) {
  if (output.memory != Output::Memory::kBlock) return Napi::ArrayBuffer::New(env, 0);
  auto* header = static_cast<BufferHeader*>(output.block);
  void* base = reinterpret_cast<char*>(header) + kHeaderSize;
  if (!copy_outputs_ && output.size > kCopyUpToBytes) {
    napi_value buffer = nullptr;
    napi_status status = napi_create_external_arraybuffer(
        env, base, output.size,
        [](napi_env, void*, void* hint) {
          FreeBlock(static_cast<BufferHeader*>(hint));
        },
        header, &buffer);
    if (status == napi_ok) {
      output.block = nullptr;
      return Napi::Value(env, buffer);
    }
    // e.g. Electron's V8 sandbox: copy from now on.
    if (status == napi_no_external_buffers_allowed) copy_outputs_ = true;
  }
  Napi::ArrayBuffer copy = Napi::ArrayBuffer::New(env, output.size);
  std::memcpy(copy.Data(), base, output.size);
  output.block = nullptr;
  FreeBlock(header);
  return copy;
}

InferenceEngine::Request* InferenceEngine::NewRequest() {
  Request* request;
  if (free_requests_.empty()) {
    request = new Request();
    request->engine = this;
  } else {
    request = free_requests_.back();
    free_requests_.pop_back();
  }
  request->token = next_token_++;
  request->triton = nullptr;
  request->counted_inside = false;
  request->final_seen = false;
  request->triton_done = false;
  request->cancel_requested = false;
  request->triton_events = 2;
  request->trace = nullptr;
  request->caller_buffers.clear();
  Live().requests++;
  return request;
}

// JS thread: the request is done with (Triton's thread deleted it, or it
// never got there): its inputs go and the context is reused.
void InferenceEngine::Finish(Napi::Env env, Request* request) {
  request->triton = nullptr;
  request->shared_memory.clear();
  if (!request->inputs.IsEmpty()) {
    request->inputs.Reset();
    Live().input_references--;
  }
  bool was_in_flight = requests_.Remove(request);
  free_requests_.push_back(request);
  Live().requests--;
  if (was_in_flight && requests_.empty() && !tsfn_released_) {
    tsfn_.Unref(env);
    if (closing_) {
      tsfn_released_ = true;
      tsfn_.Release();
    }
  }
}

namespace {

// infer()'s arguments before the inputs: model, version, options.
constexpr size_t kFirstInputArg = 3;

int64_t ToInt64(Napi::Value value, const char* what) {
  if (value.IsBigInt()) {
    bool lossless = false;
    int64_t result = value.As<Napi::BigInt>().Int64Value(&lossless);
    if (!lossless)
      throw InvalidArg(value.Env(), std::string(what) + " is out of range");
    return result;
  }
  return value.As<Napi::Number>().Int64Value();
}

size_t ElementSize(napi_typedarray_type type) {
  switch (type) {
    case napi_int8_array:
    case napi_uint8_array:
    case napi_uint8_clamped_array:
      return 1;
    case napi_int16_array:
    case napi_uint16_array:
      return 2;
    case napi_int32_array:
    case napi_uint32_array:
    case napi_float32_array:
      return 4;
    default:  // float64, bigint64, biguint64
      return 8;
  }
}

// Reads a JS string into `out`, reusing its memory (no allocation once the
// request context has held a string as long). One call when the string fits
// the room `out` has (the same id every request): a length query first
// walks the string once more.
void ReadString(Napi::Env env, napi_value value, std::string& out) {
  // A cut never falls inside a character, so it leaves less than 4 bytes free.
  constexpr size_t kLongestCharacter = 4;
  const size_t room = out.capacity();
  out.resize(room);
  size_t length = 0;
  if (napi_get_value_string_utf8(env, value, out.data(), room + 1, &length) != napi_ok)
    throw InvalidArg(env, "expected a string");
  if (length + kLongestCharacter > room) {
    // Measured, and room enough kept for one call next time.
    napi_get_value_string_utf8(env, value, nullptr, 0, &length);
    out.resize(length + kLongestCharacter);
    napi_get_value_string_utf8(env, value, out.data(), length + 1, &length);
  }
  out.resize(length);
}

// A name infer() is given: a NativeName (lib/native.ts), whose string the
// addon already holds.
void ReadName(Napi::Env env, napi_value value, SharedName& out) {
  void* data = nullptr;
  if (napi_get_value_external(env, value, &data) != napi_ok || data == nullptr ||
      static_cast<const NameHolder*>(data)->tag != NameHolder::kTag)
    throw InvalidArg(env, "expected a name made by nativeName()");
  out = static_cast<const NameHolder*>(data)->name;
}

}  // namespace

// Reads infer()'s arguments into the request context; throws on bad ones.
// infer(model, version, options, ...inputs): options undefined when none is
// set, else [outputs, id, priority, timeoutUs, flags, correlationId,
// parameters, outputBuffers] (undefined = not set); then each input flat as
// name, datatype, rank, dims..., data — arguments rather than objects,
// because reading properties and elements costs more than the rest of a
// request, and types are checked by the Node-API calls that read the values
// (each type query is a call of its own). No Triton call happens here:
// Submit() makes the Triton request from the context.
void InferenceEngine::ParseRequest(const CallArgs& info,
                                   Request* request) {
  Napi::Env env = info.Env();
  ReadName(env, info[0], request->model);
  if (napi_get_value_int64(env, info[1], &request->version) != napi_ok)
    throw InvalidArg(env, "the model version must be a number");

  const size_t argc = info.Length();
  input_views_.clear();
  request->inputs_spec.clear();
  request->dims.clear();
  for (size_t i = kFirstInputArg; i < argc;) {
    request->inputs_spec.emplace_back();
    Request::Input& input = request->inputs_spec.back();
    int32_t datatype = 0;
    int64_t rank = 0;
    if (i + 3 > argc) throw InvalidArg(env, "each input needs a name, a datatype and a rank");
    ReadName(env, info[i], input.name);
    if (napi_get_value_int32(env, info[i + 1], &datatype) != napi_ok ||
        napi_get_value_int64(env, info[i + 2], &rank) != napi_ok)
      throw InvalidArg(env, "each input needs a name, a datatype and a rank");
    input.datatype = static_cast<TRITONSERVER_DataType>(datatype);
    i += 3;
    if (rank < 0 || i + static_cast<size_t>(rank) + 1 > argc)
      throw InvalidArg(env, "input '" + *input.name + "': bad rank or missing data");
    input.first_dim = static_cast<uint32_t>(request->dims.size());
    input.rank = static_cast<uint32_t>(rank);
    for (int64_t d = 0; d < rank; ++d, ++i) {
      int64_t dim = 0;
      if (napi_get_value_int64(env, info[i], &dim) != napi_ok)
        throw InvalidArg(env, "input '" + *input.name + "': dims must be numbers");
      request->dims.push_back(dim);
    }
    napi_value data = info[i++];
    // [region, offset, byteSize]: the input's bytes are in a shared memory
    // region, handed to Triton where they are.
    if (ReadSharedMemorySpan(env, data, "input '" + *input.name + "'", request,
                             &input.data, &input.size))
      continue;
    // The view's own data pointer: also right for a SharedArrayBuffer,
    // which Napi::TypedArray::ArrayBuffer() refuses.
    void* bytes = nullptr;
    size_t length = 0;
    napi_typedarray_type type;
    if (napi_get_typedarray_info(env, data, &type, &length, &bytes, nullptr,
                                 nullptr) != napi_ok)
      throw InvalidArg(env, "input '" + *input.name + "': data must be a TypedArray");
    input_views_.push_back(data);
    input.data = bytes;
    input.size = length * ElementSize(type);
  }
  request->outputs_wanted.clear();
  request->has_id = false;
  request->has_priority = false;
  request->has_timeout = false;
  request->has_flags = false;
  request->correlation = Request::Correlation::kNone;
  request->parameters.clear();
  if (!info[2].IsUndefined()) ParseOptions(info[2], request);
}

// The options of a request that has some (see ParseRequest).
void InferenceEngine::ParseOptions(Napi::Value value, Request* request) {
  Napi::Env env = value.Env();
  if (!value.IsArray() || value.As<Napi::Array>().Length() != 8)
    throw InvalidArg(env, "request options must be an array of 8");
  Napi::Array options = value.As<Napi::Array>();
  Napi::Value outputs = options.Get(0u);
  if (outputs.IsArray()) {
    Napi::Array names = outputs.As<Napi::Array>();
    for (uint32_t i = 0, n = names.Length(); i < n; ++i)
      request->outputs_wanted.push_back(names.Get(i).ToString().Utf8Value());
  }
  Napi::Value id = options.Get(1u);
  request->has_id = id.IsString();
  if (request->has_id) ReadString(env, id, request->id);
  Napi::Value priority = options.Get(2u);
  request->has_priority = priority.IsNumber();
  if (request->has_priority) request->priority = priority.As<Napi::Number>().Uint32Value();
  Napi::Value timeout = options.Get(3u);
  request->has_timeout = timeout.IsNumber();
  if (request->has_timeout)
    request->timeout_us = static_cast<uint64_t>(timeout.As<Napi::Number>().Int64Value());
  Napi::Value flags = options.Get(4u);
  request->has_flags = flags.IsNumber();
  if (request->has_flags) request->flags = flags.As<Napi::Number>().Uint32Value();
  Napi::Value correlation = options.Get(5u);
  if (correlation.IsString()) {
    request->correlation = Request::Correlation::kText;
    ReadString(env, correlation, request->correlation_text);
  } else if (correlation.IsNumber() || correlation.IsBigInt()) {
    request->correlation = Request::Correlation::kNumber;
    request->correlation_id =
        static_cast<uint64_t>(ToInt64(correlation, "sequence id"));
  }
  Napi::Value parameters = options.Get(6u);
  if (parameters.IsArray()) {
    Napi::Array list = parameters.As<Napi::Array>();
    for (uint32_t i = 0, n = list.Length(); i < n; ++i) {
      Napi::Array pair = list.Get(i).As<Napi::Array>();
      ParseParameter(env, pair.Get(0u).ToString(), pair.Get(1u), request);
    }
  }
  // [name, TypedArray, fallback] triples: outputs written into the caller's
  // memory, which is kept alive with the inputs until the release.
  Napi::Value buffers_value = options.Get(7u);
  if (buffers_value.IsArray()) {
    Napi::Array buffers = buffers_value.As<Napi::Array>();
    for (uint32_t i = 0, n = buffers.Length(); i < n; ++i) {
      Napi::Value entry = buffers.Get(i);
      if (!entry.IsArray() || entry.As<Napi::Array>().Length() != 3)
        throw InvalidArg(env, "output buffers must be [name, TypedArray, fallback]");
      Napi::Array triple = entry.As<Napi::Array>();
      Napi::Value name = triple.Get(0u), view = triple.Get(1u);
      if (name.IsString() && view.IsArray()) {
        // [region, offset, byteSize]: written into a shared memory region.
        std::string output = name.As<Napi::String>().Utf8Value();
        const void* at = nullptr;
        size_t size = 0;
        ReadSharedMemorySpan(env, view, "output '" + output + "'", request, &at, &size);
        request->caller_buffers.push_back(
            {std::move(output), const_cast<void*>(at), size, false, true});
        continue;
      }
      if (!name.IsString() || !view.IsTypedArray())
        throw InvalidArg(env, "output buffers must be [name, TypedArray, fallback]");
      void* data = nullptr;
      size_t length = 0;
      Napi::TypedArray array = view.As<Napi::TypedArray>();
      if (napi_get_typedarray_info(env, array, nullptr, &length, &data, nullptr,
                                   nullptr) != napi_ok)
        throw InvalidArg(env, "unreadable output buffer");
      input_views_.push_back(array);
      request->caller_buffers.push_back({name.As<Napi::String>().Utf8Value(), data,
                                         array.ByteLength(),
                                         triple.Get(2u).ToBoolean().Value(), false});
    }
  }
}

// A [region, offset, byteSize] array: the range of a registered shared
// memory region, bounds-checked and held mapped by the request. False (and
// nothing read) for any other value.
bool InferenceEngine::ReadSharedMemorySpan(Napi::Env env, napi_value value,
                                           const std::string& what,
                                           Request* request, const void** data,
                                           size_t* size) {
  bool is_array = false;
  if (napi_is_array(env, value, &is_array) != napi_ok || !is_array) return false;
  Napi::Array spec(env, value);
  Napi::Value region = spec.Get(0u), offset = spec.Get(1u), byte_size = spec.Get(2u);
  if (spec.Length() != 3 || !region.IsString() || !offset.IsNumber() || !byte_size.IsNumber())
    throw InvalidArg(env, what + ": shared memory must be [region, offset, byteSize]");
  const double at = offset.As<Napi::Number>().DoubleValue();
  const double bytes = byte_size.As<Napi::Number>().DoubleValue();
  if (!(at >= 0) || !(bytes >= 0) || std::trunc(at) != at || std::trunc(bytes) != bytes ||
      at > 9007199254740991.0 || bytes > 9007199254740991.0)
    throw InvalidArg(env, what + ": shared memory offset and byte size must be non-negative integers");
  SharedMemorySpan span;
  if (auto failure = state_->shared_memory.Acquire(region.As<Napi::String>().Utf8Value(),
                                                   static_cast<uint64_t>(at),
                                                   static_cast<uint64_t>(bytes), &span))
    throw ToJsError(env, *failure);
  *data = span.data;
  *size = span.size;
  request->shared_memory.push_back(std::move(span.hold));
  return true;
}

// One request parameter, typed by its JS value; the library must have the
// function that sets it.
void InferenceEngine::ParseParameter(Napi::Env env, const std::string& key,
                                     Napi::Value value, Request* request) {
  auto require = [&](auto function, const char* name) {
    if (function == nullptr) throw ToJsError(env, Unsupported(api_, name));
  };
  Request::Parameter parameter{key, TRITONSERVER_PARAMETER_STRING, {}, 0, 0, false};
  if (value.IsString()) {
    require(api_.InferenceRequestSetStringParameter, "InferenceRequestSetStringParameter");
    parameter.text = value.As<Napi::String>().Utf8Value();
  } else if (value.IsBoolean()) {
    require(api_.InferenceRequestSetBoolParameter, "InferenceRequestSetBoolParameter");
    parameter.type = TRITONSERVER_PARAMETER_BOOL;
    parameter.flag = value.ToBoolean();
  } else if (value.IsBigInt() ||
             (value.IsNumber() && std::trunc(value.As<Napi::Number>().DoubleValue()) ==
                                      value.As<Napi::Number>().DoubleValue())) {
    require(api_.InferenceRequestSetIntParameter, "InferenceRequestSetIntParameter");
    parameter.type = TRITONSERVER_PARAMETER_INT;
    parameter.integer = ToInt64(value, key.c_str());
  } else if (value.IsNumber()) {
    require(api_.InferenceRequestSetDoubleParameter, "InferenceRequestSetDoubleParameter");
    parameter.type = TRITONSERVER_PARAMETER_DOUBLE;
    parameter.real = value.As<Napi::Number>().DoubleValue();
  } else {
    throw InvalidArg(env, "parameter '" + key +
                              "' must be a string, number, bigint or boolean");
  }
  request->parameters.push_back(std::move(parameter));
}

Napi::Value InferenceEngine::Infer(const CallArgs& info) {
  Napi::Env env = info.Env();
  if (info.Length() < kFirstInputArg)
    throw InvalidArg(env, "infer(model, version, options, ...inputs)");
  if (allocator_ == nullptr)
    throw ToJsError(env, TRITONSERVER_ERROR_INTERNAL,
                    "the response allocator could not be created");
  Request* request = NewRequest();
  try {
    ParseRequest(info, request);
  } catch (const Napi::Error&) {
    Finish(env, request);
    throw;
  }
  request->inputs = Napi::Persistent(InputsToKeep(env));
  Live().input_references++;
  if (requests_.empty()) tsfn_.Ref(env);
  requests_.Add(request);
  // Counted from now on, so a stop waits for it (and cancels it) even
  // before it reaches Triton.
  Entered(request);
  // Tracing hook (trace.cc): null unless JS armed a trace for this request.
  request->trace = TakeArmedTrace();
  if (request->trace != nullptr) {
    // A traced request's bookkeeping lives on this thread: submitted now,
    // after what is waiting (order is kept).
    Flush(/*wait=*/true);
    Submit(request);
  } else {
    unsubmitted_.push_back(request);
  }
  return Napi::Number::New(env, static_cast<double>(request->token));
}

// JS calls flush() once per tick after infer() calls (lib/inference.ts):
// one request is submitted here, more go to the submitter thread in one
// hand-over, so Triton's own cost (ServerInferAsync, which locks its
// scheduler and wakes its threads) leaves the JS thread under load.
void InferenceEngine::Flush(bool wait) {
  if (unsubmitted_.empty()) return;
  std::unique_lock<std::mutex> lock(submit_mutex_);
  if (wait) submit_idle_.wait(lock, [this] { return submit_queue_.empty() && !submitting_; });
  // Submitted here only when nothing submitted earlier is still waiting
  // (order is kept: sequences depend on it).
  if (submit_queue_.empty() && !submitting_ && (wait || unsubmitted_.size() == 1)) {
    lock.unlock();
    submitting_here_.swap(unsubmitted_);
    for (Request* request : submitting_here_) Submit(request);
    submitting_here_.clear();
    return;
  }
  submit_queue_.insert(submit_queue_.end(), unsubmitted_.begin(), unsubmitted_.end());
  unsubmitted_.clear();
  if (!submitter_.joinable()) submitter_ = std::thread([this] { SubmitterLoop(); });
  lock.unlock();
  submit_wanted_.notify_one();
}

void InferenceEngine::SubmitterLoop() {
  std::vector<Request*> batch;
  std::unique_lock<std::mutex> lock(submit_mutex_);
  for (;;) {
    submit_wanted_.wait(lock, [this] { return !submit_queue_.empty() || submitter_exit_; });
    if (submit_queue_.empty()) return;  // exiting with nothing left
    batch.swap(submit_queue_);
    submitting_ = true;
    lock.unlock();
    for (Request* request : batch) Submit(request);
    batch.clear();
    lock.lock();
    submitting_ = false;
    if (submit_queue_.empty()) submit_idle_.notify_all();
  }
}

// Any thread: the Triton request made from the context and handed over.
// Whatever Triton refuses comes back as the request's one, final response.
void InferenceEngine::Submit(Request* request) {
  TRITONSERVER_InferenceRequest* triton = nullptr;
  auto failure = TakeError(
      api_, api_.InferenceRequestNew(&triton, state_->server,
                                     request->model->c_str(), request->version));
  auto step = [&](TRITONSERVER_Error* err) {
    if (!failure) failure = TakeError(api_, err);
    else if (err != nullptr) TakeError(api_, err);
  };
  if (!failure) {
    for (const Request::Input& input : request->inputs_spec) {
      step(api_.InferenceRequestAddInput(triton, input.name->c_str(), input.datatype,
                                         request->dims.data() + input.first_dim,
                                         input.rank));
      if (failure) break;
      step(api_.InferenceRequestAppendInputData(triton, input.name->c_str(), input.data,
                                                input.size, TRITONSERVER_MEMORY_CPU, 0));
      if (failure) break;
    }
    for (const std::string& name : request->outputs_wanted) {
      if (failure) break;
      step(api_.InferenceRequestAddRequestedOutput(triton, name.c_str()));
    }
    if (!failure && request->has_id)
      step(api_.InferenceRequestSetId(triton, request->id.c_str()));
    if (!failure && request->has_priority)
      step(api_.InferenceRequestSetPriority(triton, request->priority));
    if (!failure && request->has_timeout)
      step(api_.InferenceRequestSetTimeoutMicroseconds(triton, request->timeout_us));
    if (!failure && request->has_flags)
      step(api_.InferenceRequestSetFlags(triton, request->flags));
    if (!failure && request->correlation == Request::Correlation::kText)
      step(api_.InferenceRequestSetCorrelationIdString(
          triton, request->correlation_text.c_str()));
    if (!failure && request->correlation == Request::Correlation::kNumber)
      step(api_.InferenceRequestSetCorrelationId(triton, request->correlation_id));
    for (const Request::Parameter& p : request->parameters) {
      if (failure) break;
      switch (p.type) {
        case TRITONSERVER_PARAMETER_STRING:
          step(api_.InferenceRequestSetStringParameter(triton, p.key.c_str(), p.text.c_str()));
          break;
        case TRITONSERVER_PARAMETER_BOOL:
          step(api_.InferenceRequestSetBoolParameter(triton, p.key.c_str(), p.flag));
          break;
        case TRITONSERVER_PARAMETER_INT:
          step(api_.InferenceRequestSetIntParameter(triton, p.key.c_str(), p.integer));
          break;
        default:
          step(api_.InferenceRequestSetDoubleParameter(triton, p.key.c_str(), p.real));
          break;
      }
    }
    if (!failure)
      step(api_.InferenceRequestSetReleaseCallback(triton, &InferenceEngine::OnRelease,
                                                   request));
    if (!failure)
      step(api_.InferenceRequestSetResponseCallback(
          triton, allocator_, request, &InferenceEngine::OnResponse, request));
  }
  if (!failure) {
    std::lock_guard<std::mutex> lock(inside_mutex_);
    if (request->cancel_requested || request->cancel_generation != cancel_generation_) {
      failure = Failure{TRITONSERVER_ERROR_CANCELLED,
                        "the request was cancelled before it reached Triton"};
    } else {
      request->triton = triton;
      LinkInside(request);
    }
  }
  if (!failure) {
    failure = TakeError(api_, api_.ServerInferAsync(state_->server, triton,
                                                    request->trace));
    if (!failure) return;
  }
  // Refused: no callback will ever come, the request is still ours, and so
  // is its trace (traced requests are submitted on the JS thread).
  if (request->trace != nullptr) TraceSubmitFailed(request->trace);
  {
    std::lock_guard<std::mutex> lock(inside_mutex_);
    UnlinkInside(request);
    request->triton_done = true;
  }
  if (triton != nullptr) TakeError(api_, api_.InferenceRequestDelete(triton));
  Completion& refused = Scratch();
  refused.request = request;
  refused.has_response = true;
  refused.final = true;
  refused.done = true;
  refused.error = std::move(failure);
  Push(refused);
  NotEntered();
}

// What Triton reads from until it releases the request: the one input's
// data, or an array of all of them (one reference either way).
Napi::Value InferenceEngine::InputsToKeep(Napi::Env env) {
  if (input_views_.size() == 1) return Napi::Value(env, input_views_[0]);
  Napi::Array all = Napi::Array::New(env, input_views_.size());
  for (size_t i = 0; i < input_views_.size(); ++i)
    all.Set(static_cast<uint32_t>(i), input_views_[i]);
  return all;
}

void InferenceEngine::Cancel(Napi::Env env, uint64_t token) {
  Request* request = requests_.Find(token);
  if (request == nullptr || request->final_seen) return;
  if (api_.InferenceRequestCancel == nullptr)
    throw ToJsError(env, Unsupported(api_, "InferenceRequestCancel"));
  std::optional<Failure> failure;
  {
    // Triton's thread may be deleting it: only while it is not.
    std::lock_guard<std::mutex> lock(inside_mutex_);
    if (request->triton_done) return;
    if (request->triton == nullptr) {
      // Not handed to Triton yet: Submit() refuses it.
      request->cancel_requested = true;
      return;
    }
    // Cancelling a request that already finished is harmless in Triton.
    failure = TakeError(api_, api_.InferenceRequestCancel(request->triton));
  }
  if (failure) throw ToJsError(env, *failure);
}

void InferenceEngine::CancelAll() {
  // Cancelling a request that already finished is harmless in Triton; one
  // in this set is not deleted yet (DeleteInTriton takes it out first).
  std::lock_guard<std::mutex> lock(inside_mutex_);
  // Those not handed to Triton yet are refused by Submit().
  ++cancel_generation_;
  if (api_.InferenceRequestCancel == nullptr) return;
  for (Request* request = inside_head_; request != nullptr; request = request->inside_next)
    TakeError(api_, api_.InferenceRequestCancel(request->triton));
}

void InferenceEngine::LinkInside(Request* request) {
  request->inside = true;
  request->inside_prev = nullptr;
  request->inside_next = inside_head_;
  if (inside_head_ != nullptr) inside_head_->inside_prev = request;
  inside_head_ = request;
}

void InferenceEngine::UnlinkInside(Request* request) {
  if (!request->inside) return;
  request->inside = false;
  if (request->inside_prev != nullptr)
    request->inside_prev->inside_next = request->inside_next;
  else
    inside_head_ = request->inside_next;
  if (request->inside_next != nullptr) request->inside_next->inside_prev = request->inside_prev;
}

void InferenceEngine::Close() {
  closing_ = true;
  if (requests_.empty() && !tsfn_released_) {
    tsfn_released_ = true;
    tsfn_.Release();
  }
}

void InferenceEngine::Abandon() {
  // Not flushed yet, and no JS tick will come to flush them.
  for (Request* request : unsubmitted_) {
    {
      std::lock_guard<std::mutex> lock(inside_mutex_);
      request->triton_done = true;
    }
    NotEntered();
  }
  unsubmitted_.clear();
  std::vector<Completion> left;
  {
    std::unique_lock<std::mutex> lock(queue_mutex_);
    abandoned_ = true;
    left.swap(queue_);
    left.resize(queued_);
    queued_ = 0;
    // No signal may be under way when the thread-safe function goes.
    signalled_.wait(lock, [this] { return signalling_ == 0; });
  }
  for (Completion& completion : left) CompleteNatively(completion);
  if (!tsfn_released_) {
    tsfn_released_ = true;
    tsfn_.Abort();
  }
}

void InferenceEngine::ReleaseInputsOfFinished() {
  for (Request* request : requests_.All()) {
    bool done;
    {
      std::lock_guard<std::mutex> lock(inside_mutex_);
      done = !request->counted_inside || request->triton_done;
    }
    if (!done) continue;
    if (!request->inputs.IsEmpty()) {
      request->inputs.Reset();
      Live().input_references--;
    }
    request->shared_memory.clear();
    free_requests_.push_back(request);
    Live().requests--;
    requests_.Remove(request);
  }
}

void InferenceEngine::RequestTable::Add(Request* request) {
  Request*& slot = slots[request->token % kSlots];
  if (slot == nullptr)
    slot = request;
  else
    overflow.emplace(request->token, request);
  ++count;
}

InferenceEngine::Request* InferenceEngine::RequestTable::Find(uint64_t token) const {
  Request* held = slots[token % kSlots];
  if (held != nullptr && held->token == token) return held;
  if (overflow.empty()) return nullptr;
  auto found = overflow.find(token);
  return found == overflow.end() ? nullptr : found->second;
}

bool InferenceEngine::RequestTable::Remove(Request* request) {
  Request*& slot = slots[request->token % kSlots];
  if (slot == request) {
    slot = nullptr;
  } else if (overflow.empty() || overflow.erase(request->token) == 0) {
    return false;
  }
  --count;
  return true;
}

std::vector<InferenceEngine::Request*> InferenceEngine::RequestTable::All() const {
  std::vector<Request*> all;
  all.reserve(count);
  for (Request* request : slots)
    if (request != nullptr) all.push_back(request);
  for (const auto& [token, request] : overflow) all.push_back(request);
  return all;
}

}  // namespace tsn
