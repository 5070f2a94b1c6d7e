// Test core: a small JSON value, writer and parser.
//
// Real Triton builds its JSON messages with rapidjson; the writer here
// prints the same compact form (no spaces, members in insertion order,
// only '"', '\\' and control characters escaped, doubles in shortest
// round-trip form with ".0" added to integral values).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common.h"

namespace tc { namespace json {

class Value {
 public:
  enum class Type { kNull, kBool, kInt, kUInt, kDouble, kString, kArray, kObject };

  Value() = default;
  static Value Object() { return Value(Type::kObject); }
  static Value Array() { return Value(Type::kArray); }
  static Value Str(std::string s)
  {
    Value v(Type::kString);
    v.s_ = std::move(s);
    return v;
  }
  static Value Int(int64_t i)
  {
    Value v(Type::kInt);
    v.i_ = i;
    return v;
  }
  static Value UInt(uint64_t u)
  {
    Value v(Type::kUInt);
    v.u_ = u;
    return v;
  }
  static Value Double(double d)
  {
    Value v(Type::kDouble);
    v.d_ = d;
    return v;
  }
  static Value Bool(bool b)
  {
    Value v(Type::kBool);
    v.b_ = b;
    return v;
  }

  Type type() const { return type_; }
  bool IsNull() const { return type_ == Type::kNull; }
  bool IsObject() const { return type_ == Type::kObject; }
  bool IsArray() const { return type_ == Type::kArray; }
  bool IsString() const { return type_ == Type::kString; }
  bool IsBool() const { return type_ == Type::kBool; }
  bool IsNumber() const
  {
    return type_ == Type::kInt || type_ == Type::kUInt ||
           type_ == Type::kDouble;
  }
  bool IsIntegral() const
  {
    return type_ == Type::kInt || type_ == Type::kUInt;
  }

  const std::string& AsString() const { return s_; }
  bool AsBool() const { return b_; }
  int64_t AsInt() const;
  uint64_t AsUInt() const;
  double AsDouble() const;

  // Object access (insertion ordered).
  Value& Add(const std::string& key, Value v);
  const Value* Find(const std::string& key) const;
  const std::vector<std::pair<std::string, Value>>& Members() const
  {
    return obj_;
  }
  // Array access.
  Value& Append(Value v);
  const std::vector<Value>& Items() const { return arr_; }
  size_t Size() const { return type_ == Type::kArray ? arr_.size() : obj_.size(); }

  std::string Serialize() const;
  void SerializeTo(std::string* out) const;

 private:
  explicit Value(Type t) : type_(t) {}
  Type type_ = Type::kNull;
  bool b_ = false;
  int64_t i_ = 0;
  uint64_t u_ = 0;
  double d_ = 0;
  std::string s_;
  std::vector<Value> arr_;
  std::vector<std::pair<std::string, Value>> obj_;
};

// Parses 'text' (one JSON document, surrounding whitespace allowed).
Status Parse(const std::string& text, Value* out);

// Shortest round-trip text of a double the way rapidjson writes it.
std::string FormatDouble(double d);

}}  // namespace tc::json
