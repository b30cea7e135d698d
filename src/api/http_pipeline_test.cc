// The stages of api/http_pipeline.h that need no server: dispatch and encode.
#include "api/http_pipeline.h"

#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include "common/gzip.h"

namespace allot::api {
namespace {

HttpRequest request(http::verb method, std::string target) {
  HttpRequest req{method, target, 11};
  req.set(http::field::host, "127.0.0.1:7070");
  return req;
}

HttpRequest upgrade(std::string target) {
  HttpRequest req = request(http::verb::get, std::move(target));
  req.set(http::field::connection, "Upgrade");
  req.set(http::field::upgrade, "websocket");
  req.set(http::field::sec_websocket_key, "dGhlIHNhbXBsZSBub25jZQ==");
  req.set(http::field::sec_websocket_version, "13");
  return req;
}

TEST(HttpPipelineDispatch, EachRequestGoesToItsOwner) {
  EXPECT_EQ(dispatch(request(http::verb::get, "/sessions/3/lab"), false),
            RequestOwner::kSessionProxy);
  EXPECT_EQ(dispatch(request(http::verb::get, "/api/v1/sessions/3/ssh"), false),
            RequestOwner::kSessionSsh);
  EXPECT_EQ(dispatch(upgrade("/api/v1/agent"), false), RequestOwner::kAgentStream);
  EXPECT_EQ(dispatch(request(http::verb::get, "/api/v1/jobs"), false), RequestOwner::kApi);
  EXPECT_EQ(dispatch(request(http::verb::get, "/"), false), RequestOwner::kApi);
}

// A session's origin is another tenant's ground (its Jupyter runs the owner's scripts): it
// reaches its own Jupyter and nothing else, never an SSH relay or an agent's stream.
TEST(HttpPipelineDispatch, ASessionsOriginReachesOnlyTheSessionProxy) {
  EXPECT_EQ(dispatch(request(http::verb::get, "/sessions/3/lab"), true),
            RequestOwner::kSessionProxy);
  EXPECT_EQ(dispatch(request(http::verb::get, "/api/v1/sessions/3/ssh"), true), RequestOwner::kApi);
  EXPECT_EQ(dispatch(upgrade("/api/v1/agent"), true), RequestOwner::kApi);
}

TEST(HttpPipelineEncode, HeadSendsTheLengthAndNoBody) {
  auto res = ApiResponse::json({{"a", 1}});
  auto out = encodeResponse(request(http::verb::head, "/api/v1/version"), res);
  EXPECT_TRUE(out.body().empty());
  EXPECT_EQ(out[http::field::content_length], std::to_string(res.body.size()));
  EXPECT_EQ(out[http::field::server], "allotd");
}

TEST(HttpPipelineEncode, LargeAnswersAreGzippedOnlyForClientsThatAsk) {
  ApiResponse res = ApiResponse::json({{"text", std::string(64 * 1024, 'x')}});
  HttpRequest plain = request(http::verb::get, "/api/v1/map");
  EXPECT_EQ(encodeResponse(plain, res).body(), res.body);
  HttpRequest browser = plain;
  browser.set(http::field::accept_encoding, "gzip, deflate");
  auto out = encodeResponse(browser, res);
  EXPECT_EQ(out[http::field::content_encoding], "gzip");
  EXPECT_LT(out.body().size(), res.body.size());
  ApiResponse small = ApiResponse::json({{"a", 1}});
  EXPECT_EQ(encodeResponse(browser, small).count(http::field::content_encoding), 0u);
}

// What Beast's own serializer writes for `out`: the text writeResponse must send.
std::string beastText(const http::response<http::string_body>& out) {
  std::ostringstream text;
  text << out;
  return text.str();
}

TEST(HttpPipelineEncode, TheHeadIsWhatBeastsSerializerWrites) {
  HttpRequest old{http::verb::get, "/api/v1/jobs", 10};
  HttpRequest closing = request(http::verb::post, "/api/v1/jobs");
  closing.keep_alive(false);
  HttpRequest browser = request(http::verb::get, "/api/v1/map");
  browser.set(http::field::accept_encoding, "gzip");
  ApiResponse created = ApiResponse::json({{"id", 1}}, http::status::created);
  created.headers = {{"Location", "/api/v1/jobs/1"}, {"X-Allot-Custom", "a value"}};
  ApiResponse large = ApiResponse::json({{"text", std::string(64 * 1024, 'x')}});
  ApiResponse refused = ApiResponse::error(Status::NotFound("no such job: 7"));
  refused.status = static_cast<http::status>(299);  // no reason phrase of its own
  const std::vector<http::response<http::string_body>> cases = {
      encodeResponse(request(http::verb::get, "/api/v1/version"), created),
      encodeResponse(request(http::verb::head, "/api/v1/version"), created),
      encodeResponse(old, created),
      encodeResponse(closing, refused),
      encodeResponse(browser, large),
      encodeTooLarge(1024),
  };
  for (const auto& out : cases) {
    EXPECT_EQ(responseHead(out.base()) + out.body(), beastText(out)) << beastText(out);
  }
}

TEST(HttpPipelineEncode, TooLargeNamesTheBodyAndCloses) {
  auto out = encodeTooLarge(1024);
  EXPECT_EQ(out.result(), http::status::payload_too_large);
  EXPECT_FALSE(out.keep_alive());
  EXPECT_NE(out.body().find("body: larger than 1024 bytes"), std::string::npos);
}

TEST(HttpPipelineParameters, TheFirstParameterThatIsNotUtf8IsNamed) {
  HttpRequest raw = request(http::verb::get, "/api/v1/jobs");
  ApiRequest ok{.raw = raw, .params = {{"id", "42"}}, .query = {{"team", "ml"}}};
  EXPECT_EQ(nonUtf8Parameter(ok), "");
  ApiRequest badPath{.raw = raw, .params = {{"id", "\xff"}}};
  EXPECT_EQ(nonUtf8Parameter(badPath), "id");
  ApiRequest badKey{.raw = raw, .query = {{"\xc3", "x"}}};
  EXPECT_EQ(nonUtf8Parameter(badKey), "query");
  ApiRequest badValue{.raw = raw, .query = {{"team", "\xe2\x82"}}};
  EXPECT_EQ(nonUtf8Parameter(badValue), "team");
}

}  // namespace
}  // namespace allot::api
