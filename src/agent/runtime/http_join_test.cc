// The agent's --server: http(s)://HOST[:PORT], through the one URL parser (common/http_url.h).

#include "agent/runtime/http_join.h"

#include <gtest/gtest.h>

namespace allot::agent {
namespace {

TEST(AgentServerUrl, TakesHttpAndHttpsWithTheirDefaultPorts) {
  auto a = parseServerUrl("http://10.0.0.5:7070");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->host, "10.0.0.5");
  EXPECT_EQ(a->port, "7070");
  EXPECT_FALSE(a->tls);
  auto s = parseServerUrl("https://allot.lab/");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->tls);
  EXPECT_EQ(s->port, "443");
  EXPECT_EQ(parseServerUrl("http://[::1]:7070")->host, "::1");
}

TEST(AgentServerUrl, RefusesAnythingElseNamingTheFlag) {
  for (const char* bad : {"allot.lab:7070", "ftp://x", "http://", "http://x:0", "http://x:abc",
                          "http://u:p@x:1", "http://[::1"}) {
    auto a = parseServerUrl(bad);
    ASSERT_FALSE(a.ok()) << bad;
    EXPECT_EQ(a.status().message().rfind("--server:", 0), 0u) << a.status().message();
  }
}

}  // namespace
}  // namespace allot::agent
