// The native HTTP/1.1 front end: a listener on a libuv loop of its own
// thread that answers plain KServe inference requests (binary tensors) with
// Triton's C API directly, and hands every other request, byte for byte, to
// the JS front end (lib/kserve/native-http.ts) over a virtual socket.
#pragma once

#include <napi.h>

namespace tsn {

// Registers the NativeHttpFrontend class on `exports`.
void RegisterHttpFrontend(Napi::Env env, Napi::Object exports);

}  // namespace tsn
