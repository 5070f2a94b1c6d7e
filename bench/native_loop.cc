// bench_native_loop: the baseline the benchmarks (bench/perf.ts,
// bench/infer.ts) measure model.infer and model.stream against. It uses
// Triton's C API the way any C++ program would at the least, with nothing
// of the addon in between:
//
//   - dlopen the library named on the command line and resolve the
//     functions of native/core/triton_api.h (its X-macro list) with dlsym;
//   - start a server on a model repository (EXPLICIT model control, info
//     log off) and load one model;
//   - run N inferences (or as many as fit in --duration seconds) with at
//     most C in flight: the main thread waits for a free slot (mutex +
//     condition variable), then issues the next request; every FINAL
//     response frees one slot and records the request's latency (issue to
//     FINAL, steady clock);
//   - the response allocator mallocs and its release function frees; the
//     response callback checks the response's error and deletes it; the
//     request release callback deletes the request.
//
// A warm-up of W requests (same concurrency) runs before the timed part.
// Prints one JSON line on stdout, e.g.
//   {"model":"identity_fp32","requests":20000,"elements":16,"concurrency":1,
//    "responses":20000,"seconds":0.21,"perSecond":95238.1,
//    "latencyUs":{"p50":9.1,"p90":11.0,"p99":20.3,"max":150.2,"mean":9.8},
//    "issuerCpuUsPerRequest":1.9,"processCpuUsPerRequest":7.4}
// issuerCpuUsPerRequest is the main (issuing) thread's CPU time over the
// timed part (CLOCK_THREAD_CPUTIME_ID) per request, the counterpart of the
// binding's JS-thread CPU; processCpuUsPerRequest is getrusage(RUSAGE_SELF)
// user + system, all threads (Triton's too), per request.
//
// Usage:
//   bench_native_loop LIBRARY MODEL_REPOSITORY [--model NAME]
//       [--input NAME] [--datatype FP32|INT32|BYTES] [--shape D0,D1,...]
//       [--elements E] [--string-length L] [--requests N] [--duration S]
//       [--concurrency C] [--warmup W] [--backend-directory DIR]
//       [--zeros NAME:DATATYPE:D0,D1,...]...
//
// Defaults follow the model: identity_fp32 gets INPUT0 FP32 [1, E] and
// answers with one response; identity_bytes gets INPUT0 BYTES [1, E] of
// short strings ("item-<i>", or L bytes with --string-length); repeat_int32
// (decoupled) gets IN INT32 [E] and answers with E responses, then a FINAL
// flag without a response. --shape replaces the [1, E] / [E] default.
// Each --zeros adds one more input of zeros (the other inputs a model
// requires, e.g. the repeat backend's DELAY and WAIT).
#include <dlfcn.h>
#include <sys/resource.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "native/core/triton_api.h"

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
  bool recording = false;           // guarded by mutex: timed phase
  std::vector<double> latencies_us;  // guarded by mutex
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

using Clock = std::chrono::steady_clock;

// One per request in flight: when it was issued.
struct RequestTiming {
  Clock::time_point issued;
};

