// What the harnesses share: a check that stops the run (libFuzzer then
// saves the input as a crash), and range tests for views into the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "../../native/kserve/http-wire.h"

// abort(), not a return: a broken invariant is a bug, and libFuzzer keeps
// the input only when the process dies. The condition is printed first so a
// crash report says which invariant broke.
#define FUZZ_CHECK(condition)                                                        \
  do {                                                                               \
    if (!(condition)) {                                                              \
      std::fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

namespace fuzz {

// [data, data + size) lies within [begin, begin + length). Compared as
// addresses so that a view outside the buffer is caught, not dereferenced.
inline bool Inside(const char* data, size_t size, const char* begin, size_t length) {
  const auto p = reinterpret_cast<uintptr_t>(data);
  const auto b = reinterpret_cast<uintptr_t>(begin);
  return p >= b && p - b <= length && size <= length - (p - b);
}

inline bool Inside(std::string_view view, const char* begin, size_t length) {
  return Inside(view.data(), view.size(), begin, length);
}

// The bytes a tensor of `shape` holds at `element_size` bytes an element,
// exactly: false when a dimension is negative or the true product does not
// fit 64 bits. A parser that accepts such a shape has checked a wrapped
// product against the data it was given. (A zero dimension makes the
// product 0 whatever the others are, so it is looked for first.)
inline bool ShapeBytes(const std::vector<int64_t>& shape, size_t element_size, uint64_t* bytes) {
  for (int64_t dim : shape) {
    if (dim < 0) return false;
    if (dim == 0) {
      *bytes = 0;
      return true;
    }
  }
  uint64_t product = element_size;
  for (int64_t dim : shape)
    if (__builtin_mul_overflow(product, static_cast<uint64_t>(dim), &product)) return false;
  *bytes = product;
  return true;
}

// An accepted input's size in bytes: its data type known and not BYTES, its
// shape's true size (both readers' inputs must pass).
inline uint64_t CheckedInputBytes(const tsn::http::FastInput& input) {
  TRITONSERVER_DataType datatype;
  size_t element_size = 0;
  const char* name = tsn::http::DataTypeName(input.datatype);
  FUZZ_CHECK(name != nullptr && tsn::http::DataTypeFromName(name, &datatype, &element_size));
  FUZZ_CHECK(datatype == input.datatype && element_size > 0);  // never BYTES here
  uint64_t bytes = 0;
  FUZZ_CHECK(ShapeBytes(input.shape, element_size, &bytes));  // the shape's true size, unwrapped
  return bytes;
}

}  // namespace fuzz
