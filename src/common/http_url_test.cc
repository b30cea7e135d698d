#include "common/http_url.h"

#include <gtest/gtest.h>

namespace allot {
namespace {

TEST(HttpUrl, TakesAUrlApart) {
  auto u = parseHttpUrl("HTTPS://allot.lab:8443/base/x?k=v#f");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->scheme, "https");
  EXPECT_EQ(u->host, "allot.lab");
  EXPECT_EQ(u->port, 8443);
  EXPECT_EQ(u->path, "/base/x");
  EXPECT_TRUE(u->hasQuery);
  EXPECT_EQ(u->query, "k=v");
  EXPECT_TRUE(u->hasFragment);
  EXPECT_FALSE(u->hasUserinfo);
  auto v6 = parseHttpUrl("http://[::1]:7070");
  ASSERT_TRUE(v6.ok());
  EXPECT_TRUE(v6->ipv6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_FALSE(parseHttpUrl("http://x")->port.has_value());
  EXPECT_TRUE(parseHttpUrl("http://u:p@x/")->hasUserinfo);
}

TEST(HttpUrl, RefusesWhatIsNotOneWithoutEchoingIt) {
  for (const char* bad : {"", "x", "http://", "http://[::1", "http://a b/", "http://x:0",
                          "http://x:65536", "http://x:abc", "http://secret@:1"}) {
    auto u = parseHttpUrl(bad);
    EXPECT_FALSE(u.ok()) << bad;
    if (!u.ok() && std::string(bad).size() > 8) {
      EXPECT_EQ(u.status().message().find(bad), std::string::npos) << u.status().message();
    }
  }
}

}  // namespace
}  // namespace allot
