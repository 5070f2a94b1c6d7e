// The native front ends: a listener on a libuv loop of its own thread that
// answers plain KServe inference requests (HTTP/1.1 with binary tensors, or
// gRPC ModelInfer with raw ones) with Triton's C API directly, and hands
// every other request to the JS front end (lib/kserve/native-http.ts) over a
// virtual socket per connection.
#pragma once

#include <napi.h>

namespace tsn {

// Registers the NativeHttpFrontend class on `exports`.
void RegisterHttpFrontend(Napi::Env env, Napi::Object exports);

}  // namespace tsn
