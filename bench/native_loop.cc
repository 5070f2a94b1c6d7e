// bench_native_loop: the baseline bench/infer.ts measures model.infer and
// model.stream against. It uses Triton's C API the way any C++ program
// would at the least, with nothing of the addon in between:
//
//   - dlopen the library named on the command line and resolve the
//     functions of native/triton_api.h (its X-macro list) with dlsym;
//   - start a server on a model repository (EXPLICIT model control, info
//     log off) and load one model;
//   - run N inferences with at most C in flight: the main thread waits for
//     a free slot (mutex + condition variable), then issues the next
//     request; every FINAL response frees one slot;
//   - the response allocator mallocs and its release function frees; the
//     response callback checks the response's error and deletes it; the
//     request release callback deletes the request.
//
// A warm-up of W requests (same concurrency) runs before the timed part.
// Prints one JSON line on stdout, e.g.
//   {"model":"identity_fp32","requests":20000,"elements":16,"concurrency":1,
//    "responses":20000,"seconds":0.21,"perSecond":95238.1}
//
// Usage:
//   bench_native_loop LIBRARY MODEL_REPOSITORY [--model identity_fp32|repeat_int32]
//       [--requests N] [--elements E] [--concurrency C] [--warmup W]
//
// identity_fp32 gets one INPUT0 FP32 tensor of shape [1, E] and answers
// with one response; repeat_int32 (decoupled) gets IN INT32 of shape [E]
// and answers with E responses, then a FINAL flag without a response.
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "native/triton_api.h"

namespace {

struct Api {
#define BENCH_API_FIELD(minor, ret, name, params) TritonFn_##name name = nullptr;
  TRITON_API_FUNCTIONS(BENCH_API_FIELD)
#undef BENCH_API_FIELD
};
Api api;

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "bench_native_loop: %s\n", message.c_str());
  std::exit(1);
}

// Exits with Triton's message when 'err' is an error.
void Check(TRITONSERVER_Error* err, const char* what) {
  if (err == nullptr) return;
  std::string message = std::string(what) + ": " + api.ErrorCodeString(err) +
                        ": " + api.ErrorMessage(err);
  api.ErrorDelete(err);
  Die(message);
}

void LoadApi(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) Die(std::string("dlopen failed: ") + dlerror());
  // Functions newer than the minimum minor this project needs are optional;
  // the loop uses none of them.
