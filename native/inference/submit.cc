// Submission: the requests of a tick handed to Triton, here on the JS
// thread or by the engine's submitter thread, in order.
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "inference-internal.h"
#include "../observability/trace.h"

namespace tsn {

// JS calls flush() once per tick after infer() calls (lib/inference.ts):
// one request is submitted here, more go to the submitter thread in one
// hand-over, so Triton's own cost (ServerInferAsync, which locks its
// scheduler and wakes its threads) leaves the JS thread under load.
void InferenceEngine::Flush(bool wait) {
  if (unsubmitted_.empty()) return;
  std::unique_lock<std::mutex> lock(submit_mutex_);
  // After Close or Abandon the submitter thread is ending: submit here.
  wait = wait || submitter_exit_;
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

}  // namespace tsn