void OnResponse(TRITONSERVER_InferenceResponse* response, const uint32_t flags,
                void* userp) {
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
  auto* timing = static_cast<RequestTiming*>(userp);
  const double latency_us =
      std::chrono::duration<double, std::micro>(Clock::now() - timing->issued)
          .count();
  delete timing;
  {
    std::lock_guard<std::mutex> lock(slots.mutex);
    if (slots.recording) slots.latencies_us.push_back(latency_us);
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
  struct ZeroInput {
    std::string name;
    TRITONSERVER_DataType datatype;
    std::vector<int64_t> shape;
    std::vector<char> bytes;
  };
  std::vector<ZeroInput> zeros;
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
  for (const Workload::ZeroInput& z : w.zeros) {
    Check(api.InferenceRequestAddInput(request, z.name.c_str(), z.datatype,
                                       z.shape.data(), z.shape.size()),
          "TRITONSERVER_InferenceRequestAddInput");
    Check(api.InferenceRequestAppendInputData(request, z.name.c_str(),
                                              z.bytes.data(), z.bytes.size(),
                                              TRITONSERVER_MEMORY_CPU, 0),
          "TRITONSERVER_InferenceRequestAppendInputData");
  }
  Check(api.InferenceRequestSetReleaseCallback(request, OnRelease, nullptr),
        "TRITONSERVER_InferenceRequestSetReleaseCallback");
  auto* timing = new RequestTiming{Clock::now()};
  Check(api.InferenceRequestSetResponseCallback(request, w.allocator, nullptr,
                                                OnResponse, timing),
        "TRITONSERVER_InferenceRequestSetResponseCallback");
  Check(api.ServerInferAsync(w.server, request, nullptr),
        "TRITONSERVER_ServerInferAsync");
}

// Runs 'count' requests (or, with seconds > 0, as many as are issued
// before that much time has passed) with at most w.concurrency in flight;
// returns the number issued once every FINAL flag has arrived.
uint64_t Run(const Workload& w, uint64_t count, double seconds) {
  uint64_t target = 0;
  {
    std::lock_guard<std::mutex> lock(slots.mutex);
    target = slots.completed;
  }
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(seconds));
  uint64_t issued = 0;
  while (seconds > 0 ? Clock::now() < deadline : issued < count) {
    {
      std::unique_lock<std::mutex> lock(slots.mutex);
      slots.changed.wait(lock, [&] { return slots.in_flight < w.concurrency; });
      slots.in_flight++;
    }
    Issue(w);
    issued++;
  }
  target += issued;
  std::unique_lock<std::mutex> lock(slots.mutex);
  slots.changed.wait(lock, [&] { return slots.completed >= target; });
  return issued;
}

// Nearest-rank percentile of sorted values.
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(p / 100.0 * sorted.size() + 0.999999);
  if (rank < 1) rank = 1;
  if (rank > sorted.size()) rank = sorted.size();
  return sorted[rank - 1];
}

std::vector<int64_t> ParseShape(const char* text) {
  std::vector<int64_t> shape;
  std::string s = text;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    std::string part = s.substr(start, comma - start);
    char* end = nullptr;
    long long value = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || value < 1)
      Die(std::string("--shape needs positive integers separated by commas, got '") +
          text + "'");
    shape.push_back(value);
    start = comma + 1;
  }
  return shape;
}

// CPU time of the calling thread, µs.
double ThreadCpuUs() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
    Die("clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
  return static_cast<double>(ts.tv_sec) * 1e6 +
         static_cast<double>(ts.tv_nsec) / 1e3;
}

// User + system CPU time of the whole process (every thread), µs.
double ProcessCpuUs() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) Die("getrusage failed");
  auto us = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) * 1e6 +
           static_cast<double>(tv.tv_usec);
  };
  return us(usage.ru_utime) + us(usage.ru_stime);
}

void WaitForReleases() {
  std::unique_lock<std::mutex> lock(slots.mutex);
  slots.changed.wait(lock, [] { return slots.released >= slots.completed; });
}

