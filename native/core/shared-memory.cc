#include "shared-memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

namespace tsn {

namespace {

std::atomic<int64_t> live_mappings{0};

// Keys Triton keeps for the regions its Python backend makes itself.
constexpr char kReservedKeyPrefix[] = "triton_python_backend_shm_region_";

Failure Fail(TRITONSERVER_Error_Code code, std::string message) {
  return Failure{code, std::move(message)};
}

Failure InvalidRegisterArgs(const std::string& name) {
  return Fail(TRITONSERVER_ERROR_INVALID_ARG,
              "failed to register shared memory region '" + name + "': invalid args");
}

// A descriptor closed when it goes out of scope.
struct Descriptor {
  int fd = -1;
  ~Descriptor() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

SharedMemoryMapping::SharedMemoryMapping(std::string name, std::string key,
                                         uint64_t offset, uint64_t byte_size,
                                         void* map_base, size_t map_length,
                                         size_t lead)
    : name_(std::move(name)),
      key_(std::move(key)),
      offset_(offset),
      byte_size_(byte_size),
      map_base_(map_base),
      map_length_(map_length),
      lead_(lead) {
  live_mappings++;
}

SharedMemoryMapping::~SharedMemoryMapping() {
  munmap(map_base_, map_length_);
  live_mappings--;
}

int64_t LiveSharedMemoryMappings() { return live_mappings.load(); }

std::optional<Failure> SharedMemoryRegistry::Register(const std::string& name,
                                                      const std::string& key,
                                                      uint64_t offset,
                                                      uint64_t byte_size) {
  if (name.empty())
    return Fail(TRITONSERVER_ERROR_INVALID_ARG,
                "'region name' is necessary to register system shared memory region");
  if (key.rfind(kReservedKeyPrefix, 0) == 0)
    return Fail(TRITONSERVER_ERROR_INVALID_ARG,
                "cannot register shared memory region '" + name + "' with key '" + key +
                    "' as the key contains the reserved prefix '" + kReservedKeyPrefix + "'");
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_)
    return Fail(TRITONSERVER_ERROR_UNAVAILABLE, "the server has been stopped");
  if (regions_.count(name) != 0)
    return Fail(TRITONSERVER_ERROR_ALREADY_EXISTS,
                "shared memory region '" + name + "' already in manager");

  Descriptor segment;
  segment.fd = shm_open(key.c_str(), O_RDWR, S_IRUSR | S_IWUSR);
  if (segment.fd < 0)
    return Fail(TRITONSERVER_ERROR_INTERNAL,
                "Unable to open shared memory region: '" + key + "'");
  struct stat info;
  if (fstat(segment.fd, &info) != 0 || info.st_size < 0)
    return Fail(TRITONSERVER_ERROR_INTERNAL,
                "Invalid shared memory region: '" + key + "'");
  const uint64_t segment_size = static_cast<uint64_t>(info.st_size);
  // The range must lie inside the segment as it is now; an empty range
  // cannot be mapped.
  if (byte_size == 0 || offset > segment_size || byte_size > segment_size - offset)
    return InvalidRegisterArgs(name);
  if (byte_size > std::numeric_limits<size_t>::max() / 2)
    return InvalidRegisterArgs(name);

