#include "inference.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "trace.h"

namespace tsn {

LiveCounters& Live() {
  static LiveCounters counters;
  return counters;
}

namespace {

// Output memory is one malloc block: this header, then the tensor bytes.
// Once JS adopts the bytes as an external ArrayBuffer, the allocator's
// release function leaves the block alone and the buffer's finalizer frees
// it, so the Triton response can be deleted right away.
struct alignas(64) BufferHeader {
  bool adopted;
};
constexpr size_t kHeaderSize = sizeof(BufferHeader);
// Outputs up to this size are copied into JS memory (see OutputBuffer).
constexpr size_t kCopyUpToBytes = 4096;

// buffer_userp of an output Triton wrote into memory the caller gave.
char kCallerMemory;

void FreeBlock(BufferHeader* header) {
  std::free(header);
  Live().output_buffers--;
}

Napi::Error InvalidArg(Napi::Env env, const std::string& message) {
  return ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG, message);
}

}  // namespace

struct InferenceEngine::Request {
  InferenceEngine* engine = nullptr;
  uint64_t token = 0;
  TRITONSERVER_InferenceRequest* triton = nullptr;
  Napi::Reference<Napi::Value> inputs;  // keeps input memory alive
  bool submitted = false;               // ServerInferAsync took it
  bool final_seen = false;              // JS saw the FINAL response
  bool finished_natively = false;       // a Triton thread finished it
  std::atomic<int> open_events{2};      // release + FINAL still to come
  // Outputs to write into the caller's memory (infer's outputs record);
  // read by Allocate on Triton's threads, set before ServerInferAsync.
  struct CallerBuffer {
    std::string name;
    void* data;
    size_t size;
    bool fallback;  // allocate as usual when it is too small
  };
  std::vector<CallerBuffer> caller_buffers;
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
    return request->engine->api_.ErrorNew(
        TRITONSERVER_ERROR_INVALID_ARG,
        (std::string("output '") + tensor_name + "' is " +
         std::to_string(byte_size) + " bytes; the buffer given for it holds " +
         std::to_string(given.size))
            .c_str());
  }
  auto* header = static_cast<BufferHeader*>(std::malloc(kHeaderSize + byte_size));
  if (header == nullptr) {
    const TritonApi& api = static_cast<Request*>(userp)->engine->api_;
    return api.ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                        (std::string("out of memory allocating output '") +
                         tensor_name + "'")
                            .c_str());
  }
  header->adopted = false;
  Live().output_buffers++;
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

void InferenceEngine::OnResponse(TRITONSERVER_InferenceResponse* response,
                                 const uint32_t flags, void* userp) {
  auto* request = static_cast<Request*>(userp);
  if (response != nullptr) Live().responses++;
  request->engine->Push({request, response, flags, false});
}

void InferenceEngine::OnRelease(TRITONSERVER_InferenceRequest*,
                                const uint32_t flags, void* userp) {
  if ((flags & TRITONSERVER_REQUEST_RELEASE_ALL) == 0) return;
  auto* request = static_cast<Request*>(userp);
  request->engine->Push({request, nullptr, flags, true});
}

void InferenceEngine::Push(const Completion& completion) {
  std::vector<Completion> left;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    if (!abandoned_) {
      queue_.push_back(completion);
      if (drain_scheduled_) return;
      // Signalled under the lock so Abandon() cannot finalize the
      // thread-safe function in between; the call never blocks (no limit).
      if (tsfn_.NonBlockingCall(nullptr) == napi_ok) {
        drain_scheduled_ = true;
        return;
      }
      // The thread-safe function is closing: no drain will ever come.
      abandoned_ = true;
      left.swap(queue_);
    } else {
      left.push_back(completion);
    }
  }
  for (const Completion& c : left) CompleteNatively(c);
}

bool InferenceEngine::LastEvent(Request* request) {
  return request->open_events.fetch_sub(1) == 1;
}

