// Test core: server options, server life cycle and server queries.
//
// Imitates Triton's TRITONSERVER_ServerOptions* setters (defaults of the C
// API: server id "triton", POLL control mode, strict model config, strict
// readiness, exit timeout 30 s, metrics on; the logging setters change the
// process-wide logger at once, as in Triton), TRITONSERVER_ServerNew (model
// loading, then the "| Option | Value |" table Triton logs, and failure with
// "failed to load all models" when exit-on-error is set), stop/delete,
// readiness, metadata / model metadata / model config / model index /
// statistics JSON, and the Prometheus metrics text (one process-wide
// registry of per-model counters, like Triton's).
#include <fstream>
#include <sstream>

#include "server.h"

namespace tc {

namespace {

const char* const kServerVersion = "2.59.1";
const char* const kExtensions[] = {
    "classification",
    "sequence",
    "model_repository",
    "model_repository(unload_dependents)",
    "schedule_policy",
    "model_configuration",
    "system_shared_memory",
    "cuda_shared_memory",
    "binary_tensor_data",
    "parameters",
    "statistics",
    "logging"};

std::mutex g_metrics_mu;
std::map<std::pair<std::string, int64_t>, std::weak_ptr<MetricReporter>>
    g_reporters;

std::string
FormatMetricValue(double v)
{
  if (v == static_cast<double>(static_cast<int64_t>(v))) {
    return std::to_string(static_cast<int64_t>(v));
  }
  std::ostringstream ss;
  ss.precision(16);
  ss << v;
  return ss.str();
}

struct CpuSample {
  uint64_t busy = 0;
  uint64_t total = 0;
};

CpuSample
ReadCpuSample()
{
  CpuSample sample;
  std::ifstream stat("/proc/stat");
  std::string cpu;
  stat >> cpu;  // the aggregate "cpu" line
  uint64_t value = 0;
  for (int field = 0; field < 8 && (stat >> value); ++field) {
    sample.total += value;
    if (field != 3 && field != 4) sample.busy += value;  // not idle, iowait
  }
  return sample;
}

void
ReadMemory(uint64_t* total_bytes, uint64_t* used_bytes)
{
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kb = 0, total = 0, available = 0;
  std::string unit;
  while (meminfo >> key >> kb) {
    std::getline(meminfo, unit);
    if (key == "MemTotal:") total = kb;
    if (key == "MemAvailable:") available = kb;
  }
  *total_bytes = total * 1024;
  *used_bytes = (total - std::min(total, available)) * 1024;
}

}  // namespace

std::shared_ptr<MetricReporter>
GetMetricReporter(const std::string& model, int64_t version)
{
  std::lock_guard<std::mutex> lk(g_metrics_mu);
  auto& w = g_reporters[{model, version}];
  if (auto sp = w.lock()) {
    return sp;
  }
  auto sp = std::make_shared<MetricReporter>();
  sp->model = model;
  sp->version = version;
  w = sp;
  return sp;
}

std::string
SerializeMetrics(uint64_t pinned_pool_bytes, bool cpu_metrics)
{
  std::vector<std::shared_ptr<MetricReporter>> reps;
  {
    std::lock_guard<std::mutex> lk(g_metrics_mu);
    for (auto it = g_reporters.begin(); it != g_reporters.end();) {
      if (auto sp = it->second.lock()) {
        reps.push_back(sp);
        ++it;
      } else {
        it = g_reporters.erase(it);
      }
    }
  }
  std::string out;
  auto family = [&](const char* name, const char* help, const char* type,
                    const std::function<double(const MetricReporter&)>& get) {
    out += std::string("# HELP ") + name + " " + help + "\n";
    out += std::string("# TYPE ") + name + " " + type + "\n";
    for (const auto& r : reps) {
      out += std::string(name) + "{model=\"" + r->model + "\",version=\"" +
             std::to_string(r->version) + "\"} " +
             FormatMetricValue(get(*r)) + "\n";
    }
  };
  family(
      "nv_inference_request_success",
      "Number of successful inference requests, all batch sizes", "counter",
      [](const MetricReporter& r) { return double(r.success.load()); });
  out +=
      "# HELP nv_inference_request_failure Number of failed inference "
      "requests, all batch sizes\n# TYPE nv_inference_request_failure "
      "counter\n";
  static const char* const kReasons[] = {"REJECTED", "CANCELED", "BACKEND",
                                         "OTHER"};
  for (const auto& r : reps) {
    for (int i = 0; i < 4; ++i) {
      out += "nv_inference_request_failure{model=\"" + r->model +
             "\",reason=\"" + kReasons[i] + "\",version=\"" +
             std::to_string(r->version) + "\"} " +
             std::to_string(r->failure[i].load()) + "\n";
    }
  }
  family(
      "nv_inference_count",
      "Number of inferences performed (does not include cached requests)",
      "counter", [](const MetricReporter& r) { return double(r.count.load()); });
  family(
      "nv_inference_exec_count",
      "Number of model executions performed (does not include cached "
      "requests)",
      "counter", [](const MetricReporter& r) { return double(r.exec.load()); });
  family(
      "nv_inference_request_duration_us",
      "Cumulative inference request duration in microseconds (includes "
      "cached requests)",
      "counter",
      [](const MetricReporter& r) { return double(r.request_us.load()); });
  family(
      "nv_inference_queue_duration_us",
      "Cumulative inference queuing duration in microseconds (includes "
      "cached requests)",
      "counter",
      [](const MetricReporter& r) { return double(r.queue_us.load()); });
  family(
      "nv_inference_compute_input_duration_us",
      "Cumulative compute input duration in microseconds (does not include "
      "cached requests)",
      "counter",
      [](const MetricReporter& r) { return double(r.compute_input_us.load()); });
  family(
      "nv_inference_compute_infer_duration_us",
      "Cumulative compute inference duration in microseconds (does not "
      "include cached requests)",
      "counter",
      [](const MetricReporter& r) { return double(r.compute_infer_us.load()); });
  family(
      "nv_inference_compute_output_duration_us",
      "Cumulative inference compute output duration in microseconds (does "
      "not include cached requests)",
      "counter", [](const MetricReporter& r) {
        return double(r.compute_output_us.load());
      });
  // The identity backend registers its own counter of input bytes, listed
  // after Triton's duration families (observed 2026-12-01: 28 after
  // requests of 12, 8 and 8 bytes; the series goes with the model).
  {
    std::string series;
    for (const auto& r : reps) {
      if (!r->identity_backend) continue;
      series += "input_byte_size_counter{model=\"" + r->model + "\",version=\"" +
                std::to_string(r->version) + "\"} " +
                std::to_string(r->input_bytes.load()) + "\n";
    }
    if (!series.empty()) {
      out +=
          "# HELP input_byte_size_counter Cumulative input byte size of all "
          "requests received by the model\n# TYPE input_byte_size_counter "
          "counter\n" +
          series;
    }
  }
  family(
      "nv_inference_pending_request_count",
      "Instantaneous number of pending requests awaiting execution "
      "per-model.",
      "gauge", [](const MetricReporter& r) { return double(r.pending.load()); });
  family(
      "nv_model_load_duration_secs", "Model load time in seconds", "gauge",
      [](const MetricReporter& r) { return r.load_secs; });
  out +=
      "# HELP nv_pinned_memory_pool_total_bytes Pinned memory pool total "
      "memory size, in bytes\n# TYPE nv_pinned_memory_pool_total_bytes "
      "gauge\nnv_pinned_memory_pool_total_bytes " +
      std::to_string(pinned_pool_bytes) +
      "\n# HELP nv_pinned_memory_pool_used_bytes Pinned memory pool used "
      "memory size, in bytes\n# TYPE nv_pinned_memory_pool_used_bytes "
      "gauge\nnv_pinned_memory_pool_used_bytes 0\n";
  if (cpu_metrics) {
    // CPU families after the pinned pool's, with the HELP texts seen on real
    // Triton (observed 2026-12-01). Utilization is the busy share of
    // /proc/stat's CPU time since the previous scrape.
    const CpuSample cpu = ReadCpuSample();
    double utilization = 0;
    {
      static std::mutex mu;
      static CpuSample last;
      std::lock_guard<std::mutex> lk(mu);
      if (cpu.total > last.total) {
        utilization = static_cast<double>(cpu.busy - last.busy) /
                      static_cast<double>(cpu.total - last.total);
      }
      last = cpu;
    }
    uint64_t total_bytes = 0, used_bytes = 0;
    ReadMemory(&total_bytes, &used_bytes);
    out += "# HELP nv_cpu_utilization CPU utilization rate [0.0 - 1.0]\n"
           "# TYPE nv_cpu_utilization gauge\nnv_cpu_utilization " +
           FormatMetricValue(utilization) +
           "\n# HELP nv_cpu_memory_total_bytes CPU total memory (RAM), in bytes\n"
           "# TYPE nv_cpu_memory_total_bytes gauge\nnv_cpu_memory_total_bytes " +
           std::to_string(total_bytes) +
           "\n# HELP nv_cpu_memory_used_bytes CPU used memory (RAM), in bytes\n"
           "# TYPE nv_cpu_memory_used_bytes gauge\nnv_cpu_memory_used_bytes " +
           std::to_string(used_bytes) + "\n";
  }
  out += SerializeCustomMetrics();
  return out;
}

namespace {

json::Value
DurJson(uint64_t count, uint64_t ns)
{
  json::Value v = json::Value::Object();
  v.Add("count", json::Value::UInt(count));
  v.Add("ns", json::Value::UInt(ns));
  return v;
}

json::Value
ModelStatsJson(Model& m)
{
  std::lock_guard<std::mutex> lk(m.stats.mu);
  const ModelStats& s = m.stats;
  json::Value ms = json::Value::Object();
  ms.Add("name", json::Value::Str(m.name));
  ms.Add("version", json::Value::Str(std::to_string(m.version)));
  ms.Add("last_inference", json::Value::UInt(s.last_inference_ms));
  ms.Add("inference_count", json::Value::UInt(s.inference_count));
  ms.Add("execution_count", json::Value::UInt(s.execution_count));
  json::Value is = json::Value::Object();
  const uint64_t compute_count = s.success.count - s.cache_hit.count;
  is.Add("success", DurJson(s.success.count, s.success.ns));
  is.Add("fail", DurJson(s.fail.count, s.fail.ns));
  is.Add("queue", DurJson(s.success.count, s.queue.ns));
  is.Add("compute_input", DurJson(compute_count, s.compute_input.ns));
  is.Add("compute_infer", DurJson(compute_count, s.compute_infer.ns));
  is.Add("compute_output", DurJson(compute_count, s.compute_output.ns));
  is.Add("cache_hit", DurJson(s.cache_hit.count, s.cache_hit.ns));
  is.Add("cache_miss", DurJson(s.cache_miss.count, s.cache_miss.ns));
  ms.Add("inference_stats", std::move(is));
  json::Value rs = json::Value::Object();
  for (const auto& r : s.responses) {
    json::Value e = json::Value::Object();
    e.Add("compute_infer", DurJson(r.second.compute_infer.count, r.second.compute_infer.ns));
    e.Add("compute_output", DurJson(r.second.compute_output.count, r.second.compute_output.ns));
    e.Add("success", DurJson(r.second.success.count, r.second.success.ns));
    e.Add("fail", DurJson(r.second.fail.count, r.second.fail.ns));
    e.Add("empty_response", DurJson(r.second.empty_response.count, r.second.empty_response.ns));
    e.Add("cancel", DurJson(r.second.cancel.count, r.second.cancel.ns));
    rs.Add(std::to_string(r.first), std::move(e));
  }
  ms.Add("response_stats", std::move(rs));
  json::Value bs = json::Value::Array();
  for (const auto& b : s.batch) {
    json::Value e = json::Value::Object();
    e.Add("batch_size", json::Value::UInt(b.first));
    e.Add("compute_input", DurJson(b.second.count, b.second.input_ns));
    e.Add("compute_infer", DurJson(b.second.count, b.second.infer_ns));
    e.Add("compute_output", DurJson(b.second.count, b.second.output_ns));
    bs.Append(std::move(e));
  }
  ms.Add("batch_stats", std::move(bs));
  ms.Add("memory_usage", json::Value::Array());
  return ms;
}

TRITONSERVER_Message*
NewMessage(const json::Value& v)
{
  return new TRITONSERVER_Message{v.Serialize()};
}

void
PrintOptionsTable(const ServerCore& core)
{
  if (!LogIsEnabled(LogLevel::kInfo)) {
    return;
  }
  const TRITONSERVER_ServerOptions& o = core.opts;
  Table t({"Option", "Value"});
  t.AddRow({"server_id", o.server_id});
  t.AddRow({"server_version", kServerVersion});
  std::string exts;
  for (const char* e : kExtensions) {
    exts += std::string(exts.empty() ? "" : " ") + e;
  }
  t.AddRow({"server_extensions", exts});
  size_t i = 0;
  for (const auto& p : o.repo_paths) {
    t.AddRow({"model_repository_path[" + std::to_string(i++) + "]", p});
  }
  const char* mode = "<unknown>";
  switch (o.control_mode) {
    case TRITONSERVER_MODEL_CONTROL_NONE:
      mode = "MODE_NONE";
      break;
    case TRITONSERVER_MODEL_CONTROL_POLL:
      mode = "MODE_POLL";
      break;
    case TRITONSERVER_MODEL_CONTROL_EXPLICIT:
      mode = "MODE_EXPLICIT";
      break;
  }
  t.AddRow({"model_control_mode", mode});
  i = 0;
  for (const auto& m : o.startup_models) {
    t.AddRow({"startup_models_" + std::to_string(i++), m});
  }
  t.AddRow({"strict_model_config", std::to_string(o.strict_model_config ? 1 : 0)});
  t.AddRow({"model_config_name", o.model_config_name});
  t.AddRow(
      {"rate_limit",
       o.rate_limit_mode == TRITONSERVER_RATE_LIMIT_EXEC_COUNT ? "EXEC_COUNT"
                                                                : "OFF"});
  i = 0;
  for (const auto& d : o.rate_limit_resources) {
    for (const auto& r : d.second) {
      t.AddRow(
          {"rate_limit_resource[" + std::to_string(i++) + "]",
           "{\"name\":\"" + r.first + "\", \"count\":" +
               std::to_string(static_cast<int>(r.second)) +
               " \"device\":" + std::to_string(d.first) + "}"});
    }
  }
  t.AddRow({"pinned_memory_pool_byte_size", std::to_string(o.pinned_memory_pool_size)});
  for (const auto& c : o.cuda_memory_pool_size) {
    t.AddRow(
        {"cuda_memory_pool_byte_size{" + std::to_string(c.first) + "}",
         std::to_string(c.second)});
  }
  std::ostringstream cc;
  cc.setf(std::ios::fixed);
  cc.precision(1);
  cc << o.min_compute_capability;
  t.AddRow({"min_supported_compute_capability", cc.str()});
  t.AddRow({"strict_readiness", std::to_string(o.strict_readiness ? 1 : 0)});
  t.AddRow({"exit_timeout", std::to_string(o.exit_timeout)});
  t.AddRow({"cache_enabled", std::to_string(o.cache_config.empty() ? 0 : 1)});
  LogTable("tritonserver.cc", 2598, t);
}

// Counts a non-inference request while it runs (Triton waits for these
// during stop).
struct NonInferenceScope {
  explicit NonInferenceScope(ServerCore& c) : core(c) { core.inflight_non_inference++; }
  ~NonInferenceScope()
  {
    core.inflight_non_inference--;
    core.Notify();
  }
  ServerCore& core;
};

TRITONSERVER_Error*
NotReady()
{
  return NewError(TRITONSERVER_ERROR_UNAVAILABLE, "Server not ready");
}

}  // namespace
}  // namespace tc

