#include "common/secrets.h"

#include <gtest/gtest.h>

namespace allot {
namespace {

TEST(Secrets, TokensAreUniqueAndPrefixed) {
  initSecrets();
  auto a = newToken("alu");
  auto b = newToken("alu");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("alu_", 0), 0u);
  EXPECT_GE(a.size(), 40u);
}

TEST(Secrets, HashIsStableAndHidesToken) {
  initSecrets();
  auto t = newToken("x");
  EXPECT_EQ(hashToken(t), hashToken(t));
  EXPECT_EQ(hashToken(t).size(), 64u);
  EXPECT_EQ(hashToken(t).find(t), std::string::npos);
  EXPECT_TRUE(hashesEqual(hashToken(t), hashToken(t)));
  EXPECT_FALSE(hashesEqual(hashToken(t), hashToken(t + "y")));
}

}  // namespace
TEST(Secrets, Base64IsTheStandardPaddedForm) {
  EXPECT_EQ(toBase64(""), "");
  EXPECT_EQ(toBase64("f"), "Zg==");
  EXPECT_EQ(toBase64("hello"), "aGVsbG8=");
  EXPECT_EQ(toBase64(std::string("\0\xff", 2)), "AP8=");
}

}  // namespace allot
