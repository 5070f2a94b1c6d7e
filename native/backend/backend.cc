// Bound models: the backend entry points Triton calls (TRITONBACKEND_*), the
// batches its instance threads hand to JS, and exports.boundModels.
//
// One execution: Triton's instance thread reads the requests (inputs stay in
// Triton's memory), queues the batch to the JS thread of the environment
// that bound the model, and waits. JS answers each request (send) and ends
// the batch (finish); the instance thread then answers what JS left
// unanswered, reports statistics and releases the requests. Only the JS
// thread touches V8; only the instance thread releases requests.
#include "backend.h"

#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "../core/backend_api.h"
#include "../core/errors.h"
#include "../core/loader.h"

namespace tsn {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          Clock::now().time_since_epoch())
          .count());
}

// How often a waiting instance looks for requests cancelled meanwhile.
constexpr auto kCancelPoll = std::chrono::milliseconds(10);

struct Channel;

// What bind() registered under a model name (process-wide: Triton names
// models process-wide for a backend library).
struct BoundModel {
  std::string name;
  bool decoupled = false;
  bool batching = false;  // max_batch_size > 0: dim 0 is the batch
  std::shared_ptr<Channel> channel;
};

// A message to a channel's JS thread: a batch to run, or (index >= 0) that
// a request of a running batch was cancelled.
struct Message {
  uint64_t batch_id;
  int32_t cancelled_index;
};

void CallJs(Napi::Env env, Napi::Function dispatcher, Channel* channel,
            Message* message);
using ChannelFn = Napi::TypedThreadSafeFunction<Channel, Message, CallJs>;

// The way from Triton's threads to one environment's JS thread.
struct Channel {
  napi_env env = nullptr;
  bool copy_inputs = false;
  ChannelFn tsfn;
  // Held while a message is queued: once `open` is false (the environment
  // ends) nobody touches tsfn again, so it may be freed with the environment.
  std::mutex mutex;
  bool open = true;
  // Models bound on this thread (JS thread only): while there are any, the
  // thread is kept alive, as a listening server keeps it.
  size_t bound = 0;

  bool Post(Message* message) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!open || tsfn.NonBlockingCall(message) != napi_ok) {
      delete message;
      return false;
    }
    return true;
  }
};

struct Tensor {
  std::string name;
  TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t size = 0;
};

struct Parameter {
  std::string key;
  TRITONSERVER_ParameterType type = TRITONSERVER_PARAMETER_STRING;
  std::string text;
  int64_t integer = 0;
  bool flag = false;
  double number = 0;
};

struct Item {
  TRITONBACKEND_Request* request = nullptr;
  TRITONBACKEND_ResponseFactory* factory = nullptr;  // decoupled models
  std::string id;
  uint64_t correlation_id = 0;
  uint64_t batch_size = 1;
  std::vector<Tensor> inputs;
  std::vector<std::vector<char>> copies;  // inputs in several buffers
  std::vector<Parameter> parameters;
  std::vector<std::string> outputs;
  // Set by the JS thread (send), read by the instance thread.
  std::atomic<bool> final_sent{false};
  std::atomic<bool> failed{false};
  bool cancel_told = false;  // instance thread only
};

std::atomic<int64_t> g_live_batches{0};

struct Batch {
  Batch(size_t count) : items(count) { g_live_batches++; }
  ~Batch() { g_live_batches--; }
  uint64_t id = 0;
  const TritonApi* api = nullptr;
  TRITONBACKEND_ModelInstance* instance = nullptr;
  std::shared_ptr<BoundModel> model;
  std::vector<Item> items;
  uint64_t exec_start_ns = 0, compute_start_ns = 0, compute_end_ns = 0;
  // JS thread: references to the ArrayBuffers over Triton's input memory,
  // detached when the batch ends.
  std::vector<napi_ref> views;

  // Answers JS gave, for the instance thread to turn into Triton responses
  // and send, in order: Triton's response path (its allocator, the
  // caller's completion) stays off the JS thread. Without a response only
  // the flags are sent (the end of a decoupled stream).
  struct StagedOutput {
    std::string name;
    TRITONSERVER_DataType datatype;
    std::vector<int64_t> shape;
    std::vector<char> bytes;
  };
  struct Outgoing {
    size_t index;
    bool response;
    std::vector<StagedOutput> outputs;
    uint32_t flags;
    std::optional<Failure> failure;
  };

  std::mutex mutex;
  std::condition_variable ended_cv;  // ended, or something to send
  std::vector<Outgoing> outgoing;
  bool ended = false;
  std::optional<Failure> failure;  // why the batch ended without answers
};

std::mutex g_mutex;  // guards the registry and the batch table
std::map<std::string, std::shared_ptr<BoundModel>> g_models;
std::unordered_map<uint64_t, std::shared_ptr<Batch>> g_batches;
uint64_t g_next_batch = 1;
// One channel per environment that set a dispatcher.
std::map<napi_env, std::shared_ptr<Channel>> g_channels;

