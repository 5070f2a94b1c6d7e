// Test core: model repository manager and model life cycle.
//
// Imitates Triton's ModelRepositoryManager and ModelLifeCycle:
// - every immediate subdirectory of a repository is a model; its
//   config.pbtxt (or configs/<model_config_name>.pbtxt) is read, completed
//   and validated ("polling"); a model that fails polling is not loaded and
//   an explicit load reports "failed to load '<m>', failed to poll from model
//   repository"; model names must be unique across repositories;
// - versions are the numeric subdirectories selected by the version policy
//   (latest 1 by default); each loaded version is READY, a version being
//   unloaded is UNLOADING until the last request/response holding it is
//   gone, then UNAVAILABLE with reason "unloaded"; a failed version is
//   UNAVAILABLE with the failure as reason;
// - control modes: NONE and POLL load everything at start, POLL re-reads the
//   repository on ServerPollModelRepository, EXPLICIT loads only the startup
//   models ("*" = all) and accepts load/unload and repository registration;
// - load "config" / "file:<path>" parameters override the configuration and
//   provide model files from memory (written to a temporary directory);
// - log lines use Triton's wording ("loading: m:1", "successfully loaded
//   'm'", "successfully unloaded 'm' version 1", ...), and server stop waits
//   for in-flight inferences, unloads every model and waits for the models
//   to be released, up to the exit timeout.
#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "server.h"

