// Triton errors as values on native threads, TritonError objects in JS.
#pragma once

#include <napi.h>

#include <optional>
#include <string>

#include "loader.h"

namespace tsn {

struct Failure {
  TRITONSERVER_Error_Code code;
  std::string message;
};

// Copies a Triton error into a Failure and frees it; no error → nullopt.
std::optional<Failure> TakeError(const TritonApi& api, TRITONSERVER_Error* err);

// The failure for calling a function this library's API version lacks.
Failure Unsupported(const TritonApi& api, const char* function);

// A JS TritonError (the class lib/ registered) for a failure.
Napi::Error ToJsError(Napi::Env env, const Failure& failure);
Napi::Error ToJsError(Napi::Env env, TRITONSERVER_Error_Code code,
                      const std::string& message);

}  // namespace tsn
