// Test core: ensembles (platform "ensemble", ensemble_scheduling).
//
// Like Triton's ensemble scheduler, a step runs once every tensor its
// input_map names is available (an ensemble input or another step's output
// through output_map); steps that are ready together run concurrently. Each
// step is a real inference request of the step's model through the C API,
// so it counts in that model's statistics and metrics (TRITON_FACTS.md
// "An ensemble's step counts as a request of the step's model"). A step's
// error ends the ensemble request with that error, its message prefixed
// "in ensemble '<name>', " as Triton does. Cancelling the ensemble request
// cancels its running steps.
//
// Loading an ensemble loads its step models first (repository.cc,
// LoadModelLocked); each request looks them up again (latest ready version
// unless the step names one). Differences from Triton: a step model must
// send one response per request (decoupled steps are not supported);
// tensors are copied between steps; steps are not validated against the
// step models' configurations at load time.
#include <chrono>
#include <condition_variable>

#include "server.h"

namespace tc {
namespace {

struct Tensor {
  TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> shape;
  std::vector<char> data;
};

struct Step {
  std::string model;
  int64_t version = -1;
  std::vector<std::pair<std::string, std::string>> inputs;   // model ← ensemble
  std::vector<std::pair<std::string, std::string>> outputs;  // model → ensemble
};

// One step request in flight; completion is signalled from the step model's
// worker thread.
struct StepCall {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  bool final = false;
  int responses = 0;
  Status status;
  std::map<std::string, Tensor> outputs;  // by model output name
  TRITONSERVER_InferenceRequest* request = nullptr;
};

TRITONSERVER_Error*
AllocHost(
    TRITONSERVER_ResponseAllocator*, const char*, size_t byte_size,
    TRITONSERVER_MemoryType, int64_t, void*, void** buffer, void** buffer_userp,
    TRITONSERVER_MemoryType* actual_type, int64_t* actual_id)
{
  *buffer = byte_size == 0 ? nullptr : std::malloc(byte_size);
  *buffer_userp = nullptr;
  *actual_type = TRITONSERVER_MEMORY_CPU;
  *actual_id = 0;
  return nullptr;
}

TRITONSERVER_Error*
FreeHost(
    TRITONSERVER_ResponseAllocator*, void* buffer, void*, size_t,
    TRITONSERVER_MemoryType, int64_t)
{
  std::free(buffer);
  return nullptr;
}

TRITONSERVER_ResponseAllocator g_allocator{AllocHost, FreeHost, nullptr, nullptr};

Status
TakeError(TRITONSERVER_Error* e)
{
  if (e == nullptr) {
    return Status();
  }
  Status s(TRITONSERVER_ErrorCode(e), TRITONSERVER_ErrorMessage(e));
  TRITONSERVER_ErrorDelete(e);
  return s;
}

void
OnRelease(TRITONSERVER_InferenceRequest*, const uint32_t, void* userp)
{
  auto* call = static_cast<StepCall*>(userp);
  {
    std::lock_guard<std::mutex> lk(call->mu);
    call->released = true;
  }
  call->cv.notify_all();
}

void
OnResponse(TRITONSERVER_InferenceResponse* response, const uint32_t flags, void* userp)
{
  auto* call = static_cast<StepCall*>(userp);
  Status status;
  std::map<std::string, Tensor> outputs;
  if (response != nullptr) {
    status = TakeError(TRITONSERVER_InferenceResponseError(response));
    uint32_t count = 0;
    if (status.ok()) {
      status = TakeError(TRITONSERVER_InferenceResponseOutputCount(response, &count));
    }
    for (uint32_t i = 0; status.ok() && i < count; ++i) {
      const char* name = nullptr;
      TRITONSERVER_DataType dtype;
      const int64_t* shape = nullptr;
      uint64_t dims = 0;
      const void* base = nullptr;
      size_t size = 0;
      TRITONSERVER_MemoryType mtype;
      int64_t mid = 0;
      void* buffer_userp = nullptr;
      status = TakeError(TRITONSERVER_InferenceResponseOutput(
          response, i, &name, &dtype, &shape, &dims, &base, &size, &mtype, &mid,
          &buffer_userp));
      if (status.ok()) {
        Tensor& t = outputs[name];
        t.dtype = dtype;
        t.shape.assign(shape, shape + dims);
        const char* p = static_cast<const char*>(base);
        t.data.assign(p, p + size);
      }
    }
    TRITONSERVER_InferenceResponseDelete(response);
  }
  {
    std::lock_guard<std::mutex> lk(call->mu);
    if (response != nullptr) {
      call->responses++;
      if (!status.ok()) {
        call->status = status;
      } else if (call->responses > 1 && call->status.ok()) {
        call->status = Err(
            TRITONSERVER_ERROR_UNSUPPORTED,
            "test core: an ensemble step must send one response per request");
      } else {
        call->outputs = std::move(outputs);
      }
    }
    if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) {
      call->final = true;
    }
  }
  call->cv.notify_all();
}

class EnsembleBackend : public Backend {
 public:
  EnsembleBackend(
      std::string name, std::vector<Step> steps, std::vector<std::string> outputs,
      std::weak_ptr<ServerCore> server)
      : name_(std::move(name)), steps_(std::move(steps)),
        outputs_(std::move(outputs)), server_(std::move(server))
  {
  }

