// The JS thread: the completion queue drained once per tick, each
// completion turned into the response callback's arguments (lib/native.ts
// NativeResponseCallback), output blocks handed to JS or copied.
#include <algorithm>
#include <cstring>
#include <iterator>
#include <optional>
#include <vector>

#include "../core/addon.h"
#include "inference-internal.h"
#include "output-memory.h"

namespace tsn {

namespace {

// Outputs up to this size are copied into JS memory (see OutputBuffer).
constexpr size_t kCopyUpToBytes = 4096;

}  // namespace

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

}  // namespace tsn
