// Test core: the python backend. Runs a model's own <version>/model.py
// (class TritonPythonModel) in an embedded CPython, through the test core's
// own triton_python_backend_utils module (test/core/python/, found beside
// this library through dladdr, copied there by CMake).
//
// Follows TRITON_FACTS.md "Backends used in a real run of test/models":
// decoupled models send through the request's response sender and finish
// with the FINAL flag; is_cancelled() reflects TRITONSERVER_InferenceRequestCancel;
// an error response or an exception in execute reaches the client with its
// message.
//
// Differences from real Triton, which runs one stub process per model
// instance: here one interpreter serves the whole process (every server,
// every worker thread); each instance imports model.py as a module of its
// own name, so module globals stay per instance, but sys.modules, sys.path
// and imported helper modules are shared. The GIL is taken per execution
// on the instance's worker thread. The interpreter is never finalized
// (finalizing with other threads possibly inside Python is not safe).
// A decoupled model may keep sending from its own threads after execute()
// returns, until the FINAL flag; a non-decoupled one must answer within
// execute(). Tensors are copied between the test core and numpy.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <condition_variable>

#include "server.h"

#ifndef TESTCORE_PYTHON_EXECUTABLE
#define TESTCORE_PYTHON_EXECUTABLE "/usr/bin/python3"
#endif

namespace tc {
namespace {

class Gil {
 public:
  Gil() : state_(PyGILState_Ensure()) {}
  ~Gil() { PyGILState_Release(state_); }
  Gil(const Gil&) = delete;
  Gil& operator=(const Gil&) = delete;

 private:
  PyGILState_STATE state_;
};

// Owns one reference.
class Ref {
 public:
  explicit Ref(PyObject* o = nullptr) : o_(o) {}
  ~Ref() { Py_XDECREF(o_); }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  PyObject* get() const { return o_; }
  explicit operator bool() const { return o_ != nullptr; }