#define BENCH_API_RESOLVE(minor, ret, name, params)                         \
  api.name = reinterpret_cast<TritonFn_##name>(                            \
      dlsym(handle, "TRITONSERVER_" #name));                                \
  if (api.name == nullptr && (minor) <= kTritonApiMinMinor)                 \
    Die(std::string(path) + " has no TRITONSERVER_" #name);
  TRITON_API_FUNCTIONS(BENCH_API_RESOLVE)
#undef BENCH_API_RESOLVE
  uint32_t major = 0;
  uint32_t minor = 0;
  Check(api.ApiVersion(&major, &minor), "TRITONSERVER_ApiVersion");
  if (major != kTritonApiMajor || minor < kTritonApiMinMinor)
    Die("unsupported C API version " + std::to_string(major) + "." +
        std::to_string(minor));
  // The library stays loaded until the process exits.
}

// --- completion accounting ---------------------------------------------------

struct Slots {
  std::mutex mutex;
  std::condition_variable changed;
  uint32_t in_flight = 0;
  uint64_t completed = 0;  // requests whose FINAL flag arrived
  uint64_t released = 0;   // requests Triton gave back
  std::atomic<uint64_t> responses{0};
  std::atomic<uint64_t> errors{0};
  std::string first_error;  // guarded by mutex
};
Slots slots;

TRITONSERVER_Error* Allocate(TRITONSERVER_ResponseAllocator*, const char*,
                             size_t byte_size, TRITONSERVER_MemoryType, int64_t,
                             void*, void** buffer, void** buffer_userp,
                             TRITONSERVER_MemoryType* actual_memory_type,
                             int64_t* actual_memory_type_id) {
  *actual_memory_type = TRITONSERVER_MEMORY_CPU;
  *actual_memory_type_id = 0;
  *buffer_userp = nullptr;
  *buffer = byte_size == 0 ? nullptr : std::malloc(byte_size);
  if (byte_size != 0 && *buffer == nullptr)
    return api.ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  return nullptr;
}

TRITONSERVER_Error* ReleaseBuffer(TRITONSERVER_ResponseAllocator*, void* buffer,
                                  void*, size_t, TRITONSERVER_MemoryType,
                                  int64_t) {
  std::free(buffer);
  return nullptr;
}

void OnResponse(TRITONSERVER_InferenceResponse* response, const uint32_t flags,
                void*) {
  if (response != nullptr) {
    if (TRITONSERVER_Error* err = api.InferenceResponseError(response)) {
      if (slots.errors.fetch_add(1) == 0) {
        std::lock_guard<std::mutex> lock(slots.mutex);
        slots.first_error = api.ErrorMessage(err);
      }
      api.ErrorDelete(err);
    }
    api.InferenceResponseDelete(response);
    slots.responses.fetch_add(1, std::memory_order_relaxed);
  }
  if ((flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) == 0) return;
  {
    std::lock_guard<std::mutex> lock(slots.mutex);
    slots.in_flight--;
    slots.completed++;
  }
  slots.changed.notify_all();
}

void OnRelease(TRITONSERVER_InferenceRequest* request, const uint32_t flags,
               void*) {
  if ((flags & TRITONSERVER_REQUEST_RELEASE_ALL) == 0) return;
  api.InferenceRequestDelete(request);
  {
    std::lock_guard<std::mutex> lock(slots.mutex);
    slots.released++;
  }
  slots.changed.notify_all();
}

// --- the workload ------------------------------------------------------------

struct Workload {
  TRITONSERVER_Server* server = nullptr;
  TRITONSERVER_ResponseAllocator* allocator = nullptr;
  std::string model;
  const char* input_name = nullptr;
  TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t byte_size = 0;
  uint32_t concurrency = 1;
};

void Issue(const Workload& w) {
  TRITONSERVER_InferenceRequest* request = nullptr;
  Check(api.InferenceRequestNew(&request, w.server, w.model.c_str(), -1),
        "TRITONSERVER_InferenceRequestNew");
  Check(api.InferenceRequestAddInput(request, w.input_name, w.datatype,
                                     w.shape.data(), w.shape.size()),
        "TRITONSERVER_InferenceRequestAddInput");
  Check(api.InferenceRequestAppendInputData(request, w.input_name, w.data,
                                            w.byte_size,
                                            TRITONSERVER_MEMORY_CPU, 0),
        "TRITONSERVER_InferenceRequestAppendInputData");
  Check(api.InferenceRequestSetReleaseCallback(request, OnRelease, nullptr),
        "TRITONSERVER_InferenceRequestSetReleaseCallback");
  Check(api.InferenceRequestSetResponseCallback(request, w.allocator, nullptr,
                                                OnResponse, nullptr),
        "TRITONSERVER_InferenceRequestSetResponseCallback");
  Check(api.ServerInferAsync(w.server, request, nullptr),
        "TRITONSERVER_ServerInferAsync");
}

// Runs 'count' requests with at most w.concurrency in flight and returns
// once every FINAL flag has arrived.
void Run(const Workload& w, uint64_t count) {
  uint64_t target = 0;
  {
    std::lock_guard<std::mutex> lock(slots.mutex);
    target = slots.completed + count;
  }
  for (uint64_t i = 0; i < count; ++i) {
    {
      std::unique_lock<std::mutex> lock(slots.mutex);
      slots.changed.wait(lock, [&] { return slots.in_flight < w.concurrency; });
      slots.in_flight++;
    }
    Issue(w);
  }
  std::unique_lock<std::mutex> lock(slots.mutex);
  slots.changed.wait(lock, [&] { return slots.completed >= target; });
}

void WaitForReleases() {
  std::unique_lock<std::mutex> lock(slots.mutex);
  slots.changed.wait(lock, [] { return slots.released >= slots.completed; });
}

uint64_t ParseCount(const char* flag, const char* text, uint64_t min) {
  char* end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || value < min)
    Die(std::string(flag) + " needs an integer >= " + std::to_string(min) +
        ", got '" + text + "'");
  return value;
}

