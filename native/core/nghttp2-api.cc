#include "nghttp2-api.h"

#if defined(TSN_HAVE_NGHTTP2)
#include <dlfcn.h>

namespace tsn {

namespace {

bool Resolve(void* handle, Nghttp2Api* api) {
  bool all = true;
#define TSN_NGHTTP2_RESOLVE(name)                                                         \
  api->name = reinterpret_cast<decltype(&nghttp2_##name)>(dlsym(handle, "nghttp2_" #name)); \
  all = all && api->name != nullptr;
  TSN_NGHTTP2_FUNCTIONS(TSN_NGHTTP2_RESOLVE)
#undef TSN_NGHTTP2_RESOLVE
  return all;
}

const Nghttp2Api* Load() {
  static Nghttp2Api api;
  if (Resolve(RTLD_DEFAULT, &api)) return &api;
  void* library = dlopen("libnghttp2.so.14", RTLD_NOW | RTLD_LOCAL);
  if (library != nullptr && Resolve(library, &api)) return &api;  // kept loaded for the process
  return nullptr;
}

}  // namespace

const Nghttp2Api* Nghttp2() {
  static const Nghttp2Api* api = Load();
  return api;
}

}  // namespace tsn
#endif
