// The client's native HTTP/1.1 transport (lib/client/native-http.ts):
// requests written and responses read by the addon on the JS thread's own
// libuv loop, over a pool of keep-alive connections.
#pragma once

#include <napi.h>

namespace tsn {

// exports.HttpChannel.
void RegisterHttpChannel(Napi::Env env, Napi::Object exports);

}  // namespace tsn
