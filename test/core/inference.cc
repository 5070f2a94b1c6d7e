// Test core: inference requests, responses, scheduling and native models.
//
// Imitates Triton's inference path as seen through the C API:
// - TRITONSERVER_ServerInferAsync validates the request synchronously with
//   Triton's checks and messages (requested outputs, input count, batch
//   dimension, data type, shape, byte size, BYTES length prefixes); on error
//   nothing is queued and no callback ever runs.
// - Accepted requests go to the model's scheduler queue (priority levels
//   when the model configures them, queue-policy timeouts when configured,
//   as Triton's dynamic batcher does) and are executed by a
//   worker thread per model instance, never on the caller's thread.
// - Non-decoupled models: the response callback runs with FINAL, then the
//   request is released (RELEASE_ALL). Decoupled models: the request is
//   released first, then one response per result with flags 0, then a NULL
//   response with FINAL. Requests cancelled (or timed out) while queued are
//   answered with a CANCELLED (or UNAVAILABLE "Request timeout expired")
//   error response and released.
// - Outputs are allocated through the request's response allocator (start,
//   query, alloc functions; CPU memory id 0 requested) on the worker thread;
//   the release function runs when the response is deleted.
// - The worker takes the requests already queued together (up to
//   max_batch_size, with dynamic batching) and runs them as one execution.
// - Backends: identity (native, like Triton's), python (python_backend.cc:
//   the model's own model.py in an embedded CPython), repeat
//   (repeat_backend.cc), ensembles (ensemble.cc), and any other backend
//   name from a shared library implementing Triton's backend API
//   (library_backend.cc), which gets the requests themselves.
#include <chrono>
#include <climits>
#include <unordered_set>
#include <cmath>
#include <thread>

#include "server.h"
#include "trace.h"

namespace tc {

// ---------------------------------------------------------------------------
// Model
// ---------------------------------------------------------------------------
Model::~Model()
{
  if (executor) {
    std::lock_guard<std::mutex> lk(executor->mu);
    executor->stop = true;
    executor->cv.notify_all();
  }
}

uint64_t
Model::EffectivePriority(uint64_t requested) const
{
  if (requested == 0 || requested > spec.priority_levels) {
    return spec.default_priority_level;
  }
  return requested;
}

// ---------------------------------------------------------------------------
// Validation (InferenceRequest::Normalize in Triton)
// ---------------------------------------------------------------------------
namespace {

int64_t
ByteSizeOf(TRITONSERVER_DataType dt, const std::vector<int64_t>& dims)
{
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0) {
      return -1;
    }
    if (d != 0 && count > INT64_MAX / d) {
      return -1;
    }
    count *= d;
  }
  const int64_t es = static_cast<int64_t>(DataTypeByteSize(dt));
  if (es != 0 && count > INT64_MAX / es) {
    return -1;
  }
  return count * es;
}

Status
ValidateBytesInput(
    const TRITONSERVER_InferenceRequest& r, const RequestInput& in,
    const std::vector<int64_t>& dims, const std::string& model_name)
{
  int64_t element_count = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d != 0 && element_count > INT64_MAX / d)) {
      element_count = -1;
      break;
    }
    element_count *= d;
  }
  int64_t checked = 0;
  size_t remaining_element = 0;
  size_t next = 0;
  const char* buf = nullptr;
  size_t remaining_buf = 0;
  while (remaining_buf > 0 || next < in.chunks.size()) {
    if (remaining_buf == 0) {
      buf = in.chunks[next].base;
      remaining_buf = in.chunks[next].size;
      ++next;
    }
    if (remaining_element == 0) {
      if (remaining_buf < sizeof(uint32_t)) {
        return Err(
            TRITONSERVER_ERROR_INVALID_ARG,
            r.LogRequest() +
                "incomplete string length indicator for inference input '" +
                in.name + "' for model '" + model_name + "', expecting " +
                std::to_string(sizeof(uint32_t)) + " bytes but only " +
                std::to_string(remaining_buf) +
                " bytes available. Please make sure the string length "
                "indicator is in one buffer.");
      }
      uint32_t len = 0;
      std::memcpy(&len, buf, sizeof(len));  // little-endian hosts only
      remaining_element = len;
      ++checked;
      if (checked > element_count) {
        return Err(
            TRITONSERVER_ERROR_INVALID_ARG,
            r.LogRequest() + "unexpected number of string elements " +
                std::to_string(checked) + " for inference input '" + in.name +
                "' for model '" + model_name + "', expecting " +
                std::to_string(element_count));
      }
      buf += sizeof(uint32_t);
      remaining_buf -= sizeof(uint32_t);
    }
    if (remaining_buf >= remaining_element) {
      buf += remaining_element;
      remaining_buf -= remaining_element;
      remaining_element = 0;
    } else {
      remaining_element -= remaining_buf;
      remaining_buf = 0;
    }
  }
  if (next != in.chunks.size()) {
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        r.LogRequest() + "expected " + std::to_string(in.chunks.size()) +
            " buffers for inference input '" + in.name + "' for model '" +
            model_name + "', got " + std::to_string(next));
  }
  if (checked != element_count) {
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        r.LogRequest() + "expected " + std::to_string(element_count) +
            " string elements for inference input '" + in.name +
            "' for model '" + model_name + "', got " +
            std::to_string(checked));
  }
  return Status();
}

