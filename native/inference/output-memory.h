// The output memory pool: blocks that hold an output's bytes from Triton's
// allocator (its threads) until JS adopts them or they are given back (any
// thread). Triton's response allocator over it is in output-memory.cc.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "inference.h"

namespace tsn {

// Output memory is one block: this header, then the tensor bytes. Once JS
// adopts the bytes as an external ArrayBuffer, the allocator's release
// function leaves the block alone and the buffer's finalizer gives it back,
// so the Triton response can be deleted right away.
struct alignas(64) BufferHeader {
  bool adopted;
  uint8_t size_class;  // kUnpooled, or the pool's class it goes back to
};
inline constexpr size_t kHeaderSize = sizeof(BufferHeader);

// buffer_userp of an output Triton wrote into memory the caller gave.
inline char kCallerMemory;

// Triton's message for an output larger than the shared memory named for it.
inline std::string SharedMemoryTooSmall(const char* name, size_t given, size_t needed) {
  return std::string("shared memory size specified with the request for output '") + name + "' (" +
         std::to_string(given) + " bytes) should be at least " + std::to_string(needed) +
         " bytes to hold the results";
}

// Output blocks are taken on Triton's threads and given back on the JS
// thread (or by a finalizer): recycled by size class (powers of two from
// 256 B to 4 MiB) rather than malloc'd and freed each time, which makes the
// JS thread free into Triton's threads' malloc arenas under their lock, and
// makes large blocks fresh pages (page faults) every time. Process-wide, as
// blocks outlive the engine that made them; bounded in what it keeps.
class BlockPool {
 public:
  static constexpr uint8_t kUnpooled = 0xff;

  static BlockPool& Get() {
    static BlockPool* pool = new BlockPool();  // never destroyed: finalizers may run late
    return *pool;
  }

  BufferHeader* Take(size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
    // Under AddressSanitizer every block is malloc'd and freed, so a use
    // after it went back is reported instead of reading a recycled block.
    const uint8_t size_class = kUnpooled;
#else
    const uint8_t size_class = ClassOf(bytes);
#endif
    BufferHeader* header = nullptr;
    if (size_class != kUnpooled) {
      Class& c = classes_[size_class];
      std::lock_guard<std::mutex> lock(c.mutex);
      if (!c.free.empty()) {
        header = c.free.back();
        c.free.pop_back();
        kept_bytes_ -= BytesOf(size_class);
      }
    }
    if (header == nullptr) {
      const size_t capacity = size_class == kUnpooled ? bytes : BytesOf(size_class);
      // malloc aligns to 16 bytes only: the header (and the tensor bytes after it) want 64.
      const size_t total = (kHeaderSize + capacity + alignof(BufferHeader) - 1) / alignof(BufferHeader) * alignof(BufferHeader);
      header = static_cast<BufferHeader*>(std::aligned_alloc(alignof(BufferHeader), total));
      if (header == nullptr) return nullptr;
      header->size_class = size_class;
    }
    header->adopted = false;
    Live().output_buffers++;
    return header;
  }

  void Give(BufferHeader* header) {
    Live().output_buffers--;
    const uint8_t size_class = header->size_class;
    if (size_class != kUnpooled) {
      Class& c = classes_[size_class];
      std::lock_guard<std::mutex> lock(c.mutex);
      if (kept_bytes_ + BytesOf(size_class) <= kMaxKeptBytes &&
          c.free.size() < kMaxKeptPerClass) {
        c.free.push_back(header);
        kept_bytes_ += BytesOf(size_class);
        return;
      }
    }
    std::free(header);
  }

 private:
  static constexpr size_t kMinShift = 8;   // 256 B
  static constexpr size_t kMaxShift = 22;  // 4 MiB
  static constexpr size_t kClasses = kMaxShift - kMinShift + 1;
  static constexpr size_t kMaxKeptBytes = size_t{64} << 20;
  static constexpr size_t kMaxKeptPerClass = 4096;

  struct Class {
    std::mutex mutex;
    std::vector<BufferHeader*> free;
  };

  static uint8_t ClassOf(size_t bytes) {
    size_t shift = kMinShift;
    while (shift <= kMaxShift && (size_t{1} << shift) < bytes) ++shift;
    return shift > kMaxShift ? kUnpooled : static_cast<uint8_t>(shift - kMinShift);
  }
  static size_t BytesOf(uint8_t size_class) { return size_t{1} << (size_class + kMinShift); }

  Class classes_[kClasses];
  std::atomic<size_t> kept_bytes_{0};  // approximate across classes: a bound, not a count
};

inline void FreeBlock(BufferHeader* header) { BlockPool::Get().Give(header); }

}  // namespace tsn
