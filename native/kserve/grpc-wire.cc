#include "grpc-wire.h"

#include <cmath>
#include <cstring>
#include <optional>

namespace tsn::grpc {

namespace {

constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLength = 2;

// Reads protobuf fields off a byte range; any malformed byte stops it.
class Reader {
 public:
  Reader(const char* data, size_t size) : p_(reinterpret_cast<const uint8_t*>(data)), end_(p_ + size) {}

  bool Done() const { return p_ == end_; }

  bool Varint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return false;
      const uint8_t byte = *p_++;
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  // The next field's number and wire type.
  bool Key(uint32_t* field, int* type) {
    uint64_t key = 0;
    if (!Varint(&key) || key > 0xffffffffu) return false;
    *field = static_cast<uint32_t>(key >> 3);
    *type = static_cast<int>(key & 7);
    return *field != 0;
  }

  bool Length(std::string_view* bytes) {
    uint64_t size = 0;
    if (!Varint(&size) || size > static_cast<uint64_t>(end_ - p_)) return false;
    *bytes = std::string_view(reinterpret_cast<const char*>(p_), static_cast<size_t>(size));
    p_ += size;
    return true;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// A version as the JS front end parses it: empty is the latest, else digits only.
bool ReadVersion(std::string_view text, int64_t* version) {
  if (text.empty()) return true;
  if (text.size() > 18) return false;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  *version = value;
  return true;
}

// Names and ids taken here: valid UTF-8 without NUL. The JS front end
// decodes others with replacement characters, and refuses NULs (which the
// C API would cut a name at).
bool PlainText(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t more = 0;
    uint32_t point = 0;
    if (c == 0) return false;
    if (c < 0x80) { ++i; continue; }
    if (c >= 0xc2 && c <= 0xdf) { more = 1; point = c & 0x1f; }
    else if (c >= 0xe0 && c <= 0xef) { more = 2; point = c & 0x0f; }
    else if (c >= 0xf0 && c <= 0xf4) { more = 3; point = c & 0x07; }
    else return false;
    if (text.size() - i <= more) return false;
    for (size_t k = 1; k <= more; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xc0) != 0x80) return false;
      point = (point << 6) | (next & 0x3f);
    }
    // Overlong forms, surrogates, past U+10FFFF.
    if ((more == 2 && (point < 0x800 || (point >= 0xd800 && point <= 0xdfff))) || (more == 3 && (point < 0x10000 || point > 0x10ffff)))
      return false;
    i += more + 1;
  }
  return true;
}

// One entry of a map<string, InferParameter>: its key, and its value's
// field (1 bool, 2 int64, 3 string, 5 uint64) with what it holds.
struct Parameter {
  std::string_view key;
  uint32_t field = 0;
  uint64_t number = 0;
  std::string_view text;
};

bool ReadParameter(std::string_view entry, Parameter* parameter) {
  Reader reader(entry.data(), entry.size());
  std::string_view value;
  while (!reader.Done()) {
    uint32_t field = 0;
    int type = 0;
    if (!reader.Key(&field, &type) || type != kLength) return false;
    if (field == 1 && reader.Length(&parameter->key)) continue;
    if (field == 2 && reader.Length(&value)) continue;
    return false;
  }
  Reader inner(value.data(), value.size());
  int type = 0;
  if (!inner.Key(&parameter->field, &type)) return false;
  const bool ok = parameter->field == 3 ? type == kLength && inner.Length(&parameter->text)
                                        : (parameter->field == 1 || parameter->field == 2 || parameter->field == 5) &&
                                              type == kVarint && inner.Varint(&parameter->number);
  return ok && inner.Done();
}

// A tensor's shared memory parameters, as the JS front end takes them: the
// region as string_param, byte size and offset as int64_param. False for
// any other parameter (the JS front end reads those).
bool ReadSharedMemory(std::string_view entry, std::optional<http::FastSharedMemory>* range, bool* sized) {
  Parameter parameter;
  if (!ReadParameter(entry, &parameter)) return false;
  if (!*range) *range = http::FastSharedMemory{};
  const bool whole = parameter.field == 2 && parameter.number <= (uint64_t{1} << 53);
  if (parameter.key == "shared_memory_region" && parameter.field == 3 && !parameter.text.empty() &&
      PlainText(parameter.text)) {
    (*range)->region.assign(parameter.text);
  } else if (parameter.key == "shared_memory_byte_size" && whole) {
    (*range)->byte_size = parameter.number;
    *sized = true;
  } else if (parameter.key == "shared_memory_offset" && whole) {
    (*range)->offset = parameter.number;
  } else {
    return false;
  }
  return true;
}

// A request parameter the fast path may ignore: triton_enable_empty_final_response
// as a bool, which only streams read (the JS front end drops it for ModelInfer;
// NVIDIA's clients send it with every call).
bool IgnorableParameter(std::string_view entry) {
  Parameter parameter;
  return ReadParameter(entry, &parameter) && parameter.key == "triton_enable_empty_final_response" &&
         parameter.field == 1;
}

// An InferInputTensor with a name, a known non-BYTES datatype and a shape;
// its size in bytes from the shape.
bool ReadInput(std::string_view message, http::FastInput* input, uint64_t* bytes) {
  Reader reader(message.data(), message.size());
  std::string_view datatype;
  bool has_shape = false;
  bool sized = false;
  while (!reader.Done()) {
    uint32_t field = 0;
    int type = 0;
    if (!reader.Key(&field, &type)) return false;
    std::string_view value;
    if (field == 1 && type == kLength) {
      if (!reader.Length(&value) || !PlainText(value)) return false;
      input->name.assign(value);
    } else if (field == 2 && type == kLength) {
      if (!reader.Length(&datatype)) return false;
    } else if (field == 3 && type == kLength) {  // packed, as every client sends it
      if (!reader.Length(&value)) return false;
      Reader dims(value.data(), value.size());
      while (!dims.Done()) {
        uint64_t dim = 0;
        if (!dims.Varint(&dim) || dim > (uint64_t{1} << 62) || input->shape.size() == http::kMaxFastDims)
          return false;  // negative: the JS front end's error
        input->shape.push_back(static_cast<int64_t>(dim));
      }
      has_shape = true;
    } else if (field == 3 && type == kVarint) {
      uint64_t dim = 0;
      if (!reader.Varint(&dim) || dim > (uint64_t{1} << 62) || input->shape.size() == http::kMaxFastDims)
        return false;
      input->shape.push_back(static_cast<int64_t>(dim));
      has_shape = true;
    } else if (field == 4 && type == kLength) {
      if (!reader.Length(&value) || !ReadSharedMemory(value, &input->shared_memory, &sized)) return false;
    } else {
      return false;  // contents, anything unknown
    }
  }
  size_t element_size = 0;
  if (input->name.empty() || !has_shape || !http::DataTypeFromName(datatype, &input->datatype, &element_size) ||
      element_size == 0)
    return false;
  if (!http::TensorBytes(input->shape, element_size, bytes)) return false;
  // In a region: all of it named, and exactly the tensor's size (else the JS front end says what is wrong).
  return !input->shared_memory ||
         (!input->shared_memory->region.empty() && sized && input->shared_memory->byte_size == *bytes);
}

bool ReadOutput(std::string_view message, http::FastOutput* output) {
  Reader reader(message.data(), message.size());
  bool sized = false;
  while (!reader.Done()) {
    uint32_t field = 0;
    int type = 0;
    std::string_view value;
    if (!reader.Key(&field, &type) || type != kLength || !reader.Length(&value)) return false;
    if (field == 1 && PlainText(value)) output->name.assign(value);
    else if (field != 2 || !ReadSharedMemory(value, &output->shared_memory, &sized)) return false;
  }
  return !output->name.empty() && (!output->shared_memory || (!output->shared_memory->region.empty() && sized));
}

size_t VarintSize(uint64_t value) {
  size_t size = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++size;
  }
  return size;
}