Status
ValidateRequest(TRITONSERVER_InferenceRequest* r)
{
  const Model& m = *r->model;
  const ModelSpec& spec = m.spec;
  const std::string& model_name = m.name;

  // Requested outputs.
  r->outputs_to_send.clear();
  if (r->requested_outputs.empty()) {
    for (const auto& o : spec.outputs) {
      r->outputs_to_send.push_back(o.name);
    }
  } else {
    for (const auto& n : r->requested_outputs) {
      if (spec.Output(n) == nullptr) {
        return Err(
            TRITONSERVER_ERROR_INVALID_ARG,
            "unexpected inference output '" + n + "' for model '" +
                model_name + "'");
      }
    }
    for (const auto& o : spec.outputs) {
      if (r->requested_outputs.count(o.name)) {
        r->outputs_to_send.push_back(o.name);
      }
    }
  }

  // Input count.
  const size_t required = spec.RequiredInputCount();
  if (r->inputs.size() > spec.inputs.size() || r->inputs.size() < required) {
    std::string missing = "[";
    for (const auto& io : spec.inputs) {
      if (!io.optional && r->inputs.count(io.name) == 0) {
        missing += "'" + io.name + "',";
      }
    }
    missing.pop_back();
    missing += "]";
    std::string got = "[";
    for (const auto& p : r->inputs) {
      got += "'" + p.first + "',";
    }
    got.pop_back();
    got += "]";
    if (r->inputs.empty()) {
      got = "[]";
    }
    if (spec.inputs.size() == required) {
      return Err(
          TRITONSERVER_ERROR_INVALID_ARG,
          r->LogRequest() + "expected " + std::to_string(spec.inputs.size()) +
              " inputs but got " + std::to_string(r->inputs.size()) +
              " inputs for model '" + model_name + "'. Got input(s) " + got +
              ", but missing required input(s) " + missing +
              ". Please provide all required input(s).");
    }
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        r->LogRequest() + "expected number of inputs between " +
            std::to_string(required) + " and " +
            std::to_string(spec.inputs.size()) + " but got " +
            std::to_string(r->inputs.size()) + " inputs for model '" +
            model_name + "'. Got input(s) " + got +
            ", but missing required input(s) " + missing +
            ". Please provide all required input(s).");
  }

  // Batch dimension.
  std::map<std::string, std::vector<int64_t>> shapes;
  r->batch_size = 0;
  for (const auto& p : r->inputs) {
    const RequestInput& in = p.second;
    const IOSpec* io = spec.Input(in.name);
    if (io == nullptr) {
      return Err(
          TRITONSERVER_ERROR_INVALID_ARG,
          "unexpected inference input '" + in.name + "' for model '" +
              model_name + "'");
    }
    if (spec.max_batch_size == 0 || io->is_shape_tensor) {
      shapes[in.name] = in.shape;
      continue;
    }
    if (in.shape.empty()) {
      return Err(
          TRITONSERVER_ERROR_INVALID_ARG,
          r->LogRequest() + "input '" + in.name +
              "' has no shape but model requires batch dimension for '" +
              model_name + "'");
    }
    if (r->batch_size == 0) {
      r->batch_size = in.shape[0];
    } else if (in.shape[0] != r->batch_size) {
      return Err(
          TRITONSERVER_ERROR_INVALID_ARG,
          r->LogRequest() + "input '" + in.name +
              "' batch size does not match other inputs for '" + model_name +
              "'");
    }
    shapes[in.name].assign(in.shape.begin() + 1, in.shape.end());
  }
  if (r->batch_size > spec.max_batch_size) {
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        r->LogRequest() + "inference request batch-size must be <= " +
            std::to_string(spec.max_batch_size) + " for '" + model_name + "'");
  }

  for (auto& p : r->inputs) {
    RequestInput& in = p.second;
    const IOSpec* io = spec.Input(in.name);
    if (in.dtype != io->dtype) {
      return Err(
          TRITONSERVER_ERROR_INVALID_ARG,
          r->LogRequest() + "inference input '" + in.name + "' data-type is '" +
              DataTypeProtocolString(in.dtype) + "', but model '" +
              model_name + "' expects '" + DataTypeProtocolString(io->dtype) +
              "'");
    }
    std::vector<int64_t>& shape = shapes[in.name];
    bool match = shape.size() == io->dims.size();
    if (match) {
      for (size_t i = 0; i < io->dims.size(); ++i) {
        if (shape[i] == -1) {
          return Err(
              TRITONSERVER_ERROR_INVALID_ARG,
              r->LogRequest() +
                  "All input dimensions should be specified for input '" +
                  in.name + "' for model '" + model_name + "', got " +
                  DimsToString(in.shape));
        }
        if (io->dims[i] != -1 && io->dims[i] != shape[i]) {
          match = false;
          break;
        }
      }
    }
    if (!match) {
      std::vector<int64_t> full;
      std::string note;
      if (spec.max_batch_size > 0) {
        full.push_back(-1);
        note =
            "NOTE: Setting a non-zero max_batch_size in the model config "
            "requires a batch dimension to be prepended to each input shape. "
            "If you want to specify the full shape including the batch dim "
            "in your input dims config, try setting max_batch_size to zero. "
            "See the model configuration docs for more info on "
            "max_batch_size.";
      }
      full.insert(full.end(), io->dims.begin(), io->dims.end());
      return Err(
          TRITONSERVER_ERROR_INVALID_ARG,
          r->LogRequest() + "unexpected shape for input '" + in.name +
              "' for model '" + model_name + "'. Expected " +
              DimsToString(full) + ", got " + DimsToString(in.shape) + ". " +
              note);
    }
    if (io->has_reshape) {
      std::vector<int64_t> var;
      for (size_t i = 0; i < io->dims.size(); ++i) {
        if (io->dims[i] == -1) {
          var.push_back(shape[i]);
        }
      }
      std::vector<int64_t> reshaped;
      size_t vi = 0;
      for (int64_t d : io->reshape) {
        reshaped.push_back(d == -1 && vi < var.size() ? var[vi++] : d);
      }
      shape = reshaped;
    }
    std::vector<int64_t> with_batch;
    if (r->batch_size != 0 && !(io->is_shape_tensor)) {
      with_batch.push_back(r->batch_size);
    }
    with_batch.insert(with_batch.end(), shape.begin(), shape.end());
    in.backend_shape = with_batch;
    for (const auto& c : in.chunks) {
      if (c.mtype == TRITONSERVER_MEMORY_GPU) {
        return Err(
            TRITONSERVER_ERROR_UNSUPPORTED,
            r->LogRequest() + "test core: input '" + in.name +
                "' is in GPU memory, which this library cannot read");
      }
    }
    if (in.dtype == TRITONSERVER_TYPE_BYTES) {
      TC_RETURN_IF_ERROR(ValidateBytesInput(*r, in, with_batch, model_name));
    } else {
      const std::vector<int64_t>& dims =
          io->is_shape_tensor ? in.shape : with_batch;
      const int64_t expected = ByteSizeOf(in.dtype, dims);
      if (in.total > static_cast<uint64_t>(LLONG_MAX) ||
          static_cast<int64_t>(in.total) != expected) {
        return Err(
            TRITONSERVER_ERROR_INVALID_ARG,
            r->LogRequest() + "input byte size mismatch for input '" +
                in.name + "' for model '" + model_name + "'. Expected " +
                std::to_string(expected) + ", got " +
                std::to_string(in.total));
      }
    }
  }
  return Status();
}

// Requests and responses handed out and not yet deleted, to catch a second
// delete (which in real Triton frees freed memory).
std::mutex g_live_mu;
std::unordered_set<const void*> g_live_requests;
std::unordered_set<const void*> g_live_responses;

void
Track(std::unordered_set<const void*>& live, const void* object)
{
  std::lock_guard<std::mutex> lk(g_live_mu);
  live.insert(object);
}

void
Untrack(
    std::unordered_set<const void*>& live, const void* object,
    const char* function)
{
  std::lock_guard<std::mutex> lk(g_live_mu);
  if (live.erase(object) == 0) {
    ContractViolation(
        std::string(function) +
        " of an object that was already deleted (or never created)");
  }
}

}  // namespace

void
ReleaseRequest(TRITONSERVER_InferenceRequest* r)
{
  auto fn = r->release_fn;
  void* userp = r->release_userp;
  // The callback may delete the request.
  std::shared_ptr<RequestShared> shared = std::atomic_load(&r->shared);
  r->state = RequestState::kReleased;
  fn(r, TRITONSERVER_REQUEST_RELEASE_ALL, userp);
  LeaveIfDone(shared);
}

