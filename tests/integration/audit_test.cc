// The audit log end to end: a representative set of changes through the CLI and raw HTTP, each
// leaving exactly one entry with who, from where, what and before/after; refused requests leave
// none; no secret handed out appears anywhere in the log; the log survives a restart and exports
// as JSON lines through the API and `allot audit export`.

#include <algorithm>
#include <sstream>

#include "harness.h"

namespace allot::it {
namespace {

class AuditTest : public TestCluster {
 protected:
  json auditEntries() {
    HttpResult r = httpRequest(port_, "GET", "/api/v1/audit?limit=1000", "", adminToken_);
    if (r.status != 200) throw std::runtime_error("GET /audit: " + r.body);
    return r.parsed();
  }
  // The entries with this action, oldest first.
  static std::vector<json> withAction(const json& entries, const std::string& action) {
    std::vector<json> out;
    for (const auto& e : entries)
      if (textOf(e, "action") == action) out.insert(out.begin(), e);
    return out;
  }
  HttpResult call(const std::string& method, const std::string& target, const json& body,
                  const std::string& token) {
    return httpRequest(port_, method, target, body.is_null() ? "" : body.dump(), token);
  }
};

TEST_F(AuditTest, EveryChangeLeavesOneEntryAndNoSecret) {
  startAgent("gpu-a", "sim:2xA100");  // a join token (admin), then the host joins with it
  createTeam("ml");
  const std::string alice = createUser("alice", "ml");
  ASSERT_EQ(
      call("POST", "/api/v1/projects", {{"name", "vision"}, {"team", "ml"}}, adminToken_).status,
      201);
  ASSERT_EQ(
      call("PUT", "/api/v1/teams/ml/quota", {{"guaranteed", {{"A100", 1}}}}, adminToken_).status,
      200);
  HttpResult joinToken = call("POST", "/api/v1/hosts/join-tokens", {{"ttl", "1h"}}, adminToken_);
  ASSERT_EQ(joinToken.status, 201) << joinToken.body;
  const std::string joinSecret = textOf(joinToken.parsed(), "token");
  ASSERT_FALSE(joinSecret.empty());
  const int64_t job = submit(alice, {"--gpus", "1"}, {"sleep", "600"});
  ASSERT_TRUE(waitForJobState(alice, job, "running"));
  ASSERT_EQ(
      call("POST", "/api/v1/jobs/" + std::to_string(job) + "/cancel", json::object(), alice).status,
      200);
  ASSERT_EQ(
      call("POST", "/api/v1/hosts/gpu-a/drain", {{"reason", "kernel update"}}, adminToken_).status,
      200);

  // Refused and failed requests change nothing, so they leave nothing.
  EXPECT_EQ(call("POST", "/api/v1/teams", {{"name", "ml"}}, adminToken_).status, 409);
  EXPECT_EQ(call("POST", "/api/v1/hosts/gpu-a/resume", json::object(), alice).status, 403);
  EXPECT_EQ(call("POST", "/api/v1/jobs", {{"command", "not an array"}}, alice).status, 400);
  EXPECT_EQ(call("POST", "/api/v1/teams", {{"name", "x"}}, "").status, 401);

  const json entries = auditEntries();
  const std::string admin = textOf(cliJson(adminToken_, {"whoami"}), "name");
  for (const auto& e : entries) {
    EXPECT_EQ(textOf(e, "address"), "127.0.0.1") << e.dump();
    EXPECT_GE(e["status"].get<int>(), 200) << e.dump();
    EXPECT_LT(e["status"].get<int>(), 300) << e.dump();
    EXPECT_FALSE(textOf(e, "at").empty()) << e.dump();
  }

  auto one = [&](const std::string& action) {
    auto found = withAction(entries, action);
    EXPECT_EQ(found.size(), 1u) << action << " in " << entries.dump(1);
    return found.empty() ? json::object() : found[0];
  };
  json tokenEntry = withAction(entries, "POST /api/v1/hosts/join-tokens").at(0);
  EXPECT_EQ(textOf(tokenEntry, "actor"), admin);
  EXPECT_EQ(tokenEntry["after"]["token"], "[redacted]");

  json join = one("POST /api/v1/hosts/join");
  EXPECT_EQ(textOf(join, "actor"), "join:" + textOf(tokenEntry["after"], "id"));
  EXPECT_EQ(textOf(join, "actor_kind"), "join");
  EXPECT_EQ(textOf(join, "object"), "host:gpu-a");
  EXPECT_EQ(join["request"]["join_token"], "[redacted]");
  EXPECT_EQ(join["after"]["credential"], "[redacted]");

  json team = withAction(entries, "POST /api/v1/teams").at(0);
  EXPECT_EQ(withAction(entries, "POST /api/v1/teams").size(), 1u);
  EXPECT_EQ(textOf(team, "actor"), admin);
  EXPECT_EQ(textOf(team, "object"), "team:ml");
  EXPECT_TRUE(team["before"].is_null());
  EXPECT_EQ(textOf(team["after"], "name"), "ml");

  json user = one("POST /api/v1/users");
  EXPECT_EQ(textOf(user, "object"), "user:alice");
  EXPECT_EQ(user["after"]["token"], "[redacted]");

  EXPECT_EQ(textOf(one("POST /api/v1/projects"), "object"), "team:ml/project:vision");

  json quota = one("PUT /api/v1/teams/{team}/quota");
  EXPECT_EQ(textOf(quota, "object"), "team:ml");
  EXPECT_EQ(quota["request"]["guaranteed"]["A100"], 1);
  EXPECT_NE(quota["before"], quota["after"]) << quota.dump();
  EXPECT_FALSE(quota["before"].is_null());

  json submitted = one("POST /api/v1/jobs");
  EXPECT_EQ(textOf(submitted, "actor"), "alice");
  EXPECT_EQ(textOf(submitted, "object"), "job:" + std::to_string(job));
  EXPECT_TRUE(submitted["before"].is_null());
  EXPECT_EQ(submitted["after"]["id"], job) << "after is the reply: the job as submitted";

  json cancel = one("POST /api/v1/jobs/{id}/cancel");
  EXPECT_EQ(textOf(cancel, "actor"), "alice");
  EXPECT_EQ(textOf(cancel, "object"), "job:" + std::to_string(job));
  EXPECT_EQ(textOf(cancel["before"], "state"), "running");
  EXPECT_NE(cancel["before"], cancel["after"]);

  json drain = one("POST /api/v1/hosts/{name}/drain");
  EXPECT_EQ(textOf(drain, "object"), "host:gpu-a");
  EXPECT_EQ(textOf(drain["before"], "admin_state"), "available");
  // The cancelled job may already have stopped (the agent reports at once), and a drained host
  // with nothing running goes straight on to maintenance within the same request.
  const std::string drained = textOf(drain["after"], "admin_state");
  EXPECT_TRUE(drained == "draining" || drained == "maintenance") << drain.dump();
  EXPECT_EQ(textOf(drain["request"], "reason"), "kernel update");
  EXPECT_TRUE(withAction(entries, "POST /api/v1/hosts/{name}/resume").empty());

  // No secret handed out is anywhere in the log: not in the page, not in the export.
  HttpResult exported = httpRequest(port_, "GET", "/api/v1/audit/export", "", adminToken_);
  ASSERT_EQ(exported.status, 200) << exported.body;
  EXPECT_EQ(exported.headers["content-type"], "application/x-ndjson");
  const json credential =
      json::parse(readFile(path("agents/gpu-a/credential.json")), nullptr, false);
  const std::string hostSecret = credential.is_object() ? textOf(credential, "token") : "";
  EXPECT_FALSE(hostSecret.empty());
  for (const std::string& secret : {alice, joinSecret, adminToken_, hostSecret}) {
    if (secret.empty()) continue;
    EXPECT_EQ(entries.dump().find(secret), std::string::npos) << "a secret in the audit log";
    EXPECT_EQ(exported.body.find(secret), std::string::npos) << "a secret in the export";
  }

  // The export is the same entries, one a line, oldest first.
  std::istringstream lines(exported.body);
  int64_t lastId = 0;
  size_t n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    json e = json::parse(line);
    EXPECT_GT(e["id"].get<int64_t>(), lastId);
    lastId = e["id"].get<int64_t>();
  }
  EXPECT_EQ(n, entries.size());

