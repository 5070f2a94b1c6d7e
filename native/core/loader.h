// Opens libtritonserver.so at run time and resolves the C API into one table.
#pragma once

#include <string>
#include <vector>

#include "backend_api.h"
#include "triton_api.h"

namespace tsn {

// The resolved C API of one loaded library. Optional functions (those newer
// than kTritonApiMinMinor) are null when the library is too old for them.
struct TritonApi {
  std::string path;
  uint32_t major = 0;
  uint32_t minor = 0;
#define TSN_DECLARE_POINTER(min_minor, ret, name, params) \
  TritonFn_##name name = nullptr;
  TRITON_API_FUNCTIONS(TSN_DECLARE_POINTER)
#undef TSN_DECLARE_POINTER
  // The functions Triton offers backends (TRITONBACKEND_*), for bound
  // models; all null, with the reason in backend_problem, when the library
  // lacks any of them or its backend API is too old.
  struct Backend {
#define TSN_DECLARE_BACKEND_POINTER(ret, name, params) \
  TritonBackendFn_##name name = nullptr;
    TRITON_BACKEND_API_FUNCTIONS(TSN_DECLARE_BACKEND_POINTER)
#undef TSN_DECLARE_BACKEND_POINTER
  } backend;
  std::string backend_problem;
};

// Tries each candidate path in order and returns the first library that
// opens and implements a compatible API. Libraries are opened once per
// process and never closed (backends keep using them). On failure returns
// null and describes every attempt in *error.
const TritonApi* LoadTritonApi(const std::vector<std::string>& candidates,
                               std::string* error);

// Every library LoadTritonApi opened, in order.
std::vector<const TritonApi*> LoadedTritonApis();

// The minor API version that introduced a function, by name without prefix.
uint32_t FunctionMinor(const char* name);

}  // namespace tsn
