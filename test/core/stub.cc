#include "stub.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

extern char** environ;

namespace tc {
namespace {

std::atomic<uint64_t> g_next_region{0};

// The stub executable sits beside the test core library.
std::string StubPath()
{
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&StubPath), &info) == 0 ||
      info.dli_fname == nullptr) {
    return "triton_python_backend_stub";
  }
  std::string lib = info.dli_fname;
  const size_t slash = lib.rfind('/');
  std::string dir = slash == std::string::npos ? "." : lib.substr(0, slash);
  // The 1.24 variant lives one directory down.
  if (access((dir + "/triton_python_backend_stub").c_str(), X_OK) != 0) {
    dir += "/..";
  }
  return dir + "/triton_python_backend_stub";
}

}  // namespace

Status
StubProcesses::Start(
    const std::vector<std::string>& instances,
    std::unique_ptr<StubProcesses>* out)
{
  std::unique_ptr<StubProcesses> stubs(new StubProcesses());
  const std::string path = StubPath();
  for (const std::string& instance : instances) {
    Stub stub;
    // Named after its instance, as Triton names stubs (TRITON_FACTS.md).
    stub.name = instance;
    stub.region = "/dev/shm/triton_python_backend_shm_region_" +
                  std::to_string(getpid()) + "_" +
                  std::to_string(g_next_region++);
    const int fd = open(stub.region.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
      return Err(TRITONSERVER_ERROR_INTERNAL, "test core: pipe failed");
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[0], STDIN_FILENO);
    const char* argv[] = {path.c_str(), stub.region.c_str(), stub.name.c_str(),
                          nullptr};
    const int rc = posix_spawn(
        &stub.pid, path.c_str(), &actions, nullptr,
        const_cast<char* const*>(argv), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(pipe_fds[0]);
    if (rc != 0) {
      close(pipe_fds[1]);
      unlink(stub.region.c_str());
      return Err(
          TRITONSERVER_ERROR_INTERNAL,
          "test core: could not start the Python stub " + path);
    }
    stub.stdin_fd = pipe_fds[1];
    stubs->stubs_.push_back(std::move(stub));
  }
  *out = std::move(stubs);
  return Status();
}

std::string
StubProcesses::Unhealthy()
{
  std::lock_guard<std::mutex> lk(mu_);
  for (Stub& stub : stubs_) {
    if (!stub.dead) {
      int status = 0;
      stub.dead = waitpid(stub.pid, &status, WNOHANG) == stub.pid;
    }
    if (stub.dead) {
      return "Stub process '" + stub.name + "' is not healthy.";
    }
  }
  return "";
}

StubProcesses::~StubProcesses()
{
  for (Stub& stub : stubs_) {
    if (!stub.dead) {
      const char command[] = "exit\n";
      if (write(stub.stdin_fd, command, sizeof command - 1) < 0) {
        // The stub is gone already; waitpid below reaps it.
      }
    }
    close(stub.stdin_fd);
  }
  for (Stub& stub : stubs_) {
    if (stub.dead) {
      unlink(stub.region.c_str());
      continue;
    }
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    int status = 0;
    while (waitpid(stub.pid, &status, WNOHANG) == 0) {
      if (Clock::now() >= deadline) {
        kill(stub.pid, SIGKILL);
        waitpid(stub.pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    unlink(stub.region.c_str());
  }
}

}  // namespace tc
