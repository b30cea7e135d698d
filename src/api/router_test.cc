#include "api/router.h"

#include <gtest/gtest.h>

namespace allot::api {
namespace {

Handler noop() {
  return [](ApiRequest&) -> boost::asio::awaitable<ApiResponse> { co_return ApiResponse{}; };
}

TEST(Router, MatchesPatternsAndExtractsParams) {
  Router r;
  r.add(http::verb::get, "/api/v1/jobs/{id}", noop());
  r.add(http::verb::get, "/api/v1/jobs/{id}/logs", noop());
  auto m = r.match(http::verb::get, "/api/v1/jobs/42/logs");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.route->pattern, "/api/v1/jobs/{id}/logs");
  EXPECT_EQ(m.params["id"], "42");
}

TEST(Router, DistinguishesUnknownPathFromWrongMethod) {
  Router r;
  r.add(http::verb::get, "/api/v1/jobs", noop());
  auto wrongMethod = r.match(http::verb::delete_, "/api/v1/jobs");
  EXPECT_EQ(wrongMethod.route, nullptr);
  EXPECT_TRUE(wrongMethod.pathKnown);
  auto unknown = r.match(http::verb::get, "/api/v1/nope");
  EXPECT_EQ(unknown.route, nullptr);
  EXPECT_FALSE(unknown.pathKnown);
}

TEST(Router, DecodesQueryStrings) {
  auto q = parseQuery("state=queued&name=a%20b&flag&x=1+2");
  EXPECT_EQ(q["state"], "queued");
  EXPECT_EQ(q["name"], "a b");
  EXPECT_EQ(q["flag"], "");
  EXPECT_EQ(q["x"], "1 2");
}

}  // namespace
}  // namespace allot::api
