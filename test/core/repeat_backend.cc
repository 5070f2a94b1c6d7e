// Test core: the `repeat` backend, a C++ decoupled backend.
//
// Follows TRITON_FACTS.md "Backends used in a real run of test/models" and
// the contract of Triton's repeat backend as it behaves: a model with
// max_batch_size 0, inputs IN (INT32, one dimension), DELAY (UINT32, IN's
// shape) and WAIT (UINT32 [1]), outputs OUT (INT32 [1]) and IDX (UINT32 [1]),
// listed in that order. A request gets one response per element of IN, each
// sent by a thread of its own DELAY[i] ms after the one before, carrying
// IN[i] as OUT and i as IDX; then the FINAL flag without a response. The
// execution returns (and the instance takes the next request) after WAIT ms,
// whether or not the responses are all sent. It does not look at
// cancellation.
#include <chrono>
#include <cstring>
#include <condition_variable>
#include <thread>
#include <tuple>

#include "server.h"

namespace tc {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape)
{
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ",";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

// The checks the real backend makes when the model loads, in its order.
Status CheckSpec(const ModelSpec& spec)
{
  if (spec.max_batch_size != 0) {
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        "repeat backend only supports models with max_batch_size == 0");
  }
  if (spec.inputs.size() != 3) {
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        "expected 3 inputs, got " + std::to_string(spec.inputs.size()));
  }
  if (spec.outputs.size() != 2) {
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        "expected 2 outputs, got " + std::to_string(spec.outputs.size()));
  }
  const IOSpec &in = spec.inputs[0], &delay = spec.inputs[1],
               &wait = spec.inputs[2], &out = spec.outputs[0],
               &idx = spec.outputs[1];
  for (const auto& [io, kind, name] :
       {std::tuple(&in, "first input", "IN"),
        std::tuple(&delay, "second input", "DELAY"),
        std::tuple(&wait, "third input", "WAIT"),
        std::tuple(&out, "first output", "OUT"),
        std::tuple(&idx, "second output", "IDX")}) {
    if (io->name != name) {
      return Err(
          TRITONSERVER_ERROR_INVALID_ARG, std::string("expected ") + kind +
                                              " tensor name to be " + name +
                                              ", got " + io->name);
    }
  }
  if (in.dims.size() != 1) {
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        "expected IN shape to have one dimension, got " + ShapeText(in.dims));
  }
  if (in.dims != delay.dims) {
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        "expected IN and DELAY shape to match, got " + ShapeText(in.dims) +
            " and " + ShapeText(delay.dims));
  }
  for (const auto& [io, name] :
       {std::pair(&wait, "WAIT"), std::pair(&out, "OUT"),
        std::pair(&idx, "IDX")}) {
    if (io->dims != std::vector<int64_t>{1}) {
      return Err(
          TRITONSERVER_ERROR_INVALID_ARG, std::string("expected ") + name +
                                              " shape to be [1], got " +
                                              ShapeText(io->dims));
    }
  }
  for (const auto& [io, name, dtype] :
       {std::tuple(&in, "IN", TRITONSERVER_TYPE_INT32),
        std::tuple(&delay, "DELAY", TRITONSERVER_TYPE_UINT32),
        std::tuple(&wait, "WAIT", TRITONSERVER_TYPE_UINT32),
        std::tuple(&out, "OUT", TRITONSERVER_TYPE_INT32),
        std::tuple(&idx, "IDX", TRITONSERVER_TYPE_UINT32)}) {
    if (io->dtype != dtype) {
      return Err(
          TRITONSERVER_ERROR_INVALID_ARG,
          std::string("expected ") + name + " datatype to be " +
              DataTypeProtocolString(dtype) + ", got " +
              DataTypeConfigString(io->dtype));
    }
  }
  return Status();
}

template <typename T>
std::vector<T> Elements(const ExecInput& input)
{
  std::vector<T> values(input.size / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), input.data, values.size() * sizeof(T));
  return values;
}

template <typename T>
OutTensor Scalar(const char* name, TRITONSERVER_DataType dtype, T value)
{
  OutTensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = {1};
  t.owned.resize(sizeof(T));
  std::memcpy(t.owned.data(), &value, sizeof(T));
  return t;
}

class RepeatBackend : public Backend {
 public:
  ~RepeatBackend() override
  {
    // Like the real backend, unloading waits for the response threads.
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [this] { return threads_ == 0; });
  }

  void Execute(const std::vector<ExecContext*>& batch) override
  {
    uint32_t wait_ms = 0;
    for (ExecContext* ctx : batch) Start(ctx, &wait_ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  }

 private:
  void Start(ExecContext* ctx, uint32_t* wait_ms)
  {
    const ExecInput* in = ctx->Input("IN");
    const ExecInput* delay = ctx->Input("DELAY");
    const ExecInput* wait = ctx->Input("WAIT");
    if (wait == nullptr || wait->size != sizeof(uint32_t)) {
      ctx->Send(
          {}, Err(TRITONSERVER_ERROR_INVALID_ARG, "unexpected size for WAIT input"),
          TRITONSERVER_RESPONSE_COMPLETE_FINAL);
      return;
    }
    std::memcpy(wait_ms, wait->data, sizeof(uint32_t));
    if (in == nullptr || delay == nullptr || in->shape != delay->shape) {
      ctx->Send(
          {},
          Err(TRITONSERVER_ERROR_INVALID_ARG,
              "expected IN and DELAY shape to match, got " +
                  ShapeText(in ? in->shape : std::vector<int64_t>{}) + " and " +
                  ShapeText(delay ? delay->shape : std::vector<int64_t>{})),
          TRITONSERVER_RESPONSE_COMPLETE_FINAL);
      return;
    }
    std::vector<int32_t> values = Elements<int32_t>(*in);
    std::vector<uint32_t> delays = Elements<uint32_t>(*delay);
    if (ctx->compute_output_start_ns == 0) ctx->compute_output_start_ns = NowNs();
    ctx->detached_any_error = ctx->any_error;
    ctx->detached = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++threads_;
    }
    std::thread(
        [this, keep = ctx->shared_from_this(), values = std::move(values),
         delays = std::move(delays)] {
          for (size_t i = 0; i < values.size(); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(delays[i]));
            std::vector<OutTensor> outs;
            outs.push_back(Scalar("OUT", TRITONSERVER_TYPE_INT32, values[i]));
            outs.push_back(
                Scalar("IDX", TRITONSERVER_TYPE_UINT32, static_cast<uint32_t>(i)));
            keep->Send(std::move(outs), Status(), 0);
          }
          keep->SendFlags(TRITONSERVER_RESPONSE_COMPLETE_FINAL);
          std::lock_guard<std::mutex> lock(mu_);
          if (--threads_ == 0) idle_.notify_all();
        })
        .detach();
  }

  std::mutex mu_;
  std::condition_variable idle_;
  size_t threads_ = 0;
};

}  // namespace

Status
CreateRepeatBackend(const BackendArgs& args, std::unique_ptr<Backend>* out)
{
  Status s = CheckSpec(*args.spec);
  if (!s.ok()) return s;
  out->reset(new RepeatBackend());
  return Status();
}

}  // namespace tc