namespace tc {

const char*
ReadyStateString(ReadyState s)
{
  switch (s) {
    case ReadyState::kReady:
      return "READY";
    case ReadyState::kUnavailable:
      return "UNAVAILABLE";
    case ReadyState::kLoading:
      return "LOADING";
    case ReadyState::kUnloading:
      return "UNLOADING";
    default:
      return "UNKNOWN";
  }
}

namespace {

std::atomic<uint64_t> g_next_gen{1};

bool
IsDir(const std::string& p)
{
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool
Exists(const std::string& p)
{
  return access(p.c_str(), F_OK) == 0;
}

Status
ListDir(const std::string& path, bool dirs_only, std::set<std::string>* out)
{
  DIR* d = opendir(path.c_str());
  if (d == nullptr) {
    return Err(TRITONSERVER_ERROR_INTERNAL, "failed to open directory " + path);
  }
  while (struct dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n == "." || n == "..") {
      continue;
    }
    if (dirs_only && !IsDir(path + "/" + n)) {
      continue;
    }
    out->insert(n);
  }
  closedir(d);
  return Status();
}

int64_t
MtimeNs(const std::string& p)
{
  struct stat st;
  if (stat(p.c_str(), &st) != 0) {
    return 0;
  }
  const int64_t m =
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  const int64_t c =
      static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return std::max(m, c);
}

// Latest modification of a model directory, its config and the files
// directly inside it and inside its version directories.
int64_t
ModelTimestamp(const std::string& dir, const std::string& config_path)
{
  int64_t t = std::max(MtimeNs(dir), MtimeNs(config_path));
  std::set<std::string> entries;
  if (ListDir(dir, false, &entries).ok()) {
    for (const auto& e : entries) {
      const std::string p = dir + "/" + e;
      t = std::max(t, MtimeNs(p));
      if (IsDir(p)) {
        std::set<std::string> inner;
        if (ListDir(p, false, &inner).ok()) {
          for (const auto& i : inner) {
            t = std::max(t, MtimeNs(p + "/" + i));
          }
        }
      }
    }
  }
  return t;
}

// Latest modification of a version directory and of the model directory's
// files other than the configuration (what decides whether a loaded version
// must be reloaded when only its configuration may have changed).
int64_t
VersionTimestamp(const std::string& dir, int64_t version)
{
  const std::string vdir = dir + "/" + std::to_string(version);
  int64_t t = MtimeNs(vdir);
  std::set<std::string> entries;
  if (ListDir(vdir, false, &entries).ok()) {
    for (const auto& e : entries) {
      t = std::max(t, MtimeNs(vdir + "/" + e));
    }
  }
  entries.clear();
  if (ListDir(dir, false, &entries).ok()) {
    for (const auto& e : entries) {
      if (e != "config.pbtxt" && e != "configs" && !IsDir(dir + "/" + e)) {
        t = std::max(t, MtimeNs(dir + "/" + e));
      }
    }
  }
  return t;
}

// The configuration as compared by Triton to decide whether a loaded model
// needs a reload: without the version policy, with normalized instance
// groups.
std::string
ReloadSignature(const PMsg& config)
{
  PMsg c = config;
  c.Clear("version_policy");
  if (!NormalizeAndValidateInstanceGroups(&c).ok()) {
    return std::string();
  }
  return ConfigToJson(c).Serialize();
}

int
RemoveEntry(const char* path, const struct stat*, int, struct FTW*)
{
  return remove(path);
}

// A temporary directory holding model files given as load parameters.
struct TempDir {
  std::string path;
  ~TempDir()
  {
    if (!path.empty()) {
      nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
    }
  }
};

Status
WriteFile(const std::string& path, const std::vector<char>& bytes)
{
  // Create parent directories.
  for (size_t pos = path.find('/', 1); pos != std::string::npos;
       pos = path.find('/', pos + 1)) {
    const std::string dir = path.substr(0, pos);
    if (!IsDir(dir) && mkdir(dir.c_str(), 0755) != 0) {
      return Err(
          TRITONSERVER_ERROR_INTERNAL, "failed to create directory " + dir);
    }
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) {
    return Err(TRITONSERVER_ERROR_INTERNAL, "failed to write file " + path);
  }
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return Status();
}

const char*
ParamTypeString(TRITONSERVER_ParameterType t)
{
  switch (t) {
    case TRITONSERVER_PARAMETER_STRING:
      return "STRING";
    case TRITONSERVER_PARAMETER_INT:
      return "INT";
    case TRITONSERVER_PARAMETER_BOOL:
      return "BOOL";
    case TRITONSERVER_PARAMETER_DOUBLE:
      return "DOUBLE";
    case TRITONSERVER_PARAMETER_BYTES:
      return "BYTES";
    default:
      return "<invalid>";
  }
}

bool
HasFileParams(const std::vector<const TRITONSERVER_Parameter*>& params)
{
  for (const auto* p : params) {
    if (p->name.rfind("file:", 0) == 0) {
      return true;
    }
  }
  return false;
}

std::vector<int64_t>
VersionsToLoad(const ModelInfo& info)
{
  std::set<std::string> subdirs;
  ListDir(info.path, true, &subdirs);
  std::set<int64_t, std::greater<int64_t>> existing;
  for (const auto& d : subdirs) {
    if (d == "warmup" || d == "initial_state" || d == "configs") {
      continue;
    }
    if (d.size() > 1 && d.front() == '0') {
      TC_LOG_WARNING(
          "model_lifecycle.cc", 103,
          "ignore version directory '" + d +
              "' which contains leading zeros in its directory name");
      continue;
    }
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(d.c_str(), &end, 10);
    if (end == d.c_str() || errno != 0) {
      TC_LOG_WARNING(
          "model_lifecycle.cc", 112,
          "ignore version directory '" + d +
              "' which fails to convert to integral number");
      continue;
    }
    existing.insert(v);
  }
  std::vector<int64_t> out;
  const PMsg* vp = info.config.Msg("version_policy");
  if (vp != nullptr && vp->Msg("specific") != nullptr) {
    for (int64_t v : vp->Msg("specific")->Ints("versions")) {
      if (existing.count(v)) {
        out.push_back(v);
      } else {
        TC_LOG_ERROR(
            "model_lifecycle.cc", 124,
            "version " + std::to_string(v) + " is specified for model '" +
                info.name + "', but the version directory is not present");
      }
    }
  } else if (vp != nullptr && vp->Msg("latest") != nullptr) {
    const uint64_t n = vp->Msg("latest")->UInt("num_versions");
    for (int64_t v : existing) {
      if (out.size() >= n) {
        break;
      }
      out.push_back(v);
    }
  } else {
    out.assign(existing.begin(), existing.end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------
// Polling
// ---------------------------------------------------------------------------
Status
ServerCore::InitializeModelInfo(
    const std::string& name, const std::string& path,
    const std::vector<const TRITONSERVER_Parameter*>& params, ModelInfo* info)
{
  info->name = name;
  info->path = path;
  const bool autofill = !opts.strict_model_config;
  if (path.empty()) {
    char tmpl[] = "/tmp/tritoncore_XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      return Err(
          TRITONSERVER_ERROR_INTERNAL, "Failed to create local temp folder");
    }
    auto td = std::make_shared<TempDir>();
    td->path = tmpl;
    info->tempdir = td;
    info->path = td->path;
    bool found_config = false;
    for (const auto* p : params) {
      if (p->name == "config") {
        if (p->type != TRITONSERVER_PARAMETER_STRING) {
          return Err(
              TRITONSERVER_ERROR_INVALID_ARG,
              "Config parameter 'config' must have string type for its value");
        }
        found_config = true;
      }
    }
    if (!found_config) {
      return Err(
          TRITONSERVER_ERROR_INVALID_ARG,
          "Load parameter 'config' must be specified for model file override");
    }
    for (const auto* p : params) {
      if (p->name.rfind("file:", 0) != 0) {
        continue;
      }
      const std::string rel = p->name.substr(5);
      if (p->type != TRITONSERVER_PARAMETER_BYTES) {
        return Err(
            TRITONSERVER_ERROR_INVALID_ARG,
            "File parameter '" + p->name + "' must have bytes type for its value");
      }
      if (rel.empty() || rel[0] == '/' || rel.find("..") != std::string::npos) {
        return Err(
            TRITONSERVER_ERROR_INVALID_ARG,
            "Invalid file parameter '" + p->name +
                "' with normalized path '" + rel +
                "' must stay within model directory.");
      }
      TC_RETURN_IF_ERROR(WriteFile(td->path + "/" + rel, p->bytes));
    }
  }

  std::string config_path = info->path + "/config.pbtxt";
  if (!opts.model_config_name.empty()) {
    const std::string alt =
        info->path + "/configs/" + opts.model_config_name + ".pbtxt";
    if (Exists(alt)) {
      config_path = alt;
    }
  }
  bool parsed = false;
  for (const auto* p : params) {
    if (p->name == "config" && p->type == TRITONSERVER_PARAMETER_STRING) {
      info->override_config = true;
      json::Value v;
      Status s = json::Parse(p->str, &v);
      if (s.ok()) {
        s = ParseJsonMessage(v, ModelConfigDesc(), &info->config);
      }
      if (!s.ok()) {
        return Err(
            TRITONSERVER_ERROR_INVALID_ARG,
            "Invalid config override: " + s.msg());
      }
      info->config_text = p->str;
      parsed = true;
      break;
    } else if (p->name.rfind("file:", 0) != 0) {
      return Err(
          TRITONSERVER_ERROR_INVALID_ARG,
          "Unrecognized load parameter '" + p->name + "' with type '" +
              ParamTypeString(p->type) + "'");
    }
  }
  if (!parsed) {
    const bool exists = Exists(config_path);
    if (autofill && !exists) {
      info->config = PMsg(ModelConfigDesc());
    } else {
      std::ifstream f(config_path, std::ios::binary);
      if (!f) {
        return Err(
            TRITONSERVER_ERROR_INTERNAL,
            "failed to open text file for read " + config_path + ": " +
                std::strerror(errno));
      }
      std::stringstream ss;
      ss << f.rdbuf();
      info->config_text = ss.str();
      Status s = ParseTextProto(info->config_text, &info->config);
      if (!s.ok()) {
        TC_LOG_ERROR(
            "filesystem/api.cc", 566,
            "failed to parse " + config_path + ": " + s.msg());
        return Err(
            TRITONSERVER_ERROR_INTERNAL,
            "failed to read text proto from " + config_path);
      }
    }
  }
  info->mtime = ModelTimestamp(info->path, config_path);

  TC_RETURN_IF_ERROR(NormalizeConfig(name, info->path, &info->config));
  TC_RETURN_IF_ERROR(ValidateConfig(info->config));
  if (!autofill) {
    TC_RETURN_IF_ERROR(ValidateIOConfig(info->config));
  }
  if (mappings.count(name) != 0) {
    info->config.SetStr("name", name);
  } else if (info->config.Str("name") != name) {
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        "unexpected directory name '" + name + "' for model '" +
            info->config.Str("name") +
            "', directory name must equal model name");
  }
  return Status();
}

void
ServerCore::PollAll(PollResult* r)
{
  std::map<std::string, std::string> to_path;
  std::set<std::string> repos;
  {
    std::lock_guard<std::mutex> lk(mu);
    repos = repo_paths;
  }
  for (const auto& repo : repos) {
    std::set<std::string> subdirs;
    Status s = ListDir(repo, true, &subdirs);
    if (!s.ok()) {
      TC_LOG_ERROR(
          "model_repository_manager.cc", 1352,
          "failed to poll model repository '" + repo + "': " + s.msg());
      r->all_polled = false;
      continue;
    }
    for (const auto& d : subdirs) {
      if (!to_path.emplace(d, repo + "/" + d).second) {
        r->duplicates.insert(d);
        r->all_polled = false;
      }
    }
  }
  for (const auto& d : r->duplicates) {
    to_path.erase(d);
    TC_LOG_ERROR(
        "model_repository_manager.cc", 1372,
        "failed to poll model '" + d +
            "': not unique across all model repositories");
  }
  for (const auto& p : to_path) {
    ModelInfo info;
    Status s = InitializeModelInfo(p.first, p.second, {}, &info);
    if (s.ok()) {
      r->ok.emplace(p.first, std::move(info));
    } else {
      TC_LOG_ERROR(
          "model_repository_manager.cc", 1509,
          "Poll failed for model directory '" + p.first + "': " + s.msg());
      r->failed.insert(p.first);
      r->all_polled = false;
    }
  }
}

void
ServerCore::PollOne(
    const std::string& name,
    const std::vector<const TRITONSERVER_Parameter*>& params, PollResult* r)
{
  std::string path;
  bool exists = false;
  if (HasFileParams(params)) {
    exists = true;  // files given in memory; path stays empty
  } else {
    std::set<std::string> repos;
    std::map<std::string, std::pair<std::string, std::string>> maps;
    {
      std::lock_guard<std::mutex> lk(mu);
      repos = repo_paths;
      maps = mappings;
    }
    auto mit = maps.find(name);
    if (mit != maps.end()) {
      if (Exists(mit->second.second)) {
        path = mit->second.second;
        exists = true;
      } else {
        TC_LOG_ERROR(
            "model_repository_manager.cc", 1408,
            "mapped path '" + mit->second.second +
                "' does not exist for model '" + name + "'");
      }
    } else {
      for (const auto& repo : repos) {
        const std::string full = repo + "/" + name;
        if (!Exists(full)) {
          continue;
        }
        bool mapped = false;
        for (const auto& m : maps) {
          if (m.second.second == full) {
            mapped = true;
          }
        }
        if (mapped) {
          continue;
        }
        if (!path.empty()) {
          exists = false;
          path.clear();
          TC_LOG_ERROR(
              "model_repository_manager.cc", 1453,
              "failed to poll model '" + name +
                  "': not unique across all model repositories");
          break;
        }
        path = full;
        exists = true;
      }
    }
  }
  if (!exists) {
    r->all_polled = false;
    TC_LOG_ERROR(
        "model_repository_manager.cc", 1464,
        "failed to poll model '" + name +
            "': model not found in any model repository.");
    return;
  }
  ModelInfo info;
  Status s = InitializeModelInfo(name, path, params, &info);
  if (s.ok()) {
    r->ok.emplace(name, std::move(info));
  } else {
    TC_LOG_ERROR(
        "model_repository_manager.cc", 1509,
        "Poll failed for model directory '" + name + "': " + s.msg());
    r->failed.insert(name);
    r->all_polled = false;
  }
}

// ---------------------------------------------------------------------------
// Life cycle
// ---------------------------------------------------------------------------
namespace {

// The names of a Python model's stubs, as real Triton r25.07 reports them
// ("Stub process '<name>' is not healthy", TRITON_FACTS.md): '<model>_<i>'
// for a model without instance groups, the instance names
// ('<group>_<i>', the group named '<model>_<index>' when unnamed) for one
// that lists its groups.
std::vector<std::string>
StubNames(const ModelSpec& spec, bool default_group)
{
  if (!default_group) {
    return spec.instance_names;
  }
  std::vector<std::string> names;
  for (int i = 0; i < spec.instance_count; ++i) {
    names.push_back(spec.name + "_" + std::to_string(i));
  }
  return names;
}

}  // namespace

Status
ServerCore::CreateModel(
    const ModelInfo& info, int64_t version, std::shared_ptr<Model>* out)
{
  PMsg config = info.config;
  const bool ensemble = config.Str("platform") == "ensemble";
  if (config.Str("backend").empty() && !ensemble) {
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        "must specify 'backend' for '" + config.Str("name") + "'");
  }
  if (!opts.strict_model_config && config.Str("backend") == "python") {
    // The python backend lets the model complete its own configuration.
    TC_RETURN_IF_ERROR(PythonAutoCompleteConfig(info.path, version, &config));
    TC_RETURN_IF_ERROR(NormalizeConfig(info.name, info.path, &config));
    TC_RETURN_IF_ERROR(ValidateConfig(config));
    TC_RETURN_IF_ERROR(ValidateIOConfig(config));
  }
  ModelSpec spec;
  bool default_group = false;
  if (ensemble) {
    // Ensembles have no instances of their own; a few scheduler threads let
    // several ensemble requests be in flight at once.
    spec = SpecFromConfig(config);
    spec.instance_count = 4;
  } else {
    default_group = config.Msgs("instance_group").empty();
    TC_RETURN_IF_ERROR(NormalizeAndValidateInstanceGroups(&config));
    spec = SpecFromConfig(config);
  }
  std::unique_ptr<Backend> backend;
  BackendArgs args;
  args.spec = &spec;
  args.config = &config;
  args.model_path = info.path;
  args.version = version;
  args.server = shared_from_this();
  TC_RETURN_IF_ERROR(CreateBackend(args, &backend));
  std::unique_ptr<StubProcesses> stubs;
  if (spec.backend == "python") {
    TC_RETURN_IF_ERROR(
        StubProcesses::Start(StubNames(spec, default_group), &stubs));
  }
  const uint64_t t0 = NowNs();

