// Bound models (lib/bound-model.ts): the addon is also a Triton backend,
// "nodejs", whose model instances hand each batch Triton formed to a JS
// handler on the thread that bound the model, and wait for it to answer.
#pragma once

#include <napi.h>

namespace tsn {

// exports.boundModels: setDispatcher, bind, unbind, send, finish, addonPath,
// liveBatches.
void RegisterBoundModels(Napi::Env env, Napi::Object exports);

// The environment is ending (or the process exiting): batches its handlers
// hold fail UNAVAILABLE, its models are unbound, and nothing more is sent to
// its JS thread. Idempotent.
void EndBoundModels(Napi::Env env);

}  // namespace tsn
