#include "openssl-api.h"

#if defined(TSN_HAVE_OPENSSL)
#include <dlfcn.h>

namespace tsn {

namespace {

const OpenSslApi* Load() {
  static OpenSslApi api;
  // The headers are Node's: the functions must be its copy (OpenSSL 3), in this process.
  if (dlsym(RTLD_DEFAULT, "OPENSSL_init_ssl") == nullptr || dlsym(RTLD_DEFAULT, "OSSL_PROVIDER_load") == nullptr)
    return nullptr;
  bool all = true;
#define TSN_OPENSSL_RESOLVE(name)                                                 \
  api.name = reinterpret_cast<decltype(&::name)>(dlsym(RTLD_DEFAULT, #name)); \
  all = all && api.name != nullptr;
  TSN_OPENSSL_FUNCTIONS(TSN_OPENSSL_RESOLVE)
#undef TSN_OPENSSL_RESOLVE
  return all ? &api : nullptr;
}

}  // namespace

const OpenSslApi* OpenSsl() {
  static const OpenSslApi* api = Load();
  return api;
}

}  // namespace tsn
#endif
