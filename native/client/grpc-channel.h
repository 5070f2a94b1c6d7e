// The client's native gRPC transport (lib/client/native-grpc.ts): HTTP/2
// calls made with nghttp2 on the JS thread's own libuv loop.
#pragma once

#include <napi.h>

namespace tsn {

// exports.grpcChannel(host, port, settings, onEvents), or nothing where the
// addon was built without nghttp2's header.
void RegisterGrpcChannel(Napi::Env env, Napi::Object exports);

}  // namespace tsn
