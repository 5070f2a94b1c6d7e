// Test core fixture: a small backend library (libtriton_fixture.so) that
// drives the test core's backend API the way a Triton backend does. Built
// against native/core/backend_api.h and native/core/triton_api.h only; it links
// against libtritonserver.so like Triton's backends.
//
// The model: input "X" (FP32, any shape), output "Y" = 2 * X, batching
// honoured (the batch size of a request is X's first dimension when the
// model has max_batch_size > 0). A decoupled model answers each request
// with two responses (Y = 2 * X, then Y = 4 * X) from a response factory
// after releasing the request, then the FINAL flag alone.
//
// Steering, by request parameters:
//   fixture_execute_error (bool): ModelInstanceExecute returns an error.
//   fixture_fail (bool): the request gets an error response and is
//     reported failed.
//   fixture_later_ms (int): the execution's requests are answered, reported
//     and released by a thread of the backend that long after Execute
//     returned.
//   fixture_probe (bool): the request's properties and the API's answers to
//     bad indexes go to the log.
//   fixture_sleep_ms (int): ModelInstanceExecute sleeps that long first
//     (the instance is busy; requests queue up and batch).
// by model configuration parameters:
//   fixture_fail_model_init: ModelInitialize fails.
//   fixture_fail_instance: ModelInstanceInitialize fails for the instance
//     whose name is the value.
// and by a backend name starting with "fixture_badinit": Initialize fails.
//
// Every entry point call is recorded in a log the tests read with
// fixture_log() (exported).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "native/core/backend_api.h"

#define FX_EXPORT __attribute__((visibility("default")))

extern "C" {
#define FX_DECLARE_SERVER_API(minor, ret, name, params) \
  ret TRITONSERVER_##name params;
TRITON_API_FUNCTIONS(FX_DECLARE_SERVER_API)
#undef FX_DECLARE_SERVER_API
#define FX_DECLARE_BACKEND_API(ret, name, params) \
  ret TRITONBACKEND_##name params;
TRITON_BACKEND_API_FUNCTIONS(FX_DECLARE_BACKEND_API)
#undef FX_DECLARE_BACKEND_API
#define FX_DECLARE_ENTRY(name, params) \
  FX_EXPORT TRITONSERVER_Error* TRITONBACKEND_##name params;
TRITON_BACKEND_ENTRY_POINTS(FX_DECLARE_ENTRY)
#undef FX_DECLARE_ENTRY

// The log: one line per event, joined with '\n'. Returns the full length;
// copies what fits into 'buf' (NUL-terminated when size > 0).
FX_EXPORT size_t fixture_log(char* buf, size_t size);
FX_EXPORT void fixture_log_clear();
}