std::shared_ptr<Batch> TakeBatch(uint64_t id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto found = g_batches.find(id);
  if (found == g_batches.end()) return nullptr;
  std::shared_ptr<Batch> batch = std::move(found->second);
  g_batches.erase(found);
  return batch;
}

std::shared_ptr<Batch> FindBatch(uint64_t id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto found = g_batches.find(id);
  return found == g_batches.end() ? nullptr : found->second;
}

// JS thread: the handler is done with the batch (or can no longer be).
void EndBatch(napi_env env, Batch& batch, std::optional<Failure> failure) {
  for (napi_ref ref : batch.views) {
    napi_value value;
    if (env != nullptr && napi_get_reference_value(env, ref, &value) == napi_ok &&
        value != nullptr) {
      napi_detach_arraybuffer(env, value);
    }
    if (env != nullptr) napi_delete_reference(env, ref);
  }
  batch.views.clear();
  std::lock_guard<std::mutex> lock(batch.mutex);
  batch.ended = true;
  batch.failure = std::move(failure);
  batch.ended_cv.notify_all();
}

void Ignore(const TritonApi& api, TRITONSERVER_Error* err) { TakeError(api, err); }

Failure ThreadEnded(const std::string& model) {
  return Failure{TRITONSERVER_ERROR_UNAVAILABLE,
                 "bound model '" + model + "': the JavaScript thread that serves it has ended"};
}

// ---- the instance thread ----

// Reads what JS needs of one request; inputs stay where Triton has them
// unless they come in several buffers.
std::optional<Failure> ReadRequest(const TritonApi& api, const BoundModel& model,
                                   Item* item) {
  const auto& be = api.backend;
  TRITONBACKEND_Request* request = item->request;
  const char* id = nullptr;
  if (auto failure = TakeError(api, be.RequestId(request, &id))) return failure;
  item->id = id ? id : "";
  // A string correlation id reads as an error here; it is then 0.
  Ignore(api, be.RequestCorrelationId(request, &item->correlation_id));
  uint32_t count = 0;
  if (auto failure = TakeError(api, be.RequestInputCount(request, &count))) return failure;
  item->inputs.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    TRITONBACKEND_Input* input = nullptr;
    if (auto failure = TakeError(api, be.RequestInputByIndex(request, i, &input)))
      return failure;
    const char* name = nullptr;
    TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
    const int64_t* shape = nullptr;
    uint32_t rank = 0, buffers = 0;
    uint64_t byte_size = 0;
    if (auto failure = TakeError(api, be.InputProperties(input, &name, &datatype, &shape,
                                                         &rank, &byte_size, &buffers)))
      return failure;
    Tensor& tensor = item->inputs[i];
    tensor.name = name;
    tensor.datatype = datatype;
    tensor.shape.assign(shape, shape + rank);
    tensor.size = byte_size;
    std::vector<char>* copy = nullptr;
    if (buffers > 1) {
      item->copies.emplace_back();
      copy = &item->copies.back();
      copy->reserve(byte_size);
    }
    for (uint32_t b = 0; b < buffers; ++b) {
      const void* data = nullptr;
      uint64_t size = 0;
      TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
      int64_t memory_id = 0;
      if (auto failure =
              TakeError(api, be.InputBuffer(input, b, &data, &size, &memory, &memory_id)))
        return failure;
      if (memory == TRITONSERVER_MEMORY_GPU) {
        return Failure{TRITONSERVER_ERROR_UNSUPPORTED,
                       "bound model '" + model.name + "': input '" + tensor.name +
                           "' is in GPU memory; bound models take inputs in CPU memory"};
      }
      if (copy == nullptr) {
        tensor.data = data;
      } else {
        const char* bytes = static_cast<const char*>(data);
        copy->insert(copy->end(), bytes, bytes + size);
      }
    }
    if (copy != nullptr) tensor.data = copy->data();
  }
  if (model.batching && !item->inputs.empty() && !item->inputs[0].shape.empty()) {
    item->batch_size = static_cast<uint64_t>(item->inputs[0].shape[0]);
  }
  uint32_t outputs = 0;
  if (auto failure = TakeError(api, be.RequestOutputCount(request, &outputs))) return failure;
  for (uint32_t i = 0; i < outputs; ++i) {
    const char* name = nullptr;
    if (auto failure = TakeError(api, be.RequestOutputName(request, i, &name))) return failure;
    item->outputs.emplace_back(name);
  }
  uint32_t parameters = 0;
  if (auto failure = TakeError(api, be.RequestParameterCount(request, &parameters)))
    return failure;
  for (uint32_t i = 0; i < parameters; ++i) {
    const char* key = nullptr;
    TRITONSERVER_ParameterType type = TRITONSERVER_PARAMETER_STRING;
    const void* value = nullptr;
    if (auto failure = TakeError(api, be.RequestParameter(request, i, &key, &type, &value)))
      return failure;
    Parameter parameter;
    parameter.key = key;
    parameter.type = type;
    switch (type) {
      case TRITONSERVER_PARAMETER_STRING:
        parameter.text = static_cast<const char*>(value);
        break;
      case TRITONSERVER_PARAMETER_INT:
        parameter.integer = *static_cast<const int64_t*>(value);
        break;
      case TRITONSERVER_PARAMETER_BOOL:
        parameter.flag = *static_cast<const bool*>(value);
        break;
      case TRITONSERVER_PARAMETER_DOUBLE:
        parameter.number = *static_cast<const double*>(value);
        break;
      default:
        continue;  // BYTES: the API gives no size
    }
    item->parameters.push_back(std::move(parameter));
  }
  return std::nullopt;
}

