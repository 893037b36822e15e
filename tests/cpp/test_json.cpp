// The strict JSON parser of artifact manifests (cpp/runtime/json.cpp, compiled into this test: it
// is internal to the runtime library).
#include <gtest/gtest.h>

#include <string>

#include "json.hpp"

using hidet::json::parse;
using hidet::json::ParseError;

namespace {

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const ParseError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(GraphJson, Values) {
  auto v = parse(R"( {"a": [1, -2, 9223372036854775807, 1.5e3, -0.25], "s": "q\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00é",
                     "t": true, "f": false, "n": null, "o": {}} )");
  ASSERT_TRUE(v.is_object());
  const auto& a = v.find("a")->as_array();
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[0].as_int(), 1);
  EXPECT_EQ(a[1].as_int(), -2);
  EXPECT_EQ(a[2].as_int(), INT64_MAX);
  EXPECT_FALSE(a[3].is_int());
  EXPECT_EQ(a[3].as_double(), 1500.0);
  EXPECT_EQ(a[4].as_double(), -0.25);
  EXPECT_EQ(v.find("s")->as_string(), "q\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80\xc3\xa9");
  EXPECT_TRUE(v.find("t")->as_bool());
  EXPECT_FALSE(v.find("f")->as_bool());
  EXPECT_TRUE(v.find("n")->is_null());
  EXPECT_TRUE(v.find("o")->as_object().empty());
  EXPECT_EQ(v.find("missing"), nullptr);
  EXPECT_FALSE(parse("9223372036854775808").is_int());  // past int64: a double
  EXPECT_THROW(v.find("t")->as_int(), hidet::Error);
}

TEST(GraphJson, Errors) {
  EXPECT_EQ(error_of("[1, 2,]"), "unexpected character, expected a value at byte 6 (line 1, column 7)");
  EXPECT_EQ(error_of("{\"a\": 1\n \"b\": 2}"), "expected ',' or '}' after an object member at byte 9 (line 2, column 2)");
  EXPECT_EQ(error_of("[1"), "expected ',' or ']' after an array element at byte 2 (the end of the input)");
  EXPECT_EQ(error_of(""), "expected a value at byte 0 (the end of the input)");
  EXPECT_NE(error_of("\"abc"), "");
  EXPECT_NE(error_of("01"), "");
  EXPECT_NE(error_of("1."), "");
  EXPECT_NE(error_of("-"), "");
  EXPECT_NE(error_of("1e999"), "");
  EXPECT_NE(error_of("NaN"), "");
  EXPECT_NE(error_of("tru"), "");
  EXPECT_NE(error_of("{\"a\": 1, \"a\": 2}"), "");
  EXPECT_NE(error_of("\"\x01\""), "");
  EXPECT_NE(error_of("\"\\x\""), "");
  EXPECT_NE(error_of("\"\\u12\""), "");
  EXPECT_NE(error_of("\"\\ud800\""), "");
  EXPECT_NE(error_of("\"\\udc00\""), "");
  EXPECT_NE(error_of("\"\xff\""), "");
  EXPECT_NE(error_of("\"\xc3\""), "");
  EXPECT_NE(error_of("\"\xed\xa0\x80\""), "");  // an encoded surrogate
  EXPECT_NE(error_of("\"\xc0\xaf\""), "");      // overlong
  EXPECT_NE(error_of("1 2"), "");
  EXPECT_NE(error_of("// comment\n1"), "");
  EXPECT_NE(error_of(std::string(100000, '[')), "");  // too deep: an error, not a stack overflow
  EXPECT_EQ(error_of(std::string(200, '[') + std::string(200, ']')), "");
  // Every prefix of a document is an error, never a crash.
  std::string doc = R"({"k": [1, 2.5, "x\u00e9", true, null, {"z": false}]})";
  for (size_t n = 0; n < doc.size(); ++n) EXPECT_NE(error_of(doc.substr(0, n)), "") << n;
}
