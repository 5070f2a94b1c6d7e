// Per-environment state of the addon (one per main thread / worker thread /
// Electron context): nothing here is process-wide.
#pragma once

#include <napi.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace tsn {

struct ServerState;
class ServerWrap;

class Addon : public Napi::Addon<Addon> {
 public:
  Addon(Napi::Env env, Napi::Object exports);

  Napi::FunctionReference error_class;   // lib/errors.ts TritonError
  Napi::FunctionReference server_class;  // ServerWrap
  // Handed from ServerWrap::Wrap to the constructor it calls.
  std::shared_ptr<ServerState> server_being_wrapped;
  bool wrapping_attached = false;
  // Servers of this environment not yet collected, for process.exit().
  std::unordered_set<ServerWrap*> servers;

  // The JS string for a name every response repeats (outputs, response
  // parameters): making a property key anew each time costs more than the
  // rest of a small output. Kept for the first kMaxNames.
  Napi::String ResponseName(Napi::Env env, const std::string& name);

 private:
  Napi::Value SetErrorClass(const Napi::CallbackInfo& info);
  Napi::Value ApiVersion(const Napi::CallbackInfo& info);
  Napi::Value StartServer(const Napi::CallbackInfo& info);
  Napi::Value LiveObjects(const Napi::CallbackInfo& info);
  Napi::Value EndServersForExit(const Napi::CallbackInfo& info);
  Napi::Value AttachServer(const Napi::CallbackInfo& info);
  Napi::Value DetachBuffers(const Napi::CallbackInfo& info);

  static constexpr size_t kMaxNames = 64;
  // Node-API before version 10 references objects only: the strings live in
  // one array, found by index.
  Napi::Reference<Napi::Array> response_name_strings_;
  std::unordered_map<std::string, uint32_t> response_names_;
};

}  // namespace tsn
