// What the engine's own files share (inference.cc, output-memory.cc,
// completions.cc, drain.cc, request.cc, submit.cc) and nothing else sees:
// a request's context, and the size up to which outputs are inlined.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "inference.h"

namespace tsn {

// Outputs up to this size are copied into one JS buffer per drain round, out
// of which JS slices each: a typed array this small lives in V8's heap, so
// no backing store is made (and swept, and counted as external memory) for
// each of them. V8's limit for typed arrays in its heap is 64 bytes.
inline constexpr size_t kSmallUpToBytes = 64;

struct InferenceEngine::Request {
  InferenceEngine* engine = nullptr;
  uint64_t token = 0;
  // Made by Submit(); set under inside_mutex_ once handed to Triton.
  TRITONSERVER_InferenceRequest* triton = nullptr;
  Napi::Reference<Napi::Value> inputs;  // keeps input memory alive
  bool counted_inside = false;          // Entered() counted it
  bool final_seen = false;              // JS saw the FINAL response
  // Release and FINAL response still to come from Triton (its threads).
  std::atomic<int> triton_events{2};
  // Under inside_mutex_: Triton holds nothing of it any more (deleted, or
  // refused), so no cancel may touch it and its inputs are no longer read.
  bool triton_done = false;
  bool cancel_requested = false;  // under inside_mutex_
  // Under inside_mutex_: in the engine's list of requests inside Triton.
  bool inside = false;
  Request* inside_prev = nullptr;
  Request* inside_next = nullptr;
  uint64_t cancel_generation = 0;  // CancelAll()s before it was made

  // What infer() asked for, read on the JS thread (ParseRequest) and turned
  // into a Triton request by Submit() on whichever thread submits it. The
  // context is reused, so its strings and vectors keep their memory.
  struct Input {
    SharedName name;
    TRITONSERVER_DataType datatype;
    uint32_t first_dim;  // into dims
    uint32_t rank;
    const void* data;
    size_t size;
  };
  struct Parameter {
    std::string key;
    TRITONSERVER_ParameterType type;
    std::string text;
    int64_t integer;
    double real;
    bool flag;
  };
  enum class Correlation : uint8_t { kNone, kNumber, kText };
  SharedName model;
  int64_t version = -1;
  std::vector<Input> inputs_spec;
  std::vector<int64_t> dims;
  std::vector<std::string> outputs_wanted;
  bool has_id = false, has_priority = false, has_timeout = false, has_flags = false;
  std::string id;
  uint32_t priority = 0;
  uint64_t timeout_us = 0;
  uint32_t flags = 0;
  Correlation correlation = Correlation::kNone;
  uint64_t correlation_id = 0;
  std::string correlation_text;
  std::vector<Parameter> parameters;
  TRITONSERVER_InferenceTrace* trace = nullptr;
  // Outputs to write into the caller's memory (infer's outputs record);
  // read by Allocate on Triton's threads, set before ServerInferAsync.
  struct CallerBuffer {
    std::string name;
    void* data;
    size_t size;
    bool fallback;  // allocate as usual when it is too small
    bool shared_memory;  // a range of a shared memory region
  };
  std::vector<CallerBuffer> caller_buffers;
  // Shared memory regions its inputs and outputs use, kept mapped until the
  // request is done with (shared-memory.h).
  std::vector<SharedMemoryRef> shared_memory;
};

}  // namespace tsn
