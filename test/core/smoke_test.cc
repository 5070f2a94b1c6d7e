// Smoke test of the test core: loads build/testcore/libtritonserver.so with
// dlopen (like the addon does), starts a server on test/models in EXPLICIT
// mode and checks inference, callback order and threads, JSON shapes and
// the error messages recorded in TRITON_FACTS.md. Exit code 0 on success.
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <dirent.h>
#include <unordered_map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "native/core/backend_api.h"
#include "native/core/triton_api.h"

namespace {

struct Api {
#define TC_FIELD(minor, ret, name, params) TritonFn_##name name = nullptr;
  TRITON_API_FUNCTIONS(TC_FIELD)
#undef TC_FIELD
};
Api api;
int failures = 0;

#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__,     \
                   __LINE__, #cond);                                  \
      ++failures;                                                     \
    }                                                                 \
  } while (false)

#define CHECK_OK(expr)                                                \
  do {                                                                \
    TRITONSERVER_Error* e__ = (expr);                                 \
    if (e__ != nullptr) {                                             \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__,        \
                   __LINE__, #expr, api.ErrorMessage(e__));           \
      api.ErrorDelete(e__);                                           \
      ++failures;                                                     \
    }                                                                 \
  } while (false)

// Checks that 'err' has the code and message, then frees it.
void
ExpectError(
    TRITONSERVER_Error* err, TRITONSERVER_Error_Code code,
    const std::string& msg, int line)
{
  if (err == nullptr) {
    std::fprintf(stderr, "line %d: expected an error, got success\n", line);
    ++failures;
    return;
  }
  if (api.ErrorCode(err) != code || msg != api.ErrorMessage(err)) {
    std::fprintf(
        stderr, "line %d: expected [%d] '%s', got [%d] '%s'\n", line,
        static_cast<int>(code), msg.c_str(),
        static_cast<int>(api.ErrorCode(err)), api.ErrorMessage(err));
    ++failures;
  }
  api.ErrorDelete(err);
}
#define EXPECT_ERROR(expr, code, msg) ExpectError((expr), (code), (msg), __LINE__)

std::string
MessageJson(TRITONSERVER_Message* m)
{
  const char* base = nullptr;
  size_t size = 0;
  CHECK_OK(api.MessageSerializeToJson(m, &base, &size));
  std::string s(base, size);
  CHECK_OK(api.MessageDelete(m));
  return s;
}

// ---- allocator and callbacks ----
std::atomic<int> alloc_calls{0}, release_calls{0}, query_calls{0};
std::thread::id alloc_thread;
int allocator_tag = 42;

TRITONSERVER_Error*
Alloc(
    TRITONSERVER_ResponseAllocator*, const char*, size_t byte_size,
    TRITONSERVER_MemoryType memory_type, int64_t memory_type_id, void* userp,
    void** buffer, void** buffer_userp, TRITONSERVER_MemoryType* actual_type,
    int64_t* actual_id)
{
  ++alloc_calls;
  alloc_thread = std::this_thread::get_id();
  CHECK(memory_type == TRITONSERVER_MEMORY_CPU);
  CHECK(memory_type_id == 0);
  CHECK(userp == &allocator_tag);
  *buffer = byte_size == 0 ? nullptr : std::malloc(byte_size);
  *buffer_userp = reinterpret_cast<void*>(static_cast<uintptr_t>(byte_size));
  *actual_type = TRITONSERVER_MEMORY_CPU;
  *actual_id = 0;
  return nullptr;
}

TRITONSERVER_Error*
Release(
    TRITONSERVER_ResponseAllocator*, void* buffer, void* buffer_userp,
    size_t byte_size, TRITONSERVER_MemoryType, int64_t)
{
  ++release_calls;
  CHECK(reinterpret_cast<uintptr_t>(buffer_userp) == byte_size);
  std::free(buffer);
  return nullptr;
}

TRITONSERVER_Error*
Query(
    TRITONSERVER_ResponseAllocator*, void* userp, const char*, size_t*,
    TRITONSERVER_MemoryType* memory_type, int64_t* memory_type_id)
{
  ++query_calls;
  CHECK(userp == &allocator_tag);
  *memory_type = TRITONSERVER_MEMORY_CPU;
  *memory_type_id = 0;
  return nullptr;
}

struct Event {
  enum Kind { kResponse, kRelease } kind;
  TRITONSERVER_InferenceResponse* response;
  uint32_t flags;
  std::thread::id thread;
};

struct Inbox {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Event> events;
  bool final_seen = false;
  bool released = false;

  void Wait()
  {
    std::unique_lock<std::mutex> lk(mu);
    const bool ok = cv.wait_for(lk, std::chrono::seconds(10), [this] {
      return final_seen && released;
    });
    CHECK(ok);
  }
};

void
OnResponse(TRITONSERVER_InferenceResponse* response, const uint32_t flags, void* userp)
{
  Inbox* in = static_cast<Inbox*>(userp);
  std::lock_guard<std::mutex> lk(in->mu);
  in->events.push_back(
      {Event::kResponse, response, flags, std::this_thread::get_id()});
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) {
    in->final_seen = true;
  }
  in->cv.notify_all();
}

void
OnRelease(TRITONSERVER_InferenceRequest*, const uint32_t flags, void* userp)
{
  Inbox* in = static_cast<Inbox*>(userp);
  std::lock_guard<std::mutex> lk(in->mu);
  CHECK(flags == TRITONSERVER_REQUEST_RELEASE_ALL);
  in->events.push_back({Event::kRelease, nullptr, flags, std::this_thread::get_id()});
  in->released = true;
  in->cv.notify_all();
}

TRITONSERVER_ResponseAllocator* allocator = nullptr;

TRITONSERVER_InferenceRequest*
NewRequest(TRITONSERVER_Server* server, const char* model, Inbox* inbox)
{
  TRITONSERVER_InferenceRequest* r = nullptr;
  CHECK_OK(api.InferenceRequestNew(&r, server, model, -1));
  if (r == nullptr) {
    std::exit(1);
  }
  CHECK_OK(api.InferenceRequestSetId(r, "req-1"));
  CHECK_OK(api.InferenceRequestSetReleaseCallback(r, OnRelease, inbox));
  CHECK_OK(api.InferenceRequestSetResponseCallback(
      r, allocator, &allocator_tag, OnResponse, inbox));
  return r;
}

template <typename T>
std::vector<T>
OutputValues(TRITONSERVER_InferenceResponse* resp, uint32_t index, std::string* name,
             std::vector<int64_t>* shape)
{
  const char* n;
  TRITONSERVER_DataType dt;
  const int64_t* s;
  uint64_t dims;
  const void* base;
  size_t size;
  TRITONSERVER_MemoryType mt;
  int64_t mid;
  void* userp;
  CHECK_OK(api.InferenceResponseOutput(
      resp, index, &n, &dt, &s, &dims, &base, &size, &mt, &mid, &userp));
  *name = n;
  shape->assign(s, s + dims);
  std::vector<T> v(size / sizeof(T));
  std::memcpy(v.data(), base, size);
  CHECK(mt == TRITONSERVER_MEMORY_CPU);
  CHECK(reinterpret_cast<uintptr_t>(userp) == size);
  return v;
}

int
ThreadCount()
{
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) {
    return -1;
  }
  while (struct dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') {
      ++n;
    }
  }
  closedir(d);
  return n;
}

// The thread count once it reaches `expected`, or after 30 s: threads a
// deleted server or a backend detached end on their own, later on a busy
// machine (a count read at once failed under load).
int
ThreadCountSettled(int expected)
{
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int n = ThreadCount();
  while (n != expected && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    n = ThreadCount();
  }
  if (n != expected) {
    std::fprintf(stderr, "%d threads left, %d at start (gdb's `thread apply all bt` says whose)\n", n, expected);
  }
  return n;
}

TRITONSERVER_Server*
StartServer(TRITONSERVER_ModelControlMode mode, const char* repo)
{
  TRITONSERVER_ServerOptions* opts = nullptr;
  CHECK_OK(api.ServerOptionsNew(&opts));
  CHECK_OK(api.ServerOptionsSetModelRepositoryPath(opts, repo));
  CHECK_OK(api.ServerOptionsSetModelControlMode(opts, mode));
  CHECK_OK(api.ServerOptionsSetLogInfo(opts, false));
  CHECK_OK(api.ServerOptionsSetLogError(opts, false));
  CHECK_OK(api.ServerOptionsSetLogWarn(opts, false));
  CHECK_OK(api.ServerOptionsSetExitTimeout(opts, 5));
  TRITONSERVER_Server* server = nullptr;
  CHECK_OK(api.ServerNew(&server, opts));
  CHECK_OK(api.ServerOptionsDelete(opts));
  return server;
}

void
TestIdentity(TRITONSERVER_Server* server)
{
  Inbox inbox;
  TRITONSERVER_InferenceRequest* r = NewRequest(server, "identity_fp32", &inbox);
  const int64_t shape[] = {2, 3};
  const float data[] = {1, 2, 3, 4, 5, 6};
  CHECK_OK(api.InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 2));
  // Two chunks.
  CHECK_OK(api.InferenceRequestAppendInputData(
      r, "INPUT0", data, 2 * sizeof(float), TRITONSERVER_MEMORY_CPU, 0));
  CHECK_OK(api.InferenceRequestAppendInputData(
      r, "INPUT0", data + 2, 4 * sizeof(float), TRITONSERVER_MEMORY_CPU, 0));
  const int before = alloc_calls.load();
  CHECK_OK(api.ServerInferAsync(server, r, nullptr));
  inbox.Wait();
  CHECK(alloc_calls.load() == before + 1);
  CHECK(alloc_thread != std::this_thread::get_id());
  CHECK(inbox.events.size() == 2);
  if (inbox.events.size() == 2) {
    CHECK(inbox.events[0].kind == Event::kResponse);
    CHECK(inbox.events[0].flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL);
    CHECK(inbox.events[0].thread != std::this_thread::get_id());
    CHECK(inbox.events[1].kind == Event::kRelease);
    CHECK(inbox.events[1].thread == inbox.events[0].thread);
    TRITONSERVER_InferenceResponse* resp = inbox.events[0].response;
    CHECK_OK(api.InferenceResponseError(resp));
    const char* id = nullptr;
    CHECK_OK(api.InferenceResponseId(resp, &id));
    CHECK(std::string(id) == "req-1");
    const char* mname = nullptr;
    int64_t mversion = 0;
    CHECK_OK(api.InferenceResponseModel(resp, &mname, &mversion));
    CHECK(std::string(mname) == "identity_fp32" && mversion == 1);
    uint32_t count = 0;
    CHECK_OK(api.InferenceResponseOutputCount(resp, &count));
    CHECK(count == 1);
    std::string name;
    std::vector<int64_t> oshape;
    auto v = OutputValues<float>(resp, 0, &name, &oshape);
    CHECK(name == "OUTPUT0");
    CHECK((oshape == std::vector<int64_t>{2, 3}));
    CHECK((v == std::vector<float>{1, 2, 3, 4, 5, 6}));
    const int released = release_calls.load();
    CHECK_OK(api.InferenceResponseDelete(resp));
    CHECK(release_calls.load() == released + 1);
  }
  CHECK_OK(api.InferenceRequestDelete(r));
}

