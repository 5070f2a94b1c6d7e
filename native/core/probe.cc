#include "probe.h"

#include <dlfcn.h>

namespace tsn {
namespace {

// probeLibrary(path) → null when the dynamic loader opens it with every
// symbol resolved (RTLD_NOW), else the loader's reason. A backend's
// dependency on libtritonserver.so is met by the library already loaded.
// The handle stays open: closing a backend (or the CUDA libraries it pulled
// in) can run teardown code that expects a live server, and Triton would
// keep it open anyway.
Napi::Value ProbeLibrary(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString())
    throw Napi::TypeError::New(env, "probeLibrary(path)");
  std::string path = info[0].As<Napi::String>();
  dlerror();
  if (dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) != nullptr) return env.Null();
  const char* reason = dlerror();
  return Napi::String::New(env, reason ? reason : "dlopen failed");
}

// What the response path does with outputs: Electron's V8 sandbox refuses
// external buffers (then outputs are copied).
Napi::Value ExternalBuffersAllowed(const Napi::CallbackInfo& info) {
  static char byte = 0;
  napi_value buffer = nullptr;
  napi_status status = napi_create_external_arraybuffer(
      info.Env(), &byte, 1, [](napi_env, void*, void*) {}, nullptr, &buffer);
  return Napi::Boolean::New(info.Env(), status == napi_ok);
}

}  // namespace

void DefineProbes(Napi::Env env, Napi::Object exports) {
  exports.Set("probeLibrary", Napi::Function::New(env, ProbeLibrary, "probeLibrary"));
  exports.Set("externalBuffersAllowed",
              Napi::Function::New(env, ExternalBuffersAllowed, "externalBuffersAllowed"));
}

}  // namespace tsn
