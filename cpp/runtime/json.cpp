// The strict JSON parser of json.hpp: recursive descent over a byte range.
#include "json.hpp"

#include <charconv>
#include <cmath>

namespace hidet {
namespace json {

const char* type_name(Type type) {
  switch (type) {
    case Type::Null: return "null";
    case Type::Bool: return "bool";
    case Type::Int: return "integer";
    case Type::Double: return "number";
    case Type::String: return "string";
    case Type::Array: return "array";
    case Type::Object: return "object";
  }
  return "?";
}

namespace {
[[noreturn]] void type_mismatch(Type want, Type have) {
  throw Error(str_cat("expected ", type_name(want), ", got ", type_name(have)));
}
}  // namespace

bool Value::as_bool() const {
  if (type_ != Type::Bool) type_mismatch(Type::Bool, type_);
  return bool_;
}
int64_t Value::as_int() const {
  if (type_ != Type::Int) type_mismatch(Type::Int, type_);
  return int_;
}
double Value::as_double() const {
  if (type_ == Type::Int) return static_cast<double>(int_);
  if (type_ != Type::Double) type_mismatch(Type::Double, type_);
  return double_;
}
const std::string& Value::as_string() const {
  if (type_ != Type::String) type_mismatch(Type::String, type_);
  return string_;
}
const std::vector<Value>& Value::as_array() const {
  if (type_ != Type::Array) type_mismatch(Type::Array, type_);
  return array_;
}
const std::vector<std::pair<std::string, Value>>& Value::as_object() const {
  if (type_ != Type::Object) type_mismatch(Type::Object, type_);
  return object_;
}

const Value* Value::find(const std::string& key) const {
  if (type_ != Type::Object) return nullptr;
  for (const auto& member : object_) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}

class Parser {
 public:
  Parser(const char* data, size_t size) : p_(data), size_(size) {}

  Value document() {
    skip_space();
    Value v = value(0);
    skip_space();
    if (pos_ != size_) fail("unexpected data after the JSON value");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 256;  // deeper documents would risk the stack

  [[noreturn]] void fail(const std::string& what) const { fail_at(what, pos_); }
  [[noreturn]] void fail_at(const std::string& what, size_t at) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < size_; ++i) {
      if (p_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    if (at >= size_) throw ParseError(str_cat(what, " at byte ", at, " (the end of the input)"), at);
    throw ParseError(str_cat(what, " at byte ", at, " (line ", line, ", column ", column, ")"), at);
  }

  bool at_end() const { return pos_ >= size_; }
  char peek() const { return at_end() ? '\0' : p_[pos_]; }

  void skip_space() {
    while (!at_end() && (p_[pos_] == ' ' || p_[pos_] == '\t' || p_[pos_] == '\n' || p_[pos_] == '\r')) ++pos_;
  }

  void expect_literal(const char* word) {
    size_t start = pos_;
    for (const char* c = word; *c; ++c, ++pos_) {
      if (at_end() || p_[pos_] != *c) fail_at(str_cat("invalid literal (expected '", word, "')"), start);
    }
  }

  Value value(int depth) {
    if (depth > kMaxDepth) fail(str_cat("nesting deeper than ", kMaxDepth, " levels"));
    Value v;
    switch (peek()) {
      case '{': object(v, depth); break;
      case '[': array(v, depth); break;
      case '"':
        v.type_ = Type::String;
        v.string_ = string();
        break;
      case 't': expect_literal("true"); v.type_ = Type::Bool; v.bool_ = true; break;
      case 'f': expect_literal("false"); v.type_ = Type::Bool; v.bool_ = false; break;
      case 'n': expect_literal("null"); break;
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) {
          number(v);
        } else {
          fail(at_end() ? "expected a value" : "unexpected character, expected a value");
        }
    }
    return v;
  }

  void object(Value& v, int depth) {
    v.type_ = Type::Object;
    ++pos_;  // '{'
    skip_space();
    if (peek() == '}') {
      ++pos_;
      return;
    }
    while (true) {
      skip_space();
      if (peek() != '"') fail("expected a string key in the object");
      size_t key_at = pos_;
      std::string key = string();
      if (v.find(key) != nullptr) fail_at(str_cat("duplicate key \"", key, "\""), key_at);
      skip_space();
      if (peek() != ':') fail("expected ':' after an object key");
      ++pos_;
      skip_space();
      v.object_.emplace_back(std::move(key), value(depth + 1));
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() == '}') {
        ++pos_;
        return;
      } else {
        fail("expected ',' or '}' after an object member");
      }
    }
  }

