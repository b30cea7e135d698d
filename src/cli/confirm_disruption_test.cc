// The question before an action that stops running work (`lease approve`, `host drain
// --deadline`), answered on a terminal: only "y" goes on; anything else, or no answer, does
// nothing. The CLI's tests hand it stdin as a stream, which counts as a terminal (the script
// case, with no terminal, is the integration suite's: it is refused without --force).

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/cli_fixture.h"

namespace allot::cli {
namespace {

using nlohmann::json;
using testing::FakeRequest;
using testing::FakeResponse;
using testing::jsonReply;

FakeResponse api(const FakeRequest& r) {
  if (r.method == "GET" && r.target == "/api/v1/leases/7/impact")
    return jsonReply(200, json{{"hosts", {"gpu-02"}},
                               {"stops_at", "2026-11-30T14:00:00Z"},
                               {"would_stop",
                                {{{"job", 41},
                                  {"name", "train"},
                                  {"user", "dave"},
                                  {"team", "cv"},
                                  {"host", "gpu-02"},
                                  {"gpus", 2}}}}}
                              .dump());
  if (r.method == "POST" && r.target == "/api/v1/leases/7/approve")
    return jsonReply(200, json{{"id", 7}, {"state", "approved"}}.dump());
  return jsonReply(404, R"({"error":{"code":"not_found","message":"no such route"}})");
}

class ConfirmDisruptionTest : public testing::CliFixture {
 protected:
  ConfirmDisruptionTest() : CliFixture(api, "tok_admin") {}

  int approvals() const {
    int n = 0;
    for (const auto& r : server_.requests())
      if (r.method == "POST") ++n;
    return n;
  }
};

TEST_F(ConfirmDisruptionTest, ListsWhatStopsAndGoesOnOnlyOnYes) {
  for (const std::string answer : {"n\n", "\n", "", "yes please\n"}) {
    EXPECT_EQ(run({"lease", "approve", "7"}, answer), 1) << "answer: " << answer;
    EXPECT_NE(err_.str().find("This stops 1 running job at 2026-11-30T14:00:00Z:\n"
                              "  j-41 train (dave, team cv) on gpu-02, 2 GPUs\n"),
              std::string::npos)
        << err_.str();
    EXPECT_NE(err_.str().find("Go on with approving lease 7? [y/N] Nothing done.\n"),
              std::string::npos)
        << err_.str();
  }
  EXPECT_EQ(approvals(), 0);

  for (const std::string answer : {"y\n", "Y\n", "yes\n"}) {
    EXPECT_EQ(run({"lease", "approve", "7"}, answer), 0) << "answer: " << answer << err_.str();
    EXPECT_EQ(err_.str().find("Nothing done"), std::string::npos) << err_.str();
  }
  EXPECT_EQ(approvals(), 3);
}

TEST_F(ConfirmDisruptionTest, ForceAsksNothing) {
  EXPECT_EQ(run({"lease", "approve", "7", "--force"}, "n\n"), 0) << err_.str();
  EXPECT_EQ(err_.str().find("[y/N]"), std::string::npos) << err_.str();
  EXPECT_EQ(approvals(), 1);
  for (const auto& r : server_.requests())
    EXPECT_NE(r.target, "/api/v1/leases/7/impact") << "--force should not ask what stops";
}

}  // namespace
}  // namespace allot::cli
