#include "http-wire.h"

#include <cstring>
#include <limits>

namespace tsn::http {

namespace {

bool IsTokenChar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != 0;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    unsigned char x = static_cast<unsigned char>(a[i]);
    unsigned char y = static_cast<unsigned char>(b[i]);
    if (x >= 'A' && x <= 'Z') x |= 0x20;
    if (y >= 'A' && y <= 'Z') y |= 0x20;
    if (x != y) return false;
  }
  return true;
}

bool ContainsIgnoreCase(std::string_view text, std::string_view word) {
  for (size_t i = 0; i + word.size() <= text.size(); ++i)
    if (EqualsIgnoreCase(text.substr(i, word.size()), word)) return true;
  return false;
}

// A decimal size with no sign, spaces or leading junk; at most 2^53.
std::optional<size_t> ParseSize(std::string_view text) {
  if (text.empty() || text.size() > 16) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  if (value > (uint64_t{1} << 53)) return std::nullopt;
  return static_cast<size_t>(value);
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

bool IsValueChar(unsigned char c) { return c == '\t' || (c >= ' ' && c < 0x7f); }

// The methods read here; any other goes to Node's parser, which knows which
// others exist and answers 400 at once for the rest.
constexpr std::string_view kMethods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"};

bool KnownMethod(std::string_view method) {
  for (std::string_view known : kMethods)
    if (method == known) return true;
  return false;
}

bool KnownMethodPrefix(std::string_view prefix) {
  for (std::string_view known : kMethods)
    if (known.substr(0, prefix.size()) == prefix) return true;
  return false;
}

// Whether a head not yet ended (no blank line) can still become one that
// ParseHead reads; false as soon as a byte says it cannot, so that Node's
// parser answers it at once (400) rather than after the headers timeout.
bool CanBecomeHead(std::string_view partial) {
  const size_t n = partial.size();
  size_t i = 0;
  auto byte = [&](size_t at) { return static_cast<unsigned char>(partial[at]); };
  // METHOD SP target SP HTTP/1.1 CRLF
  while (i < n && partial[i] != ' ') ++i;
  if (i == n) return KnownMethodPrefix(partial);
  if (!KnownMethod(partial.substr(0, i))) return false;
  const size_t target = ++i;
  for (; i < n && partial[i] != ' '; ++i)
    if (byte(i) <= ' ' || byte(i) >= 0x7f || (i == target && partial[i] != '/')) return false;
  if (i == n) return true;
  if (i == target) return false;
  ++i;
  for (char expected : std::string_view("HTTP/1.1\r\n")) {
    if (i == n) return true;
    if (partial[i++] != expected) return false;
  }
  // name: value CRLF, each; a CR at a line's start begins the blank line.
  while (i < n) {
    if (partial[i] == '\r') return i + 1 == n;
    size_t name = 0;
    for (; i < n && partial[i] != ':'; ++i, ++name)
      if (!IsTokenChar(byte(i))) return false;
    if (i == n) return true;
    if (name == 0) return false;
    for (++i; i < n && partial[i] != '\r'; ++i)
      if (!IsValueChar(byte(i))) return false;
    if (i == n || ++i == n) return true;
    if (partial[i++] != '\n') return false;
  }
  return true;
}

}  // namespace

