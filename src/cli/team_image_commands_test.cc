// allot team default-image and allot team registry-login against a fake server: what is sent,
// what is printed, and that a password is read from stdin and never printed back.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/cli_fixture.h"

namespace allot::cli {
namespace {

using nlohmann::json;
using testing::FakeRequest;
using testing::FakeResponse;
using testing::jsonReply;

const json kLogins = json::array({{{"registry", "registry:5000"},
                                   {"username", "ml-puller"},
                                   {"set_by", "carol"},
                                   {"set_at", "2026-12-05T10:00:00Z"}}});

FakeResponse api(const FakeRequest& r) {
  if (r.target == "/api/v1/teams/ml/default-image") {
    const std::string image =
        r.method == "PUT" ? json::parse(r.body).value("image", "") : "registry:5000/ml/base:1";
    return jsonReply(200, json{{"team", "ml"}, {"default_image", image}}.dump());
  }
  if (r.target == "/api/v1/teams/ml/registry-logins" ||
      r.target == "/api/v1/teams/ml/registry-logins/registry%3A5000")
    return jsonReply(200, kLogins.dump());
  return jsonReply(404, R"({"error":{"code":"not_found","message":"no such route"}})");
}

class TeamImageCommandsTest : public testing::CliFixture {
 protected:
  TeamImageCommandsTest() : CliFixture(api, "tok_carol") {}
};

TEST_F(TeamImageCommandsTest, DefaultImageIsSetClearedAndShown) {
  EXPECT_EQ(run({"team", "default-image", "set", "ml", "registry:5000/ml/base:1"}), 0);
  EXPECT_EQ(json::parse(server_.requests().back().body),
            json({{"image", "registry:5000/ml/base:1"}}));
  EXPECT_NE(out_.str().find("Team ml's work runs in registry:5000/ml/base:1 unless it names"),
            std::string::npos)
      << out_.str();
  EXPECT_EQ(run({"team", "default-image", "set", "ml", "--host"}), 0);
  EXPECT_EQ(json::parse(server_.requests().back().body), json({{"image", ""}}));
  EXPECT_NE(out_.str().find("runs on the host unless it names an image"), std::string::npos);
  const size_t sent = server_.requests().size();
  EXPECT_EQ(run({"team", "default-image", "set", "ml"}), 2);  // neither an image nor --host
  EXPECT_EQ(run({"team", "default-image", "set", "ml", "r:5000/x:1", "--host"}), 2);
  EXPECT_EQ(server_.requests().size(), sent);
  EXPECT_EQ(run({"team", "default-image", "show", "ml"}), 0);
  EXPECT_EQ(server_.requests().back().method, "GET");
}

TEST_F(TeamImageCommandsTest, ALoginsPasswordComesFromStdinAndIsNeverPrinted) {
  EXPECT_EQ(run({"team", "registry-login", "set", "ml", "registry:5000", "--username", "ml-puller"},
                "s3cret\n"),
            0)
      << err_.str();
  const auto put = server_.requests().back();
  EXPECT_EQ(put.method, "PUT");
  EXPECT_EQ(put.target, "/api/v1/teams/ml/registry-logins/registry%3A5000");
  EXPECT_EQ(json::parse(put.body), json({{"username", "ml-puller"}, {"password", "s3cret"}}));
  EXPECT_NE(out_.str().find("Team ml's pulls from registry:5000 log in as ml-puller."),
            std::string::npos)
      << out_.str();
  EXPECT_EQ(out_.str().find("s3cret"), std::string::npos);
  EXPECT_EQ(err_.str().find("s3cret"), std::string::npos);

  // No password: nothing sent. No --username: a usage error.
  const size_t sent = server_.requests().size();
  EXPECT_EQ(run({"team", "registry-login", "set", "ml", "registry:5000", "--username", "u"}, ""),
            2);
  EXPECT_EQ(run({"team", "registry-login", "set", "ml", "registry:5000"}, "pw\n"), 2);
  EXPECT_EQ(server_.requests().size(), sent);

  EXPECT_EQ(run({"team", "registry-login", "list", "ml"}), 0);
  EXPECT_NE(out_.str().find("ml-puller"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("carol"), std::string::npos) << out_.str();
  EXPECT_EQ(run({"team", "registry-login", "remove", "ml", "registry:5000"}), 0);
  EXPECT_EQ(server_.requests().back().method, "DELETE");
}

}  // namespace
}  // namespace allot::cli