void
TestAddSub(TRITONSERVER_Server* server)
{
  Inbox inbox;
  TRITONSERVER_InferenceRequest* r = NewRequest(server, "add_sub", &inbox);
  const int64_t shape[] = {4};
  const float a[] = {1, 2, 3, 4};
  const float b[] = {10, 20, 30, 40};
  CHECK_OK(api.InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1));
  CHECK_OK(api.InferenceRequestAddInput(r, "INPUT1", TRITONSERVER_TYPE_FP32, shape, 1));
  CHECK_OK(api.InferenceRequestAppendInputData(r, "INPUT0", a, sizeof(a), TRITONSERVER_MEMORY_CPU, 0));
  CHECK_OK(api.InferenceRequestAppendInputData(r, "INPUT1", b, sizeof(b), TRITONSERVER_MEMORY_CPU, 0));
  CHECK_OK(api.ServerInferAsync(server, r, nullptr));
  inbox.Wait();
  CHECK(inbox.events.size() == 2);
  if (inbox.events.size() == 2) {
    TRITONSERVER_InferenceResponse* resp = inbox.events[0].response;
    uint32_t count = 0;
    CHECK_OK(api.InferenceResponseOutputCount(resp, &count));
    CHECK(count == 2);
    std::string n0, n1;
    std::vector<int64_t> s0, s1;
    CHECK((OutputValues<float>(resp, 0, &n0, &s0) == std::vector<float>{11, 22, 33, 44}));
    CHECK((OutputValues<float>(resp, 1, &n1, &s1) == std::vector<float>{-9, -18, -27, -36}));
    CHECK(n0 == "OUTPUT0" && n1 == "OUTPUT1");
    CHECK((s0 == std::vector<int64_t>{4}));
    EXPECT_ERROR(
        api.InferenceResponseOutputCount(resp, nullptr),
        TRITONSERVER_ERROR_INVALID_ARG,
        "test core: argument 'count' must not be null");
    CHECK_OK(api.InferenceResponseDelete(resp));
  }
  CHECK_OK(api.InferenceRequestDelete(r));
}

void
TestRepeat(TRITONSERVER_Server* server)
{
  Inbox inbox;
  TRITONSERVER_InferenceRequest* r = NewRequest(server, "repeat_int32", &inbox);
  const int64_t shape[] = {3};
  const int32_t data[] = {7, 8, 9};
  CHECK_OK(api.InferenceRequestAddInput(r, "IN", TRITONSERVER_TYPE_INT32, shape, 1));
  CHECK_OK(api.InferenceRequestAppendInputData(r, "IN", data, sizeof(data), TRITONSERVER_MEMORY_CPU, 0));
  CHECK_OK(api.ServerInferAsync(server, r, nullptr));
  inbox.Wait();
  // release first, then 3 responses with flags 0, then NULL + FINAL
  CHECK(inbox.events.size() == 5);
  if (inbox.events.size() == 5) {
    CHECK(inbox.events[0].kind == Event::kRelease);
    for (int i = 1; i <= 3; ++i) {
      CHECK(inbox.events[i].kind == Event::kResponse);
      CHECK(inbox.events[i].flags == 0);
      CHECK(inbox.events[i].response != nullptr);
      CHECK(inbox.events[i].thread != std::this_thread::get_id());
      std::string name;
      std::vector<int64_t> oshape;
      auto v = OutputValues<int32_t>(inbox.events[i].response, 0, &name, &oshape);
      CHECK(name == "OUT");
      CHECK((oshape == std::vector<int64_t>{1}));
      CHECK(v.size() == 1 && v[0] == data[i - 1]);
      CHECK_OK(api.InferenceResponseDelete(inbox.events[i].response));
    }
    CHECK(inbox.events[4].response == nullptr);
    CHECK(inbox.events[4].flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL);
  }
  CHECK_OK(api.InferenceRequestDelete(r));

  // Cancel mid-stream: long delay, cancel after the first response.
  Inbox inbox2;
  r = NewRequest(server, "repeat_int32", &inbox2);
  const int32_t many[] = {1, 2, 3, 4, 5, 6, 7, 8};
  const int64_t shape8[] = {8};
  const int64_t shape1[] = {1};
  const uint32_t delay = 50;
  CHECK_OK(api.InferenceRequestAddInput(r, "IN", TRITONSERVER_TYPE_INT32, shape8, 1));
  CHECK_OK(api.InferenceRequestAppendInputData(r, "IN", many, sizeof(many), TRITONSERVER_MEMORY_CPU, 0));
  CHECK_OK(api.InferenceRequestAddInput(r, "DELAY_MS", TRITONSERVER_TYPE_UINT32, shape1, 1));
  CHECK_OK(api.InferenceRequestAppendInputData(r, "DELAY_MS", &delay, sizeof(delay), TRITONSERVER_MEMORY_CPU, 0));
  CHECK_OK(api.ServerInferAsync(server, r, nullptr));
  {
    std::unique_lock<std::mutex> lk(inbox2.mu);
    inbox2.cv.wait_for(lk, std::chrono::seconds(10), [&] { return inbox2.events.size() >= 2; });
  }
  CHECK_OK(api.InferenceRequestCancel(r));
  inbox2.Wait();
  const Event& last = inbox2.events.back();
  CHECK(last.flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL);
  CHECK(inbox2.events.size() < 10);
  if (last.response != nullptr) {
    TRITONSERVER_Error* e = api.InferenceResponseError(last.response);
    CHECK(e != nullptr);
    if (e != nullptr) {
      CHECK(api.ErrorCode(e) == TRITONSERVER_ERROR_CANCELLED);
      CHECK(std::string(api.ErrorMessage(e)) == "request cancelled");
      api.ErrorDelete(e);
    }
  }
  for (auto& ev : inbox2.events) {
    if (ev.response != nullptr) {
      CHECK_OK(api.InferenceResponseDelete(ev.response));
    }
  }
  CHECK_OK(api.InferenceRequestDelete(r));
}

void
TestErrors(TRITONSERVER_Server* server)
{
  TRITONSERVER_InferenceRequest* r = nullptr;
  EXPECT_ERROR(
      api.InferenceRequestNew(&r, server, "does_not_exist", -1),
      TRITONSERVER_ERROR_NOT_FOUND,
      "Request for unknown model: 'does_not_exist' is not found");
  EXPECT_ERROR(
      api.InferenceRequestNew(&r, server, "identity_fp32", 7),
      TRITONSERVER_ERROR_NOT_FOUND,
      "Request for unknown model: 'identity_fp32' version 7 is not found");
  TRITONSERVER_Message* msg = nullptr;
  EXPECT_ERROR(
      api.ServerModelMetadata(server, "does_not_exist", -1, &msg),
      TRITONSERVER_ERROR_NOT_FOUND,
      "Request for unknown model: 'does_not_exist' is not found");

  // Wrong data type: synchronous error, no callback.
  Inbox inbox;
  r = NewRequest(server, "identity_fp32", &inbox);
  const int64_t shape[] = {1, 2};
  const int32_t data[] = {1, 2};
  CHECK_OK(api.InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_INT32, shape, 2));
  CHECK_OK(api.InferenceRequestAppendInputData(r, "INPUT0", data, sizeof(data), TRITONSERVER_MEMORY_CPU, 0));
  EXPECT_ERROR(
      api.ServerInferAsync(server, r, nullptr), TRITONSERVER_ERROR_INVALID_ARG,
      "[request id: req-1] inference input 'INPUT0' data-type is 'INT32', but "
      "model 'identity_fp32' expects 'FP32'");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(inbox.events.empty());
  CHECK_OK(api.InferenceRequestDelete(r));

  // Explicit load of a model that is not in the repository.
  EXPECT_ERROR(
      api.ServerLoadModel(server, "nope"), TRITONSERVER_ERROR_INTERNAL,
      "failed to load 'nope', failed to poll from model repository");

  // A config override Triton rejects.
  const char* bad =
      "{\"name\":\"identity_fp32\",\"backend\":\"identity\",\"max_batch_size\":4,"
      "\"input\":[{\"name\":\"INPUT0\",\"data_type\":\"TYPE_FP32\",\"dims\":[-1]}],"
      "\"output\":[{\"name\":\"OUTPUT0\",\"data_type\":\"TYPE_FP32\",\"dims\":[-1]}],"
      "\"dynamic_batching\":{\"preferred_batch_size\":[8]}}";
  TRITONSERVER_Parameter* p =
      api.ParameterNew("config", TRITONSERVER_PARAMETER_STRING, bad);
  const TRITONSERVER_Parameter* params[] = {p};
  EXPECT_ERROR(
      api.ServerLoadModelWithParameters(server, "identity_fp32", params, 1),
      TRITONSERVER_ERROR_INTERNAL,
      "failed to load 'identity_fp32', failed to poll from model repository");
  api.ParameterDelete(p);

  // Load / unload are refused outside EXPLICIT mode; polling outside POLL.
  EXPECT_ERROR(
      api.ServerPollModelRepository(server), TRITONSERVER_ERROR_UNAVAILABLE,
      "polling is disabled");
}

