// Test core: JSON writer and parser (see json.h). Imitates the compact
// output of the rapidjson writer Triton uses for every JSON message.
#include "json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace tc {

std::string
JsonQuote(const std::string& s)
{
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          static const char hex[] = "0123456789ABCDEF";
          out += "\\u00";
          out.push_back(hex[c >> 4]);
          out.push_back(hex[c & 0xf]);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
  return out;
}

namespace json {

int64_t
Value::AsInt() const
{
  switch (type_) {
    case Type::kInt:
      return i_;
    case Type::kUInt:
      return static_cast<int64_t>(u_);
    case Type::kDouble:
      return static_cast<int64_t>(d_);
    default:
      return 0;
  }
}

uint64_t
Value::AsUInt() const
{
  switch (type_) {
    case Type::kInt:
      return static_cast<uint64_t>(i_);
    case Type::kUInt:
      return u_;
    case Type::kDouble:
      return static_cast<uint64_t>(d_);
    default:
      return 0;
  }
}

double
Value::AsDouble() const
{
  switch (type_) {
    case Type::kInt:
      return static_cast<double>(i_);
    case Type::kUInt:
      return static_cast<double>(u_);
    case Type::kDouble:
      return d_;
    default:
      return 0;
  }
}

Value&
Value::Add(const std::string& key, Value v)
{
  obj_.emplace_back(key, std::move(v));
  return obj_.back().second;
}

const Value*
Value::Find(const std::string& key) const
{
  for (const auto& m : obj_) {
    if (m.first == key) {
      return &m.second;
    }
  }
  return nullptr;
}

Value&
Value::Append(Value v)
{
  arr_.push_back(std::move(v));
  return arr_.back();
}

std::string
FormatDouble(double d)
{
  if (std::isnan(d) || std::isinf(d)) {
    return "null";
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".eE") == std::string::npos) {
    s += ".0";
  }
  return s;
}

void
Value::SerializeTo(std::string* out) const
{
  switch (type_) {
    case Type::kNull:
      *out += "null";
      break;
    case Type::kBool:
      *out += b_ ? "true" : "false";
      break;
    case Type::kInt:
      *out += std::to_string(i_);
      break;
    case Type::kUInt:
      *out += std::to_string(u_);
      break;
    case Type::kDouble:
      *out += FormatDouble(d_);
      break;
    case Type::kString:
      *out += JsonQuote(s_);
      break;
    case Type::kArray: {
      out->push_back('[');
      bool first = true;
      for (const auto& v : arr_) {
        if (!first) {
          out->push_back(',');
        }
        first = false;
        v.SerializeTo(out);
      }
      out->push_back(']');
      break;
    }
    case Type::kObject: {
      out->push_back('{');
      bool first = true;
      for (const auto& m : obj_) {
        if (!first) {
          out->push_back(',');
        }
        first = false;
        *out += JsonQuote(m.first);
        out->push_back(':');
        m.second.SerializeTo(out);
      }
      out->push_back('}');
      break;
    }
  }
}

std::string
Value::Serialize() const
{
  std::string s;
  SerializeTo(&s);
  return s;
}

// ---------------------------------------------------------------------------
// Parser
// ---------------------------------------------------------------------------
namespace {

class Parser {
 public:
  explicit Parser(const std::string& t) : t_(t) {}

  Status Run(Value* out)
  {
    Ws();
    TC_RETURN_IF_ERROR(ParseValue(out, 0));
    Ws();
    if (p_ != t_.size()) {
      return Fail("unexpected trailing characters");
    }
    return Status();
  }

