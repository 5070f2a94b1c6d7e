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
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "native/triton_api.h"

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
  TRITONSERVER_Message* msg = nullptr;
  CHECK_OK(api.ServerModelStatistics(b, "identity_int32", 1, &msg));
  // Requests waiting together may run as one execution (dynamic batching).
  const std::string stats = MessageJson(msg);
  const std::string key = "\"inference_count\":200,\"execution_count\":";
  const size_t at = stats.find(key);
  CHECK(at != std::string::npos);
  if (at != std::string::npos) {
    const long executions = std::atol(stats.c_str() + at + key.size());
    CHECK(executions >= 1 && executions <= 200);
  }
  CHECK_OK(api.ServerDelete(a));
  CHECK_OK(api.ServerDelete(b));
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
  CHECK(stop_ms < 1000);
  bool live = true;
  EXPECT_ERROR(api.ServerIsLive(server, &live), TRITONSERVER_ERROR_UNAVAILABLE, "Server exiting");
  CHECK_OK(api.ServerDelete(server));

  TestPollMode(models);
  TestStopWithLiveResponse(models);
  TestTwoServersAndConcurrency(models);

  CHECK_OK(api.ResponseAllocatorDelete(allocator));
  CHECK(alloc_calls.load() == release_calls.load());
  CHECK(ThreadCount() == threads_at_start);

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