// An error response that ends the request (instance or JS thread).
void SendFailure(const TritonApi& api, Item& item, const Failure& failure) {
  const auto& be = api.backend;
  TRITONBACKEND_Response* response = nullptr;
  TRITONSERVER_Error* made =
      item.factory ? be.ResponseNewFromFactory(&response, item.factory)
                   : be.ResponseNew(&response, item.request);
  if (made != nullptr) {
    Ignore(api, made);
    return;
  }
  TRITONSERVER_Error* err = api.ErrorNew(failure.code, failure.message.c_str());
  Ignore(api, be.ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err));
  api.ErrorDelete(err);
  item.failed = true;
  item.final_sent = true;
}

// After JS ended the batch: answers what it left, reports statistics,
// releases every request.
void Complete(Batch& batch) {
  const TritonApi& api = *batch.api;
  const auto& be = api.backend;
  batch.compute_end_ns = NowNs();
  for (Item& item : batch.items) {
    if (item.final_sent) continue;
    SendFailure(api, item,
                batch.failure ? *batch.failure
                              : Failure{TRITONSERVER_ERROR_INTERNAL,
                                        "bound model '" + batch.model->name +
                                            "': the handler ended without answering "
                                            "this request"});
  }
  const uint64_t exec_end_ns = NowNs();
  uint64_t batch_size = 0;
  for (Item& item : batch.items) {
    batch_size += item.batch_size;
    Ignore(api, be.ModelInstanceReportStatistics(
                    batch.instance, item.request, !item.failed, batch.exec_start_ns,
                    batch.compute_start_ns, batch.compute_end_ns, exec_end_ns));
  }
  Ignore(api, be.ModelInstanceReportBatchStatistics(batch.instance, batch_size,
                                                    batch.exec_start_ns,
                                                    batch.compute_start_ns,
                                                    batch.compute_end_ns, exec_end_ns));
  for (Item& item : batch.items) {
    if (item.factory) Ignore(api, be.ResponseFactoryDelete(item.factory));
    Ignore(api, be.RequestRelease(item.request, TRITONSERVER_REQUEST_RELEASE_ALL));
  }
}

bool Cancelled(const TritonApi& api, const Item& item) {
  bool cancelled = false;
  TRITONSERVER_Error* err =
      item.factory ? api.backend.ResponseFactoryIsCancelled(item.factory, &cancelled)
                   : api.backend.RequestIsCancelled(item.request, &cancelled);
  Ignore(api, err);
  return cancelled;
}

// Waits until JS ends the batch, telling it of requests cancelled meanwhile.
// A Triton response with the staged outputs; a failure to make one is sent
// as the response's error.
std::optional<Failure> WriteOutputs(const TritonApi& api, TRITONBACKEND_Response* response,
                                    const std::vector<Batch::StagedOutput>& outputs) {
  const auto& be = api.backend;
  for (const Batch::StagedOutput& output : outputs) {
    TRITONBACKEND_Output* out = nullptr;
    if (auto failure = TakeError(
            api, be.ResponseOutput(response, &out, output.name.c_str(), output.datatype,
                                   output.shape.data(), static_cast<uint32_t>(output.shape.size()))))
      return failure;
    void* buffer = nullptr;
    TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
    int64_t memory_id = 0;
    if (auto failure = TakeError(
            api, be.OutputBuffer(out, &buffer, output.bytes.size(), &memory, &memory_id)))
      return failure;
    if (memory == TRITONSERVER_MEMORY_GPU) {
      return Failure{TRITONSERVER_ERROR_UNSUPPORTED,
                     "output '" + output.name + "' was given GPU memory; bound models write CPU memory"};
    }
    if (!output.bytes.empty()) std::memcpy(buffer, output.bytes.data(), output.bytes.size());
  }
  return std::nullopt;
}

