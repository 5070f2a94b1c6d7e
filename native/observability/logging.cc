// Triton's process-wide logger: TRITONSERVER_LogIsEnabled and
// TRITONSERVER_LogMessage. Both are cheap (a flag check, one formatted
// write), so they run on the JS thread.
#include <string>

#include "../core/errors.h"
#include "../core/loader.h"
#include "observability.h"

namespace tsn {

namespace {

TRITONSERVER_LogLevel LevelArg(const Napi::CallbackInfo& info, size_t index) {
  if (info.Length() <= index || !info[index].IsNumber())
    throw ToJsError(info.Env(), TRITONSERVER_ERROR_INVALID_ARG,
                    "a log level must be a number");
  return static_cast<TRITONSERVER_LogLevel>(
      info[index].As<Napi::Number>().Int32Value());
}

// logIsEnabled(libraryPath, level) → boolean
Napi::Value LogIsEnabled(const Napi::CallbackInfo& info) {
  const TritonApi& api = LoadedApi(info.Env(), info[0]);
  return Napi::Boolean::New(info.Env(), api.LogIsEnabled(LevelArg(info, 1)));
}

// logMessage(libraryPath, level, file, line, message)
Napi::Value LogMessage(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const TritonApi& api = LoadedApi(env, info[0]);
  TRITONSERVER_LogLevel level = LevelArg(info, 1);
  if (info.Length() < 5 || !info[2].IsString() || !info[3].IsNumber() ||
      !info[4].IsString())
    throw ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG,
                    "logMessage(library, level, file, line, message)");
  std::string file = info[2].As<Napi::String>();
  std::string message = info[4].As<Napi::String>();
  int line = info[3].As<Napi::Number>().Int32Value();
  if (auto failure = TakeError(
          api, api.LogMessage(level, file.c_str(), line, message.c_str())))
    throw ToJsError(env, *failure);
  return env.Undefined();
}

}  // namespace

void RegisterLogging(Napi::Env env, Napi::Object exports) {
  exports.Set("logIsEnabled", Napi::Function::New<LogIsEnabled>(env));
  exports.Set("logMessage", Napi::Function::New<LogMessage>(env));
}

}  // namespace tsn
