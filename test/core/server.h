// Test core: internal objects behind the C API handles.
//
// Imitates the object model of Triton's in-process server: options,
// server with its model repository manager and model life cycle (model
// versions with READY/LOADING/UNLOADING/UNAVAILABLE states and reasons),
// loaded models with one worker thread per model instance pulling from the
// model's scheduler queue, inference requests and responses with the
// ownership rules of the C API, and per-model statistics and metrics.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <set>
#include <thread>

#include "common.h"
#include "stub.h"
#include "json.h"
#include "model_config.h"

// ---- plain handle types ----
struct TRITONSERVER_Parameter {
  std::string name;
  TRITONSERVER_ParameterType type = TRITONSERVER_PARAMETER_STRING;
  std::string str;     // STRING
  int64_t i = 0;       // INT
  bool b = false;      // BOOL
  double d = 0;        // DOUBLE
  std::vector<char> bytes;  // BYTES
  const void* ValuePointer() const;
};

struct TRITONSERVER_ResponseAllocator {
  TRITONSERVER_ResponseAllocatorAllocFn_t alloc_fn = nullptr;
  TRITONSERVER_ResponseAllocatorReleaseFn_t release_fn = nullptr;
  TRITONSERVER_ResponseAllocatorStartFn_t start_fn = nullptr;
  TRITONSERVER_ResponseAllocatorQueryFn_t query_fn = nullptr;
};

struct TRITONSERVER_Message {
  std::string json;
};

struct TRITONSERVER_Metrics {
  uint64_t pinned_pool_bytes = 0;
  bool cpu_metrics = false;  // metrics and CPU metrics on
  std::string text;  // refreshed by every MetricsFormatted call
};

struct TRITONSERVER_ServerOptions {
  std::string server_id = "triton";
  std::set<std::string> repo_paths;
  TRITONSERVER_ModelControlMode control_mode = TRITONSERVER_MODEL_CONTROL_POLL;
  std::set<std::string> startup_models;
  bool strict_model_config = true;
  std::string model_config_name;
  TRITONSERVER_RateLimitMode rate_limit_mode = TRITONSERVER_RATE_LIMIT_OFF;
  std::map<int, std::map<std::string, size_t>> rate_limit_resources;
  uint64_t pinned_memory_pool_size = 1 << 28;
  std::map<int, uint64_t> cuda_memory_pool_size;
  std::map<std::string, std::string> cache_config;
  std::string cache_dir = "/opt/tritonserver/caches";
  double min_compute_capability = 0;
  bool exit_on_error = true;
  bool strict_readiness = true;
  unsigned int exit_timeout = 30;
  unsigned int buffer_manager_thread_count = 0;
  unsigned int model_load_thread_count = 4;
  // Unset unless the setter is called: then a failed load is retried
  // without end, like Triton's in-process options (TRITON_FACTS.md).
  bool model_load_retry_count_set = false;
  unsigned int model_load_retry_count = 0;
  bool model_namespacing = false;
  bool peer_access = false;
  bool metrics = true;
  bool gpu_metrics = false;
  bool cpu_metrics = true;
  uint64_t metrics_interval_ms = 2000;
  std::map<std::string, std::vector<std::pair<std::string, std::string>>>
      metrics_config;
  std::string backend_dir = "/opt/tritonserver/backends";
  std::string repoagent_dir = "/opt/tritonserver/repoagents";
  std::map<std::string, std::vector<std::pair<std::string, std::string>>>
      backend_config;
  std::map<std::string, std::map<std::string, std::string>> host_policy;
};