void SendOutgoing(Batch& batch, std::vector<Batch::Outgoing>& outgoing) {
  const TritonApi& api = *batch.api;
  const auto& be = api.backend;
  for (Batch::Outgoing& out : outgoing) {
    Item& item = batch.items[out.index];
    if (!out.response) {
      Ignore(api, be.ResponseFactorySendFlags(item.factory, out.flags));
      continue;
    }
    TRITONBACKEND_Response* response = nullptr;
    if (auto failure = TakeError(api, item.factory ? be.ResponseNewFromFactory(&response, item.factory)
                                                   : be.ResponseNew(&response, item.request))) {
      // Left for Complete() to answer (it tries again, with an error).
      item.final_sent = false;
      continue;
    }
    std::optional<Failure> failure = std::move(out.failure);
    if (!failure) failure = WriteOutputs(api, response, out.outputs);
    if (failure) item.failed = true;
    TRITONSERVER_Error* err = failure ? api.ErrorNew(failure->code, failure->message.c_str()) : nullptr;
    Ignore(api, be.ResponseSend(response, out.flags, err));
    if (err != nullptr) api.ErrorDelete(err);
  }
  outgoing.clear();
}

// Sends what JS answers until it ends the batch, and tells it of requests
// cancelled meanwhile (looked for every kCancelPoll).
void WaitForJs(Batch& batch, Channel& channel) {
  std::vector<Batch::Outgoing> sending;
  auto next_poll = Clock::now() + kCancelPoll;
  std::unique_lock<std::mutex> lock(batch.mutex);
  for (;;) {
    batch.ended_cv.wait_until(lock, next_poll,
                              [&] { return batch.ended || !batch.outgoing.empty(); });
    if (!batch.outgoing.empty()) {
      sending.swap(batch.outgoing);
      lock.unlock();
      SendOutgoing(batch, sending);
      lock.lock();
    }
    if (batch.ended && batch.outgoing.empty()) return;
    if (Clock::now() < next_poll) continue;
    lock.unlock();
    for (size_t i = 0; i < batch.items.size(); ++i) {
      Item& item = batch.items[i];
      if (item.cancel_told || item.final_sent || !Cancelled(*batch.api, item)) continue;
      item.cancel_told = true;
      channel.Post(new Message{batch.id, static_cast<int32_t>(i)});
    }
    next_poll = Clock::now() + kCancelPoll;
    lock.lock();
  }
}

// Which loaded libtritonserver.so called an entry point: the one whose code
// holds the return address (several may be loaded, one per path).
const TritonApi* ApiOfCaller(const void* return_address) {
  std::vector<const TritonApi*> apis = LoadedTritonApis();
  Dl_info caller{};
  if (dladdr(return_address, &caller) != 0) {
    for (const TritonApi* api : apis) {
      Dl_info own{};
      if (dladdr(reinterpret_cast<const void*>(api->ApiVersion), &own) != 0 &&
          own.dli_fbase == caller.dli_fbase)
        return api;
    }
  }
  return apis.empty() ? nullptr : apis.front();
}

struct ModelState {
  const TritonApi* api;
  std::shared_ptr<BoundModel> model;
};

TRITONSERVER_Error* NewError(const TritonApi& api, TRITONSERVER_Error_Code code,
                             const std::string& message) {
  return api.ErrorNew(code, message.c_str());
}

// ---- the JS thread ----

// Inputs up to this size are copied into one ArrayBuffer per batch: an
// external ArrayBuffer, its reference and its detaching cost more than the
// copy (measured: about 5 µs per input against well under 1 µs).
constexpr size_t kCopyInputsUpTo = 16 * 1024;
constexpr size_t kInputAlignment = 16;

size_t Aligned(size_t size) { return (size + kInputAlignment - 1) / kInputAlignment * kInputAlignment; }

