// InferenceEngine's lifetime and bookkeeping: made, closed and abandoned
// with its server (JS thread), the requests inside Triton counted and
// listed (any thread), cancellation, and the JS thread's table of requests
// by token. Its other rooms: output-memory, completions, drain, request,
// submit (docs/architecture.md).
#include <optional>
#include <vector>

#include "inference-internal.h"

namespace tsn {

LiveCounters& Live() {
  static LiveCounters counters;
  return counters;
}

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
  LetSubmitterExit();
  if (submitter_.joinable()) submitter_.join();
  if (allocator_ != nullptr)
    TakeError(api_, api_.ResponseAllocatorDelete(allocator_));
  for (Request* request : free_requests_) delete request;
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

// Nothing is submitted after Close or Abandon: the submitter thread hands
// Triton what is queued and ends, rather than living until the engine is
// collected.
void InferenceEngine::LetSubmitterExit() {
  {
    std::lock_guard<std::mutex> lock(submit_mutex_);
    submitter_exit_ = true;
  }
  submit_wanted_.notify_one();
}

void InferenceEngine::Close() {
  closing_ = true;
  LetSubmitterExit();
  if (requests_.empty() && !tsfn_released_) {
    tsfn_released_ = true;
    tsfn_.Release();
  }
}

void InferenceEngine::Abandon() {
  LetSubmitterExit();
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