 private:
  Status Fail(const std::string& what)
  {
    return Err(
        TRITONSERVER_ERROR_INVALID_ARG,
        "failed to parse JSON at offset " + std::to_string(p_) + ": " + what);
  }
  void Ws()
  {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' ||
                              t_[p_] == '\n' || t_[p_] == '\r')) {
      ++p_;
    }
  }
  bool Lit(const char* s)
  {
    const size_t n = std::strlen(s);
    if (t_.compare(p_, n, s) == 0) {
      p_ += n;
      return true;
    }
    return false;
  }

  Status ParseValue(Value* out, int depth)
  {
    if (depth > 256) {
      return Fail("nesting too deep");
    }
    if (p_ >= t_.size()) {
      return Fail("unexpected end of input");
    }
    const char c = t_[p_];
    if (c == '{') {
      ++p_;
      *out = Value::Object();
      Ws();
      if (p_ < t_.size() && t_[p_] == '}') {
        ++p_;
        return Status();
      }
      while (true) {
        Ws();
        if (p_ >= t_.size() || t_[p_] != '"') {
          return Fail("expected object key");
        }
        std::string key;
        TC_RETURN_IF_ERROR(ParseString(&key));
        Ws();
        if (p_ >= t_.size() || t_[p_] != ':') {
          return Fail("expected ':'");
        }
        ++p_;
        Ws();
        Value v;
        TC_RETURN_IF_ERROR(ParseValue(&v, depth + 1));
        out->Add(key, std::move(v));
        Ws();
        if (p_ < t_.size() && t_[p_] == ',') {
          ++p_;
          continue;
        }
        if (p_ < t_.size() && t_[p_] == '}') {
          ++p_;
          return Status();
        }
        return Fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      ++p_;
      *out = Value::Array();
      Ws();
      if (p_ < t_.size() && t_[p_] == ']') {
        ++p_;
        return Status();
      }
      while (true) {
        Ws();
        Value v;
        TC_RETURN_IF_ERROR(ParseValue(&v, depth + 1));
        out->Append(std::move(v));
        Ws();
        if (p_ < t_.size() && t_[p_] == ',') {
          ++p_;
          continue;
        }
        if (p_ < t_.size() && t_[p_] == ']') {
          ++p_;
          return Status();
        }
        return Fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      std::string s;
      TC_RETURN_IF_ERROR(ParseString(&s));
      *out = Value::Str(std::move(s));
      return Status();
    }
    if (Lit("true")) {
      *out = Value::Bool(true);
      return Status();
    }
    if (Lit("false")) {
      *out = Value::Bool(false);
      return Status();
    }
    if (Lit("null")) {
      *out = Value();
      return Status();
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      return ParseNumber(out);
    }
    return Fail("unexpected character");
  }

  Status ParseNumber(Value* out)
  {
    const size_t start = p_;
    bool integral = true;
    if (t_[p_] == '-') {
      ++p_;
    }
    if (p_ >= t_.size() || !isdigit(static_cast<unsigned char>(t_[p_]))) {
      return Fail("invalid number");
    }
    while (p_ < t_.size() && isdigit(static_cast<unsigned char>(t_[p_]))) {
      ++p_;
    }
    if (p_ < t_.size() && t_[p_] == '.') {
      integral = false;
      ++p_;
      if (p_ >= t_.size() || !isdigit(static_cast<unsigned char>(t_[p_]))) {
        return Fail("invalid number");
      }
      while (p_ < t_.size() && isdigit(static_cast<unsigned char>(t_[p_]))) {
        ++p_;
      }
    }
    if (p_ < t_.size() && (t_[p_] == 'e' || t_[p_] == 'E')) {
      integral = false;
      ++p_;
      if (p_ < t_.size() && (t_[p_] == '+' || t_[p_] == '-')) {
        ++p_;
      }
      if (p_ >= t_.size() || !isdigit(static_cast<unsigned char>(t_[p_]))) {
        return Fail("invalid number");
      }
      while (p_ < t_.size() && isdigit(static_cast<unsigned char>(t_[p_]))) {
        ++p_;
      }
    }
    const std::string num = t_.substr(start, p_ - start);
    if (integral) {
      if (num[0] == '-') {
        int64_t v = 0;
        auto r = std::from_chars(num.data(), num.data() + num.size(), v);
        if (r.ec == std::errc() && r.ptr == num.data() + num.size()) {
          *out = Value::Int(v);
          return Status();
        }
      } else {
        uint64_t v = 0;
        auto r = std::from_chars(num.data(), num.data() + num.size(), v);
        if (r.ec == std::errc() && r.ptr == num.data() + num.size()) {
          if (v <= static_cast<uint64_t>(INT64_MAX)) {
            *out = Value::Int(static_cast<int64_t>(v));
          } else {
            *out = Value::UInt(v);
          }
          return Status();
        }
      }
    }
    *out = Value::Double(std::strtod(num.c_str(), nullptr));
    return Status();
  }

  static void AppendUtf8(uint32_t cp, std::string* s)
  {
    if (cp < 0x80) {
      s->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      s->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      s->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  Status Hex4(uint32_t* cp)
  {
    if (p_ + 4 > t_.size()) {
      return Fail("invalid unicode escape");
    }
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = t_[p_++];
      v <<= 4;
      if (h >= '0' && h <= '9') {
        v |= h - '0';
      } else if (h >= 'a' && h <= 'f') {
        v |= h - 'a' + 10;
      } else if (h >= 'A' && h <= 'F') {
        v |= h - 'A' + 10;
      } else {
        return Fail("invalid unicode escape");
      }
    }
    *cp = v;
    return Status();
  }

  Status ParseString(std::string* s)
  {
    ++p_;  // opening quote
    while (p_ < t_.size()) {
      const char c = t_[p_++];
      if (c == '"') {
        return Status();
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        return Fail("control character in string");
      }
      if (c != '\\') {
        s->push_back(c);
        continue;
      }
      if (p_ >= t_.size()) {
        break;
      }
      const char e = t_[p_++];
      switch (e) {
        case '"':
          s->push_back('"');
          break;
        case '\\':
          s->push_back('\\');
          break;
        case '/':
          s->push_back('/');
          break;
        case 'b':
          s->push_back('\b');
          break;
        case 'f':
          s->push_back('\f');
          break;
        case 'n':
          s->push_back('\n');
          break;
        case 'r':
          s->push_back('\r');
          break;
        case 't':
          s->push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          TC_RETURN_IF_ERROR(Hex4(&cp));
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo = 0;
            if (p_ + 2 <= t_.size() && t_[p_] == '\\' && t_[p_ + 1] == 'u') {
              p_ += 2;
              TC_RETURN_IF_ERROR(Hex4(&lo));
            }
            if (lo < 0xDC00 || lo > 0xDFFF) {
              return Fail("invalid surrogate pair");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          AppendUtf8(cp, s);
          break;
        }
        default:
          return Fail("invalid escape");
      }
    }
    return Fail("unterminated string");
  }

  const std::string& t_;
  size_t p_ = 0;
};

}  // namespace

Status
Parse(const std::string& text, Value* out)
{
  Parser p(text);
  return p.Run(out);
}

}  // namespace json
}  // namespace tc
