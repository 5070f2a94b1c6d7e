// libFuzzer harness: grpc::ReadInferRequest over one ModelInferRequest
// message (the bytes after gRPC's 5-byte prefix). An accepted request is
// checked, encoded again and read back, and its inputs are sent through
// grpc::EncodeInferResponse and grpc::PercentEncode, whose output is read
// back here with a decoder of the harness's own.
#include <cstring>
#include <string>
#include <vector>

#include "../../native/kserve/grpc-wire.h"
#include "fuzz-check.h"

using tsn::grpc::InferRequest;
using tsn::http::FastInput;
using tsn::http::FastOutput;
using tsn::http::FastSharedMemory;

namespace {

// ---- protobuf, both ways, just what the checks need ---------------------------

void PutVarint(std::string* out, uint64_t value) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void PutBytes(std::string* out, uint32_t field, std::string_view bytes) {
  PutVarint(out, (uint64_t{field} << 3) | 2);
  PutVarint(out, bytes.size());
  out->append(bytes);
}

// A map<string, InferParameter> entry holding an int64_param (2) or string_param (3).
std::string IntParameter(std::string_view key, uint64_t value) {
  std::string inner;
  PutVarint(&inner, (2 << 3) | 0);
  PutVarint(&inner, value);
  std::string entry;
  PutBytes(&entry, 1, key);
  PutBytes(&entry, 2, inner);
  return entry;
}

std::string StringParameter(std::string_view key, std::string_view value) {
  std::string inner;
  PutBytes(&inner, 3, value);
  std::string entry;
  PutBytes(&entry, 1, key);
  PutBytes(&entry, 2, inner);
  return entry;
}

void PutRange(std::string* out, uint32_t field, const FastSharedMemory& range) {
  PutBytes(out, field, StringParameter("shared_memory_region", range.region));
  PutBytes(out, field, IntParameter("shared_memory_byte_size", range.byte_size));
  PutBytes(out, field, IntParameter("shared_memory_offset", range.offset));
}

// The request as a client would send it (packed shapes, contents last).
std::string WriteRequest(const InferRequest& request) {
  std::string out;
  PutBytes(&out, 1, request.model);
  if (request.version >= 0) PutBytes(&out, 2, std::to_string(request.version));
  if (!request.id.empty()) PutBytes(&out, 3, request.id);
  for (const FastInput& input : request.inputs) {
    std::string tensor;
    PutBytes(&tensor, 1, input.name);
    PutBytes(&tensor, 2, tsn::http::DataTypeName(input.datatype));
    std::string dims;
    for (int64_t dim : input.shape) PutVarint(&dims, static_cast<uint64_t>(dim));
    PutBytes(&tensor, 3, dims);
    if (input.shared_memory) PutRange(&tensor, 4, *input.shared_memory);
    PutBytes(&out, 5, tensor);
  }
  for (const FastOutput& output : request.outputs) {
    std::string tensor;
    PutBytes(&tensor, 1, output.name);
    if (output.shared_memory) PutRange(&tensor, 2, *output.shared_memory);
    PutBytes(&out, 6, tensor);
  }
  for (const FastInput& input : request.inputs)
    if (!input.shared_memory) PutBytes(&out, 7, std::string_view(input.data, input.size));
  return out;
}

// Reads fields off a message the encoder under test wrote; any malformed
// byte is a broken invariant.
struct Fields {
  std::string_view rest;

  bool More() const { return !rest.empty(); }
  uint64_t Varint() {
    uint64_t value = 0;
    for (int shift = 0;; shift += 7) {
      FUZZ_CHECK(!rest.empty() && shift < 64);
      const auto byte = static_cast<uint8_t>(rest[0]);
      rest.remove_prefix(1);
      value |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) return value;
    }
  }
  // The next field's number; its wire type must be `type`.
  uint32_t Key(int type) {
    const uint64_t key = Varint();
    FUZZ_CHECK(static_cast<int>(key & 7) == type);
    return static_cast<uint32_t>(key >> 3);
  }
  std::string_view Bytes() {
    const uint64_t size = Varint();
    FUZZ_CHECK(size <= rest.size());
    const std::string_view bytes = rest.substr(0, size);
    rest.remove_prefix(size);
    return bytes;
  }
  uint32_t LengthKey() { return Key(2); }
};

bool SameRange(const std::optional<FastSharedMemory>& a, const std::optional<FastSharedMemory>& b) {
  if (!a || !b) return !a && !b;
  return a->region == b->region && a->offset == b->offset && a->byte_size == b->byte_size;
}