  void array(Value& v, int depth) {
    v.type_ = Type::Array;
    ++pos_;  // '['
    skip_space();
    if (peek() == ']') {
      ++pos_;
      return;
    }
    while (true) {
      skip_space();
      v.array_.push_back(value(depth + 1));
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() == ']') {
        ++pos_;
        return;
      } else {
        fail("expected ',' or ']' after an array element");
      }
    }
  }

  unsigned hex4() {
    unsigned code = 0;
    for (int i = 0; i < 4; ++i, ++pos_) {
      char c = peek();
      code <<= 4;
      if (c >= '0' && c <= '9') code |= c - '0';
      else if (c >= 'a' && c <= 'f') code |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') code |= c - 'A' + 10;
      else fail("invalid \\u escape (expected 4 hex digits)");
    }
    return code;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // One UTF-8 encoded character starting at pos_ (>= 0x80), validated and copied to `out`.
  void utf8_char(std::string& out) {
    auto byte = [&](size_t i) { return static_cast<unsigned char>(p_[i]); };
    unsigned char lead = byte(pos_);
    int n;
    unsigned cp;
    if (lead >= 0xC2 && lead <= 0xDF) n = 1, cp = lead & 0x1F;
    else if (lead >= 0xE0 && lead <= 0xEF) n = 2, cp = lead & 0x0F;
    else if (lead >= 0xF0 && lead <= 0xF4) n = 3, cp = lead & 0x07;
    else fail("invalid UTF-8 in a string");
    if (pos_ + n >= size_) fail("invalid UTF-8 in a string (truncated character)");
    for (int i = 1; i <= n; ++i) {
      if ((byte(pos_ + i) & 0xC0) != 0x80) fail("invalid UTF-8 in a string");
      cp = (cp << 6) | (byte(pos_ + i) & 0x3F);
    }
    // Overlong encodings, surrogates and code points past U+10FFFF are not UTF-8.
    if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      fail("invalid UTF-8 in a string");
    }
    out.append(p_ + pos_, n + 1);
    pos_ += n + 1;
  }

  std::string string() {
    size_t start = pos_;
    ++pos_;  // '"'
    std::string out;
    while (true) {
      if (at_end()) fail_at("unterminated string", start);
      unsigned char c = static_cast<unsigned char>(p_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("control character in a string (escape it)");
      if (c >= 0x80) {
        utf8_char(out);
        continue;
      }
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      ++pos_;
      char e = peek();
      ++pos_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail("unpaired low surrogate in a \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // a high surrogate: its low half must follow
            if (peek() != '\\' || pos_ + 1 >= size_ || p_[pos_ + 1] != 'u') fail("unpaired high surrogate in a \\u escape");
            pos_ += 2;
            unsigned low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("unpaired high surrogate in a \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          pos_ -= 1;
          fail("invalid escape in a string");
      }
    }
  }

  void number(Value& v) {
    size_t start = pos_;
    auto digits = [&] {
      size_t from = pos_;
      while (!at_end() && p_[pos_] >= '0' && p_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    if (peek() == '-') ++pos_;
    size_t int_start = pos_;
    if (digits() == 0) fail("invalid number (expected a digit)");
    if (p_[int_start] == '0' && pos_ - int_start > 1) fail_at("invalid number (leading zero)", int_start);
    bool integral = true;
    if (peek() == '.') {
      ++pos_;
      integral = false;
      if (digits() == 0) fail("invalid number (expected a digit after '.')");
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      integral = false;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (digits() == 0) fail("invalid number (expected a digit in the exponent)");
    }
    const char* first = p_ + start;
    const char* last = p_ + pos_;
    if (integral) {
      int64_t i = 0;
      auto r = std::from_chars(first, last, i);
      if (r.ec == std::errc() && r.ptr == last) {
        v.type_ = Type::Int;
        v.int_ = i;
        return;
      }  // out of int64's range: a double, like other JSON readers
    }
    double d = 0.0;
    auto r = std::from_chars(first, last, d);
    // libstdc++ reports overflow and underflow alike as out of range (leaving `d` unset).
    if (r.ec == std::errc::result_out_of_range) fail_at("number out of range", start);
    if (r.ec != std::errc() || r.ptr != last || !std::isfinite(d)) fail_at("invalid number", start);
    v.type_ = Type::Double;
    v.double_ = d;
  }

  const char* p_;
  size_t size_;
  size_t pos_ = 0;
};

Value parse(const char* data, size_t size) {
  if (data == nullptr && size != 0) throw ParseError("no input", 0);
  return Parser(data, size).document();
}

}  // namespace json
}  // namespace hidet
