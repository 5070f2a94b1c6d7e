// Registration of the observability functions of the addon: custom metrics
// (metrics.cc), Triton's logger (logging.cc).
#pragma once

#include <napi.h>

namespace tsn {

void RegisterMetrics(Napi::Env env, Napi::Object exports);
void RegisterLogging(Napi::Env env, Napi::Object exports);

// The loaded library at `path` (the one a server was started with), or a
// JS error. Libraries stay loaded for the process, so this is a lookup.
const struct TritonApi& LoadedApi(Napi::Env env, Napi::Value path);

}  // namespace tsn
