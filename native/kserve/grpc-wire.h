// What the native gRPC front end reads and writes itself: the protobuf
// messages of a plain ModelInfer call (raw tensors in and out). As in
// http-wire.h, whatever it is not sure of goes to the JS front end
// (lib/kserve/grpc.ts), which answers it or says what is wrong with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "http-wire.h"
#include "../core/triton_api.h"

namespace tsn::grpc {

struct InferRequest {
  std::string model;
  int64_t version = -1;
  std::string id;
  std::vector<http::FastInput> inputs;    // data points into the message, or a region is named
  std::vector<http::FastOutput> outputs;  // empty: every output
};

// Reads a ModelInferRequest whose inputs all come as raw_input_contents of
// the size their shape says or from a range of a system shared memory
// region, whose outputs are asked for by name (into a region, or not), with
// no other parameters (but a bool triton_enable_empty_final_response on the
// request) and no typed contents. False for anything else, malformed bytes
// included.
bool ReadInferRequest(const char* message, size_t size, InferRequest* request);

struct ResponseParameter {
  std::string name;
  TRITONSERVER_ParameterType type;
  const void* value;
};

struct ResponseOutput {
  std::string_view name;
  const char* datatype;
  const int64_t* shape;
  size_t dims;
  const void* data;
  size_t size;
};

// A ModelInferResponse as one gRPC message (the 5-byte prefix first), fields
// in the order lib/kserve/infer-wire.ts writes them.
std::string EncodeInferResponse(std::string_view model, int64_t version, std::string_view id,
                                const std::vector<ResponseParameter>& parameters,
                                const std::vector<ResponseOutput>& outputs);

// The gRPC status Triton's gRPC front end gives an error code (as lib/kserve/grpc.ts grpcStatus).
int GrpcStatus(TRITONSERVER_Error_Code code);

// A grpc-message value: bytes outside printable ASCII, and '%', as %XX.
std::string PercentEncode(std::string_view text);

}  // namespace tsn::grpc