  Model* m = new Model();
  m->name = info.name;
  m->version = version;
  m->gen = g_next_gen++;
  m->spec = std::move(spec);
  m->config = std::move(config);
  m->path = info.path;
  m->repo_config_json = ReloadSignature(info.config);
  m->version_mtime = VersionTimestamp(info.path, version);
  m->keepalive = info.tempdir;
  m->backend = std::move(backend);
  m->backend->Attach(m);
  m->stubs = std::move(stubs);
  if (opts.metrics) {
    m->metrics = GetMetricReporter(info.name, version);
    m->metrics->load_secs = static_cast<double>(NowNs() - t0) / 1e9;
    m->metrics->identity_backend = m->spec.backend == "identity";
  }
  m->executor = StartExecutor(m->spec);
  std::weak_ptr<ServerCore> weak = shared_from_this();
  out->reset(m, [weak](Model* p) {
    // A Python instance whose stub died never finishes unloading, as in
    // real Triton: it is kept (with its threads) for the process's life,
    // and counts as a live model when the server stops.
    if (p->stubs && !p->stubs->Unhealthy().empty()) {
      TC_LOG_INFO(
          "model_lifecycle.cc", 636,
          "unloading '" + p->name + "' version " + std::to_string(p->version) +
              " waits for a stub that is not healthy");
      if (auto core = weak.lock()) {
        core->stuck_instances++;
        core->Notify();
      }
      return;
    }
    // A backend library's instances and model are finalized as the model
    // goes, before its unload is complete (Triton's ~TritonModel): nothing
    // executes any more, since every execution holds the model.
    if (p->backend && p->backend->FromLibrary()) {
      p->backend.reset();
    }
    if (auto core = weak.lock()) {
      core->OnModelDestroyed(p);
    } else {
      TC_LOG_INFO(
          "model_lifecycle.cc", 636,
          "successfully unloaded '" + p->name + "' version " +
              std::to_string(p->version));
    }
    delete p;
  });
  {
    std::lock_guard<std::mutex> lk(mu);
    backends_used.insert(m->spec.backend);
    if (m->backend->FromLibrary()) {
      backend_paths[m->spec.backend] = m->backend->LibraryPath();
    }
  }
  return Status();
}

void
ServerCore::OnModelDestroyed(Model* m)
{
  TC_LOG_INFO(
      "model_lifecycle.cc", 636,
      "successfully unloaded '" + m->name + "' version " +
          std::to_string(m->version));
  {
    std::lock_guard<std::mutex> lk(mu);
    background.erase(m->gen);
    auto it = lifecycle.find(m->name);
    if (it != lifecycle.end()) {
      auto vit = it->second.find(m->version);
      if (vit != it->second.end() && vit->second.gen == m->gen &&
          vit->second.state == ReadyState::kUnloading) {
        vit->second.state = ReadyState::kUnavailable;
        vit->second.reason = "unloaded";
      }
    }
  }
  cv.notify_all();
}

void
ServerCore::ReleaseModel(const std::string& name)
{
  std::vector<std::shared_ptr<Model>> released;
  {
    std::lock_guard<std::mutex> lk(mu);
    auto it = lifecycle.find(name);
    if (it == lifecycle.end()) {
      return;
    }
    for (auto& v : it->second) {
      if (v.second.state == ReadyState::kReady) {
        v.second.state = ReadyState::kUnloading;
        v.second.reason.clear();
        released.push_back(std::move(v.second.model));
        v.second.model.reset();
      }
    }
  }
  released.clear();  // may run deleters (outside the lock)
}

Status
ServerCore::LoadVersions(const ModelInfo& info)
{
  const std::string& name = info.name;
  const std::vector<int64_t> versions = VersionsToLoad(info);
  {
    std::lock_guard<std::mutex> lk(mu);
    lifecycle[name];
  }
  if (versions.empty()) {
    const std::string msg =
        "at least one version must be available under the version policy of "
        "model '" + name + "'";
    TC_LOG_ERROR(
        "model_repository_manager.cc", 770,
        "failed to load model '" + name + "': " + msg);
    return Err(TRITONSERVER_ERROR_INVALID_ARG, msg);
  }
  {
    std::lock_guard<std::mutex> lk(mu);
    for (int64_t v : versions) {
      TC_LOG_INFO(
          "model_lifecycle.cc", 473,
          "loading: " + name + ":" + std::to_string(v));
      VersionSlot& slot = lifecycle[name][v];
      if (slot.state != ReadyState::kReady) {
        slot.state = ReadyState::kLoading;
        slot.reason.clear();
      }
    }
  }
  std::map<int64_t, std::shared_ptr<Model>> created;
  std::string reason;
  std::map<int64_t, Status> failures;
  // Like Triton, a READY version whose files and configuration (apart from
  // the version policy) are unchanged is kept as it is instead of being
  // reloaded (Triton also updates instance groups in place; the test core
  // reloads when they change).
  std::set<int64_t> kept;
  {
    const std::string cfg = ReloadSignature(info.config);
    std::lock_guard<std::mutex> lk(mu);
    for (int64_t v : versions) {
      const VersionSlot& slot = lifecycle[name][v];
      if (slot.state == ReadyState::kReady && slot.model &&
          slot.model->path == info.path && slot.model->repo_config_json == cfg &&
          slot.model->version_mtime == VersionTimestamp(info.path, v)) {
        kept.insert(v);
      }
    }
  }
  for (int64_t v : versions) {
    if (kept.count(v) != 0) {
      continue;
    }
    std::shared_ptr<Model> m;
    Status s;
    // A failed load is retried model_load_retry_count times; with the count
    // unset, without end (TRITON_FACTS.md "Load retries are unbounded
    // unless set": ServerNew and loads never returned).
    for (unsigned attempt = 0;; ++attempt) {
      s = CreateModel(info, v, &m);
      if (s.ok()) {
        break;
      }
      TC_LOG_ERROR(
          "model_lifecycle.cc", 654,
          "failed to load '" + name + "' version " + std::to_string(v) +
              ": " + s.AsString());
      if (opts.model_load_retry_count_set &&
          attempt >= opts.model_load_retry_count) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (s.ok()) {
      created[v] = std::move(m);
    } else {
      failures[v] = s;
      reason += "version " + std::to_string(v) +
                " is at UNAVAILABLE state: " + s.AsString() + ";";
    }
  }
  std::vector<std::shared_ptr<Model>> released;
  if (!failures.empty()) {
    {
      std::lock_guard<std::mutex> lk(mu);
      auto& vmap = lifecycle[name];
      for (auto& c : created) {
        VersionSlot& slot = vmap[c.first];
        if (slot.state == ReadyState::kReady) {
          background[c.second->gen] = {name, c.second};
        } else {
          slot.state = ReadyState::kUnloading;
          slot.gen = c.second->gen;
          slot.weak = c.second;
        }
        released.push_back(c.second);
      }
      for (auto& f : failures) {
        VersionSlot& slot = vmap[f.first];
        if (slot.state != ReadyState::kReady) {
          slot.state = ReadyState::kUnavailable;
          slot.reason = f.second.AsString();
          slot.gen = 0;
        }
      }
    }
    created.clear();
    released.clear();
    TC_LOG_INFO("model_lifecycle.cc", 789, "failed to load '" + name + "'");
    return Err(TRITONSERVER_ERROR_INVALID_ARG, reason);
  }
  {
    std::lock_guard<std::mutex> lk(mu);
    auto& vmap = lifecycle[name];
    for (auto& v : vmap) {
      if (v.second.state == ReadyState::kReady && created.count(v.first) == 0 &&
          kept.count(v.first) == 0) {
        v.second.state = ReadyState::kUnloading;
        released.push_back(std::move(v.second.model));
        v.second.model.reset();
      }
    }
    for (auto& c : created) {
      VersionSlot& slot = vmap[c.first];
      if (slot.model) {
        background[slot.gen] = {name, slot.model};
        released.push_back(std::move(slot.model));
      }
      slot.state = ReadyState::kReady;
      slot.reason.clear();
      slot.model = c.second;
      slot.weak = c.second;
      slot.gen = c.second->gen;
    }
  }
  created.clear();
  released.clear();
  TC_LOG_INFO("model_lifecycle.cc", 849, "successfully loaded '" + name + "'");
  return Status();
}

// ---------------------------------------------------------------------------
// Repository operations
// ---------------------------------------------------------------------------
namespace {
bool
IsModified(const ModelInfo& old_info, const ModelInfo& new_info)
{
  if (new_info.override_config || new_info.tempdir != nullptr) {
    return true;
  }
  // After a load with a `config` override, a plain load keeps the override
  // unless the model's files changed since (TRITON_FACTS.md "Reload keeps an
  // override": Triton fails to record the override's time, logging "Failed
  // to set config modification time").
  if (old_info.override_config) {
    return new_info.mtime > old_info.mtime;
  }
  return new_info.mtime > old_info.mtime ||
         new_info.config_text != old_info.config_text;
}
}  // namespace

Status
ServerCore::PollAndUpdate(bool* all_polled)
{
  std::lock_guard<std::mutex> op(load_mu_);
  PollResult r;
  PollAll(&r);
  *all_polled = r.all_polled;
  std::map<std::string, ModelInfo> old_infos;
  {
    std::lock_guard<std::mutex> lk(mu);
    old_infos = infos;
  }
  std::map<std::string, ModelInfo> new_infos;
  std::vector<std::string> to_load, deleted;
  for (auto& p : r.ok) {
    auto it = old_infos.find(p.first);
    if (it == old_infos.end() || IsModified(it->second, p.second)) {
      to_load.push_back(p.first);
      new_infos[p.first] = p.second;
    } else {
      new_infos[p.first] = it->second;
    }
  }
  for (const auto& f : r.failed) {
    auto it = old_infos.find(f);
    if (it != old_infos.end()) {
      new_infos[f] = it->second;
    }
  }
  for (const auto& p : old_infos) {
    if (new_infos.count(p.first) == 0) {
      deleted.push_back(p.first);
    }
  }
  if (to_load.empty() && deleted.empty()) {
    return Status();
  }
  {
    std::lock_guard<std::mutex> lk(mu);
    infos = new_infos;
  }
  for (const auto& d : deleted) {
    ReleaseModel(d);
  }
  for (const auto& n : to_load) {
    Status s = LoadVersions(new_infos[n]);
    if (!s.ok()) {
      std::lock_guard<std::mutex> lk(mu);
      auto it = infos.find(n);
      if (it != infos.end()) {
        it->second.mtime = 0;  // retried on the next poll
      }
    }
  }
  return Status();
}

Status
ServerCore::LoadModel(
    const std::string& name,
    const std::vector<const TRITONSERVER_Parameter*>& params)
{
  if (opts.control_mode != TRITONSERVER_MODEL_CONTROL_EXPLICIT) {
    return Err(
        TRITONSERVER_ERROR_UNAVAILABLE,
        "explicit model load / unload is not allowed if polling is enabled");
  }
  std::lock_guard<std::mutex> op(load_mu_);
  ReapThreads();
  std::set<std::string> loading;
  return LoadModelLocked(name, params, &loading);
}

Status
ServerCore::LoadModelLocked(
    const std::string& name,
    const std::vector<const TRITONSERVER_Parameter*>& params,
    std::set<std::string>* loading)
{
  loading->insert(name);
  PollResult r;
  PollOne(name, params, &r);
  if (!r.all_polled) {
    return Err(
        TRITONSERVER_ERROR_INTERNAL,
        "failed to load '" + name + "', failed to poll from model repository");
  }
  ModelInfo info = r.ok[name];
  // Like Triton, loading an ensemble loads the models of its steps first.
  if (const PMsg* es = info.config.Msg("ensemble_scheduling")) {
    for (const PMsg& step : es->Msgs("step")) {
      const std::string dep = step.Str("model_name");
      if (dep.empty() || loading->count(dep) != 0 || !ReadyVersions(dep).empty()) {
        continue;
      }
      Status s = LoadModelLocked(dep, {}, loading);
      if (!s.ok()) {
        return Err(
            s.code(), "load failed for model '" + name + "': ensemble step model '" +
                          dep + "' did not load: " + s.msg());
      }
    }
  }
  bool needs_load = true;
  {
    std::lock_guard<std::mutex> lk(mu);
    auto it = infos.find(name);
    if (it != infos.end() && !IsModified(it->second, info)) {
      auto lit = lifecycle.find(name);
      if (lit != lifecycle.end()) {
        for (const auto& v : lit->second) {
          if (v.second.state == ReadyState::kReady) {
            needs_load = false;
          }
        }
      }
    }
    if (needs_load) {
      infos[name] = info;
    }
  }
  if (needs_load) {
    Status s = LoadVersions(info);
    if (!s.ok()) {
      {
        std::lock_guard<std::mutex> lk(mu);
        infos[name].mtime = 0;
      }
      return Err(
          TRITONSERVER_ERROR_INVALID_ARG,
          "load failed for model '" + name + "': " + s.msg() + "\n");
    }
  }
  std::lock_guard<std::mutex> lk(mu);
  auto lit = lifecycle.find(name);
  if (lit == lifecycle.end() || lit->second.empty()) {
    return Err(
        TRITONSERVER_ERROR_INTERNAL,
        "failed to load '" + name + "', no version is available");
  }
  return Status();
}

Status
ServerCore::UnloadModel(const std::string& name)
{
  if (opts.control_mode != TRITONSERVER_MODEL_CONTROL_EXPLICIT) {
    return Err(
        TRITONSERVER_ERROR_UNAVAILABLE,
        "explicit model load / unload is not allowed if polling is enabled");
  }
  std::lock_guard<std::mutex> op(load_mu_);
  ReapThreads();
  {
    std::lock_guard<std::mutex> lk(mu);
    infos.erase(name);
  }
  ReleaseModel(name);
  return Status();
}

Status
ServerCore::RegisterRepository(
    const std::string& path, const std::map<std::string, std::string>& mapping)
{
  if (opts.control_mode != TRITONSERVER_MODEL_CONTROL_EXPLICIT) {
    return Err(
        TRITONSERVER_ERROR_UNSUPPORTED,
        "repository registration is not allowed if model control mode is not "
        "EXPLICIT");
  }
  if (!IsDir(path)) {
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        "failed to register '" + path + "', repository not found");
  }
  {
    std::lock_guard<std::mutex> lk(mu);
    if (repo_paths.count(path) != 0) {
      return Err(
          TRITONSERVER_ERROR_ALREADY_EXISTS,
          "model repository '" + path + "' has already been registered");
    }
    for (const auto& m : mapping) {
      if (mappings.count(m.first) != 0) {
        return Err(
            TRITONSERVER_ERROR_ALREADY_EXISTS,
            "failed to register '" + m.first +
                "', there is a conflicting mapping for '" + m.first + "'");
      }
    }
    repo_paths.insert(path);
    for (const auto& m : mapping) {
      mappings[m.first] = {path, path + "/" + m.second};
    }
  }
  TC_LOG_INFO(
      "model_repository_manager.cc", 1766,
      "Model repository registered: " + path);
  return Status();
}

Status
ServerCore::UnregisterRepository(const std::string& path)
{
  if (opts.control_mode != TRITONSERVER_MODEL_CONTROL_EXPLICIT) {
    return Err(
        TRITONSERVER_ERROR_UNSUPPORTED,
        "repository unregistration is not allowed if model control mode is "
        "not EXPLICIT");
  }
  {
    std::lock_guard<std::mutex> lk(mu);
    if (repo_paths.erase(path) != 1) {
      return Err(
          TRITONSERVER_ERROR_INVALID_ARG,
          "failed to unregister '" + path + "', repository not found");
    }
    for (auto it = mappings.begin(); it != mappings.end();) {
      if (it->second.first == path) {
        it = mappings.erase(it);
      } else {
        ++it;
      }
    }
  }
  TC_LOG_INFO(
      "model_repository_manager.cc", 1798,
      "Model repository unregistered: " + path);
  return Status();
}

// ---------------------------------------------------------------------------
// Queries
// ---------------------------------------------------------------------------
Status
ServerCore::GetModel(
    const std::string& name, int64_t version, std::shared_ptr<Model>* m)
{
  const std::string prefix = "Request for unknown model: ";
  std::lock_guard<std::mutex> lk(mu);
  auto it = lifecycle.find(name);
  if (it == lifecycle.end()) {
    return Err(
        TRITONSERVER_ERROR_NOT_FOUND, prefix + "'" + name + "' is not found");
  }
  if (version == -1) {
    for (auto v = it->second.rbegin(); v != it->second.rend(); ++v) {
      if (v->second.state == ReadyState::kReady && v->second.model) {
        *m = v->second.model;
        return Status();
      }
    }
    return Err(
        TRITONSERVER_ERROR_NOT_FOUND,
        prefix + "'" + name + "' has no available versions");
  }
  auto vit = it->second.find(version);
  if (vit == it->second.end()) {
    return Err(
        TRITONSERVER_ERROR_NOT_FOUND, prefix + "'" + name + "' version " +
                                          std::to_string(version) +
                                          " is not found");
  }
  if (vit->second.state != ReadyState::kReady || !vit->second.model) {
    return Err(
        TRITONSERVER_ERROR_UNAVAILABLE,
        prefix + "'" + name + "' version " + std::to_string(version) +
            " is not at ready state");
  }
  *m = vit->second.model;
  return Status();
}

std::vector<int64_t>
ServerCore::ReadyVersions(const std::string& name)
{
  std::vector<int64_t> out;
  std::lock_guard<std::mutex> lk(mu);
  auto it = lifecycle.find(name);
  if (it != lifecycle.end()) {
    for (const auto& v : it->second) {
      if (v.second.state == ReadyState::kReady) {
        out.push_back(v.first);
      }
    }
  }
  return out;
}

std::map<std::string, std::vector<int64_t>>
ServerCore::AllReadyVersions()
{
  std::map<std::string, std::vector<int64_t>> out;
  std::lock_guard<std::mutex> lk(mu);
  for (const auto& m : lifecycle) {
    for (const auto& v : m.second) {
      if (v.second.state == ReadyState::kReady) {
        out[m.first].push_back(v.first);
      }
    }
  }
  return out;
}

Status
ServerCore::RepositoryIndex(bool ready_only, json::Value* out)
{
  std::set<std::string> repos;
  std::map<std::string, std::pair<std::string, std::string>> maps;
  {
    std::lock_guard<std::mutex> lk(mu);
    repos = repo_paths;
    maps = mappings;
  }
  std::set<std::string> seen, dups;
  for (const auto& repo : repos) {
    std::map<std::string, std::string> in_repo;  // subdir -> model name
    for (const auto& m : maps) {
      if (m.second.first == repo) {
        const std::string& full = m.second.second;
        in_repo[full.substr(full.find_last_of('/') + 1)] = m.first;
      }
    }
    std::set<std::string> subdirs;
    TC_RETURN_IF_ERROR(ListDir(repo, true, &subdirs));
    for (const auto& d : subdirs) {
      auto mit = in_repo.find(d);
      const std::string id = mit != in_repo.end() ? mit->second : d;
      if (!seen.insert(id).second) {
        dups.insert(id);
      }
    }
  }
  *out = json::Value::Array();
  std::lock_guard<std::mutex> lk(mu);
  for (const auto& id : seen) {
    if (dups.count(id)) {
      json::Value e = json::Value::Object();
      e.Add("name", json::Value::Str(id));
      e.Add("state", json::Value::Str("UNAVAILABLE"));
      e.Add("reason", json::Value::Str("model appears in two or more repositories"));
      out->Append(std::move(e));
      continue;
    }
    auto it = lifecycle.find(id);
    if (it == lifecycle.end()) {
      if (!ready_only) {
        json::Value e = json::Value::Object();
        e.Add("name", json::Value::Str(id));
        out->Append(std::move(e));
      }
      continue;
    }
    for (const auto& v : it->second) {
      if (ready_only && v.second.state != ReadyState::kReady) {
        continue;
      }
      json::Value e = json::Value::Object();
      e.Add("name", json::Value::Str(id));
      if (v.first >= 0) {
        e.Add("version", json::Value::Str(std::to_string(v.first)));
      }
      e.Add("state", json::Value::Str(ReadyStateString(v.second.state)));
      if (!v.second.reason.empty()) {
        e.Add("reason", json::Value::Str(v.second.reason));
      }
      out->Append(std::move(e));
    }
  }
  return Status();
}

bool
ServerCore::IsReadyStrict()
{
  std::lock_guard<std::mutex> lk(mu);
  for (const auto& m : lifecycle) {
    if (m.second.empty()) {
      return false;
    }
    for (const auto& v : m.second) {
      if (v.second.state != ReadyState::kReady &&
          v.second.reason != "unloaded") {
        return false;
      }
    }
  }
  return true;
}

bool
ServerCore::ModelIsReady(const Model& m)
{
  std::lock_guard<std::mutex> lk(mu);
  auto it = lifecycle.find(m.name);
  if (it == lifecycle.end()) {
    return false;
  }
  auto vit = it->second.find(m.version);
  return vit != it->second.end() && vit->second.state == ReadyState::kReady &&
         vit->second.gen == m.gen;
}

size_t
ServerCore::LiveModelCount()
{
  std::lock_guard<std::mutex> lk(mu);
  size_t n = background.size() + stuck_instances.load();
  for (const auto& m : lifecycle) {
    for (const auto& v : m.second) {
      if (v.second.state == ReadyState::kReady ||
          v.second.state == ReadyState::kLoading ||
          v.second.state == ReadyState::kUnloading) {
        ++n;
      }
    }
  }
  return n;
}

std::vector<std::tuple<std::string, int64_t, size_t>>
ServerCore::InflightStatus()
{
  std::vector<std::shared_ptr<Model>> models;
  {
    std::lock_guard<std::mutex> lk(mu);
    for (const auto& m : lifecycle) {
      for (const auto& v : m.second) {
        if (auto sp = v.second.weak.lock()) {
          models.push_back(sp);
        }
      }
    }
  }
  std::vector<std::tuple<std::string, int64_t, size_t>> out;
  for (const auto& m : models) {
    std::lock_guard<std::mutex> lk(m->executor->mu);
    if (m->executor->inflight > 0) {
      out.emplace_back(m->name, m->version, m->executor->inflight);
    }
  }
  // Dropping 'models' may run a deleter; 'mu' is not held here.
  models.clear();
  return out;
}

// ---------------------------------------------------------------------------
// Start, stop, threads
// ---------------------------------------------------------------------------
Status
ServerCore::Init()
{
  state = ServerState::kInitializing;
  if (opts.repo_paths.empty()) {
    state = ServerState::kFailed;
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG, "--model-repository must be specified");
  }
  if (opts.cache_config.size() > 1) {
    state = ServerState::kFailed;
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        "found multiple cache configurations, but only a single cache is "
        "currently supported");
  }
  for (const auto& p : opts.repo_paths) {
    struct stat st;
    if (stat(p.c_str(), &st) != 0) {
      state = ServerState::kFailed;
      return Err(TRITONSERVER_ERROR_INTERNAL, "failed to stat file " + p);
    }
    if (!S_ISDIR(st.st_mode)) {
      state = ServerState::kFailed;
      return Err(
          TRITONSERVER_ERROR_INVALID_ARG,
          "repository path is not a valid directory");
    }
  }
  {
    std::lock_guard<std::mutex> lk(mu);
    repo_paths = opts.repo_paths;
  }
  const bool explicit_mode =
      opts.control_mode == TRITONSERVER_MODEL_CONTROL_EXPLICIT;
  bool load_all = false;
  if (explicit_mode && opts.startup_models.count("*") != 0) {
    if (opts.startup_models.size() > 1) {
      state = ServerState::kReady;
      PrintModelTables();
      return Err(
          TRITONSERVER_ERROR_INVALID_ARG,
          "Wildcard model name '*' must be the ONLY startup model if "
          "specified at all.");
    }
    load_all = true;
  }
  bool all_polled = true;
  if (!explicit_mode || load_all) {
    PollAndUpdate(&all_polled);
  } else {
    std::lock_guard<std::mutex> op(load_mu_);
    for (const auto& name : opts.startup_models) {
      PollResult r;
      PollOne(name, {}, &r);
      if (!r.all_polled) {
        all_polled = false;
        continue;
      }
      {
        std::lock_guard<std::mutex> lk(mu);
        infos[name] = r.ok[name];
      }
      LoadVersions(r.ok[name]);
    }
  }
  state = ServerState::kReady;
  PrintModelTables();
  if (!all_polled) {
    return Err(TRITONSERVER_ERROR_INTERNAL, "failed to load all models");
  }
  std::lock_guard<std::mutex> lk(mu);
  for (const auto& i : infos) {
    auto it = lifecycle.find(i.first);
    if (it == lifecycle.end() || it->second.empty()) {
      return Err(TRITONSERVER_ERROR_INTERNAL, "failed to load all models");
    }
    for (const auto& v : it->second) {
      if (v.second.state != ReadyState::kReady) {
        return Err(TRITONSERVER_ERROR_INTERNAL, "failed to load all models");
      }
    }
  }
  return Status();
}