namespace tc {

class Model;
class ServerCore;

// ---- statistics (TRITONSERVER_ServerModelStatistics) ----
struct DurStat {
  uint64_t count = 0;
  uint64_t ns = 0;
  void Add(uint64_t n)
  {
    ++count;
    ns += n;
  }
};
struct BatchStat {
  uint64_t count = 0;
  uint64_t input_ns = 0, infer_ns = 0, output_ns = 0;
};
struct ResponseStat {
  DurStat compute_infer, compute_output, success, fail, empty_response, cancel;
};
struct ModelStats {
  std::mutex mu;
  uint64_t last_inference_ms = 0;
  uint64_t inference_count = 0;
  uint64_t execution_count = 0;
  DurStat success, fail, queue, compute_input, compute_infer, compute_output,
      cache_hit, cache_miss;
  std::map<uint64_t, BatchStat> batch;
  std::map<uint64_t, ResponseStat> responses;  // by response index
};

// ---- metrics (process-wide like Triton's registry) ----
enum FailureReason { kRejected = 0, kCanceled = 1, kBackend = 2, kOther = 3 };
struct MetricReporter {
  std::string model;
  int64_t version = 0;
  std::atomic<uint64_t> success{0}, count{0}, exec{0}, request_us{0},
      queue_us{0}, compute_input_us{0}, compute_infer_us{0},
      compute_output_us{0};
  std::atomic<uint64_t> failure[4] = {{0}, {0}, {0}, {0}};
  std::atomic<int64_t> pending{0};
  double load_secs = 0;
  // The identity backend's own custom metric (input_byte_size_counter).
  bool identity_backend = false;
  std::atomic<uint64_t> input_bytes{0};
};
std::shared_ptr<MetricReporter> GetMetricReporter(
    const std::string& model, int64_t version);
std::string SerializeMetrics(uint64_t pinned_pool_bytes, bool cpu_metrics);
// Custom metric families (custom_metrics.cc), after Triton's own.
std::string SerializeCustomMetrics();

// ---- native model implementations ----
struct ExecInput {
  std::string name;
  TRITONSERVER_DataType dtype;
  std::vector<int64_t> shape;
  const char* data = nullptr;
  size_t size = 0;
};
struct OutTensor {
  std::string name;
  TRITONSERVER_DataType dtype;
  std::vector<int64_t> shape;
  std::vector<char> owned;        // data owned by the tensor, or
  const char* ext = nullptr;      // data borrowed from an input
  size_t ext_size = 0;
  const char* data() const { return ext ? ext : owned.data(); }
  size_t size() const { return ext ? ext_size : owned.size(); }
};

class ExecContext;
// A request the scheduler hands to a backend that takes the requests
// themselves (a backend library: see library_backend.cc).
struct PendingRequest {
  TRITONSERVER_InferenceRequest* request = nullptr;
  uint64_t enqueue_ns = 0;  // when the scheduler queued it
  TRITONSERVER_InferenceTrace* trace = nullptr;  // now owned by the backend
};
class Backend {
 public:
  virtual ~Backend() = default;
  // Runs the batch of requests the scheduler formed (one execution, as a
  // Triton backend's ModelInstanceExecute). Must send exactly the responses
  // the model makes for each request: one FINAL response for a
  // non-decoupled model; any number of responses then a FINAL flag for a
  // decoupled one.
  virtual void Execute(const std::vector<ExecContext*>& batch) = 0;
  // A backend library (TRITONBACKEND_* entry points) gets the requests
  // themselves instead, on the worker thread of instance 'instance': it
  // releases them and sends their responses, possibly later and from other
  // threads, and reports the statistics.
  virtual bool FromLibrary() const { return false; }
  virtual void ExecuteRequests(
      size_t /*instance*/, const std::vector<PendingRequest>& /*requests*/)
  {
  }
  // The loaded model this backend now belongs to (set once it exists).
  virtual void Attach(Model* /*model*/) {}
  virtual std::string LibraryPath() const { return std::string(); }
};
// What a backend is created from (TRITONBACKEND_ModelInitialize's view).
struct BackendArgs {
  const ModelSpec* spec = nullptr;
  const PMsg* config = nullptr;  // normalized configuration
  std::string model_path;        // the model's directory
  int64_t version = 0;
  std::weak_ptr<ServerCore> server;  // ensembles send requests through it
};
Status CreateBackend(const BackendArgs& args, std::unique_ptr<Backend>* out);
// The python backend (python_backend.cc): runs <version>/model.py in the
// embedded CPython.
Status CreatePythonBackend(const BackendArgs& args, std::unique_ptr<Backend>* out);
// The repeat backend (repeat_backend.cc): a C++ decoupled backend.
Status CreateRepeatBackend(const BackendArgs& args, std::unique_ptr<Backend>* out);
// A backend in a shared library found like Triton finds one
// (library_backend.cc): any backend name that is not built in.
Status CreateLibraryBackend(const BackendArgs& args, std::unique_ptr<Backend>* out);
// The process-wide owner of loaded backend libraries, shared by every
// server like Triton's backend manager; backends it holds are finalized
// when the last server holding it goes.
class LibraryBackendManager;
std::shared_ptr<LibraryBackendManager> AcquireBackendManager();
// Calls TritonPythonModel.auto_complete_config when the model has one
// (auto-complete on, i.e. strict_model_config false) and applies its changes.
Status PythonAutoCompleteConfig(
    const std::string& model_path, int64_t version, PMsg* config);
// Ensembles (ensemble.cc): steps scheduled by input_map/output_map.
Status CreateEnsembleBackend(const BackendArgs& args, std::unique_ptr<Backend>* out);

// ---- scheduling ----
struct Job {
  TRITONSERVER_InferenceRequest* request = nullptr;
  uint64_t enqueue_ns = 0;
  uint64_t deadline_ns = 0;  // 0: no timeout
};

struct Executor {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, std::deque<Job>> queues;  // by priority level
  size_t queued = 0;
  size_t inflight = 0;  // queued + executing
  bool stop = false;
  std::atomic<int> alive_threads{0};
  std::function<void()> on_change;  // notifies the server (idle/stop)
};

// A loaded model version.
class Model {
 public:
  ~Model();
  std::string name;
  int64_t version = 0;
  uint64_t gen = 0;  // unique id of this load
  ModelSpec spec;
  PMsg config;
  std::string path;
  std::string repo_config_json;  // configuration as polled (for reloads)
  int64_t version_mtime = 0;     // timestamp of the version's files
  std::shared_ptr<void> keepalive;  // e.g. a temporary model directory
  std::unique_ptr<Backend> backend;
  std::unique_ptr<StubProcesses> stubs;  // Python models only
  std::shared_ptr<Executor> executor;
  ModelStats stats;
  std::shared_ptr<MetricReporter> metrics;  // null when metrics are off