HeadStatus ParseHead(const char* data, size_t size, RequestHead* head) {
  const std::string_view all(data, size < kMaxHeadBytes ? size : kMaxHeadBytes);
  const size_t end = all.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    // Bytes that cannot become a head (or a head past the limit) are for Node to judge, not to wait on.
    return size >= kMaxHeadBytes || !CanBecomeHead(all) ? HeadStatus::kToNode : HeadStatus::kIncomplete;
  }
  *head = RequestHead{};
  head->head_bytes = end + 4;
  std::string_view rest = all.substr(0, end + 2);

  // Request line: METHOD SP target SP HTTP/1.1
  size_t eol = rest.find("\r\n");
  std::string_view line = rest.substr(0, eol);
  rest.remove_prefix(eol + 2);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp1 == 0 || sp2 == sp1) return HeadStatus::kToNode;
  head->method = line.substr(0, sp1);
  head->target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (line.substr(sp2 + 1) != "HTTP/1.1") return HeadStatus::kToNode;
  if (!KnownMethod(head->method)) return HeadStatus::kToNode;
  if (head->target.empty() || head->target[0] != '/') return HeadStatus::kToNode;
  for (char c : head->target) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= ' ' || u >= 0x7f) return HeadStatus::kToNode;
  }

  bool have_length = false;
  bool have_host = false;
  while (!rest.empty()) {
    eol = rest.find("\r\n");
    line = rest.substr(0, eol);
    rest.remove_prefix(eol + 2);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return HeadStatus::kToNode;
    const std::string_view name = line.substr(0, colon);
    for (char c : name)
      if (!IsTokenChar(static_cast<unsigned char>(c))) return HeadStatus::kToNode;
    const std::string_view value = Trim(line.substr(colon + 1));
    for (char c : value) {
      const auto u = static_cast<unsigned char>(c);
      if ((u < ' ' && u != '\t') || u == 0x7f || u >= 0x80 || c == '\n' || c == '\r')
        return HeadStatus::kToNode;
    }
    if (EqualsIgnoreCase(name, "host")) {
      if (have_host) return HeadStatus::kToNode;
      have_host = true;
    } else if (EqualsIgnoreCase(name, "content-length")) {
      const auto length = ParseSize(value);
      if (have_length || !length) return HeadStatus::kToNode;
      have_length = true;
      head->content_length = *length;
    } else if (EqualsIgnoreCase(name, "transfer-encoding") || EqualsIgnoreCase(name, "expect") ||
               EqualsIgnoreCase(name, "upgrade")) {
      return HeadStatus::kToNode;
    } else if (EqualsIgnoreCase(name, "connection")) {
      if (ContainsIgnoreCase(value, "upgrade")) return HeadStatus::kToNode;
      if (ContainsIgnoreCase(value, "close")) head->close = true;
    } else if (EqualsIgnoreCase(name, "inference-header-content-length")) {
      const auto length = ParseSize(value);
      if (head->infer_header_length || !length) head->plain_infer_ok = false;
      else head->infer_header_length = *length;
    } else if (EqualsIgnoreCase(name, "content-encoding") || EqualsIgnoreCase(name, "origin")) {
      head->plain_infer_ok = false;
    } else if (EqualsIgnoreCase(name, "accept-encoding")) {
      if (ContainsIgnoreCase(value, "gzip") || ContainsIgnoreCase(value, "deflate"))
        head->plain_infer_ok = false;
    }
  }
  return have_host ? HeadStatus::kComplete : HeadStatus::kToNode;
}

bool InferTarget(std::string_view target, std::string* model, int64_t* version) {
  constexpr std::string_view kPrefix = "/v2/models/";
  constexpr std::string_view kInfer = "/infer";
  if (target.substr(0, kPrefix.size()) != kPrefix) return false;
  target.remove_prefix(kPrefix.size());
  if (target.size() <= kInfer.size() || target.substr(target.size() - kInfer.size()) != kInfer)
    return false;
  target.remove_suffix(kInfer.size());
  // Names with escapes, and queries, are the JS front end's to decode.
  if (target.find_first_of("%?#") != std::string_view::npos) return false;
  *version = -1;
  const size_t versions = target.find("/versions/");
  if (versions != std::string_view::npos) {
    const std::string_view digits = target.substr(versions + 10);
    const auto number = ParseSize(digits);
    if (!number || digits.size() > 15) return false;
    *version = static_cast<int64_t>(*number);
    target = target.substr(0, versions);
  }
  if (target.empty() || target.find('/') != std::string_view::npos) return false;
  model->assign(target);
  return true;
}

// ---- JSON, just enough for an inference header ------------------------------

namespace {

struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool boolean = false;
  bool integer = false;  // written without fraction or exponent, and fits int64
  int64_t int_value = 0;
  std::string text;  // strings
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  const Json* Member(std::string_view name) const {
    for (const auto& [key, value] : members)
      if (key == name) return &value;
    return nullptr;
  }
};

// Recursive descent over the header. Strings with escapes or bytes past
// ASCII are refused (the JS front end reads those): names that reach
// Triton from here are plain ASCII.
class JsonReader {
 public:
  JsonReader(const char* data, size_t size) : p_(data), end_(data + size) {}