void
TestJson(TRITONSERVER_Server* server)
{
  TRITONSERVER_Message* msg = nullptr;
  CHECK_OK(api.ServerMetadata(server, &msg));
  CHECK(MessageJson(msg) ==
        "{\"name\":\"triton\",\"version\":\"2.59.1\",\"extensions\":["
        "\"classification\",\"sequence\",\"model_repository\","
        "\"model_repository(unload_dependents)\",\"schedule_policy\","
        "\"model_configuration\",\"system_shared_memory\","
        "\"cuda_shared_memory\",\"binary_tensor_data\",\"parameters\","
        "\"statistics\",\"logging\"]}");
  CHECK_OK(api.ServerModelMetadata(server, "identity_fp32", -1, &msg));
  CHECK(MessageJson(msg) ==
        "{\"name\":\"identity_fp32\",\"versions\":[\"1\"],\"platform\":"
        "\"identity\",\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\","
        "\"shape\":[-1,-1]}],\"outputs\":[{\"name\":\"OUTPUT0\",\"datatype\":"
        "\"FP32\",\"shape\":[-1,-1]}]}");
  CHECK_OK(api.ServerModelConfig(server, "identity_fp32", -1, 1, &msg));
  const std::string config = MessageJson(msg);
  std::printf("config: %s\n", config.c_str());
  CHECK(config.find("\"preferred_batch_size\":[8]") != std::string::npos);
  CHECK(config.find("\"name\":\"identity_fp32_0\",\"kind\":\"KIND_CPU\",\"count\":1") !=
        std::string::npos);
  CHECK(config.find("\"dims\":[-1]") != std::string::npos);

  // Sending the config back as an override works.
  TRITONSERVER_Parameter* p =
      api.ParameterNew("config", TRITONSERVER_PARAMETER_STRING, config.c_str());
  const TRITONSERVER_Parameter* params[] = {p};
  CHECK_OK(api.ServerLoadModelWithParameters(server, "identity_fp32", params, 1));
  api.ParameterDelete(p);

  CHECK_OK(api.ServerModelStatistics(server, "identity_fp32", -1, &msg));
  const std::string stats = MessageJson(msg);
  std::printf("stats: %s\n", stats.c_str());
  CHECK(stats.rfind("{\"model_stats\":[{\"name\":\"identity_fp32\",\"version\":\"1\",\"last_inference\":", 0) == 0);

  uint32_t flags = 0;
  CHECK_OK(api.ServerModelBatchProperties(server, "identity_fp32", -1, &flags, nullptr));
  CHECK(flags == TRITONSERVER_BATCH_FIRST_DIM);
  CHECK_OK(api.ServerModelTransactionProperties(server, "repeat_int32", -1, &flags, nullptr));
  CHECK(flags == TRITONSERVER_TXN_DECOUPLED);

  TRITONSERVER_Metrics* metrics = nullptr;
  CHECK_OK(api.ServerMetrics(server, &metrics));
  const char* base = nullptr;
  size_t size = 0;
  CHECK_OK(api.MetricsFormatted(metrics, TRITONSERVER_METRIC_PROMETHEUS, &base, &size));
  const std::string text(base, size);
  CHECK(text.find("# TYPE nv_inference_request_success counter") != std::string::npos);
  CHECK(text.find("nv_inference_request_success{model=\"add_sub\",version=\"1\"} 1") !=
        std::string::npos);
  CHECK_OK(api.MetricsDelete(metrics));
}


// Runs one FP32 request on 'model' (INPUT0 [n] plus DELAY_MS when delay_ms
// >= 0) and returns the events; 'cancel_after_ms' >= 0 cancels it.
std::vector<Event>
RunSimple(
    TRITONSERVER_Server* server, const char* model, int delay_ms,
    int cancel_after_ms, Inbox* inbox)
{
  TRITONSERVER_InferenceRequest* r = NewRequest(server, model, inbox);
  const float data[] = {1.5f, 2.5f};
  const int64_t shape[] = {2};
  const int64_t shape1[] = {1};
  const uint32_t delay = static_cast<uint32_t>(delay_ms < 0 ? 0 : delay_ms);
  CHECK_OK(api.InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 1));
  CHECK_OK(api.InferenceRequestAppendInputData(r, "INPUT0", data, sizeof(data), TRITONSERVER_MEMORY_CPU, 0));
  if (delay_ms >= 0) {
    CHECK_OK(api.InferenceRequestAddInput(r, "DELAY_MS", TRITONSERVER_TYPE_UINT32, shape1, 1));
    CHECK_OK(api.InferenceRequestAppendInputData(r, "DELAY_MS", &delay, sizeof(delay), TRITONSERVER_MEMORY_CPU, 0));
  }
  CHECK_OK(api.ServerInferAsync(server, r, nullptr));
  if (cancel_after_ms >= 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(cancel_after_ms));
    CHECK_OK(api.InferenceRequestCancel(r));
  }
  inbox->Wait();
  CHECK_OK(api.InferenceRequestDelete(r));
  return inbox->events;
}

void
ExpectResponseError(
    const std::vector<Event>& events, TRITONSERVER_Error_Code code,
    const std::string& msg, int line)
{
  CHECK(events.size() == 2);
  if (events.size() != 2 || events[0].response == nullptr) {
    ++failures;
    return;
  }
  ExpectError(api.InferenceResponseError(events[0].response), code, msg, line);
  CHECK_OK(api.InferenceResponseDelete(events[0].response));
}

std::string
MakeRepoCopy(const char* models)
{
  char tmpl[] = "/tmp/testcore_smoke_XXXXXX";
  CHECK(mkdtemp(tmpl) != nullptr);
  const std::string cmd = std::string("cp -r ") + models + "/. " + tmpl;
  CHECK(std::system(cmd.c_str()) == 0);
  return tmpl;
}

void
WriteText(const std::string& path, const std::string& text)
{
  FILE* f = std::fopen(path.c_str(), "w");
  CHECK(f != nullptr);
  if (f != nullptr) {
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
}

// POLL mode: every model loads at start, the python models' model.py run, and a
// poll picks up added, removed and changed models.
void
TestPollMode(const char* models)
{
  const std::string repo = MakeRepoCopy(models);
  TRITONSERVER_Server* server =
      StartServer(TRITONSERVER_MODEL_CONTROL_POLL, repo.c_str());
  CHECK(server != nullptr);
  if (server == nullptr) {
    return;
  }
  bool ready = false;
  CHECK_OK(api.ServerIsReady(server, &ready));
  CHECK(ready);

  {  // slow model, cancelled while sleeping (model.py answers "request
     // cancelled"), or, on a busy machine, still queued (empty message)
    Inbox inbox;
    auto events = RunSimple(server, "slow", 5000, 30, &inbox);
    CHECK(events.size() == 2 && events[0].response != nullptr);
    if (events.size() == 2 && events[0].response != nullptr) {
      TRITONSERVER_Error* e = api.InferenceResponseError(events[0].response);
      CHECK(e != nullptr);
      if (e != nullptr) {
        const std::string msg = api.ErrorMessage(e);
        CHECK(api.ErrorCode(e) == TRITONSERVER_ERROR_CANCELLED);
        CHECK(msg == "request cancelled" || msg.empty());
        api.ErrorDelete(e);
      }
      CHECK_OK(api.InferenceResponseDelete(events[0].response));
    }
  }
  {  // slow model, short delay
    Inbox inbox;
    auto events = RunSimple(server, "slow", 10, -1, &inbox);
    CHECK(events.size() == 2 && events[0].response != nullptr);
    if (events.size() == 2 && events[0].response != nullptr) {
      CHECK_OK(api.InferenceResponseError(events[0].response));
      CHECK_OK(api.InferenceResponseDelete(events[0].response));
    }
  }
  {  // fail model
    Inbox inbox;
    auto events = RunSimple(server, "fail", -1, -1, &inbox);
    ExpectResponseError(events, TRITONSERVER_ERROR_INTERNAL, "fail model always fails", __LINE__);
  }
  {  // bytes_echo
    Inbox inbox;
    TRITONSERVER_InferenceRequest* r = NewRequest(server, "bytes_echo", &inbox);
    const char bytes[] = "\x02\x00\x00\x00" "hi" "\x00\x00\x00\x00" "\x03\x00\x00\x00" "abc";
    const int64_t shape[] = {3};
    CHECK_OK(api.InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_BYTES, shape, 1));
    CHECK_OK(api.InferenceRequestAppendInputData(r, "INPUT0", bytes, sizeof(bytes) - 1, TRITONSERVER_MEMORY_CPU, 0));
    CHECK_OK(api.ServerInferAsync(server, r, nullptr));
    inbox.Wait();
    CHECK(inbox.events.size() == 2);
    if (inbox.events.size() == 2) {
      std::string name;
      std::vector<int64_t> oshape;
      auto v = OutputValues<char>(inbox.events[0].response, 0, &name, &oshape);
      CHECK(std::string(v.begin(), v.end()) == std::string(bytes, sizeof(bytes) - 1));
      CHECK_OK(api.InferenceResponseDelete(inbox.events[0].response));
    }
    // A wrong element count is refused before anything is queued.
    Inbox inbox2;
    TRITONSERVER_InferenceRequest* r2 = NewRequest(server, "bytes_echo", &inbox2);
    const int64_t shape2[] = {2};
    CHECK_OK(api.InferenceRequestAddInput(r2, "INPUT0", TRITONSERVER_TYPE_BYTES, shape2, 1));
    CHECK_OK(api.InferenceRequestAppendInputData(r2, "INPUT0", bytes, sizeof(bytes) - 1, TRITONSERVER_MEMORY_CPU, 0));
    EXPECT_ERROR(
        api.ServerInferAsync(server, r2, nullptr), TRITONSERVER_ERROR_INVALID_ARG,
        "[request id: req-1] unexpected number of string elements 3 for "
        "inference input 'INPUT0' for model 'bytes_echo', expecting 2");
    CHECK(inbox2.events.empty());
    CHECK_OK(api.InferenceRequestDelete(r2));
    CHECK_OK(api.InferenceRequestDelete(r));
  }
  EXPECT_ERROR(
      api.ServerLoadModel(server, "identity_fp32"), TRITONSERVER_ERROR_UNAVAILABLE,
      "explicit model load / unload is not allowed if polling is enabled");

  // Change the repository and poll.
  CHECK(std::system(("rm -rf " + repo + "/fail").c_str()) == 0);
  CHECK(std::system(("cp -r " + repo + "/identity_int8 " + repo + "/identity_copy").c_str()) == 0);
  WriteText(
      repo + "/identity_copy/config.pbtxt",
      "name: \"identity_copy\"\nbackend: \"identity\"\nmax_batch_size: 0\n"
      "input [ { name: \"INPUT0\" data_type: TYPE_INT8 dims: [ 3 ] } ]\n"
      "output [ { name: \"OUTPUT0\" data_type: TYPE_INT8 dims: [ 3 ] } ]\n");
  WriteText(
      repo + "/identity_fp32/config.pbtxt",
      "name: \"identity_fp32\"\nbackend: \"identity\"\nmax_batch_size: 4\n"
      "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
      "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n");
  CHECK_OK(api.ServerPollModelRepository(server));
  TRITONSERVER_Message* msg = nullptr;
  CHECK_OK(api.ServerModelMetadata(server, "identity_copy", -1, &msg));
  CHECK(MessageJson(msg).find("\"shape\":[3]") != std::string::npos);
  CHECK_OK(api.ServerModelMetadata(server, "identity_fp32", -1, &msg));
  CHECK(MessageJson(msg).find("\"shape\":[-1,2]") != std::string::npos);
  TRITONSERVER_InferenceRequest* r = nullptr;
  EXPECT_ERROR(
      api.InferenceRequestNew(&r, server, "fail", -1), TRITONSERVER_ERROR_NOT_FOUND,
      "Request for unknown model: 'fail' has no available versions");

  // A response that is still alive keeps its model: stop times out.
  Inbox inbox;
  auto events = RunSimple(server, "slow", 0, -1, &inbox);
  if (!events.empty() && events[0].response != nullptr) {
    CHECK_OK(api.InferenceResponseDelete(events[0].response));
  }
  CHECK_OK(api.ServerStop(server));
  CHECK_OK(api.ServerDelete(server));
  CHECK(std::system(("rm -rf " + repo).c_str()) == 0);
}