void
ServerCore::PrintModelTables()
{
  if (!LogIsEnabled(LogLevel::kInfo)) {
    return;
  }
  Table agents({"Repository Agent", "Path"});
  LogTable("server.cc", 611, agents);
  Table backends({"Backend", "Path", "Config"});
  Table models({"Model", "Version", "Status"});
  {
    std::lock_guard<std::mutex> lk(mu);
    for (const auto& b : backends_used) {
      const std::string lib =
          b == "python" ? "libtriton_python.so" : "libtriton_" + b + ".so";
      auto path = backend_paths.find(b);
      backends.AddRow(
          {b,
           path != backend_paths.end() ? path->second
                                       : opts.backend_dir + "/" + b + "/" + lib,
           std::string("{\"cmdline\":{\"auto-complete-config\":\"") +
               (opts.strict_model_config ? "false" : "true") +
               "\",\"backend-directory\":\"" + opts.backend_dir +
               "\",\"min-compute-capability\":\"" +
               std::to_string(opts.min_compute_capability) +
               "\",\"default-max-batch-size\":\"4\"}}"});
    }
    for (const auto& m : lifecycle) {
      if (m.second.empty()) {
        models.AddRow({m.first, "-", "Not loaded: No model version was found"});
        continue;
      }
      for (const auto& v : m.second) {
        std::string status = ReadyStateString(v.second.state);
        if (!v.second.reason.empty()) {
          status += ": " + v.second.reason;
        }
        models.AddRow({m.first, std::to_string(v.first), status});
      }
    }
  }
  LogTable("server.cc", 638, backends);
  LogTable("server.cc", 681, models);
}