void
TrackResponse(const TRITONSERVER_InferenceResponse* response)
{
  Track(g_live_responses, response);
}

void
LeaveIfDone(const std::shared_ptr<RequestShared>& shared)
{
  if (shared && shared->open.fetch_sub(1) == 1 && shared->inside) {
    shared->inside->fetch_sub(1);
  }
}

// ---------------------------------------------------------------------------
// ExecContext
// ---------------------------------------------------------------------------
const ExecInput*
ExecContext::Input(const std::string& name) const
{
  for (const auto& i : inputs) {
    if (i.name == name) {
      return &i;
    }
  }
  return nullptr;
}

bool
ExecContext::Requested(const std::string& output) const
{
  for (const auto& o : outputs_to_send) {
    if (o == output) {
      return true;
    }
  }
  return false;
}

void
ExecContext::Send(
    std::vector<OutTensor> outs, const Status& err, uint32_t flags,
    std::vector<TRITONSERVER_Parameter> params)
{
  const uint64_t now = NowNs();
  if (compute_output_start_ns == 0) {
    compute_output_start_ns = now;
  }
  auto* resp = new TRITONSERVER_InferenceResponse();
  resp->model = model_;
  resp->id = id;
  resp->allocator = allocator;
  resp->status = err;
  if (err.ok()) resp->params = std::move(params);
  TRITONSERVER_ResponseAllocator* alloc =
      const_cast<TRITONSERVER_ResponseAllocator*>(allocator);
  if (alloc->start_fn != nullptr) {
    TRITONSERVER_Error* e = alloc->start_fn(alloc, alloc_userp);
    if (e != nullptr) {
      TC_LOG_ERROR(
          "infer_response.cc", 104,
          "response allocation start failed: " + e->msg);
      delete e;
    }
  }
  if (err.ok()) {
    for (const auto& t : outs) {
      if (!Requested(t.name)) {
        continue;
      }
      size_t size = t.size();
      TRITONSERVER_MemoryType mt = TRITONSERVER_MEMORY_CPU;
      int64_t mid = 0;
      if (alloc->query_fn != nullptr) {
        size_t qsize = size;
        TRITONSERVER_Error* e = alloc->query_fn(
            alloc, alloc_userp, t.name.c_str(), &qsize, &mt, &mid);
        if (e != nullptr) {
          delete e;
        }
        mt = TRITONSERVER_MEMORY_CPU;
        mid = 0;
      }
      ResponseOutput o;
      o.name = t.name;
      o.dtype = t.dtype;
      o.shape = t.shape;
      o.byte_size = size;
      TRITONSERVER_MemoryType amt = mt;
      int64_t amid = mid;
      TRITONSERVER_Error* e = alloc->alloc_fn(
          alloc, t.name.c_str(), size, mt, mid, alloc_userp, &o.base, &o.userp,
          &amt, &amid);
      o.mtype = amt;
      o.mid = amid;
      if (e != nullptr) {
        resp->status = Status(e->code, e->msg);
        delete e;
        break;
      }
      if (size > 0 && o.base == nullptr) {
        resp->hidden.push_back(o);
        resp->status = Err(
            TRITONSERVER_ERROR_INTERNAL,
            "test core: the response allocator returned no buffer for "
            "output '" + t.name + "'");
        break;
      }
      if (amt == TRITONSERVER_MEMORY_GPU && size > 0) {
        resp->hidden.push_back(o);
        resp->status = Err(
            TRITONSERVER_ERROR_UNSUPPORTED,
            "test core: cannot write output '" + t.name +
                "' to GPU memory");
        break;
      }
      if (size > 0) {
        // An output may be placed over its own input (both named in one
        // shared memory region): the ranges may overlap.
        std::memmove(o.base, t.data(), size);
      }
      resp->outputs.push_back(std::move(o));
    }
    if (!resp->status.ok()) {
      for (auto& o : resp->outputs) {
        resp->hidden.push_back(std::move(o));
      }
      resp->outputs.clear();
    }
  }
  // A stub that died while the request ran: Triton fails the request.
  if (model_->stubs) {
    const std::string unhealthy = model_->stubs->Unhealthy();
    if (!unhealthy.empty() && resp->status.ok()) {
      resp->status = Err(TRITONSERVER_ERROR_INTERNAL, unhealthy);
      for (auto& o : resp->outputs) {
        resp->hidden.push_back(std::move(o));
      }
      resp->outputs.clear();
    }
  }
  const bool ok = resp->status.ok();
  if (!ok) {
    any_error = true;
    if (resp->status.code() == TRITONSERVER_ERROR_CANCELLED) {
      cancelled_error = true;
    }
  }
  // Real Triton's Python backend reports no per-response statistics
  // (observed 2026-12-01: "response_stats":{} after a repeat_int32 stream).
  // A backend library reports its own (TRITONBACKEND_ModelInstance-
  // ReportResponseStatistics, which the test core does not offer).
  const bool response_stats = model_->spec.decoupled &&
                              model_->spec.backend != "python" &&
                              !model_->backend->FromLibrary();
  if (response_stats) {
    const uint64_t start = last_response_ns ? last_response_ns : compute_input_end_ns;
    std::lock_guard<std::mutex> lk(model_->stats.mu);
    ResponseStat& rs = model_->stats.responses[responses_sent];
    rs.compute_infer.Add(compute_output_start_ns > start ? now - start : 0);
    rs.compute_output.Add(NowNs() - now);
    if (!ok && resp->status.code() == TRITONSERVER_ERROR_CANCELLED) {
      rs.cancel.Add(NowNs() - start);
    } else if (!ok) {
      rs.fail.Add(NowNs() - start);
    } else {
      rs.success.Add(NowNs() - start);
    }
  }
  last_response_ns = NowNs();
  ++responses_sent;
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) {
    final_sent = true;
  }
  Track(g_live_responses, resp);
  response_fn(resp, flags, response_userp);
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) {
    LeaveIfDone(shared);
  }
}

void
ExecContext::SendFlags(uint32_t flags)
{
  if (model_->spec.decoupled && model_->spec.backend != "python" &&
      !model_->backend->FromLibrary() &&
      (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL)) {
    const uint64_t start =
        last_response_ns ? last_response_ns : compute_input_end_ns;
    std::lock_guard<std::mutex> lk(model_->stats.mu);
    model_->stats.responses[responses_sent].empty_response.Add(NowNs() - start);
  }
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) {
    final_sent = true;
  }
  if (compute_output_start_ns == 0) {
    compute_output_start_ns = NowNs();
  }
  response_fn(nullptr, flags, response_userp);
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) {
    LeaveIfDone(shared);
  }
}