// Loading a model from memory: a config override plus files.
void
TestLoadFromMemory(TRITONSERVER_Server* server)
{
  const char* config =
      "{\"name\":\"mem_identity\",\"backend\":\"identity\",\"maxBatchSize\":0,"
      "\"input\":[{\"name\":\"INPUT0\",\"data_type\":\"TYPE_INT32\",\"dims\":[\"2\"]}],"
      "\"output\":[{\"name\":\"OUTPUT0\",\"data_type\":\"type_int32\",\"dims\":[2]}]}";
  TRITONSERVER_Parameter* pc =
      api.ParameterNew("config", TRITONSERVER_PARAMETER_STRING, config);
  TRITONSERVER_Parameter* pf = api.ParameterBytesNew("file:1/placeholder", "", 0);
  const TRITONSERVER_Parameter* params[] = {pc, pf};
  CHECK_OK(api.ServerLoadModelWithParameters(server, "mem_identity", params, 2));
  api.ParameterDelete(pc);
  api.ParameterDelete(pf);
  Inbox inbox;
  TRITONSERVER_InferenceRequest* r = NewRequest(server, "mem_identity", &inbox);
  const int32_t data[] = {5, 6};
  const int64_t shape[] = {2};
  CHECK_OK(api.InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_INT32, shape, 1));
  CHECK_OK(api.InferenceRequestAppendInputData(r, "INPUT0", data, sizeof(data), TRITONSERVER_MEMORY_CPU, 0));
  CHECK_OK(api.ServerInferAsync(server, r, nullptr));
  inbox.Wait();
  CHECK(inbox.events.size() == 2);
  if (inbox.events.size() == 2) {
    std::string name;
    std::vector<int64_t> oshape;
    CHECK((OutputValues<int32_t>(inbox.events[0].response, 0, &name, &oshape) ==
           std::vector<int32_t>{5, 6}));
    CHECK_OK(api.InferenceResponseDelete(inbox.events[0].response));
  }
  CHECK_OK(api.InferenceRequestDelete(r));
  CHECK_OK(api.ServerUnloadModel(server, "mem_identity"));
}

// A response kept alive past stop makes stop wait out the exit timeout.
void
TestStopWithLiveResponse(const char* models)
{
  TRITONSERVER_ServerOptions* opts = nullptr;
  CHECK_OK(api.ServerOptionsNew(&opts));
  CHECK_OK(api.ServerOptionsSetModelRepositoryPath(opts, models));
  CHECK_OK(api.ServerOptionsSetModelControlMode(opts, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  CHECK_OK(api.ServerOptionsSetStartupModel(opts, "identity_fp32"));
  CHECK_OK(api.ServerOptionsSetExitTimeout(opts, 1));
  TRITONSERVER_Server* server = nullptr;
  CHECK_OK(api.ServerNew(&server, opts));
  CHECK_OK(api.ServerOptionsDelete(opts));
  if (server == nullptr) {
    return;
  }
  Inbox inbox;
  TRITONSERVER_InferenceRequest* r = NewRequest(server, "identity_fp32", &inbox);
  const float data[] = {1};
  const int64_t shape[] = {1, 1};
  CHECK_OK(api.InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_FP32, shape, 2));
  CHECK_OK(api.InferenceRequestAppendInputData(r, "INPUT0", data, sizeof(data), TRITONSERVER_MEMORY_CPU, 0));
  CHECK_OK(api.ServerInferAsync(server, r, nullptr));
  inbox.Wait();
  CHECK_OK(api.InferenceRequestDelete(r));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_ERROR(
      api.ServerStop(server), TRITONSERVER_ERROR_INTERNAL,
      "Exit timeout expired. Exiting immediately.");
  const auto waited = std::chrono::steady_clock::now() - t0;
  CHECK(waited >= std::chrono::milliseconds(900));
  if (!inbox.events.empty() && inbox.events[0].response != nullptr) {
    CHECK_OK(api.InferenceResponseDelete(inbox.events[0].response));
  }
  CHECK_OK(api.ServerDelete(server));
}


// Two servers on one repository are independent; many requests from
// several threads at once all complete.
void
TestTwoServersAndConcurrency(const char* models)
{
  TRITONSERVER_Server* a = StartServer(TRITONSERVER_MODEL_CONTROL_EXPLICIT, models);
  TRITONSERVER_Server* b = StartServer(TRITONSERVER_MODEL_CONTROL_EXPLICIT, models);
  CHECK(a != nullptr && b != nullptr);
  if (a == nullptr || b == nullptr) {
    return;
  }
  CHECK_OK(api.ServerLoadModel(a, "identity_int32"));
  CHECK_OK(api.ServerLoadModel(b, "identity_int32"));
  CHECK_OK(api.ServerUnloadModel(a, "identity_int32"));
  bool ready = false;
  CHECK_OK(api.ServerModelIsReady(b, "identity_int32", -1, &ready));
  CHECK(ready);

  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        Inbox inbox;
        TRITONSERVER_InferenceRequest* r = NewRequest(b, "identity_int32", &inbox);
        const int32_t v[] = {t, i, t * i};
        const int64_t shape[] = {1, 3};
        CHECK_OK(api.InferenceRequestAddInput(r, "INPUT0", TRITONSERVER_TYPE_INT32, shape, 2));
        CHECK_OK(api.InferenceRequestAppendInputData(r, "INPUT0", v, sizeof(v), TRITONSERVER_MEMORY_CPU, 0));
        CHECK_OK(api.ServerInferAsync(b, r, nullptr));
        inbox.Wait();
        if (inbox.events.size() == 2 && inbox.events[0].response != nullptr) {
          std::string name;
          std::vector<int64_t> oshape;
          auto out = OutputValues<int32_t>(inbox.events[0].response, 0, &name, &oshape);
          if ((out == std::vector<int32_t>{t, i, t * i})) {
            ++ok;
          }
          CHECK_OK(api.InferenceResponseDelete(inbox.events[0].response));
        }
        CHECK_OK(api.InferenceRequestDelete(r));
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  CHECK(ok.load() == 200);
  // Requests waiting together may run as one execution (dynamic batching).
  // The test core records the counts after the responses go out:
  // under load they may trail the last response by a moment.
  const std::string key = "\"inference_count\":200,\"execution_count\":";
  std::string stats;
  size_t at = std::string::npos;
  for (int attempt = 0; attempt < 200 && at == std::string::npos; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    TRITONSERVER_Message* msg = nullptr;
    CHECK_OK(api.ServerModelStatistics(b, "identity_int32", 1, &msg));
    stats = MessageJson(msg);
    at = stats.find(key);
  }
  CHECK(at != std::string::npos);
  if (at != std::string::npos) {
    const long executions = std::atol(stats.c_str() + at + key.size());
    CHECK(executions >= 1 && executions <= 200);
  }
  CHECK_OK(api.ServerDelete(a));
  CHECK_OK(api.ServerDelete(b));
}

// ---------------------------------------------------------------------------
// Backend libraries: the test core's backend API driven by the fixture
// backend (test/core/fixture_backend.cc, libtriton_fixture.so).
// ---------------------------------------------------------------------------
struct BackendApi {
#define TC_BFIELD(ret, name, params) TritonBackendFn_##name name = nullptr;
  TRITON_BACKEND_API_FUNCTIONS(TC_BFIELD)
#undef TC_BFIELD
};

// The event log of the fixture library loaded from 'library' (as the core
// loaded it: the same file, whatever the path).
std::string
FixtureLog(const std::string& library, bool clear = false)
{
  void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) {
    return "<not loaded>";
  }
  std::string s;
  auto log = reinterpret_cast<size_t (*)(char*, size_t)>(dlsym(h, "fixture_log"));
  auto log_clear = reinterpret_cast<void (*)()>(dlsym(h, "fixture_log_clear"));
  CHECK(log != nullptr && log_clear != nullptr);
  if (log != nullptr) {
    const size_t n = log(nullptr, 0);
    s.resize(n + 1);
    log(&s[0], n + 1);
    s.resize(n);
  }
  if (clear && log_clear != nullptr) {
    log_clear();
  }
  dlclose(h);
  return s;
}