  void Execute(const std::vector<ExecContext*>& batch) override
  {
    for (ExecContext* ctx : batch) {
      Run(ctx);
    }
  }

 private:
  void Run(ExecContext* ctx)
  {
    std::map<std::string, Tensor> tensors;
    for (const ExecInput& in : ctx->inputs) {
      Tensor& t = tensors[in.name];
      t.dtype = in.dtype;
      t.shape = in.shape;
      t.data.assign(in.data, in.data + in.size);
    }
    std::vector<bool> done(steps_.size(), false);
    size_t remaining = steps_.size();
    while (remaining > 0) {
      std::vector<size_t> ready;
      for (size_t i = 0; i < steps_.size(); ++i) {
        bool ok = !done[i];
        for (const auto& m : steps_[i].inputs) {
          ok = ok && tensors.count(m.second) != 0;
        }
        if (ok) {
          ready.push_back(i);
        }
      }
      if (ready.empty()) {
        Fail(ctx, Err(
                      TRITONSERVER_ERROR_INTERNAL,
                      "no ensemble step can run: a step input is never "
                      "produced"));
        return;
      }
      Status s = RunSteps(ctx, ready, &tensors);
      if (!s.ok()) {
        Fail(ctx, s);
        return;
      }
      for (size_t i : ready) {
        done[i] = true;
        remaining--;
      }
    }
    std::vector<OutTensor> outs;
    for (const std::string& name : outputs_) {
      auto it = tensors.find(name);
      if (it == tensors.end()) {
        Fail(ctx, Err(
                      TRITONSERVER_ERROR_INTERNAL,
                      "ensemble output '" + name + "' was not produced"));
        return;
      }
      OutTensor t;
      t.name = name;
      t.dtype = it->second.dtype;
      t.shape = it->second.shape;
      t.owned = std::move(it->second.data);
      outs.push_back(std::move(t));
    }
    ctx->Send(std::move(outs), Status(), TRITONSERVER_RESPONSE_COMPLETE_FINAL);
  }

  void Fail(ExecContext* ctx, const Status& s)
  {
    const std::string msg = s.code() == TRITONSERVER_ERROR_CANCELLED
                                ? s.msg()
                                : "in ensemble '" + name_ + "', " + s.msg();
    ctx->Send({}, Status(s.code(), msg), TRITONSERVER_RESPONSE_COMPLETE_FINAL);
  }

  // Sends the ready steps together and waits for all of them.
  Status RunSteps(
      ExecContext* ctx, const std::vector<size_t>& ready,
      std::map<std::string, Tensor>* tensors)
  {
    std::shared_ptr<ServerCore> core = server_.lock();
    if (!core) {
      return Err(TRITONSERVER_ERROR_UNAVAILABLE, "Server not ready");
    }
    TRITONSERVER_Server server;
    server.core = core;
    std::vector<std::unique_ptr<StepCall>> calls;
    Status first_error;
    for (size_t i : ready) {
      calls.push_back(std::make_unique<StepCall>());
      Status s = Submit(&server, ctx, steps_[i], *tensors, calls.back().get());
      if (!s.ok()) {
        calls.pop_back();
        first_error = s;
        break;
      }
    }
    for (auto& call : calls) {
      std::unique_lock<std::mutex> lk(call->mu);
      bool cancel_sent = false;
      while (!(call->released && call->final)) {
        if (!cancel_sent && (ctx->IsCancelled() || !first_error.ok())) {
          TRITONSERVER_InferenceRequestCancel(call->request);
          cancel_sent = true;
        }
        call->cv.wait_for(lk, std::chrono::milliseconds(5));
      }
      lk.unlock();
      TRITONSERVER_InferenceRequestDelete(call->request);
      if (first_error.ok() && !call->status.ok()) {
        first_error = call->status;
      }
    }
    if (ctx->IsCancelled()) {
      return Err(TRITONSERVER_ERROR_CANCELLED, "");
    }
    if (!first_error.ok()) {
      return first_error;
    }
    for (size_t k = 0; k < ready.size(); ++k) {
      const Step& step = steps_[ready[k]];
      for (const auto& m : step.outputs) {
        auto it = calls[k]->outputs.find(m.first);
        if (it == calls[k]->outputs.end()) {
          return Err(
              TRITONSERVER_ERROR_INTERNAL,
              "model '" + step.model + "' gave no output '" + m.first + "'");
        }
        (*tensors)[m.second] = std::move(it->second);
      }
    }
    return Status();
  }

