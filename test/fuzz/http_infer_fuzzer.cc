// libFuzzer harness: http::ReadFastRequest, the JSON inference header and
// the binary tensors after it. Input layout: 2 bytes (big-endian) give the
// JSON header's length (cut to what is there), the JSON follows, the rest is
// the binary part, as Inference-Header-Content-Length splits a body.
#include <algorithm>
#include <string>
#include <vector>

#include "../../native/kserve/http-wire.h"
#include "fuzz-check.h"

using tsn::http::FastInput;
using tsn::http::FastOutput;
using tsn::http::FastRequest;
using tsn::http::FastSharedMemory;

namespace {

bool SameRange(const std::optional<FastSharedMemory>& a, const std::optional<FastSharedMemory>& b) {
  if (!a || !b) return !a && !b;
  return a->region == b->region && a->offset == b->offset && a->byte_size == b->byte_size;
}

bool SameRequest(const FastRequest& a, const FastRequest& b) {
  if (a.id != b.id || a.inputs.size() != b.inputs.size() || a.outputs.size() != b.outputs.size()) return false;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    const FastInput& x = a.inputs[i];
    const FastInput& y = b.inputs[i];
    if (x.name != y.name || x.datatype != y.datatype || x.shape != y.shape || x.data != y.data ||
        x.size != y.size || !SameRange(x.shared_memory, y.shared_memory))
      return false;
  }
  for (size_t i = 0; i < a.outputs.size(); ++i)
    if (a.outputs[i].name != b.outputs[i].name || !SameRange(a.outputs[i].shared_memory, b.outputs[i].shared_memory))
      return false;
  return true;
}

void AppendRange(std::string* json, const FastSharedMemory& range) {
  *json += "{\"shared_memory_region\":";
  tsn::http::AppendJsonString(json, range.region);
  *json += ",\"shared_memory_offset\":" + std::to_string(range.offset);
  *json += ",\"shared_memory_byte_size\":" + std::to_string(range.byte_size) + "}";
}

// The request written back as a header of the form clients send: reading it
// again must give the same request (what was accepted is what was meant,
// whatever spacing or key order the input had).
std::string WriteHeader(const FastRequest& request) {
  std::string json = "{\"id\":";
  tsn::http::AppendJsonString(&json, request.id);
  if (request.outputs.empty()) json += ",\"parameters\":{\"binary_data_output\":true}";
  json += ",\"inputs\":[";
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const FastInput& input = request.inputs[i];
    if (i > 0) json += ',';
    json += "{\"name\":";
    tsn::http::AppendJsonString(&json, input.name);
    json += ",\"datatype\":\"" + std::string(tsn::http::DataTypeName(input.datatype)) + "\",\"shape\":[";
    for (size_t d = 0; d < input.shape.size(); ++d) json += (d > 0 ? "," : "") + std::to_string(input.shape[d]);
    json += "],\"parameters\":";
    if (input.shared_memory) AppendRange(&json, *input.shared_memory);
    else json += "{\"binary_data_size\":" + std::to_string(input.size) + "}";
    json += '}';
  }
  json += "],\"outputs\":[";
  for (size_t i = 0; i < request.outputs.size(); ++i) {
    const FastOutput& output = request.outputs[i];
    if (i > 0) json += ',';
    json += "{\"name\":";
    tsn::http::AppendJsonString(&json, output.name);
    json += ",\"parameters\":";
    if (output.shared_memory) AppendRange(&json, *output.shared_memory);
    else json += "{\"binary_data\":true}";
    json += '}';
  }
  return json + "]}";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t json_size = std::min<size_t>((size_t{data[0]} << 8) | data[1], size - 2);
  // Each part in an allocation of its own size: ASan reports a read past
  // either, and a tensor view can be checked against the binary part alone.
  const std::vector<char> json(data + 2, data + 2 + json_size);
  const std::vector<char> binary(data + 2 + json_size, data + size);

  FastRequest request;
  if (!tsn::http::ReadFastRequest(json.data(), json.size(), binary.data(), binary.size(), &request)) return 0;

  FUZZ_CHECK(!request.inputs.empty());
  size_t offset = 0;  // where the next binary tensor must start
  for (const FastInput& input : request.inputs) {
    const uint64_t bytes = fuzz::CheckedInputBytes(input);
    if (input.shared_memory) {
      FUZZ_CHECK(input.data == nullptr && input.size == 0);  // filled in from the region later
      FUZZ_CHECK(input.shared_memory->byte_size == bytes);
    } else {
      // Binary tensors lie back to back in the binary part, in input order.
      FUZZ_CHECK(input.size == bytes);
      FUZZ_CHECK(fuzz::Inside(input.data, input.size, binary.data(), binary.size()));
      FUZZ_CHECK(input.data == binary.data() + offset);
      offset += input.size;
    }
  }
  FUZZ_CHECK(offset == binary.size());  // the sizes add up to the binary part, no byte left over

  for (size_t i = 0; i < request.outputs.size(); ++i)
    for (size_t j = 0; j < i; ++j) FUZZ_CHECK(request.outputs[i].name != request.outputs[j].name);

  // Written back and read again: the same request. (Only where the reader's
  // size limit cannot be what refuses it: the form written here may be
  // longer than the input, which spelled defaults out or not.)
  const std::string header = WriteHeader(request);
  if (header.size() <= json.size() || header.size() <= 4096) {
    FastRequest again;
    FUZZ_CHECK(tsn::http::ReadFastRequest(header.data(), header.size(), binary.data(), binary.size(), &again));
    FUZZ_CHECK(SameRequest(request, again));
  }

  // One byte more in the binary part is a size that does not add up.
  std::vector<char> longer(binary);
  longer.push_back('\0');
  FastRequest padded;
  FUZZ_CHECK(!tsn::http::ReadFastRequest(json.data(), json.size(), longer.data(), longer.size(), &padded));
  return 0;
}