 private:
  PyObject* o_;
};

std::string
Utf8(PyObject* o)
{
  Ref s(PyObject_Str(o));
  const char* c = s ? PyUnicode_AsUTF8(s.get()) : nullptr;
  if (c == nullptr) {
    PyErr_Clear();
    return "<unprintable>";
  }
  return c;
}

// The pending Python exception as "<Type>: <message>" (clears it).
std::string
TakePythonError()
{
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  if (type == nullptr) {
    return "unknown Python error";
  }
  PyErr_NormalizeException(&type, &value, &tb);
  std::string msg = reinterpret_cast<PyTypeObject*>(type)->tp_name;
  if (value != nullptr) {
    msg += ": " + Utf8(value);
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return msg;
}

std::string
Dirname(const std::string& path)
{
  const size_t pos = path.rfind('/');
  return pos == std::string::npos ? std::string(".") : path.substr(0, pos);
}

bool
FileExists(const std::string& path)
{
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

TRITONSERVER_DataType
DataTypeFromProtocol(const std::string& s)
{
  for (int i = TRITONSERVER_TYPE_BOOL; i <= TRITONSERVER_TYPE_BF16; ++i) {
    const auto dt = static_cast<TRITONSERVER_DataType>(i);
    if (s == DataTypeProtocolString(dt)) {
      return dt;
    }
  }
  return TRITONSERVER_TYPE_INVALID;
}

// ---- a request as the Python side holds it ----
struct RequestHandle {
  std::mutex mu;
  // The request's context while responses may be sent: during execute(),
  // and for a decoupled model until its FINAL flag (then 'retained' keeps
  // the context, and with it the model, alive, as Triton's response
  // factory does).
  ExecContext* ctx = nullptr;
  std::shared_ptr<ExecContext> retained;
  bool final_done = false;
  std::shared_ptr<RequestShared> shared;
  bool decoupled = false;
};
const char* const kCapsuleName = "testcore.request";

void
FreeCapsule(PyObject* capsule)
{
  delete static_cast<std::shared_ptr<RequestHandle>*>(
      PyCapsule_GetPointer(capsule, kCapsuleName));
}

std::shared_ptr<RequestHandle>
HandleOf(PyObject* capsule)
{
  void* p = PyCapsule_GetPointer(capsule, kCapsuleName);
  return p == nullptr ? nullptr
                      : *static_cast<std::shared_ptr<RequestHandle>*>(p);
}

// One response of the model: its outputs, or its error, and its parameters.
struct Outcome {
  std::vector<OutTensor> outs;
  Status status;
  std::vector<TRITONSERVER_Parameter> params;
};

// The response's parameters as pb_utils._outcome() gives them: [(key,
// value)...], each value a str, bool or int, as real Triton's Python backend
// sets them on the response (infer_response.cc: string, int and bool).
bool
ReadParameters(PyObject* list, std::vector<TRITONSERVER_Parameter>* params)
{
  Ref items(PySequence_Fast(list, "parameters must be a list"));
  if (!items) {
    return false;
  }
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(items.get()); ++i) {
    const char* key = nullptr;
    PyObject* value = nullptr;
    if (!PyArg_ParseTuple(
            PySequence_Fast_GET_ITEM(items.get(), i), "sO", &key, &value)) {
      return false;
    }
    TRITONSERVER_Parameter p;
    p.name = key;
    if (PyUnicode_Check(value)) {
      const char* text = PyUnicode_AsUTF8(value);
      if (text == nullptr) {
        return false;
      }
      p.type = TRITONSERVER_PARAMETER_STRING;
      p.str = text;
    } else if (PyBool_Check(value)) {
      p.type = TRITONSERVER_PARAMETER_BOOL;
      p.b = value == Py_True;
    } else if (PyLong_Check(value)) {
      p.type = TRITONSERVER_PARAMETER_INT;
      p.i = PyLong_AsLongLong(value);
      if (p.i == -1 && PyErr_Occurred()) {
        return false;
      }
    } else {
      PyErr_SetString(PyExc_TypeError, "Unsupported value type on parameters");
      return false;
    }
    params->push_back(std::move(p));
  }
  return true;
}

// A response as pb_utils._outcome() gives it: (code or -1, message,
// [(name, datatype, shape, bytes)...], [(key, value)...]). False with a
// Python error set when malformed.
bool
ReadOutcome(PyObject* outcome, Outcome* result)
{
  long code = 0;
  const char* msg = nullptr;
  PyObject* list = nullptr;
  PyObject* parameters = nullptr;
  if (!PyArg_ParseTuple(outcome, "lsOO", &code, &msg, &list, &parameters)) {
    return false;
  }
  std::vector<OutTensor>* outs = &result->outs;
  Status* status = &result->status;
  if (code >= 0) {
    if (code > TRITONSERVER_ERROR_CANCELLED) {
      code = TRITONSERVER_ERROR_UNKNOWN;
    }
    *status = Status(static_cast<TRITONSERVER_Error_Code>(code), msg);
    return true;
  }
  Ref items(PySequence_Fast(list, "outputs must be a list"));
  if (!items) {
    return false;
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(items.get());
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(items.get(), i);
    const char* name = nullptr;
    const char* dtype = nullptr;
    PyObject* shape = nullptr;
    const char* data = nullptr;
    Py_ssize_t len = 0;
    if (!PyArg_ParseTuple(item, "ssOy#", &name, &dtype, &shape, &data, &len)) {
      return false;
    }
    OutTensor t;
    t.name = name;
    t.dtype = DataTypeFromProtocol(dtype);
    if (t.dtype == TRITONSERVER_TYPE_INVALID) {
      PyErr_Format(
          PyExc_TypeError, "output '%s' has an unknown datatype '%s'", name,
          dtype);
      return false;
    }
    Ref dims(PySequence_Fast(shape, "shape must be a list"));
    if (!dims) {
      return false;
    }
    for (Py_ssize_t d = 0; d < PySequence_Fast_GET_SIZE(dims.get()); ++d) {
      const long long v =
          PyLong_AsLongLong(PySequence_Fast_GET_ITEM(dims.get(), d));
      if (v == -1 && PyErr_Occurred()) {
        return false;
      }
      t.shape.push_back(v);
    }
    t.owned.assign(data, data + len);
    outs->push_back(std::move(t));
  }
  return ReadParameters(parameters, &result->params);
}

// ---- the _testcore_native module ----
// send(handle, outcome or None, flags) -> None, or the reason it could not.
PyObject*
NativeSend(PyObject*, PyObject* args)
{
  PyObject* capsule = nullptr;
  PyObject* outcome = nullptr;
  unsigned int flags = 0;
  if (!PyArg_ParseTuple(args, "OOI", &capsule, &outcome, &flags)) {
    return nullptr;
  }
  std::shared_ptr<RequestHandle> h = HandleOf(capsule);
  if (!h) {
    return nullptr;
  }
  Outcome response;
  const bool has_response = outcome != Py_None;
  if (has_response && !ReadOutcome(outcome, &response)) {
    return nullptr;
  }
  std::string error;
  // Callbacks run without the GIL: nothing they do can wait on Python.
  Py_BEGIN_ALLOW_THREADS
  std::shared_ptr<ExecContext> done;
  {
    std::lock_guard<std::mutex> lk(h->mu);
    ExecContext* ctx = h->ctx;
    const bool final = (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0;
    if (h->final_done) {
      error = "Unable to send response. Response sender has been closed.";
    } else if (ctx == nullptr) {
      error =
          "test core: the request is complete; its responses can no longer "
          "be sent";
    } else if (!h->decoupled && (!final || !has_response)) {
      error =
          "Non-decoupled model must send exactly one response, with the "
          "TRITONSERVER_RESPONSE_COMPLETE_FINAL flag";
    } else {
      if (has_response) {
        ctx->Send(
            std::move(response.outs), response.status, flags,
            std::move(response.params));
      } else {
        ctx->SendFlags(flags);
      }
      if (final) {
        h->final_done = true;
        h->ctx = nullptr;
        done = std::move(h->retained);
      }
    }
  }
  done.reset();  // may be the last reference to the model
  Py_END_ALLOW_THREADS
  if (!error.empty()) {
    return PyUnicode_FromString(error.c_str());
  }
  Py_RETURN_NONE;
}

PyObject*
NativeIsCancelled(PyObject*, PyObject* capsule)
{
  std::shared_ptr<RequestHandle> h = HandleOf(capsule);
  if (!h) {
    return nullptr;
  }
  return PyBool_FromLong(h->shared && h->shared->cancelled.load() ? 1 : 0);
}

// log(level, message, file, line): pb_utils.Logger into the server's log.
PyObject*
NativeLog(PyObject*, PyObject* args)
{
  int level = 0;
  const char* msg = nullptr;
  const char* file = nullptr;
  int line = 0;
  if (!PyArg_ParseTuple(args, "issi", &level, &msg, &file, &line)) {
    return nullptr;
  }
  switch (level) {
    case 1:
      TC_LOG_WARNING(file, line, msg);
      break;
    case 2:
      TC_LOG_ERROR(file, line, msg);
      break;
    case 3:
      TC_LOG_VERBOSE(1, file, line, msg);
      break;
    default:
      TC_LOG_INFO(file, line, msg);
      break;
  }
  Py_RETURN_NONE;
}

PyMethodDef g_native_methods[] = {
    {"send", NativeSend, METH_VARARGS, "send a response of a request"},
    {"is_cancelled", NativeIsCancelled, METH_O, "whether a request is cancelled"},
    {"log", NativeLog, METH_VARARGS, "write a server log record"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef g_native_module = {
    PyModuleDef_HEAD_INIT, "_testcore_native",
    "The test core's side of triton_python_backend_utils.", -1,
    g_native_methods, nullptr, nullptr, nullptr, nullptr};

// ---- the interpreter (one per process, started on first use) ----
struct Runtime {
  Status status;
  PyObject* load = nullptr;
  PyObject* execute = nullptr;
  PyObject* finalize = nullptr;
  PyObject* auto_complete = nullptr;
};

void
StartRuntime(Runtime* rt)
{
  // Python extension modules (numpy) expect libpython's symbols to be
  // global; the test core itself may have been opened RTLD_LOCAL.
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&Py_InitializeFromConfig), &info) != 0 &&
      info.dli_fname != nullptr) {
    dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  }
  std::string helper_dir;
  if (dladdr(reinterpret_cast<void*>(&StartRuntime), &info) != 0 &&
      info.dli_fname != nullptr) {
    helper_dir = Dirname(info.dli_fname) + "/python";
  }
  if (!Py_IsInitialized()) {
    // numpy's OpenBLAS (Debian's libopenblas0-pthread) starts a pool of threads that lives
    // as long as the process. Real Triton runs Python in stub processes, so no such thread
    // joins the server's: keep the embedded interpreter's BLAS on the calling thread,
    // unless the user chose a count.
    setenv("OPENBLAS_NUM_THREADS", "1", 0);
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;  // signals stay the host's
    config.parse_argv = 0;
    config.write_bytecode = 0;  // no __pycache__ in model directories
    PyStatus st = PyConfig_SetBytesString(
        &config, &config.program_name, TESTCORE_PYTHON_EXECUTABLE);
    if (!PyStatus_Exception(st)) {
      st = Py_InitializeFromConfig(&config);
    }
    PyConfig_Clear(&config);
    if (PyStatus_Exception(st)) {
      rt->status = Err(
          TRITONSERVER_ERROR_INTERNAL,
          std::string("test core: cannot start the embedded Python: ") +
              (st.err_msg ? st.err_msg : "unknown error"));
      return;
    }
    PyEval_SaveThread();  // any thread takes the GIL when it needs it
  }
  Gil gil;
  PyObject* module = PyModule_Create(&g_native_module);
  PyObject* modules = PyImport_GetModuleDict();
  Ref path_entry(PyUnicode_FromString(helper_dir.c_str()));
  PyObject* sys_path = PySys_GetObject("path");  // borrowed
  if (module == nullptr || PyDict_SetItemString(modules, "_testcore_native", module) != 0 ||
      sys_path == nullptr || !path_entry ||
      PyList_Insert(sys_path, 0, path_entry.get()) != 0) {
    rt->status =
        Err(TRITONSERVER_ERROR_INTERNAL,
            "test core: cannot set up the embedded Python: " + TakePythonError());
    Py_XDECREF(module);
    return;
  }
  Py_DECREF(module);
  PySys_SetObject("dont_write_bytecode", Py_True);
  Ref runner(PyImport_ImportModule("testcore_python_runner"));
  if (!runner) {
    rt->status = Err(
        TRITONSERVER_ERROR_INTERNAL,
        "test core: cannot import the python backend helpers from '" +
            helper_dir + "': " + TakePythonError());
    return;
  }
  rt->load = PyObject_GetAttrString(runner.get(), "load");
  rt->execute = PyObject_GetAttrString(runner.get(), "execute");
  rt->finalize = PyObject_GetAttrString(runner.get(), "finalize");
  rt->auto_complete = PyObject_GetAttrString(runner.get(), "auto_complete");
  if (!rt->load || !rt->execute || !rt->finalize || !rt->auto_complete) {
    rt->status =
        Err(TRITONSERVER_ERROR_INTERNAL,
            "test core: incomplete python backend helpers: " + TakePythonError());
  }
}

Runtime&
GetRuntime()
{
  // Never destroyed: the interpreter outlives every server.
  static Runtime* rt = new Runtime();
  static std::once_flag once;
  std::call_once(once, [] { StartRuntime(rt); });
  return *rt;
}

// Reads a runner result (ok, value). On success returns a new reference to
// value; else null with *error set.
PyObject*
RunnerResult(PyObject* result, std::string* error)
{
  if (result == nullptr) {
    *error = TakePythonError();
    return nullptr;
  }
  Ref owned(result);
  if (!PyTuple_Check(result) || PyTuple_Size(result) != 2) {
    *error = "test core: malformed python backend helper result";
    return nullptr;
  }
  PyObject* value = PyTuple_GET_ITEM(result, 1);
  if (PyTuple_GET_ITEM(result, 0) != Py_True) {
    *error = Utf8(value);
    return nullptr;
  }
  Py_INCREF(value);
  return value;
}

std::atomic<uint64_t> g_module_counter{0};

std::string
ModuleName(const std::string& model)
{
  std::string out = "_testcore_model_";
  for (char c : model) {
    out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  }
  return out + "_" + std::to_string(g_module_counter++);
}

std::string
ModelFile(const std::string& model_path, int64_t version, const PMsg& config)
{
  std::string file = config.Str("default_model_filename");
  if (file.empty()) {
    file = "model.py";
  }
  return model_path + "/" + std::to_string(version) + "/" + file;
}

class PythonBackend : public Backend {
 public:
  PythonBackend(
      const ModelSpec& spec, std::vector<std::string> instance_names,
      PyObject* instances)
      : name_(spec.name), decoupled_(spec.decoupled),
        instance_names_(std::move(instance_names)), instances_(instances)
  {
    for (size_t i = 0; i < instance_names_.size(); ++i) {
      free_.push_back(i);
    }
  }

  ~PythonBackend() override
  {
    Runtime& rt = GetRuntime();
    Gil gil;
    for (Py_ssize_t i = 0; i < PyList_Size(instances_); ++i) {
      std::string error;
      Ref done(RunnerResult(
          PyObject_CallFunctionObjArgs(
              rt.finalize, PyList_GET_ITEM(instances_, i), nullptr),
          &error));
      if (!done) {
        TC_LOG_ERROR(
            "python_be.cc", 0,
            "Failed to finalize model instance '" + instance_names_[i] +
                "': " + error);
      }
    }
    Py_DECREF(instances_);
  }

  void Execute(const std::vector<ExecContext*>& batch) override
  {
    const size_t idx = Acquire();
    Runtime& rt = GetRuntime();
    std::string failure;
    std::vector<Outcome> results;
    {
      Gil gil;
      std::vector<std::shared_ptr<RequestHandle>> handles;
      Ref requests(PyList_New(static_cast<Py_ssize_t>(batch.size())));
      for (size_t i = 0; i < batch.size(); ++i) {
        ExecContext* c = batch[i];
        auto h = std::make_shared<RequestHandle>();
        h->ctx = c;
        h->shared = c->shared;
        h->decoupled = decoupled_;
        handles.push_back(h);
        PyObject* tuple = RequestTuple(c, h);
        if (tuple == nullptr) {  // e.g. a BYTES parameter that is not UTF-8
          failure = "cannot pass the request to Python: " + TakePythonError();
          Py_INCREF(Py_None);
          tuple = Py_None;
        }
        PyList_SET_ITEM(requests.get(), static_cast<Py_ssize_t>(i), tuple);
      }
      Ref value(
          failure.empty()
              ? RunnerResult(
                    PyObject_CallFunction(
                        rt.execute, "OsOi", PyList_GET_ITEM(instances_, idx),
                        name_.c_str(), requests.get(), decoupled_ ? 1 : 0),
                    &failure)
              : nullptr);
      for (auto& h : handles) {
        std::lock_guard<std::mutex> lk(h->mu);
        ExecContext* c = h->ctx;
        if (decoupled_ && failure.empty() && c != nullptr && !c->final_sent) {
          // The model sends the rest later (e.g. from its own thread).
          if (c->compute_output_start_ns == 0) {
            c->compute_output_start_ns = NowNs();
          }
          c->detached_any_error = c->any_error;
          c->detached = true;
          h->retained = c->shared_from_this();
        } else {
          h->ctx = nullptr;
        }
      }
      if (value && value.get() != Py_None) {
        Ref items(PySequence_Fast(value.get(), "outcomes"));
        for (Py_ssize_t i = 0; items && i < PySequence_Fast_GET_SIZE(items.get()); ++i) {
          results.emplace_back();
          if (!ReadOutcome(
                  PySequence_Fast_GET_ITEM(items.get(), i), &results.back())) {
            failure = TakePythonError();
            break;
          }
        }
        if (!items) {
          failure = TakePythonError();
        }
      }
    }
    Release(idx);
    const std::string prefix = "Failed to process the request(s) for model '" +
                               instance_names_[idx] + "', message: ";
    for (size_t i = 0; i < batch.size(); ++i) {
      ExecContext* c = batch[i];
      if (c->detached || c->final_sent) {
        continue;
      }
      if (!failure.empty()) {
        c->Send({}, Err(TRITONSERVER_ERROR_INTERNAL, prefix + failure),
                TRITONSERVER_RESPONSE_COMPLETE_FINAL);
      } else if (i < results.size()) {
        c->Send(
            std::move(results[i].outs), results[i].status,
            TRITONSERVER_RESPONSE_COMPLETE_FINAL, std::move(results[i].params));
      } else if (!decoupled_) {
        c->Send({},
                Err(TRITONSERVER_ERROR_INTERNAL,
                    prefix + "execute() returned None and sent no response "
                             "for this request"),
                TRITONSERVER_RESPONSE_COMPLETE_FINAL);
      }
    }
  }

 private:
  // (handle, request_id, correlation_id, flags, parameters, requested
  // outputs, inputs, timeout_us): what the runner turns into an
  // InferenceRequest. Returns a new reference.
  static PyObject* RequestTuple(
      ExecContext* c, const std::shared_ptr<RequestHandle>& h)
  {
    PyObject* capsule = PyCapsule_New(
        new std::shared_ptr<RequestHandle>(h), kCapsuleName, FreeCapsule);
    PyObject* inputs = PyList_New(static_cast<Py_ssize_t>(c->inputs.size()));
    for (size_t j = 0; j < c->inputs.size(); ++j) {
      const ExecInput& in = c->inputs[j];
      PyObject* shape = PyList_New(static_cast<Py_ssize_t>(in.shape.size()));
      for (size_t d = 0; d < in.shape.size(); ++d) {
        PyList_SET_ITEM(
            shape, static_cast<Py_ssize_t>(d), PyLong_FromLongLong(in.shape[d]));
      }
      PyList_SET_ITEM(
          inputs, static_cast<Py_ssize_t>(j),
          Py_BuildValue(
              "(ssNN)", in.name.c_str(), DataTypeProtocolString(in.dtype),
              shape,
              PyByteArray_FromStringAndSize(
                  in.data, static_cast<Py_ssize_t>(in.size))));
    }
    PyObject* requested =
        PyList_New(static_cast<Py_ssize_t>(c->outputs_to_send.size()));
    for (size_t j = 0; j < c->outputs_to_send.size(); ++j) {
      PyList_SET_ITEM(
          requested, static_cast<Py_ssize_t>(j),
          PyUnicode_FromString(c->outputs_to_send[j].c_str()));
    }
    PyObject* corr = c->corr_is_string
                         ? PyUnicode_FromString(c->corr_s.c_str())
                         : PyLong_FromUnsignedLongLong(c->corr_u);
    return Py_BuildValue(
        "(NsNIsNNK)", capsule, c->id.c_str(), corr, c->flags,
        c->parameters_json.c_str(), requested, inputs,
        static_cast<unsigned long long>(c->timeout_us));
  }

  size_t Acquire()
  {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return !free_.empty(); });
    const size_t idx = free_.back();
    free_.pop_back();
    return idx;
  }
  void Release(size_t idx)
  {
    {
      std::lock_guard<std::mutex> lk(mu_);
      free_.push_back(idx);
    }
    cv_.notify_one();
  }