Napi::Array RequestsToJs(Napi::Env env, Batch& batch, bool copy_inputs) {
  Napi::Array requests = Napi::Array::New(env, batch.items.size());
  size_t copied = 0;
  for (const Item& item : batch.items)
    for (const Tensor& tensor : item.inputs)
      if (copy_inputs || tensor.size <= kCopyInputsUpTo) copied += Aligned(tensor.size);
  Napi::ArrayBuffer small = Napi::ArrayBuffer::New(env, copied);
  char* next = static_cast<char*>(small.Data());
  for (size_t r = 0; r < batch.items.size(); ++r) {
    const Item& item = batch.items[r];
    Napi::Array inputs = Napi::Array::New(env, item.inputs.size());
    for (size_t i = 0; i < item.inputs.size(); ++i) {
      const Tensor& tensor = item.inputs[i];
      Napi::Array shape = Napi::Array::New(env, tensor.shape.size());
      for (size_t d = 0; d < tensor.shape.size(); ++d)
        shape[d] = Napi::Number::New(env, static_cast<double>(tensor.shape[d]));
      Napi::ArrayBuffer data;
      size_t offset = 0;
      if (copy_inputs || tensor.size <= kCopyInputsUpTo) {
        data = small;
        offset = static_cast<size_t>(next - static_cast<char*>(small.Data()));
        if (tensor.size > 0) std::memcpy(next, tensor.data, tensor.size);
        next += Aligned(tensor.size);
      } else {
        // A view of Triton's memory: detached before the request is released.
        data = Napi::ArrayBuffer::New(env, const_cast<void*>(tensor.data), tensor.size);
        napi_ref ref = nullptr;
        napi_create_reference(env, data, 1, &ref);
        batch.views.push_back(ref);
      }
      Napi::Array input = Napi::Array::New(env, 6);
      input[0u] = Napi::String::New(env, tensor.name);
      input[1u] = Napi::Number::New(env, tensor.datatype);
      input[2u] = shape;
      input[3u] = data;
      input[4u] = Napi::Number::New(env, static_cast<double>(offset));
      input[5u] = Napi::Number::New(env, static_cast<double>(tensor.size));
      inputs[i] = input;
    }
    Napi::Array parameters = Napi::Array::New(env, item.parameters.size());
    for (size_t p = 0; p < item.parameters.size(); ++p) {
      const Parameter& parameter = item.parameters[p];
      Napi::Value value;
      switch (parameter.type) {
        case TRITONSERVER_PARAMETER_INT:
          value = Napi::Number::New(env, static_cast<double>(parameter.integer));
          break;
        case TRITONSERVER_PARAMETER_BOOL:
          value = Napi::Boolean::New(env, parameter.flag);
          break;
        case TRITONSERVER_PARAMETER_DOUBLE:
          value = Napi::Number::New(env, parameter.number);
          break;
        default:
          value = Napi::String::New(env, parameter.text);
      }
      Napi::Array pair = Napi::Array::New(env, 2);
      pair[0u] = Napi::String::New(env, parameter.key);
      pair[1u] = value;
      parameters[p] = pair;
    }
    Napi::Array outputs = Napi::Array::New(env, item.outputs.size());
    for (size_t o = 0; o < item.outputs.size(); ++o)
      outputs[o] = Napi::String::New(env, item.outputs[o]);
    Napi::Array request = Napi::Array::New(env, 5);
    request[0u] = Napi::String::New(env, item.id);
    request[1u] = inputs;
    request[2u] = parameters;
    request[3u] = outputs;
    request[4u] = Napi::Number::New(env, static_cast<double>(item.correlation_id));
    requests[r] = request;
  }
  return requests;
}

void CallJs(Napi::Env env, Napi::Function dispatcher, Channel* channel,
            Message* message) {
  std::unique_ptr<Message> owned(message);
  if (env == nullptr) {
    // The environment is going: EndBoundModels ended its batches already.
    return;
  }
  std::shared_ptr<Batch> batch = FindBatch(message->batch_id);
  if (!batch) return;  // ended meanwhile (a late cancellation)
  try {
    Napi::Value model = Napi::String::New(env, batch->model->name);
    Napi::Value id = Napi::Number::New(env, static_cast<double>(batch->id));
    if (message->cancelled_index >= 0) {
      dispatcher.Call({model, id, env.Null(),
                       Napi::Number::New(env, message->cancelled_index)});
    } else {
      dispatcher.Call({model, id, RequestsToJs(env, *batch, channel->copy_inputs)});
    }
  } catch (const Napi::Error& error) {
    // The dispatcher never throws by design (lib/bound-model.ts): this is a
    // thread being terminated (an exception without a message), or a bug.
    // Either way the batch must end.
    std::string message = error.Message();
    if (TakeBatch(batch->id))
      EndBatch(env, *batch,
               message.empty() ? ThreadEnded(batch->model->name)
                               : Failure{TRITONSERVER_ERROR_INTERNAL, message});
  }
}

// Bytes of an output value from JS: a TypedArray, DataView or ArrayBuffer.
bool BytesOf(Napi::Value value, const void** data, size_t* size) {
  if (value.IsTypedArray()) {
    Napi::TypedArray array = value.As<Napi::TypedArray>();
    *data = static_cast<const char*>(array.ArrayBuffer().Data()) + array.ByteOffset();
    *size = array.ByteLength();
    return true;
  }
  if (value.IsDataView()) {
    Napi::DataView view = value.As<Napi::DataView>();
    *data = static_cast<const char*>(view.ArrayBuffer().Data()) + view.ByteOffset();
    *size = view.ByteLength();
    return true;
  }
  if (value.IsArrayBuffer()) {
    Napi::ArrayBuffer buffer = value.As<Napi::ArrayBuffer>();
    *data = buffer.Data();
    *size = buffer.ByteLength();
    return true;
  }
  return false;
}

