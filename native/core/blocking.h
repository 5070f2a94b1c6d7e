// Runs a call that may block inside Triton on libuv's thread pool and
// settles a promise with its outcome on the JS thread.
#pragma once

#include <napi.h>

#include <functional>
#include <optional>
#include <string>
#include <variant>

#include "errors.h"

namespace tsn {

using Outcome = std::variant<std::monostate, bool, uint32_t, std::string>;

class BlockingCall : public Napi::AsyncWorker {
 public:
  // Runs off the JS thread; must not touch V8.
  using Work = std::function<std::optional<Failure>(Outcome* outcome)>;
  // Runs on the JS thread after a successful Work; default: the outcome.
  using Finish = std::function<Napi::Value(Napi::Env env, Outcome& outcome)>;

  static Napi::Promise Run(Napi::Env env, Work work, Finish finish = nullptr);

 private:
  BlockingCall(Napi::Env env, Work work, Finish finish);
  void Execute() override;
  void OnOK() override;
  void OnError(const Napi::Error& error) override;

  Napi::Promise::Deferred deferred_;
  Work work_;
  Finish finish_;
  Outcome outcome_;
  std::optional<Failure> failure_;
};

// The outcome as a plain JS value.
Napi::Value OutcomeToJs(Napi::Env env, const Outcome& outcome);

}  // namespace tsn
