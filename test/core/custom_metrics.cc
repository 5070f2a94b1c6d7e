// Test core: custom metrics (TRITONSERVER_MetricFamily*, TRITONSERVER_Metric*,
// TRITONSERVER_MetricArgs*) and the logger's C API (TRITONSERVER_LogIsEnabled,
// TRITONSERVER_LogMessage).
//
// Imitates Triton's custom metrics as its source reads (core r25.07,
// src/metric_family.cc, src/tritonserver.cc): families live in the one
// process-wide registry that the metrics text serializes, after Triton's own
// families; a family of an existing name merges with it when the
// kind matches (the first description stays), else INVALID_ARG "Family name
// already exists with different type" — Triton's own families count too
// (observed 2026-12-01 on r25.07); a metric of labels already present in
// its family shares that series; counters increment by non-negative values
// only (INVALID_ARG), Set on a counter, Value on a histogram and Observe on a
// counter or gauge are UNSUPPORTED; histogram metrics need MetricArgs with
// buckets (INVALID_ARG otherwise) and counters/gauges refuse them; deleting a
// family that still has metrics fails with INTERNAL. A deleted family stays
// registered (Triton cannot remove families from its registry); the text
// prints a family only while it has metrics. Histograms print `_count`,
// `_sum`, then cumulative `_bucket` lines with `le` last, labels sorted by
// name; HELP is printed unescaped (all observed on r25.07). LogMessage writes one record through the
// test core's logger (same format as Triton's; VERBOSE needs verbose ≥ 1).
#include <cmath>
#include <list>
#include <sstream>

#include "server.h"

struct TRITONSERVER_MetricArgs {
  bool histogram = false;
  std::vector<double> buckets;
};

namespace tc {
namespace {

struct Series {
  std::map<std::string, std::string> labels;
  double value = 0;  // counter, gauge
  std::vector<double> bounds;  // histogram
  std::vector<uint64_t> bucket_counts;  // per bound, not cumulative
  uint64_t count = 0;
  double sum = 0;
  int refs = 0;
};

struct FamilyEntry {
  std::string name;
  std::string help;
  TRITONSERVER_MetricKind kind;
  std::list<Series> series;
};

std::mutex g_mu;
std::list<FamilyEntry>& Registry()
{
  static auto* registry = new std::list<FamilyEntry>();  // used at exit
  return *registry;
}

std::string
FormatValue(double v)
{
  if (std::isnan(v)) return "Nan";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  std::ostringstream ss;
  ss.precision(17);
  ss << v;
  return ss.str();
}

std::string
LabelText(const std::map<std::string, std::string>& labels, const std::string& le)
{
  std::string out;
  for (const auto& l : labels) {
    out += (out.empty() ? "" : ",") + l.first + "=\"";
    for (char c : l.second) {
      if (c == '\\' || c == '"') out += '\\';
      if (c == '\n') {
        out += "\\n";
        continue;
      }
      out += c;
    }
    out += "\"";
  }
  if (!le.empty()) out += (out.empty() ? "" : ",") + std::string("le=\"") + le + "\"";
  return out.empty() ? "" : "{" + out + "}";
}

}  // namespace

std::string
SerializeCustomMetrics()
{
  std::lock_guard<std::mutex> lk(g_mu);
  std::string out;
  static const char* const kTypes[] = {"counter", "gauge", "histogram"};
  for (const FamilyEntry& f : Registry()) {
    if (f.series.empty()) continue;
    out += "# HELP " + f.name + " " + f.help + "\n";
    out += "# TYPE " + f.name + " " + kTypes[f.kind] + "\n";
    for (const Series& s : f.series) {
      if (f.kind != TRITONSERVER_METRIC_KIND_HISTOGRAM) {
        out += f.name + LabelText(s.labels, "") + " " + FormatValue(s.value) + "\n";
        continue;
      }
      out += f.name + "_count" + LabelText(s.labels, "") + " " + std::to_string(s.count) + "\n";
      out += f.name + "_sum" + LabelText(s.labels, "") + " " + FormatValue(s.sum) + "\n";
      uint64_t cumulative = 0;
      for (size_t i = 0; i < s.bounds.size(); ++i) {
        cumulative += s.bucket_counts[i];
        out += f.name + "_bucket" + LabelText(s.labels, FormatValue(s.bounds[i])) + " " +
               std::to_string(cumulative) + "\n";
      }
      out += f.name + "_bucket" + LabelText(s.labels, "+Inf") + " " + std::to_string(s.count) + "\n";
    }
  }
  return out;
}

}  // namespace tc

