// libFuzzer harness: client::ResponseReader (the native HTTP client's
// response reader) over what a server may send on one connection, read as
// responses one after another. Fed whole and fed in pieces (split where the
// input's first byte says), it must see the same responses: the same
// heads, bodies and errors. A body never passes the limit, a body framed by
// Content-Length has exactly that length, and the reader never claims more
// bytes than it was given.
#include <cstring>
#include <string>
#include <vector>

#include "../../native/client/http-response.h"
#include "fuzz-check.h"

using tsn::client::ResponseHead;
using tsn::client::ResponseReader;
using tsn::client::ResponseSink;

namespace {

constexpr uint64_t kMaxBody = 4096;

struct Seen : ResponseSink {
  std::vector<std::string> events;  // one line per head, body and outcome
  std::string body;
  std::optional<uint64_t> length;

  bool OnHead(const ResponseHead& head) override {
    FUZZ_CHECK(head.status >= 200 && head.status <= 599);
    FUZZ_CHECK(!(head.chunked && head.content_length.has_value()));
    FUZZ_CHECK(!head.content_length.has_value() || *head.content_length <= kMaxBody);
    length = head.content_length;
    body.clear();
    events.push_back("head " + std::to_string(head.status) + " " +
                     (head.content_length ? std::to_string(*head.content_length) : "-") + " " +
                     (head.chunked ? "chunked" : "") + (head.close ? " close" : "") + " " + head.encoding + " " +
                     (head.infer_header_length ? std::to_string(*head.infer_header_length) : "-"));
    return true;
  }

  void OnBody(const char* data, size_t size) override {
    body.append(data, size);
    FUZZ_CHECK(body.size() <= kMaxBody);
    FUZZ_CHECK(!length.has_value() || body.size() <= *length);
  }
};

// Reads responses from `bytes`, `piece` bytes at a time (0: all at once).
std::vector<std::string> Read(const std::vector<char>& bytes, size_t piece) {
  ResponseReader reader(kMaxBody);
  Seen seen;
  size_t at = 0;
  size_t responses = 0;
  while (at < bytes.size()) {
    const size_t size = piece == 0 ? bytes.size() - at : std::min(piece, bytes.size() - at);
    // An exactly sized copy: ASan then reports any read past `size`.
    std::vector<char> chunk(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                            bytes.begin() + static_cast<std::ptrdiff_t>(at + size));
    size_t used = 0;
    const ResponseReader::Status status = reader.Feed(chunk.data(), chunk.size(), &seen, &used);
    FUZZ_CHECK(used <= size);
    at += used;
    if (status == ResponseReader::Status::kMore) {
      FUZZ_CHECK(used == size);
      continue;
    }
    if (status == ResponseReader::Status::kDone) {
      FUZZ_CHECK(!seen.length.has_value() || seen.body.size() == *seen.length);
      seen.events.push_back("done " + seen.body);
      reader.Reset();
      FUZZ_CHECK(++responses <= bytes.size());
      continue;
    }
    FUZZ_CHECK(status == ResponseReader::Status::kError);
    FUZZ_CHECK(!reader.error().empty());
    seen.events.push_back("error " + reader.error());
    return seen.events;
  }
  const ResponseReader::Status end = reader.End();
  if (end == ResponseReader::Status::kDone) seen.events.push_back("end " + seen.body);
  else seen.events.push_back("end error " + reader.error());
  return seen.events;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 64;
  const std::vector<char> bytes(data + 1, data + size);
  FUZZ_CHECK(Read(bytes, 0) == Read(bytes, piece));
  return 0;
}