// ---------------------------------------------------------------------------
// Worker
// ---------------------------------------------------------------------------
namespace {

void
FillContext(ExecContext* ctx, TRITONSERVER_InferenceRequest* r)
{
  ctx->model_ = r->model;
  ctx->shared = r->shared;
  ctx->id = r->id;
  ctx->allocator = r->allocator;
  ctx->alloc_userp = r->alloc_userp;
  ctx->response_fn = r->response_fn;
  ctx->response_userp = r->response_userp;
}

// The request's parameters as the JSON object the python backend's
// request.parameters() returns.
std::string
ParametersJson(const TRITONSERVER_InferenceRequest* r)
{
  std::string out = "{";
  for (const auto& p : r->params) {
    if (out.size() > 1) {
      out += ",";
    }
    out += JsonQuote(p.name) + ":";
    switch (p.type) {
      case TRITONSERVER_PARAMETER_INT:
        out += std::to_string(p.i);
        break;
      case TRITONSERVER_PARAMETER_BOOL:
        out += p.b ? "true" : "false";
        break;
      case TRITONSERVER_PARAMETER_DOUBLE: {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.17g", p.d);
        out += buf;
        break;
      }
      case TRITONSERVER_PARAMETER_BYTES:
        out += JsonQuote(std::string(p.bytes.begin(), p.bytes.end()));
        break;
      default:
        out += JsonQuote(p.str);
        break;
    }
  }
  return out + "}";
}

void
RespondErrorAndRelease(TRITONSERVER_InferenceRequest* r, const Status& st)
{
  ExecContext ctx;
  FillContext(&ctx, r);
  ctx.Send({}, st, TRITONSERVER_RESPONSE_COMPLETE_FINAL);
  ReleaseRequest(r);
}

// How long real Triton's Python backend waits for a dead stub's reply
// before it fails an execution (its message-queue timeout, 1 s).
constexpr int kDeadStubReplyWaitMs = 1000;

// One execution: the requests the scheduler took from the queue together,
// on the worker thread of model instance 'instance'.
void
Process(const std::vector<Job>& jobs, size_t instance)
{
  std::shared_ptr<Model> model = jobs.front().request->model;
  const uint64_t start_ns = NowNs();
  const bool decoupled = model->spec.decoupled;
  const bool library = model->backend->FromLibrary();
  // For a backend library: the requests handed over as they are.
  std::vector<PendingRequest> pending;

  struct Item {
    TRITONSERVER_InferenceRequest* r;
    const Job* job;
    uint64_t request_start_ns;
    int64_t batch;
    // Outlives the request (a decoupled request is released early).
    TRITONSERVER_InferenceTrace* trace = nullptr;
    std::shared_ptr<ExecContext> ctx = std::make_shared<ExecContext>();
  };
  std::vector<std::unique_ptr<Item>> items;
  // A Python instance whose stub died: real Triton's backend sends each
  // execution to the stub and waits about a second for a reply before it
  // fails the execution's requests, one execution at a time, and a request
  // cancelled (or timed out) while queued is not spared that wait (observed
  // on r25.07, TRITON_FACTS.md "A Python stub that dies"). So requests
  // queued on a dead instance come back about one a second.
  const bool stub_dead = model->stubs && !model->stubs->Unhealthy().empty();
  if (stub_dead) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kDeadStubReplyWaitMs));
  }
  for (const Job& job : jobs) {
    TRITONSERVER_InferenceRequest* r = job.request;
    if (model->metrics) {
      model->metrics->pending--;
    }
    r->state = RequestState::kExecuting;
    TRITONSERVER_InferenceTrace* trace = r->trace;
    r->trace = nullptr;
    // Cancelled or timed out while waiting in the queue (not on a dead
    // stub: that fails it below, as Triton does).
    if (!stub_dead && (r->shared->cancelled.load() ||
                       (job.deadline_ns != 0 && start_ns > job.deadline_ns))) {
      const bool cancelled = r->shared->cancelled.load();
      const uint64_t request_start_ns = r->request_start_ns;
      RespondErrorAndRelease(
          r, cancelled ? Status(TRITONSERVER_ERROR_CANCELLED, "")
                       : Status(
                             TRITONSERVER_ERROR_UNAVAILABLE,
                             "Request timeout expired"));
      {
        std::lock_guard<std::mutex> lk(model->stats.mu);
        model->stats.fail.Add(NowNs() - request_start_ns);
      }
      if (model->metrics) {
        model->metrics->failure[cancelled ? kCanceled : kRejected]++;
      }
      TraceReport(trace, TRITONSERVER_TRACE_REQUEST_END, NowNs());
      TraceRelease(trace);
      continue;
    }
    // A Python model whose stub died fails every request until it is
    // loaded anew (observed on r25.07; TRITON_FACTS.md).
    if (model->stubs) {
      const std::string unhealthy = model->stubs->Unhealthy();
      if (!unhealthy.empty()) {
        const uint64_t request_start_ns = r->request_start_ns;
        RespondErrorAndRelease(
            r, Status(TRITONSERVER_ERROR_INTERNAL, unhealthy));
        {
          std::lock_guard<std::mutex> lk(model->stats.mu);
          model->stats.fail.Add(NowNs() - request_start_ns);
        }
        TraceReport(trace, TRITONSERVER_TRACE_REQUEST_END, NowNs());
        TraceRelease(trace);
        continue;
      }
    }
    if (library) {
      pending.push_back(PendingRequest{r, job.enqueue_ns, trace});
      continue;
    }
    auto item = std::make_unique<Item>();
    item->r = r;
    item->trace = trace;
    item->job = &job;
    item->request_start_ns = r->request_start_ns;
    item->batch = std::max<int64_t>(1, r->batch_size);
    ExecContext& ctx = *item->ctx;
    FillContext(&ctx, r);
    ctx.outputs_to_send = r->outputs_to_send;
    ctx.compute_start_ns = start_ns;
    ctx.parameters_json = ParametersJson(r);
    ctx.corr_is_string = r->corr_is_string;
    ctx.corr_u = r->corr_u;
    ctx.corr_s = r->corr_s;
    ctx.flags = r->flags;
    ctx.timeout_us = r->timeout_us;
    ctx.batch_size = r->batch_size;
    for (const auto& p : r->inputs) {
      const RequestInput& in = p.second;
      ExecInput ei;
      ei.name = in.name;
      ei.dtype = in.dtype;
      ei.shape = in.shape;
      if (in.chunks.size() == 1 && !decoupled) {
        ei.data = in.chunks[0].base;
        ei.size = in.chunks[0].size;
      } else {
        ctx.owned.emplace_back();
        std::vector<char>& buf = ctx.owned.back();
        buf.reserve(in.total);
        for (const auto& c : in.chunks) {
          buf.insert(buf.end(), c.base, c.base + c.size);
        }
        ei.data = buf.data();
        ei.size = buf.size();
      }
      ctx.inputs.push_back(std::move(ei));
    }
    ctx.compute_input_end_ns = NowNs();
    if (model->metrics && model->metrics->identity_backend) {
      for (const auto& p : r->inputs) model->metrics->input_bytes += p.second.total;
    }
    items.push_back(std::move(item));
  }
  if (library) {
    // The backend releases the requests, sends their responses and reports
    // the statistics itself (TRITONBACKEND_ModelInstanceExecute).
    if (!pending.empty()) {
      model->backend->ExecuteRequests(instance, pending);
    }
    return;
  }
  if (items.empty()) {
    return;
  }

  std::vector<ExecContext*> batch;
  int64_t batch_total = 0;
  for (auto& item : items) {
    if (decoupled) {
      ReleaseRequest(item->r);  // the request belongs to the caller from here
      item->r = nullptr;
    }
    batch.push_back(item->ctx.get());
    batch_total += item->batch;
  }
  model->backend->Execute(batch);
  for (auto& item : items) {
    if (!item->ctx->detached && !item->ctx->final_sent) {
      item->ctx->SendFlags(TRITONSERVER_RESPONSE_COMPLETE_FINAL);
    }
    if (!decoupled) {
      ReleaseRequest(item->r);
      item->r = nullptr;
    }
  }
  const uint64_t end_ns = NowNs();
  for (auto& item : items) {
    TRITONSERVER_InferenceTrace* trace = item->trace;
    if (trace == nullptr) continue;
    const ExecContext& ctx = *item->ctx;
    TraceReport(trace, TRITONSERVER_TRACE_COMPUTE_START, start_ns);
    TraceReport(trace, TRITONSERVER_TRACE_COMPUTE_INPUT_END, ctx.compute_input_end_ns);
    TraceReport(trace, TRITONSERVER_TRACE_COMPUTE_OUTPUT_START, ctx.compute_output_start_ns);
    TraceReport(trace, TRITONSERVER_TRACE_COMPUTE_END, end_ns);
    TraceReport(trace, TRITONSERVER_TRACE_REQUEST_END, NowNs());
    TraceRelease(trace);
    item->trace = nullptr;
  }

  std::lock_guard<std::mutex> lk(model->stats.mu);
  ModelStats& st = model->stats;
  st.execution_count++;
  const ExecContext& first = *items.front()->ctx;
  BatchStat& bs = st.batch[static_cast<uint64_t>(batch_total)];
  bs.count++;
  bs.input_ns += first.compute_input_end_ns - start_ns;
  bs.infer_ns += first.compute_output_start_ns - first.compute_input_end_ns;
  bs.output_ns += end_ns - first.compute_output_start_ns;
  if (model->metrics) {
    model->metrics->exec++;
  }
  for (const auto& item : items) {
    const ExecContext& ctx = *item->ctx;
    const uint64_t request_start_ns = item->request_start_ns;
    const uint64_t batch = static_cast<uint64_t>(item->batch);
    // A detached context is still sending: read only what it fixed before.
    // A Python model's error response still counts as a success
    // (TRITON_FACTS.md, "Batching, ensembles, statistics").
    const bool failed = ctx.detached ? ctx.detached_any_error : ctx.any_error;
    if (!failed || model->spec.backend == "python") {
      st.success.Add(end_ns - request_start_ns);
      st.queue.Add(start_ns - item->job->enqueue_ns);
      st.compute_input.Add(ctx.compute_input_end_ns - start_ns);
      st.compute_infer.Add(ctx.compute_output_start_ns - ctx.compute_input_end_ns);
      st.compute_output.Add(end_ns - ctx.compute_output_start_ns);
      st.inference_count += batch;
      st.last_inference_ms = NowSinceEpochMs();
      if (model->metrics) {
        MetricReporter& mr = *model->metrics;
        mr.success++;
        mr.count += batch;
        mr.request_us += (end_ns - request_start_ns) / 1000;
        mr.queue_us += (start_ns - item->job->enqueue_ns) / 1000;
        mr.compute_input_us += (ctx.compute_input_end_ns - start_ns) / 1000;
        mr.compute_infer_us +=
            (ctx.compute_output_start_ns - ctx.compute_input_end_ns) / 1000;
        mr.compute_output_us += (end_ns - ctx.compute_output_start_ns) / 1000;
      }
    } else {
      st.fail.Add(end_ns - request_start_ns);
      if (model->metrics) {
        model->metrics->failure[kBackend]++;
      }
    }
  }
}

}  // namespace

