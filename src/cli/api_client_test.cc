#include "cli/api_client.h"

#include <gtest/gtest.h>

#include "cli/fake_server.h"

namespace allot::cli {
namespace {

using testing::FakeRequest;
using testing::FakeResponse;
using testing::FakeServer;
using testing::jsonReply;

TEST(ErrorReplyTest, TakesMessageAndCodeFromTheErrorBody) {
  Status s = statusFromErrorReply(
      400,
      R"({"error":{"code":"invalid_argument","message":"gpus: must be an integer >= 0, got \"two\"","field":"gpus"}})");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "gpus: must be an integer >= 0, got \"two\"");
  EXPECT_EQ(s.field(), "gpus");

  Status nf = statusFromErrorReply(404, R"({"error":{"code":"not_found","message":"no job j-9"}})");
  EXPECT_EQ(nf.code(), Code::kNotFound);
  EXPECT_EQ(nf.message(), "no job j-9");

  Status conflict = statusFromErrorReply(
      409, R"({"error":{"code":"already_exists","message":"team ml exists"}})");
  EXPECT_EQ(conflict.code(), Code::kAlreadyExists);
}

TEST(ErrorReplyTest, FallsBackToTheHttpStatusWhenTheBodyIsNotAnApiError) {
  Status s = statusFromErrorReply(502, "<html>Bad\nGateway</html>");
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_EQ(s.message(), "server replied with HTTP 502: <html>Bad Gateway</html>");

  Status empty = statusFromErrorReply(401, "");
  EXPECT_EQ(empty.code(), Code::kUnauthenticated);
  EXPECT_EQ(empty.message(), "server replied with HTTP 401");

  Status noMessage = statusFromErrorReply(403, R"({"error":{"code":"permission_denied"}})");
  EXPECT_EQ(noMessage.code(), Code::kPermissionDenied);

  Status longBody = statusFromErrorReply(500, std::string(500, 'x'));
  EXPECT_LT(longBody.message().size(), 260u);
}

TEST(UrlEncodeTest, EscapesReservedBytes) {
  EXPECT_EQ(urlEncode("gpu-07.lab_1~"), "gpu-07.lab_1~");
  EXPECT_EQ(urlEncode("a b/c?d&e"), "a%20b%2Fc%3Fd%26e");
}

TEST(ApiClientTest, SendsBearerTokenJsonBodyUnderApiBase) {
  FakeServer server([](const FakeRequest& r) {
    if (r.target == "/api/v1/teams" && r.method == "POST") {
      return jsonReply(201, R"({"name":"ml","created_at":"2026-11-30T05:29:58Z"})");
    }
    return jsonReply(404, R"({"error":{"code":"not_found","message":"no route"}})");
  });
  auto http = HttpClient::create(server.url(), "tok-1.secret");
  ASSERT_TRUE(http.ok());
  ApiClient api(std::move(http.value()));
  auto made = api.post("/teams", {{"name", "ml"}});
  ASSERT_TRUE(made.ok()) << made.status().toString();
  EXPECT_EQ((*made)["name"], "ml");
  auto missing = api.get("/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "no route");

  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].authorization, "Bearer tok-1.secret");
  EXPECT_EQ(json::parse(reqs[0].body), json({{"name", "ml"}}));
}

TEST(ApiClientTest, UnauthenticatedWithoutATokenSaysHowToLogIn) {
  FakeServer server([](const FakeRequest& r) {
    return jsonReply(401, R"({"error":{"code":"unauthenticated","message":"no token"}})");
  });
  ApiClient api(std::move(HttpClient::create(server.url(), "").value()));
  auto res = api.get("/whoami");
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), Code::kUnauthenticated);
  EXPECT_NE(res.status().message().find("allot login"), std::string::npos);
  EXPECT_EQ(server.requests().at(0).authorization, "");
}

TEST(ApiClientTest, LogChunkCarriesSizeAndStateHeaders) {
  FakeServer server([](const FakeRequest& r) {
    FakeResponse res;
    res.body = "hello\n";
    res.headers = {{"Content-Type", "text/plain"},
                   {"X-Allot-Log-Size", "6"},
                   {"X-Allot-Job-State", "running"}};
    return res;
  });
  ApiClient api(std::move(HttpClient::create(server.url(), "t").value()));
  auto chunk = api.jobLogs(42, 0, 10);
  ASSERT_TRUE(chunk.ok());
  EXPECT_EQ(chunk->bytes, "hello\n");
  EXPECT_EQ(chunk->totalSize, 6);
  EXPECT_EQ(chunk->jobState, "running");
  EXPECT_EQ(server.requests().at(0).target, "/api/v1/jobs/42/logs?offset=0&wait=10");
}

}  // namespace
}  // namespace allot::cli
