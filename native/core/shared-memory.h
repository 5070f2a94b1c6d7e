// System shared memory regions of one server (Triton's system shared memory
// extension, in-process): a client creates a POSIX shared memory segment,
// registers a range of it under a name, and requests then read inputs from
// it and write outputs into it instead of carrying the bytes.
//
// Each registered region is one mmap of its range, shared by the registry and
// by every request that uses it: unregistering (or the server stopping)
// removes the name at once, and the range is unmapped when the last request
// that uses it lets go. A client that unlinks its segment leaves the mapping
// valid (the kernel keeps the memory until it is unmapped).
#pragma once

#include <napi.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "errors.h"

namespace tsn {

// One mapped region. Immutable once made; unmapped by its destructor.
class SharedMemoryMapping {
 public:
  SharedMemoryMapping(std::string name, std::string key, uint64_t offset,
                      uint64_t byte_size, void* map_base, size_t map_length,
                      size_t lead);
  ~SharedMemoryMapping();
  SharedMemoryMapping(const SharedMemoryMapping&) = delete;
  SharedMemoryMapping& operator=(const SharedMemoryMapping&) = delete;

  const std::string& name() const { return name_; }
  const std::string& key() const { return key_; }
  uint64_t offset() const { return offset_; }
  uint64_t byte_size() const { return byte_size_; }
  // The region's first byte (the segment's byte at `offset`).
  char* data() const { return static_cast<char*>(map_base_) + lead_; }

 private:
  std::string name_, key_;
  uint64_t offset_, byte_size_;
  void* map_base_;     // page-aligned start of the mmap
  size_t map_length_;  // lead_ + byte_size_
  size_t lead_;        // bytes between the page boundary and `offset`
};

using SharedMemoryRef = std::shared_ptr<const SharedMemoryMapping>;

// A range of a region a request reads or writes; `hold` keeps it mapped.
struct SharedMemorySpan {
  SharedMemoryRef hold;
  char* data = nullptr;
  size_t size = 0;
};

class SharedMemoryRegistry {
 public:
  struct Status {
    std::string name, key;
    uint64_t offset, byte_size;
  };

  // shm_open(key) + fstat + mmap of [offset, offset + byte_size).
  std::optional<Failure> Register(const std::string& name, const std::string& key,
                                  uint64_t offset, uint64_t byte_size);
  // Removes the name (no error when it is not registered, as Triton).
  void Unregister(const std::string& name);
  void UnregisterAll();
  // Every region (name null) or one (NOT_FOUND when unknown).
  std::optional<Failure> GetStatus(const std::string* name,
                                   std::vector<Status>* out);
  // The range [offset, offset + byte_size) of a region, bounds-checked.
  std::optional<Failure> Acquire(const std::string& name, uint64_t offset,
                                 uint64_t byte_size, SharedMemorySpan* span);
  // The server stops: every region is unregistered, and no more can be.
  void Close();

 private:
  std::mutex mutex_;
  std::map<std::string, SharedMemoryRef> regions_;
  bool closed_ = false;
};

// Mappings not yet unmapped, process-wide (tests and leak hunting).
int64_t LiveSharedMemoryMappings();

// sharedMemory(op, ...) of a NativeServer: "register" name key offset size,
// "unregister" [name], "status" [name] → [{name, key, offset, byteSize}].
Napi::Value SharedMemoryCall(const Napi::CallbackInfo& info,
                             SharedMemoryRegistry& registry, bool closed);

// exports.liveSharedMemoryMappings().
void RegisterSharedMemory(Napi::Env env, Napi::Object exports);

}  // namespace tsn