  // mmap wants a page-aligned file offset: map from the page the range
  // starts in, and point past the lead.
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t aligned = offset - offset % page;
  const size_t lead = static_cast<size_t>(offset - aligned);
  const size_t length = lead + static_cast<size_t>(byte_size);
  void* base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, segment.fd,
                    static_cast<off_t>(aligned));
  if (base == MAP_FAILED)
    return Fail(TRITONSERVER_ERROR_INVALID_ARG,
                "failed to register shared memory region '" + name +
                    "': unable to process address space: " + std::strerror(errno));
  // The descriptor closes here; the mapping keeps the memory.
  regions_.emplace(name, std::make_shared<const SharedMemoryMapping>(
                             name, key, offset, byte_size, base, length, lead));
  return std::nullopt;
}

void SharedMemoryRegistry::Unregister(const std::string& name) {
  SharedMemoryRef gone;  // unmapped outside the lock, if this was the last holder
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = regions_.find(name);
  if (found == regions_.end()) return;
  gone = std::move(found->second);
  regions_.erase(found);
}

void SharedMemoryRegistry::UnregisterAll() {
  std::map<std::string, SharedMemoryRef> gone;
  std::lock_guard<std::mutex> lock(mutex_);
  gone.swap(regions_);
}

void SharedMemoryRegistry::Close() {
  std::map<std::string, SharedMemoryRef> gone;
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  gone.swap(regions_);
}

std::optional<Failure> SharedMemoryRegistry::GetStatus(const std::string* name,
                                                       std::vector<Status>* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto add = [out](const SharedMemoryMapping& m) {
    out->push_back(Status{m.name(), m.key(), m.offset(), m.byte_size()});
  };
  if (name == nullptr) {
    for (const auto& entry : regions_) add(*entry.second);
    return std::nullopt;
  }
  auto found = regions_.find(*name);
  if (found == regions_.end())
    return Fail(TRITONSERVER_ERROR_NOT_FOUND,
                "Unable to find system shared memory region: '" + *name + "'");
  add(*found->second);
  return std::nullopt;
}

std::optional<Failure> SharedMemoryRegistry::Acquire(const std::string& name,
                                                     uint64_t offset,
                                                     uint64_t byte_size,
                                                     SharedMemorySpan* span) {
  SharedMemoryRef region;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = regions_.find(name);
    if (found == regions_.end())
      return Fail(TRITONSERVER_ERROR_NOT_FOUND,
                  "Unable to find shared memory region: '" + name + "'");
    region = found->second;
  }
  const uint64_t size = region->byte_size();
  if (offset >= size)
    return Fail(TRITONSERVER_ERROR_INVALID_ARG,
                "Invalid offset for shared memory region: '" + name + "'");
  if (byte_size > std::numeric_limits<uint64_t>::max() - offset)
    return Fail(TRITONSERVER_ERROR_INVALID_ARG,
                "Integer overflow detected: byte_size (" + std::to_string(byte_size) +
                    ") + offset (" + std::to_string(offset) +
                    ") exceeds maximum value (" +
                    std::to_string(std::numeric_limits<uint64_t>::max()) +
                    ") for region '" + name + "'");
  if (offset + byte_size > size)
    return Fail(TRITONSERVER_ERROR_INVALID_ARG,
                "Invalid offset + byte size for shared memory region: '" + name + "'");
  span->data = region->data() + offset;
  span->size = static_cast<size_t>(byte_size);
  span->hold = std::move(region);
  return std::nullopt;
}

namespace {

uint64_t ReadSize(const Napi::Value& value, const char* what) {
  double number = value.IsNumber() ? value.As<Napi::Number>().DoubleValue() : -1;
  if (!(number >= 0) || std::trunc(number) != number || number > 9007199254740991.0)
    throw ToJsError(value.Env(), TRITONSERVER_ERROR_INVALID_ARG,
                    std::string(what) + " must be a non-negative integer");
  return static_cast<uint64_t>(number);
}

}  // namespace

Napi::Value SharedMemoryCall(const Napi::CallbackInfo& info,
                             SharedMemoryRegistry& registry, bool closed) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString())
    throw ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG,
                    "sharedMemory(op, ...) takes an operation name");
  if (closed)
    throw ToJsError(env, TRITONSERVER_ERROR_UNAVAILABLE, "the server has been stopped");
  const std::string op = info[0].As<Napi::String>().Utf8Value();
  const bool named = info.Length() > 1 && info[1].IsString();
  const std::string name = named ? info[1].As<Napi::String>().Utf8Value() : std::string();
  if (op == "register") {
    if (!named || info.Length() < 5 || !info[2].IsString())
      throw ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG,
                      "register(name, key, offset, byteSize)");
    const uint64_t offset = ReadSize(info[3], "offset");
    const uint64_t byte_size = ReadSize(info[4], "byte_size");
    if (auto failure = registry.Register(name, info[2].As<Napi::String>().Utf8Value(),
                                         offset, byte_size))
      throw ToJsError(env, *failure);
    return env.Undefined();
  }
  if (op == "unregister") {
    if (named)
      registry.Unregister(name);
    else
      registry.UnregisterAll();
    return env.Undefined();
  }
  if (op == "status") {
    std::vector<SharedMemoryRegistry::Status> regions;
    if (auto failure = registry.GetStatus(named ? &name : nullptr, &regions))
      throw ToJsError(env, *failure);
    Napi::Array result = Napi::Array::New(env, regions.size());
    for (size_t i = 0; i < regions.size(); ++i) {
      Napi::Object region = Napi::Object::New(env);
      region.Set("name", regions[i].name);
      region.Set("key", regions[i].key);
      region.Set("offset", Napi::Number::New(env, static_cast<double>(regions[i].offset)));
      region.Set("byteSize",
                 Napi::Number::New(env, static_cast<double>(regions[i].byte_size)));
      result.Set(static_cast<uint32_t>(i), region);
    }
    return result;
  }
  throw ToJsError(env, TRITONSERVER_ERROR_INVALID_ARG,
                  "unknown shared memory operation '" + op + "'");
}

void RegisterSharedMemory(Napi::Env env, Napi::Object exports) {
  exports.Set("liveSharedMemoryMappings",
              Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
                return Napi::Number::New(
                    info.Env(), static_cast<double>(LiveSharedMemoryMappings()));
              }));
}

}  // namespace tsn
