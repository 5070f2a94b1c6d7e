// Test core: backends in shared libraries, reached through Triton's backend
// API (TRITONBACKEND_*), as bound models use it.
//
// Follows Triton r25.07 (backend_model.cc, backend_manager.cc,
// backend_model_instance.cc):
// - the library is the config's `runtime`, else libtriton_<backend>.so,
//   searched in <model>/<version>, <model>, <backend dir>/<backend>; a path
//   that leaves the directory it was found in (after resolving links) is
//   refused; it is opened once per path and kept, with its
//   TRITONBACKEND_Initialize called once, until every server is gone
//   (Triton's backend manager), when TRITONBACKEND_Finalize runs;
// - ModelInitialize when a version loads, then ModelInstanceInitialize per
//   instance of the instance groups; finalizers in reverse when it unloads;
// - ModelInstanceExecute gets the batch; on an error return the core answers
//   every request with it (a BACKEND failure) and releases them, on success
//   the backend owns them: it answers (any thread, any time) and releases
//   them, and reports their statistics;
// - ResponseSend takes the response, never the error; inputs are listed in
//   name order; a request that asked for no output lists every output.
#include <dlfcn.h>

#include <deque>
#include <filesystem>
#include <type_traits>

#include "native/backend_api.h"
#include "server.h"

extern "C" {
#define TC_DECLARE_BACKEND_API(ret, name, params) \
  TC_EXPORT ret TRITONBACKEND_##name params;
TRITON_BACKEND_API_FUNCTIONS(TC_DECLARE_BACKEND_API)
#undef TC_DECLARE_BACKEND_API
}