void
WorkerLoop(std::shared_ptr<Executor> ex, size_t instance)
{
  while (true) {
    std::vector<Job> jobs;
    {
      std::unique_lock<std::mutex> lk(ex->mu);
      ex->cv.wait(lk, [&] { return ex->stop || ex->queued > 0; });
      if (ex->queued == 0) {
        break;  // stopping and nothing left
      }
      auto it = ex->queues.begin();
      while (it->second.empty()) {
        ++it;
      }
      jobs.push_back(it->second.front());
      it->second.pop_front();
      ex->queued--;
      // Like Triton's dynamic batcher with no queue delay: the requests
      // already waiting (same priority level) join the batch up to
      // max_batch_size.
      const ModelSpec& spec = jobs.front().request->model->spec;
      if (spec.dynamic_batching && spec.max_batch_size > 0) {
        int64_t total = std::max<int64_t>(1, jobs.front().request->batch_size);
        while (!it->second.empty()) {
          const int64_t next =
              std::max<int64_t>(1, it->second.front().request->batch_size);
          if (total + next > spec.max_batch_size) {
            break;
          }
          total += next;
          jobs.push_back(it->second.front());
          it->second.pop_front();
          ex->queued--;
        }
      }
    }
    Process(jobs, instance);
    {
      std::lock_guard<std::mutex> lk(ex->mu);
      ex->inflight -= jobs.size();
    }
    if (ex->on_change) {
      ex->on_change();
    }
  }
  std::function<void()> notify = ex->on_change;
  ex->alive_threads--;
  if (notify) {
    notify();
  }
}

// ---------------------------------------------------------------------------
// Identity backend
// ---------------------------------------------------------------------------
namespace {

std::string
SuffixAfter(const std::string& s, const std::string& prefix)
{
  if (s.compare(0, prefix.size(), prefix) == 0) {
    return s.substr(prefix.size());
  }
  return std::string();
}

// Triton's identity backend: OUTPUTn is INPUTn (any type, any shape).
class IdentityBackend : public Backend {
 public:
  explicit IdentityBackend(const ModelSpec& spec) : spec_(spec)
  {
    auto it = spec.parameters.find("execute_delay_ms");
    if (it != spec.parameters.end()) {
      delay_ms_ = std::atoi(it->second.c_str());
    }
  }
  void Execute(const std::vector<ExecContext*>& batch) override
  {
    if (delay_ms_ > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    }
    for (ExecContext* ctx : batch) {
      ExecuteOne(ctx);
    }
  }

