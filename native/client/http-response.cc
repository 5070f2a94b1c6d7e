#include "http-response.h"

#include <algorithm>
#include <cstring>
#include <string_view>

namespace tsn::client {

namespace {

bool IsTokenChar(unsigned char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != 0;
}

// Field values: tabs, visible characters and obs-text; no other control byte.
bool IsValueChar(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

bool EqualsLower(std::string_view text, std::string_view lower) {
  if (text.size() != lower.size()) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// A decimal length: digits only, at most 2^53 (what JS can hold exactly).
bool ParseLength(std::string_view text, uint64_t* value) {
  if (text.empty() || text.size() > 16) return false;
  uint64_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  if (n > (uint64_t{1} << 53)) return false;
  *value = n;
  return true;
}

// Whether a comma-separated list of tokens holds `token` (lower case).
bool ListHas(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (EqualsLower(Trim(list.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

void ResponseReader::Reset() {
  state_ = State::kHead;
  started_ = false;
  head_.clear();
  head_scan_ = 0;
  line_.clear();
  left_ = 0;
  body_bytes_ = 0;
  trailer_bytes_ = 0;
  trailer_count_ = 0;
  too_large_ = false;
  error_.clear();
}

ResponseReader::Status ResponseReader::Fail(std::string why) {
  state_ = State::kFailed;
  error_ = std::move(why);
  return Status::kError;
}

ResponseReader::Status ResponseReader::TooLarge() {
  too_large_ = true;
  return Fail("the response body is larger than the client's limit (" + std::to_string(max_body_) + " bytes)");
}

ResponseReader::Line ResponseReader::TakeLine(const char** data, size_t* size, size_t limit) {
  const void* found = std::memchr(*data, '\n', *size);
  const size_t count = found == nullptr ? *size : static_cast<size_t>(static_cast<const char*>(found) - *data) + 1;
  if (line_.size() + count > limit + 2) return Line::kTooLong;
  line_.append(*data, count);
  *data += count;
  *size -= count;
  if (found == nullptr) return Line::kMore;
  if (line_.size() < 2 || line_[line_.size() - 2] != '\r') return Line::kBare;
  line_.resize(line_.size() - 2);
  return Line::kComplete;
}

bool ResponseReader::ParseHead(ResponseHead* head) {
  std::string_view rest(head_.data(), head_.size() - 2);  // each line keeps its CRLF; the blank line's is dropped
  const size_t first_end = rest.find("\r\n");
  const std::string_view status_line = rest.substr(0, first_end);
  rest.remove_prefix(first_end + 2);
  // HTTP/1.x SP 3DIGIT [SP reason]
  if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1." ||
      (status_line[7] != '0' && status_line[7] != '1') || status_line[8] != ' ' ||
      (status_line.size() > 12 && status_line[12] != ' ')) {
    Fail("the server's answer is not an HTTP/1.x response");
    return false;
  }
  int status = 0;
  for (size_t i = 9; i < 12; ++i) {
    const char c = status_line[i];
    if (c < '0' || c > '9') {
      Fail("the response's status is not a number");
      return false;
    }
    status = status * 10 + (c - '0');
  }
  if (status < 100 || status > 599) {
    Fail("the response's status " + std::to_string(status) + " is out of range");
    return false;
  }
  head->status = status;
  const bool http10 = status_line[7] == '0';
  bool keep_alive = false;
  bool has_length = false;
  bool has_coding = false;
  size_t count = 0;
  while (!rest.empty()) {
    const size_t end = rest.find("\r\n");
    const std::string_view line = rest.substr(0, end);
    rest.remove_prefix(end + 2);
    if (++count > kMaxResponseHeaders) {
      Fail("the response has more than " + std::to_string(kMaxResponseHeaders) + " headers");
      return false;
    }
    const size_t colon = line.find(':');
    if (colon == 0 || colon == std::string_view::npos) {
      Fail("a response header line has no name");
      return false;
    }
    const std::string_view name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), [](char c) { return IsTokenChar(static_cast<unsigned char>(c)); })) {
      Fail("a response header's name has a character a name may not have");
      return false;
    }
    const std::string_view value = Trim(line.substr(colon + 1));
    if (!std::all_of(value.begin(), value.end(), [](char c) { return IsValueChar(static_cast<unsigned char>(c)); })) {
      Fail("a response header's value has a control character");
      return false;
    }
    if (EqualsLower(name, "content-length")) {
      uint64_t length = 0;
      if (!ParseLength(value, &length) || (has_length && length != *head->content_length)) {
        Fail("the response's Content-Length is not one decimal length");
        return false;
      }
      has_length = true;
      head->content_length = length;
    } else if (EqualsLower(name, "transfer-encoding")) {
      if (has_coding || !EqualsLower(value, "chunked")) {
        Fail("the response's Transfer-Encoding is not chunked, the one coding this client reads");
        return false;
      }
      has_coding = true;
      head->chunked = true;
    } else if (EqualsLower(name, "connection")) {
      if (ListHas(value, "close")) head->close = true;
      if (ListHas(value, "keep-alive")) keep_alive = true;
    } else if (EqualsLower(name, "content-encoding")) {
      if (!EqualsLower(value, "identity")) head->encoding.assign(value);
    } else if (EqualsLower(name, "inference-header-content-length")) {
      uint64_t length = 0;
      if (!ParseLength(value, &length)) {
        Fail("the response's Inference-Header-Content-Length is not a decimal length");
        return false;
      }
      head->infer_header_length = length;
    }
  }
  if (http10 && !keep_alive) head->close = true;
  if (head->chunked && has_length) {
    Fail("the response has both Content-Length and Transfer-Encoding");
    return false;
  }
  if (status == 204 || status == 304 || status < 200) {
    head->content_length = 0;
    head->chunked = false;
  } else if (!head->chunked && !has_length) {
    head->close = true;  // the body ends with the connection
  }
  if (head->content_length.has_value() && *head->content_length > max_body_) {
    TooLarge();
    return false;
  }
  // A compressed body's header length counts its inflated bytes (checked once inflated).
  if (head->infer_header_length.has_value() && head->content_length.has_value() && head->encoding.empty() &&
      *head->infer_header_length > *head->content_length) {
    Fail("the response's Inference-Header-Content-Length is larger than its body");
    return false;
  }
  return true;
}

void ResponseReader::PassBody(const char** data, size_t* size, ResponseSink* sink) {
  const size_t take = static_cast<size_t>(std::min<uint64_t>(*size, left_));
  sink->OnBody(*data, take);
  *data += take;
  *size -= take;
  left_ -= take;
  body_bytes_ += take;
}

ResponseReader::Status ResponseReader::Feed(const char* data, size_t size, ResponseSink* sink, size_t* used) {
  const char* const start = data;
  auto out = [&](Status status) {
    *used = static_cast<size_t>(data - start);
    return status;
  };
  if (size > 0) started_ = true;
  for (;;) {
    switch (state_) {
      case State::kHead: {
        const size_t take = std::min(size, kMaxResponseHeadBytes - head_.size());
        head_.append(data, take);
        const size_t end = head_.find("\r\n\r\n", head_scan_ >= 3 ? head_scan_ - 3 : 0);
        if (end == std::string::npos) {
          head_scan_ = head_.size();
          data += take;
          size -= take;
          if (head_.size() >= kMaxResponseHeadBytes)
            return out(Fail("the response's head is longer than the client's limit (64 KiB)"));
          return out(Status::kMore);
        }
        const size_t head_bytes = end + 4;
        const size_t taken = take - (head_.size() - head_bytes);
        data += taken;
        size -= taken;
        head_.resize(head_bytes);
        ResponseHead head;
        if (!ParseHead(&head)) return out(Status::kError);
        head_.clear();
        head_scan_ = 0;
        if (head.status < 200) {
          if (head.status == 101) return out(Fail("the server switched protocols (101)"));
          continue;  // an interim response (100 Continue, 103): the real one follows
        }
        if (!sink->OnHead(head)) {
          state_ = State::kFailed;
          return out(Status::kStopped);
        }
        if (head.chunked) {
          state_ = State::kChunkLine;
        } else if (head.content_length.has_value()) {
          left_ = *head.content_length;
          state_ = State::kBody;
        } else {
          state_ = State::kUntilEnd;
        }
        continue;
      }
      case State::kBody: {
        if (left_ == 0) {
          state_ = State::kDone;
          continue;
        }
        if (size == 0) return out(Status::kMore);
        PassBody(&data, &size, sink);
        continue;
      }
      case State::kChunkLine: {
        const Line line = TakeLine(&data, &size, kMaxChunkLineBytes);
        if (line == Line::kMore) return out(Status::kMore);
        if (line != Line::kComplete) return out(Fail("a chunk's size line is malformed"));
        const std::string_view text = Trim(std::string_view(line_).substr(0, line_.find(';')));
        if (text.empty() || text.size() > 15) return out(Fail("a chunk's size is not a hex number"));
        uint64_t length = 0;
        for (char c : text) {
          int digit;
          if (c >= '0' && c <= '9') digit = c - '0';
          else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
          else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
          else return out(Fail("a chunk's size is not a hex number"));
          length = length * 16 + static_cast<uint64_t>(digit);
        }
        line_.clear();
        if (length > max_body_ - body_bytes_) return out(TooLarge());
        left_ = length;
        state_ = length == 0 ? State::kTrailers : State::kChunkData;
        continue;
      }
      case State::kChunkData: {
        if (size == 0) return out(Status::kMore);
        PassBody(&data, &size, sink);
        if (left_ == 0) state_ = State::kChunkEnd;
        continue;
      }
      case State::kChunkEnd: {
        const Line line = TakeLine(&data, &size, 0);
        if (line == Line::kMore) return out(Status::kMore);
        if (line != Line::kComplete) return out(Fail("a chunk does not end where its size says"));
        state_ = State::kChunkLine;
        continue;
      }
      case State::kTrailers: {
        const size_t before = line_.size();
        const Line line = TakeLine(&data, &size, kMaxResponseHeadBytes - std::min(kMaxResponseHeadBytes, trailer_bytes_));
        trailer_bytes_ += line_.size() - before;
        if (line == Line::kMore) return out(Status::kMore);
        if (line != Line::kComplete) return out(Fail("the response's trailers are malformed or past the client's limit"));
        const bool blank = line_.empty();
        line_.clear();
        if (blank) {
          state_ = State::kDone;
          continue;
        }
        if (++trailer_count_ > kMaxResponseHeaders) return out(Fail("the response's trailers are past the client's limit"));
        continue;
      }
      case State::kUntilEnd: {
        if (size == 0) return out(Status::kMore);
        if (size > max_body_ - body_bytes_) return out(TooLarge());
        sink->OnBody(data, size);
        body_bytes_ += size;
        data += size;
        size = 0;
        return out(Status::kMore);
      }
      case State::kDone:
        return out(Status::kDone);
      case State::kFailed:
        return out(Status::kError);
    }
  }
}

ResponseReader::Status ResponseReader::End() {
  if (state_ == State::kUntilEnd || state_ == State::kDone) {
    state_ = State::kDone;
    return Status::kDone;
  }
  if (state_ != State::kFailed) Fail(started_ ? "the server closed the connection inside a response" : "the server closed the connection");
  return Status::kError;
}

}  // namespace tsn::client
