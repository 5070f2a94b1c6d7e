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

void BlockingCall::OnOK() {
  Napi::Env env = Env();
  Napi::HandleScope scope(env);
  if (failure_) {
    deferred_.Reject(ToJsError(env, *failure_).Value());
    return;
  }
  if (!finish_) {
    deferred_.Resolve(OutcomeToJs(env, outcome_));
    return;
  }
  try {
    deferred_.Resolve(finish_(env, outcome_));
  } catch (const Napi::Error& error) {
    deferred_.Reject(error.Value());
  }
}

void BlockingCall::OnError(const Napi::Error& error) {
  deferred_.Reject(error.Value());
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