 private:
  void ExecuteOne(ExecContext* ctx)
  {
    // Triton's identity backend reads the correlation id as a number; a
    // string one fails that request (seen on real Triton r25.07).
    if (ctx->corr_is_string) {
      ctx->Send(
          {},
          Err(TRITONSERVER_ERROR_INVALID_ARG,
              "[request id: " + (ctx->id.empty() ? "<id_unknown>" : ctx->id) +
                  "] correlation ID in request is not an unsigned int"),
          TRITONSERVER_RESPONSE_COMPLETE_FINAL);
      return;
    }
    std::vector<OutTensor> outs;
    for (size_t i = 0; i < spec_.outputs.size(); ++i) {
      const IOSpec& o = spec_.outputs[i];
      if (!ctx->Requested(o.name)) {
        continue;
      }
      const std::string suffix = SuffixAfter(o.name, "OUTPUT");
      std::string in_name = "INPUT" + suffix;
      if (spec_.Input(in_name) == nullptr && i < spec_.inputs.size()) {
        in_name = spec_.inputs[i].name;
      }
      const ExecInput* in = ctx->Input(in_name);
      if (in == nullptr) {
        ctx->Send(
            {},
            Err(TRITONSERVER_ERROR_INVALID_ARG,
                "identity model '" + spec_.name + "' has no input '" +
                    in_name + "' for output '" + o.name + "'"),
            TRITONSERVER_RESPONSE_COMPLETE_FINAL);
        return;
      }
      OutTensor t;
      t.name = o.name;
      t.dtype = in->dtype;
      t.shape = in->shape;
      t.ext = in->data;
      t.ext_size = in->size;
      outs.push_back(std::move(t));
    }
    ctx->Send(
        std::move(outs), Status(), TRITONSERVER_RESPONSE_COMPLETE_FINAL,
        ExampleParameters());
  }

  // Triton's identity backend attaches these four to every response it
  // sends, one of each type (seen on real Triton r25.07; identity.cc).
  static std::vector<TRITONSERVER_Parameter> ExampleParameters()
  {
    std::vector<TRITONSERVER_Parameter> params(4);
    params[0].name = "param0";
    params[0].type = TRITONSERVER_PARAMETER_STRING;
    params[0].str = "an example string parameter";
    params[1].name = "param1";
    params[1].type = TRITONSERVER_PARAMETER_INT;
    params[1].i = 42;
    params[2].name = "param2";
    params[2].type = TRITONSERVER_PARAMETER_BOOL;
    params[2].b = false;
    params[3].name = "param3";
    params[3].type = TRITONSERVER_PARAMETER_DOUBLE;
    params[3].d = 123.123;
    return params;
  }

  ModelSpec spec_;
  int delay_ms_ = 0;
};

}  // namespace

Status
CreateBackend(const BackendArgs& args, std::unique_ptr<Backend>* out)
{
  const ModelSpec& spec = *args.spec;
  if (spec.platform == "ensemble") {
    return CreateEnsembleBackend(args, out);
  }
  if (spec.backend == "identity") {
    if (spec.decoupled) {
      return Err(
          TRITONSERVER_ERROR_INVALID_ARG,
          "test core: identity model '" + spec.name +
              "' does not support decoupled transaction policy");
    }
    for (const auto& o : spec.outputs) {
      const std::string in = "INPUT" + SuffixAfter(o.name, "OUTPUT");
      const IOSpec* io = spec.Input(in);
      if (io != nullptr && io->dtype != o.dtype) {
        return Err(
            TRITONSERVER_ERROR_INVALID_ARG,
            "test core: identity model '" + spec.name + "' output '" + o.name +
                "' must have the data type of input '" + in + "'");
      }
    }
    out->reset(new IdentityBackend(spec));
    return Status();
  }
  if (spec.backend == "python") {
    return CreatePythonBackend(args, out);
  }
  if (spec.backend == "repeat") {
    return CreateRepeatBackend(args, out);
  }
  return CreateLibraryBackend(args, out);
}

}  // namespace tc

// ---------------------------------------------------------------------------
// C API: requests
// ---------------------------------------------------------------------------
using tc::Err;
using tc::NullArg;

