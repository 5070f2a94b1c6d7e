#include "blocking.h"

namespace tsn {

Napi::Promise BlockingCall::Run(Napi::Env env, Work work, Finish finish) {
  auto* call = new BlockingCall(env, std::move(work), std::move(finish));
  Napi::Promise promise = call->deferred_.Promise();
  call->Queue();  // the worker deletes itself after OnOK/OnError
  return promise;
}

BlockingCall::BlockingCall(Napi::Env env, Work work, Finish finish)
    : Napi::AsyncWorker(env, "tritonserver-node:call"),
      deferred_(Napi::Promise::Deferred::New(env)),
      work_(std::move(work)),
      finish_(std::move(finish)) {}

void BlockingCall::Execute() { failure_ = work_(&outcome_); }

// Settling a promise fails when the environment is ending (a worker being
// terminated): the outcome is then dropped, never thrown past Node-API.
void BlockingCall::OnOK() {
  Napi::Env env = Env();
  Napi::HandleScope scope(env);
  try {
    if (failure_) {
      deferred_.Reject(ToJsError(env, *failure_).Value());
    } else if (!finish_) {
      deferred_.Resolve(OutcomeToJs(env, outcome_));
    } else {
      Napi::Value value;
      try {
        value = finish_(env, outcome_);
      } catch (const Napi::Error& error) {
        deferred_.Reject(error.Value());
        return;
      }
      deferred_.Resolve(value);
    }
  } catch (const Napi::Error&) {
  }
}

void BlockingCall::OnError(const Napi::Error& error) {
  try {
    deferred_.Reject(error.Value());
  } catch (const Napi::Error&) {
  }
}

Napi::Value OutcomeToJs(Napi::Env env, const Outcome& outcome) {
  if (auto* flag = std::get_if<bool>(&outcome))
    return Napi::Boolean::New(env, *flag);
  if (auto* number = std::get_if<uint32_t>(&outcome))
    return Napi::Number::New(env, *number);
  if (auto* text = std::get_if<std::string>(&outcome))
    return Napi::String::New(env, *text);
  return env.Undefined();
}

}  // namespace tsn