// Copies outputs [[name, datatype, shape, bytes]] out of JS.
std::optional<Failure> StageOutputs(Napi::Array outputs, std::vector<Batch::StagedOutput>* staged) {
  staged->resize(outputs.Length());
  for (uint32_t i = 0; i < outputs.Length(); ++i) {
    Napi::Array output = outputs.Get(i).As<Napi::Array>();
    Batch::StagedOutput& out = (*staged)[i];
    out.name = output.Get(0u).As<Napi::String>().Utf8Value();
    out.datatype = static_cast<TRITONSERVER_DataType>(output.Get(1u).As<Napi::Number>().Int32Value());
    Napi::Array dims = output.Get(2u).As<Napi::Array>();
    out.shape.resize(dims.Length());
    for (uint32_t d = 0; d < dims.Length(); ++d)
      out.shape[d] = dims.Get(d).As<Napi::Number>().Int64Value();
    const void* data = nullptr;
    size_t size = 0;
    if (!BytesOf(output.Get(3u), &data, &size)) {
      return Failure{TRITONSERVER_ERROR_INVALID_ARG,
                     "output '" + out.name + "' is not a TypedArray or ArrayBuffer"};
    }
    const char* bytes = static_cast<const char*>(data);
    out.bytes.assign(bytes, bytes + size);
  }
  return std::nullopt;
}

std::optional<Failure> FailureFromJs(Napi::Value value) {
  if (!value.IsArray()) return std::nullopt;
  Napi::Array pair = value.As<Napi::Array>();
  return Failure{static_cast<TRITONSERVER_Error_Code>(pair.Get(0u).As<Napi::Number>().Int32Value()),
                 pair.Get(1u).As<Napi::String>().Utf8Value()};
}

// One answer of JS for request `index`, queued for the instance thread.
// Returns the message of a failure that replaced bad outputs.
std::optional<std::string> Answer(Batch& batch, uint32_t index, Napi::Value outputs,
                                  std::optional<Failure> failure, bool final) {
  Item& item = batch.items[index];
  Batch::Outgoing out{index, true, {}, final ? TRITONSERVER_RESPONSE_COMPLETE_FINAL : 0u,
                      std::move(failure)};
  std::optional<std::string> replaced;
  if (batch.model->decoupled && outputs.IsNull() && !out.failure) {
    out.response = false;  // only the end of the stream
  } else if (!out.failure && outputs.IsArray()) {
    out.failure = StageOutputs(outputs.As<Napi::Array>(), &out.outputs);
    if (out.failure) replaced = out.failure->message;
  }
  if (out.failure) item.failed = true;
  if (final) item.final_sent = true;
  std::lock_guard<std::mutex> lock(batch.mutex);
  batch.outgoing.push_back(std::move(out));
  batch.ended_cv.notify_all();
  return replaced;
}

// send(batchId, index, outputs | null, [code, message] | null, final)
//   → undefined, or the message of a failure that replaced the outputs.
//   A decoupled model's final answer may have outputs null: only the end of
//   its stream. A non-decoupled model's answer is always final.
Napi::Value Send(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::shared_ptr<Batch> batch =
      FindBatch(static_cast<uint64_t>(info[0].As<Napi::Number>().Int64Value()));
  if (!batch) throw Napi::Error::New(env, "bound model batch already ended");
  const uint32_t index = info[1].As<Napi::Number>().Uint32Value();
  if (index >= batch->items.size()) throw Napi::RangeError::New(env, "no such request in the batch");
  if (batch->items[index].final_sent) throw Napi::Error::New(env, "request already answered");
  const bool final = !batch->model->decoupled || info[4].ToBoolean().Value();
  if (batch->model->decoupled && info[2].IsNull() && info[3].IsNull() && !final) return env.Undefined();
  std::optional<std::string> replaced = Answer(*batch, index, info[2], FailureFromJs(info[3]), final);
  return replaced ? Napi::Value(Napi::String::New(env, *replaced)) : env.Undefined();
}

// finish(batchId, [code, message] | null, answers?): the handler is done
// with the batch; `answers` (one per request: outputs, or [code, message])
// answers each request first, in one call.
Napi::Value Finish(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::shared_ptr<Batch> batch =
      TakeBatch(static_cast<uint64_t>(info[0].As<Napi::Number>().Int64Value()));
  if (!batch) return Napi::Boolean::New(env, false);
  if (info.Length() > 2 && info[2].IsArray()) {
    Napi::Array answers = info[2].As<Napi::Array>();
    const uint32_t count = std::min<uint32_t>(answers.Length(), batch->items.size());
    for (uint32_t i = 0; i < count; ++i) {
      if (batch->items[i].final_sent) continue;
      Napi::Value answer = answers.Get(i);
      // A failure is [code, message]: a number first; outputs are arrays.
      const bool failed = answer.IsArray() && answer.As<Napi::Array>().Length() == 2 &&
                          answer.As<Napi::Array>().Get(0u).IsNumber();
      if (failed) {
        Answer(*batch, i, env.Null(), FailureFromJs(answer), true);
      } else {
        Answer(*batch, i, answer, std::nullopt, true);
      }
    }
  }
  EndBatch(env, *batch, FailureFromJs(info[1]));
  return Napi::Boolean::New(env, true);
}

void EndChannel(napi_env env, bool remove_hook);

