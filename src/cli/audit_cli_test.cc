// `allot audit` and `allot audit export` against a fake API server.

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli_fixture.h"

namespace allot::cli {
namespace {

using nlohmann::json;
using testing::FakeRequest;
using testing::FakeResponse;
using testing::jsonReply;

json entry(int64_t id, const std::string& actor) {
  return {{"id", id},
          {"at", "2026-11-30T11:00:00Z"},
          {"actor", actor},
          {"actor_kind", "user"},
          {"address", "10.1.2.3"},
          {"action", "POST /api/v1/hosts/{name}/drain"},
          {"object", "host:gpu-01"},
          {"status", 200},
          {"request", {{"reason", "kernel"}}},
          {"before", {{"admin_state", "available"}}},
          {"after", {{"admin_state", "draining"}}}};
}

// Two export pages: the first says where the second starts.
FakeResponse api(const FakeRequest& r) {
  if (r.target.rfind("/api/v1/audit/export?after=0", 0) == 0) {
    FakeResponse res{200, entry(1, "root").dump() + "\n" + entry(2, "alice").dump() + "\n", {}};
    res.headers["Content-Type"] = "application/x-ndjson";
    res.headers["X-Allot-Next-After"] = "2";
    return res;
  }
  if (r.target.rfind("/api/v1/audit/export?after=2", 0) == 0) {
    FakeResponse res{200, entry(3, "bob").dump() + "\n", {}};
    res.headers["Content-Type"] = "application/x-ndjson";
    return res;
  }
  if (r.target.rfind("/api/v1/audit", 0) == 0)
    return jsonReply(200, json::array({entry(2, "alice"), entry(1, "root")}).dump());
  return jsonReply(404, R"({"error":{"code":"not_found","message":"no such endpoint"}})");
}

class AuditCliTest : public testing::CliFixture {
 protected:
  AuditCliTest() : CliFixture(api, "tok_x") {}
};

TEST_F(AuditCliTest, ListSendsTheFiltersAndPrintsATable) {
  // The test clock is 2026-11-30T12:00:00Z.
  ASSERT_EQ(run({"audit", "--since", "-2h", "--until", "2026-11-30T12:00:00Z", "--actor", "alice",
                 "--object", "host:gpu-01", "--limit", "5"}),
            0)
      << err_.str();
  auto reqs = server_.requests();
  ASSERT_FALSE(reqs.empty());
  EXPECT_EQ(reqs.back().method, "GET");
  EXPECT_EQ(reqs.back().target,
            "/api/v1/audit?since=2026-11-30T10%3A00%3A00Z&until=2026-11-30T12%3A00%3A00Z"
            "&actor=alice&object=host%3Agpu-01&limit=5");
  const std::string out = out_.str();
  for (const char* column : {"TIME", "ACTOR", "ADDRESS", "ACTION", "OBJECT", "STATUS"})
    EXPECT_NE(out.find(column), std::string::npos) << out;
  EXPECT_NE(out.find("alice"), std::string::npos) << out;
  EXPECT_NE(out.find("10.1.2.3"), std::string::npos) << out;
  EXPECT_NE(out.find("POST /api/v1/hosts/{name}/drain"), std::string::npos) << out;
  EXPECT_NE(out.find("host:gpu-01"), std::string::npos) << out;
  EXPECT_LT(out.find("alice"), out.find("root")) << "newest first, as the server sent them";
}

TEST_F(AuditCliTest, ListAsJsonPrintsTheEntries) {
  ASSERT_EQ(run({"audit", "-o", "json"}), 0) << err_.str();
  EXPECT_EQ(server_.requests().back().target, "/api/v1/audit");
  json printed = json::parse(out_.str());
  ASSERT_EQ(printed.size(), 2u);
  EXPECT_EQ(printed[0]["before"]["admin_state"], "available");
}

TEST_F(AuditCliTest, ExportFollowsPagesIntoAFile) {
  const std::string file = home_ + "/audit.jsonl";
  ASSERT_EQ(run({"audit", "export", "--since", "2026-11-01", "-o", file}), 0) << err_.str();
  auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].target, "/api/v1/audit/export?after=0&since=2026-11-01T00%3A00%3A00Z");
  EXPECT_EQ(reqs[1].target, "/api/v1/audit/export?after=2&since=2026-11-01T00%3A00%3A00Z");
  std::ifstream in(file);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["id"], 1);
  EXPECT_EQ(lines[2]["actor"], "bob");
  EXPECT_EQ(out_.str(), "");
}

TEST_F(AuditCliTest, ExportWithoutAFileWritesStandardOutput) {
  ASSERT_EQ(run({"audit", "export"}), 0) << err_.str();
  std::istringstream in(out_.str());
  int n = 0;
  for (std::string line; std::getline(in, line); ++n) EXPECT_TRUE(json::accept(line)) << line;
  EXPECT_EQ(n, 3);
}

TEST_F(AuditCliTest, BadTimeIsAUsageErrorAndSendsNothing) {
  EXPECT_EQ(run({"audit", "--since", "yesterday-ish"}), 2);
  EXPECT_NE(err_.str().find("--since"), std::string::npos) << err_.str();
  EXPECT_TRUE(server_.requests().empty());
}

}  // namespace
}  // namespace allot::cli