// Each definition has the project's declared signature.
#define TC_CHECK_BACKEND_SIGNATURE(ret, name, params)                         \
  static_assert(                                                            \
      std::is_same_v<decltype(&TRITONBACKEND_##name), TritonBackendFn_##name>, \
      "TRITONBACKEND_" #name " does not match native/backend_api.h");
TRITON_BACKEND_API_FUNCTIONS(TC_CHECK_BACKEND_SIGNATURE)
#undef TC_CHECK_BACKEND_SIGNATURE

namespace fs = std::filesystem;

namespace tc {
namespace {

#define TC_ENTRY_POINT_TYPE(name, params) \
  using EntryFn_##name = TRITONSERVER_Error*(*)params;
TRITON_BACKEND_ENTRY_POINTS(TC_ENTRY_POINT_TYPE)
#undef TC_ENTRY_POINT_TYPE

}  // namespace
}  // namespace tc

struct TRITONBACKEND_Backend {
  std::string name;
  std::string libpath;
  void* handle = nullptr;
#define TC_ENTRY_POINT_FIELD(name, params) tc::EntryFn_##name name = nullptr;
  TRITON_BACKEND_ENTRY_POINTS(TC_ENTRY_POINT_FIELD)
#undef TC_ENTRY_POINT_FIELD
  ~TRITONBACKEND_Backend()
  {
    if (Finalize != nullptr) {
      if (TRITONSERVER_Error* err = Finalize(this)) {
        TC_LOG_ERROR(
            "backend_manager.cc", 161, "failed finalizing backend: " + err->msg);
        delete err;
      }
    }
    // Like Triton, the library stays open.
  }
};

struct TRITONBACKEND_Model {
  std::shared_ptr<TRITONBACKEND_Backend> backend;
  std::string name;
  int64_t version = 0;
  std::string config_json;
  void* state = nullptr;
};

struct TRITONBACKEND_ModelInstance {
  TRITONBACKEND_Model* model = nullptr;
  std::string name;
  void* state = nullptr;
  // The model version being run (set by each execution; weak: the model
  // owns its instances).
  std::weak_ptr<tc::Model> running;
};

struct TRITONBACKEND_Input {
  const tc::RequestInput* input = nullptr;
};

struct TRITONBACKEND_Request {
  TRITONSERVER_InferenceRequest* request = nullptr;
  std::shared_ptr<tc::ExecContext> ctx;
  std::vector<TRITONBACKEND_Input> inputs;  // in name order
  std::vector<TRITONSERVER_Parameter> params;
  uint64_t request_start_ns = 0, queue_start_ns = 0;
  int64_t batch_size = 1;
};

struct TRITONBACKEND_Output {
  tc::OutTensor tensor;
};

struct TRITONBACKEND_Response {
  std::shared_ptr<tc::ExecContext> ctx;
  std::deque<TRITONBACKEND_Output> outputs;  // stable addresses
};

struct TRITONBACKEND_ResponseFactory {
  std::shared_ptr<tc::ExecContext> ctx;
};

namespace tc {
namespace {

// Triton's backend manager: one per process while a server lives.
struct BackendManager {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<TRITONBACKEND_Backend>> backends;
};
std::mutex g_manager_mu;
std::weak_ptr<BackendManager> g_manager;

std::shared_ptr<BackendManager>
AcquireManager()
{
  std::lock_guard<std::mutex> lk(g_manager_mu);
  std::shared_ptr<BackendManager> manager = g_manager.lock();
  if (!manager) {
    manager = std::make_shared<BackendManager>();
    g_manager = manager;
  }
  return manager;
}

bool
IsFile(const std::string& path)
{
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// Where the library is: the first of the three directories holding it.
Status
FindLibrary(
    const BackendArgs& args, const std::string& backend_dir,
    std::string* libpath)
{
  const ModelSpec& spec = *args.spec;
  const std::string runtime = args.config->Str("runtime");
  const std::string libname =
      runtime.empty() ? "libtriton_" + spec.backend + ".so" : runtime;
  const std::vector<std::string> dirs = {
      args.model_path + "/" + std::to_string(args.version), args.model_path,
      backend_dir + "/" + spec.backend};
  for (const std::string& dir : dirs) {
    const std::string path = dir + "/" + libname;
    if (!IsFile(path)) {
      continue;
    }
    std::error_code ec;
    const std::string real_dir = fs::canonical(dir, ec).string();
    const std::string real_path = fs::weakly_canonical(path, ec).string();
    if (real_path.compare(0, real_dir.size() + 1, real_dir + "/") != 0) {
      return Err(
          TRITONSERVER_ERROR_INVALID_ARG,
          "backend library name '" + libname + "' escapes backend directory '" +
              dir + "', for model '" + spec.name +
              "', check model config runtime field");
    }
    *libpath = path;
    return Status();
  }
  if (runtime.empty()) {
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        "unable to find backend library for backend '" + spec.backend +
            "', try specifying runtime on the model configuration.");
  }
  std::string searched;
  for (const std::string& dir : dirs) {
    searched += "'" + dir + "' ";
  }
  return Err(
      TRITONSERVER_ERROR_INVALID_ARG, "unable to find backend library '" +
                                          libname + "' for model '" +
                                          spec.name + "', searched: " + searched);
}

Status
OpenBackend(
    BackendManager& manager, const std::string& name,
    const std::string& libpath, std::shared_ptr<TRITONBACKEND_Backend>* out)
{
  std::lock_guard<std::mutex> lk(manager.mu);
  auto found = manager.backends.find(libpath);
  if (found != manager.backends.end()) {
    *out = found->second;
    return Status();
  }
  dlerror();
  void* handle = dlopen(libpath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    return Err(
        TRITONSERVER_ERROR_NOT_FOUND,
        std::string("unable to load shared library: ") +
            (reason ? reason : "unknown reason"));
  }
  auto backend = std::make_shared<TRITONBACKEND_Backend>();
  backend->name = name;
  backend->libpath = libpath;
  backend->handle = handle;
#define TC_RESOLVE_ENTRY_POINT(fn, params) \
  backend->fn = reinterpret_cast<EntryFn_##fn>(dlsym(handle, "TRITONBACKEND_" #fn));
  TRITON_BACKEND_ENTRY_POINTS(TC_RESOLVE_ENTRY_POINT)
#undef TC_RESOLVE_ENTRY_POINT
  if (backend->ModelInstanceExecute == nullptr) {
    backend->Finalize = nullptr;  // never initialized
    return Err(
        TRITONSERVER_ERROR_NOT_FOUND,
        "unable to find required entrypoint 'TRITONBACKEND_ModelInstanceExecute' "
        "in backend library: " + libpath);
  }
  if (backend->Initialize != nullptr) {
    if (TRITONSERVER_Error* err = backend->Initialize(backend.get())) {
      Status status(err->code, err->msg);
      delete err;
      backend->Finalize = nullptr;
      return status;
    }
  }
  manager.backends[libpath] = backend;
  *out = backend;
  return Status();
}

Status
FromError(TRITONSERVER_Error* err)
{
  Status status(err->code, err->msg);
  delete err;
  return status;
}

class LibraryBackend : public Backend {
 public:
  ~LibraryBackend() override
  {
    for (auto it = instances_.rbegin(); it != instances_.rend(); ++it) {
      if (lib()->ModelInstanceFinalize != nullptr) {
        if (TRITONSERVER_Error* err = lib()->ModelInstanceFinalize(it->get())) {
          TC_LOG_ERROR(
              "backend_model_instance.cc", 0,
              "failed finalizing model instance: " + err->msg);
          delete err;
        }
      }
    }
    instances_.clear();
    if (model_initialized_ && lib()->ModelFinalize != nullptr) {
      if (TRITONSERVER_Error* err = lib()->ModelFinalize(&model_)) {
        TC_LOG_ERROR("backend_model.cc", 0, "failed finalizing model: " + err->msg);
        delete err;
      }
    }
  }

  Status Init(
      const BackendArgs& args, std::shared_ptr<BackendManager> manager,
      std::shared_ptr<TRITONBACKEND_Backend> backend)
  {
    manager_ = std::move(manager);
    model_.backend = std::move(backend);
    model_.name = args.spec->name;
    model_.version = args.version;
    model_.config_json = ConfigToJson(*args.config).Serialize();
    if (lib()->ModelInitialize != nullptr) {
      if (TRITONSERVER_Error* err = lib()->ModelInitialize(&model_)) {
        return FromError(err);
      }
    }
    model_initialized_ = true;
    std::vector<std::string> names = args.spec->instance_names;
    if (names.empty()) {
      names.push_back(args.spec->name + "_0_0");
    }
    for (const std::string& name : names) {
      auto instance = std::make_unique<TRITONBACKEND_ModelInstance>();
      instance->model = &model_;
      instance->name = name;
      if (lib()->ModelInstanceInitialize != nullptr) {
        if (TRITONSERVER_Error* err =
                lib()->ModelInstanceInitialize(instance.get())) {
          return FromError(err);  // the destructor finalizes the others
        }
      }
      instances_.push_back(std::move(instance));
      free_.push_back(instances_.size() - 1);
    }
    return Status();
  }

  bool OwnsRequests() const override { return true; }

  void Execute(const std::vector<ExecContext*>&) override {}

  void ExecuteOwned(const std::vector<OwnedRequest>& batch) override
  {
    const size_t index = Acquire();
    TRITONBACKEND_ModelInstance* instance = instances_[index].get();
    instance->running = batch.front().ctx->model_;
    std::vector<TRITONBACKEND_Request*> requests;
    for (const OwnedRequest& owned : batch) {
      auto* request = new TRITONBACKEND_Request();
      request->request = owned.request;
      request->ctx = owned.ctx;
      request->request_start_ns = owned.request->request_start_ns;
      request->queue_start_ns = owned.enqueue_ns;
      request->batch_size = std::max<int64_t>(1, owned.request->batch_size);
      request->params = owned.request->params;
      for (const auto& input : owned.request->inputs) {
        request->inputs.push_back(TRITONBACKEND_Input{&input.second});
      }
      requests.push_back(request);
    }
    TRITONSERVER_Error* err = lib()->ModelInstanceExecute(
        instance, requests.data(), static_cast<uint32_t>(requests.size()));
    if (err != nullptr) {
      // The requests stay the core's: each gets the error and is released.
      const Status status(err->code, err->msg);
      delete err;
      for (TRITONBACKEND_Request* request : requests) {
        request->ctx->Send({}, status, TRITONSERVER_RESPONSE_COMPLETE_FINAL);
        ReportFailure(*request);
        ReleaseRequest(request->request);
        delete request;
      }
    }
    Release(index);
  }

  static void ReportFailure(const TRITONBACKEND_Request& request)
  {
    Model& model = *request.ctx->model_;
    {
      std::lock_guard<std::mutex> lk(model.stats.mu);
      model.stats.fail.Add(NowNs() - request.request_start_ns);
    }
    if (model.metrics) {
      model.metrics->failure[kBackend]++;
    }
  }

 private:
  TRITONBACKEND_Backend* lib() const { return model_.backend.get(); }

  size_t Acquire()
  {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return !free_.empty(); });
    const size_t index = free_.back();
    free_.pop_back();
    return index;
  }
  void Release(size_t index)
  {
    {
      std::lock_guard<std::mutex> lk(mu_);
      free_.push_back(index);
    }
    cv_.notify_one();
  }

  std::shared_ptr<BackendManager> manager_;
  TRITONBACKEND_Model model_;
  bool model_initialized_ = false;
  std::vector<std::unique_ptr<TRITONBACKEND_ModelInstance>> instances_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<size_t> free_;
};

TRITONSERVER_Error*
InvalidArg(const std::string& message)
{
  return NewError(TRITONSERVER_ERROR_INVALID_ARG, message);
}

}  // namespace

Status
CreateLibraryBackend(const BackendArgs& args, std::unique_ptr<Backend>* out)
{
  std::string backend_dir = "/opt/tritonserver/backends";
  if (auto server = args.server.lock()) {
    backend_dir = server->opts.backend_dir;
  }
  std::string libpath;
  TC_RETURN_IF_ERROR(FindLibrary(args, backend_dir, &libpath));
  std::shared_ptr<BackendManager> manager = AcquireManager();
  std::shared_ptr<TRITONBACKEND_Backend> backend;
  TC_RETURN_IF_ERROR(OpenBackend(*manager, args.spec->backend, libpath, &backend));
  auto created = std::make_unique<LibraryBackend>();
  TC_RETURN_IF_ERROR(created->Init(args, manager, backend));
  *out = std::move(created);
  return Status();
}

std::shared_ptr<void>
HoldBackendManager()
{
  return AcquireManager();
}

}  // namespace tc

