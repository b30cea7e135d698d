#include "common/http_client.h"

// GCC 12 needs <utility> ahead of Boost.Asio; keep clang-format from sorting it after.
// clang-format off
#include <utility>
// clang-format on

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "cli/fake_server.h"

namespace allot::cli {
namespace {

using testing::FakeRequest;
using testing::FakeResponse;
using testing::FakeServer;
using testing::jsonReply;

TEST(ServerUrlTest, ParsesHostPortAndBasePath) {
  auto u = parseServerUrl("http://127.0.0.1:7070");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, "7070");
  EXPECT_EQ(u->basePath, "");
  EXPECT_EQ(u->text, "http://127.0.0.1:7070");

  auto withPath = parseServerUrl("http://allot.lab/fleet/");
  ASSERT_TRUE(withPath.ok());
  EXPECT_EQ(withPath->host, "allot.lab");
  EXPECT_EQ(withPath->port, "80");
  EXPECT_EQ(withPath->basePath, "/fleet");

  auto v6 = parseServerUrl("http://[::1]:8080");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, "8080");

  auto bare = parseServerUrl("gpu-head:7070");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->text, "http://gpu-head:7070");
}

TEST(ServerUrlTest, AcceptsHttpsWithItsDefaultPort) {
  auto u = parseServerUrl("https://allot.example.com/base/");
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->port, "443");
  EXPECT_EQ(u->basePath, "/base");
  auto upper = parseServerUrl("HTTPS://x:8443");
  ASSERT_TRUE(upper.ok());
  EXPECT_TRUE(upper->tls);
  EXPECT_EQ(upper->port, "8443");
  EXPECT_FALSE(parseServerUrl("http://x:1")->tls);
  EXPECT_FALSE(parseServerUrl("x:1")->tls);
}

TEST(ServerUrlTest, AMissingCaFileIsAClearError) {
  HttpClientOptions o;
  o.caFile = "/nonexistent/ca.pem";
  auto client = HttpClient::create("https://allot.example.com", "t", o);
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.status().message().find("/nonexistent/ca.pem"), std::string::npos);
  // Plain http never reads it.
  EXPECT_TRUE(HttpClient::create("http://allot.example.com", "t", o).ok());
}

TEST(ServerUrlTest, RefusesBadUrls) {
  for (const char* url : {"ftp://x", "http://", "http://x:0", "http://x:99999", "http://x:abc",
                          "http://u:p@x:1", "http://x:1/?q=1", "http://[::1"}) {
    EXPECT_FALSE(parseServerUrl(url).ok()) << url;
  }
}

TEST(HttpClientTest, ReturnsStatusBodyAndHeadersAndReusesOneConnection) {
  FakeServer server([](const FakeRequest& r) {
    FakeResponse res =
        jsonReply(r.target == "/missing" ? 404 : 200, "{\"t\":\"" + r.target + "\"}");
    res.headers["X-Allot-Log-Size"] = "12";
    return res;
  });
  auto client = HttpClient::create(server.url(), "secret");
  ASSERT_TRUE(client.ok());
  for (const char* target : {"/a", "/missing", "/b?x=1"}) {
    auto res = (*client)->request("GET", target);
    ASSERT_TRUE(res.ok()) << res.status().toString();
    EXPECT_EQ(res->status, std::string(target) == "/missing" ? 404 : 200);
    EXPECT_EQ(res->body, std::string("{\"t\":\"") + target + "\"}");
    EXPECT_EQ(res->header("x-allot-log-size"), "12");
    EXPECT_EQ(res->header("X-Allot-Log-Size"), "12");
  }
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ((*client)->connectionsOpened(), 1);
  EXPECT_EQ(server.requests().at(2).authorization, "Bearer secret");
}

TEST(HttpClientTest, ReconnectsWhenTheServerClosedTheConnection) {
  FakeServer server([](const FakeRequest& r) {
    FakeResponse res = jsonReply(200, "{}");
    res.close = r.target == "/close";
    return res;
  });
  auto client = std::move(HttpClient::create(server.url(), "").value());
  ASSERT_TRUE(client->request("GET", "/close").ok());
  auto again = client->request("POST", "/after", "{}");
  ASSERT_TRUE(again.ok()) << again.status().toString();
  EXPECT_EQ(again->status, 200);
  EXPECT_EQ(server.connections(), 2);
  EXPECT_EQ(server.requests().at(1).body, "{}");
}

TEST(HttpClientTest, RetriesAGetWhenAKeptAliveConnectionWasDropped) {
  FakeServer server([](const FakeRequest& r) {
    FakeResponse res = jsonReply(200, "{}");
    res.hangUp = r.target == "/first";
    return res;
  });
  auto client = std::move(HttpClient::create(server.url(), "").value());
  ASSERT_TRUE(client->request("GET", "/first").ok());
  auto again = client->request("GET", "/second");
  ASSERT_TRUE(again.ok()) << again.status().toString();
  EXPECT_EQ(again->status, 200);
  EXPECT_EQ(client->connectionsOpened(), 2);
  ASSERT_EQ(server.requests().size(), 2u);
  EXPECT_EQ(server.requests().at(1).target, "/second");
}

TEST(HttpClientTest, PrefixesTheBasePath) {
  FakeServer server([](const FakeRequest&) { return jsonReply(200, "{}"); });
  auto client = std::move(HttpClient::create(server.url() + "/fleet", "").value());
  ASSERT_TRUE(client->request("GET", "/api/v1/whoami").ok());
  EXPECT_EQ(server.requests().at(0).target, "/fleet/api/v1/whoami");
}

TEST(HttpClientTest, ConnectionRefusedIsOneClearLine) {
  int port = 0;
  {
    // A port that was just free: nothing listens there once the server is gone.
    FakeServer gone([](const FakeRequest&) { return jsonReply(200, "{}"); });
    port = gone.port();
  }
  std::string url = "http://127.0.0.1:" + std::to_string(port);
  auto client = std::move(HttpClient::create(url, "").value());
  auto res = client->request("GET", "/healthz");
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), Code::kUnavailable);
  EXPECT_EQ(res.status().message(), "cannot reach server at " + url + ": Connection refused");
}

TEST(HttpClientTest, TimesOutWhenTheServerNeverAnswers) {
  // A listening socket nobody accepts from: the connect succeeds, the reply never comes.
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor silent(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
  std::string url = "http://127.0.0.1:" + std::to_string(silent.local_endpoint().port());
  HttpClientOptions options;
  options.requestTimeout = std::chrono::milliseconds(200);
  auto client = std::move(HttpClient::create(url, "", options).value());
  auto res = client->request("GET", "/healthz");
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), Code::kUnavailable);
  EXPECT_EQ(res.status().message(), "no reply from server at " + url + " within 0.2s");
}

}  // namespace
}  // namespace allot::cli