[[noreturn]] void Usage() {
  Die("usage: bench_native_loop LIBRARY MODEL_REPOSITORY "
      "[--model identity_fp32|repeat_int32] [--requests N] [--elements E] "
      "[--concurrency C] [--warmup W]");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) Usage();
  const char* library = argv[1];
  const char* repository = argv[2];
  std::string model = "identity_fp32";
  uint64_t requests = 20000;
  uint64_t elements = 16;
  uint64_t concurrency = 1;
  uint64_t warmup = 1000;
  for (int i = 3; i < argc; i += 2) {
    if (i + 1 >= argc) Usage();
    std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--model") model = value;
    else if (flag == "--requests") requests = ParseCount(argv[i], value, 1);
    else if (flag == "--elements") elements = ParseCount(argv[i], value, 1);
    else if (flag == "--concurrency")
      concurrency = ParseCount(argv[i], value, 1);
    else if (flag == "--warmup") warmup = ParseCount(argv[i], value, 0);
    else Usage();
  }
  if (concurrency > UINT32_MAX) Die("--concurrency is too large");

  LoadApi(library);

  Workload w;
  w.model = model;
  w.concurrency = static_cast<uint32_t>(concurrency);
  std::vector<float> fp32;
  std::vector<int32_t> int32;
  if (model == "identity_fp32") {
    fp32.resize(elements);
    for (uint64_t i = 0; i < elements; ++i) fp32[i] = static_cast<float>(i);
    w.input_name = "INPUT0";
    w.datatype = TRITONSERVER_TYPE_FP32;
    w.shape = {1, static_cast<int64_t>(elements)};
    w.data = fp32.data();
    w.byte_size = fp32.size() * sizeof(float);
  } else if (model == "repeat_int32") {
    int32.resize(elements);
    for (uint64_t i = 0; i < elements; ++i) int32[i] = static_cast<int32_t>(i);
    w.input_name = "IN";
    w.datatype = TRITONSERVER_TYPE_INT32;
    w.shape = {static_cast<int64_t>(elements)};
    w.data = int32.data();
    w.byte_size = int32.size() * sizeof(int32_t);
  } else {
    Die("unknown --model '" + model + "' (identity_fp32 or repeat_int32)");
  }

  TRITONSERVER_ServerOptions* options = nullptr;
  Check(api.ServerOptionsNew(&options), "TRITONSERVER_ServerOptionsNew");
  Check(api.ServerOptionsSetModelRepositoryPath(options, repository),
        "TRITONSERVER_ServerOptionsSetModelRepositoryPath");
  Check(api.ServerOptionsSetModelControlMode(options,
                                             TRITONSERVER_MODEL_CONTROL_EXPLICIT),
        "TRITONSERVER_ServerOptionsSetModelControlMode");
  Check(api.ServerOptionsSetLogInfo(options, false),
        "TRITONSERVER_ServerOptionsSetLogInfo");
  Check(api.ServerNew(&w.server, options), "TRITONSERVER_ServerNew");
  Check(api.ServerOptionsDelete(options), "TRITONSERVER_ServerOptionsDelete");
  Check(api.ServerLoadModel(w.server, model.c_str()),
        "TRITONSERVER_ServerLoadModel");
  Check(api.ResponseAllocatorNew(&w.allocator, Allocate, ReleaseBuffer,
                                 nullptr),
        "TRITONSERVER_ResponseAllocatorNew");

  Run(w, warmup);
  WaitForReleases();
  const uint64_t responses_before = slots.responses.load();

  const auto start = std::chrono::steady_clock::now();
  Run(w, requests);
  const auto end = std::chrono::steady_clock::now();
  WaitForReleases();

  const uint64_t responses = slots.responses.load() - responses_before;
  if (slots.errors.load() != 0) {
    std::lock_guard<std::mutex> lock(slots.mutex);
    Die(std::to_string(slots.errors.load()) +
        " responses carried an error, the first: " + slots.first_error);
  }

  Check(api.ResponseAllocatorDelete(w.allocator),
        "TRITONSERVER_ResponseAllocatorDelete");
  Check(api.ServerStop(w.server), "TRITONSERVER_ServerStop");
  Check(api.ServerDelete(w.server), "TRITONSERVER_ServerDelete");

  const double seconds = std::chrono::duration<double>(end - start).count();
  std::printf(
      "{\"model\":\"%s\",\"requests\":%llu,\"elements\":%llu,"
      "\"concurrency\":%llu,\"responses\":%llu,\"seconds\":%.6f,"
      "\"perSecond\":%.1f}\n",
      model.c_str(), static_cast<unsigned long long>(requests),
      static_cast<unsigned long long>(elements),
      static_cast<unsigned long long>(concurrency),
      static_cast<unsigned long long>(responses), seconds,
      static_cast<double>(requests) / seconds);
  return 0;
}
