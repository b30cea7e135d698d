#include "api/session_origin.h"

#include <gtest/gtest.h>

namespace allot::api {
namespace {

TEST(SessionOrigin, HostNamesASessionOnlyUnderTheDomain) {
  EXPECT_EQ(sessionOfHost("s12.localhost:7070", "localhost"), 12);
  EXPECT_EQ(sessionOfHost("S12.LocalHost", "localhost"), 12);
  EXPECT_EQ(sessionOfHost("s7.sessions.example.com", "sessions.example.com"), 7);
  // None of these names a session under "localhost".
  for (const char* host : {"localhost:7070", "127.0.0.1:7070",
                           "s12.evil.localhost",  // not digits
                           "s12localhost",
                           "s012.localhost",  // one name per session
                           "s0.localhost", "s-1.localhost", "s12.localhost.evil.com",
                           "s99999999999999999999.localhost", ""})
    EXPECT_EQ(sessionOfHost(host, "localhost"), 0) << host;
  EXPECT_EQ(sessionOfHost("s1.x", ""), 0);
}

TEST(SessionOrigin, OriginKeepsTheConsolesPort) {
  SessionOrigins o;
  EXPECT_EQ(sessionOrigin(12, o, "127.0.0.1:7070"), "http://s12.localhost:7070");
  o.domain = "sessions.example.com";
  o.https = true;
  EXPECT_EQ(sessionOrigin(3, o, "allot.example.com"), "https://s3.sessions.example.com");
  EXPECT_EQ(sessionOrigin(3, o, "[::1]"), "https://s3.sessions.example.com");
  EXPECT_EQ(sessionOrigin(3, o, "[::1]:8443"), "https://s3.sessions.example.com:8443");
}

TEST(SessionOrigin, OnlyAPortOfTheHostHeaderMakesItIntoTheOrigin) {
  SessionOrigins o;
  EXPECT_EQ(sessionOrigin(5, o, "x:1@evil.com"), "http://s5.localhost");
  EXPECT_EQ(sessionOrigin(5, o, "x:99999999"), "http://s5.localhost");
  EXPECT_EQ(sessionOrigin(5, o, "x:"), "http://s5.localhost");
}

TEST(SessionOrigin, LoopbackHosts) {
  for (const char* h : {"localhost", "LOCALHOST:7070", "s3.localhost:1", "127.0.0.1:7070",
                        "127.9.9.9", "[::1]:7070", "[::1]"})
    EXPECT_TRUE(isLoopbackHost(h)) << h;
  for (const char* h : {"allot.example.com", "10.0.0.1:7070", "localhost.evil.com", "[::2]", ""})
    EXPECT_FALSE(isLoopbackHost(h)) << h;
}

TEST(SessionOriginAccess, ATicketIsGoodOnceForItsSessionAndAMinute) {
  SessionOriginAccess a;
  const std::string t = a.mintTicket(5, "console-secret", 1000);
  EXPECT_EQ(t.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"),
            std::string::npos);
  auto credential = a.redeem(t, 5, 2000, 3'600'000);
  ASSERT_TRUE(credential);
  EXPECT_EQ(a.redeem(t, 5, 2000, 3'600'000), std::nullopt);  // spent

  const std::string other = a.mintTicket(5, "console-secret", 1000);
  EXPECT_EQ(a.redeem(other, 6, 2000, 3'600'000), std::nullopt);  // another session's: spent too
  EXPECT_EQ(a.redeem(other, 5, 2000, 3'600'000), std::nullopt);
  const std::string late = a.mintTicket(5, "console-secret", 1000);
  EXPECT_EQ(a.redeem(late, 5, 1000 + SessionOriginAccess::kTicketLifetimeMs, 3'600'000),
            std::nullopt);
  EXPECT_EQ(a.redeem("made-up", 5, 1000, 3'600'000), std::nullopt);
}

TEST(SessionOriginAccess, TheOriginsCredentialIsNotTheConsolesAndServesOneSession) {
  SessionOriginAccess a;
  auto credential = a.redeem(a.mintTicket(5, "console-secret", 0), 5, 0, 10'000);
  ASSERT_TRUE(credential);
  EXPECT_EQ(credential->find("console-secret"), std::string::npos);
  EXPECT_EQ(a.consoleSecretOf(*credential, 5, 9'999), "console-secret");
  EXPECT_EQ(a.consoleSecretOf(*credential, 6, 0), std::nullopt);
  EXPECT_EQ(a.consoleSecretOf(*credential, 5, 10'000), std::nullopt);  // expired
  EXPECT_EQ(a.consoleSecretOf("console-secret", 5, 0), std::nullopt);
}

TEST(SessionOriginAccess, AFloodOfLinksSpendsOnlyTheFloodersTickets) {
  SessionOriginAccess a;
  const std::string victims = a.mintTicket(1, "victim", 0);
  for (int i = 0; i < 1000; ++i) a.mintTicket(1, "flooder", i);
  EXPECT_EQ(a.tickets(), SessionOriginAccess::kMaxTicketsPerConsole + 1);
  EXPECT_TRUE(a.redeem(victims, 1, 2000, 10'000));
  a.mintTicket(1, "x", SessionOriginAccess::kTicketLifetimeMs + 2000);  // expired ones go first
  EXPECT_EQ(a.tickets(), 1u);
}

}  // namespace
}  // namespace allot::api
