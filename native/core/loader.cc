#include "loader.h"

#include <dlfcn.h>

#include <map>
#include <memory>
#include <mutex>
#include <sstream>

namespace tsn {
namespace {

std::mutex g_mutex;
// Keyed by the path as given; process-wide because dlopen handles are.
std::map<std::string, std::unique_ptr<TritonApi>> g_loaded;

// A function is there when the library's minor is at least the one that
// introduced it (a function keeps -Wtype-limits quiet about minor 0).
bool Introduced(uint32_t since, uint32_t minor) { return since <= minor; }

bool Resolve(void* handle, TritonApi* api, std::string* problem) {
  std::ostringstream missing;
  bool ok = true;
#define TSN_RESOLVE(min_minor, ret, name, params)                          \
  {                                                                        \
    void* symbol = dlsym(handle, "TRITONSERVER_" #name);                   \
    if (Introduced(min_minor, api->minor))                                         \
      api->name = reinterpret_cast<TritonFn_##name>(symbol);               \
    if (symbol == nullptr && Introduced(min_minor, kTritonApiMinMinor)) {          \
      missing << (ok ? "" : ", ") << "TRITONSERVER_" #name;                \
      ok = false;                                                          \
    }                                                                      \
  }
  TRITON_API_FUNCTIONS(TSN_RESOLVE)
#undef TSN_RESOLVE
  if (!ok) *problem = "missing required functions: " + missing.str();
  return ok;
}

// The backend API is optional: only bound models need it.
void ResolveBackendApi(void* handle, TritonApi* api) {
  std::ostringstream missing;
  bool ok = true;
  TritonApi::Backend resolved;
#define TSN_RESOLVE_BACKEND(ret, name, params)                            \
  resolved.name = reinterpret_cast<TritonBackendFn_##name>(               \
      dlsym(handle, "TRITONBACKEND_" #name));                             \
  if (resolved.name == nullptr) {                                         \
    missing << (ok ? "" : ", ") << "TRITONBACKEND_" #name;                \
    ok = false;                                                           \
  }
  TRITON_BACKEND_API_FUNCTIONS(TSN_RESOLVE_BACKEND)
#undef TSN_RESOLVE_BACKEND
  if (!ok) {
    api->backend_problem = "the library lacks " + missing.str();
    return;
  }
  uint32_t major = 0, minor = 0;
  if (TRITONSERVER_Error* err = resolved.ApiVersion(&major, &minor)) {
    api->ErrorDelete(err);
    api->backend_problem = "TRITONBACKEND_ApiVersion failed";
    return;
  }
  if (major != kTritonBackendApiMajor || minor < kTritonBackendApiMinMinor) {
    std::ostringstream text;
    text << "the library implements backend API " << major << "." << minor
         << ", bound models need " << kTritonBackendApiMajor << ".x with x >= "
         << kTritonBackendApiMinMinor;
    api->backend_problem = text.str();
    return;
  }
  api->backend = resolved;
}

std::unique_ptr<TritonApi> Open(const std::string& path,
                                std::string* problem) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    *problem = reason ? reason : "dlopen failed";
    return nullptr;
  }
  auto api = std::make_unique<TritonApi>();
  api->path = path;
  auto version = reinterpret_cast<TritonFn_ApiVersion>(
      dlsym(handle, "TRITONSERVER_ApiVersion"));
  auto error_delete = reinterpret_cast<TritonFn_ErrorDelete>(
      dlsym(handle, "TRITONSERVER_ErrorDelete"));
  if (version == nullptr || error_delete == nullptr) {
    *problem = "not a Triton server library (no TRITONSERVER_ApiVersion)";
  } else if (TRITONSERVER_Error* err = version(&api->major, &api->minor)) {
    error_delete(err);
    *problem = "TRITONSERVER_ApiVersion failed";
  } else if (api->major != kTritonApiMajor ||
             api->minor < kTritonApiMinMinor) {
    std::ostringstream text;
    text << "implements C API " << api->major << "." << api->minor
         << ", this package needs " << kTritonApiMajor << ".x with x >= "
         << kTritonApiMinMinor;
    *problem = text.str();
  } else if (Resolve(handle, api.get(), problem)) {
    ResolveBackendApi(handle, api.get());
    return api;
  }
  dlclose(handle);
  return nullptr;
}

}  // namespace

const TritonApi* LoadTritonApi(const std::vector<std::string>& candidates,
                               std::string* error) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::ostringstream tried;
  for (const std::string& path : candidates) {
    auto found = g_loaded.find(path);
    if (found != g_loaded.end()) return found->second.get();
    std::string problem;
    std::unique_ptr<TritonApi> api = Open(path, &problem);
    if (api) {
      const TritonApi* result = api.get();
      g_loaded.emplace(path, std::move(api));
      return result;
    }
    tried << "\n  - " << path << ": " << problem;
  }
  *error = "could not load libtritonserver.so; tried:" + tried.str() +
           "\nRun inside NVIDIA's Triton container (tritonserver images ship "
           "/opt/tritonserver/lib/libtritonserver.so), set TRITON_HOME to a "
           "Triton install, or pass the library's path as `libraryPath` / "
           "TRITONSERVER_LIBRARY.";
  return nullptr;
}

std::vector<const TritonApi*> LoadedTritonApis() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<const TritonApi*> apis;
  for (const auto& entry : g_loaded) apis.push_back(entry.second.get());
  return apis;
}

uint32_t FunctionMinor(const char* name) {
  std::string wanted(name);
#define TSN_MINOR(min_minor, ret, fn, params) \
  if (wanted == #fn) return (min_minor);
  TRITON_API_FUNCTIONS(TSN_MINOR)
#undef TSN_MINOR
  return 0;
}

}  // namespace tsn