struct TRITONSERVER_MetricFamily {
  tc::FamilyEntry* entry;
  int metrics = 0;  // live TRITONSERVER_Metric objects made from this handle
};

struct TRITONSERVER_Metric {
  TRITONSERVER_MetricFamily* family;
  tc::Series* series;
};

using tc::NullArg;
using tc::NewError;

extern "C" {

TRITONSERVER_Error*
TRITONSERVER_MetricFamilyNew(
    TRITONSERVER_MetricFamily** family, const TRITONSERVER_MetricKind kind,
    const char* name, const char* description)
{
  if (family == nullptr) return NullArg("family");
  if (name == nullptr) return NullArg("name");
  if (description == nullptr) return NullArg("description");
  if (kind < TRITONSERVER_METRIC_KIND_COUNTER || kind > TRITONSERVER_METRIC_KIND_HISTOGRAM) {
    return NewError(
        TRITONSERVER_ERROR_INVALID_ARG, "Unsupported kind passed to MetricFamily constructor.");
  }
  static const char* const kTritonCounters[] = {
      "nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
      "nv_inference_exec_count", "nv_inference_request_duration_us",
      "nv_inference_queue_duration_us", "nv_inference_compute_input_duration_us",
      "nv_inference_compute_infer_duration_us", "nv_inference_compute_output_duration_us",
      "input_byte_size_counter"};
  static const char* const kTritonGauges[] = {
      "nv_inference_pending_request_count", "nv_model_load_duration_secs",
      "nv_pinned_memory_pool_total_bytes", "nv_pinned_memory_pool_used_bytes",
      "nv_cpu_utilization", "nv_cpu_memory_total_bytes", "nv_cpu_memory_used_bytes"};
  const auto different_type = [&]() {
    return NewError(TRITONSERVER_ERROR_INVALID_ARG, "Family name already exists with different type");
  };
  for (const char* n : kTritonCounters) {
    if (std::strcmp(n, name) == 0 && kind != TRITONSERVER_METRIC_KIND_COUNTER) return different_type();
  }
  for (const char* n : kTritonGauges) {
    if (std::strcmp(n, name) == 0 && kind != TRITONSERVER_METRIC_KIND_GAUGE) return different_type();
  }
  std::lock_guard<std::mutex> lk(tc::g_mu);
  for (tc::FamilyEntry& e : tc::Registry()) {
    if (e.name != name) continue;
    if (e.kind != kind) return different_type();
    *family = new TRITONSERVER_MetricFamily{&e};
    return nullptr;
  }
  tc::Registry().push_back(tc::FamilyEntry{name, description, kind, {}});
  *family = new TRITONSERVER_MetricFamily{&tc::Registry().back()};
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MetricFamilyDelete(TRITONSERVER_MetricFamily* family)
{
  if (family == nullptr) return NullArg("family");
  {
    std::lock_guard<std::mutex> lk(tc::g_mu);
    if (family->metrics > 0) {
      return NewError(
          TRITONSERVER_ERROR_INTERNAL,
          "Must call MetricDelete on all dependent metrics before calling "
          "MetricFamilyDelete.");
    }
  }
  delete family;  // the registry keeps the family, as Triton's does
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MetricArgsNew(TRITONSERVER_MetricArgs** args)
{
  if (args == nullptr) return NullArg("args");
  *args = new TRITONSERVER_MetricArgs();
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MetricArgsSetHistogram(
    TRITONSERVER_MetricArgs* args, const double* buckets, const uint64_t buckets_count)
{
  if (args == nullptr) return NullArg("args");
  if (buckets == nullptr && buckets_count > 0) return NullArg("buckets");
  args->histogram = true;
  args->buckets.assign(buckets, buckets + buckets_count);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MetricArgsDelete(TRITONSERVER_MetricArgs* args)
{
  delete args;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MetricNewWithArgs(
    TRITONSERVER_Metric** metric, TRITONSERVER_MetricFamily* family,
    const TRITONSERVER_Parameter** labels, const uint64_t label_count,
    const TRITONSERVER_MetricArgs* args)
{
  if (metric == nullptr) return NullArg("metric");
  if (family == nullptr) return NullArg("family");
  std::map<std::string, std::string> label_map;
  for (uint64_t i = 0; i < label_count; ++i) {
    if (labels[i]->type != TRITONSERVER_PARAMETER_STRING) {
      return NewError(
          TRITONSERVER_ERROR_INVALID_ARG,
          "Parameter [" + labels[i]->name +
              "] must have a type of TRITONSERVER_PARAMETER_STRING to be added as a label.");
    }
    label_map[labels[i]->name] = labels[i]->str;
  }
  std::lock_guard<std::mutex> lk(tc::g_mu);
  tc::FamilyEntry& f = *family->entry;
  const bool histogram = f.kind == TRITONSERVER_METRIC_KIND_HISTOGRAM;
  if (!histogram && args != nullptr) {
    return NewError(
        TRITONSERVER_ERROR_INVALID_ARG,
        std::string("Unexpected args found in ") +
            (f.kind == TRITONSERVER_METRIC_KIND_COUNTER ? "counter" : "gauge") +
            " Metric constructor.");
  }
  if (histogram && args == nullptr) {
    return NewError(TRITONSERVER_ERROR_INVALID_ARG, "Bucket boundaries not found in Metric args.");
  }
  if (histogram && !args->histogram) {
    return NewError(TRITONSERVER_ERROR_INVALID_ARG, "Metric args not set to histogram kind.");
  }
  tc::Series* series = nullptr;
  for (tc::Series& s : f.series) {
    if (s.labels == label_map) series = &s;
  }
  if (series == nullptr) {
    f.series.push_back(tc::Series{});
    series = &f.series.back();
    series->labels = label_map;
    if (histogram) {
      series->bounds = args->buckets;
      series->bucket_counts.assign(args->buckets.size(), 0);
    }
  }
  series->refs++;
  family->metrics++;
  *metric = new TRITONSERVER_Metric{family, series};
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MetricNew(
    TRITONSERVER_Metric** metric, TRITONSERVER_MetricFamily* family,
    const TRITONSERVER_Parameter** labels, const uint64_t label_count)
{
  return TRITONSERVER_MetricNewWithArgs(metric, family, labels, label_count, nullptr);
}

TRITONSERVER_Error*
TRITONSERVER_MetricDelete(TRITONSERVER_Metric* metric)
{
  if (metric == nullptr) return NullArg("metric");
  {
    std::lock_guard<std::mutex> lk(tc::g_mu);
    metric->family->metrics--;
    if (--metric->series->refs == 0) {
      metric->family->entry->series.remove_if(
          [&](const tc::Series& s) { return &s == metric->series; });
    }
  }
  delete metric;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MetricValue(TRITONSERVER_Metric* metric, double* value)
{
  if (metric == nullptr) return NullArg("metric");
  if (value == nullptr) return NullArg("value");
  std::lock_guard<std::mutex> lk(tc::g_mu);
  if (metric->family->entry->kind == TRITONSERVER_METRIC_KIND_HISTOGRAM) {
    return NewError(
        TRITONSERVER_ERROR_UNSUPPORTED, "TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Value");
  }
  *value = metric->series->value;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_MetricIncrement(TRITONSERVER_Metric* metric, double value)
{
  if (metric == nullptr) return NullArg("metric");
  std::lock_guard<std::mutex> lk(tc::g_mu);
  switch (metric->family->entry->kind) {
    case TRITONSERVER_METRIC_KIND_COUNTER:
      if (value < 0.0) {
        return NewError(
            TRITONSERVER_ERROR_INVALID_ARG,
            "TRITONSERVER_METRIC_KIND_COUNTER can only be incremented monotonically by "
            "non-negative values.");
      }
      metric->series->value += value;
      return nullptr;
    case TRITONSERVER_METRIC_KIND_GAUGE:
      metric->series->value += value;
      return nullptr;
    default:
      return NewError(
          TRITONSERVER_ERROR_UNSUPPORTED,
          "TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Increment");
  }
}

TRITONSERVER_Error*
TRITONSERVER_MetricSet(TRITONSERVER_Metric* metric, double value)
{
  if (metric == nullptr) return NullArg("metric");
  std::lock_guard<std::mutex> lk(tc::g_mu);
  switch (metric->family->entry->kind) {
    case TRITONSERVER_METRIC_KIND_GAUGE:
      metric->series->value = value;
      return nullptr;
    case TRITONSERVER_METRIC_KIND_COUNTER:
      return NewError(
          TRITONSERVER_ERROR_UNSUPPORTED, "TRITONSERVER_METRIC_KIND_COUNTER does not support Set");
    default:
      return NewError(
          TRITONSERVER_ERROR_UNSUPPORTED, "TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Set");
  }
}

TRITONSERVER_Error*
TRITONSERVER_MetricObserve(TRITONSERVER_Metric* metric, double value)
{
  if (metric == nullptr) return NullArg("metric");
  std::lock_guard<std::mutex> lk(tc::g_mu);
  switch (metric->family->entry->kind) {
    case TRITONSERVER_METRIC_KIND_HISTOGRAM: {
      tc::Series& s = *metric->series;
      s.count++;
      s.sum += value;
      for (size_t i = 0; i < s.bounds.size(); ++i) {
        if (value <= s.bounds[i]) {
          s.bucket_counts[i]++;
          break;
        }
      }
      return nullptr;
    }
    case TRITONSERVER_METRIC_KIND_COUNTER:
      return NewError(
          TRITONSERVER_ERROR_UNSUPPORTED, "TRITONSERVER_METRIC_KIND_COUNTER does not support Observe");
    default:
      return NewError(
          TRITONSERVER_ERROR_UNSUPPORTED, "TRITONSERVER_METRIC_KIND_GAUGE does not support Observe");
  }
}

TRITONSERVER_Error*
TRITONSERVER_GetMetricKind(TRITONSERVER_Metric* metric, TRITONSERVER_MetricKind* kind)
{
  if (metric == nullptr) return NullArg("metric");
  if (kind == nullptr) return NullArg("kind");
  *kind = metric->family->entry->kind;
  return nullptr;
}

bool
TRITONSERVER_LogIsEnabled(TRITONSERVER_LogLevel level)
{
  switch (level) {
    case TRITONSERVER_LOG_INFO:
      return tc::LogIsEnabled(tc::LogLevel::kInfo);
    case TRITONSERVER_LOG_WARN:
      return tc::LogIsEnabled(tc::LogLevel::kWarning);
    case TRITONSERVER_LOG_ERROR:
      return tc::LogIsEnabled(tc::LogLevel::kError);
    case TRITONSERVER_LOG_VERBOSE:
      return tc::LogVerboseLevel() >= 1;
  }
  return false;
}

TRITONSERVER_Error*
TRITONSERVER_LogMessage(
    TRITONSERVER_LogLevel level, const char* filename, const int line, const char* msg)
{
  if (filename == nullptr) return NullArg("filename");
  if (msg == nullptr) return NullArg("msg");
  switch (level) {
    case TRITONSERVER_LOG_INFO:
      TC_LOG_INFO(filename, line, msg);
      return nullptr;
    case TRITONSERVER_LOG_WARN:
      TC_LOG_WARNING(filename, line, msg);
      return nullptr;
    case TRITONSERVER_LOG_ERROR:
      TC_LOG_ERROR(filename, line, msg);
      return nullptr;
    case TRITONSERVER_LOG_VERBOSE:
      TC_LOG_VERBOSE(1, filename, line, msg);
      return nullptr;
  }
  return NewError(
      TRITONSERVER_ERROR_INVALID_ARG,
      "unknown logging level '" + std::to_string(static_cast<int>(level)) + "'");
}

}  // extern "C"