void InferenceEngine::CompleteNatively(const Completion& completion) {
  Request* request = completion.request;
  if (completion.response != nullptr) {
    TakeError(api_, api_.InferenceResponseDelete(completion.response));
    Live().responses--;
  }
  bool event = completion.is_release ||
               (completion.flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0;
  if (!event || !LastEvent(request)) return;
  Unlist(request);
  TakeError(api_, api_.InferenceRequestDelete(request->triton));
  request->triton = nullptr;
  request->finished_natively = true;
  Live().requests--;
  // Last: whoever waits for this engine to be idle then sees it finished.
  // The input reference is let go on the JS thread (ReleaseInputsOfFinished).
  Left();
}

void InferenceEngine::Entered(Request* request) {
  state_->RequestEntered();
  std::lock_guard<std::mutex> lock(inside_mutex_);
  inside_.insert(request->triton);
  ++inside_count_;
  request->submitted = true;
}

// Before the request is deleted, so CancelAll never sees a deleted one.
void InferenceEngine::Unlist(Request* request) {
  std::lock_guard<std::mutex> lock(inside_mutex_);
  inside_.erase(request->triton);
}

void InferenceEngine::Left() {
  {
    std::lock_guard<std::mutex> lock(inside_mutex_);
    --inside_count_;
  }
  inside_changed_.notify_all();
  state_->RequestLeft();
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

void InferenceEngine::DrainOnJsThread(Napi::Env env, Napi::Function callback) {
  Napi::HandleScope scope(env);
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    draining_.swap(queue_);
    drain_scheduled_ = false;
  }
  std::optional<Napi::Error> thrown;
  for (const Completion& completion : draining_) {
    Request* request = completion.request;
    bool event = completion.is_release;
    if (!completion.is_release) {
      // JS may be unable to run (a worker being terminated): then nothing
      // is delivered, but every resource is still given back.
      if (!thrown) {
        try {
          DeliverResponse(env, callback, request, completion.response,
                          completion.flags);
        } catch (const Napi::Error& error) {
          thrown = error;
        }
      }
      if (completion.response != nullptr) {
        TakeError(api_, api_.InferenceResponseDelete(completion.response));
        Live().responses--;
      }
      if (completion.flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) {
        request->final_seen = true;
        event = true;
      }
    }
    if (event && LastEvent(request)) Finish(env, request);
  }
  draining_.clear();
  // Never let a C++ exception out of the thread-safe function's callback;
  // a JS error becomes an uncaught exception, as for any callback (and is
  // swallowed when the environment is ending: NODE_API_SWALLOW_...).
  if (thrown) thrown->ThrowAsJavaScriptException();
}

// Calls callback(token, final, error, version, parameters, ...outputs) with
// each output flat as name, datatype, rank, dims..., ArrayBuffer. Arguments
// rather than arrays: setting array elements from C++ costs more than
// everything else in a response. The model name and request id are the
// caller's own and are not rebuilt as JS strings.
void InferenceEngine::DeliverResponse(Napi::Env env, Napi::Function callback,
                                      Request* request,
                                      TRITONSERVER_InferenceResponse* response,
                                      uint32_t flags) {
  std::vector<napi_value>& args = args_scratch_;
  args.clear();
  args.push_back(Napi::Number::New(env, request->token));
  args.push_back(Napi::Boolean::New(
      env, (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0));
  auto fail = [&](const Failure& failure) {
    args.resize(2);
    args.push_back(ToJsError(env, failure).Value());
    callback.Call(args);
  };
  if (response == nullptr) {  // a FINAL flag without a response
    callback.Call(args);
    return;
  }
  if (auto failure = TakeError(api_, api_.InferenceResponseError(response)))
    return fail(*failure);
  const char* model_name = nullptr;
  int64_t model_version = -1;
  if (auto failure = TakeError(api_, api_.InferenceResponseModel(
                                         response, &model_name, &model_version)))
    return fail(*failure);
  args.push_back(env.Undefined());
  args.push_back(Napi::Number::New(env, static_cast<double>(model_version)));
  args.push_back(ResponseParameters(env, response));

  uint32_t output_count = 0;
  if (auto failure = TakeError(
          api_, api_.InferenceResponseOutputCount(response, &output_count)))
    return fail(*failure);
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
    if (auto failure = TakeError(
            api_, api_.InferenceResponseOutput(
                      response, i, &name, &datatype, &shape, &dim_count, &base,
                      &byte_size, &memory_type, &memory_type_id,
                      &buffer_userp)))
      return fail(*failure);
    if (memory_type == TRITONSERVER_MEMORY_GPU)
      return fail(Failure{TRITONSERVER_ERROR_UNSUPPORTED,
                          std::string("output '") + name +
                              "' is in GPU memory"});
    args.push_back(Napi::String::New(env, name));
    args.push_back(Napi::Number::New(env, datatype));
    args.push_back(Napi::Number::New(env, static_cast<double>(dim_count)));
    for (uint64_t d = 0; d < dim_count; ++d)
      args.push_back(Napi::Number::New(env, static_cast<double>(shape[d])));
    if (byte_size == 0 || base == nullptr) {
      args.push_back(Napi::ArrayBuffer::New(env, 0));
    } else if (buffer_userp == &kCallerMemory) {
      // Written into the caller's buffer: JS knows which; only the size.
      args.push_back(Napi::Number::New(env, static_cast<double>(byte_size)));
    } else if (buffer_userp == nullptr) {
      // Host memory our allocator did not hand out: copy it.
      Napi::ArrayBuffer copy = Napi::ArrayBuffer::New(env, byte_size);
      std::memcpy(copy.Data(), base, byte_size);
      args.push_back(copy);
    } else {
      args.push_back(OutputBuffer(env, base, byte_size));
    }
  }
  callback.Call(args);
}

// The response's parameters as an object, or undefined when it has none.
Napi::Value InferenceEngine::ResponseParameters(
    Napi::Env env, TRITONSERVER_InferenceResponse* response) {
  uint32_t parameter_count = 0;
  TakeError(api_, api_.InferenceResponseParameterCount(response, &parameter_count));
  if (parameter_count == 0) return env.Undefined();
  Napi::Object parameters = Napi::Object::New(env);
  for (uint32_t i = 0; i < parameter_count; ++i) {
    const char* name = nullptr;
    TRITONSERVER_ParameterType type = TRITONSERVER_PARAMETER_STRING;
    const void* value = nullptr;
    if (TakeError(api_, api_.InferenceResponseParameter(response, i, &name,
                                                        &type, &value)) ||
        name == nullptr || value == nullptr)
      continue;
    switch (type) {
      case TRITONSERVER_PARAMETER_STRING:
        parameters.Set(name, static_cast<const char*>(value));
        break;
      case TRITONSERVER_PARAMETER_INT:
        parameters.Set(name, Napi::Number::New(env, static_cast<double>(
                                 *static_cast<const int64_t*>(value))));
        break;
      case TRITONSERVER_PARAMETER_BOOL:
        parameters.Set(name, *static_cast<const bool*>(value));
        break;
      case TRITONSERVER_PARAMETER_DOUBLE:
        parameters.Set(name, *static_cast<const double*>(value));
        break;
      default:
        break;
    }
  }
  return parameters;
}

// The tensor bytes as an ArrayBuffer: adopted without a copy where Node-API
// allows external buffers, copied where it does not. Small outputs are
// copied too: an external buffer's finalizer and GC bookkeeping cost more
// than copying a few KiB.
Napi::Value InferenceEngine::OutputBuffer(Napi::Env env, const void* base,
                                          size_t size) {
  auto* header = reinterpret_cast<BufferHeader*>(
      static_cast<char*>(const_cast<void*>(base)) - kHeaderSize);
  if (!copy_outputs_ && size > kCopyUpToBytes) {
    napi_value buffer = nullptr;
    napi_status status = napi_create_external_arraybuffer(
        env, const_cast<void*>(base), size,
        [](napi_env, void*, void* hint) {
          FreeBlock(static_cast<BufferHeader*>(hint));
        },
        header, &buffer);
    if (status == napi_ok) {
      header->adopted = true;
      return Napi::Value(env, buffer);
    }
    // e.g. Electron's V8 sandbox: copy from now on.
    if (status == napi_no_external_buffers_allowed) copy_outputs_ = true;
  }
  Napi::ArrayBuffer copy = Napi::ArrayBuffer::New(env, size);
  std::memcpy(copy.Data(), base, size);
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
  request->submitted = false;
  request->final_seen = false;
  request->finished_natively = false;
  request->open_events = 2;
  request->caller_buffers.clear();
  Live().requests++;
  return request;
}

void InferenceEngine::Finish(Napi::Env env, Request* request) {
  if (request->submitted) Unlist(request);
  if (request->triton != nullptr)
    TakeError(api_, api_.InferenceRequestDelete(request->triton));
  request->triton = nullptr;
  if (!request->inputs.IsEmpty()) {
    request->inputs.Reset();
    Live().input_references--;
  }
  bool was_in_flight = requests_.erase(request->token) > 0;
  free_requests_.push_back(request);
  Live().requests--;
  if (request->submitted) Left();
  if (was_in_flight && requests_.empty() && !tsfn_released_) {
    tsfn_.Unref(env);
    if (closing_) {
      tsfn_released_ = true;
      tsfn_.Release();
    }
  }
}

namespace {

// infer()'s arguments before the inputs.
constexpr size_t kFirstInputArg = 10;

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

}  // namespace

// Adds inputs, outputs and options to request->triton; throws on failure.
// infer(model, version, outputs, id, priority, timeoutUs, flags,
//       correlationId, parameters, outputBuffers, ...inputs): options positional
// (undefined = not set), then each input flat as name, datatype, rank,
// dims..., data — arguments rather than objects or arrays, because reading
// properties and elements costs more than the rest of a request.
void InferenceEngine::BuildRequest(const Napi::CallbackInfo& info,
                                   Request* request) {
  Napi::Env env = info.Env();
  TRITONSERVER_InferenceRequest* triton = request->triton;
  auto check = [&](TRITONSERVER_Error* err) {
    if (auto failure = TakeError(api_, err)) throw ToJsError(env, *failure);
  };

  const size_t argc = info.Length();
  input_views_.clear();
  for (size_t i = kFirstInputArg; i < argc;) {
    if (i + 3 > argc || !info[i].IsString() || !info[i + 1].IsNumber() ||
        !info[i + 2].IsNumber())
      throw InvalidArg(env, "each input needs a name, a datatype and a rank");
    std::string name = info[i].As<Napi::String>();
    auto datatype = static_cast<TRITONSERVER_DataType>(
        info[i + 1].As<Napi::Number>().Int32Value());
    const int64_t rank = info[i + 2].As<Napi::Number>().Int64Value();
    i += 3;
    if (rank < 0 || i + static_cast<size_t>(rank) + 1 > argc)
      throw InvalidArg(env, "input '" + name + "': bad rank or missing data");
    shape_scratch_.clear();
    for (int64_t d = 0; d < rank; ++d, ++i)
      shape_scratch_.push_back(info[i].As<Napi::Number>().Int64Value());
    if (!info[i].IsTypedArray())
      throw InvalidArg(env, "input '" + name + "': data must be a TypedArray");
    Napi::TypedArray data = info[i++].As<Napi::TypedArray>();
    input_views_.push_back(data);
    // The view's own data pointer: also right for a SharedArrayBuffer,
    // which Napi::TypedArray::ArrayBuffer() refuses.
    void* bytes = nullptr;
    size_t length = 0;
    if (napi_get_typedarray_info(env, data, nullptr, &length, &bytes, nullptr,
                                 nullptr) != napi_ok)
      throw InvalidArg(env, "input '" + name + "': unreadable TypedArray");
    check(api_.InferenceRequestAddInput(triton, name.c_str(), datatype,
                                        shape_scratch_.data(),
                                        shape_scratch_.size()));
    check(api_.InferenceRequestAppendInputData(triton, name.c_str(), bytes,
                                               data.ByteLength(),
                                               TRITONSERVER_MEMORY_CPU, 0));
  }
  if (info[2].IsArray()) {
    Napi::Array outputs = info[2].As<Napi::Array>();
    for (uint32_t i = 0, n = outputs.Length(); i < n; ++i) {
      std::string name = outputs.Get(i).ToString();
      check(api_.InferenceRequestAddRequestedOutput(triton, name.c_str()));
    }
  }
  // [name, TypedArray, fallback] triples: outputs written into the caller's
  // memory, which is kept alive with the inputs until the release.
  if (info[9].IsArray()) {
    Napi::Array buffers = info[9].As<Napi::Array>();
    for (uint32_t i = 0, n = buffers.Length(); i < n; ++i) {
      Napi::Value entry = buffers.Get(i);
      if (!entry.IsArray() || entry.As<Napi::Array>().Length() != 3)
        throw InvalidArg(env, "output buffers must be [name, TypedArray, fallback]");
      Napi::Array triple = entry.As<Napi::Array>();
      Napi::Value name = triple.Get(0u), view = triple.Get(1u);
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
                                         triple.Get(2u).ToBoolean().Value()});
    }
  }
  Napi::Value id = info[3];
  if (id.IsString())
    check(api_.InferenceRequestSetId(triton, id.As<Napi::String>().Utf8Value().c_str()));
  Napi::Value priority = info[4];
  if (priority.IsNumber())
    check(api_.InferenceRequestSetPriority(
        triton, priority.As<Napi::Number>().Uint32Value()));
  Napi::Value timeout = info[5];
  if (timeout.IsNumber())
    check(api_.InferenceRequestSetTimeoutMicroseconds(
        triton, static_cast<uint64_t>(timeout.As<Napi::Number>().Int64Value())));
  Napi::Value flags = info[6];
  if (flags.IsNumber())
    check(api_.InferenceRequestSetFlags(triton,
                                        flags.As<Napi::Number>().Uint32Value()));
  Napi::Value correlation = info[7];
  if (correlation.IsString()) {
    check(api_.InferenceRequestSetCorrelationIdString(
        triton, correlation.As<Napi::String>().Utf8Value().c_str()));
  } else if (correlation.IsNumber() || correlation.IsBigInt()) {
    check(api_.InferenceRequestSetCorrelationId(
        triton, static_cast<uint64_t>(ToInt64(correlation, "sequence id"))));
  }
  Napi::Value parameters = info[8];
  if (parameters.IsArray()) {
    Napi::Array list = parameters.As<Napi::Array>();
    for (uint32_t i = 0, n = list.Length(); i < n; ++i) {
      Napi::Array pair = list.Get(i).As<Napi::Array>();
      std::string key = pair.Get(0u).ToString();
      Napi::Value value = pair.Get(1u);
      SetParameter(env, triton, key, value);
    }
  }
}