// ---------------------------------------------------------------------------
// The API backends call.
// ---------------------------------------------------------------------------
using tc::InvalidArg;

#define TC_REQUIRE(pointer) \
  if ((pointer) == nullptr) return InvalidArg(#pointer " was nullptr")

extern "C" {

TRITONSERVER_Error*
TRITONBACKEND_ApiVersion(uint32_t* major, uint32_t* minor)
{
  TC_REQUIRE(major);
  TC_REQUIRE(minor);
  // Triton r25.07's backend API.
  *major = 1;
  *minor = 19;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_BackendName(TRITONBACKEND_Backend* backend, const char** name)
{
  TC_REQUIRE(backend);
  TC_REQUIRE(name);
  *name = backend->name.c_str();
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelName(TRITONBACKEND_Model* model, const char** name)
{
  TC_REQUIRE(model);
  TC_REQUIRE(name);
  *name = model->name.c_str();
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelVersion(TRITONBACKEND_Model* model, uint64_t* version)
{
  TC_REQUIRE(model);
  TC_REQUIRE(version);
  *version = static_cast<uint64_t>(model->version);
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelConfig(
    TRITONBACKEND_Model* model, const uint32_t config_version,
    TRITONSERVER_Message** model_config)
{
  TC_REQUIRE(model);
  TC_REQUIRE(model_config);
  if (config_version != 1) {
    return tc::NewError(
        TRITONSERVER_ERROR_UNSUPPORTED,
        "model configuration version " + std::to_string(config_version) +
            " not supported, supported versions are: 1");
  }
  *model_config = new TRITONSERVER_Message{model->config_json};
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelSetState(TRITONBACKEND_Model* model, void* state)
{
  TC_REQUIRE(model);
  model->state = state;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelState(TRITONBACKEND_Model* model, void** state)
{
  TC_REQUIRE(model);
  TC_REQUIRE(state);
  *state = model->state;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceModel(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Model** model)
{
  TC_REQUIRE(instance);
  TC_REQUIRE(model);
  *model = instance->model;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceName(
    TRITONBACKEND_ModelInstance* instance, const char** name)
{
  TC_REQUIRE(instance);
  TC_REQUIRE(name);
  *name = instance->name.c_str();
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceSetState(
    TRITONBACKEND_ModelInstance* instance, void* state)
{
  TC_REQUIRE(instance);
  instance->state = state;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceState(
    TRITONBACKEND_ModelInstance* instance, void** state)
{
  TC_REQUIRE(instance);
  TC_REQUIRE(state);
  *state = instance->state;
  return nullptr;
}

// Triton's UpdateSuccess / UpdateFailure with the backend's timestamps:
// queue up to exec_start, input up to compute_start, infer up to
// compute_end, output up to exec_end.
TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceReportStatistics(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request* request,
    const bool success, const uint64_t exec_start_ns,
    const uint64_t compute_start_ns, const uint64_t compute_end_ns,
    const uint64_t exec_end_ns)
{
  TC_REQUIRE(instance);
  TC_REQUIRE(request);
  tc::Model& model = *request->ctx->model_;
  const uint64_t end_ns = tc::NowNs();
  const uint64_t batch = static_cast<uint64_t>(request->batch_size);
  if (!success) {
    tc::LibraryBackend::ReportFailure(*request);
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lk(model.stats.mu);
    tc::ModelStats& st = model.stats;
    st.success.Add(end_ns - request->request_start_ns);
    st.queue.Add(exec_start_ns - request->queue_start_ns);
    st.compute_input.Add(compute_start_ns - exec_start_ns);
    st.compute_infer.Add(compute_end_ns - compute_start_ns);
    st.compute_output.Add(exec_end_ns - compute_end_ns);
    st.inference_count += batch;
    st.last_inference_ms = tc::NowSinceEpochMs();
  }
  if (model.metrics) {
    tc::MetricReporter& mr = *model.metrics;
    mr.success++;
    mr.count += batch;
    mr.request_us += (end_ns - request->request_start_ns) / 1000;
    mr.queue_us += (exec_start_ns - request->queue_start_ns) / 1000;
    mr.compute_input_us += (compute_start_ns - exec_start_ns) / 1000;
    mr.compute_infer_us += (compute_end_ns - compute_start_ns) / 1000;
    mr.compute_output_us += (exec_end_ns - compute_end_ns) / 1000;
  }
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceReportBatchStatistics(
    TRITONBACKEND_ModelInstance* instance, const uint64_t batch_size,
    const uint64_t exec_start_ns, const uint64_t compute_start_ns,
    const uint64_t compute_end_ns, const uint64_t exec_end_ns)
{
  TC_REQUIRE(instance);
  std::shared_ptr<tc::Model> model = instance->running.lock();
  if (!model) {
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lk(model->stats.mu);
    model->stats.execution_count++;
    tc::BatchStat& bs = model->stats.batch[batch_size];
    bs.count++;
    bs.input_ns += compute_start_ns - exec_start_ns;
    bs.infer_ns += compute_end_ns - compute_start_ns;
    bs.output_ns += exec_end_ns - compute_end_ns;
  }
  if (model->metrics) {
    model->metrics->exec++;
  }
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestId(TRITONBACKEND_Request* request, const char** id)
{
  TC_REQUIRE(request);
  TC_REQUIRE(id);
  *id = request->ctx->id.c_str();
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestCorrelationId(TRITONBACKEND_Request* request, uint64_t* id)
{
  TC_REQUIRE(request);
  TC_REQUIRE(id);
  if (request->ctx->corr_is_string) {
    return InvalidArg(
        "[request id: " +
        (request->ctx->id.empty() ? std::string("<id_unknown>") : request->ctx->id) +
        "] correlation ID in request is not an unsigned int");
  }
  *id = request->ctx->corr_u;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestInputCount(TRITONBACKEND_Request* request, uint32_t* count)
{
  TC_REQUIRE(request);
  TC_REQUIRE(count);
  *count = static_cast<uint32_t>(request->inputs.size());
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestInputByIndex(
    TRITONBACKEND_Request* request, const uint32_t index,
    TRITONBACKEND_Input** input)
{
  TC_REQUIRE(request);
  TC_REQUIRE(input);
  if (index >= request->inputs.size()) {
    return InvalidArg(
        "out of bounds index " + std::to_string(index) + ": request has " +
        std::to_string(request->inputs.size()) + " inputs");
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
  TC_REQUIRE(input);
  const tc::RequestInput& in = *input->input;
  if (name != nullptr) *name = in.name.c_str();
  if (datatype != nullptr) *datatype = in.dtype;
  if (shape != nullptr) *shape = in.shape.data();
  if (dims_count != nullptr) *dims_count = static_cast<uint32_t>(in.shape.size());
  if (byte_size != nullptr) *byte_size = in.total;
  if (buffer_count != nullptr) *buffer_count = static_cast<uint32_t>(in.chunks.size());
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_InputBuffer(
    TRITONBACKEND_Input* input, const uint32_t index, const void** buffer,
    uint64_t* buffer_byte_size, TRITONSERVER_MemoryType* memory_type,
    int64_t* memory_type_id)
{
  TC_REQUIRE(input);
  TC_REQUIRE(buffer);
  TC_REQUIRE(buffer_byte_size);
  TC_REQUIRE(memory_type);
  TC_REQUIRE(memory_type_id);
  const tc::RequestInput& in = *input->input;
  if (index >= in.chunks.size()) {
    *buffer = nullptr;
    *buffer_byte_size = 0;
    return InvalidArg(
        "input buffer index is out of range: " + std::to_string(index));
  }
  const tc::InputChunk& chunk = in.chunks[index];
  *buffer = chunk.base;
  *buffer_byte_size = chunk.size;
  *memory_type = chunk.mtype;
  *memory_type_id = chunk.mid;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestOutputCount(TRITONBACKEND_Request* request, uint32_t* count)
{
  TC_REQUIRE(request);
  TC_REQUIRE(count);
  *count = static_cast<uint32_t>(request->ctx->outputs_to_send.size());
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestOutputName(
    TRITONBACKEND_Request* request, const uint32_t index,
    const char** output_name)
{
  TC_REQUIRE(request);
  TC_REQUIRE(output_name);
  const auto& outputs = request->ctx->outputs_to_send;
  if (index >= outputs.size()) {
    return InvalidArg(
        "out of bounds index " + std::to_string(index) + ": request has " +
        std::to_string(outputs.size()) + " requested outputs");
  }
  *output_name = outputs[index].c_str();
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestParameterCount(
    TRITONBACKEND_Request* request, uint32_t* count)
{
  TC_REQUIRE(request);
  TC_REQUIRE(count);
  *count = static_cast<uint32_t>(request->params.size());
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestParameter(
    TRITONBACKEND_Request* request, const uint32_t index, const char** key,
    TRITONSERVER_ParameterType* type, const void** vvalue)
{
  TC_REQUIRE(request);
  TC_REQUIRE(key);
  TC_REQUIRE(type);
  TC_REQUIRE(vvalue);
  if (index >= request->params.size()) {
    return InvalidArg(
        "out of bounds index " + std::to_string(index) + ": request has " +
        std::to_string(request->params.size()) + " parameters");
  }
  const TRITONSERVER_Parameter& p = request->params[index];
  *key = p.name.c_str();
  *type = p.type;
  // What Triton's InferenceParameter::ValuePointer gives: the characters of
  // a string, the address of a number or flag, the bytes.
  switch (p.type) {
    case TRITONSERVER_PARAMETER_INT:
      *vvalue = &p.i;
      break;
    case TRITONSERVER_PARAMETER_BOOL:
      *vvalue = &p.b;
      break;
    case TRITONSERVER_PARAMETER_DOUBLE:
      *vvalue = &p.d;
      break;
    case TRITONSERVER_PARAMETER_BYTES:
      *vvalue = p.bytes.data();
      break;
    default:
      *vvalue = p.str.c_str();
      break;
  }
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestIsCancelled(TRITONBACKEND_Request* request, bool* is_cancelled)
{
  TC_REQUIRE(request);
  TC_REQUIRE(is_cancelled);
  *is_cancelled = request->ctx->IsCancelled();
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_RequestRelease(TRITONBACKEND_Request* request, uint32_t release_flags)
{
  TC_REQUIRE(request);
  if ((release_flags & TRITONSERVER_REQUEST_RELEASE_ALL) == 0) {
    return InvalidArg("only TRITONSERVER_REQUEST_RELEASE_ALL is supported");
  }
  tc::ReleaseRequest(request->request);
  delete request;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseNew(
    TRITONBACKEND_Response** response, TRITONBACKEND_Request* request)
{
  TC_REQUIRE(response);
  TC_REQUIRE(request);
  *response = new TRITONBACKEND_Response{request->ctx, {}};
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseOutput(
    TRITONBACKEND_Response* response, TRITONBACKEND_Output** output,
    const char* name, const TRITONSERVER_DataType datatype,
    const int64_t* shape, const uint32_t dims_count)
{
  TC_REQUIRE(response);
  TC_REQUIRE(output);
  TC_REQUIRE(name);
  if (dims_count > 0 && shape == nullptr) return InvalidArg("shape was nullptr");
  TRITONBACKEND_Output& out = response->outputs.emplace_back();
  out.tensor.name = name;
  out.tensor.dtype = datatype;
  out.tensor.shape.assign(shape, shape + dims_count);
  *output = &out;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_OutputBuffer(
    TRITONBACKEND_Output* output, void** buffer, const uint64_t buffer_byte_size,
    TRITONSERVER_MemoryType* memory_type, int64_t* memory_type_id)
{
  TC_REQUIRE(output);
  TC_REQUIRE(buffer);
  TC_REQUIRE(memory_type);
  TC_REQUIRE(memory_type_id);
  // The test core's memory; the response allocator's when it is sent.
  output->tensor.owned.resize(buffer_byte_size);
  *buffer = output->tensor.owned.data();
  *memory_type = TRITONSERVER_MEMORY_CPU;
  *memory_type_id = 0;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseSend(
    TRITONBACKEND_Response* response, const uint32_t send_flags,
    TRITONSERVER_Error* error)
{
  TC_REQUIRE(response);
  std::unique_ptr<TRITONBACKEND_Response> owned(response);
  std::vector<tc::OutTensor> outs;
  if (error == nullptr) {
    for (auto& output : owned->outputs) outs.push_back(std::move(output.tensor));
  }
  owned->ctx->Send(
      std::move(outs),
      error == nullptr ? tc::Status() : tc::Status(error->code, error->msg),
      send_flags);
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseDelete(TRITONBACKEND_Response* response)
{
  TC_REQUIRE(response);
  delete response;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseFactoryNew(
    TRITONBACKEND_ResponseFactory** factory, TRITONBACKEND_Request* request)
{
  TC_REQUIRE(factory);
  TC_REQUIRE(request);
  *factory = new TRITONBACKEND_ResponseFactory{request->ctx};
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseFactoryDelete(TRITONBACKEND_ResponseFactory* factory)
{
  TC_REQUIRE(factory);
  delete factory;
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseNewFromFactory(
    TRITONBACKEND_Response** response, TRITONBACKEND_ResponseFactory* factory)
{
  TC_REQUIRE(response);
  TC_REQUIRE(factory);
  *response = new TRITONBACKEND_Response{factory->ctx, {}};
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseFactorySendFlags(
    TRITONBACKEND_ResponseFactory* factory, const uint32_t send_flags)
{
  TC_REQUIRE(factory);
  factory->ctx->SendFlags(send_flags);
  return nullptr;
}

TRITONSERVER_Error*
TRITONBACKEND_ResponseFactoryIsCancelled(
    TRITONBACKEND_ResponseFactory* factory, bool* is_cancelled)
{
  TC_REQUIRE(factory);
  TC_REQUIRE(is_cancelled);
  *is_cancelled = factory->ctx->IsCancelled();
  return nullptr;
}

}  // extern "C"
