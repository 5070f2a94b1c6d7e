// Reads HTTP/1.1 responses for the client's native HTTP transport
// (http-channel.cc): the status line and headers, then the body as
// Content-Length, chunked coding or the connection's end frames it. Pure
// (no libuv, no Node-API), so test/fuzz/http_response_fuzzer.cc runs it
// alone. Everything a server sends is bounded here: the head by bytes and
// header count, the body by the caller's limit, chunk lines and trailers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace tsn::client {

// A response's status line and headers; Triton sends a handful of short ones.
inline constexpr size_t kMaxResponseHeadBytes = 64 * 1024;
inline constexpr size_t kMaxResponseHeaders = 128;
// A chunk-size line (hex digits and extensions).
inline constexpr size_t kMaxChunkLineBytes = 1024;

struct ResponseHead {
  int status = 0;
  std::optional<uint64_t> content_length;  // absent: chunked, or until the connection ends
  bool chunked = false;
  bool close = false;                      // the server closes the connection after it
  std::optional<uint64_t> infer_header_length;  // Inference-Header-Content-Length
  std::string encoding;                    // Content-Encoding, other than identity
};

// What the reader hands on, in order: OnHead once, OnBody any number of
// times, then the response is done (Feed's kDone).
class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  // False stops the reader (e.g. no memory for the body): Feed returns kStopped.
  virtual bool OnHead(const ResponseHead& head) = 0;
  virtual void OnBody(const char* data, size_t size) = 0;
};

class ResponseReader {
 public:
  enum class Status { kMore, kDone, kError, kStopped };

  // `max_body`: the most body bytes a response may have.
  explicit ResponseReader(uint64_t max_body) : max_body_(max_body) {}

  // Starts over for the next response on the connection.
  void Reset();

  // Reads from `data`; `*used` says how much. kDone: a response is complete
  // (bytes after it are unused); kError: `error()` says what is wrong.
  Status Feed(const char* data, size_t size, ResponseSink* sink, size_t* used);

  // The connection ended: kDone where that completes a response framed by
  // the connection's end, else kError.
  Status End();

  // Whether any byte of the current response has been read.
  bool started() const { return started_; }
  // The error was a body past `max_body`.
  bool too_large() const { return too_large_; }
  const std::string& error() const { return error_; }

 private:
  enum class State { kHead, kBody, kChunkLine, kChunkData, kChunkEnd, kTrailers, kUntilEnd, kDone, kFailed };
  enum class Line { kComplete, kMore, kTooLong, kBare };

  Status Fail(std::string why);
  Status TooLarge();
  // Parses head_ (complete, blank line included); false after Fail.
  bool ParseHead(ResponseHead* head);
  // Reads a line ending in CRLF (at most `limit` bytes before it) into line_, CRLF dropped.
  Line TakeLine(const char** data, size_t* size, size_t limit);
  // Hands the sink what `data` holds of the body or chunk's `left_` bytes.
  void PassBody(const char** data, size_t* size, ResponseSink* sink);

  uint64_t max_body_;
  State state_ = State::kHead;
  bool started_ = false;
  std::string head_;
  size_t head_scan_ = 0;  // where the search for the blank line goes on
  std::string line_;
  uint64_t left_ = 0;        // of a Content-Length body or a chunk
  uint64_t body_bytes_ = 0;  // of the body so far
  size_t trailer_bytes_ = 0;
  size_t trailer_count_ = 0;
  bool too_large_ = false;
  std::string error_;
};

}  // namespace tsn::client