void CleanupHook(void* env) { EndChannel(static_cast<napi_env>(env), false); }

// setDispatcher(fn, copyInputs): fn(model, batchId, requests) runs a batch,
// fn(model, batchId, null, index) says request `index` was cancelled.
Napi::Value SetDispatcher(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_channels.count(env) != 0) throw Napi::Error::New(env, "dispatcher already set");
  auto channel = std::make_shared<Channel>();
  channel->env = env;
  channel->copy_inputs = info[1].ToBoolean().Value();
  channel->tsfn = ChannelFn::New(env, info[0].As<Napi::Function>(),
                                 "tritonserver-node bound model", 0, 1, channel.get());
  // Kept alive only while a model is bound (Bind/Unbind).
  channel->tsfn.Unref(env);
  g_channels[env] = channel;
  // Added after the thread-safe function's own hook, so it runs first.
  napi_add_env_cleanup_hook(env, CleanupHook, env);
  return env.Undefined();
}

// bind(name, decoupled, batching)
Napi::Value Bind(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string name = info[0].As<Napi::String>().Utf8Value();
  std::lock_guard<std::mutex> lock(g_mutex);
  auto channel = g_channels.find(env);
  if (channel == g_channels.end()) throw Napi::Error::New(env, "no dispatcher set");
  if (g_models.count(name) != 0) {
    throw ToJsError(env, TRITONSERVER_ERROR_ALREADY_EXISTS,
                    "a model named '" + name + "' is already bound in this process");
  }
  auto model = std::make_shared<BoundModel>();
  model->name = name;
  model->decoupled = info[1].ToBoolean().Value();
  model->batching = info[2].ToBoolean().Value();
  model->channel = channel->second;
  g_models[name] = model;
  if (channel->second->bound++ == 0) channel->second->tsfn.Ref(env);
  return env.Undefined();
}

// unbind(name): later loads of the model fail; running batches finish.
Napi::Value Unbind(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string name = info[0].As<Napi::String>().Utf8Value();
  std::lock_guard<std::mutex> lock(g_mutex);
  auto found = g_models.find(name);
  if (found == g_models.end() || found->second->channel->env != env)
    return Napi::Boolean::New(env, false);
  Channel& channel = *found->second->channel;
  g_models.erase(found);
  if (--channel.bound == 0) channel.tsfn.Unref(env);
  return Napi::Boolean::New(env, true);
}

// The file Triton must load as the backend: this addon.
Napi::Value AddonPath(const Napi::CallbackInfo& info) {
  Dl_info self{};
  if (dladdr(reinterpret_cast<const void*>(&AddonPath), &self) == 0 || self.dli_fname == nullptr)
    throw Napi::Error::New(info.Env(), "cannot tell where the addon was loaded from");
  return Napi::String::New(info.Env(), self.dli_fname);
}

void EndChannel(napi_env env, bool remove_hook) {
  std::shared_ptr<Channel> channel;
  std::vector<std::shared_ptr<Batch>> batches;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto found = g_channels.find(env);
    if (found == g_channels.end()) return;
    channel = found->second;
    g_channels.erase(found);
    for (auto it = g_models.begin(); it != g_models.end();) {
      it = it->second->channel == channel ? g_models.erase(it) : std::next(it);
    }
    for (auto it = g_batches.begin(); it != g_batches.end();) {
      if (it->second->model->channel == channel) {
        batches.push_back(std::move(it->second));
        it = g_batches.erase(it);
      } else {
        ++it;
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(channel->mutex);
    channel->open = false;
  }
  if (remove_hook) napi_remove_env_cleanup_hook(env, CleanupHook, env);
  Napi::HandleScope scope(env);
  for (auto& batch : batches) {
    EndBatch(env, *batch, ThreadEnded(batch->model->name));
  }
}

}  // namespace

void EndBoundModels(Napi::Env env) { EndChannel(env, true); }

void RegisterBoundModels(Napi::Env env, Napi::Object exports) {
  Napi::Object bound = Napi::Object::New(env);
  bound.Set("setDispatcher", Napi::Function::New(env, SetDispatcher));
  bound.Set("bind", Napi::Function::New(env, Bind));
  bound.Set("unbind", Napi::Function::New(env, Unbind));
  bound.Set("send", Napi::Function::New(env, Send));
  bound.Set("finish", Napi::Function::New(env, Finish));
  bound.Set("addonPath", Napi::Function::New(env, AddonPath));
  bound.Set("liveBatches", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
              return Napi::Number::New(info.Env(), static_cast<double>(g_live_batches));
            }));
  exports.Set("boundModels", bound);
}

}  // namespace tsn

// ---- the entry points Triton calls ----

using tsn::ApiOfCaller;
using tsn::Failure;
using tsn::ModelState;
using tsn::NewError;

#define TSN_BACKEND_EXPORT extern "C" __attribute__((visibility("default")))

