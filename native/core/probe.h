// Checks for `tritonserver-node doctor`: can a shared library be opened, and
// does this runtime allow external (zero-copy) ArrayBuffers.
#pragma once

#include <napi.h>

namespace tsn {

// Adds probeLibrary and externalBuffersAllowed to the addon's exports.
void DefineProbes(Napi::Env env, Napi::Object exports);

}  // namespace tsn