  std::string name_;
  bool decoupled_;
  std::vector<std::string> instance_names_;
  PyObject* instances_;  // list of (model object, module name), owned
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<size_t> free_;
};

}  // namespace

Status
CreatePythonBackend(const BackendArgs& args, std::unique_ptr<Backend>* out)
{
  Runtime& rt = GetRuntime();
  TC_RETURN_IF_ERROR(rt.status);
  const ModelSpec& spec = *args.spec;
  const std::string file = ModelFile(args.model_path, args.version, *args.config);
  if (!FileExists(file)) {
    return Err(
        TRITONSERVER_ERROR_INTERNAL,
        "Failed to initialize Python stub: python model file '" + file +
            "' does not exist");
  }
  const std::string config_json = ConfigToJson(*args.config).Serialize();
  std::vector<std::string> names = spec.instance_names;
  if (names.empty()) {
    names.push_back(spec.name + "_0_0");
  }
  Gil gil;
  Ref instance_args(PyList_New(0));
  for (const std::string& instance : names) {
    Ref dict(Py_BuildValue(
        "{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "model_config", config_json.c_str(),
        "model_instance_kind", "CPU", "model_instance_name", instance.c_str(),
        "model_instance_device_id", "0", "model_repository",
        args.model_path.c_str(), "model_version",
        std::to_string(args.version).c_str(), "model_name", spec.name.c_str()));
    if (!dict || PyList_Append(instance_args.get(), dict.get()) != 0) {
      return Err(TRITONSERVER_ERROR_INTERNAL, TakePythonError());
    }
  }
  std::string error;
  PyObject* instances = RunnerResult(
      PyObject_CallFunction(
          rt.load, "ssO", file.c_str(), ModuleName(spec.name).c_str(),
          instance_args.get()),
      &error);
  if (instances == nullptr) {
    return Err(TRITONSERVER_ERROR_INTERNAL, error);
  }
  out->reset(new PythonBackend(spec, names, instances));
  return Status();
}