  bool ReadDocument(Json* out) {
    if (!Value(out, 0)) return false;
    Space();
    return p_ == end_;
  }

 private:
  static constexpr int kMaxDepth = 32;
  // Keys are compared pairwise (duplicates are JS's to judge): few per object.
  static constexpr size_t kMaxMembers = 64;
  static constexpr size_t kMaxItems = kMaxFastTensors;

  void Space() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  bool Literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::memcmp(p_, word.data(), word.size()) != 0)
      return false;
    p_ += word.size();
    return true;
  }

  bool Value(Json* out, int depth) {
    if (depth > kMaxDepth) return false;
    Space();
    if (p_ == end_) return false;
    switch (*p_) {
      case '{': return Object(out, depth);
      case '[': return Array(out, depth);
      case '"': out->kind = Json::kString; return String(&out->text);
      case 't': out->kind = Json::kBool; out->boolean = true; return Literal("true");
      case 'f': out->kind = Json::kBool; out->boolean = false; return Literal("false");
      case 'n': out->kind = Json::kNull; return Literal("null");
      default: return Number(out);
    }
  }

  bool Object(Json* out, int depth) {
    out->kind = Json::kObject;
    ++p_;
    Space();
    if (p_ < end_ && *p_ == '}') { ++p_; return true; }
    for (;;) {
      Space();
      std::string key;
      if (p_ == end_ || *p_ != '"' || !String(&key)) return false;
      if (out->members.size() == kMaxMembers) return false;
      for (const auto& member : out->members)
        if (member.first == key) return false;  // duplicate keys: JS decides
      Space();
      if (p_ == end_ || *p_++ != ':') return false;
      out->members.emplace_back(std::move(key), Json{});
      if (!Value(&out->members.back().second, depth + 1)) return false;
      Space();
      if (p_ == end_) return false;
      if (*p_ == ',') { ++p_; continue; }
      if (*p_ == '}') { ++p_; return true; }
      return false;
    }
  }

  bool Array(Json* out, int depth) {
    out->kind = Json::kArray;
    ++p_;
    Space();
    if (p_ < end_ && *p_ == ']') { ++p_; return true; }
    for (;;) {
      if (out->items.size() == kMaxItems) return false;
      out->items.emplace_back();
      if (!Value(&out->items.back(), depth + 1)) return false;
      Space();
      if (p_ == end_) return false;
      if (*p_ == ',') { ++p_; continue; }
      if (*p_ == ']') { ++p_; return true; }
      return false;
    }
  }

  bool String(std::string* out) {
    ++p_;
    const char* start = p_;
    while (p_ < end_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        out->assign(start, p_);
        ++p_;
        return true;
      }
      if (c == '\\' || c < 0x20 || c >= 0x80) return false;
      ++p_;
    }
    return false;
  }

  bool Number(Json* out) {
    out->kind = Json::kNumber;
    const char* start = p_;
    bool negative = false;
    if (p_ < end_ && *p_ == '-') { negative = true; ++p_; }
    if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
    if (*p_ == '0' && p_ + 1 < end_ && p_[1] >= '0' && p_[1] <= '9') return false;
    uint64_t magnitude = 0;
    bool fits = true;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') {
      const auto digit = static_cast<uint64_t>(*p_ - '0');
      if (magnitude > (uint64_t{1} << 62) / 10) fits = false;
      else magnitude = magnitude * 10 + digit;
      ++p_;
    }
    bool fraction = false;
    if (p_ < end_ && *p_ == '.') {
      fraction = true;
      ++p_;
      if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      fraction = true;
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    out->integer = !fraction && fits;
    out->int_value = negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
    (void)start;
    return true;
  }

  const char* p_;
  const char* end_;
};

struct TypeInfo {
  const char* name;
  TRITONSERVER_DataType type;
  size_t size;  // bytes per element; 0 for BYTES
};