namespace {

std::mutex g_log_mu;
std::string g_log;

void
Log(const std::string& line)
{
  std::lock_guard<std::mutex> lk(g_log_mu);
  g_log += line;
  g_log += '\n';
}

// The message of 'err' (deleted), or "ok".
std::string
Take(TRITONSERVER_Error* err)
{
  if (err == nullptr) return "ok";
  std::string s = TRITONSERVER_ErrorMessage(err);
  TRITONSERVER_ErrorDelete(err);
  return s;
}

uint64_t
Now()
{
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct ModelState {
  std::string name;
  std::string config;
  bool decoupled = false;
  bool batching = false;
  std::mutex mu;
  std::vector<std::thread> threads;
};

struct InstanceState {
  std::string name;
  ModelState* model = nullptr;
};

// The string value of a configuration parameter, or "" (a plain search of
// the configuration JSON is enough for a fixture).
std::string
ConfigParameter(const std::string& config, const std::string& key)
{
  const std::string needle = "\"" + key + "\":{\"string_value\":\"";
  const size_t at = config.find(needle);
  if (at == std::string::npos) return "";
  const size_t from = at + needle.size();
  return config.substr(from, config.find('"', from) - from);
}

struct RequestParams {
  bool execute_error = false;
  bool fail = false;
  bool probe = false;
  int64_t later_ms = 0;
  int64_t sleep_ms = 0;
};

RequestParams
ReadParams(TRITONBACKEND_Request* request)
{
  RequestParams p;
  uint32_t count = 0;
  Take(TRITONBACKEND_RequestParameterCount(request, &count));
  for (uint32_t i = 0; i < count; ++i) {
    const char* key = nullptr;
    TRITONSERVER_ParameterType type;
    const void* value = nullptr;
    if (TRITONBACKEND_RequestParameter(request, i, &key, &type, &value) != nullptr) {
      continue;
    }
    const std::string k = key;
    if (k == "fixture_execute_error" && type == TRITONSERVER_PARAMETER_BOOL) {
      p.execute_error = *static_cast<const bool*>(value);
    } else if (k == "fixture_fail" && type == TRITONSERVER_PARAMETER_BOOL) {
      p.fail = *static_cast<const bool*>(value);
    } else if (k == "fixture_probe" && type == TRITONSERVER_PARAMETER_BOOL) {
      p.probe = *static_cast<const bool*>(value);
    } else if (k == "fixture_later_ms" && type == TRITONSERVER_PARAMETER_INT) {
      p.later_ms = *static_cast<const int64_t*>(value);
    } else if (k == "fixture_sleep_ms" && type == TRITONSERVER_PARAMETER_INT) {
      p.sleep_ms = *static_cast<const int64_t*>(value);
    }
  }
  return p;
}

std::string
ShapeText(const int64_t* shape, uint32_t dims)
{
  std::string s = "[";
  for (uint32_t i = 0; i < dims; ++i) {
    if (i > 0) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// Records what the request looks like through the API.
void
Probe(TRITONBACKEND_Request* request)
{
  std::string line = "probe";
  const char* id = nullptr;
  Take(TRITONBACKEND_RequestId(request, &id));
  line += " id=" + std::string(id);
  uint64_t corr = 0;
  TRITONSERVER_Error* err = TRITONBACKEND_RequestCorrelationId(request, &corr);
  line += " corr=" + (err == nullptr ? std::to_string(corr) : "<" + Take(err) + ">");
  uint32_t count = 0;
  Take(TRITONBACKEND_RequestInputCount(request, &count));
  line += " inputs=";
  for (uint32_t i = 0; i < count; ++i) {
    TRITONBACKEND_Input* input = nullptr;
    Take(TRITONBACKEND_RequestInputByIndex(request, i, &input));
    const char* name = nullptr;
    TRITONSERVER_DataType dtype;
    const int64_t* shape = nullptr;
    uint32_t dims = 0;
    uint64_t bytes = 0;
    uint32_t buffers = 0;
    Take(TRITONBACKEND_InputProperties(
        input, &name, &dtype, &shape, &dims, &bytes, &buffers));
    line += std::string(i ? "," : "") + name + ShapeText(shape, dims) + ":" +
            std::to_string(bytes) + "/" + std::to_string(buffers);
    if (i == 0) {
      // Only the name asked for; and a buffer past the last.
      const char* only = nullptr;
      Take(TRITONBACKEND_InputProperties(
          input, &only, nullptr, nullptr, nullptr, nullptr, nullptr));
      const void* past = &line;
      uint64_t past_size = 7;
      TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_GPU;
      int64_t mid = 3;
      const std::string r = Take(
          TRITONBACKEND_InputBuffer(input, buffers, &past, &past_size, &mt, &mid));
      line += std::string("{name_only=") + only + " past_end=" + r + "/" +
              (past == nullptr ? "null" : "set") + "/" +
              std::to_string(past_size) + "/" + std::to_string(mt) + "/" +
              std::to_string(mid) + "}";
    }
  }
  TRITONBACKEND_Input* none = nullptr;
  line += " bad_input=<" +
          Take(TRITONBACKEND_RequestInputByIndex(request, count, &none)) + ">";
  Take(TRITONBACKEND_RequestOutputCount(request, &count));
  line += " outputs=";
  for (uint32_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    Take(TRITONBACKEND_RequestOutputName(request, i, &name));
    line += std::string(i ? "," : "") + name;
  }
  const char* no_name = nullptr;
  line += " bad_output=<" +
          Take(TRITONBACKEND_RequestOutputName(request, count, &no_name)) + ">";
  Take(TRITONBACKEND_RequestParameterCount(request, &count));
  line += " params=";
  for (uint32_t i = 0; i < count; ++i) {
    const char* key = nullptr;
    TRITONSERVER_ParameterType type;
    const void* value = nullptr;
    Take(TRITONBACKEND_RequestParameter(request, i, &key, &type, &value));
    line += std::string(i ? "," : "") + key + ":";
    switch (type) {
      case TRITONSERVER_PARAMETER_STRING:
        line += "s:" + std::string(static_cast<const char*>(value));
        break;
      case TRITONSERVER_PARAMETER_INT:
        line += "i:" + std::to_string(*static_cast<const int64_t*>(value));
        break;
      case TRITONSERVER_PARAMETER_BOOL:
        line += std::string("b:") +
                (*static_cast<const bool*>(value) ? "true" : "false");
        break;
      case TRITONSERVER_PARAMETER_DOUBLE: {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%g", *static_cast<const double*>(value));
        line += std::string("d:") + buf;
        break;
      }
      default:
        line += "?";
        break;
    }
  }
  const char* no_key = nullptr;
  TRITONSERVER_ParameterType no_type;
  const void* no_value = nullptr;
  line += " bad_param=<" +
          Take(TRITONBACKEND_RequestParameter(
              request, count, &no_key, &no_type, &no_value)) +
          ">";
  bool cancelled = true;
  Take(TRITONBACKEND_RequestIsCancelled(request, &cancelled));
  line += std::string(" cancelled=") + (cancelled ? "true" : "false");
  // A response that is never sent: an output the model does not have, a
  // second buffer for one output; deleting it releases the buffer.
  TRITONBACKEND_Response* scratch = nullptr;
  Take(TRITONBACKEND_ResponseNew(&scratch, request));
  TRITONBACKEND_Output* out = nullptr;
  const int64_t one[] = {1};
  line += " unknown_output=<" +
          Take(TRITONBACKEND_ResponseOutput(
              scratch, &out, "NOPE", TRITONSERVER_TYPE_FP32, one, 1)) +
          ">";
  Take(TRITONBACKEND_ResponseOutput(
      scratch, &out, "Y", TRITONSERVER_TYPE_FP32, one, 1));
  void* buffer = nullptr;
  TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
  int64_t mid = 0;
  Take(TRITONBACKEND_OutputBuffer(out, &buffer, sizeof(float), &mt, &mid));
  line += " second_buffer=<" +
          Take(TRITONBACKEND_OutputBuffer(out, &buffer, sizeof(float), &mt, &mid)) +
          ">";
  Take(TRITONBACKEND_ResponseDelete(scratch));
  Log(line);
}

// X of the request, gathered from its buffers; false when missing.
bool
ReadX(
    TRITONBACKEND_Request* request, std::vector<float>* x,
    std::vector<int64_t>* shape)
{
  uint32_t count = 0;
  Take(TRITONBACKEND_RequestInputCount(request, &count));
  for (uint32_t i = 0; i < count; ++i) {
    TRITONBACKEND_Input* input = nullptr;
    if (TRITONBACKEND_RequestInputByIndex(request, i, &input) != nullptr) continue;
    const char* name = nullptr;
    const int64_t* dims = nullptr;
    uint32_t dims_count = 0;
    uint64_t bytes = 0;
    uint32_t buffers = 0;
    Take(TRITONBACKEND_InputProperties(
        input, &name, nullptr, &dims, &dims_count, &bytes, &buffers));
    if (std::string(name) != "X") continue;
    shape->assign(dims, dims + dims_count);
    std::vector<char> data;
    for (uint32_t b = 0; b < buffers; ++b) {
      const void* base = nullptr;
      uint64_t size = 0;
      TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
      int64_t mid = 0;
      Take(TRITONBACKEND_InputBuffer(input, b, &base, &size, &mt, &mid));
      const char* p = static_cast<const char*>(base);
      data.insert(data.end(), p, p + size);
    }
    x->resize(data.size() / sizeof(float));
    if (!x->empty()) std::memcpy(x->data(), data.data(), x->size() * sizeof(float));
    return true;
  }
  return false;
}

// Sends Y = factor * X in 'response' with 'flags'; false when it could not.
bool
SendY(
    TRITONBACKEND_Response* response, const std::vector<float>& x,
    const std::vector<int64_t>& shape, float factor, uint32_t flags)
{
  TRITONBACKEND_Output* out = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ResponseOutput(
      response, &out, "Y", TRITONSERVER_TYPE_FP32, shape.data(),
      static_cast<uint32_t>(shape.size()));
  void* buffer = nullptr;
  if (err == nullptr) {
    TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
    int64_t mid = 0;
    err = TRITONBACKEND_OutputBuffer(
        out, &buffer, x.size() * sizeof(float), &mt, &mid);
    if (err == nullptr && mt != TRITONSERVER_MEMORY_CPU) {
      err = TRITONSERVER_ErrorNew(
          TRITONSERVER_ERROR_UNSUPPORTED, "fixture: output buffer not in CPU memory");
    }
  }
  if (err == nullptr) {
    float* y = static_cast<float*>(buffer);
    for (size_t i = 0; i < x.size(); ++i) y[i] = factor * x[i];
  }
  // Sent with the error if any; the error stays ours to delete.
  Take(TRITONBACKEND_ResponseSend(response, flags, err));
  const bool ok = err == nullptr;
  if (err != nullptr) TRITONSERVER_ErrorDelete(err);
  return ok;
}

// Answers, reports and releases the requests of one execution.
void
Answer(
    TRITONBACKEND_ModelInstance* instance, ModelState* model,
    std::vector<TRITONBACKEND_Request*> requests, uint64_t exec_start)
{
  const uint64_t compute_start = Now();
  uint64_t batch = 0;
  struct Done {
    bool ok = false;
    std::vector<float> x;
    std::vector<int64_t> shape;
  };
  std::vector<Done> done(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    TRITONBACKEND_Request* request = requests[i];
    const RequestParams params = ReadParams(request);
    if (params.probe) Probe(request);
    Done& d = done[i];
    const bool have_x = ReadX(request, &d.x, &d.shape);
    batch += (model->batching && !d.shape.empty()) ? d.shape[0] : 1;
    d.ok = have_x && !params.fail;
    if (!d.ok) {
      TRITONBACKEND_Response* response = nullptr;
      Take(TRITONBACKEND_ResponseNew(&response, request));
      TRITONSERVER_Error* err = TRITONSERVER_ErrorNew(
          TRITONSERVER_ERROR_INVALID_ARG,
          have_x ? "fixture: request failed" : "fixture: no input X");
      Take(TRITONBACKEND_ResponseSend(
          response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err));
      TRITONSERVER_ErrorDelete(err);
    } else if (!model->decoupled) {
      TRITONBACKEND_Response* response = nullptr;
      Take(TRITONBACKEND_ResponseNew(&response, request));
      d.ok = SendY(response, d.x, d.shape, 2, TRITONSERVER_RESPONSE_COMPLETE_FINAL);
    }
  }
  const uint64_t compute_end = Now();
  const uint64_t exec_end = Now();
  for (size_t i = 0; i < requests.size(); ++i) {
    Take(TRITONBACKEND_ModelInstanceReportStatistics(
        instance, requests[i], done[i].ok, exec_start, compute_start,
        compute_end, exec_end));
  }
  Take(TRITONBACKEND_ModelInstanceReportBatchStatistics(
      instance, batch, exec_start, compute_start, compute_end, exec_end));
  for (size_t i = 0; i < requests.size(); ++i) {
    TRITONBACKEND_Request* request = requests[i];
    if (!model->decoupled || !done[i].ok) {
      Take(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL));
      continue;
    }
    // Decoupled: release first, then answer through the factory.
    TRITONBACKEND_ResponseFactory* factory = nullptr;
    Take(TRITONBACKEND_ResponseFactoryNew(&factory, request));
    Take(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL));
    for (float factor : {2.0f, 4.0f}) {
      TRITONBACKEND_Response* response = nullptr;
      Take(TRITONBACKEND_ResponseNewFromFactory(&response, factory));
      SendY(response, done[i].x, done[i].shape, factor, 0);
    }
    bool cancelled = true;
    Take(TRITONBACKEND_ResponseFactoryIsCancelled(factory, &cancelled));
    Log(std::string("factory cancelled=") + (cancelled ? "true" : "false"));
    Take(TRITONBACKEND_ResponseFactorySendFlags(
        factory, TRITONSERVER_RESPONSE_COMPLETE_FINAL));
    Take(TRITONBACKEND_ResponseFactoryDelete(factory));
  }
}

}  // namespace

extern "C" {

size_t
fixture_log(char* buf, size_t size)
{
  std::lock_guard<std::mutex> lk(g_log_mu);
  if (size > 0) {
    const size_t n = std::min(size - 1, g_log.size());
    std::memcpy(buf, g_log.data(), n);
    buf[n] = '\0';
  }
  return g_log.size();
}

void
fixture_log_clear()
{
  std::lock_guard<std::mutex> lk(g_log_mu);
  g_log.clear();
}

TRITONSERVER_Error*
TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend)
{
  const char* name = nullptr;
  Take(TRITONBACKEND_BackendName(backend, &name));
  uint32_t major = 0, minor = 0;
  Take(TRITONBACKEND_ApiVersion(&major, &minor));
  Log("Initialize " + std::string(name) + " api " + std::to_string(major) +
      "." + std::to_string(minor));
  if (major != kTritonBackendApiMajor || minor < kTritonBackendApiMinMinor) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_UNSUPPORTED, "fixture: backend API too old");
  }
  if (std::string(name).rfind("fixture_badinit", 0) == 0) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_UNAVAILABLE, "fixture: backend initialization failed");
  }
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_Finalize(TRITONBACKEND_Backend* backend)
{
  const char* name = nullptr;
  Take(TRITONBACKEND_BackendName(backend, &name));
  Log("Finalize " + std::string(name));
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model)
{
  const char* name = nullptr;
  uint64_t version = 0;
  Take(TRITONBACKEND_ModelName(model, &name));
  Take(TRITONBACKEND_ModelVersion(model, &version));
  TRITONSERVER_Message* message = nullptr;
  const std::string v2 = Take(TRITONBACKEND_ModelConfig(model, 2, &message));
  Take(TRITONBACKEND_ModelConfig(model, 1, &message));
  const char* base = nullptr;
  size_t size = 0;
  Take(TRITONSERVER_MessageSerializeToJson(message, &base, &size));
  const std::string config(base, size);
  TRITONSERVER_MessageDelete(message);
  Log("ModelInitialize " + std::string(name) + " " + std::to_string(version) +
      " config2=<" + v2 + ">");
  Log("config " + config);
  if (config.find("\"fixture_fail_model_init\"") != std::string::npos) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INVALID_ARG, "fixture: model initialization failed");
  }
  auto* state = new ModelState();
  state->name = name;
  state->config = config;
  state->decoupled =
      config.find("\"model_transaction_policy\":{\"decoupled\":true}") !=
      std::string::npos;
  state->batching = config.find("\"max_batch_size\":0,") == std::string::npos;
  Take(TRITONBACKEND_ModelSetState(model, state));
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model)
{
  void* vstate = nullptr;
  Take(TRITONBACKEND_ModelState(model, &vstate));
  const char* name = nullptr;
  Take(TRITONBACKEND_ModelName(model, &name));
  auto* state = static_cast<ModelState*>(vstate);
  Log("ModelFinalize " + std::string(name) + (state ? "" : " (no state)"));
  if (state != nullptr) {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lk(state->mu);
      threads.swap(state->threads);
    }
    for (auto& t : threads) {
      if (t.get_id() == std::this_thread::get_id()) {
        t.detach();
      } else {
        t.join();
      }
    }
    delete state;
  }
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance)
{
  const char* name = nullptr;
  Take(TRITONBACKEND_ModelInstanceName(instance, &name));
  TRITONBACKEND_Model* model = nullptr;
  Take(TRITONBACKEND_ModelInstanceModel(instance, &model));
  void* vstate = nullptr;
  Take(TRITONBACKEND_ModelState(model, &vstate));
  auto* mstate = static_cast<ModelState*>(vstate);
  Log("InstanceInitialize " + std::string(name) + " of " + mstate->name);
  if (ConfigParameter(mstate->config, "fixture_fail_instance") == name) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INTERNAL,
        ("fixture: instance " + std::string(name) + " failed").c_str());
  }
  auto* state = new InstanceState();
  state->name = name;
  state->model = mstate;
  Take(TRITONBACKEND_ModelInstanceSetState(instance, state));
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance)
{
  const char* name = nullptr;
  Take(TRITONBACKEND_ModelInstanceName(instance, &name));
  void* vstate = nullptr;
  Take(TRITONBACKEND_ModelInstanceState(instance, &vstate));
  Log("InstanceFinalize " + std::string(name) + (vstate ? "" : " (no state)"));
  delete static_cast<InstanceState*>(vstate);
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
    const uint32_t request_count)
{
  const uint64_t exec_start = Now();
  void* vstate = nullptr;
  Take(TRITONBACKEND_ModelInstanceState(instance, &vstate));
  auto* state = static_cast<InstanceState*>(vstate);
  Log("Execute " + state->name + " " + std::to_string(request_count));
  int64_t later_ms = 0, sleep_ms = 0;
  for (uint32_t i = 0; i < request_count; ++i) {
    const RequestParams params = ReadParams(requests[i]);
    if (params.execute_error) {
      // The requests stay Triton's: nothing of them is kept.
      return TRITONSERVER_ErrorNew(
          TRITONSERVER_ERROR_INTERNAL, "fixture: execution failed");
    }
    later_ms = std::max(later_ms, params.later_ms);
    sleep_ms = std::max(sleep_ms, params.sleep_ms);
  }
  if (sleep_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  }
  // The pointer array is Triton's; the requests are now ours.
  std::vector<TRITONBACKEND_Request*> owned(requests, requests + request_count);
  if (later_ms <= 0) {
    Answer(instance, state->model, std::move(owned), exec_start);
    return nullptr;
  }
  ModelState* model = state->model;
  std::lock_guard<std::mutex> lk(model->mu);
  model->threads.emplace_back([instance, model, owned, exec_start, later_ms] {
    std::this_thread::sleep_for(std::chrono::milliseconds(later_ms));
    Log("answering later");
    Answer(instance, model, owned, exec_start);
  });
  return nullptr;
}

}  // extern "C"