  // Only platform admins read it.
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/audit", "", alice).status, 403);
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/audit/export", "", alice).status, 403);
}

TEST_F(AuditTest, TheLogSurvivesARestartAndTheCliFiltersAndExportsIt) {
  createTeam("ml");
  createTeam("vision");
  createUser("alice", "ml");
  const size_t before = auditEntries().size();
  ASSERT_EQ(before, 3u);

  restartServer();
  EXPECT_EQ(auditEntries().size(), before);

  json byObject = cliJson(adminToken_, {"audit", "--object", "team:vision"});
  ASSERT_EQ(byObject.size(), 1u) << byObject.dump();
  EXPECT_EQ(textOf(byObject[0], "action"), "POST /api/v1/teams");
  json limited = cliJson(adminToken_, {"audit", "--limit", "1"});
  ASSERT_EQ(limited.size(), 1u);
  EXPECT_EQ(textOf(limited[0], "object"), "user:alice") << "newest first";

  CliResult table = cli({"audit", "--since", "-1h"});
  ASSERT_EQ(table.code, 0) << table.describe();
  EXPECT_NE(table.out.find("ACTOR"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("team:vision"), std::string::npos) << table.out;

  const std::string file = path("audit.jsonl");
  CliResult exported = cli({"audit", "export", "-o", file});
  ASSERT_EQ(exported.code, 0) << exported.describe();
  const std::string text = readFile(file);
  EXPECT_EQ(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')), before) << text;
  EXPECT_NE(text.find("\"team:ml\""), std::string::npos) << text;
}

}  // namespace
}  // namespace allot::it
