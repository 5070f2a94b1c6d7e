// What the native HTTP/1.1 front end reads and writes itself: a request's
// head, and the KServe inference requests it answers without JS (binary
// tensors in and out). Everything here decides conservatively: whatever it
// is not sure of goes to the JS front end (lib/kserve/http.ts), which gives
// the answer and the error every other request gets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../core/triton_api.h"

namespace tsn::http {

// Node's default limit on a request head; longer heads go to Node (431).
inline constexpr size_t kMaxHeadBytes = 16 * 1024;

struct RequestHead {
  size_t head_bytes = 0;  // request line and headers, with the blank line
  std::string_view method;
  std::string_view target;
  size_t content_length = 0;
  std::optional<size_t> infer_header_length;  // Inference-Header-Content-Length
  bool close = false;               // Connection: close
  bool plain_infer_ok = true;       // nothing that asks for JS's extras (compression, CORS)
};

enum class HeadStatus {
  kIncomplete,  // read more
  kComplete,    // framed by Content-Length (or no body): one request
  kToNode,      // anything else: Node's own parser takes the connection from here
};

// Reads the head at the start of `data`. Strict on purpose: HTTP/1.1 only,
// CRLF line ends, exactly one Host (Node answers 400 without it), no
// Transfer-Encoding, Expect or Upgrade, one numeric Content-Length at most;
// anything else is kToNode.
HeadStatus ParseHead(const char* data, size_t size, RequestHead* head);

// The model of a `/v2/models/NAME[/versions/N]/infer` target whose name needs
// no decoding; false for any other target.
bool InferTarget(std::string_view target, std::string* model, int64_t* version);

// A range of a registered system shared memory region (Triton's
// shared_memory_region / _offset / _byte_size parameters).
struct FastSharedMemory {
  std::string region;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

struct FastInput {
  std::string name;
  TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> shape;
  const char* data = nullptr;  // in the body (binary_data_size)...
  size_t size = 0;
  std::optional<FastSharedMemory> shared_memory;  // ...or in a region
};

struct FastOutput {
  std::string name;
  std::optional<FastSharedMemory> shared_memory;  // else binary in the body
};

// The largest JSON inference header read here (a binary request's is a few
// hundred bytes); larger ones go to the JS front end. It bounds the parse
// tree this reader builds, and its time on the front end's loop.
inline constexpr size_t kMaxFastHeaderBytes = 64 * 1024;
// The most dimensions and elements of a tensor read here (Triton's own
// shapes stay far below both).
inline constexpr size_t kMaxFastDims = 64;
inline constexpr uint64_t kMaxFastElements = uint64_t{1} << 48;
// The most inputs or outputs of a request read here (their names are compared pairwise).
inline constexpr size_t kMaxFastTensors = 256;

// A tensor's size in bytes from its shape, checked for overflow; false for
// a negative dimension, more than kMaxFastDims, or more than
// kMaxFastElements elements (at any step, zero dimensions or not).
bool TensorBytes(const std::vector<int64_t>& shape, size_t element_size, uint64_t* bytes);

struct FastRequest {
  std::string id;
  std::vector<FastInput> inputs;
  std::vector<FastOutput> outputs;  // empty: every output, binary
};

// Reads a JSON inference header whose inputs are all binary
// (binary_data_size) or in system shared memory, and whose outputs are all
// asked for as binary or in shared memory. False for anything else (JSON
// data, other parameters, sizes that do not add up, BYTES, bad JSON): the
// JS front end then reads the request and answers it or says what is wrong
// with it.
bool ReadFastRequest(const char* json, size_t json_size, const char* binary,
                     size_t binary_size, FastRequest* request);

// The Triton data type of a KServe name ("FP32") and its element size (0 for
// BYTES); false for an unknown name.
bool DataTypeFromName(std::string_view name, TRITONSERVER_DataType* datatype, size_t* element_size);

// The KServe name of a Triton data type ("FP32"), or null for INVALID.
const char* DataTypeName(TRITONSERVER_DataType datatype);

// Appends `text` as a JSON string (quoted, escaped).
void AppendJsonString(std::string* out, std::string_view text);

// Triton's HTTP status for an error code (as lib/kserve/http.ts httpStatus).
int HttpStatus(TRITONSERVER_Error_Code code);

}  // namespace tsn::http
