// Custom metrics in Triton's own registry (TRITONSERVER_MetricFamily*,
// TRITONSERVER_Metric*), so they appear in the same scrape as Triton's.
//
// JS holds each family and metric as a type-tagged External. Each is deleted
// exactly once: by an explicit delete, or else by its finalizer. A metric
// keeps its family alive (Triton refuses to delete a family that still has
// metrics), so the family goes last whatever the order of collection.
// Metric calls are atomic updates inside Triton: they run on the JS thread.
#include <memory>
#include <string>
#include <vector>

#include "../core/errors.h"
#include "../core/loader.h"
#include "observability.h"

namespace tsn {

namespace {

const napi_type_tag kFamilyTag = {0x6d3a1f0c2b7e4a51ULL, 0x9c0e5d3b7a2f1e64ULL};
const napi_type_tag kMetricTag = {0x1b9f4e7a3c2d5e60ULL, 0x8a7d6c5b4e3f2a19ULL};

struct FamilyHandle {
  const TritonApi* api;
  TRITONSERVER_MetricFamily* family = nullptr;
  TRITONSERVER_MetricKind kind;
  ~FamilyHandle() {
    if (family != nullptr) TakeError(*api, api->MetricFamilyDelete(family));
  }
};

struct MetricHandle {
  std::shared_ptr<FamilyHandle> family;
  TRITONSERVER_Metric* metric = nullptr;
  ~MetricHandle() {
    if (metric != nullptr)
      TakeError(*family->api, family->api->MetricDelete(metric));
  }
};

template <typename T>
T* Unwrap(const Napi::CallbackInfo& info, const napi_type_tag& tag,
          const char* what) {
  Napi::Value value = info.Length() > 0 ? info[0] : info.Env().Undefined();
  if (!value.IsExternal() ||
      !value.As<Napi::External<T>>().CheckTypeTag(&tag))
    throw ToJsError(info.Env(), TRITONSERVER_ERROR_INVALID_ARG,
                    std::string("expected a native ") + what);
  return value.As<Napi::External<T>>().Data();
}

FamilyHandle& LiveFamily(const Napi::CallbackInfo& info) {
  auto* handle = Unwrap<std::shared_ptr<FamilyHandle>>(info, kFamilyTag,
                                                       "metric family");
  if ((*handle)->family == nullptr)
    throw ToJsError(info.Env(), TRITONSERVER_ERROR_INVALID_ARG,
                    "the metric family has been deleted");
  return **handle;
}

MetricHandle& LiveMetric(const Napi::CallbackInfo& info) {
  auto* handle = Unwrap<MetricHandle>(info, kMetricTag, "metric");
  if (handle->metric == nullptr)
    throw ToJsError(info.Env(), TRITONSERVER_ERROR_INVALID_ARG,
                    "the metric has been deleted");
  return *handle;
}

double NumberArg(const Napi::CallbackInfo& info, size_t index) {
  if (info.Length() <= index || !info[index].IsNumber())
    throw ToJsError(info.Env(), TRITONSERVER_ERROR_INVALID_ARG,
                    "a metric value must be a number");
  return info[index].As<Napi::Number>().DoubleValue();
}

void Check(Napi::Env env, const TritonApi& api, TRITONSERVER_Error* err) {
  if (auto failure = TakeError(api, err)) throw ToJsError(env, *failure);
}

// metricFamilyNew(libraryPath, kind, name, description) → External
Napi::Value MetricFamilyNew(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const TritonApi& api = LoadedApi(env, info[0]);
  if (info.Length() < 4 || !info[1].IsNumber() || !info[2].IsString() ||
      !info[3].IsString())
    throw ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG,
                    "metricFamilyNew(library, kind, name, description)");
  auto kind = static_cast<TRITONSERVER_MetricKind>(
      info[1].As<Napi::Number>().Int32Value());
  std::string name = info[2].As<Napi::String>();
  std::string description = info[3].As<Napi::String>();
  if (kind == TRITONSERVER_METRIC_KIND_HISTOGRAM &&
      api.MetricNewWithArgs == nullptr)
    throw ToJsError(env, Unsupported(api, "MetricNewWithArgs"));
  auto handle = std::make_shared<FamilyHandle>();
  handle->api = &api;
  handle->kind = kind;
  Check(env, api,
        api.MetricFamilyNew(&handle->family, kind, name.c_str(),
                            description.c_str()));
  auto external = Napi::External<std::shared_ptr<FamilyHandle>>::New(
      env, new std::shared_ptr<FamilyHandle>(std::move(handle)),
      [](Napi::Env, std::shared_ptr<FamilyHandle>* data) { delete data; });
  external.TypeTag(&kFamilyTag);
  return external;
}

// metricFamilyDelete(family): Triton refuses while metrics remain.
Napi::Value MetricFamilyDelete(const Napi::CallbackInfo& info) {
  FamilyHandle& family = LiveFamily(info);
  Check(info.Env(), *family.api, family.api->MetricFamilyDelete(family.family));
  family.family = nullptr;
  return info.Env().Undefined();
}

// metricNew(family, labels: string[] (name, value, …), buckets?: number[])
Napi::Value MetricNew(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto* shared = Unwrap<std::shared_ptr<FamilyHandle>>(info, kFamilyTag,
                                                       "metric family");
  FamilyHandle& family = LiveFamily(info);
  const TritonApi& api = *family.api;
  if (info.Length() < 2 || !info[1].IsArray())
    throw ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG,
                    "metric labels must be an array of names and values");
  Napi::Array flat = info[1].As<Napi::Array>();
  std::vector<TRITONSERVER_Parameter*> labels;
  struct Cleanup {
    const TritonApi& api;
    std::vector<TRITONSERVER_Parameter*>& labels;
    ~Cleanup() {
      for (auto* label : labels) api.ParameterDelete(label);
    }
  } cleanup{api, labels};
  for (uint32_t i = 0; i + 1 < flat.Length(); i += 2) {
    std::string name = flat.Get(i).ToString();
    std::string value = flat.Get(i + 1).ToString();
    labels.push_back(api.ParameterNew(
        name.c_str(), TRITONSERVER_PARAMETER_STRING, value.c_str()));
  }
  auto handle = std::make_unique<MetricHandle>();
  handle->family = *shared;
  const auto** label_data =
      const_cast<const TRITONSERVER_Parameter**>(labels.data());
  if (info.Length() > 2 && info[2].IsArray()) {
    if (api.MetricNewWithArgs == nullptr)
      throw ToJsError(env, Unsupported(api, "MetricNewWithArgs"));
    Napi::Array list = info[2].As<Napi::Array>();
    std::vector<double> buckets;
    for (uint32_t i = 0; i < list.Length(); ++i)
      buckets.push_back(list.Get(i).ToNumber().DoubleValue());
    TRITONSERVER_MetricArgs* args = nullptr;
    Check(env, api, api.MetricArgsNew(&args));
    auto failure = TakeError(
        api, api.MetricArgsSetHistogram(args, buckets.data(), buckets.size()));
    if (!failure)
      failure = TakeError(api, api.MetricNewWithArgs(&handle->metric,
                                                     family.family, label_data,
                                                     labels.size(), args));
    TakeError(api, api.MetricArgsDelete(args));
    if (failure) throw ToJsError(env, *failure);
  } else {
    Check(env, api,
          api.MetricNew(&handle->metric, family.family, label_data,
                        labels.size()));
  }
  auto external = Napi::External<MetricHandle>::New(
      env, handle.release(),
      [](Napi::Env, MetricHandle* data) { delete data; });
  external.TypeTag(&kMetricTag);
  return external;
}