// One request parameter, typed by its JS value.
void InferenceEngine::SetParameter(Napi::Env env,
                                   TRITONSERVER_InferenceRequest* triton,
                                   const std::string& key, Napi::Value value) {
  auto check = [&](TRITONSERVER_Error* err) {
    if (auto failure = TakeError(api_, err)) throw ToJsError(env, *failure);
  };
  auto require = [&](auto function, const char* name) {
    if (function == nullptr) throw ToJsError(env, Unsupported(api_, name));
  };
  if (value.IsString()) {
    require(api_.InferenceRequestSetStringParameter, "InferenceRequestSetStringParameter");
    check(api_.InferenceRequestSetStringParameter(
        triton, key.c_str(), value.As<Napi::String>().Utf8Value().c_str()));
  } else if (value.IsBoolean()) {
    require(api_.InferenceRequestSetBoolParameter, "InferenceRequestSetBoolParameter");
    check(api_.InferenceRequestSetBoolParameter(triton, key.c_str(),
                                                value.ToBoolean()));
  } else if (value.IsBigInt() ||
             (value.IsNumber() && std::trunc(value.As<Napi::Number>().DoubleValue()) ==
                                      value.As<Napi::Number>().DoubleValue())) {
    require(api_.InferenceRequestSetIntParameter, "InferenceRequestSetIntParameter");
    check(api_.InferenceRequestSetIntParameter(triton, key.c_str(),
                                               ToInt64(value, key.c_str())));
  } else if (value.IsNumber()) {
    require(api_.InferenceRequestSetDoubleParameter, "InferenceRequestSetDoubleParameter");
    check(api_.InferenceRequestSetDoubleParameter(
        triton, key.c_str(), value.As<Napi::Number>().DoubleValue()));
  } else {
    throw InvalidArg(env, "parameter '" + key +
                              "' must be a string, number, bigint or boolean");
  }
}