// Lines of 'log' that start with 'prefix'.
std::vector<std::string>
LogLines(const std::string& log, const std::string& prefix)
{
  std::vector<std::string> out;
  size_t at = 0;
  while (at < log.size()) {
    size_t end = log.find('\n', at);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(at, end - at);
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
    at = end + 1;
  }
  return out;
}

bool
WaitForLogLine(const std::string& library, const std::string& line)
{
  for (int i = 0; i < 500; ++i) {
    if (!LogLines(FixtureLog(library), line).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

void
Shell(const std::string& cmd)
{
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "command failed: %s\n", cmd.c_str());
    ++failures;
  }
}

// A model of the fixture backend: X (FP32) in, Y (FP32) out.
std::string
FixtureConfig(
    const std::string& name, const std::string& backend, const std::string& extra,
    int max_batch_size = 8)
{
  return "name: \"" + name + "\"\nbackend: \"" + backend +
         "\"\nmax_batch_size: " + std::to_string(max_batch_size) +
         "\ninput [ { name: \"X\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
         "output [ { name: \"Y\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n" +
         extra;
}

void
ExpectLoadError(
    TRITONSERVER_Server* server, const std::string& model,
    TRITONSERVER_Error_Code code, const std::string& reason, int line)
{
  TRITONSERVER_Error* err = api.ServerLoadModel(server, model.c_str());
  if (err == nullptr) {
    std::fprintf(stderr, "line %d: loading %s succeeded\n", line, model.c_str());
    ++failures;
    return;
  }
  const std::string msg = api.ErrorMessage(err);
  // The load fails INVALID_ARG; the reason carries the backend's code.
  TRITONSERVER_Error* inner = api.ErrorNew(code, "");
  const std::string expected = "load failed for model '" + model +
                               "': version 1 is at UNAVAILABLE state: " +
                               api.ErrorCodeString(inner) + ": " + reason;
  api.ErrorDelete(inner);
  CHECK(api.ErrorCode(err) == TRITONSERVER_ERROR_INVALID_ARG);
  if (msg.rfind(expected, 0) != 0) {
    std::fprintf(
        stderr, "line %d: expected '%s...', got '%s'\n", line, expected.c_str(),
        msg.c_str());
    ++failures;
  }
  api.ErrorDelete(err);
}
#define EXPECT_LOAD_ERROR(server, model, code, reason) \
  ExpectLoadError((server), (model), (code), (reason), __LINE__)

// The reason code of a failed load, from the model index.
void
ExpectLoadErrorCode(
    TRITONSERVER_Server* server, const std::string& model,
    const std::string& code_text, int line)
{
  TRITONSERVER_Message* msg = nullptr;
  CHECK_OK(api.ServerModelIndex(server, 0, &msg));
  const std::string index = MessageJson(msg);
  const std::string needle = "{\"name\":\"" + model +
                             "\",\"version\":\"1\",\"state\":\"UNAVAILABLE\","
                             "\"reason\":\"" + code_text + ": ";
  if (index.find(needle) == std::string::npos) {
    std::fprintf(
        stderr, "line %d: index lacks %s in %s\n", line, needle.c_str(),
        index.c_str());
    ++failures;
  }
}

TRITONSERVER_InferenceRequest*
FixtureRequest(
    TRITONSERVER_Server* server, const char* model, Inbox* inbox,
    const std::vector<int64_t>& shape, const std::vector<float>& x)
{
  TRITONSERVER_InferenceRequest* r = NewRequest(server, model, inbox);
  CHECK_OK(api.InferenceRequestAddInput(
      r, "X", TRITONSERVER_TYPE_FP32, shape.data(), shape.size()));
  CHECK_OK(api.InferenceRequestAppendInputData(
      r, "X", x.data(), x.size() * sizeof(float), TRITONSERVER_MEMORY_CPU, 0));
  return r;
}

// Checks a FINAL response with Y = factor * x, then the release.
void
ExpectY(
    Inbox& inbox, const std::vector<int64_t>& shape, const std::vector<float>& x,
    float factor, int line)
{
  inbox.Wait();
  std::lock_guard<std::mutex> lk(inbox.mu);
  const bool shaped = inbox.events.size() == 2 &&
                      inbox.events[0].kind == Event::kResponse &&
                      inbox.events[0].response != nullptr &&
                      inbox.events[1].kind == Event::kRelease;
  if (!shaped) {
    std::fprintf(stderr, "line %d: expected a response then the release\n", line);
    ++failures;
    return;
  }
  TRITONSERVER_InferenceResponse* resp = inbox.events[0].response;
  TRITONSERVER_Error* err = api.InferenceResponseError(resp);
  if (err != nullptr) {
    std::fprintf(stderr, "line %d: response error %s\n", line, api.ErrorMessage(err));
    api.ErrorDelete(err);
    ++failures;
  }
  uint32_t count = 0;
  CHECK_OK(api.InferenceResponseOutputCount(resp, &count));
  if (count == 1) {
    std::string name;
    std::vector<int64_t> oshape;
    auto y = OutputValues<float>(resp, 0, &name, &oshape);
    std::vector<float> want;
    for (float v : x) want.push_back(factor * v);
    if (name != "Y" || oshape != shape || y != want) {
      std::fprintf(stderr, "line %d: wrong Y\n", line);
      ++failures;
    }
  } else {
    std::fprintf(stderr, "line %d: %u outputs\n", line, count);
    ++failures;
  }
  CHECK_OK(api.InferenceResponseDelete(resp));
}

std::string
Statistics(TRITONSERVER_Server* server, const char* model)
{
  TRITONSERVER_Message* msg = nullptr;
  CHECK_OK(api.ServerModelStatistics(server, model, -1, &msg));
  return msg == nullptr ? std::string() : MessageJson(msg);
}

std::string
MetricsText(TRITONSERVER_Server* server)
{
  TRITONSERVER_Metrics* metrics = nullptr;
  CHECK_OK(api.ServerMetrics(server, &metrics));
  const char* base = nullptr;
  size_t size = 0;
  CHECK_OK(api.MetricsFormatted(metrics, TRITONSERVER_METRIC_PROMETHEUS, &base, &size));
  std::string text(base, size);
  CHECK_OK(api.MetricsDelete(metrics));
  return text;
}

#define CHECK_HAS(text, part)                                                \
  do {                                                                       \
    if ((text).find(part) == std::string::npos) {                            \
      std::fprintf(stderr, "%s:%d: missing %s in %s\n", __FILE__, __LINE__,  \
                   std::string(part).c_str(), std::string(text).c_str());    \
      ++failures;                                                            \
    }                                                                        \
  } while (false)

void
TestBackendApiExports(void* core)
{
  BackendApi b;
#define TC_BLOAD(ret, name, params)                                         \
  b.name = reinterpret_cast<TritonBackendFn_##name>(                        \
      dlsym(core, "TRITONBACKEND_" #name));                                 \
  if (b.name == nullptr) {                                                  \
    std::fprintf(stderr, "missing TRITONBACKEND_%s\n", #name);             \
    ++failures;                                                             \
    return;                                                                 \
  }
  TRITON_BACKEND_API_FUNCTIONS(TC_BLOAD)
#undef TC_BLOAD
  uint32_t major = 0, minor = 0;
  CHECK_OK(b.ApiVersion(&major, &minor));
  CHECK(major == 1 && minor == 19);
  const TRITONSERVER_Error_Code bad = TRITONSERVER_ERROR_INVALID_ARG;
  EXPECT_ERROR(b.ApiVersion(nullptr, &minor), bad,
               "test core: argument 'major' must not be null");
  const char* text = nullptr;
  EXPECT_ERROR(b.RequestId(nullptr, &text), bad,
               "test core: argument 'request' must not be null");
  EXPECT_ERROR(b.ModelName(nullptr, &text), bad,
               "test core: argument 'model' must not be null");
  EXPECT_ERROR(b.ModelInstanceName(nullptr, &text), bad,
               "test core: argument 'instance' must not be null");
  TRITONSERVER_Message* msg = nullptr;
  EXPECT_ERROR(b.ModelConfig(nullptr, 1, &msg), bad,
               "test core: argument 'model' must not be null");
  EXPECT_ERROR(b.ResponseSend(nullptr, TRITONSERVER_RESPONSE_COMPLETE_FINAL, nullptr),
               bad, "response was nullptr");
  EXPECT_ERROR(b.ResponseOutput(nullptr, nullptr, "Y", TRITONSERVER_TYPE_FP32, nullptr, 0),
               bad, "response was nullptr");
  EXPECT_ERROR(b.InputProperties(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr),
               bad, "test core: argument 'input' must not be null");
  EXPECT_ERROR(b.ResponseFactorySendFlags(nullptr, TRITONSERVER_RESPONSE_COMPLETE_FINAL),
               bad, "test core: argument 'factory' must not be null");
  EXPECT_ERROR(b.RequestRelease(nullptr, TRITONSERVER_REQUEST_RELEASE_ALL), bad,
               "test core: argument 'request' must not be null");
  EXPECT_ERROR(b.ModelInstanceReportStatistics(nullptr, nullptr, true, 0, 0, 0, 0), bad,
               "test core: argument 'instance' must not be null");
  TRITONBACKEND_Response* response = nullptr;
  EXPECT_ERROR(b.ResponseNew(&response, nullptr), bad,
               "test core: argument 'request' must not be null");
  CHECK(response == nullptr);
}

void
TestBackendLibraries(const char* core_path, const char* fixture)
{
  char tmpl[] = "/tmp/testcore_backends_XXXXXX";
  CHECK(mkdtemp(tmpl) != nullptr);
  const std::string tmp = tmpl;
  const std::string backends = tmp + "/backends", repo = tmp + "/repo";
  const std::string copy = tmp + "/real/fixture_runtime.so";
  Shell("mkdir -p " + backends + "/fixture " + backends + "/fixture_badinit " +
        backends + "/noexec " + backends + "/garbage " + repo + " " + tmp + "/real");
  Shell(std::string("ln -s ") + fixture + " " + backends + "/fixture/libtriton_fixture.so");
  Shell(std::string("ln -s ") + fixture + " " + backends +
        "/fixture_badinit/libtriton_fixture_badinit.so");
  Shell(std::string("ln -s ") + core_path + " " + backends + "/noexec/libtriton_noexec.so");
  WriteText(backends + "/garbage/libtriton_garbage.so", "not a shared library\n");
  Shell(std::string("cp ") + fixture + " " + copy);
  auto model = [&](const std::string& name, const std::string& config) {
    Shell("mkdir -p " + repo + "/" + name + "/1");
    WriteText(repo + "/" + name + "/config.pbtxt", config);
  };
  model("fx_basic",
        "name: \"fx_basic\"\nbackend: \"fixture\"\nmax_batch_size: 8\n"
        "input [ { name: \"X\" data_type: TYPE_FP32 dims: [ -1 ] },"
        " { name: \"Z\" data_type: TYPE_FP32 dims: [ -1 ] optional: true } ]\n"
        "output [ { name: \"Y\" data_type: TYPE_FP32 dims: [ -1 ] },"
        " { name: \"W\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
        "instance_group [ { count: 2 kind: KIND_CPU } ]\n");
  model("fx_batch", FixtureConfig("fx_batch", "fixture", "dynamic_batching { }\n"));
  model("fx_decoupled",
        FixtureConfig("fx_decoupled", "fixture",
                      "model_transaction_policy { decoupled: true }\n", 0));
  // The version directory is a link to a directory holding the library,
  // named by runtime.
  Shell("mkdir -p " + repo + "/fx_symlink");
  WriteText(repo + "/fx_symlink/config.pbtxt",
            FixtureConfig("fx_symlink", "fixture_rt", "runtime: \"fixture_runtime.so\"\n"));
  Shell("ln -s " + tmp + "/real " + repo + "/fx_symlink/1");
  // No runtime: the library in the model directory, a link (not checked).
  model("fx_modeldir", FixtureConfig("fx_modeldir", "fixture_md", ""));
  Shell(std::string("ln -s ") + fixture + " " + repo + "/fx_modeldir/libtriton_fixture_md.so");
  // A runtime that is a link out of its directory, and one with "..".
  model("fx_escape", FixtureConfig("fx_escape", "fixture", "runtime: \"libx.so\"\n"));
  Shell(std::string("ln -s ") + fixture + " " + repo + "/fx_escape/1/libx.so");
  model("fx_dotdot",
        FixtureConfig("fx_dotdot", "fixture",
                      "runtime: \"../../../backends/fixture/libtriton_fixture.so\"\n"));
  model("fx_missing_rt", FixtureConfig("fx_missing_rt", "fixture", "runtime: \"nothere.so\"\n"));
  model("fx_missing", FixtureConfig("fx_missing", "nosuch", ""));
  model("fx_badinit", FixtureConfig("fx_badinit", "fixture_badinit", ""));
  model("fx_garbage", FixtureConfig("fx_garbage", "garbage", ""));
  model("fx_noexec", FixtureConfig("fx_noexec", "noexec", ""));
  model("fx_model_fail",
        FixtureConfig("fx_model_fail", "fixture",
                      "parameters [ { key: \"fixture_fail_model_init\" value: "
                      "{ string_value: \"yes\" } } ]\n"));
  model("fx_instance_fail",
        FixtureConfig("fx_instance_fail", "fixture",
                      "instance_group [ { count: 3 kind: KIND_CPU } ]\n"
                      "parameters [ { key: \"fixture_fail_instance\" value: "
                      "{ string_value: \"fx_instance_fail_0_1\" } } ]\n"));

  TRITONSERVER_ServerOptions* opts = nullptr;
  CHECK_OK(api.ServerOptionsNew(&opts));
  CHECK_OK(api.ServerOptionsSetModelRepositoryPath(opts, repo.c_str()));
  CHECK_OK(api.ServerOptionsSetBackendDirectory(opts, backends.c_str()));
  CHECK_OK(api.ServerOptionsSetModelControlMode(opts, TRITONSERVER_MODEL_CONTROL_EXPLICIT));
  CHECK_OK(api.ServerOptionsSetModelLoadRetryCount(opts, 0));
  CHECK_OK(api.ServerOptionsSetLogInfo(opts, false));
  CHECK_OK(api.ServerOptionsSetLogError(opts, false));
  CHECK_OK(api.ServerOptionsSetLogWarn(opts, false));
  CHECK_OK(api.ServerOptionsSetExitTimeout(opts, 5));
  TRITONSERVER_Server* server = nullptr;
  CHECK_OK(api.ServerNew(&server, opts));
  CHECK_OK(api.ServerOptionsDelete(opts));
  if (server == nullptr) return;

  // ---- finding and loading libraries ----
  const TRITONSERVER_Error_Code invalid = TRITONSERVER_ERROR_INVALID_ARG;
  EXPECT_LOAD_ERROR(server, "fx_missing", invalid,
      "unable to find backend library for backend 'nosuch', try specifying "
      "runtime on the model configuration.;");
  EXPECT_LOAD_ERROR(server, "fx_missing_rt", invalid,
      "unable to find backend library 'nothere.so' for model 'fx_missing_rt', "
      "searched: '" + repo + "/fx_missing_rt/1' '" + repo + "/fx_missing_rt' '" +
      backends + "/fixture' ;");
  EXPECT_LOAD_ERROR(server, "fx_escape", invalid,
      "backend library name 'libx.so' escapes backend directory '" + repo +
      "/fx_escape/1', for model 'fx_escape', check model config runtime field;");
  EXPECT_LOAD_ERROR(server, "fx_dotdot", invalid,
      "backend library name '../../../backends/fixture/libtriton_fixture.so' "
      "escapes backend directory '" + repo + "/fx_dotdot/1', for model "
      "'fx_dotdot', check model config runtime field;");
  EXPECT_LOAD_ERROR(server, "fx_garbage", TRITONSERVER_ERROR_NOT_FOUND,
      "unable to load shared library: " + backends +
      "/garbage/libtriton_garbage.so: ");
  EXPECT_LOAD_ERROR(server, "fx_noexec", TRITONSERVER_ERROR_NOT_FOUND,
      "unable to find required entrypoint 'TRITONBACKEND_ModelInstanceExecute' "
      "in shared library");
  ExpectLoadErrorCode(server, "fx_garbage", "Not found", __LINE__);
  ExpectLoadErrorCode(server, "fx_escape", "Invalid argument", __LINE__);
  CHECK(FixtureLog(fixture) == "<not loaded>");

  // Initialize fails: the load fails with its error; Finalize still runs.
  EXPECT_LOAD_ERROR(server, "fx_badinit", TRITONSERVER_ERROR_UNAVAILABLE,
      "fixture: backend initialization failed;");
  std::string log = FixtureLog(fixture, true);
  CHECK(log == "Initialize fixture_badinit api 1.19\nFinalize fixture_badinit\n");
  // ModelInitialize fails: ModelFinalize still runs, no instance is made.
  EXPECT_LOAD_ERROR(server, "fx_model_fail", invalid,
      "fixture: model initialization failed;");
  log = FixtureLog(fixture, true);
  CHECK(LogLines(log, "Initialize fixture ").size() == 1);
  CHECK(LogLines(log, "ModelInitialize fx_model_fail 1 config2=<model "
                      "configuration version 2 not supported, supported "
                      "versions are: 1>").size() == 1);
  CHECK(LogLines(log, "ModelFinalize fx_model_fail (no state)").size() == 1);
  CHECK(LogLines(log, "Instance").empty());
  // An instance fails: every instance is tried, all are finalized (the
  // failed one too), then the model.
  EXPECT_LOAD_ERROR(server, "fx_instance_fail", TRITONSERVER_ERROR_INTERNAL,
      "fixture: instance fx_instance_fail_0_1 failed;");
  log = FixtureLog(fixture, true);
  {
    std::vector<std::string> lines = LogLines(log, "Instance");
    for (const auto& l : LogLines(log, "Model")) lines.push_back(l);
    const std::vector<std::string> want = {
        "InstanceInitialize fx_instance_fail_0_0 of fx_instance_fail",
        "InstanceInitialize fx_instance_fail_0_1 of fx_instance_fail",
        "InstanceFinalize fx_instance_fail_0_1 (no state)",
        "InstanceInitialize fx_instance_fail_0_2 of fx_instance_fail",
        "InstanceFinalize fx_instance_fail_0_0",
        "InstanceFinalize fx_instance_fail_0_2",
        "ModelInitialize fx_instance_fail 1 config2=<model configuration "
        "version 2 not supported, supported versions are: 1>",
        "ModelFinalize fx_instance_fail"};
    CHECK(lines == want);
    if (lines != want) std::fprintf(stderr, "log:\n%s", log.c_str());
  }
  CHECK(LogLines(log, "Initialize fixture ").empty());  // the backend stays

  for (const char* m : {"fx_basic", "fx_batch", "fx_decoupled", "fx_symlink", "fx_modeldir"}) {
    CHECK_OK(api.ServerLoadModel(server, m));
  }
  log = FixtureLog(fixture);
  CHECK(LogLines(log, "Initialize fixture ").empty());  // one backend per path
  CHECK(LogLines(log, "Initialize fixture_md api 1.19").size() == 1);
  CHECK(LogLines(log, "InstanceInitialize fx_basic_0_").size() == 2);
  CHECK(LogLines(log, "InstanceInitialize fx_basic_0_1 of fx_basic").size() == 1);
  CHECK(LogLines(FixtureLog(copy), "Initialize fixture_rt api 1.19").size() == 1);
  {  // ModelConfig gives what TRITONSERVER_ServerModelConfig gives.
    TRITONSERVER_Message* msg = nullptr;
    CHECK_OK(api.ServerModelConfig(server, "fx_basic", -1, 1, &msg));
    CHECK(LogLines(log, "config " + MessageJson(msg)).size() == 1);
  }

  // ---- inference ----
  const std::vector<float> x12 = {1.5f, -2.0f};
  {  // one request; no output requested: both of the model's, sorted
    Inbox inbox;
    auto* r = FixtureRequest(server, "fx_basic", &inbox, {1, 2}, x12);
    CHECK_OK(api.InferenceRequestSetBoolParameter(r, "fixture_probe", true));
    CHECK_OK(api.ServerInferAsync(server, r, nullptr));
    ExpectY(inbox, {1, 2}, x12, 2, __LINE__);
    CHECK(inbox.events.size() == 2 && inbox.events[0].thread == inbox.events[1].thread &&
          inbox.events[0].thread != std::this_thread::get_id());
    CHECK_OK(api.InferenceRequestDelete(r));
    log = FixtureLog(fixture, true);
    CHECK_HAS(log, "Execute fx_basic_0_");
    CHECK_HAS(log, " outputs=W,Y bad_output=<[request id: req-1] out of bounds "
                   "index 2: request has 2 requested outputs> params=fixture_probe:b:true ");
  }
  {  // the probe: ids, inputs in Triton's order, parameters, bad indexes
    Inbox inbox;
    auto* r = FixtureRequest(server, "fx_basic", &inbox, {1, 2}, {});
    CHECK_OK(api.InferenceRequestSetId(r, "probe-1"));
    CHECK_OK(api.InferenceRequestSetCorrelationId(r, 7));
    // X in two buffers (the request's own, not copied)
    CHECK_OK(api.InferenceRequestAppendInputData(
        r, "X", x12.data(), sizeof(float), TRITONSERVER_MEMORY_CPU, 0));
    CHECK_OK(api.InferenceRequestAppendInputData(
        r, "X", x12.data() + 1, sizeof(float), TRITONSERVER_MEMORY_CPU, 0));
    const float z = 9;
    const int64_t zshape[] = {1, 1};
    CHECK_OK(api.InferenceRequestAddInput(r, "Z", TRITONSERVER_TYPE_FP32, zshape, 2));
    CHECK_OK(api.InferenceRequestAppendInputData(
        r, "Z", &z, sizeof(z), TRITONSERVER_MEMORY_CPU, 0));
    CHECK_OK(api.InferenceRequestAddRequestedOutput(r, "Y"));
    CHECK_OK(api.InferenceRequestSetBoolParameter(r, "fixture_probe", true));
    CHECK_OK(api.InferenceRequestSetStringParameter(r, "s", "text"));
    CHECK_OK(api.InferenceRequestSetIntParameter(r, "i", -5));
    CHECK_OK(api.InferenceRequestSetDoubleParameter(r, "d", 2.5));
    CHECK_OK(api.ServerInferAsync(server, r, nullptr));
    ExpectY(inbox, {1, 2}, x12, 2, __LINE__);
    CHECK_OK(api.InferenceRequestDelete(r));
    // Triton's inputs are unordered maps (AddInput order into one, then
    // copied into another); the backend sees their iteration order.
    std::unordered_map<std::string, int> added, copied;
    added.emplace("X", 0);
    added.emplace("Z", 0);
    for (const auto& p : added) copied.emplace(p.first, 0);
    std::string first = copied.begin()->first;
    const std::string xdesc = "X[1,2]:8/2", zdesc = "Z[1,1]:4/1";
    const std::string extra = "{name_only=" + first + " past_end=ok/null/0/0/0}";
    const std::string inputs = first == "X" ? xdesc + extra + "," + zdesc
                                            : zdesc + extra + "," + xdesc;
    log = FixtureLog(fixture, true);
    const std::string want =
        "probe id=probe-1 corr=7 inputs=" + inputs +
        " bad_input=<[request id: probe-1] out of bounds index 2: request has 2 "
        "inputs> outputs=Y bad_output=<[request id: probe-1] out of bounds "
        "index 1: request has 1 requested outputs> params=fixture_probe:b:true,"
        "s:s:text,i:i:-5,d:d:2.5 bad_param=<out of bounds index 4: request has "
        "4 parameters> cancelled=false unknown_output=<unexpected inference "
        "output 'NOPE' for model 'fx_basic'> second_buffer=<allocated buffer "
        "for output 'Y' already exists>";
    CHECK(LogLines(log, want).size() == 1);
    if (LogLines(log, want).size() != 1) {
      std::fprintf(stderr, "want: %s\nlog:\n%s", want.c_str(), log.c_str());
    }
  }
  {  // a string correlation id
    Inbox inbox;
    auto* r = FixtureRequest(server, "fx_basic", &inbox, {1, 2}, x12);
    CHECK_OK(api.InferenceRequestSetId(r, "probe-2"));
    CHECK_OK(api.InferenceRequestSetCorrelationIdString(r, "abc"));
    CHECK_OK(api.InferenceRequestSetBoolParameter(r, "fixture_probe", true));
    CHECK_OK(api.ServerInferAsync(server, r, nullptr));
    ExpectY(inbox, {1, 2}, x12, 2, __LINE__);
    CHECK_OK(api.InferenceRequestDelete(r));
    CHECK_HAS(FixtureLog(fixture, true),
              "probe id=probe-2 corr=<[request id: probe-2] correlation ID in "
              "request is not an unsigned int> ");
  }
  {  // the backend answers with an error and reports the request failed
    Inbox inbox;
    auto* r = FixtureRequest(server, "fx_basic", &inbox, {1, 2}, x12);
    CHECK_OK(api.InferenceRequestSetBoolParameter(r, "fixture_fail", true));
    CHECK_OK(api.ServerInferAsync(server, r, nullptr));
    inbox.Wait();
    CHECK_OK(api.InferenceRequestDelete(r));
    ExpectResponseError(inbox.events, invalid, "fixture: request failed", __LINE__);
  }
  {  // ModelInstanceExecute fails: the core answers and releases
    Inbox inbox;
    auto* r = FixtureRequest(server, "fx_basic", &inbox, {1, 2}, x12);
    CHECK_OK(api.InferenceRequestSetBoolParameter(r, "fixture_execute_error", true));
    CHECK_OK(api.ServerInferAsync(server, r, nullptr));
    inbox.Wait();
    CHECK_OK(api.InferenceRequestDelete(r));
    CHECK(inbox.events.size() == 2 && inbox.events[0].kind == Event::kResponse &&
          inbox.events[0].flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL &&
          inbox.events[1].kind == Event::kRelease);
    ExpectResponseError(
        inbox.events, TRITONSERVER_ERROR_INTERNAL, "fixture: execution failed", __LINE__);
  }
  {  // statistics from the backend's reports
    const std::string stats = Statistics(server, "fx_basic");
    CHECK_HAS(stats, "\"inference_count\":3,\"execution_count\":4,");
    CHECK_HAS(stats, "\"success\":{\"count\":3,");
    CHECK_HAS(stats, "\"fail\":{\"count\":2,");
    CHECK_HAS(stats, "\"queue\":{\"count\":3,");
    CHECK_HAS(stats, "\"batch_stats\":[{\"batch_size\":1,\"compute_input\":{\"count\":4,");
    const std::string metrics = MetricsText(server);
    CHECK_HAS(metrics, "nv_inference_request_success{model=\"fx_basic\",version=\"1\"} 3\n");
    CHECK_HAS(metrics, "nv_inference_request_failure{model=\"fx_basic\",reason=\"BACKEND\",version=\"1\"} 2\n");
    CHECK_HAS(metrics, "nv_inference_count{model=\"fx_basic\",version=\"1\"} 3\n");
    CHECK_HAS(metrics, "nv_inference_exec_count{model=\"fx_basic\",version=\"1\"} 4\n");
  }
  {  // dynamic batching: requests queued behind a busy instance run as one
    const std::vector<float> x13 = {1, 2, 3};
    const std::vector<float> x23 = {1, 2, 3, 4, 5, 6};
    Inbox first;
    auto* r0 = FixtureRequest(server, "fx_batch", &first, {1, 3}, x13);
    CHECK_OK(api.InferenceRequestSetIntParameter(r0, "fixture_sleep_ms", 300));
    FixtureLog(fixture, true);
    CHECK_OK(api.ServerInferAsync(server, r0, nullptr));
    CHECK(WaitForLogLine(fixture, "Execute fx_batch_0_0 1"));
    std::deque<Inbox> inboxes(4);
    std::vector<TRITONSERVER_InferenceRequest*> rs;
    for (auto& inbox : inboxes) {
      rs.push_back(FixtureRequest(server, "fx_batch", &inbox, {2, 3}, x23));
      CHECK_OK(api.ServerInferAsync(server, rs.back(), nullptr));
    }
    ExpectY(first, {1, 3}, x13, 2, __LINE__);
    for (auto& inbox : inboxes) ExpectY(inbox, {2, 3}, x23, 2, __LINE__);
    for (auto* r : rs) CHECK_OK(api.InferenceRequestDelete(r));
    CHECK_OK(api.InferenceRequestDelete(r0));
    CHECK_HAS(FixtureLog(fixture, true), "Execute fx_batch_0_0 4\n");
    const std::string stats = Statistics(server, "fx_batch");
    CHECK_HAS(stats, "\"inference_count\":9,\"execution_count\":2,");
    CHECK_HAS(stats, "\"success\":{\"count\":5,");
    CHECK_HAS(stats, "{\"batch_size\":1,\"compute_input\":{\"count\":1,");
    CHECK_HAS(stats, "{\"batch_size\":8,\"compute_input\":{\"count\":1,");
    const std::string key = "\"queue\":{\"count\":5,\"ns\":";
    const size_t at = stats.find(key);
    CHECK(at != std::string::npos);
    if (at != std::string::npos) {
      // four requests waited for the busy instance (about 300 ms each)
      CHECK(std::atoll(stats.c_str() + at + key.size()) > 4LL * 150 * 1000 * 1000);
    }
  }
  {  // released after Execute returned, from the backend's own thread
    const std::vector<float> x11 = {5};
    Inbox late, quick;
    auto* r0 = FixtureRequest(server, "fx_batch", &late, {1, 1}, x11);
    CHECK_OK(api.InferenceRequestSetIntParameter(r0, "fixture_later_ms", 1000));
    CHECK_OK(api.ServerInferAsync(server, r0, nullptr));
    CHECK(WaitForLogLine(fixture, "Execute fx_batch_0_0 1"));  // returned
    auto* r1 = FixtureRequest(server, "fx_batch", &quick, {1, 1}, x11);
    CHECK_OK(api.ServerInferAsync(server, r1, nullptr));
    ExpectY(quick, {1, 1}, x11, 2, __LINE__);
    {
      std::lock_guard<std::mutex> lk(late.mu);
      CHECK(late.events.empty());  // the one instance went on meanwhile
    }
    ExpectY(late, {1, 1}, x11, 2, __LINE__);
    CHECK(late.events.size() == 2 && quick.events.size() == 2 &&
          late.events[1].thread != quick.events[1].thread);
    CHECK_OK(api.InferenceRequestDelete(r0));
    CHECK_OK(api.InferenceRequestDelete(r1));
    CHECK_HAS(FixtureLog(fixture, true), "answering later\n");
  }
  {  // decoupled: released first, two responses, then FINAL alone
    const std::vector<float> x3 = {1, 2, 3};
    Inbox inbox;
    auto* r = FixtureRequest(server, "fx_decoupled", &inbox, {3}, x3);
    CHECK_OK(api.ServerInferAsync(server, r, nullptr));
    inbox.Wait();
    CHECK(inbox.events.size() == 4);
    if (inbox.events.size() == 4) {
      CHECK(inbox.events[0].kind == Event::kRelease);
      for (int i = 1; i <= 2; ++i) {
        CHECK(inbox.events[i].flags == 0 && inbox.events[i].response != nullptr);
        std::string name;
        std::vector<int64_t> shape;
        auto y = OutputValues<float>(inbox.events[i].response, 0, &name, &shape);
        const float f = i == 1 ? 2 : 4;
        CHECK((y == std::vector<float>{f * 1, f * 2, f * 3}));
        CHECK_OK(api.InferenceResponseDelete(inbox.events[i].response));
      }
      CHECK(inbox.events[3].response == nullptr &&
            inbox.events[3].flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL);
    }
    CHECK_OK(api.InferenceRequestDelete(r));
    CHECK_HAS(FixtureLog(fixture, true), "factory cancelled=false\n");
  }
  {  // the libraries found through a linked version directory and in the
     // model directory
    for (const char* m : {"fx_symlink", "fx_modeldir"}) {
      Inbox inbox;
      auto* r = FixtureRequest(server, m, &inbox, {1, 2}, x12);
      CHECK_OK(api.ServerInferAsync(server, r, nullptr));
      ExpectY(inbox, {1, 2}, x12, 2, __LINE__);
      CHECK_OK(api.InferenceRequestDelete(r));
    }
    CHECK(LogLines(FixtureLog(copy), "Execute fx_symlink_0_0 1").size() == 1);
  }

  // ---- unloading finalizes instances then the model; the backend stays
  // until the server goes ----
  FixtureLog(fixture, true);
  CHECK_OK(api.ServerUnloadModel(server, "fx_basic"));
  CHECK(WaitForLogLine(fixture, "ModelFinalize fx_basic"));
  log = FixtureLog(fixture, true);
  CHECK(log ==
        "InstanceFinalize fx_basic_0_0\nInstanceFinalize fx_basic_0_1\n"
        "ModelFinalize fx_basic\n");
  CHECK_OK(api.ServerLoadModel(server, "fx_basic"));
  log = FixtureLog(fixture, true);
  CHECK(LogLines(log, "ModelInitialize fx_basic 1").size() == 1);
  CHECK(LogLines(log, "Initialize fixture").empty());
  CHECK_OK(api.ServerStop(server));
  CHECK_OK(api.ServerDelete(server));
  log = FixtureLog(fixture);
  CHECK(LogLines(log, "Finalize fixture api").empty());
  CHECK((LogLines(log, "Finalize fixture") ==
         std::vector<std::string>{"Finalize fixture", "Finalize fixture_md"} ||
         LogLines(log, "Finalize fixture") ==
             std::vector<std::string>{"Finalize fixture_md", "Finalize fixture"}));
  CHECK(LogLines(log, "ModelFinalize fx_batch").size() == 1);
  CHECK(LogLines(FixtureLog(copy), "Finalize fixture_rt").size() == 1);
  Shell("rm -rf " + tmp);
}

}  // namespace

int
main(int argc, char** argv)
{
  const auto t0 = std::chrono::steady_clock::now();
  const char* lib = argc > 1 ? argv[1] : TESTCORE_LIBRARY;
  const char* models = argc > 2 ? argv[2] : TESTCORE_MODELS;
  void* handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "dlopen failed: %s\n", dlerror());
    return 1;
  }
#define TC_LOAD(minor, ret, name, params)                                 \
  api.name = reinterpret_cast<TritonFn_##name>(                           \
      dlsym(handle, "TRITONSERVER_" #name));                              \
  if (api.name == nullptr) {                                              \
    std::fprintf(stderr, "missing TRITONSERVER_%s\n", #name);            \
    return 1;                                                             \
  }
  TRITON_API_FUNCTIONS(TC_LOAD)
#undef TC_LOAD
  const int threads_at_start = ThreadCount();

  uint32_t major = 0, minor = 0;
  CHECK_OK(api.ApiVersion(&major, &minor));
  CHECK(major == 1 && minor == 34);
  {
    // The api_1_24 variant next to the library.
    std::string other = lib;
    other = other.substr(0, other.find_last_of('/')) + "/api_1_24/libtritonserver.so";
    void* h2 = dlopen(other.c_str(), RTLD_NOW | RTLD_LOCAL);
    CHECK(h2 != nullptr);
    if (h2 != nullptr) {
      auto fn = reinterpret_cast<TritonFn_ApiVersion>(dlsym(h2, "TRITONSERVER_ApiVersion"));
      CHECK_OK(fn(&major, &minor));
      CHECK(major == 1 && minor == 24);
      dlclose(h2);
    }
  }

  TRITONSERVER_Error* e = api.ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "x");
  CHECK(std::string(api.ErrorCodeString(e)) == "Invalid argument");
  api.ErrorDelete(e);

  // Missing repository: ServerNew fails, server stays null.
  {
    TRITONSERVER_ServerOptions* opts = nullptr;
    CHECK_OK(api.ServerOptionsNew(&opts));
    CHECK_OK(api.ServerOptionsSetModelRepositoryPath(opts, "/nonexistent/repo"));
    CHECK_OK(api.ServerOptionsSetLogInfo(opts, false));
    TRITONSERVER_Server* s = nullptr;
    EXPECT_ERROR(
        api.ServerNew(&s, opts), TRITONSERVER_ERROR_INTERNAL,
        "failed to stat file /nonexistent/repo");
    CHECK(s == nullptr);
    CHECK_OK(api.ServerOptionsDelete(opts));
  }

  CHECK_OK(api.ResponseAllocatorNew(&allocator, Alloc, Release, nullptr));
  CHECK_OK(api.ResponseAllocatorSetQueryFunction(allocator, Query));

  TRITONSERVER_Server* server = StartServer(TRITONSERVER_MODEL_CONTROL_EXPLICIT, models);
  CHECK(server != nullptr);
  if (server == nullptr) {
    return 1;
  }
  for (const char* m : {"identity_fp32", "add_sub", "repeat_int32"}) {
    CHECK_OK(api.ServerLoadModel(server, m));
  }
  bool ready = false;
  CHECK_OK(api.ServerIsReady(server, &ready));
  CHECK(ready);

  TestIdentity(server);
  TestAddSub(server);
  TestRepeat(server);
  TestErrors(server);
  TestJson(server);
  TestLoadFromMemory(server);
  CHECK(query_calls.load() > 0);

  // Unloaded model.
  CHECK_OK(api.ServerUnloadModel(server, "add_sub"));
  {
    TRITONSERVER_InferenceRequest* r = nullptr;
    EXPECT_ERROR(
        api.InferenceRequestNew(&r, server, "add_sub", -1),
        TRITONSERVER_ERROR_NOT_FOUND,
        "Request for unknown model: 'add_sub' has no available versions");
    TRITONSERVER_Message* msg = nullptr;
    CHECK_OK(api.ServerModelIndex(server, 0, &msg));
    const std::string index = MessageJson(msg);
    std::printf("index: %s\n", index.c_str());
    CHECK(index.rfind(
              "[{\"name\":\"add_sub\",\"version\":\"1\",\"state\":\"UNAVAILABLE\","
              "\"reason\":\"unloaded\"},{\"name\":\"add_sub_chain\"},"
              "{\"name\":\"bytes_echo\"},",
              0) == 0);
  }

  const auto stop0 = std::chrono::steady_clock::now();
  CHECK_OK(api.ServerStop(server));
  const auto stop_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - stop0)
                           .count();
  // Nothing in flight: the stop does not wait out the 5 s exit timeout (a
  // bound well above an unloaded stop, which a busy machine does not reach).
  CHECK(stop_ms < 4000);
  bool live = true;
  EXPECT_ERROR(api.ServerIsLive(server, &live), TRITONSERVER_ERROR_UNAVAILABLE, "Server exiting");
  CHECK_OK(api.ServerDelete(server));

  TestPollMode(models);
  TestStopWithLiveResponse(models);
  TestTwoServersAndConcurrency(models);
  TestBackendApiExports(handle);
  TestBackendLibraries(lib, TESTCORE_FIXTURE_BACKEND);

  CHECK_OK(api.ResponseAllocatorDelete(allocator));
  CHECK(alloc_calls.load() == release_calls.load());
  CHECK(ThreadCountSettled(threads_at_start) == threads_at_start);

  const auto total_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - t0)
                            .count();
  std::printf(
      "smoke test: %s (%d failures, stop %lld ms, total %lld ms)\n",
      failures == 0 ? "OK" : "FAILED", failures,
      static_cast<long long>(stop_ms), static_cast<long long>(total_ms));
  // The library is not dlclose()d: like Triton it keeps a few process-wide
  // singletons (logger, metrics registry, config schema) for its lifetime.
  (void)handle;
  return failures == 0 ? 0 : 1;
}
