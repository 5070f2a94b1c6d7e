// Triton's threads: each response read and deleted into a completion, the
// request's two events (release, final response), and the completion queue
// the JS thread drains (drain.cc).
#include <cstring>
#include <utility>
#include <vector>

#include "inference-internal.h"
#include "output-memory.h"

namespace tsn {

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

}  // namespace tsn