  uint64_t EffectivePriority(uint64_t requested) const;
};

// ---- model repository ----
enum class ReadyState { kUnknown, kReady, kUnavailable, kLoading, kUnloading };
const char* ReadyStateString(ReadyState s);

struct VersionSlot {
  ReadyState state = ReadyState::kUnknown;
  std::string reason;
  std::shared_ptr<Model> model;  // set while READY
  std::weak_ptr<Model> weak;     // the model of this slot, while alive
  uint64_t gen = 0;
};

struct ModelInfo {
  std::string name;
  std::string path;
  PMsg config;
  int64_t mtime = 0;
  std::string config_text;
  bool override_config = false;
  std::shared_ptr<void> tempdir;
};

enum class ServerState { kInvalid, kInitializing, kReady, kExiting, kFailed };

class ServerCore : public std::enable_shared_from_this<ServerCore> {
 public:
  explicit ServerCore(const TRITONSERVER_ServerOptions& o)
      : opts(o), backend_manager(AcquireBackendManager())
  {
  }
  // Requests submitted whose release or FINAL response is still to come.
  std::shared_ptr<std::atomic<int64_t>> requests_inside =
      std::make_shared<std::atomic<int64_t>>(0);
  ~ServerCore();

  Status Init();  // creates the repository manager and loads models
  Status Stop(bool force = false);
  void ShutdownThreads();  // joins every worker thread (server delete)

  // Repository manager / life cycle
  Status PollAndUpdate(bool* all_polled);
  Status LoadModel(
      const std::string& name,
      const std::vector<const TRITONSERVER_Parameter*>& params);
  Status UnloadModel(const std::string& name);
  Status RegisterRepository(
      const std::string& path,
      const std::map<std::string, std::string>& mapping);
  Status UnregisterRepository(const std::string& path);
  Status GetModel(
      const std::string& name, int64_t version, std::shared_ptr<Model>* m);
  std::vector<int64_t> ReadyVersions(const std::string& name);
  std::map<std::string, std::vector<int64_t>> AllReadyVersions();
  Status RepositoryIndex(bool ready_only, json::Value* out);
  bool IsReadyStrict();
  bool ModelIsReady(const Model& m);