extern "C" {

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestNew(
    TRITONSERVER_InferenceRequest** inference_request,
    TRITONSERVER_Server* server, const char* model_name,
    const int64_t model_version)
{
  if (inference_request == nullptr) return NullArg("inference_request");
  if (server == nullptr) return NullArg("server");
  if (model_name == nullptr) return NullArg("model_name");
  std::shared_ptr<tc::Model> model;
  tc::Status s = server->core->GetModel(model_name, model_version, &model);
  if (!s.ok()) {
    return s.ToError();
  }
  auto* r = new TRITONSERVER_InferenceRequest();
  tc::Track(tc::g_live_requests, r);
  r->model = std::move(model);
  r->requested_version = model_version;
  *inference_request = r;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestDelete(
    TRITONSERVER_InferenceRequest* inference_request)
{
  if (inference_request == nullptr) return nullptr;
  tc::Untrack(
      tc::g_live_requests, inference_request,
      "TRITONSERVER_InferenceRequestDelete");
  const tc::RequestState rs = inference_request->state.load();
  if (rs == tc::RequestState::kPending || rs == tc::RequestState::kExecuting) {
    tc::ContractViolation(
        "TRITONSERVER_InferenceRequestDelete of a request Triton has not "
        "released yet");
  }
  delete inference_request;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetId(
    TRITONSERVER_InferenceRequest* inference_request, const char* id)
{
  if (inference_request == nullptr) return NullArg("inference_request");
  if (id == nullptr) return NullArg("id");
  inference_request->id = id;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetFlags(
    TRITONSERVER_InferenceRequest* inference_request, uint32_t flags)
{
  if (inference_request == nullptr) return NullArg("inference_request");
  inference_request->flags = flags;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetCorrelationId(
    TRITONSERVER_InferenceRequest* inference_request, uint64_t correlation_id)
{
  if (inference_request == nullptr) return NullArg("inference_request");
  inference_request->corr_is_string = false;
  inference_request->corr_u = correlation_id;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetCorrelationIdString(
    TRITONSERVER_InferenceRequest* inference_request,
    const char* correlation_id)
{
  if (inference_request == nullptr) return NullArg("inference_request");
  if (correlation_id == nullptr) return NullArg("correlation_id");
  if (std::strlen(correlation_id) > 128) {
    return tc::NewError(
        TRITONSERVER_ERROR_UNSUPPORTED,
        "string correlation ID cannot be longer than 128 characters");
  }
  inference_request->corr_is_string = true;
  inference_request->corr_s = correlation_id;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetPriority(
    TRITONSERVER_InferenceRequest* inference_request, uint32_t priority)
{
  if (inference_request == nullptr) return NullArg("inference_request");
  inference_request->priority =
      inference_request->model->EffectivePriority(priority);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(
    TRITONSERVER_InferenceRequest* inference_request, uint64_t timeout_us)
{
  if (inference_request == nullptr) return NullArg("inference_request");
  inference_request->timeout_us = timeout_us;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestAddInput(
    TRITONSERVER_InferenceRequest* inference_request, const char* name,
    const TRITONSERVER_DataType datatype, const int64_t* shape,
    uint64_t dim_count)
{
  if (inference_request == nullptr) return NullArg("inference_request");
  if (name == nullptr) return NullArg("name");
  if (shape == nullptr && dim_count > 0) return NullArg("shape");
  if (inference_request->inputs.count(name) != 0) {
    return tc::NewError(
        TRITONSERVER_ERROR_INVALID_ARG,
        inference_request->LogRequest() + "input '" + name +
            "' already exists in request");
  }
  tc::RequestInput in;
  in.name = name;
  const int dt = static_cast<int>(datatype);
  in.dtype = (dt >= 0 && dt <= 14) ? datatype : TRITONSERVER_TYPE_INVALID;
  if (dim_count > 0) {
    in.shape.assign(shape, shape + dim_count);
  }
  inference_request->input_order.push_back(in.name);
  inference_request->inputs.emplace(in.name, std::move(in));
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestAppendInputData(
    TRITONSERVER_InferenceRequest* inference_request, const char* name,
    const void* base, size_t byte_size, TRITONSERVER_MemoryType memory_type,
    int64_t memory_type_id)
{
  if (inference_request == nullptr) return NullArg("inference_request");
  if (name == nullptr) return NullArg("name");
  auto it = inference_request->inputs.find(name);
  if (it == inference_request->inputs.end()) {
    return tc::NewError(
        TRITONSERVER_ERROR_INVALID_ARG,
        inference_request->LogRequest() + "input '" + name +
            "' does not exist in request");
  }
  if (base == nullptr && byte_size > 0) return NullArg("base");
  if (byte_size > 0) {
    it->second.chunks.push_back(tc::InputChunk{
        static_cast<const char*>(base), byte_size, memory_type,
        memory_type_id});
    it->second.total += byte_size;
  }
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestAddRequestedOutput(
    TRITONSERVER_InferenceRequest* inference_request, const char* name)
{
  if (inference_request == nullptr) return NullArg("inference_request");
  if (name == nullptr) return NullArg("name");
  inference_request->requested_outputs.insert(name);
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetReleaseCallback(
    TRITONSERVER_InferenceRequest* inference_request,
    TRITONSERVER_InferenceRequestReleaseFn_t request_release_fn,
    void* request_release_userp)
{
  if (inference_request == nullptr) return NullArg("inference_request");
  inference_request->release_fn = request_release_fn;
  inference_request->release_userp = request_release_userp;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetResponseCallback(
    TRITONSERVER_InferenceRequest* inference_request,
    TRITONSERVER_ResponseAllocator* response_allocator,
    void* response_allocator_userp,
    TRITONSERVER_InferenceResponseCompleteFn_t response_fn,
    void* response_userp)
{
  if (inference_request == nullptr) return NullArg("inference_request");
  inference_request->allocator = response_allocator;
  inference_request->alloc_userp = response_allocator_userp;
  inference_request->response_fn = response_fn;
  inference_request->response_userp = response_userp;
  return nullptr;
}

namespace {
TRITONSERVER_Parameter
MakeParam(const char* key, TRITONSERVER_ParameterType type)
{
  TRITONSERVER_Parameter p;
  p.name = key;
  p.type = type;
  return p;
}
}  // namespace

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetStringParameter(
    TRITONSERVER_InferenceRequest* request, const char* key, const char* value)
{
  if (request == nullptr) return NullArg("request");
  if (key == nullptr) return NullArg("key");
  if (value == nullptr) return NullArg("value");
  TRITONSERVER_Parameter p = MakeParam(key, TRITONSERVER_PARAMETER_STRING);
  p.str = value;
  request->params.push_back(std::move(p));
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetIntParameter(
    TRITONSERVER_InferenceRequest* request, const char* key,
    const int64_t value)
{
  if (request == nullptr) return NullArg("request");
  if (key == nullptr) return NullArg("key");
  TRITONSERVER_Parameter p = MakeParam(key, TRITONSERVER_PARAMETER_INT);
  p.i = value;
  request->params.push_back(std::move(p));
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetBoolParameter(
    TRITONSERVER_InferenceRequest* request, const char* key, const bool value)
{
  if (request == nullptr) return NullArg("request");
  if (key == nullptr) return NullArg("key");
  TRITONSERVER_Parameter p = MakeParam(key, TRITONSERVER_PARAMETER_BOOL);
  p.b = value;
  request->params.push_back(std::move(p));
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestSetDoubleParameter(
    TRITONSERVER_InferenceRequest* request, const char* key,
    const double value)
{
  if (request == nullptr) return NullArg("request");
  if (key == nullptr) return NullArg("key");
  TRITONSERVER_Parameter p = MakeParam(key, TRITONSERVER_PARAMETER_DOUBLE);
  p.d = value;
  request->params.push_back(std::move(p));
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceRequestCancel(
    TRITONSERVER_InferenceRequest* inference_request)
{
  if (inference_request == nullptr) return NullArg("inference_request");
  std::shared_ptr<tc::RequestShared> shared =
      std::atomic_load(&inference_request->shared);
  if (!shared) {
    return tc::NewError(
        TRITONSERVER_ERROR_INTERNAL,
        "It is not possible to cancel an inference request before calling "
        "TRITONSERVER_InferAsync.");
  }
  shared->cancelled = true;
  return nullptr;
}

// ---------------------------------------------------------------------------
// C API: responses
// ---------------------------------------------------------------------------
TRITONSERVER_Error*
TRITONSERVER_InferenceResponseDelete(
    TRITONSERVER_InferenceResponse* inference_response)
{
  if (inference_response == nullptr) {
    return nullptr;
  }
  tc::Untrack(
      tc::g_live_responses, inference_response,
      "TRITONSERVER_InferenceResponseDelete");
  auto* alloc =
      const_cast<TRITONSERVER_ResponseAllocator*>(inference_response->allocator);
  auto release = [&](const tc::ResponseOutput& o) {
    if (o.base != nullptr && alloc != nullptr && alloc->release_fn != nullptr) {
      TRITONSERVER_Error* e = alloc->release_fn(
          alloc, o.base, o.userp, o.byte_size, o.mtype, o.mid);
      if (e != nullptr) {
        TC_LOG_ERROR(
            "infer_response.cc", 437,
            "failed to release buffer for output '" + o.name + "': " + e->msg);
        delete e;
      }
    }
  };
  for (const auto& o : inference_response->outputs) {
    release(o);
  }
  for (const auto& o : inference_response->hidden) {
    release(o);
  }
  delete inference_response;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceResponseError(
    TRITONSERVER_InferenceResponse* inference_response)
{
  if (inference_response == nullptr) return NullArg("inference_response");
  return inference_response->status.ToError();
}

TRITONSERVER_Error*
TRITONSERVER_InferenceResponseModel(
    TRITONSERVER_InferenceResponse* inference_response, const char** model_name,
    int64_t* model_version)
{
  if (inference_response == nullptr) return NullArg("inference_response");
  if (model_name == nullptr) return NullArg("model_name");
  if (model_version == nullptr) return NullArg("model_version");
  *model_name = inference_response->model->name.c_str();
  *model_version = inference_response->model->version;
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceResponseId(
    TRITONSERVER_InferenceResponse* inference_response, const char** request_id)
{
  if (inference_response == nullptr) return NullArg("inference_response");
  if (request_id == nullptr) return NullArg("request_id");
  *request_id = inference_response->id.c_str();
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceResponseParameterCount(
    TRITONSERVER_InferenceResponse* inference_response, uint32_t* count)
{
  if (inference_response == nullptr) return NullArg("inference_response");
  if (count == nullptr) return NullArg("count");
  *count = static_cast<uint32_t>(inference_response->params.size());
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceResponseParameter(
    TRITONSERVER_InferenceResponse* inference_response, const uint32_t index,
    const char** name, TRITONSERVER_ParameterType* type, const void** vvalue)
{
  if (inference_response == nullptr) return NullArg("inference_response");
  if (name == nullptr) return NullArg("name");
  if (type == nullptr) return NullArg("type");
  if (vvalue == nullptr) return NullArg("vvalue");
  const auto& params = inference_response->params;
  if (index >= params.size()) {
    return tc::NewError(
        TRITONSERVER_ERROR_INVALID_ARG,
        "out of bounds index " + std::to_string(index) + ": response has " +
            std::to_string(params.size()) + " parameters");
  }
  *name = params[index].name.c_str();
  *type = params[index].type;
  *vvalue = params[index].ValuePointer();
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceResponseOutputCount(
    TRITONSERVER_InferenceResponse* inference_response, uint32_t* count)
{
  if (inference_response == nullptr) return NullArg("inference_response");
  if (count == nullptr) return NullArg("count");
  *count = static_cast<uint32_t>(inference_response->outputs.size());
  return nullptr;
}

TRITONSERVER_Error*
TRITONSERVER_InferenceResponseOutput(
    TRITONSERVER_InferenceResponse* inference_response, const uint32_t index,
    const char** name, TRITONSERVER_DataType* datatype, const int64_t** shape,
    uint64_t* dim_count, const void** base, size_t* byte_size,
    TRITONSERVER_MemoryType* memory_type, int64_t* memory_type_id, void** userp)
{
  if (inference_response == nullptr) return NullArg("inference_response");
  if (name == nullptr || datatype == nullptr || shape == nullptr ||
      dim_count == nullptr || base == nullptr || byte_size == nullptr ||
      memory_type == nullptr || memory_type_id == nullptr || userp == nullptr) {
    return NullArg("output pointer");
  }
  const auto& outs = inference_response->outputs;
  if (index >= outs.size()) {
    return tc::NewError(
        TRITONSERVER_ERROR_INVALID_ARG,
        "out of bounds index " + std::to_string(index) + ": response has " +
            std::to_string(outs.size()) + " outputs");
  }
  const tc::ResponseOutput& o = outs[index];
  *name = o.name.c_str();
  *datatype = o.dtype;
  *shape = o.shape.data();
  *dim_count = o.shape.size();
  *base = o.base;
  *byte_size = o.byte_size;
  *memory_type = o.mtype;
  *memory_type_id = o.mid;
  *userp = o.userp;
  return nullptr;
}

// ---------------------------------------------------------------------------
// C API: ServerInferAsync
// ---------------------------------------------------------------------------
TRITONSERVER_Error*
TRITONSERVER_ServerInferAsync(
    TRITONSERVER_Server* server,
    TRITONSERVER_InferenceRequest* inference_request,
    TRITONSERVER_InferenceTrace* trace)
{
  if (server == nullptr) return NullArg("server");
  if (inference_request == nullptr) return NullArg("inference_request");
  TRITONSERVER_InferenceRequest* r = inference_request;
  tc::ServerCore& core = *server->core;
  const tc::ServerState ss = core.state.load();
  if (ss != tc::ServerState::kReady && ss != tc::ServerState::kExiting) {
    return tc::NewError(TRITONSERVER_ERROR_UNAVAILABLE, "Server not ready");
  }
  const tc::RequestState rs = r->state.load();
  if (rs == tc::RequestState::kPending || rs == tc::RequestState::kExecuting) {
    return tc::NewError(
        TRITONSERVER_ERROR_INTERNAL,
        r->LogRequest() + "Invalid request state transition from " +
            (rs == tc::RequestState::kPending ? "PENDING" : "EXECUTING") +
            " to INITIALIZED");
  }
  // A new response factory (and cancellation state) for every submission.
  std::atomic_store(&r->shared, std::make_shared<tc::RequestShared>());
  if (r->release_fn == nullptr) {
    return tc::NewError(
        TRITONSERVER_ERROR_INVALID_ARG,
        r->LogRequest() +
            "test core: a request release callback must be set before "
            "TRITONSERVER_ServerInferAsync");
  }
  if (r->response_fn == nullptr || r->allocator == nullptr) {
    return tc::NewError(
        TRITONSERVER_ERROR_INVALID_ARG,
        r->LogRequest() +
            "test core: a response callback and allocator must be set "
            "before TRITONSERVER_ServerInferAsync");
  }
  tc::Status s = tc::ValidateRequest(r);
  if (!s.ok()) {
    r->state = tc::RequestState::kInitialized;
    return s.ToError();
  }
  if (trace != nullptr) {
    trace->model_name = r->model->name;
    trace->model_version = r->model->version;
  }

  std::shared_ptr<tc::Model> model = r->model;
  tc::Executor& ex = *model->executor;
  tc::Job job;
  job.request = r;
  job.enqueue_ns = tc::NowNs();
  r->request_start_ns = job.enqueue_ns;
  r->trace = trace;
  tc::TraceReport(trace, TRITONSERVER_TRACE_REQUEST_START, job.enqueue_ns);
  uint64_t timeout_us = 0;
  if (model->spec.dynamic_batching) {
    timeout_us = model->spec.default_timeout_us;
    if (model->spec.allow_timeout_override && r->timeout_us != 0 &&
        r->timeout_us < timeout_us) {
      timeout_us = r->timeout_us;
    }
  }
  job.deadline_ns = timeout_us == 0 ? 0 : job.enqueue_ns + timeout_us * 1000;
  {
    std::lock_guard<std::mutex> lk(ex.mu);
    if (model->spec.max_queue_size != 0 &&
        ex.queued >= model->spec.max_queue_size) {
      r->state = tc::RequestState::kFailedEnqueue;
      r->trace = nullptr;
      tc::TraceRelease(trace);
      return tc::NewError(
          TRITONSERVER_ERROR_UNAVAILABLE,
          r->LogRequest() + "Exceeds maximum queue size");
    }
    r->state = tc::RequestState::kPending;
    tc::TraceReport(trace, TRITONSERVER_TRACE_QUEUE_START, tc::NowNs());
    r->shared->inside = core.requests_inside;
    core.requests_inside->fetch_add(1);
    if (model->metrics) {
      model->metrics->pending++;
    }
    ex.queues[r->priority == 0 ? model->EffectivePriority(0) : r->priority]
        .push_back(job);
    ex.queued++;
    ex.inflight++;
  }
  ex.cv.notify_one();
  return nullptr;
}

}  // extern "C"
