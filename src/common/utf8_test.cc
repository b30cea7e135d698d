#include "common/utf8.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/bounded_json.h"

namespace allot {
namespace {

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_TRUE(isValidUtf8(""));
  EXPECT_TRUE(isValidUtf8("plain ascii"));
  EXPECT_TRUE(isValidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));  // é € 😀
  EXPECT_TRUE(isValidUtf8("\xF4\x8F\xBF\xBF"));                           // U+10FFFF
}

TEST(Utf8, RejectsIllFormedText) {
  EXPECT_FALSE(isValidUtf8("\xC3"));              // cut in the middle of a character
  EXPECT_FALSE(isValidUtf8("\xA9"));              // a continuation byte first
  EXPECT_FALSE(isValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(isValidUtf8("\xE0\x80\xAF"));      // overlong, three bytes
  EXPECT_FALSE(isValidUtf8("\xED\xA0\x80"));      // a surrogate
  EXPECT_FALSE(isValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(isValidUtf8("\xFF"));
  EXPECT_FALSE(isValidUtf8("ok\xE2\x82"));  // a character cut at the end
}

TEST(Utf8, CutsAtCharacterBoundaries) {
  std::string s = "/opt/";
  for (int i = 0; i < 32; ++i) s += "\xC3\xA9";  // é, two bytes each
  for (size_t max = 0; max <= s.size() + 1; ++max) {
    std::string cut = cutUtf8(s, max);
    EXPECT_LE(cut.size(), max);
    EXPECT_TRUE(isValidUtf8(cut)) << max;
    EXPECT_GE(cut.size() + 1, std::min(max, s.size())) << "cut more than one character";
  }
  EXPECT_EQ(cutUtf8("abc", 10), "abc");
}

TEST(BoundedJson, RefusesDeepNestingAndReadsTheRest) {
  std::string deep(100'000, '[');
  EXPECT_FALSE(jsonNestingWithin(deep));
  EXPECT_TRUE(parseBoundedJson(deep).is_discarded());
  std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_FALSE(parseBoundedJson(ok).is_discarded());
  std::string over = "[" + ok + "]";
  EXPECT_TRUE(parseBoundedJson(over).is_discarded());
  // Brackets inside strings are text, escaped quotes do not end them.
  EXPECT_FALSE(parseBoundedJson("{\"a\":\"" + deep + "\\\"" + deep + "\"}").is_discarded());
  EXPECT_TRUE(parseBoundedJson("{\"a\":").is_discarded());
  EXPECT_TRUE(parseBoundedJson("\"\xC3\"").is_discarded());  // nlohmann checks UTF-8 too
}

TEST(BoundedJson, FractionsPastAnIntsRangeAreFoundAtAnyDepth) {
  for (const char* ok : {R"({"a": 1, "b": [2.5, -3.25e2], "c": {"d": 2147483647.0}})",
                         R"([-2147483647.5, 99999999999999999, "1e30"])"})
    EXPECT_TRUE(fractionsWithinIntRange(nlohmann::json::parse(ok))) << ok;
  for (const char* bad : {R"(1e30)", R"({"a": [{"b": [2147483648.0]}]})", R"({"a": -2147483648.5})",
                          R"([1, 2, 78888888888888888888888888888])"})
    EXPECT_FALSE(fractionsWithinIntRange(nlohmann::json::parse(bad))) << bad;
  EXPECT_FALSE(fractionsWithinIntRange(nlohmann::json(std::nan(""))));
}

}  // namespace
}  // namespace allot
