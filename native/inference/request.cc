// The JS thread: infer() recorded (Infer), its arguments read into a
// request context without a Triton call, and the contexts reused.
#include <cmath>
#include <string>

#include "inference-internal.h"
#include "../observability/trace.h"

namespace tsn {

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

Napi::Error InvalidArg(Napi::Env env, const std::string& message) {
  return ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG, message);
}

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

// What Triton reads from until it releases the request: the one input's
// data, or an array of all of them (one reference either way).
Napi::Value InferenceEngine::InputsToKeep(Napi::Env env) {
  if (input_views_.size() == 1) return Napi::Value(env, input_views_[0]);
  Napi::Array all = Napi::Array::New(env, input_views_.size());
  for (size_t i = 0; i < input_views_.size(); ++i)
    all.Set(static_cast<uint32_t>(i), input_views_[i]);
  return all;
}

}  // namespace tsn