Napi::Value InferenceEngine::Infer(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < kFirstInputArg || !info[0].IsString() ||
      !info[1].IsNumber())
    throw InvalidArg(env,
                     "infer(model, version, outputs, id, priority, timeoutUs, "
                     "flags, correlationId, parameters, outputBuffers, ...inputs)");
  if (allocator_ == nullptr)
    throw ToJsError(env, TRITONSERVER_ERROR_INTERNAL,
                    "the response allocator could not be created");
  std::string model = info[0].As<Napi::String>();
  int64_t version = info[1].As<Napi::Number>().Int64Value();

  Request* request = NewRequest();
  // Frees the request and hands back the error to throw.
  auto fail = [&](const Napi::Error& error) {
    Finish(env, request);
    return error;
  };
  if (auto failure = TakeError(
          api_, api_.InferenceRequestNew(&request->triton, state_->server,
                                         model.c_str(), version)))
    throw fail(ToJsError(env, *failure));
  try {
    BuildRequest(info, request);
  } catch (const Napi::Error& error) {
    throw fail(error);
  }
  if (auto failure = TakeError(
          api_, api_.InferenceRequestSetReleaseCallback(
                    request->triton, &InferenceEngine::OnRelease, request)))
    throw fail(ToJsError(env, *failure));
  if (auto failure = TakeError(
          api_, api_.InferenceRequestSetResponseCallback(
                    request->triton, allocator_, request,
                    &InferenceEngine::OnResponse, request)))
    throw fail(ToJsError(env, *failure));

  request->inputs = Napi::Persistent(InputsToKeep(env));
  Live().input_references++;
  if (requests_.empty()) tsfn_.Ref(env);
  requests_.emplace(request->token, request);
  // Counted before Triton can call back, so it never drops below zero.
  Entered(request);
  // Tracing hook (trace.cc): null unless JS armed a trace for this request.
  TRITONSERVER_InferenceTrace* trace = TakeArmedTrace();
  // On failure no callback will ever come: the request is still ours.
  if (auto failure = TakeError(api_, api_.ServerInferAsync(
                                         state_->server, request->triton,
                                         trace))) {
    TraceSubmitFailed(trace);
    throw fail(ToJsError(env, *failure));
  }
  return Napi::Number::New(env, static_cast<double>(request->token));
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
  auto found = requests_.find(token);
  if (found == requests_.end() || found->second->final_seen) return;
  if (api_.InferenceRequestCancel == nullptr)
    throw ToJsError(env, Unsupported(api_, "InferenceRequestCancel"));
  // Cancelling a request that already finished is harmless in Triton.
  if (auto failure = TakeError(
          api_, api_.InferenceRequestCancel(found->second->triton)))
    throw ToJsError(env, *failure);
}