Status
PythonAutoCompleteConfig(
    const std::string& model_path, int64_t version, PMsg* config)
{
  const std::string file = ModelFile(model_path, version, *config);
  if (!FileExists(file)) {
    return Status();  // loading the model reports it
  }
  Runtime& rt = GetRuntime();
  TC_RETURN_IF_ERROR(rt.status);
  const std::string in = ConfigToJson(*config).Serialize();
  std::string out;
  {
    Gil gil;
    std::string error;
    Ref value(RunnerResult(
        PyObject_CallFunction(
            rt.auto_complete, "sss", file.c_str(),
            ModuleName(config->Str("name")).c_str(), in.c_str()),
        &error));
    if (!value) {
      return Err(TRITONSERVER_ERROR_INTERNAL, error);
    }
    if (value.get() == Py_None) {
      return Status();
    }
    out = Utf8(value.get());
  }
  json::Value v;
  PMsg completed(ModelConfigDesc());
  Status s = json::Parse(out, &v);
  if (s.ok()) {
    s = ParseJsonMessage(v, ModelConfigDesc(), &completed);
  }
  if (!s.ok()) {
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        "auto_complete_config of model '" + config->Str("name") +
            "' gave an invalid configuration: " + s.msg());
  }
  *config = std::move(completed);
  return Status();
}

}  // namespace tc