  Status Submit(
      TRITONSERVER_Server* server, ExecContext* ctx, const Step& step,
      const std::map<std::string, Tensor>& tensors, StepCall* call)
  {
    TRITONSERVER_InferenceRequest* r = nullptr;
    TC_RETURN_IF_ERROR(TakeError(TRITONSERVER_InferenceRequestNew(
        &r, server, step.model.c_str(), step.version)));
    Status s = TakeError(TRITONSERVER_InferenceRequestSetId(r, ctx->id.c_str()));
    for (const auto& m : step.inputs) {
      const Tensor& t = tensors.at(m.second);
      if (s.ok()) {
        s = TakeError(TRITONSERVER_InferenceRequestAddInput(
            r, m.first.c_str(), t.dtype, t.shape.data(), t.shape.size()));
      }
      if (s.ok()) {
        s = TakeError(TRITONSERVER_InferenceRequestAppendInputData(
            r, m.first.c_str(), t.data.data(), t.data.size(),
            TRITONSERVER_MEMORY_CPU, 0));
      }
    }
    for (const auto& m : step.outputs) {
      if (s.ok()) {
        s = TakeError(
            TRITONSERVER_InferenceRequestAddRequestedOutput(r, m.first.c_str()));
      }
    }
    if (s.ok()) {
      s = TakeError(TRITONSERVER_InferenceRequestSetReleaseCallback(r, OnRelease, call));
    }
    if (s.ok()) {
      s = TakeError(TRITONSERVER_InferenceRequestSetResponseCallback(
          r, &g_allocator, nullptr, OnResponse, call));
    }
    if (s.ok()) {
      s = TakeError(TRITONSERVER_ServerInferAsync(server, r, nullptr));
    }
    if (!s.ok()) {
      TRITONSERVER_InferenceRequestDelete(r);
      return s;
    }
    call->request = r;
    return Status();
  }

  std::string name_;
  std::vector<Step> steps_;
  std::vector<std::string> outputs_;
  std::weak_ptr<ServerCore> server_;
};

}  // namespace

Status
CreateEnsembleBackend(const BackendArgs& args, std::unique_ptr<Backend>* out)
{
  const PMsg& config = *args.config;
  const std::string name = config.Str("name");
  const PMsg* scheduling = config.Msg("ensemble_scheduling");
  std::vector<Step> steps;
  std::set<std::string> available;
  for (const auto& in : config.Msgs("input")) {
    available.insert(in.Str("name"));
  }
  std::set<std::string> produced;
  if (scheduling != nullptr) {
    for (const PMsg& s : scheduling->Msgs("step")) {
      Step step;
      step.model = s.Str("model_name");
      step.version = s.Has("model_version") ? s.Int("model_version") : -1;
      for (const PMsg& e : s.Msgs("input_map")) {
        step.inputs.emplace_back(e.Str("key"), e.Str("value"));
      }
      for (const PMsg& e : s.Msgs("output_map")) {
        step.outputs.emplace_back(e.Str("key"), e.Str("value"));
        if (!produced.insert(e.Str("value")).second) {
          return Err(
              TRITONSERVER_ERROR_INVALID_ARG,
              "ensemble " + name + ": tensor '" + e.Str("value") +
                  "' is produced by more than one step");
        }
      }
      if (step.model.empty()) {
        return Err(
            TRITONSERVER_ERROR_INVALID_ARG,
            "ensemble " + name + ": every step must name a model");
      }
      steps.push_back(std::move(step));
    }
  }
  for (const Step& step : steps) {
    for (const auto& m : step.inputs) {
      if (available.count(m.second) == 0 && produced.count(m.second) == 0) {
        return Err(
            TRITONSERVER_ERROR_INVALID_ARG,
            "ensemble " + name + ": step '" + step.model + "' reads tensor '" +
                m.second + "', which is neither an ensemble input nor a step output");
      }
    }
  }
  std::vector<std::string> outputs;
  for (const auto& o : config.Msgs("output")) {
    if (produced.count(o.Str("name")) == 0) {
      return Err(
          TRITONSERVER_ERROR_INVALID_ARG,
          "ensemble " + name + ": output '" + o.Str("name") +
              "' is not produced by any step");
    }
    outputs.push_back(o.Str("name"));
  }
  out->reset(new EnsembleBackend(name, std::move(steps), std::move(outputs), args.server));
  return Status();
}

}  // namespace tc