// NAME:DATATYPE:D0,D1,... → an input of zeros (numeric data types only).
Workload::ZeroInput ParseZeros(const char* text) {
  static const std::pair<const char*, std::pair<TRITONSERVER_DataType, size_t>> kTypes[] = {
      {"BOOL", {TRITONSERVER_TYPE_BOOL, 1}},     {"UINT8", {TRITONSERVER_TYPE_UINT8, 1}},
      {"UINT16", {TRITONSERVER_TYPE_UINT16, 2}}, {"UINT32", {TRITONSERVER_TYPE_UINT32, 4}},
      {"UINT64", {TRITONSERVER_TYPE_UINT64, 8}}, {"INT8", {TRITONSERVER_TYPE_INT8, 1}},
      {"INT16", {TRITONSERVER_TYPE_INT16, 2}},   {"INT32", {TRITONSERVER_TYPE_INT32, 4}},
      {"INT64", {TRITONSERVER_TYPE_INT64, 8}},   {"FP16", {TRITONSERVER_TYPE_FP16, 2}},
      {"FP32", {TRITONSERVER_TYPE_FP32, 4}},     {"FP64", {TRITONSERVER_TYPE_FP64, 8}},
      {"BF16", {TRITONSERVER_TYPE_BF16, 2}}};
  const std::string s = text;
  const size_t a = s.find(':');
  const size_t b = a == std::string::npos ? a : s.find(':', a + 1);
  if (b == std::string::npos)
    Die(std::string("--zeros needs NAME:DATATYPE:D0,D1,..., got '") + text + "'");
  Workload::ZeroInput z;
  z.name = s.substr(0, a);
  const std::string type = s.substr(a + 1, b - a - 1);
  size_t element_size = 0;
  for (const auto& [name, info] : kTypes)
    if (type == name) std::tie(z.datatype, element_size) = info;
  if (element_size == 0) Die("--zeros: '" + type + "' is not a numeric data type");
  z.shape = ParseShape(s.c_str() + b + 1);
  size_t count = 1;
  for (int64_t d : z.shape) count *= static_cast<size_t>(d);
  z.bytes.assign(count * element_size, 0);
  return z;
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
  Die("usage: bench_native_loop LIBRARY MODEL_REPOSITORY [--model NAME] "
      "[--input NAME] [--datatype FP32|INT32|BYTES] [--shape D0,D1,...] "
      "[--elements E] [--string-length L] [--requests N] [--duration S] "
      "[--concurrency C] [--warmup W] [--backend-directory DIR] "
      "[--zeros NAME:DATATYPE:D0,D1,...]...");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) Usage();
  const char* library = argv[1];
  const char* repository = argv[2];
  std::string model = "identity_fp32";
  std::string backend_directory;
  std::string input;
  std::string datatype;
  std::vector<int64_t> shape;
  std::vector<Workload::ZeroInput> zeros;
  uint64_t requests = 20000;
  uint64_t elements = 16;
  uint64_t string_length = 0;
  double duration = 0;
  uint64_t concurrency = 1;
  uint64_t warmup = 1000;
  for (int i = 3; i < argc; i += 2) {
    if (i + 1 >= argc) Usage();
    std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--model") model = value;
    else if (flag == "--input") input = value;
    else if (flag == "--backend-directory") backend_directory = value;
    else if (flag == "--datatype") datatype = value;
    else if (flag == "--shape") shape = ParseShape(value);
    else if (flag == "--zeros") zeros.push_back(ParseZeros(value));
    else if (flag == "--requests") requests = ParseCount(argv[i], value, 1);
    else if (flag == "--elements") elements = ParseCount(argv[i], value, 1);
    else if (flag == "--string-length")
      string_length = ParseCount(argv[i], value, 1);
    else if (flag == "--duration") {
      char* end = nullptr;
      duration = std::strtod(value, &end);
      if (end == value || *end != '\0' || !(duration > 0))
        Die(std::string("--duration needs seconds > 0, got '") + value + "'");
    } else if (flag == "--concurrency")
      concurrency = ParseCount(argv[i], value, 1);
    else if (flag == "--warmup") warmup = ParseCount(argv[i], value, 0);
    else Usage();
  }
  if (concurrency > UINT32_MAX) Die("--concurrency is too large");

  // Defaults by model; explicit flags win.
  const bool decoupled_repeat = model == "repeat_int32";
  if (input.empty()) input = decoupled_repeat ? "IN" : "INPUT0";
  if (datatype.empty()) {
    if (decoupled_repeat) datatype = "INT32";
    else if (model == "identity_bytes" || model == "bytes_echo") datatype = "BYTES";
    else datatype = "FP32";
  }
  if (shape.empty()) {
    if (decoupled_repeat) shape = {static_cast<int64_t>(elements)};
    else shape = {1, static_cast<int64_t>(elements)};
  }
  uint64_t count = 1;
  for (int64_t d : shape) count *= static_cast<uint64_t>(d);

  LoadApi(library);

  Workload w;
  w.model = model;
  w.concurrency = static_cast<uint32_t>(concurrency);
  w.input_name = input.c_str();
  w.shape = shape;
  w.zeros = std::move(zeros);
  std::vector<float> fp32;
  std::vector<int32_t> int32;
  std::vector<char> bytes;
  if (datatype == "FP32") {
    fp32.resize(count);
    for (uint64_t i = 0; i < count; ++i) fp32[i] = static_cast<float>(i);
    w.datatype = TRITONSERVER_TYPE_FP32;
    w.data = fp32.data();
    w.byte_size = fp32.size() * sizeof(float);
  } else if (datatype == "INT32") {
    int32.resize(count);
    for (uint64_t i = 0; i < count; ++i) int32[i] = static_cast<int32_t>(i);
    w.datatype = TRITONSERVER_TYPE_INT32;
    w.data = int32.data();
    w.byte_size = int32.size() * sizeof(int32_t);
  } else if (datatype == "BYTES") {
    // Triton's BYTES wire form: per element a 4-byte little-endian length,
    // then the bytes. The same strings bench/perf.ts sends.
    for (uint64_t i = 0; i < count; ++i) {
      std::string element = string_length > 0 ? std::string(string_length, 'x')
                                              : "item-" + std::to_string(i);
      const uint32_t length = static_cast<uint32_t>(element.size());
      for (int b = 0; b < 4; ++b)
        bytes.push_back(static_cast<char>((length >> (8 * b)) & 0xff));
      bytes.insert(bytes.end(), element.begin(), element.end());
    }
    w.datatype = TRITONSERVER_TYPE_BYTES;
    w.data = bytes.data();
    w.byte_size = bytes.size();
  } else {
    Die("unknown --datatype '" + datatype + "' (FP32, INT32 or BYTES)");
  }

  TRITONSERVER_ServerOptions* options = nullptr;
  Check(api.ServerOptionsNew(&options), "TRITONSERVER_ServerOptionsNew");
  Check(api.ServerOptionsSetModelRepositoryPath(options, repository),
        "TRITONSERVER_ServerOptionsSetModelRepositoryPath");
  Check(api.ServerOptionsSetModelControlMode(options,
                                             TRITONSERVER_MODEL_CONTROL_EXPLICIT),
        "TRITONSERVER_ServerOptionsSetModelControlMode");
  if (!backend_directory.empty())
    Check(api.ServerOptionsSetBackendDirectory(options,
                                               backend_directory.c_str()),
          "TRITONSERVER_ServerOptionsSetBackendDirectory");
  Check(api.ServerOptionsSetLogInfo(options, false),
        "TRITONSERVER_ServerOptionsSetLogInfo");
  Check(api.ServerNew(&w.server, options), "TRITONSERVER_ServerNew");
  Check(api.ServerOptionsDelete(options), "TRITONSERVER_ServerOptionsDelete");
  Check(api.ServerLoadModel(w.server, model.c_str()),
        "TRITONSERVER_ServerLoadModel");
  Check(api.ResponseAllocatorNew(&w.allocator, Allocate, ReleaseBuffer,
                                 nullptr),
        "TRITONSERVER_ResponseAllocatorNew");

  Run(w, warmup, 0);
  WaitForReleases();
  const uint64_t responses_before = slots.responses.load();
  {
    std::lock_guard<std::mutex> lock(slots.mutex);
    slots.latencies_us.reserve(duration > 0 ? 1 << 20 : requests);
    slots.recording = true;
  }

  const double thread_cpu_start = ThreadCpuUs();
  const double process_cpu_start = ProcessCpuUs();
  const auto start = Clock::now();
  requests = Run(w, requests, duration);
  const auto end = Clock::now();
  const double thread_cpu_us = ThreadCpuUs() - thread_cpu_start;
  const double process_cpu_us = ProcessCpuUs() - process_cpu_start;
  WaitForReleases();
  std::vector<double> latencies;
  {
    std::lock_guard<std::mutex> lock(slots.mutex);
    slots.recording = false;
    latencies.swap(slots.latencies_us);
  }
  std::sort(latencies.begin(), latencies.end());
  double latency_sum = 0;
  for (double l : latencies) latency_sum += l;

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
      "\"perSecond\":%.1f,\"latencyUs\":{\"p50\":%.2f,\"p90\":%.2f,"
      "\"p99\":%.2f,\"max\":%.2f,\"mean\":%.2f},"
      "\"issuerCpuUsPerRequest\":%.3f,\"processCpuUsPerRequest\":%.3f}\n",
      model.c_str(), static_cast<unsigned long long>(requests),
      static_cast<unsigned long long>(count),
      static_cast<unsigned long long>(concurrency),
      static_cast<unsigned long long>(responses), seconds,
      static_cast<double>(requests) / seconds, Percentile(latencies, 50),
      Percentile(latencies, 90), Percentile(latencies, 99),
      latencies.empty() ? 0.0 : latencies.back(),
      latencies.empty() ? 0.0 : latency_sum / latencies.size(),
      thread_cpu_us / static_cast<double>(requests),
      process_cpu_us / static_cast<double>(requests));
  return 0;
}
