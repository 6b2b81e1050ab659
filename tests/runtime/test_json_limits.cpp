// Hostile JSON: bounded nesting, out-of-range numbers, NUL bytes, many keys and huge values must end in a
// short InvalidDescriptor error, never in a crash, an internal error or quadratic time.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "deconvjit/deconvjit.hpp"
#include "runtime/json_limits.hpp"

namespace deconvjit {
namespace {

std::string parse_error(const std::string& text) {
  try {
    descriptor_from_json(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::InvalidDescriptor) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted " << text.substr(0, 80);
  return "";
}

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonLimits, DeepNestingIsRejectedNotACrash) {
  for (int depth : {65, 100000}) {
    const std::string e = parse_error(nested(depth));
    EXPECT_NE(e.find("nesting deeper than 64"), std::string::npos) << e;
  }
  // Nested inside a field, and unterminated (the parser must stop before the end of the text).
  EXPECT_NE(parse_error(R"({"src": )" + std::string(200000, '[')).find("nesting"), std::string::npos);
}

TEST(JsonLimits, DepthLimitIsExact) {
  nlohmann::json j;
  std::string error;
  EXPECT_TRUE(detail::parse_json(nested(64), j, error)) << error;
  EXPECT_FALSE(detail::parse_json(nested(65), j, error));
  EXPECT_TRUE(j.is_null());  // nothing half-built is handed back
}

TEST(JsonLimits, NumbersBeyondDoubleAreInvalidDescriptors) {
  for (const std::string& n : {std::string("1e999999"), std::string(100000, '9'), std::string("-1e400")}) {
    const std::string e = parse_error(R"({"src": [)" + n + R"(], "weights": [1,1,1]})");
    EXPECT_NE(e.find("number out of range"), std::string::npos) << e.substr(0, 200);
    EXPECT_LT(e.size(), 300u);
  }
}

TEST(JsonLimits, NulByteIsRejectedWithWhatFollows) {
  const std::string text = std::string(R"({"src": [1,4,5,5], "weights": [4,3,3,3]})") + '\0' + "trailing";
  EXPECT_NE(parse_error(text).find("NUL byte at offset 40"), std::string::npos);
}

TEST(JsonLimits, ManyUnknownKeysStopAtTheFirst) {
  std::string text = R"({"src": [1,4,5,5], "weights": [4,3,3,3])";
  for (int i = 0; i < 200000; ++i) text += ",\"k" + std::to_string(i) + "\":0";
  text += "}";
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = parse_error(text);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(e.find("unknown field 'k0'"), std::string::npos) << e;
  EXPECT_LT(s, 2.0) << "parsing 200,000 keys took " << s << " s";
}

TEST(JsonLimits, ManyKeysInANestedObjectAreCapped) {
  std::string text = R"({"src": {)";
  for (int i = 0; i < 5000; ++i) text += std::string(i ? "," : "") + "\"k" + std::to_string(i) + "\":0";
  text += R"(}, "weights": [4,3,3,3]})";
  EXPECT_NE(parse_error(text).find("more than 1024 keys"), std::string::npos);
}

TEST(JsonLimits, ErrorsQuoteShortExcerpts) {
  std::string big = R"({"src": [)";
  for (int i = 0; i < 1000000; ++i) big += i ? ",1" : "1";
  big += R"(], "weights": [1,1,1]})";
  std::string e;
  try {
    resolve(descriptor_from_json(big));  // parses; resolve() quotes the list when it judges the rank
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_LT(e.size(), 300u) << e.substr(0, 300);
  EXPECT_NE(e.find("1000000 entries"), std::string::npos) << e;
  e = parse_error(R"({"src": ")" + std::string(1000000, 'x') + R"(", "weights": [1,1,1]})");
  EXPECT_LT(e.size(), 300u);
  e = parse_error(R"({"src": [1,4,5,5], "weights": [4,3,3,3], "auto_pad": ")" + std::string(1000000, 'y') + "\"}");
  EXPECT_LT(e.size(), 300u);
  e = parse_error(R"({"src": [1,4,5,5], "weights": [4,3,3,3], ")" + std::string(1000000, 'z') + "\": 1}");
  EXPECT_LT(e.size(), 300u);
  e = parse_error(R"({"src": ")" + std::string(1000000, 'x'));  // unterminated: nlohmann quotes the token
  EXPECT_LT(e.size(), 400u);
}

TEST(JsonLimits, ExcerptNeverExceedsItsLimit) {
  nlohmann::json big = nlohmann::json::array();
  for (int i = 0; i < 100000; ++i) big.push_back({{"key", std::string(100, 'v')}, {"n", i}});
  const std::string s = detail::json_excerpt(big, 60);
  EXPECT_EQ(s.size(), 60u);
  EXPECT_EQ(s.substr(s.size() - 3), "...");
  EXPECT_EQ(detail::json_excerpt(nlohmann::json::parse(R"([1,{"a":"b"}])"), 60), R"([1,{"a":"b"}])");
  // A cut inside a multi-byte character must not throw.
  EXPECT_NO_THROW(detail::json_excerpt(nlohmann::json(std::string(100, '\xc3') + "\xa9"), 10));
}

}  // namespace
}  // namespace deconvjit
