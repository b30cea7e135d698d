#include "common/ascii.h"

#include <gtest/gtest.h>

#include <string>

namespace allot {
namespace {

TEST(Ascii, ComparesLettersOfEitherCaseAndNothingElse) {
  EXPECT_TRUE(asciiIEquals("S9.Allot.Example", "s9.allot.example"));
  EXPECT_TRUE(asciiIEquals("", ""));
  EXPECT_FALSE(asciiIEquals("gzip", "gzi"));
  EXPECT_FALSE(asciiIEquals("[", "{"));  // 0x5B and 0x7B differ by the case bit, but are no letters
  EXPECT_FALSE(asciiIEquals("\xC9", "\xE9"));  // nor are Latin-1's É and é
  static_assert(asciiIEquals("TCP", "tcp"));
}

// Views into the middle of a string, as a Host header's name is: only the view counts. (That
// nothing past it is read is what fuzz/http_fuzz.cc checks under ASan; Boost.Beast's iequals read
// one past both views once they differed in case.)
TEST(Ascii, ComparesOnlyTheViews) {
  const std::string a = "s12.Localhost:7070", b = "LOCALHOSTX";
  EXPECT_TRUE(asciiIEquals(std::string_view(a).substr(4, 9), std::string_view(b).substr(0, 9)));
  EXPECT_FALSE(asciiIEquals(std::string_view(a).substr(4, 10), std::string_view(b)));
}

}  // namespace
}  // namespace allot