Napi::Value MetricDelete(const Napi::CallbackInfo& info) {
  MetricHandle& metric = LiveMetric(info);
  const TritonApi& api = *metric.family->api;
  Check(info.Env(), api, api.MetricDelete(metric.metric));
  metric.metric = nullptr;
  return info.Env().Undefined();
}

Napi::Value MetricValue(const Napi::CallbackInfo& info) {
  MetricHandle& metric = LiveMetric(info);
  const TritonApi& api = *metric.family->api;
  double value = 0;
  Check(info.Env(), api, api.MetricValue(metric.metric, &value));
  return Napi::Number::New(info.Env(), value);
}

Napi::Value MetricIncrement(const Napi::CallbackInfo& info) {
  MetricHandle& metric = LiveMetric(info);
  const TritonApi& api = *metric.family->api;
  Check(info.Env(), api, api.MetricIncrement(metric.metric, NumberArg(info, 1)));
  return info.Env().Undefined();
}

Napi::Value MetricSet(const Napi::CallbackInfo& info) {
  MetricHandle& metric = LiveMetric(info);
  const TritonApi& api = *metric.family->api;
  Check(info.Env(), api, api.MetricSet(metric.metric, NumberArg(info, 1)));
  return info.Env().Undefined();
}

Napi::Value MetricObserve(const Napi::CallbackInfo& info) {
  MetricHandle& metric = LiveMetric(info);
  const TritonApi& api = *metric.family->api;
  if (api.MetricObserve == nullptr)
    throw ToJsError(info.Env(), Unsupported(api, "MetricObserve"));
  Check(info.Env(), api, api.MetricObserve(metric.metric, NumberArg(info, 1)));
  return info.Env().Undefined();
}

Napi::Value MetricKind(const Napi::CallbackInfo& info) {
  MetricHandle& metric = LiveMetric(info);
  const TritonApi& api = *metric.family->api;
  TRITONSERVER_MetricKind kind = TRITONSERVER_METRIC_KIND_COUNTER;
  Check(info.Env(), api, api.GetMetricKind(metric.metric, &kind));
  return Napi::Number::New(info.Env(), static_cast<int>(kind));
}

}  // namespace

const TritonApi& LoadedApi(Napi::Env env, Napi::Value path) {
  if (!path.IsString())
    throw ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG,
                    "the library path must be a string");
  std::string error;
  const TritonApi* api =
      LoadTritonApi({path.As<Napi::String>().Utf8Value()}, &error);
  if (api == nullptr) throw ToJsError(env, TRITONSERVER_ERROR_UNAVAILABLE, error);
  return *api;
}

void RegisterMetrics(Napi::Env env, Napi::Object exports) {
  exports.Set("metricFamilyNew", Napi::Function::New<MetricFamilyNew>(env));
  exports.Set("metricFamilyDelete", Napi::Function::New<MetricFamilyDelete>(env));
  exports.Set("metricNew", Napi::Function::New<MetricNew>(env));
  exports.Set("metricDelete", Napi::Function::New<MetricDelete>(env));
  exports.Set("metricValue", Napi::Function::New<MetricValue>(env));
  exports.Set("metricIncrement", Napi::Function::New<MetricIncrement>(env));
  exports.Set("metricSet", Napi::Function::New<MetricSet>(env));
  exports.Set("metricObserve", Napi::Function::New<MetricObserve>(env));
  exports.Set("metricKind", Napi::Function::New<MetricKind>(env));
}

}  // namespace tsn