TSN_BACKEND_EXPORT TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend*) {
  const tsn::TritonApi* api = ApiOfCaller(__builtin_return_address(0));
  if (api == nullptr || !api->backend_problem.empty()) {
    return api == nullptr ? nullptr
                          : NewError(*api, TRITONSERVER_ERROR_UNSUPPORTED,
                                     "tritonserver-node cannot serve bound models with this "
                                     "Triton: " + api->backend_problem);
  }
  return nullptr;
}

TSN_BACKEND_EXPORT TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend*) {
  return nullptr;
}

TSN_BACKEND_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  const tsn::TritonApi* api = ApiOfCaller(__builtin_return_address(0));
  if (api == nullptr) return nullptr;
  if (!api->backend_problem.empty())
    return NewError(*api, TRITONSERVER_ERROR_UNSUPPORTED, api->backend_problem);
  const char* name = nullptr;
  if (TRITONSERVER_Error* err = api->backend.ModelName(model, &name)) return err;
  std::shared_ptr<tsn::BoundModel> bound;
  {
    std::lock_guard<std::mutex> lock(tsn::g_mutex);
    auto found = tsn::g_models.find(name);
    if (found != tsn::g_models.end()) bound = found->second;
  }
  if (!bound) {
    return NewError(*api, TRITONSERVER_ERROR_NOT_FOUND,
                    std::string("model '") + name +
                        "' uses the nodejs backend but no handler is bound to it: "
                        "load it with server.bindModel()");
  }
  auto* state = new ModelState{api, std::move(bound)};
  if (TRITONSERVER_Error* err = api->backend.ModelSetState(model, state)) {
    delete state;
    return err;
  }
  return nullptr;
}

TSN_BACKEND_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  const tsn::TritonApi* api = ApiOfCaller(__builtin_return_address(0));
  if (api == nullptr) return nullptr;
  void* state = nullptr;
  if (TRITONSERVER_Error* err = api->backend.ModelState(model, &state)) return err;
  delete static_cast<ModelState*>(state);
  return nullptr;
}

TSN_BACKEND_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(
    TRITONBACKEND_ModelInstance* instance) {
  const tsn::TritonApi* api = ApiOfCaller(__builtin_return_address(0));
  if (api == nullptr) return nullptr;
  TRITONBACKEND_Model* model = nullptr;
  if (TRITONSERVER_Error* err = api->backend.ModelInstanceModel(instance, &model)) return err;
  void* state = nullptr;
  if (TRITONSERVER_Error* err = api->backend.ModelState(model, &state)) return err;
  // The instance shares its model's state.
  return api->backend.ModelInstanceSetState(instance, state);
}

TSN_BACKEND_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(
    TRITONBACKEND_ModelInstance*) {
  return nullptr;
}

TSN_BACKEND_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
    const uint32_t request_count) {
  const uint64_t exec_start_ns = tsn::NowNs();
  const tsn::TritonApi* api = ApiOfCaller(__builtin_return_address(0));
  if (api == nullptr) return nullptr;
  void* raw = nullptr;
  if (TRITONSERVER_Error* err = api->backend.ModelInstanceState(instance, &raw)) return err;
  auto* state = static_cast<ModelState*>(raw);
  auto batch = std::make_shared<tsn::Batch>(request_count);
  batch->api = api;
  batch->instance = instance;
  batch->model = state->model;
  batch->exec_start_ns = exec_start_ns;
  // Until the batch is queued, an error return leaves every request to
  // Triton (it answers and releases them).
  auto fail = [&](const Failure& failure) {
    for (tsn::Item& item : batch->items) {
      if (item.factory) tsn::Ignore(*api, api->backend.ResponseFactoryDelete(item.factory));
    }
    return NewError(*api, failure.code, failure.message);
  };
  for (uint32_t i = 0; i < request_count; ++i) {
    tsn::Item& item = batch->items[i];
    item.request = requests[i];
    if (auto failure = tsn::ReadRequest(*api, *batch->model, &item)) return fail(*failure);
    if (batch->model->decoupled) {
      if (auto failure = tsn::TakeError(
              *api, api->backend.ResponseFactoryNew(&item.factory, item.request)))
        return fail(*failure);
    }
  }
  batch->compute_start_ns = tsn::NowNs();
  {
    std::lock_guard<std::mutex> lock(tsn::g_mutex);
    batch->id = tsn::g_next_batch++;
    tsn::g_batches[batch->id] = batch;
  }
  tsn::Channel& channel = *batch->model->channel;
  if (!channel.Post(new tsn::Message{batch->id, -1})) {
    if (tsn::TakeBatch(batch->id)) {
      std::lock_guard<std::mutex> lock(batch->mutex);
      batch->ended = true;
      batch->failure = tsn::ThreadEnded(batch->model->name);
    }
  }
  tsn::WaitForJs(*batch, channel);
  tsn::Complete(*batch);
  return nullptr;
}