constexpr TypeInfo kTypes[] = {
    {"BOOL", TRITONSERVER_TYPE_BOOL, 1},     {"UINT8", TRITONSERVER_TYPE_UINT8, 1},
    {"UINT16", TRITONSERVER_TYPE_UINT16, 2}, {"UINT32", TRITONSERVER_TYPE_UINT32, 4},
    {"UINT64", TRITONSERVER_TYPE_UINT64, 8}, {"INT8", TRITONSERVER_TYPE_INT8, 1},
    {"INT16", TRITONSERVER_TYPE_INT16, 2},   {"INT32", TRITONSERVER_TYPE_INT32, 4},
    {"INT64", TRITONSERVER_TYPE_INT64, 8},   {"FP16", TRITONSERVER_TYPE_FP16, 2},
    {"FP32", TRITONSERVER_TYPE_FP32, 4},     {"FP64", TRITONSERVER_TYPE_FP64, 8},
    {"BYTES", TRITONSERVER_TYPE_BYTES, 0},   {"BF16", TRITONSERVER_TYPE_BF16, 2},
};

// An object whose keys are all in `allowed`.
bool OnlyKeys(const Json& object, std::initializer_list<std::string_view> allowed) {
  if (object.kind != Json::kObject) return false;
  for (const auto& member : object.members) {
    bool known = false;
    for (std::string_view name : allowed) known = known || member.first == name;
    if (!known) return false;
  }
  return true;
}

std::optional<bool> OptionalBool(const Json* value) {
  if (value == nullptr) return std::nullopt;
  if (value->kind != Json::kBool) return std::nullopt;
  return value->boolean;
}

// The range a tensor's parameters name: a region, a byte size, an optional
// offset, and nothing else (not even binary_data: the JS front end says
// why that is wrong).
std::optional<FastSharedMemory> ReadSharedMemory(const Json& parameters) {
  if (!OnlyKeys(parameters, {"shared_memory_region", "shared_memory_byte_size", "shared_memory_offset"}))
    return std::nullopt;
  const Json* region = parameters.Member("shared_memory_region");
  const Json* size = parameters.Member("shared_memory_byte_size");
  const Json* offset = parameters.Member("shared_memory_offset");
  if (region == nullptr || region->kind != Json::kString || size == nullptr || size->kind != Json::kNumber ||
      !size->integer || size->int_value < 0)
    return std::nullopt;
  FastSharedMemory range{region->text, 0, static_cast<uint64_t>(size->int_value)};
  if (offset != nullptr) {
    if (offset->kind != Json::kNumber || !offset->integer || offset->int_value < 0) return std::nullopt;
    range.offset = static_cast<uint64_t>(offset->int_value);
  }
  return range;
}

}  // namespace

bool TensorBytes(const std::vector<int64_t>& shape, size_t element_size, uint64_t* bytes) {
  if (shape.size() > kMaxFastDims) return false;
  uint64_t elements = 1;
  for (int64_t dim : shape) {
    if (dim < 0) return false;
    // Checked before multiplying: [2^32, 2^32] must not wrap to 0.
    if (dim != 0 && elements > kMaxFastElements / static_cast<uint64_t>(dim)) return false;
    elements *= static_cast<uint64_t>(dim);
  }
  *bytes = elements * element_size;
  return true;
}