using tc::NullArg;

#define TC_OPTS_CHECK(o) \
  if ((o) == nullptr) return NullArg("options")

extern "C" {

// ---------------------------------------------------------------------------
// Server options
// ---------------------------------------------------------------------------
TRITONSERVER_Error*
TRITONSERVER_ServerOptionsNew(TRITONSERVER_ServerOptions** options)
{
  if (options == nullptr) return NullArg("options");
  *options = new TRITONSERVER_ServerOptions();
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsDelete(TRITONSERVER_ServerOptions* options)
{
  delete options;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetServerId(
    TRITONSERVER_ServerOptions* options, const char* server_id)
{
  TC_OPTS_CHECK(options);
  if (server_id == nullptr) return NullArg("server_id");
  options->server_id = server_id;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetModelRepositoryPath(
    TRITONSERVER_ServerOptions* options, const char* model_repository_path)
{
  TC_OPTS_CHECK(options);
  if (model_repository_path == nullptr) return NullArg("model_repository_path");
  options->repo_paths.insert(model_repository_path);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetModelControlMode(
    TRITONSERVER_ServerOptions* options, TRITONSERVER_ModelControlMode mode)
{
  TC_OPTS_CHECK(options);
  switch (mode) {
    case TRITONSERVER_MODEL_CONTROL_NONE:
    case TRITONSERVER_MODEL_CONTROL_POLL:
    case TRITONSERVER_MODEL_CONTROL_EXPLICIT:
      options->control_mode = mode;
      return nullptr;
    default:
      return tc::NewError(
          TRITONSERVER_ERROR_INVALID_ARG,
          "unknown control mode '" + std::to_string(static_cast<int>(mode)) +
              "'");
  }
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetStartupModel(
    TRITONSERVER_ServerOptions* options, const char* model_name)
{
  TC_OPTS_CHECK(options);
  if (model_name == nullptr) return NullArg("model_name");
  options->startup_models.insert(model_name);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetStrictModelConfig(
    TRITONSERVER_ServerOptions* options, bool strict)
{
  TC_OPTS_CHECK(options);
  options->strict_model_config = strict;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetModelConfigName(
    TRITONSERVER_ServerOptions* options, const char* model_config_name)
{
  TC_OPTS_CHECK(options);
  if (model_config_name == nullptr) return NullArg("model_config_name");
  options->model_config_name = model_config_name;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetRateLimiterMode(
    TRITONSERVER_ServerOptions* options, TRITONSERVER_RateLimitMode mode)
{
  TC_OPTS_CHECK(options);
  if (mode != TRITONSERVER_RATE_LIMIT_OFF &&
      mode != TRITONSERVER_RATE_LIMIT_EXEC_COUNT) {
    return tc::NewError(
        TRITONSERVER_ERROR_INVALID_ARG,
        "unknown rate limit mode '" + std::to_string(static_cast<int>(mode)) +
            "'");
  }
  options->rate_limit_mode = mode;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsAddRateLimiterResource(
    TRITONSERVER_ServerOptions* options, const char* resource_name,
    const size_t resource_count, const int device)
{
  TC_OPTS_CHECK(options);
  if (resource_name == nullptr) return NullArg("resource_name");
  auto& dev = options->rate_limit_resources[device];
  auto it = dev.find(resource_name);
  if (it == dev.end()) {
    dev.emplace(resource_name, resource_count);
  } else if (it->second > resource_count) {
    it->second = resource_count;
  }
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetPinnedMemoryPoolByteSize(
    TRITONSERVER_ServerOptions* options, uint64_t size)
{
  TC_OPTS_CHECK(options);
  options->pinned_memory_pool_size = size;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetCudaMemoryPoolByteSize(
    TRITONSERVER_ServerOptions* options, int gpu_device, uint64_t size)
{
  TC_OPTS_CHECK(options);
  options->cuda_memory_pool_size[gpu_device] = size;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetCacheConfig(
    TRITONSERVER_ServerOptions* options, const char* cache_name,
    const char* config_json)
{
  TC_OPTS_CHECK(options);
  if (cache_name == nullptr) return NullArg("cache_name");
  if (config_json == nullptr) return NullArg("config_json");
  options->cache_config[cache_name] = config_json;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetCacheDirectory(
    TRITONSERVER_ServerOptions* options, const char* cache_dir)
{
  TC_OPTS_CHECK(options);
  if (cache_dir == nullptr) return NullArg("cache_dir");
  options->cache_dir = cache_dir;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetMinSupportedComputeCapability(
    TRITONSERVER_ServerOptions* options, double cc)
{
  TC_OPTS_CHECK(options);
  options->min_compute_capability = cc;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetExitOnError(
    TRITONSERVER_ServerOptions* options, bool exit)
{
  TC_OPTS_CHECK(options);
  options->exit_on_error = exit;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetStrictReadiness(
    TRITONSERVER_ServerOptions* options, bool strict)
{
  TC_OPTS_CHECK(options);
  options->strict_readiness = strict;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetExitTimeout(
    TRITONSERVER_ServerOptions* options, unsigned int timeout)
{
  TC_OPTS_CHECK(options);
  options->exit_timeout = timeout;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetBufferManagerThreadCount(
    TRITONSERVER_ServerOptions* options, unsigned int thread_count)
{
  TC_OPTS_CHECK(options);
  options->buffer_manager_thread_count = thread_count;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetModelLoadThreadCount(
    TRITONSERVER_ServerOptions* options, unsigned int thread_count)
{
  TC_OPTS_CHECK(options);
  options->model_load_thread_count = thread_count;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetModelLoadRetryCount(
    TRITONSERVER_ServerOptions* options, unsigned int retry_count)
{
  TC_OPTS_CHECK(options);
  options->model_load_retry_count = retry_count;
  options->model_load_retry_count_set = true;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetModelNamespacing(
    TRITONSERVER_ServerOptions* options, bool enable_namespace)
{
  TC_OPTS_CHECK(options);
  options->model_namespacing = enable_namespace;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetEnablePeerAccess(
    TRITONSERVER_ServerOptions* options, bool enable_peer_access)
{
  TC_OPTS_CHECK(options);
  options->peer_access = enable_peer_access;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetLogFile(
    TRITONSERVER_ServerOptions* options, const char* file)
{
  TC_OPTS_CHECK(options);
  const std::string err = tc::LogSetFile(file == nullptr ? "" : file);
  if (!err.empty()) {
    return tc::NewError(TRITONSERVER_ERROR_INTERNAL, err);
  }
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetLogInfo(
    TRITONSERVER_ServerOptions* options, bool log)
{
  TC_OPTS_CHECK(options);
  tc::LogSetEnabled(tc::LogLevel::kInfo, log);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetLogWarn(
    TRITONSERVER_ServerOptions* options, bool log)
{
  TC_OPTS_CHECK(options);
  tc::LogSetEnabled(tc::LogLevel::kWarning, log);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetLogError(
    TRITONSERVER_ServerOptions* options, bool log)
{
  TC_OPTS_CHECK(options);
  tc::LogSetEnabled(tc::LogLevel::kError, log);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetLogFormat(
    TRITONSERVER_ServerOptions* options, const TRITONSERVER_LogFormat format)
{
  TC_OPTS_CHECK(options);
  if (format == TRITONSERVER_LOG_DEFAULT || format == TRITONSERVER_LOG_ISO8601) {
    tc::LogSetFormat(format);
  }
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetLogVerbose(
    TRITONSERVER_ServerOptions* options, int level)
{
  TC_OPTS_CHECK(options);
  tc::LogSetVerbose(level);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetMetrics(
    TRITONSERVER_ServerOptions* options, bool metrics)
{
  TC_OPTS_CHECK(options);
  options->metrics = metrics;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetGpuMetrics(
    TRITONSERVER_ServerOptions* options, bool gpu_metrics)
{
  TC_OPTS_CHECK(options);
  options->gpu_metrics = gpu_metrics;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetCpuMetrics(
    TRITONSERVER_ServerOptions* options, bool cpu_metrics)
{
  TC_OPTS_CHECK(options);
  options->cpu_metrics = cpu_metrics;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetMetricsInterval(
    TRITONSERVER_ServerOptions* options, uint64_t metrics_interval_ms)
{
  TC_OPTS_CHECK(options);
  options->metrics_interval_ms = metrics_interval_ms;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetMetricsConfig(
    TRITONSERVER_ServerOptions* options, const char* name, const char* setting,
    const char* value)
{
  TC_OPTS_CHECK(options);
  if (name == nullptr) return NullArg("name");
  if (setting == nullptr) return NullArg("setting");
  if (value == nullptr) return NullArg("value");
  options->metrics_config[name].emplace_back(setting, value);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetBackendDirectory(
    TRITONSERVER_ServerOptions* options, const char* backend_dir)
{
  TC_OPTS_CHECK(options);
  if (backend_dir == nullptr) return NullArg("backend_dir");
  options->backend_dir = backend_dir;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetRepoAgentDirectory(
    TRITONSERVER_ServerOptions* options, const char* repoagent_dir)
{
  TC_OPTS_CHECK(options);
  if (repoagent_dir == nullptr) return NullArg("repoagent_dir");
  options->repoagent_dir = repoagent_dir;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetModelLoadDeviceLimit(
    TRITONSERVER_ServerOptions* options,
    const TRITONSERVER_InstanceGroupKind kind, const int device_id,
    const double fraction)
{
  TC_OPTS_CHECK(options);
  if (device_id < 0) {
    return tc::NewError(
        TRITONSERVER_ERROR_INVALID_ARG,
        "expects device ID >= 0, got " + std::to_string(device_id));
  }
  if (fraction < 0.0 || fraction > 1.0) {
    return tc::NewError(
        TRITONSERVER_ERROR_INVALID_ARG,
        "expects limit fraction to be in range [0.0, 1.0], got " +
            std::to_string(fraction));
  }
  if (kind != TRITONSERVER_INSTANCEGROUPKIND_GPU) {
    const char* names[] = {"AUTO", "CPU", "GPU", "MODEL"};
    const int k = static_cast<int>(kind);
    return tc::NewError(
        TRITONSERVER_ERROR_INVALID_ARG,
        std::string("given device kind is not supported, got: ") +
            ((k >= 0 && k <= 3) ? names[k] : "<invalid>"));
  }
  options->backend_config[""].emplace_back(
      "model-load-gpu-limit-device-" + std::to_string(device_id),
      std::to_string(fraction));
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetBackendConfig(
    TRITONSERVER_ServerOptions* options, const char* backend_name,
    const char* setting, const char* value)
{
  TC_OPTS_CHECK(options);
  if (backend_name == nullptr) return NullArg("backend_name");
  if (setting == nullptr) return NullArg("setting");
  if (value == nullptr) return NullArg("value");
  options->backend_config[backend_name].emplace_back(setting, value);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetHostPolicy(
    TRITONSERVER_ServerOptions* options, const char* policy_name,
    const char* setting, const char* value)
{
  TC_OPTS_CHECK(options);
  if (policy_name == nullptr) return NullArg("policy_name");
  if (setting == nullptr) return NullArg("setting");
  if (value == nullptr) return NullArg("value");
  const std::string s = setting;
  if (s != "numa-node" && s != "cpu-cores") {
    return tc::NewError(
        TRITONSERVER_ERROR_UNSUPPORTED,
        "Unsupported host policy setting '" + s +
            "' is specified, supported settings are 'numa-node', 'cpu-cores'");
  }
  options->host_policy[policy_name][s] = value;
  return nullptr;
}

// ---------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------
TRITONSERVER_Error*
TRITONSERVER_ServerNew(
    TRITONSERVER_Server** server, TRITONSERVER_ServerOptions* options)
{
  if (server == nullptr) return NullArg("server");
  TC_OPTS_CHECK(options);
  *server = nullptr;
  auto core = std::make_shared<tc::ServerCore>(*options);
  tc::Status status = core->Init();
  tc::PrintOptionsTable(*core);
  if (!status.ok()) {
    if (options->exit_on_error) {
      core->Stop(true /* force */);
      core->ShutdownThreads();
      return status.ToError();
    }
    TC_LOG_ERROR("tritonserver.cc", 2607, status.AsString());
  }
  *server = new TRITONSERVER_Server{core};
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerDelete(TRITONSERVER_Server* server)
{
  if (server == nullptr) {
    return nullptr;
  }
  tc::Status s = server->core->Stop();
  if (!s.ok()) {
    return s.ToError();  // like Triton, the server is not deleted
  }
  // After a stop that ran out of time, Triton's delete deletes anyway, under
  // backend threads still running requests: a crash later (observed on
  // r25.07). The test core refuses loudly instead of joining its threads.
  const int64_t inside = server->core->requests_inside->load();
  if (inside > 0) {
    tc::ContractViolation(
        "TRITONSERVER_ServerDelete while " + std::to_string(inside) +
        " request(s) are still inside the server's models (not yet released "
        "or without their FINAL response)");
  }
  server->core->ShutdownThreads();
  delete server;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerSetExitTimeout(
    TRITONSERVER_Server* server, unsigned int timeout)
{
  if (server == nullptr) return NullArg("server");
  server->core->opts.exit_timeout = timeout;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerStop(TRITONSERVER_Server* server)
{
  if (server == nullptr) {
    return nullptr;
  }
  return server->core->Stop().ToError();
}

TRITONSERVER_Error*
TRITONSERVER_ServerRegisterModelRepository(
    TRITONSERVER_Server* server, const char* repository_path,
    const TRITONSERVER_Parameter** name_mapping, const uint32_t mapping_count)
{
  if (server == nullptr) return NullArg("server");
  if (repository_path == nullptr) return NullArg("repository_path");
  if (name_mapping == nullptr && mapping_count != 0) {
    return tc::NewError(
        TRITONSERVER_ERROR_INVALID_ARG,
        "model mappings are not provided while mapping count is non-zero");
  }
  std::map<std::string, std::string> mapping;  // model name -> subdir
  for (uint32_t i = 0; i < mapping_count; ++i) {
    const TRITONSERVER_Parameter* p = name_mapping[i];
    if (p == nullptr) return NullArg("name_mapping[i]");
    if (p->type != TRITONSERVER_PARAMETER_STRING) {
      return tc::NewError(
          TRITONSERVER_ERROR_INVALID_ARG,
          "Mapped model name must be a string, found another type for " +
              p->name);
    }
    if (!mapping.emplace(p->str, p->name).second) {
      return tc::NewError(
          TRITONSERVER_ERROR_INVALID_ARG,
          std::string("failed to register '") + repository_path +
              "', there is a conflicting mapping for '" + p->str + "'");
    }
  }
  return server->core->RegisterRepository(repository_path, mapping).ToError();
}

TRITONSERVER_Error*
TRITONSERVER_ServerUnregisterModelRepository(
    TRITONSERVER_Server* server, const char* repository_path)
{
  if (server == nullptr) return NullArg("server");
  if (repository_path == nullptr) return NullArg("repository_path");
  return server->core->UnregisterRepository(repository_path).ToError();
}

TRITONSERVER_Error*
TRITONSERVER_ServerPollModelRepository(TRITONSERVER_Server* server)
{
  if (server == nullptr) return NullArg("server");
  tc::ServerCore& core = *server->core;
  if (core.state.load() != tc::ServerState::kReady) {
    return nullptr;
  }
  tc::NonInferenceScope scope(core);
  if (core.opts.control_mode != TRITONSERVER_MODEL_CONTROL_POLL) {
    return tc::NewError(TRITONSERVER_ERROR_UNAVAILABLE, "polling is disabled");
  }
  TC_LOG_VERBOSE(1, "server.cc", 373, "Polling model repository");
  core.ReapThreads();
  bool all_polled = true;
  return core.PollAndUpdate(&all_polled).ToError();
}

TRITONSERVER_Error*
TRITONSERVER_ServerIsLive(TRITONSERVER_Server* server, bool* live)
{
  if (server == nullptr) return NullArg("server");
  if (live == nullptr) return NullArg("live");
  *live = false;
  const tc::ServerState s = server->core->state.load();
  if (s == tc::ServerState::kExiting) {
    return tc::NewError(TRITONSERVER_ERROR_UNAVAILABLE, "Server exiting");
  }
  *live = s == tc::ServerState::kReady;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerIsReady(TRITONSERVER_Server* server, bool* ready)
{
  if (server == nullptr) return NullArg("server");
  if (ready == nullptr) return NullArg("ready");
  *ready = false;
  tc::ServerCore& core = *server->core;
  const tc::ServerState s = core.state.load();
  if (s == tc::ServerState::kExiting) {
    return tc::NewError(TRITONSERVER_ERROR_UNAVAILABLE, "Server exiting");
  }
  *ready = s == tc::ServerState::kReady;
  if (*ready && core.opts.strict_readiness) {
    *ready = core.IsReadyStrict();
  }
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerModelIsReady(
    TRITONSERVER_Server* server, const char* model_name,
    const int64_t model_version, bool* ready)
{
  if (server == nullptr) return NullArg("server");
  if (model_name == nullptr) return NullArg("model_name");
  if (ready == nullptr) return NullArg("ready");
  std::shared_ptr<tc::Model> m;
  tc::Status s = server->core->GetModel(model_name, model_version, &m);
  if (!s.ok()) {
    return s.ToError();
  }
  *ready = false;
  if (server->core->state.load() != tc::ServerState::kReady) {
    return tc::NotReady();
  }
  *ready = server->core->ModelIsReady(*m);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerModelBatchProperties(
    TRITONSERVER_Server* server, const char* model_name,
    const int64_t model_version, uint32_t* flags, void** voidp)
{
  if (voidp != nullptr) {
    *voidp = nullptr;
  }
  if (server == nullptr) return NullArg("server");
  if (model_name == nullptr) return NullArg("model_name");
  if (flags == nullptr) return NullArg("flags");
  std::shared_ptr<tc::Model> m;
  tc::Status s = server->core->GetModel(model_name, model_version, &m);
  if (!s.ok()) {
    return s.ToError();
  }
  *flags = m->spec.max_batch_size > 0 ? TRITONSERVER_BATCH_FIRST_DIM
                                      : TRITONSERVER_BATCH_UNKNOWN;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerModelTransactionProperties(
    TRITONSERVER_Server* server, const char* model_name,
    const int64_t model_version, uint32_t* txn_flags, void** voidp)
{
  if (voidp != nullptr) {
    *voidp = nullptr;
  }
  if (txn_flags == nullptr) return NullArg("txn_flags");
  *txn_flags = 0;
  if (server == nullptr) return NullArg("server");
  if (model_name == nullptr) return NullArg("model_name");
  std::shared_ptr<tc::Model> m;
  tc::Status s = server->core->GetModel(model_name, model_version, &m);
  if (!s.ok()) {
    return s.ToError();
  }
  *txn_flags = m->spec.decoupled ? TRITONSERVER_TXN_DECOUPLED
                                 : TRITONSERVER_TXN_ONE_TO_ONE;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerMetadata(
    TRITONSERVER_Server* server, TRITONSERVER_Message** server_metadata)
{
  if (server == nullptr) return NullArg("server");
  if (server_metadata == nullptr) return NullArg("server_metadata");
  tc::json::Value v = tc::json::Value::Object();
  v.Add("name", tc::json::Value::Str(server->core->opts.server_id));
  v.Add("version", tc::json::Value::Str(tc::kServerVersion));
  tc::json::Value exts = tc::json::Value::Array();
  for (const char* e : tc::kExtensions) {
    exts.Append(tc::json::Value::Str(e));
  }
  v.Add("extensions", std::move(exts));
  *server_metadata = tc::NewMessage(v);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerModelMetadata(
    TRITONSERVER_Server* server, const char* model_name,
    const int64_t model_version, TRITONSERVER_Message** model_metadata)
{
  if (server == nullptr) return NullArg("server");
  if (model_name == nullptr) return NullArg("model_name");
  if (model_metadata == nullptr) return NullArg("model_metadata");
  tc::ServerCore& core = *server->core;
  std::shared_ptr<tc::Model> m;
  tc::Status s = core.GetModel(model_name, model_version, &m);
  if (!s.ok()) {
    return s.ToError();
  }
  if (core.state.load() != tc::ServerState::kReady) {
    return tc::NotReady();
  }
  tc::NonInferenceScope scope(core);
  const std::vector<int64_t> ready = core.ReadyVersions(model_name);
  tc::json::Value v = tc::json::Value::Object();
  v.Add("name", tc::json::Value::Str(model_name));
  tc::json::Value versions = tc::json::Value::Array();
  if (model_version != -1) {
    versions.Append(tc::json::Value::Str(std::to_string(model_version)));
  } else {
    for (int64_t rv : ready) {
      versions.Append(tc::json::Value::Str(std::to_string(rv)));
    }
  }
  v.Add("versions", std::move(versions));
  const tc::ModelSpec& spec = m->spec;
  v.Add(
      "platform",
      tc::json::Value::Str(spec.platform.empty() ? spec.backend : spec.platform));
  auto ios = [&](const std::vector<tc::IOSpec>& list) {
    tc::json::Value arr = tc::json::Value::Array();
    for (const auto& io : list) {
      tc::json::Value e = tc::json::Value::Object();
      e.Add("name", tc::json::Value::Str(io.name));
      e.Add("datatype", tc::json::Value::Str(tc::DataTypeProtocolString(io.dtype)));
      tc::json::Value shape = tc::json::Value::Array();
      if (spec.max_batch_size >= 1) {
        shape.Append(tc::json::Value::Int(-1));
      }
      for (int64_t d : io.dims) {
        shape.Append(tc::json::Value::Int(d));
      }
      e.Add("shape", std::move(shape));
      arr.Append(std::move(e));
    }
    return arr;
  };
  v.Add("inputs", ios(spec.inputs));
  v.Add("outputs", ios(spec.outputs));
  *model_metadata = tc::NewMessage(v);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerModelStatistics(
    TRITONSERVER_Server* server, const char* model_name,
    const int64_t model_version, TRITONSERVER_Message** model_stats)
{
  if (server == nullptr) return NullArg("server");
  if (model_name == nullptr) return NullArg("model_name");
  if (model_stats == nullptr) return NullArg("model_stats");
  tc::ServerCore& core = *server->core;
  if (core.state.load() != tc::ServerState::kReady) {
    return tc::NotReady();
  }
  tc::NonInferenceScope scope(core);
  const std::string name = model_name;
  std::map<std::string, std::vector<int64_t>> which;
  if (name.empty()) {
    which = core.AllReadyVersions();
  } else {
    std::vector<int64_t> ready = core.ReadyVersions(name);
    if (ready.empty()) {
      return tc::NewError(
          TRITONSERVER_ERROR_INVALID_ARG,
          "requested model '" + name + "' is not available");
    }
    if (model_version == -1) {
      which[name] = ready;
    } else if (
        std::find(ready.begin(), ready.end(), model_version) != ready.end()) {
      which[name] = {model_version};
    } else {
      return tc::NewError(
          TRITONSERVER_ERROR_INVALID_ARG,
          "requested model version is not available for model '" + name + "'");
    }
  }
  tc::json::Value arr = tc::json::Value::Array();
  for (const auto& mv : which) {
    for (int64_t v : mv.second) {
      std::shared_ptr<tc::Model> m;
      tc::Status s = core.GetModel(mv.first, v, &m);
      if (!s.ok()) {
        return s.ToError();
      }
      arr.Append(tc::ModelStatsJson(*m));
    }
  }
  tc::json::Value out = tc::json::Value::Object();
  out.Add("model_stats", std::move(arr));
  *model_stats = tc::NewMessage(out);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerModelConfig(
    TRITONSERVER_Server* server, const char* model_name,
    const int64_t model_version, const uint32_t config_version,
    TRITONSERVER_Message** model_config)
{
  if (server == nullptr) return NullArg("server");
  if (model_name == nullptr) return NullArg("model_name");
  if (model_config == nullptr) return NullArg("model_config");
  std::shared_ptr<tc::Model> m;
  tc::Status s = server->core->GetModel(model_name, model_version, &m);
  if (!s.ok()) {
    return s.ToError();
  }
  if (config_version != 1) {
    return tc::NewError(
        TRITONSERVER_ERROR_INVALID_ARG,
        "model configuration version " + std::to_string(config_version) +
            " not supported, supported versions are: 1");
  }
  *model_config = tc::NewMessage(tc::ConfigToJson(m->config));
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerModelIndex(
    TRITONSERVER_Server* server, uint32_t flags,
    TRITONSERVER_Message** model_index)
{
  if (server == nullptr) return NullArg("server");
  if (model_index == nullptr) return NullArg("model_index");
  tc::ServerCore& core = *server->core;
  if (core.state.load() != tc::ServerState::kReady) {
    return tc::NotReady();
  }
  tc::NonInferenceScope scope(core);
  tc::json::Value v;
  tc::Status s =
      core.RepositoryIndex((flags & TRITONSERVER_INDEX_FLAG_READY) != 0, &v);
  if (!s.ok()) {
    return s.ToError();
  }
  *model_index = tc::NewMessage(v);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_ServerLoadModelWithParameters(
    TRITONSERVER_Server* server, const char* model_name,
    const TRITONSERVER_Parameter** parameters, const uint64_t parameter_count)
{
  if (parameters == nullptr && parameter_count != 0) {
    return tc::NewError(
        TRITONSERVER_ERROR_INVALID_ARG,
        "load parameters are not provided while parameter count is non-zero");
  }
  if (server == nullptr) return NullArg("server");
  if (model_name == nullptr) return NullArg("model_name");
  std::vector<const TRITONSERVER_Parameter*> params;
  for (uint64_t i = 0; i < parameter_count; ++i) {
    if (parameters[i] == nullptr) return NullArg("parameters[i]");
    params.push_back(parameters[i]);
  }
  tc::ServerCore& core = *server->core;
  if (core.state.load() != tc::ServerState::kReady) {
    return tc::NotReady();
  }
  tc::NonInferenceScope scope(core);
  return core.LoadModel(model_name, params).ToError();
}

TRITONSERVER_Error*
TRITONSERVER_ServerLoadModel(
    TRITONSERVER_Server* server, const char* model_name)
{
  return TRITONSERVER_ServerLoadModelWithParameters(
      server, model_name, nullptr, 0);
}

TRITONSERVER_Error*
TRITONSERVER_ServerUnloadModel(
    TRITONSERVER_Server* server, const char* model_name)
{
  if (server == nullptr) return NullArg("server");
  if (model_name == nullptr) return NullArg("model_name");
  tc::ServerCore& core = *server->core;
  if (core.state.load() != tc::ServerState::kReady) {
    return tc::NotReady();
  }
  tc::NonInferenceScope scope(core);
  return core.UnloadModel(model_name).ToError();
}

TRITONSERVER_Error*
TRITONSERVER_ServerUnloadModelAndDependents(
    TRITONSERVER_Server* server, const char* model_name)
{
  return TRITONSERVER_ServerUnloadModel(server, model_name);
}

TRITONSERVER_Error*
TRITONSERVER_ServerMetrics(
    TRITONSERVER_Server* server, TRITONSERVER_Metrics** metrics)
{
  if (server == nullptr) return NullArg("server");
  if (metrics == nullptr) return NullArg("metrics");
  auto* m = new TRITONSERVER_Metrics();
  m->pinned_pool_bytes = server->core->opts.pinned_memory_pool_size;
  m->cpu_metrics = server->core->opts.metrics && server->core->opts.cpu_metrics;
  *metrics = m;
  return nullptr;
}

}  // extern "C"