void AppendVarint(std::string* out, uint64_t value) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void AppendKey(std::string* out, uint32_t field, int type) { AppendVarint(out, (uint64_t{field} << 3) | type); }

void AppendBytes(std::string* out, uint32_t field, std::string_view bytes) {
  AppendKey(out, field, kLength);
  AppendVarint(out, bytes.size());
  out->append(bytes);
}

// A non-empty string field; proto3 leaves empty ones out.
void AppendString(std::string* out, uint32_t field, std::string_view text) {
  if (!text.empty()) AppendBytes(out, field, text);
}

// An InferParameter, with the field the JS front end picks for the value
// (a whole double goes as int64_param, as a JS number does).
std::string EncodeParameter(const ResponseParameter& parameter) {
  std::string out;
  switch (parameter.type) {
    case TRITONSERVER_PARAMETER_BOOL:
      AppendKey(&out, 1, kVarint);
      AppendVarint(&out, *static_cast<const bool*>(parameter.value) ? 1 : 0);
      break;
    case TRITONSERVER_PARAMETER_STRING: AppendBytes(&out, 3, static_cast<const char*>(parameter.value)); break;
    case TRITONSERVER_PARAMETER_INT:
      AppendKey(&out, 2, kVarint);
      AppendVarint(&out, static_cast<uint64_t>(*static_cast<const int64_t*>(parameter.value)));
      break;
    default: {
      const double value = *static_cast<const double*>(parameter.value);
      if (std::nearbyint(value) == value && std::fabs(value) <= 9007199254740991.0) {
        AppendKey(&out, 2, kVarint);
        AppendVarint(&out, static_cast<uint64_t>(static_cast<int64_t>(value)));
      } else {
        AppendKey(&out, 4, kFixed64);
        char bits[8];
        std::memcpy(bits, &value, 8);  // little-endian hosts only, as Triton
        out.append(bits, 8);
      }
    }
  }
  return out;
}

}  // namespace