bool SameRequest(const InferRequest& a, const InferRequest& b) {
  if (a.model != b.model || a.version != b.version || a.id != b.id || a.inputs.size() != b.inputs.size() ||
      a.outputs.size() != b.outputs.size())
    return false;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    const FastInput& x = a.inputs[i];
    const FastInput& y = b.inputs[i];
    if (x.name != y.name || x.datatype != y.datatype || x.shape != y.shape || x.size != y.size ||
        !SameRange(x.shared_memory, y.shared_memory) || (x.size > 0 && std::memcmp(x.data, y.data, x.size) != 0))
      return false;
  }
  for (size_t i = 0; i < a.outputs.size(); ++i)
    if (a.outputs[i].name != b.outputs[i].name || !SameRange(a.outputs[i].shared_memory, b.outputs[i].shared_memory))
      return false;
  return true;
}

// The request's inputs answered as outputs, with one parameter of each
// type: the response must be one well-formed gRPC message that says it.
void CheckResponse(const InferRequest& request) {
  const bool flag = (request.id.size() & 1) != 0;
  const int64_t number = request.version;
  double real = -0.5;  // a fuzzed double when a tensor has 8 bytes: NaN, infinities, huge, whole
  for (const FastInput& input : request.inputs)
    if (input.size >= 8) std::memcpy(&real, input.data, 8);
  const std::string text = request.id;
  const std::vector<tsn::grpc::ResponseParameter> parameters = {
      {"flag", TRITONSERVER_PARAMETER_BOOL, &flag},
      {"number", TRITONSERVER_PARAMETER_INT, &number},
      {"real", TRITONSERVER_PARAMETER_DOUBLE, &real},
      {"text", TRITONSERVER_PARAMETER_STRING, text.c_str()},
  };
  std::vector<tsn::grpc::ResponseOutput> outputs;
  for (const FastInput& input : request.inputs)
    outputs.push_back({input.name, tsn::http::DataTypeName(input.datatype), input.shape.data(), input.shape.size(),
                       input.data, input.size});
  const std::string message =
      tsn::grpc::EncodeInferResponse(request.model, request.version, request.id, parameters, outputs);

  // 5-byte prefix: not compressed, then the length of what follows.
  FUZZ_CHECK(message.size() >= 5 && message[0] == 0);
  const auto* prefix = reinterpret_cast<const uint8_t*>(message.data());
  const size_t length = (size_t{prefix[1]} << 24) | (size_t{prefix[2]} << 16) | (size_t{prefix[3]} << 8) | prefix[4];
  FUZZ_CHECK(length == message.size() - 5);

  Fields fields{std::string_view(message).substr(5)};
  bool model_seen = false;
  bool version_seen = false;
  bool id_seen = false;
  size_t parameters_seen = 0;
  size_t outputs_seen = 0;
  size_t contents_seen = 0;
  while (fields.More()) {
    const uint32_t field = fields.LengthKey();
    const std::string_view value = fields.Bytes();
    switch (field) {
      case 1: FUZZ_CHECK(!model_seen && value == request.model); model_seen = true; break;
      case 2: FUZZ_CHECK(!version_seen && value == std::to_string(request.version)); version_seen = true; break;
      case 3: FUZZ_CHECK(!id_seen && value == request.id && !value.empty()); id_seen = true; break;
      case 4: {
        FUZZ_CHECK(parameters_seen < parameters.size() && outputs_seen == 0);
        const auto& expected = parameters[parameters_seen++];
        Fields entry{value};
        FUZZ_CHECK(entry.LengthKey() == 1 && entry.Bytes() == expected.name);
        FUZZ_CHECK(entry.LengthKey() == 2);
        Fields inner{entry.Bytes()};
        FUZZ_CHECK(!entry.More());
        const uint64_t key = inner.Varint();
        if (expected.type == TRITONSERVER_PARAMETER_BOOL) {
          FUZZ_CHECK(key == ((1 << 3) | 0) && inner.Varint() == (flag ? 1u : 0u));
        } else if (expected.type == TRITONSERVER_PARAMETER_INT) {
          FUZZ_CHECK(key == ((2 << 3) | 0) && inner.Varint() == static_cast<uint64_t>(number));
        } else if (expected.type == TRITONSERVER_PARAMETER_STRING) {
          FUZZ_CHECK(key == ((3 << 3) | 2) && inner.Bytes() == std::string_view(text.c_str()));
        } else if (key == ((2 << 3) | 0)) {  // a whole double goes as int64_param
          FUZZ_CHECK(static_cast<double>(static_cast<int64_t>(inner.Varint())) == real);
        } else {  // else as double_param, its bits as they are
          FUZZ_CHECK(key == ((4 << 3) | 1) && inner.rest.size() >= 8);
          FUZZ_CHECK(std::memcmp(inner.rest.data(), &real, 8) == 0);
          inner.rest.remove_prefix(8);
        }
        FUZZ_CHECK(!inner.More());
        break;
      }
      case 5: {
        FUZZ_CHECK(outputs_seen < outputs.size() && contents_seen == 0);
        const auto& expected = outputs[outputs_seen++];
        Fields tensor{value};
        FUZZ_CHECK(tensor.LengthKey() == 1 && tensor.Bytes() == expected.name);
        FUZZ_CHECK(tensor.LengthKey() == 2 && tensor.Bytes() == expected.datatype);
        std::vector<int64_t> shape;
        if (tensor.More()) {
          FUZZ_CHECK(tensor.LengthKey() == 3);
          Fields dims{tensor.Bytes()};
          while (dims.More()) shape.push_back(static_cast<int64_t>(dims.Varint()));
        }
        FUZZ_CHECK(!tensor.More());
        FUZZ_CHECK(shape == std::vector<int64_t>(expected.shape, expected.shape + expected.dims));
        break;
      }
      case 6: {
        FUZZ_CHECK(contents_seen < outputs.size());
        const auto& expected = outputs[contents_seen++];
        FUZZ_CHECK(value.size() == expected.size &&
                   (expected.size == 0 || std::memcmp(value.data(), expected.data, expected.size) == 0));
        break;
      }
      default: FUZZ_CHECK(false);
    }
  }
  FUZZ_CHECK(model_seen && version_seen && id_seen == !request.id.empty());
  FUZZ_CHECK(parameters_seen == parameters.size() && outputs_seen == outputs.size() &&
             contents_seen == outputs.size());
}

