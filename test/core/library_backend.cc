// Test core: backends in shared libraries, driven through Triton's backend
// API (the TRITONBACKEND_* functions of native/core/backend_api.h).
//
// Follows Triton r25.07 (tritonbackend.h and the loader in backend_model.cc,
// backend_manager.cc, backend_model_instance.cc):
// - Finding the library: the configuration's `runtime`, else
//   libtriton_<backend>.so, looked for in <model>/<version>, <model> and
//   <backend directory>/<backend>, first hit wins. Only a library named by
//   `runtime` is checked for escaping: the path found, with symbolic links
//   resolved, must start with the resolved directory it was found in (so a
//   version directory that is a link to a directory holding the library is
//   fine). The library is opened RTLD_NOW | RTLD_LOCAL and never closed.
// - Backends are process-wide, one per library path and backend name, shared
//   by every server (like Triton's backend manager, which lives as long as
//   some server holds it). TRITONBACKEND_Initialize runs when a library path
//   is first used; TRITONBACKEND_Finalize when the last server and the last
//   model holding the backend are gone, not when its last model unloads.
//   Like Triton, Finalize also runs after a failed Initialize.
// - A model version: ModelInitialize, then ModelInstanceInitialize for each
//   instance, named <instance group name>_<index>. Every instance is tried
//   even after one failed; a failure fails the load with the last error
//   after the finalize functions ran for every instance tried (the failed
//   ones included) and then ModelFinalize (which also runs when
//   ModelInitialize failed) — what Triton's destructors do.
// - Execution: one worker thread per instance calls ModelInstanceExecute
//   with the batch the scheduler formed. An error from it: the core sends
//   the error as the FINAL response of every request, counts them failed and
//   releases them. Success: the backend owns the requests; it releases them
//   (RequestRelease) and sends their responses whenever and from whatever
//   thread it likes; a response factory or response keeps the model alive.
// - Statistics come only from the backend's ModelInstanceReportStatistics
//   (per request) and ModelInstanceReportBatchStatistics (per execution),
//   turned into model statistics and metrics the way Triton's statistics
//   aggregator does; queue time runs from enqueue to the reported
//   execution start.
// Handles a backend no longer owns (a request released twice, a response
// sent twice, a response after the FINAL flag) stop the process with a
// contract violation: real Triton would read freed memory.
#include <dlfcn.h>
#include <sys/stat.h>

#include <deque>
#include <filesystem>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "native/core/backend_api.h"
#include "server.h"
#include "trace.h"