  // Scheduling
  std::shared_ptr<Executor> StartExecutor(const ModelSpec& spec);
  void ReapThreads();
  void Notify();
  void OnModelDestroyed(Model* m);  // deleter of every loaded model
  // Python instances whose stub died: they never finish unloading (real
  // r25.07, TRITON_FACTS.md "A Python stub that dies"), so they stay live and
  // the server's stop runs out of its exit timeout. Never freed.
  std::atomic<size_t> stuck_instances{0};
  void PrintModelTables();

  TRITONSERVER_ServerOptions opts;
  std::shared_ptr<LibraryBackendManager> backend_manager;
  std::atomic<ServerState> state{ServerState::kInvalid};
  std::atomic<uint64_t> inflight_non_inference{0};

  // Everything below is guarded by mu.
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::string> repo_paths;
  std::map<std::string, std::pair<std::string, std::string>> mappings;
  std::map<std::string, ModelInfo> infos;
  std::map<std::string, std::map<int64_t, VersionSlot>> lifecycle;
  // Replaced or failed model objects still alive (by generation).
  std::map<uint64_t, std::pair<std::string, std::weak_ptr<Model>>> background;
  std::set<std::string> backends_used;
  std::map<std::string, std::string> backend_paths;  // library backends

 private:
  struct PollResult {
    std::map<std::string, ModelInfo> ok;
    std::set<std::string> failed;
    std::set<std::string> duplicates;
    bool all_polled = true;
  };
  void PollAll(PollResult* r);
  void PollOne(
      const std::string& name,
      const std::vector<const TRITONSERVER_Parameter*>& params,
      PollResult* r);
  Status LoadModelLocked(
      const std::string& name,
      const std::vector<const TRITONSERVER_Parameter*>& params,
      std::set<std::string>* loading);  // load_mu_ held
  Status InitializeModelInfo(
      const std::string& name, const std::string& path,
      const std::vector<const TRITONSERVER_Parameter*>& params,
      ModelInfo* info);
  Status LoadVersions(const ModelInfo& info);
  void ReleaseModel(const std::string& name);
  Status CreateModel(
      const ModelInfo& info, int64_t version, std::shared_ptr<Model>* out);
  size_t LiveModelCount();
  std::vector<std::tuple<std::string, int64_t, size_t>> InflightStatus();

  std::mutex load_mu_;  // serializes repository changes
  std::mutex threads_mu_;
  std::vector<std::pair<std::shared_ptr<Executor>, std::vector<std::thread>>>
      executors_;
};

}  // namespace tc

struct TRITONSERVER_Server {
  std::shared_ptr<tc::ServerCore> core;
};

// ---- requests and responses ----
namespace tc {
struct InputChunk {
  const char* base;
  size_t size;
  TRITONSERVER_MemoryType mtype;
  int64_t mid;
};
struct RequestInput {
  std::string name;
  TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> shape;
  std::vector<InputChunk> chunks;
  uint64_t total = 0;
  // The shape a backend sees (batch dimension included, reshape applied),
  // set by validation.
  std::vector<int64_t> backend_shape;
};
// State shared by a request and the work done for it; outlives the
// request's release so that cancellation keeps working for decoupled models.
struct RequestShared {
  std::atomic<bool> cancelled{false};
  // The backend is done with a request once both its release and its FINAL
  // response were handed back; until then it is "inside" its server.
  std::atomic<int> open{2};
  std::shared_ptr<std::atomic<int64_t>> inside;
};
// One of the two events above happened (after the callback returned).
void LeaveIfDone(const std::shared_ptr<RequestShared>& shared);
enum class RequestState { kInitialized, kPending, kExecuting, kReleased, kFailedEnqueue };
}  // namespace tc