// grpc-message values: printable ASCII only, and they decode to the text.
void CheckPercentEncode(std::string_view text) {
  const std::string encoded = tsn::grpc::PercentEncode(text);
  std::string decoded;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    FUZZ_CHECK(false);
    return 0;
  };
  for (size_t i = 0; i < encoded.size(); ++i) {
    FUZZ_CHECK(encoded[i] >= 0x20 && encoded[i] <= 0x7e);
    if (encoded[i] != '%') {
      decoded.push_back(encoded[i]);
      continue;
    }
    FUZZ_CHECK(i + 2 < encoded.size());
    decoded.push_back(static_cast<char>(hex(encoded[i + 1]) * 16 + hex(encoded[i + 2])));
    i += 2;
  }
  FUZZ_CHECK(decoded == text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exactly sized copy: ASan then reports any read past the message.
  const std::vector<char> message(data, data + size);
  CheckPercentEncode(std::string_view(message.data(), message.size()));

  InferRequest request;
  if (!tsn::grpc::ReadInferRequest(message.data(), message.size(), &request)) return 0;

  FUZZ_CHECK(!request.model.empty() && !request.inputs.empty() && request.version >= -1);
  const char* previous_end = message.data();  // raw contents come in order, one field each
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const FastInput& input = request.inputs[i];
    FUZZ_CHECK(!input.name.empty());
    for (size_t j = 0; j < i; ++j) FUZZ_CHECK(request.inputs[j].name != input.name);
    const uint64_t bytes = fuzz::CheckedInputBytes(input);
    if (input.shared_memory) {
      FUZZ_CHECK(input.data == nullptr && input.size == 0);
      FUZZ_CHECK(!input.shared_memory->region.empty() && input.shared_memory->byte_size == bytes);
    } else {
      FUZZ_CHECK(input.size == bytes);
      FUZZ_CHECK(fuzz::Inside(input.data, input.size, message.data(), message.size()));
      FUZZ_CHECK(input.data >= previous_end);
      previous_end = input.data + input.size;
    }
  }
  for (size_t i = 0; i < request.outputs.size(); ++i) {
    const FastOutput& output = request.outputs[i];
    FUZZ_CHECK(!output.name.empty() && (!output.shared_memory || !output.shared_memory->region.empty()));
    for (size_t j = 0; j < i; ++j) FUZZ_CHECK(request.outputs[j].name != output.name);
  }

  // Encoded again as a client would and read back: the same request.
  const std::string again_message = WriteRequest(request);
  InferRequest again;
  FUZZ_CHECK(tsn::grpc::ReadInferRequest(again_message.data(), again_message.size(), &again));
  FUZZ_CHECK(SameRequest(request, again));

  CheckResponse(request);
  CheckPercentEncode(request.model);
  return 0;
}