void InferenceEngine::CancelAll() {
  if (api_.InferenceRequestCancel == nullptr) return;
  // Cancelling a request that already finished is harmless in Triton; one
  // in this set is not deleted yet (Left() runs first, under the lock).
  std::lock_guard<std::mutex> lock(inside_mutex_);
  for (TRITONSERVER_InferenceRequest* request : inside_)
    TakeError(api_, api_.InferenceRequestCancel(request));
}

void InferenceEngine::Close() {
  closing_ = true;
  if (requests_.empty() && !tsfn_released_) {
    tsfn_released_ = true;
    tsfn_.Release();
  }
}

void InferenceEngine::Abandon() {
  std::vector<Completion> left;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    abandoned_ = true;
    left.swap(queue_);
  }
  for (const Completion& completion : left) CompleteNatively(completion);
  if (!tsfn_released_) {
    tsfn_released_ = true;
    tsfn_.Abort();
  }
}

void InferenceEngine::ReleaseInputsOfFinished() {
  for (auto it = requests_.begin(); it != requests_.end();) {
    Request* request = it->second;
    if (!request->finished_natively) {
      ++it;
      continue;
    }
    if (!request->inputs.IsEmpty()) {
      request->inputs.Reset();
      Live().input_references--;
    }
    free_requests_.push_back(request);
    it = requests_.erase(it);
  }
}

}  // namespace tsn