struct TRITONSERVER_InferenceRequest {
  std::shared_ptr<tc::Model> model;
  int64_t requested_version = -1;
  std::string id;
  uint32_t flags = 0;
  bool corr_is_string = false;
  uint64_t corr_u = 0;
  std::string corr_s;
  uint64_t priority = 0;
  uint64_t timeout_us = 0;
  std::map<std::string, tc::RequestInput> inputs;
  std::set<std::string> requested_outputs;
  std::vector<TRITONSERVER_Parameter> params;
  TRITONSERVER_InferenceRequestReleaseFn_t release_fn = nullptr;
  void* release_userp = nullptr;
  const TRITONSERVER_ResponseAllocator* allocator = nullptr;
  void* alloc_userp = nullptr;
  TRITONSERVER_InferenceResponseCompleteFn_t response_fn = nullptr;
  void* response_userp = nullptr;
  std::shared_ptr<tc::RequestShared> shared;  // set by ServerInferAsync
  std::atomic<tc::RequestState> state{tc::RequestState::kInitialized};
  // Filled by validation.
  int64_t batch_size = 0;
  std::vector<std::string> outputs_to_send;
  std::vector<std::string> input_order;  // names in AddInput order
  uint64_t request_start_ns = 0;
  TRITONSERVER_InferenceTrace* trace = nullptr;  // set by ServerInferAsync
  std::string LogRequest() const
  {
    return "[request id: " + (id.empty() ? std::string("<id_unknown>") : id) +
           "] ";
  }
};

namespace tc {
struct ResponseOutput {
  std::string name;
  TRITONSERVER_DataType dtype;
  std::vector<int64_t> shape;
  void* base = nullptr;
  size_t byte_size = 0;
  TRITONSERVER_MemoryType mtype = TRITONSERVER_MEMORY_CPU;
  int64_t mid = 0;
  void* userp = nullptr;
};
}  // namespace tc

struct TRITONSERVER_InferenceResponse {
  std::shared_ptr<tc::Model> model;
  std::string id;
  tc::Status status;
  std::vector<tc::ResponseOutput> outputs;
  std::vector<tc::ResponseOutput> hidden;  // allocated, not reported (error)
  std::vector<TRITONSERVER_Parameter> params;
  const TRITONSERVER_ResponseAllocator* allocator = nullptr;
};

namespace tc {

// What a worker gives a native model while it runs one request.
class ExecContext : public std::enable_shared_from_this<ExecContext> {
 public:
  const ExecInput* Input(const std::string& name) const;
  bool IsCancelled() const { return shared->cancelled.load(); }
  bool Requested(const std::string& output) const;
  // Creates a response (allocating outputs through the request's allocator)
  // and hands it to the response callback with 'flags'.
  void Send(
      std::vector<OutTensor> outs, const Status& err, uint32_t flags,
      std::vector<TRITONSERVER_Parameter> params = {});
  // Sends only flags (NULL response), used by decoupled models.
  void SendFlags(uint32_t flags);
  const Model& model() const { return *model_; }

  // Set up by the worker.
  std::shared_ptr<Model> model_;
  std::shared_ptr<RequestShared> shared;
  std::vector<ExecInput> inputs;
  std::vector<std::vector<char>> owned;  // copies of input data
  std::vector<std::string> outputs_to_send;
  std::string id;
  // What the python backend's InferenceRequest reports.
  std::string parameters_json = "{}";  // request parameters as a JSON object
  bool corr_is_string = false;
  uint64_t corr_u = 0;
  std::string corr_s;
  uint32_t flags = 0;
  uint64_t timeout_us = 0;
  int64_t batch_size = 0;
  const TRITONSERVER_ResponseAllocator* allocator = nullptr;
  void* alloc_userp = nullptr;
  TRITONSERVER_InferenceResponseCompleteFn_t response_fn = nullptr;
  void* response_userp = nullptr;
  // Set (before Execute returns) by a decoupled backend that keeps sending
  // this request's responses afterwards from a thread of its own (holding a
  // shared_ptr to the context): the worker then leaves the FINAL flag to it
  // and counts the request with detached_any_error.
  bool detached = false;
  bool detached_any_error = false;
  // Outcome for statistics.
  size_t responses_sent = 0;
  bool final_sent = false;
  bool any_error = false;
  bool cancelled_error = false;
  uint64_t compute_start_ns = 0, compute_input_end_ns = 0,
           compute_output_start_ns = 0, last_response_ns = 0;
};

// The worker thread of model instance 'instance'.
void WorkerLoop(std::shared_ptr<Executor> ex, size_t instance);

// Request and response bookkeeping shared with library_backend.cc.
// Calls the request's release callback (RELEASE_ALL).
void ReleaseRequest(TRITONSERVER_InferenceRequest* r);
// A response handed to a response callback (deleted later by its owner).
void TrackResponse(const TRITONSERVER_InferenceResponse* response);

}  // namespace tc