// The backend API as this library exports it, checked against the
// project's declaration of the ABI.
extern "C" {
#define TC_DECLARE_BACKEND_API(ret, name, params) \
  TC_EXPORT ret TRITONBACKEND_##name params;
TRITON_BACKEND_API_FUNCTIONS(TC_DECLARE_BACKEND_API)
#undef TC_DECLARE_BACKEND_API
}
#define TC_CHECK_BACKEND_API(ret, name, params)                            \
  static_assert(                                                           \
      std::is_same_v<decltype(&TRITONBACKEND_##name), TritonBackendFn_##name>, \
      "TRITONBACKEND_" #name " differs from native/core/backend_api.h");
TRITON_BACKEND_API_FUNCTIONS(TC_CHECK_BACKEND_API)
#undef TC_CHECK_BACKEND_API

namespace tc {
// Entry point types of a backend library.
#define TC_ENTRY_TYPE(name, params) \
  using EntryFn_##name = TRITONSERVER_Error* (*)params;
TRITON_BACKEND_ENTRY_POINTS(TC_ENTRY_TYPE)
#undef TC_ENTRY_TYPE

// Where a request's responses go; outlives the request (a response factory
// or a response created before the release keeps it).
struct ResponseTarget {
  std::shared_ptr<Model> model;
  std::string id;
  const TRITONSERVER_ResponseAllocator* allocator = nullptr;
  void* alloc_userp = nullptr;
  TRITONSERVER_InferenceResponseCompleteFn_t response_fn = nullptr;
  void* response_userp = nullptr;
  std::shared_ptr<RequestShared> shared;
  std::atomic<bool> final_sent{false};
};
}  // namespace tc

// ---- the handles a backend sees ----
struct TRITONBACKEND_Backend {
  std::string name;
  std::string dir;
  std::string libpath;
  void* handle = nullptr;
#define TC_ENTRY_FIELD(name, params) tc::EntryFn_##name name = nullptr;
  TRITON_BACKEND_ENTRY_POINTS(TC_ENTRY_FIELD)
#undef TC_ENTRY_FIELD
  ~TRITONBACKEND_Backend();
};

struct TRITONBACKEND_Model {
  std::string name;
  uint64_t version = 0;
  tc::PMsg config;  // normalized, as TRITONSERVER_ServerModelConfig prints it
  std::shared_ptr<TRITONBACKEND_Backend> backend;
  void* state = nullptr;
  tc::Model* loaded = nullptr;  // the loaded model, once it exists
};

struct TRITONBACKEND_ModelInstance {
  std::string name;
  TRITONBACKEND_Model* model = nullptr;
  void* state = nullptr;
};

struct TRITONBACKEND_Input {
  const tc::RequestInput* in = nullptr;
};

struct TRITONBACKEND_Request {
  TRITONSERVER_InferenceRequest* r = nullptr;
  std::shared_ptr<tc::ResponseTarget> target;
  uint64_t enqueue_ns = 0;
  TRITONSERVER_InferenceTrace* trace = nullptr;
  std::vector<TRITONBACKEND_Input> inputs;  // in Triton's order
  std::vector<std::string> outputs;         // requested, in Triton's order
};

struct TRITONBACKEND_ResponseFactory {
  std::shared_ptr<tc::ResponseTarget> target;
};

struct TRITONBACKEND_Output {
  tc::ResponseOutput out;
  TRITONBACKEND_Response* owner = nullptr;
};

struct TRITONBACKEND_Response {
  std::shared_ptr<tc::ResponseTarget> target;
  TRITONSERVER_InferenceResponse* response = nullptr;
  std::deque<TRITONBACKEND_Output> outputs;  // stable addresses
};

TRITONBACKEND_Backend::~TRITONBACKEND_Backend()
{
  // The library stays loaded, as in Triton.
  if (Finalize != nullptr) {
    TRITONSERVER_Error* err = Finalize(this);
    if (err != nullptr) {
      TC_LOG_ERROR(
          "backend_manager.cc", 161,
          std::string("failed finalizing backend: ") + tc::CodeString(err->code) +
              " - " + err->msg);
      delete err;
    }
  }
}

namespace tc {

class LibraryBackendManager {
 public:
  std::mutex mu;  // held while a backend is created, as in Triton
  std::unordered_map<std::string, std::shared_ptr<TRITONBACKEND_Backend>>
      backends;  // by library path
};

namespace {

std::mutex g_manager_mu;
std::weak_ptr<LibraryBackendManager> g_manager;

// ---- handles owned by a backend (see the contract violations above) ----
std::mutex g_handles_mu;
std::unordered_set<const void*> g_requests;
std::unordered_set<const void*> g_responses;
std::unordered_set<const void*> g_factories;

void
Own(std::unordered_set<const void*>& set, const void* handle)
{
  std::lock_guard<std::mutex> lk(g_handles_mu);
  set.insert(handle);
}

bool
Owned(const std::unordered_set<const void*>& set, const void* handle)
{
  std::lock_guard<std::mutex> lk(g_handles_mu);
  return set.count(handle) != 0;
}

bool
Disown(std::unordered_set<const void*>& set, const void* handle)
{
  std::lock_guard<std::mutex> lk(g_handles_mu);
  return set.erase(handle) != 0;
}

void
RequireRequest(const TRITONBACKEND_Request* request, const char* function)
{
  if (!Owned(g_requests, request)) {
    ContractViolation(
        std::string(function) +
        " of a request the backend does not own (released, or never given "
        "to it)");
  }
}

void
RequireFactory(const TRITONBACKEND_ResponseFactory* factory, const char* function)
{
  if (!Owned(g_factories, factory)) {
    ContractViolation(
        std::string(function) +
        " of a response factory that was deleted (or never created)");
  }
}

void
RequireResponse(const TRITONBACKEND_Response* response, const char* function)
{
  if (!Owned(g_responses, response)) {
    ContractViolation(
        std::string(function) +
        " of a response that was sent or deleted (or never created)");
  }
}

// ---- finding the library (TritonModel::GetBackendLibraryProperties) ----
std::string
JoinPath(const std::string& a, const std::string& b)
{
  if (a.empty()) return b;
  if (!b.empty() && b[0] == '/') {
    return a.back() == '/' ? a + b.substr(1) : a + b;
  }
  return a.back() == '/' ? a + b : a + "/" + b;
}

bool
Exists(const std::string& path)
{
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool
EscapesDirectory(const std::string& path, const std::string& dir)
{
  std::error_code ec;
  const std::string child = std::filesystem::weakly_canonical(path, ec).string();
  if (ec) return true;
  const std::string parent = std::filesystem::canonical(dir, ec).string();
  if (ec) return true;
  // A plain prefix test, as Triton does.
  return child.rfind(parent, 0) != 0;
}

Status
FindLibrary(
    const BackendArgs& args, const std::string& backend_dir,
    std::string* libdir, std::string* libpath)
{
  const ModelSpec& spec = *args.spec;
  const std::string& backend = spec.backend;
  const std::string model_name = args.config->Str("name");
  const std::string runtime = args.config->Str("runtime");
  const std::vector<std::string> search = {
      JoinPath(args.model_path, std::to_string(args.version)),
      args.model_path, JoinPath(backend_dir, backend)};
  auto find = [&](const std::string& name) {
    for (const auto& dir : search) {
      const std::string path = JoinPath(dir, name);
      if (Exists(path)) {
        *libdir = dir;
        *libpath = path;
        return true;
      }
    }
    return false;
  };
  const std::string python_based =
      "test core: model '" + model_name + "' uses a Python-based backend ('" +
      backend + "' through model.py), which this library does not run";
  if (runtime.empty()) {
    if (find("libtriton_" + backend + ".so")) {
      return Status();  // no escape check without a runtime, as in Triton
    }
    if (Exists(JoinPath(JoinPath(backend_dir, backend), "model.py"))) {
      return Err(TRITONSERVER_ERROR_UNSUPPORTED, python_based);
    }
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        "unable to find backend library for backend '" + backend +
            "', try specifying runtime on the model configuration.");
  }
  if (runtime == "model.py") {
    return Err(TRITONSERVER_ERROR_UNSUPPORTED, python_based);
  }
  if (!find(runtime)) {
    std::string searched;
    for (const auto& dir : search) {
      searched += "'" + dir + "' ";
    }
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        "unable to find backend library '" + runtime + "' for model '" +
            model_name + "', searched: " + searched);
  }
  if (EscapesDirectory(*libpath, *libdir)) {
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        "backend library name '" + runtime + "' escapes backend directory '" +
            *libdir + "', for model '" + model_name +
            "', check model config runtime field");
  }
  return Status();
}

Status
StatusOf(TRITONSERVER_Error* err)
{
  Status s(err->code, err->msg);
  delete err;
  return s;
}

// ---- the backend manager (TritonBackendManager::CreateBackend) ----
Status
OpenBackend(
    LibraryBackendManager& manager, const std::string& name,
    const std::string& dir, const std::string& libpath,
    std::shared_ptr<TRITONBACKEND_Backend>* out)
{
  std::lock_guard<std::mutex> lk(manager.mu);
  auto it = manager.backends.find(libpath);
  if (it != manager.backends.end() && it->second->name == name) {
    *out = it->second;
    return Status();
  }
  auto backend = std::make_shared<TRITONBACKEND_Backend>();
  backend->name = name;
  backend->dir = dir;
  backend->libpath = libpath;
  backend->handle = dlopen(libpath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (backend->handle == nullptr) {
    const char* why = dlerror();
    return Err(
        TRITONSERVER_ERROR_NOT_FOUND,
        std::string("unable to load shared library: ") + (why ? why : ""));
  }
  // All entry points are optional but ModelInstanceExecute; they are set
  // only once all were looked up, so a failure here finalizes nothing.
  struct Entries {
#define TC_ENTRY_FIELD(name, params) EntryFn_##name name = nullptr;
    TRITON_BACKEND_ENTRY_POINTS(TC_ENTRY_FIELD)
#undef TC_ENTRY_FIELD
  } entries;
#define TC_RESOLVE(entry, params)                                            \
  {                                                                          \
    const std::string symbol = "TRITONBACKEND_" #entry;                      \
    dlerror();                                                               \
    void* fn = dlsym(backend->handle, symbol.c_str());                       \
    const char* why = dlerror();                                             \
    if ((why != nullptr || fn == nullptr) &&                                 \
        symbol == "TRITONBACKEND_ModelInstanceExecute") {                    \
      return Err(                                                            \
          TRITONSERVER_ERROR_NOT_FOUND,                                      \
          "unable to find required entrypoint '" + symbol +                  \
              "' in shared library" +                                        \
              (why != nullptr ? std::string(": ") + why : std::string()));   \
    }                                                                        \
    entries.entry = why != nullptr ? nullptr                                 \
                                   : reinterpret_cast<EntryFn_##entry>(fn);  \
  }
  TRITON_BACKEND_ENTRY_POINTS(TC_RESOLVE)
#undef TC_RESOLVE
#define TC_ENTRY_SET(entry, params) backend->entry = entries.entry;
  TRITON_BACKEND_ENTRY_POINTS(TC_ENTRY_SET)
#undef TC_ENTRY_SET
  if (backend->Initialize != nullptr) {
    TRITONSERVER_Error* err = backend->Initialize(backend.get());
    if (err != nullptr) {
      return StatusOf(err);  // 'backend' goes: Finalize runs, as in Triton
    }
  }
  // A second backend name on the same library gets a backend of its own,
  // which only its models hold (Triton keeps the first in its map).
  manager.backends.emplace(libpath, backend);
  *out = std::move(backend);
  return Status();
}

// Triton's request inputs are an unordered_map filled from another
// unordered_map filled in AddInput order; iterating the same containers of
// the same standard library gives the order its backends see.
std::vector<std::string>
TritonInputOrder(const TRITONSERVER_InferenceRequest& r)
{
  std::unordered_map<std::string, int> original;
  for (const auto& name : r.input_order) {
    original.emplace(name, 0);
  }
  std::unordered_map<std::string, int> inputs;
  for (const auto& p : original) {
    inputs.emplace(p.first, 0);
  }
  std::vector<std::string> order;
  for (const auto& p : inputs) {
    order.push_back(p.first);
  }
  return order;
}

TRITONBACKEND_Request*
NewBackendRequest(const PendingRequest& p)
{
  TRITONSERVER_InferenceRequest* r = p.request;
  auto* br = new TRITONBACKEND_Request();
  br->r = r;
  br->enqueue_ns = p.enqueue_ns;
  br->trace = p.trace;
  auto target = std::make_shared<ResponseTarget>();
  target->model = r->model;
  target->id = r->id;
  target->allocator = r->allocator;
  target->alloc_userp = r->alloc_userp;
  target->response_fn = r->response_fn;
  target->response_userp = r->response_userp;
  target->shared = std::atomic_load(&r->shared);
  br->target = std::move(target);
  for (const auto& name : TritonInputOrder(*r)) {
    auto it = r->inputs.find(name);
    if (it != r->inputs.end()) {
      br->inputs.push_back(TRITONBACKEND_Input{&it->second});
    }
  }
  // Requested outputs are a sorted set; none requested means all of the
  // model's outputs.
  std::set<std::string> outputs = r->requested_outputs;
  if (outputs.empty()) {
    for (const auto& o : r->model->spec.outputs) {
      outputs.insert(o.name);
    }
  }
  br->outputs.assign(outputs.begin(), outputs.end());
  Own(g_requests, br);
  return br;
}

// Gives the request back to its owner (the backend's RequestRelease, or the
// core after a failed execution).
void
ReleaseBackendRequest(TRITONBACKEND_Request* br)
{
  if (br->trace != nullptr) {
    TraceReport(br->trace, TRITONSERVER_TRACE_REQUEST_END, NowNs());
    TraceRelease(br->trace);
    br->trace = nullptr;
  }
  ReleaseRequest(br->r);
  delete br;
}

TRITONBACKEND_Response*
NewBackendResponse(const std::shared_ptr<ResponseTarget>& target)
{
  auto* resp = new TRITONSERVER_InferenceResponse();
  resp->model = target->model;
  resp->id = target->id;
  resp->allocator = target->allocator;
  auto* alloc = const_cast<TRITONSERVER_ResponseAllocator*>(target->allocator);
  if (alloc->start_fn != nullptr) {
    TRITONSERVER_Error* e = alloc->start_fn(alloc, target->alloc_userp);
    if (e != nullptr) {
      TC_LOG_ERROR(
          "infer_response.cc", 104,
          "response allocation start failed: " + e->msg);
      delete e;
    }
  }
  auto* br = new TRITONBACKEND_Response();
  br->target = target;
  br->response = resp;
  Own(g_responses, br);
  return br;
}

void
FreeOutputBuffers(TRITONBACKEND_Response* br)
{
  auto* alloc =
      const_cast<TRITONSERVER_ResponseAllocator*>(br->target->allocator);
  for (const auto& o : br->outputs) {
    if (o.out.base == nullptr || alloc->release_fn == nullptr) continue;
    TRITONSERVER_Error* e = alloc->release_fn(
        alloc, o.out.base, o.out.userp, o.out.byte_size, o.out.mtype,
        o.out.mid);
    if (e != nullptr) {
      TC_LOG_ERROR(
          "infer_response.cc", 437,
          "failed to release buffer for output '" + o.out.name + "': " + e->msg);
      delete e;
    }
  }
}

// Hands flags (and a response, or none) to the request's response callback.
void
Deliver(
    const std::shared_ptr<ResponseTarget>& target,
    TRITONSERVER_InferenceResponse* response, uint32_t flags,
    const char* function)
{
  const bool final = (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0;
  if (final ? target->final_sent.exchange(true) : target->final_sent.load()) {
    ContractViolation(
        std::string(function) +
        " for a request whose FINAL flag was already sent");
  }
  if (response != nullptr) {
    TrackResponse(response);
  }
  target->response_fn(response, flags, target->response_userp);
  if (final) {
    LeaveIfDone(target->shared);
  }
}

void
SendBackendResponse(
    TRITONBACKEND_Response* br, uint32_t flags, const Status& status,
    const char* function)
{
  std::shared_ptr<ResponseTarget> target = std::move(br->target);
  TRITONSERVER_InferenceResponse* resp = br->response;
  resp->status = status;
  for (auto& o : br->outputs) {
    resp->outputs.push_back(std::move(o.out));
  }
  delete br;
  Deliver(target, resp, flags, function);
}

// The failure statistics of a request (InferenceStatsAggregator::
// UpdateFailure with reason BACKEND).
void
CountFailure(const TRITONSERVER_InferenceRequest& r)
{
  Model& m = *r.model;
  const uint64_t end = NowNs();
  {
    std::lock_guard<std::mutex> lk(m.stats.mu);
    m.stats.fail.Add(end - r.request_start_ns);
  }
  if (m.metrics) {
    m.metrics->failure[kBackend]++;
  }
}

class LibraryBackend : public Backend {
 public:
  ~LibraryBackend() override
  {
    // Triton's ~TritonModel: the instances first, in order, then the model.
    for (auto& instance : instances_) {
      FinalizeInstance(instance.get());
    }
    instances_.clear();
    if (model_ && model_->backend->ModelFinalize != nullptr) {
      TRITONSERVER_Error* err = model_->backend->ModelFinalize(model_.get());
      if (err != nullptr) {
        TC_LOG_ERROR(
            "backend_model.cc", 988,
            std::string("failed finalizing model: ") + CodeString(err->code) +
                " - " + err->msg);
        delete err;
      }
    }
  }

  static Status Create(
      const BackendArgs& args, std::shared_ptr<TRITONBACKEND_Backend> backend,
      std::unique_ptr<Backend>* out)
  {
    std::unique_ptr<LibraryBackend> lb(new LibraryBackend());
    lb->model_.reset(new TRITONBACKEND_Model());
    TRITONBACKEND_Model& model = *lb->model_;
    model.name = args.spec->name;
    model.version = static_cast<uint64_t>(args.version);
    model.config = *args.config;
    model.backend = std::move(backend);
    const TRITONBACKEND_Backend& b = *model.backend;
    if (b.ModelInitialize != nullptr) {
      TRITONSERVER_Error* err = b.ModelInitialize(&model);
      if (err != nullptr) {
        return StatusOf(err);  // 'lb' goes: ModelFinalize runs
      }
    }
    Status failed;
    for (const auto& name : args.spec->instance_names) {
      std::unique_ptr<TRITONBACKEND_ModelInstance> instance(
          new TRITONBACKEND_ModelInstance());
      instance->name = name;
      instance->model = &model;
      if (b.ModelInstanceInitialize != nullptr) {
        TRITONSERVER_Error* err = b.ModelInstanceInitialize(instance.get());
        if (err != nullptr) {
          failed = StatusOf(err);
          TC_LOG_ERROR(
              "backend_model.cc", 694,
              "ERROR: Failed to create instance: " + failed.msg());
          lb->FinalizeInstance(instance.get());
          continue;
        }
      }
      lb->instances_.push_back(std::move(instance));
    }
    if (!failed.ok()) {
      return failed;  // 'lb' goes: the other instances, then the model
    }
    *out = std::move(lb);
    return Status();
  }

  bool FromLibrary() const override { return true; }
  std::string LibraryPath() const override { return model_->backend->libpath; }
  void Attach(Model* m) override { model_->loaded = m; }

  void Execute(const std::vector<ExecContext*>&) override
  {
    ContractViolation("test core: a backend library was given ExecContexts");
  }

  void ExecuteRequests(
      size_t index, const std::vector<PendingRequest>& pending) override
  {
    TRITONBACKEND_ModelInstance* instance =
        instances_[index % instances_.size()].get();
    std::vector<TRITONBACKEND_Request*> requests;
    requests.reserve(pending.size());
    for (const auto& p : pending) {
      p.request->state = RequestState::kExecuting;
      requests.push_back(NewBackendRequest(p));
    }
    TRITONSERVER_Error* err = model_->backend->ModelInstanceExecute(
        instance, requests.data(), static_cast<uint32_t>(requests.size()));
    if (err == nullptr) {
      return;  // the backend owns the requests now
    }
    // The requests stay Triton's: each gets the error as its FINAL response
    // and is released.
    const Status status = StatusOf(err);
    for (TRITONBACKEND_Request* br : requests) {
      if (!Disown(g_requests, br)) {
        ContractViolation(
            "TRITONBACKEND_ModelInstanceExecute returned an error after the "
            "backend released one of its requests");
      }
      TRITONBACKEND_Response* resp = NewBackendResponse(br->target);
      Disown(g_responses, resp);
      SendBackendResponse(
          resp, TRITONSERVER_RESPONSE_COMPLETE_FINAL, status,
          "TRITONBACKEND_ModelInstanceExecute");
      CountFailure(*br->r);
      ReleaseBackendRequest(br);
    }
  }

 private:
  LibraryBackend() = default;

  void FinalizeInstance(TRITONBACKEND_ModelInstance* instance)
  {
    if (model_->backend->ModelInstanceFinalize == nullptr) return;
    TRITONSERVER_Error* err = model_->backend->ModelInstanceFinalize(instance);
    if (err != nullptr) {
      TC_LOG_ERROR(
          "backend_model_instance.cc", 214,
          std::string("failed finalizing model instance: ") +
              CodeString(err->code) + " - " + err->msg);
      delete err;
    }
  }

  std::unique_ptr<TRITONBACKEND_Model> model_;
  std::vector<std::unique_ptr<TRITONBACKEND_ModelInstance>> instances_;
};

}  // namespace

std::shared_ptr<LibraryBackendManager>
AcquireBackendManager()
{
  std::lock_guard<std::mutex> lk(g_manager_mu);
  std::shared_ptr<LibraryBackendManager> manager = g_manager.lock();
  if (!manager) {
    manager = std::make_shared<LibraryBackendManager>();
    g_manager = manager;
  }
  return manager;
}

Status
CreateLibraryBackend(const BackendArgs& args, std::unique_ptr<Backend>* out)
{
  std::shared_ptr<ServerCore> core = args.server.lock();
  if (!core) {
    return Err(TRITONSERVER_ERROR_INTERNAL, "test core: the server is gone");
  }
  std::string libdir, libpath;
  TC_RETURN_IF_ERROR(FindLibrary(args, core->opts.backend_dir, &libdir, &libpath));
  std::shared_ptr<TRITONBACKEND_Backend> backend;
  TC_RETURN_IF_ERROR(OpenBackend(
      *core->backend_manager, args.spec->backend, libdir, libpath, &backend));
  return LibraryBackend::Create(args, std::move(backend), out);
}

}  // namespace tc

// ---------------------------------------------------------------------------
// C API: the backend API
// ---------------------------------------------------------------------------
using tc::NullArg;

namespace {

TRITONSERVER_Error*
OutOfBounds(
    const std::string& prefix, uint32_t index, size_t count, const char* what)
{
  return tc::NewError(
      TRITONSERVER_ERROR_INVALID_ARG,
      prefix + "out of bounds index " + std::to_string(index) +
          ": request has " + std::to_string(count) + " " + what);
}

// Triton's InferenceResponse::Output::Reshape: an output whose
// configuration has a reshape is reported with the configured dims.
void
ApplyReshape(
    const tc::IOSpec& io, bool has_batch_dim, std::vector<int64_t>* shape)
{
  std::deque<int64_t> variable;
  const size_t offset = has_batch_dim ? 1 : 0;
  const int64_t batch = (has_batch_dim && !shape->empty()) ? (*shape)[0] : -1;
  for (size_t i = 0; i < io.reshape.size(); ++i) {
    if (io.reshape[i] == -1 && i + offset < shape->size()) {
      variable.push_back((*shape)[i + offset]);
    }
  }
  std::vector<int64_t> out;
  if (batch >= 0) out.push_back(batch);
  for (int64_t d : io.dims) {
    if (d == -1 && !variable.empty()) {
      out.push_back(variable.front());
      variable.pop_front();
    } else {
      out.push_back(d);
    }
  }
  *shape = std::move(out);
}

}  // namespace

extern "C" {

TRITONSERVER_Error*
TRITONBACKEND_ApiVersion(uint32_t* major, uint32_t* minor)
{
  if (major == nullptr) return NullArg("major");
  if (minor == nullptr) return NullArg("minor");
  // What r25.07 reports (TRITONBACKEND_API_VERSION_MINOR there).
  *major = 1;
  *minor = 19;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_BackendName(TRITONBACKEND_Backend* backend, const char** name)
{
  if (backend == nullptr) return NullArg("backend");
  if (name == nullptr) return NullArg("name");
  *name = backend->name.c_str();
  return nullptr;
}

// ---- model ----
TRITONSERVER_Error*
TRITONBACKEND_ModelName(TRITONBACKEND_Model* model, const char** name)
{
  if (model == nullptr) return NullArg("model");
  if (name == nullptr) return NullArg("name");
  *name = model->name.c_str();
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelVersion(TRITONBACKEND_Model* model, uint64_t* version)
{
  if (model == nullptr) return NullArg("model");
  if (version == nullptr) return NullArg("version");
  *version = model->version;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelConfig(
    TRITONBACKEND_Model* model, const uint32_t config_version,
    TRITONSERVER_Message** model_config)
{
  if (model == nullptr) return NullArg("model");
  if (model_config == nullptr) return NullArg("model_config");
  if (config_version != 1) {
    return tc::NewError(
        TRITONSERVER_ERROR_INVALID_ARG,
        "model configuration version " + std::to_string(config_version) +
            " not supported, supported versions are: 1");
  }
  *model_config =
      new TRITONSERVER_Message{tc::ConfigToJson(model->config).Serialize()};
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelSetState(TRITONBACKEND_Model* model, void* state)
{
  if (model == nullptr) return NullArg("model");
  model->state = state;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelState(TRITONBACKEND_Model* model, void** state)
{
  if (model == nullptr) return NullArg("model");
  if (state == nullptr) return NullArg("state");
  *state = model->state;
  return nullptr;
}

// ---- model instance ----
TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceModel(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Model** model)
{
  if (instance == nullptr) return NullArg("instance");
  if (model == nullptr) return NullArg("model");
  *model = instance->model;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceName(
    TRITONBACKEND_ModelInstance* instance, const char** name)
{
  if (instance == nullptr) return NullArg("instance");
  if (name == nullptr) return NullArg("name");
  *name = instance->name.c_str();
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceSetState(
    TRITONBACKEND_ModelInstance* instance, void* state)
{
  if (instance == nullptr) return NullArg("instance");
  instance->state = state;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceState(
    TRITONBACKEND_ModelInstance* instance, void** state)
{
  if (instance == nullptr) return NullArg("instance");
  if (state == nullptr) return NullArg("state");
  *state = instance->state;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceReportStatistics(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request* request,
    const bool success, const uint64_t exec_start_ns,
    const uint64_t compute_start_ns, const uint64_t compute_end_ns,
    const uint64_t exec_end_ns)
{
  if (instance == nullptr) return NullArg("instance");
  if (request == nullptr) return NullArg("request");
  tc::RequireRequest(request, __func__);
  // Triton reads the four timestamps as compute start, input end, output
  // start and compute end of the request (InferenceRequest::
  // ReportStatistics), traced whether or not the request succeeded.
  if (request->trace != nullptr) {
    tc::TraceReport(request->trace, TRITONSERVER_TRACE_COMPUTE_START, exec_start_ns);
    tc::TraceReport(
        request->trace, TRITONSERVER_TRACE_COMPUTE_INPUT_END, compute_start_ns);
    tc::TraceReport(
        request->trace, TRITONSERVER_TRACE_COMPUTE_OUTPUT_START, compute_end_ns);
    tc::TraceReport(request->trace, TRITONSERVER_TRACE_COMPUTE_END, exec_end_ns);
  }
  const TRITONSERVER_InferenceRequest& r = *request->r;
  if (!success) {
    tc::CountFailure(r);
    return nullptr;
  }
  tc::Model& m = *r.model;
  const uint64_t end = tc::NowNs();
  const uint64_t batch = static_cast<uint64_t>(std::max<int64_t>(1, r.batch_size));
  const uint64_t request_ns = end - r.request_start_ns;
  const uint64_t queue_ns = exec_start_ns - request->enqueue_ns;
  const uint64_t input_ns = compute_start_ns - exec_start_ns;
  const uint64_t infer_ns = compute_end_ns - compute_start_ns;
  const uint64_t output_ns = exec_end_ns - compute_end_ns;
  {
    std::lock_guard<std::mutex> lk(m.stats.mu);
    m.stats.inference_count += batch;
    m.stats.success.Add(request_ns);
    m.stats.queue.Add(queue_ns);
    m.stats.compute_input.Add(input_ns);
    m.stats.compute_infer.Add(infer_ns);
    m.stats.compute_output.Add(output_ns);
  }
  if (m.metrics) {
    tc::MetricReporter& mr = *m.metrics;
    mr.success++;
    mr.count += batch;
    mr.request_us += request_ns / 1000;
    mr.queue_us += queue_ns / 1000;
    mr.compute_input_us += input_ns / 1000;
    mr.compute_infer_us += infer_ns / 1000;
    mr.compute_output_us += output_ns / 1000;
  }
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceReportBatchStatistics(
    TRITONBACKEND_ModelInstance* instance, const uint64_t batch_size,
    const uint64_t exec_start_ns, const uint64_t compute_start_ns,
    const uint64_t compute_end_ns, const uint64_t exec_end_ns)
{
  if (instance == nullptr) return NullArg("instance");
  tc::Model* m = instance->model->loaded;
  if (m == nullptr) {
    return nullptr;  // not loaded yet: nothing to count into
  }
  const uint64_t now_ms = tc::NowSinceEpochMs();
  {
    std::lock_guard<std::mutex> lk(m->stats.mu);
    if (now_ms > m->stats.last_inference_ms) {
      m->stats.last_inference_ms = now_ms;
    }
    m->stats.execution_count++;
    tc::BatchStat& bs = m->stats.batch[batch_size];
    bs.count++;
    bs.input_ns += compute_start_ns - exec_start_ns;
    bs.infer_ns += compute_end_ns - compute_start_ns;
    bs.output_ns += exec_end_ns - compute_end_ns;
  }
  if (m->metrics) {
    m->metrics->exec++;
  }
  return nullptr;
}

// ---- request ----
TRITONSERVER_Error*
TRITONBACKEND_RequestId(TRITONBACKEND_Request* request, const char** id)
{
  if (request == nullptr) return NullArg("request");
  if (id == nullptr) return NullArg("id");
  tc::RequireRequest(request, __func__);
  *id = request->r->id.c_str();
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestCorrelationId(TRITONBACKEND_Request* request, uint64_t* id)
{
  if (request == nullptr) return NullArg("request");
  if (id == nullptr) return NullArg("id");
  tc::RequireRequest(request, __func__);
  if (request->r->corr_is_string) {
    return tc::NewError(
        TRITONSERVER_ERROR_INVALID_ARG,
        request->r->LogRequest() +
            "correlation ID in request is not an unsigned int");
  }
  *id = request->r->corr_u;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestInputCount(TRITONBACKEND_Request* request, uint32_t* count)
{
  if (request == nullptr) return NullArg("request");
  if (count == nullptr) return NullArg("count");
  tc::RequireRequest(request, __func__);
  *count = static_cast<uint32_t>(request->inputs.size());
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestInputByIndex(
    TRITONBACKEND_Request* request, const uint32_t index,
    TRITONBACKEND_Input** input)
{
  if (request == nullptr) return NullArg("request");
  if (input == nullptr) return NullArg("input");
  tc::RequireRequest(request, __func__);
  if (index >= request->inputs.size()) {
    return OutOfBounds(
        request->r->LogRequest(), index, request->inputs.size(), "inputs");
  }
  *input = &request->inputs[index];
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_InputProperties(
    TRITONBACKEND_Input* input, const char** name,
    TRITONSERVER_DataType* datatype, const int64_t** shape,
    uint32_t* dims_count, uint64_t* byte_size, uint32_t* buffer_count)
{
  if (input == nullptr) return NullArg("input");
  const tc::RequestInput& in = *input->in;
  if (name != nullptr) *name = in.name.c_str();
  if (datatype != nullptr) *datatype = in.dtype;
  if (shape != nullptr) *shape = in.backend_shape.data();
  if (dims_count != nullptr) {
    *dims_count = static_cast<uint32_t>(in.backend_shape.size());
  }
  if (byte_size != nullptr) *byte_size = in.total;
  if (buffer_count != nullptr) {
    *buffer_count = static_cast<uint32_t>(in.chunks.size());
  }
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_InputBuffer(
    TRITONBACKEND_Input* input, const uint32_t index, const void** buffer,
    uint64_t* buffer_byte_size, TRITONSERVER_MemoryType* memory_type,
    int64_t* memory_type_id)
{
  if (input == nullptr) return NullArg("input");
  if (buffer == nullptr) return NullArg("buffer");
  if (buffer_byte_size == nullptr) return NullArg("buffer_byte_size");
  if (memory_type == nullptr) return NullArg("memory_type");
  if (memory_type_id == nullptr) return NullArg("memory_type_id");
  const tc::RequestInput& in = *input->in;
  if (index >= in.chunks.size()) {
    // Triton answers a buffer past the last with success and no data.
    *buffer = nullptr;
    *buffer_byte_size = 0;
    *memory_type = TRITONSERVER_MEMORY_CPU;
    *memory_type_id = 0;
    return nullptr;
  }
  const tc::InputChunk& c = in.chunks[index];
  *buffer = c.base;
  *buffer_byte_size = c.size;
  *memory_type = c.mtype;
  *memory_type_id = c.mid;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestOutputCount(TRITONBACKEND_Request* request, uint32_t* count)
{
  if (request == nullptr) return NullArg("request");
  if (count == nullptr) return NullArg("count");
  tc::RequireRequest(request, __func__);
  *count = static_cast<uint32_t>(request->outputs.size());
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestOutputName(
    TRITONBACKEND_Request* request, const uint32_t index,
    const char** output_name)
{
  if (request == nullptr) return NullArg("request");
  if (output_name == nullptr) return NullArg("output_name");
  tc::RequireRequest(request, __func__);
  *output_name = nullptr;
  if (index >= request->outputs.size()) {
    return OutOfBounds(
        request->r->LogRequest(), index, request->outputs.size(),
        "requested outputs");
  }
  *output_name = request->outputs[index].c_str();
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestParameterCount(
    TRITONBACKEND_Request* request, uint32_t* count)
{
  if (request == nullptr) return NullArg("request");
  if (count == nullptr) return NullArg("count");
  tc::RequireRequest(request, __func__);
  *count = static_cast<uint32_t>(request->r->params.size());
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestParameter(
    TRITONBACKEND_Request* request, const uint32_t index, const char** key,
    TRITONSERVER_ParameterType* type, const void** vvalue)
{
  if (request == nullptr) return NullArg("request");
  if (key == nullptr) return NullArg("key");
  if (type == nullptr) return NullArg("type");
  if (vvalue == nullptr) return NullArg("vvalue");
  tc::RequireRequest(request, __func__);
  const auto& params = request->r->params;
  if (index >= params.size()) {
    return OutOfBounds("", index, params.size(), "parameters");
  }
  // STRING: the characters; INT: an int64_t; BOOL: a bool; DOUBLE: a
  // double; BYTES: the bytes themselves.
  *key = params[index].name.c_str();
  *type = params[index].type;
  *vvalue = params[index].ValuePointer();
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestIsCancelled(TRITONBACKEND_Request* request, bool* is_cancelled)
{
  if (request == nullptr) return NullArg("request");
  if (is_cancelled == nullptr) return NullArg("is_cancelled");
  tc::RequireRequest(request, __func__);
  *is_cancelled = request->target->shared->cancelled.load();
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestRelease(TRITONBACKEND_Request* request, uint32_t release_flags)
{
  if (request == nullptr) return NullArg("request");
  if (release_flags != TRITONSERVER_REQUEST_RELEASE_ALL) {
    // The request stays the backend's, as after any failed release.
    return tc::NewError(
        TRITONSERVER_ERROR_UNSUPPORTED,
        "test core: TRITONBACKEND_RequestRelease supports only "
        "TRITONSERVER_REQUEST_RELEASE_ALL, got flags " +
            std::to_string(release_flags));
  }
  if (!tc::Disown(tc::g_requests, request)) {
    tc::ContractViolation(
        "TRITONBACKEND_RequestRelease of a request the backend does not own "
        "(released already, or never given to it)");
  }
  tc::ReleaseBackendRequest(request);
  return nullptr;
}

// ---- responses ----
TRITONSERVER_Error*
TRITONBACKEND_ResponseNew(
    TRITONBACKEND_Response** response, TRITONBACKEND_Request* request)
{
  if (response == nullptr) return NullArg("response");
  *response = nullptr;
  if (request == nullptr) return NullArg("request");
  tc::RequireRequest(request, __func__);
  *response = tc::NewBackendResponse(request->target);
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseOutput(
    TRITONBACKEND_Response* response, TRITONBACKEND_Output** output,
    const char* name, const TRITONSERVER_DataType datatype,
    const int64_t* shape, const uint32_t dims_count)
{
  if (response == nullptr) {
    return tc::NewError(TRITONSERVER_ERROR_INVALID_ARG, "response was nullptr");
  }
  if (output == nullptr) return NullArg("output");
  *output = nullptr;
  if (name == nullptr) return NullArg("name");
  if (shape == nullptr && dims_count > 0) return NullArg("shape");
  tc::RequireResponse(response, __func__);
  // Like Triton, the output is added before its name is checked.
  response->outputs.emplace_back();
  response->outputs.back().owner = response;
  tc::ResponseOutput& o = response->outputs.back().out;
  o.name = name;
  o.dtype = datatype;
  o.shape.assign(shape, shape + dims_count);
  const tc::Model& m = *response->target->model;
  const tc::IOSpec* io = m.spec.Output(o.name);
  if (io == nullptr) {
    return tc::NewError(
        TRITONSERVER_ERROR_INVALID_ARG, "unexpected inference output '" +
                                            o.name + "' for model '" + m.name +
                                            "'");
  }
  if (io->has_reshape) {
    ApplyReshape(*io, m.spec.max_batch_size > 0, &o.shape);
  }
  *output = &response->outputs.back();
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_OutputBuffer(
    TRITONBACKEND_Output* output, void** buffer,
    const uint64_t buffer_byte_size, TRITONSERVER_MemoryType* memory_type,
    int64_t* memory_type_id)
{
  if (output == nullptr) return NullArg("output");
  if (buffer == nullptr) return NullArg("buffer");
  if (memory_type == nullptr) return NullArg("memory_type");
  if (memory_type_id == nullptr) return NullArg("memory_type_id");
  tc::ResponseOutput& o = output->out;
  if (o.base != nullptr) {
    *buffer = nullptr;
    return tc::NewError(
        TRITONSERVER_ERROR_ALREADY_EXISTS,
        "allocated buffer for output '" + o.name + "' already exists");
  }
  // The request's allocator is asked for what the backend prefers, a
  // zero-byte buffer too; the memory type and id it gives are passed back.
  const tc::ResponseTarget& target = *output->owner->target;
  auto* alloc = const_cast<TRITONSERVER_ResponseAllocator*>(target.allocator);
  TRITONSERVER_MemoryType actual_type = *memory_type;
  int64_t actual_id = *memory_type_id;
  void* userp = nullptr;
  TRITONSERVER_Error* err = alloc->alloc_fn(
      alloc, o.name.c_str(), buffer_byte_size, *memory_type, *memory_type_id,
      target.alloc_userp, buffer, &userp, &actual_type, &actual_id);
  if (err != nullptr) {
    *buffer = nullptr;
    return err;
  }
  o.base = *buffer;
  o.userp = userp;
  o.byte_size = buffer_byte_size;
  o.mtype = actual_type;
  o.mid = actual_id;
  *memory_type = actual_type;
  *memory_type_id = actual_id;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseSend(
    TRITONBACKEND_Response* response, const uint32_t send_flags,
    TRITONSERVER_Error* error)
{
  if (response == nullptr) {
    return tc::NewError(TRITONSERVER_ERROR_INVALID_ARG, "response was nullptr");
  }
  if (!tc::Disown(tc::g_responses, response)) {
    tc::ContractViolation(
        "TRITONBACKEND_ResponseSend of a response that was sent or deleted "
        "(or never created)");
  }
  // The response is Triton's from here; 'error' stays the caller's.
  tc::SendBackendResponse(
      response, send_flags,
      error == nullptr ? tc::Status() : tc::Status(error->code, error->msg),
      __func__);
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseDelete(TRITONBACKEND_Response* response)
{
  if (response == nullptr) return NullArg("response");
  if (!tc::Disown(tc::g_responses, response)) {
    tc::ContractViolation(
        "TRITONBACKEND_ResponseDelete of a response that was sent or deleted "
        "(or never created)");
  }
  tc::FreeOutputBuffers(response);
  delete response->response;
  delete response;
  return nullptr;
}

// ---- response factories ----
TRITONSERVER_Error*
TRITONBACKEND_ResponseFactoryNew(
    TRITONBACKEND_ResponseFactory** factory, TRITONBACKEND_Request* request)
{
  if (factory == nullptr) return NullArg("factory");
  if (request == nullptr) return NullArg("request");
  tc::RequireRequest(request, __func__);
  auto* f = new TRITONBACKEND_ResponseFactory{request->target};
  tc::Own(tc::g_factories, f);
  *factory = f;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseFactoryDelete(TRITONBACKEND_ResponseFactory* factory)
{
  if (factory == nullptr) return NullArg("factory");
  if (!tc::Disown(tc::g_factories, factory)) {
    tc::ContractViolation(
        "TRITONBACKEND_ResponseFactoryDelete of a response factory that was "
        "deleted (or never created)");
  }
  delete factory;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseNewFromFactory(
    TRITONBACKEND_Response** response, TRITONBACKEND_ResponseFactory* factory)
{
  if (response == nullptr) return NullArg("response");
  *response = nullptr;
  if (factory == nullptr) return NullArg("factory");
  tc::RequireFactory(factory, __func__);
  *response = tc::NewBackendResponse(factory->target);
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseFactorySendFlags(
    TRITONBACKEND_ResponseFactory* factory, const uint32_t send_flags)
{
  if (factory == nullptr) return NullArg("factory");
  tc::RequireFactory(factory, __func__);
  tc::Deliver(factory->target, nullptr, send_flags, __func__);
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseFactoryIsCancelled(
    TRITONBACKEND_ResponseFactory* factory, bool* is_cancelled)
{
  if (factory == nullptr) return NullArg("factory");
  if (is_cancelled == nullptr) return NullArg("is_cancelled");
  tc::RequireFactory(factory, __func__);
  *is_cancelled = factory->target->shared->cancelled.load();
  return nullptr;
}

}  // extern "C"