Status
ServerCore::Stop(bool force)
{
  if (force) {
    const ServerState prev = state.exchange(ServerState::kExiting);
    if (prev != ServerState::kReady && prev != ServerState::kExiting) {
      TC_LOG_INFO(
          "server.cc", 309, "No server context available. Exiting immediately.");
      return Status();
    }
  } else {
    ServerState expected = ServerState::kReady;
    if (!state.compare_exchange_strong(expected, ServerState::kExiting)) {
      return Status();
    }
  }
  TC_LOG_INFO("server.cc", 312, "Waiting for in-flight requests to complete.");
  using Clock = std::chrono::steady_clock;
  const auto deadline =
      Clock::now() + std::chrono::seconds(opts.exit_timeout);
  bool unloading = false;
  std::string last_log;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    const long secs_left =
        left.count() <= 0 ? 0 : static_cast<long>((left.count() + 999) / 1000);
    if (!unloading) {
      auto inflight = InflightStatus();
      std::string log = "Timeout " + std::to_string(secs_left) + ": Found " +
                        std::to_string(inflight.size()) +
                        " model versions that have in-flight inferences";
      if (log != last_log) {
        TC_LOG_INFO("server.cc", 328, log);
        for (const auto& i : inflight) {
          TC_LOG_INFO(
              "server.cc", 332,
              "Model '" + std::get<0>(i) + "' (version " +
                  std::to_string(std::get<1>(i)) + ") has " +
                  std::to_string(std::get<2>(i)) + " in-flight inferences");
        }
        last_log = log;
      }
      if (inflight.empty()) {
        std::vector<std::string> names;
        {
          std::lock_guard<std::mutex> lk(mu);
          for (const auto& i : infos) {
            names.push_back(i.first);
          }
          infos.clear();
          for (const auto& l : lifecycle) {
            names.push_back(l.first);
          }
        }
        {
          std::lock_guard<std::mutex> op(load_mu_);
          for (const auto& n : names) {
            ReleaseModel(n);
          }
        }
        unloading = true;
        TC_LOG_INFO("server.cc", 343, "All models are stopped, unloading models");
        continue;
      }
    } else {
      const size_t live = LiveModelCount();
      std::string log = "Timeout " + std::to_string(secs_left) + ": Found " +
                        std::to_string(live) + " live models and " +
                        std::to_string(inflight_non_inference.load()) +
                        " in-flight non-inference requests";
      if (log != last_log) {
        TC_LOG_INFO("server.cc", 352, log);
        last_log = log;
      }
      if (live == 0 && inflight_non_inference.load() == 0) {
        ReapThreads();
        return Status();
      }
    }
    if (Clock::now() >= deadline) {
      break;
    }
    std::unique_lock<std::mutex> lk(mu);
    cv.wait_until(
        lk, std::min(deadline, Clock::now() + std::chrono::milliseconds(200)));
  }
  return Err(
      TRITONSERVER_ERROR_INTERNAL, "Exit timeout expired. Exiting immediately.");
}

