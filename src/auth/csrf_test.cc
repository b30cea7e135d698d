#include "auth/csrf.h"

#include <gtest/gtest.h>

#include "common/secrets.h"

namespace allot::auth {
namespace {

TEST(CsrfTest, StableForASessionDifferentAcrossSessions) {
  initSecrets();
  std::string a = newToken("tok-1"), b = newToken("tok-2");
  EXPECT_EQ(csrfTokenFor(a), csrfTokenFor(a));
  EXPECT_NE(csrfTokenFor(a), csrfTokenFor(b));
  EXPECT_EQ(csrfTokenFor(a).size(), 64u);
  // Reveals nothing of the secret it comes from.
  EXPECT_EQ(csrfTokenFor(a).find(a.substr(6)), std::string::npos);
}

TEST(CsrfTest, MatchesOnlyTheSessionsOwnToken) {
  initSecrets();
  std::string a = newToken("tok-1"), b = newToken("tok-2");
  EXPECT_TRUE(csrfTokenMatches(a, csrfTokenFor(a)));
  EXPECT_FALSE(csrfTokenMatches(a, csrfTokenFor(b)));
  EXPECT_FALSE(csrfTokenMatches(a, ""));
  EXPECT_FALSE(csrfTokenMatches(a, csrfTokenFor(a).substr(1)));
}

}  // namespace
}  // namespace allot::auth
