// Test core: the stand-in for the Python backend's stub process
// (triton_python_backend_stub). Real Triton runs each Python model instance
// in a stub process with a /dev/shm region; the test core runs one of these
// per instance so that the package's handling of those processes is tested:
//   - an orderly unload writes "exit" on the stub's stdin: the stub removes
//     its region and exits;
//   - a parent that vanishes without unloading (process.exit() with requests
//     in flight) leaves the stub orphaned, as real stubs were seen to be
//     (TRITON_FACTS.md) — here for LINGER_SECONDS only, so a test can see it
//     and no machine keeps it;
//   - SIGTERM is ignored, like the orphaned real stub.
//
// usage: triton_python_backend_stub <shm region path> <instance name>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace {
constexpr unsigned LINGER_SECONDS = 20;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <shm region path> <instance name>\n", argv[0]);
    return 2;
  }
  std::signal(SIGTERM, SIG_IGN);
  const char* region = argv[1];
  char line[64];
  bool told_to_exit = false;
  while (std::fgets(line, sizeof line, stdin) != nullptr) {
    if (std::strncmp(line, "exit", 4) == 0) {
      told_to_exit = true;
      break;
    }
  }
  if (!told_to_exit) sleep(LINGER_SECONDS);  // orphaned
  unlink(region);
  return 0;
}
