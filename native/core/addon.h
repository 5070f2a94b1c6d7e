// Per-environment state of the addon (one per main thread / worker thread /
// Electron context): nothing here is process-wide.
#pragma once

#include <napi.h>

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

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

  // A name every response repeats (outputs, response parameters) as its
  // index in the names table JS holds (exports.responseNames), or -1 past
  // the first kMaxNames (then it goes as a JS string): making a property key
  // anew each time costs more than the rest of a small output, and reading
  // it back from a JS array through Node-API costs nearly as much.
  int64_t ResponseName(Napi::Env env, const std::string& name);

 private:
  Napi::Value SetErrorClass(const Napi::CallbackInfo& info);
  Napi::Value ApiVersion(const Napi::CallbackInfo& info);
  Napi::Value StartServer(const Napi::CallbackInfo& info);
  Napi::Value LiveObjects(const Napi::CallbackInfo& info);
  Napi::Value TrimMallocHeap(const Napi::CallbackInfo& info);
  Napi::Value EndServersForExit(const Napi::CallbackInfo& info);
  Napi::Value AttachServer(const Napi::CallbackInfo& info);
  Napi::Value DetachBuffers(const Napi::CallbackInfo& info);
  Napi::Value NativeName(const Napi::CallbackInfo& info);

  static constexpr size_t kMaxNames = 64;
  // The table's strings, in the JS array (appended to once per name) and
  // here, by index.
  Napi::Reference<Napi::Array> response_name_table_;
  std::vector<std::string> response_names_;
  // Where the next name is looked for first: a response's names come in
  // the order the one before had them.
  uint32_t next_name_ = 0;
};

}  // namespace tsn
