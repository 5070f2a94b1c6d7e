// libFuzzer harness: http::ParseHead over the bytes a connection has
// buffered, then http::InferTarget over the target of a complete head (and
// over the raw bytes, which reach it only through ParseHead in the addon but
// cost nothing to try here).
#include <cstring>
#include <string>
#include <vector>

#include "../../native/kserve/http-wire.h"
#include "fuzz-check.h"

using tsn::http::HeadStatus;
using tsn::http::RequestHead;

namespace {

// Everything ParseHead reports of a head, to compare two parses.
bool SameHead(const RequestHead& a, const RequestHead& b) {
  return a.head_bytes == b.head_bytes && a.method == b.method && a.target == b.target &&
         a.content_length == b.content_length && a.infer_header_length == b.infer_header_length &&
         a.close == b.close && a.plain_infer_ok == b.plain_infer_ok;
}

// InferTarget's answer must describe the target exactly:
// "/v2/models/" MODEL ["/versions/" DIGITS] "/infer", DIGITS being `version`.
void CheckInferTarget(std::string_view target) {
  std::string model = "unset";
  int64_t version = -7;
  if (!tsn::http::InferTarget(target, &model, &version)) return;
  FUZZ_CHECK(!model.empty());
  FUZZ_CHECK(model.find_first_of("/%?#") == std::string::npos);  // nothing left to decode or split
  FUZZ_CHECK(version >= -1);
  std::string_view rest = target;
  const std::string_view prefix = "/v2/models/";
  FUZZ_CHECK(rest.substr(0, prefix.size()) == prefix);
  rest.remove_prefix(prefix.size());
  FUZZ_CHECK(rest.substr(0, model.size()) == model);
  rest.remove_prefix(model.size());
  if (version == -1) {
    FUZZ_CHECK(rest == "/infer");
    return;
  }
  const std::string_view versions = "/versions/";
  FUZZ_CHECK(rest.substr(0, versions.size()) == versions);
  rest.remove_prefix(versions.size());
  FUZZ_CHECK(rest.size() > 6 && rest.substr(rest.size() - 6) == "/infer");
  rest.remove_suffix(6);
  int64_t value = 0;
  for (char c : rest) {
    FUZZ_CHECK(c >= '0' && c <= '9');
    FUZZ_CHECK(!__builtin_mul_overflow(value, 10, &value) && !__builtin_add_overflow(value, c - '0', &value));
  }
  FUZZ_CHECK(!rest.empty() && value == version);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exactly sized copy: ASan then reports any read past `size`.
  std::vector<char> buffer(data, data + size);
  const char* text = buffer.data();

  CheckInferTarget(std::string_view(text, size));

  RequestHead head;
  const HeadStatus status = tsn::http::ParseHead(text, size, &head);
  if (status == HeadStatus::kIncomplete) {
    // Waiting for more is only right while the head may still end in range.
    FUZZ_CHECK(size < tsn::http::kMaxHeadBytes);
    FUZZ_CHECK(std::string_view(text, size).find("\r\n\r\n") == std::string_view::npos);
    return 0;
  }
  if (status != HeadStatus::kComplete) return 0;

  // The head ends with the first blank line, within the buffer and the limit.
  FUZZ_CHECK(head.head_bytes >= 4 && head.head_bytes <= size && head.head_bytes <= tsn::http::kMaxHeadBytes);
  FUZZ_CHECK(std::memcmp(text + head.head_bytes - 4, "\r\n\r\n", 4) == 0);
  FUZZ_CHECK(std::string_view(text, head.head_bytes - 1).find("\r\n\r\n") == std::string_view::npos);

  // Method and target are views of the request line, not copies or strays.
  FUZZ_CHECK(fuzz::Inside(head.method, text, head.head_bytes));
  FUZZ_CHECK(fuzz::Inside(head.target, text, head.head_bytes));
  FUZZ_CHECK(head.method.data() == text && !head.method.empty());
  FUZZ_CHECK(!head.target.empty() && head.target[0] == '/');
  for (char c : head.target) FUZZ_CHECK(static_cast<unsigned char>(c) > ' ' && static_cast<unsigned char>(c) < 0x7f);

  // Sizes are what ParseSize allows: at most 2^53, so head_bytes + length cannot wrap.
  FUZZ_CHECK(head.content_length <= (uint64_t{1} << 53));
  FUZZ_CHECK(!head.infer_header_length || *head.infer_header_length <= (uint64_t{1} << 53));

  // The head alone says the same: bytes after it (a body, a pipelined
  // request) change nothing, and one byte less is not a complete head.
  RequestHead again;
  FUZZ_CHECK(tsn::http::ParseHead(text, head.head_bytes, &again) == HeadStatus::kComplete);
  FUZZ_CHECK(SameHead(head, again));
  RequestHead shorter;
  FUZZ_CHECK(tsn::http::ParseHead(text, head.head_bytes - 1, &shorter) != HeadStatus::kComplete);

  // A head that arrives in pieces is waited for: every prefix of a POST head
  // (what the fast path may take) is kIncomplete, not handed to Node early.
  // Prefixes sampled, so a long head costs no more than ~130 parses.
  if (head.method == "POST") {
    auto waits = [&](size_t length) {
      RequestHead partial;
      return tsn::http::ParseHead(text, length, &partial) == HeadStatus::kIncomplete;
    };
    const size_t step = head.head_bytes / 128 + 1;
    for (size_t length = 0; length < head.head_bytes; length += step) FUZZ_CHECK(waits(length));
    for (size_t back = 1; back <= 3; ++back) FUZZ_CHECK(waits(head.head_bytes - back));  // the blank line's CR LF CR
  }

  CheckInferTarget(head.target);
  return 0;
}
