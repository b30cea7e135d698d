#include "cli/job_follow.h"

#include <gtest/gtest.h>

#include <sstream>

#include "cli/fake_server.h"

namespace allot::cli {
namespace {

using testing::FakeRequest;
using testing::FakeResponse;
using testing::FakeServer;

json job(const std::string& state, json exitCode = nullptr, json signal = nullptr,
         const std::string& reason = "") {
  return {{"id", 42},
          {"state", state},
          {"exit_code", exitCode},
          {"signal", signal},
          {"reason", reason.empty() ? json(nullptr) : json(reason)}};
}

TEST(ExitCodeTest, MapsHowTheJobEnded) {
  EXPECT_EQ(exitCodeForJob(job("succeeded", 0)), 0);
  EXPECT_EQ(exitCodeForJob(job("failed", 3)), 3);
  EXPECT_EQ(exitCodeForJob(job("failed", nullptr, 9)), 137);
  EXPECT_EQ(exitCodeForJob(job("cancelled", nullptr, 15)), 143);
  EXPECT_EQ(exitCodeForJob(job("lost")), 1);
  EXPECT_EQ(exitCodeForJob(job("failed", nullptr, nullptr, "failed_to_start: no such file")), 1);
  EXPECT_EQ(exitCodeForJob(job("cancelled")), 1);
  // A job that did not succeed never reads as success, whatever its code says.
  EXPECT_EQ(exitCodeForJob(job("cancelled", 0)), 1);
}

TEST(ExitCodeTest, SummaryNamesStateCodeSignalAndReason) {
  EXPECT_EQ(endingSummary(job("failed", 3)), "job j-42 failed: exit code 3");
  EXPECT_EQ(endingSummary(job("cancelled", nullptr, 15, "cancelled by alice")),
            "job j-42 cancelled: signal 15; cancelled by alice");
  EXPECT_EQ(endingSummary(job("lost")), "job j-42 lost");
  EXPECT_TRUE(isTerminalState("lost"));
  EXPECT_FALSE(isTerminalState("scheduled"));
}

// Serves a job's output in pieces: "a", then "bc" while running, then the job ends.
FakeResponse logsReply(const FakeRequest& r) {
  FakeResponse res;
  res.headers["Content-Type"] = "text/plain";
  if (r.target.find("offset=0") != std::string::npos) {
    res.body = "a";
    res.headers["X-Allot-Log-Size"] = "1";
    res.headers["X-Allot-Job-State"] = "running";
  } else if (r.target.find("offset=1") != std::string::npos) {
    res.body = "bc";
    res.headers["X-Allot-Log-Size"] = "3";
    res.headers["X-Allot-Job-State"] = "running";
  } else {
    res.headers["X-Allot-Log-Size"] = "3";
    res.headers["X-Allot-Job-State"] = "succeeded";
  }
  return res;
}

TEST(StreamLogsTest, FollowReadsUntilTerminalAndEveryByteIsRead) {
  FakeServer server(logsReply);
  ApiClient api(std::move(HttpClient::create(server.url(), "t").value()));
  std::ostringstream out;
  auto state = streamLogs(api, 42, out, /*follow=*/true, /*waitSeconds=*/1);
  ASSERT_TRUE(state.ok()) << state.status().toString();
  EXPECT_EQ(*state, "succeeded");
  EXPECT_EQ(out.str(), "abc");
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[1].target, "/api/v1/jobs/42/logs?offset=1&wait=1");
  EXPECT_EQ(reqs[2].target, "/api/v1/jobs/42/logs?offset=3&wait=1");
  EXPECT_EQ(server.connections(), 1);  // one keep-alive connection for the whole stream
}

TEST(StreamLogsTest, WithoutFollowStopsAtWhatExistsNow) {
  FakeServer server(logsReply);
  ApiClient api(std::move(HttpClient::create(server.url(), "t").value()));
  std::ostringstream out;
  auto state = streamLogs(api, 42, out, /*follow=*/false);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(out.str(), "a");
  EXPECT_EQ(server.requests().at(0).target, "/api/v1/jobs/42/logs?offset=0");
}

TEST(StreamLogsTest, TerminalJobWithBytesLeftKeepsReading) {
  // The job ended while its last bytes were unread: keep reading until offset reaches the size.
  FakeServer server([](const FakeRequest& r) {
    FakeResponse res;
    res.headers["X-Allot-Job-State"] = "failed";
    res.headers["X-Allot-Log-Size"] = "4";
    res.body = r.target.find("offset=0") != std::string::npos ? "ab" : "cd";
    return res;
  });
  ApiClient api(std::move(HttpClient::create(server.url(), "t").value()));
  std::ostringstream out;
  auto state = streamLogs(api, 7, out, /*follow=*/true, 1);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(*state, "failed");
  EXPECT_EQ(out.str(), "abcd");
}

}  // namespace
}  // namespace allot::cli
