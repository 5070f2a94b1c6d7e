#include "errors.h"

#include "addon.h"

namespace tsn {

namespace {
const char* const kCodeNames[] = {
    "UNKNOWN",     "INTERNAL",    "NOT_FOUND",      "INVALID_ARG",
    "UNAVAILABLE", "UNSUPPORTED", "ALREADY_EXISTS", "CANCELLED",
};
}  // namespace

std::optional<Failure> TakeError(const TritonApi& api,
                                 TRITONSERVER_Error* err) {
  if (err == nullptr) return std::nullopt;
  Failure failure{api.ErrorCode(err), api.ErrorMessage(err)};
  api.ErrorDelete(err);
  return failure;
}

Failure Unsupported(const TritonApi& api, const char* function) {
  return Failure{TRITONSERVER_ERROR_UNSUPPORTED,
                 std::string("TRITONSERVER_") + function + " needs C API 1." +
                     std::to_string(FunctionMinor(function)) +
                     "; the loaded library (" + api.path + ") implements 1." +
                     std::to_string(api.minor)};
}

Napi::Error ToJsError(Napi::Env env, TRITONSERVER_Error_Code code,
                      const std::string& message) {
  int index = static_cast<int>(code);
  const char* name = (index >= 0 && index < 8) ? kCodeNames[index] : "UNKNOWN";
  Addon* addon = env.GetInstanceData<Addon>();
  if (addon != nullptr && !addon->error_class.IsEmpty()) {
    Napi::Object error = addon->error_class.New(
        {Napi::String::New(env, name), Napi::String::New(env, message)});
    return Napi::Error(env, error);
  }
  Napi::Error error = Napi::Error::New(env, message);
  error.Set("code", Napi::String::New(env, name));
  return error;
}

Napi::Error ToJsError(Napi::Env env, const Failure& failure) {
  return ToJsError(env, failure.code, failure.message);
}

}  // namespace tsn
