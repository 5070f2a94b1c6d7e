// Test core: Python models run beside a stub process per instance, as in
// real Triton (see python_stub.cc). Started at model load, told to exit at
// unload; a stub that died makes its model's requests fail with Triton's
// message until the model is loaded anew.
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common.h"

namespace tc {

class StubProcesses {
 public:
  // One stub per instance, named after it as Triton names its instances:
  // '<model>_<i>' in the default group, '<group>_<i>' in a configured one
  // (whose name defaults to '<model>_<group index>').
  static Status Start(
      const std::vector<std::string>& instances,
      std::unique_ptr<StubProcesses>* out);
  ~StubProcesses();  // orderly exit: each stub removes its region

  // "" while every stub lives, else Triton's message for the first dead one:
  // "Stub process '<name>' is not healthy."
  std::string Unhealthy();

 private:
  struct Stub {
    std::string name;
    std::string region;
    pid_t pid = -1;
    int stdin_fd = -1;
    bool dead = false;
  };
  std::mutex mu_;  // instances check health from their own threads
  std::vector<Stub> stubs_;
};

}  // namespace tc