bool ReadInferRequest(const char* message, size_t size, InferRequest* request) {
  Reader reader(message, size);
  std::vector<uint64_t> expected;  // each input's size
  std::vector<size_t> raw_inputs;  // the inputs raw_input_contents are for: those not in shared memory, in order
  size_t raw_count = 0;
  while (!reader.Done()) {
    uint32_t field = 0;
    int type = 0;
    std::string_view value;
    if (!reader.Key(&field, &type) || type != kLength || !reader.Length(&value)) return false;
    switch (field) {
      case 1:
        if (!PlainText(value)) return false;
        request->model.assign(value);
        break;
      case 2:
        if (!ReadVersion(value, &request->version)) return false;
        break;
      case 3:
        if (!PlainText(value)) return false;
        request->id.assign(value);
        break;
      case 4:
        if (!IgnorableParameter(value)) return false;
        break;
      case 5: {
        // Inputs after contents are not what clients send; many inputs go to JS (their names are compared pairwise here).
        if (raw_count > 0 || request->inputs.size() == http::kMaxFastTensors) return false;
        http::FastInput input;
        uint64_t bytes = 0;
        if (!ReadInput(value, &input, &bytes)) return false;
        for (const http::FastInput& seen : request->inputs)
          if (seen.name == input.name) return false;
        if (!input.shared_memory) raw_inputs.push_back(request->inputs.size());
        request->inputs.push_back(std::move(input));
        expected.push_back(bytes);
        break;
      }
      case 6: {
        if (request->outputs.size() == http::kMaxFastTensors) return false;
        http::FastOutput output;
        if (!ReadOutput(value, &output)) return false;
        for (const http::FastOutput& seen : request->outputs)
          if (seen.name == output.name) return false;
        request->outputs.push_back(std::move(output));
        break;
      }
      case 7: {
        if (raw_count >= raw_inputs.size() || value.size() != expected[raw_inputs[raw_count]]) return false;
        http::FastInput& input = request->inputs[raw_inputs[raw_count++]];
        input.data = value.data();
        input.size = value.size();
        break;
      }
      default: return false;  // anything unknown
    }
  }
  return !request->model.empty() && !request->inputs.empty() && raw_count == raw_inputs.size();
}

std::string EncodeInferResponse(std::string_view model, int64_t version, std::string_view id,
                                const std::vector<ResponseParameter>& parameters,
                                const std::vector<ResponseOutput>& outputs) {
  std::string head;
  AppendString(&head, 1, model);
  AppendString(&head, 2, std::to_string(version));
  AppendString(&head, 3, id);
  for (const ResponseParameter& parameter : parameters) {
    std::string entry;
    AppendString(&entry, 1, parameter.name);
    AppendBytes(&entry, 2, EncodeParameter(parameter));
    AppendBytes(&head, 4, entry);
  }
  for (const ResponseOutput& output : outputs) {
    std::string tensor;
    AppendString(&tensor, 1, output.name);
    AppendString(&tensor, 2, output.datatype);
    if (output.dims > 0) {
      std::string dims;
      for (size_t d = 0; d < output.dims; ++d) AppendVarint(&dims, static_cast<uint64_t>(output.shape[d]));
      AppendBytes(&tensor, 3, dims);
    }
    AppendBytes(&head, 5, tensor);
  }
  size_t size = head.size();
  for (const ResponseOutput& output : outputs) size += 1 + VarintSize(output.size) + output.size;
  std::string message;
  message.reserve(5 + size);
  message.push_back('\0');  // not compressed
  const uint32_t length = static_cast<uint32_t>(size);
  message.push_back(static_cast<char>(length >> 24));
  message.push_back(static_cast<char>(length >> 16));
  message.push_back(static_cast<char>(length >> 8));
  message.push_back(static_cast<char>(length));
  message += head;
  for (const ResponseOutput& output : outputs) {
    AppendKey(&message, 6, kLength);
    AppendVarint(&message, output.size);
    if (output.size > 0) message.append(static_cast<const char*>(output.data), output.size);
  }
  return message;
}

int GrpcStatus(TRITONSERVER_Error_Code code) {
  switch (code) {
    case TRITONSERVER_ERROR_UNKNOWN: return 2;
    case TRITONSERVER_ERROR_INTERNAL: return 13;
    case TRITONSERVER_ERROR_NOT_FOUND: return 5;
    case TRITONSERVER_ERROR_INVALID_ARG: return 3;
    case TRITONSERVER_ERROR_UNAVAILABLE: return 14;
    case TRITONSERVER_ERROR_UNSUPPORTED: return 12;
    case TRITONSERVER_ERROR_ALREADY_EXISTS: return 6;
    case TRITONSERVER_ERROR_CANCELLED: return 1;
  }
  return 2;
}

std::string PercentEncode(std::string_view text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte <= 0x7e && byte != '%') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 15]);
    }
  }
  return out;
}

}  // namespace tsn::grpc
