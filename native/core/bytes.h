// A growable byte buffer that is read from the front: what the native
// engines receive (native/kserve/), and what compressed messages inflate to.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>

namespace tsn {

// Received bytes: grown in place and handed whole to a request that ends
// where the reading ended (the usual case), so its body is never copied.
// What was consumed is skipped, not moved, until the room behind runs out:
// pipelined requests cost each byte once, not once per request.
struct Bytes {
  std::unique_ptr<char[]> data;
  size_t start = 0;  // bytes before it are consumed
  size_t size = 0;   // bytes held, from start
  size_t capacity = 0;

  char* begin() const { return data.get() + start; }
  char* end() const { return begin() + size; }
  size_t room() const { return capacity - start - size; }

  void Reserve(size_t free) {
    if (room() >= free) return;
    // Moving to the front pays once the bytes moved are no more than those consumed.
    if (start >= size && capacity - size >= free) {
      if (size > 0) std::memmove(data.get(), begin(), size);
      start = 0;
      return;
    }
    size_t grown = capacity == 0 ? 64 * 1024 : capacity;
    while (grown - size < free) grown *= 2;
    std::unique_ptr<char[]> next(new char[grown]);
    if (size > 0) std::memcpy(next.get(), begin(), size);
    data = std::move(next);
    start = 0;
    capacity = grown;
  }
  // Drops the first `count` bytes.
  void Consume(size_t count) {
    start += count;
    size -= count;
    if (size == 0) start = 0;
  }
};

}  // namespace tsn
