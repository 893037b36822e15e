// A small, strict JSON parser (RFC 8259) for artifact manifests: no comments, no trailing commas,
// no NaN/Infinity, no leading zeros, no duplicate keys, valid UTF-8 only, nesting at most 256
// deep. Integers that fit int64 are kept exact; other numbers become doubles. Errors name the byte
// offset (and line and column) where parsing stopped. Internal to libhidet_runtime.so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hidet/runtime/error.hpp"

namespace hidet {
namespace json {

enum class Type { Null, Bool, Int, Double, String, Array, Object };

// "null", "bool", "integer", "number", "string", "array", "object"
const char* type_name(Type type);

class Value {
 public:
  Value() = default;

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_int() const { return type_ == Type::Int; }
  bool is_number() const { return type_ == Type::Int || type_ == Type::Double; }
  bool is_string() const { return type_ == Type::String; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }

  // Accessors; each requires the matching type (checked: a mismatch throws hidet::Error).
  bool as_bool() const;
  int64_t as_int() const;
  double as_double() const;  // integers convert
  const std::string& as_string() const;
  const std::vector<Value>& as_array() const;
  const std::vector<std::pair<std::string, Value>>& as_object() const;

  // The member called `key` of an object, or nullptr when absent (or when this is no object).
  const Value* find(const std::string& key) const;

 private:
  friend class Parser;
  Type type_ = Type::Null;
  bool bool_ = false;
  int64_t int_ = 0;
  double double_ = 0.0;
  std::string string_;
  std::vector<Value> array_;
  std::vector<std::pair<std::string, Value>> object_;  // in document order
};

class ParseError : public Error {
 public:
  ParseError(const std::string& msg, size_t offset) : Error(msg), offset_(offset) {}
  size_t offset() const { return offset_; }

 private:
  size_t offset_;
};

// Parse one JSON document (surrounding whitespace allowed). Throws ParseError, e.g.
// "expected ',' or '}' after an object member at byte 57 (line 3, column 10)".
Value parse(const char* data, size_t size);
inline Value parse(const std::string& text) { return parse(text.data(), text.size()); }

}  // namespace json
}  // namespace hidet