void
ServerCore::Notify()
{
  {
    std::lock_guard<std::mutex> lk(mu);
  }
  cv.notify_all();
}

std::shared_ptr<Executor>
ServerCore::StartExecutor(const ModelSpec& spec)
{
  ReapThreads();
  auto ex = std::make_shared<Executor>();
  std::weak_ptr<ServerCore> weak = shared_from_this();
  ex->on_change = [weak]() {
    if (auto c = weak.lock()) {
      c->Notify();
    }
  };
  std::vector<std::thread> threads;
  ex->alive_threads = spec.instance_count;
  for (int i = 0; i < spec.instance_count; ++i) {
    threads.emplace_back(WorkerLoop, ex, static_cast<size_t>(i));
  }
  std::lock_guard<std::mutex> lk(threads_mu_);
  executors_.emplace_back(ex, std::move(threads));
  return ex;
}

void
ServerCore::ReapThreads()
{
  std::vector<std::thread> done;
  {
    std::lock_guard<std::mutex> lk(threads_mu_);
    for (auto it = executors_.begin(); it != executors_.end();) {
      if (it->first->alive_threads.load() == 0) {
        for (auto& t : it->second) {
          done.push_back(std::move(t));
        }
        it = executors_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& t : done) {
    if (t.joinable()) {
      t.join();
    }
  }
}

void
ServerCore::ShutdownThreads()
{
  std::vector<std::pair<std::shared_ptr<Executor>, std::vector<std::thread>>>
      all;
  {
    std::lock_guard<std::mutex> lk(threads_mu_);
    all.swap(executors_);
  }
  for (auto& e : all) {
    std::lock_guard<std::mutex> lk(e.first->mu);
    e.first->stop = true;
    e.first->cv.notify_all();
  }
  for (auto& e : all) {
    for (auto& t : e.second) {
      if (!t.joinable()) {
        continue;
      }
      if (t.get_id() == std::this_thread::get_id()) {
        t.detach();  // deleting a server from its own callback
      } else {
        t.join();
      }
    }
  }
}

ServerCore::~ServerCore()
{
  ShutdownThreads();
}

}  // namespace tc