bool ReadFastRequest(const char* json, size_t json_size, const char* binary,
                     size_t binary_size, FastRequest* request) {
  // A header this large is not a binary request's: the JS front end reads it (no tree built here).
  if (json_size > kMaxFastHeaderBytes) return false;
  Json root;
  if (!JsonReader(json, json_size).ReadDocument(&root)) return false;
  if (!OnlyKeys(root, {"id", "parameters", "inputs", "outputs"})) return false;

  if (const Json* id = root.Member("id")) {
    if (id->kind != Json::kString) return false;
    request->id = id->text;
  }
  bool binary_output = false;
  if (const Json* parameters = root.Member("parameters")) {
    if (!OnlyKeys(*parameters, {"binary_data_output"})) return false;
    if (const Json* flag = parameters->Member("binary_data_output")) {
      if (flag->kind != Json::kBool) return false;
      binary_output = flag->boolean;
    }
  }

  const Json* inputs = root.Member("inputs");
  if (inputs == nullptr || inputs->kind != Json::kArray || inputs->items.empty()) return false;
  size_t offset = 0;
  for (const Json& input : inputs->items) {
    if (!OnlyKeys(input, {"name", "datatype", "shape", "parameters"})) return false;
    const Json* name = input.Member("name");
    const Json* datatype = input.Member("datatype");
    const Json* shape = input.Member("shape");
    const Json* parameters = input.Member("parameters");
    if (name == nullptr || name->kind != Json::kString || datatype == nullptr ||
        datatype->kind != Json::kString || shape == nullptr || shape->kind != Json::kArray ||
        parameters == nullptr)
      return false;
    const TypeInfo* type = nullptr;
    for (const TypeInfo& info : kTypes)
      if (datatype->text == info.name) type = &info;
    if (type == nullptr || type->size == 0) return false;  // BYTES: the JS front end checks its elements

    FastInput fast;
    fast.name = name->text;
    fast.datatype = type->type;
    if (shape->items.size() > kMaxFastDims) return false;
    for (const Json& dim : shape->items) {
      if (dim.kind != Json::kNumber || !dim.integer || dim.int_value < 0) return false;
      fast.shape.push_back(dim.int_value);
    }
    uint64_t bytes = 0;
    if (!TensorBytes(fast.shape, type->size, &bytes)) return false;
    if (parameters->Member("shared_memory_region") != nullptr) {
      fast.shared_memory = ReadSharedMemory(*parameters);
      if (!fast.shared_memory || fast.shared_memory->byte_size != bytes) return false;
    } else {
      if (!OnlyKeys(*parameters, {"binary_data_size"})) return false;
      const Json* size = parameters->Member("binary_data_size");
      if (size == nullptr || size->kind != Json::kNumber || !size->integer || size->int_value < 0 ||
          static_cast<uint64_t>(size->int_value) != bytes || bytes > binary_size - offset)
        return false;
      fast.data = binary + offset;
      fast.size = static_cast<size_t>(bytes);
      offset += fast.size;
    }
    request->inputs.push_back(std::move(fast));
  }
  if (offset != binary_size) return false;

  if (const Json* outputs = root.Member("outputs")) {
    if (outputs->kind != Json::kArray) return false;
    for (const Json& output : outputs->items) {
      if (!OnlyKeys(output, {"name", "parameters"})) return false;
      const Json* name = output.Member("name");
      if (name == nullptr || name->kind != Json::kString) return false;
      FastOutput fast{name->text, std::nullopt};
      bool as_binary = binary_output;
      if (const Json* parameters = output.Member("parameters")) {
        if (parameters->Member("shared_memory_region") != nullptr) {
          // binary_data beside a region is Triton's error: the JS front end says it.
          fast.shared_memory = ReadSharedMemory(*parameters);
          if (!fast.shared_memory) return false;
        } else {
          if (!OnlyKeys(*parameters, {"binary_data"})) return false;
          const Json* flag = parameters->Member("binary_data");
          if (flag != nullptr) {
            const auto value = OptionalBool(flag);
            if (!value) return false;
            as_binary = *value;
          }
        }
      }
      if (!fast.shared_memory && !as_binary) return false;
      for (const FastOutput& seen : request->outputs)
        if (seen.name == fast.name) return false;
      request->outputs.push_back(std::move(fast));
    }
    // An empty list asks for every output, each as binary_data_output says.
    if (outputs->items.empty() && !binary_output) return false;
  } else if (!binary_output) {
    return false;
  }
  return true;
}

bool DataTypeFromName(std::string_view name, TRITONSERVER_DataType* datatype, size_t* element_size) {
  for (const TypeInfo& info : kTypes) {
    if (name != info.name) continue;
    *datatype = info.type;
    *element_size = info.size;
    return true;
  }
  return false;
}

const char* DataTypeName(TRITONSERVER_DataType datatype) {
  for (const TypeInfo& info : kTypes)
    if (info.type == datatype) return info.name;
  return nullptr;
}

void AppendJsonString(std::string* out, std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (u < 0x20) {
      out->append("\\u00");
      out->push_back(kHex[u >> 4]);
      out->push_back(kHex[u & 15]);
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

int HttpStatus(TRITONSERVER_Error_Code code) {
  switch (code) {
    case TRITONSERVER_ERROR_INTERNAL: return 500;
    case TRITONSERVER_ERROR_NOT_FOUND: return 404;
    case TRITONSERVER_ERROR_UNAVAILABLE: return 503;
    case TRITONSERVER_ERROR_UNSUPPORTED: return 501;
    default: return 400;
  }
}

}  // namespace tsn::http
