// Bad input, for every endpoint: the right status and error body, and nothing written.

#include <tuple>

#include "harness.h"

namespace allot::it {
namespace {

class ApiErrorsTest : public TestCluster {
 protected:
  void SetUp() override {
    TestCluster::SetUp();
    startAgent("node-a", "sim:1xA100");
    std::tie(alice_, bob_) = createTwoTeams("ml", "alice", "other", "bob");
    auto p = cliJson(adminToken_, {"project", "create", "p1", "--team", "ml"});
    ASSERT_EQ(p["team"], "ml") << p.dump();
    // One ended job in each team.
    aliceJob_ = submit(alice_, {}, {"true"});
    bobJob_ = submit(bob_, {}, {"true"});
    ASSERT_TRUE(waitForJobState(alice_, aliceJob_, "succeeded"));
    ASSERT_TRUE(waitForJobState(bob_, bobJob_, "succeeded"));
  }

  // Everything a failed request must not change, as the admin sees it.
  json snapshot() {
    json hosts = json::array();
    for (const auto& h : cliJson(adminToken_, {"host", "list"})) hosts.push_back(h.at("name"));
    return {{"jobs", cliJson(adminToken_, {"job", "list"})},
            {"teams", cliJson(adminToken_, {"team", "list"})},
            {"users", cliJson(adminToken_, {"user", "list"})},
            {"projects", cliJson(adminToken_, {"project", "list"})},
            {"hosts", hosts}};
  }

  std::string alice_, bob_;
  int64_t aliceJob_ = 0, bobJob_ = 0;
};

struct Case {
  std::string method;
  std::string target;
  std::string body;
  std::string token;
  int status;
  std::string code;
  std::string field = "";  // the "field" the error must name, when set
  std::map<std::string, std::string> headers = {};
};

std::string describe(const Case& c) {
  std::string body = c.body.size() > 200 ? c.body.substr(0, 200) + "..." : c.body;
  return c.method + " " + c.target + " body=" + body +
         " token=" + (c.token.empty() ? "(none)" : c.token.substr(0, 12) + "...");
}

TEST_F(ApiErrorsTest, BadInputIsRefusedAndChangesNothing) {
  const std::string admin = adminToken_, alice = alice_, bob = bob_;
  const std::string mine = std::to_string(aliceJob_), theirs = std::to_string(bobJob_);
  // The agent's own credential: good for the agent protocol only.
  json cred = json::parse(readFile(path("agents/node-a/credential.json")), nullptr, false);
  ASSERT_TRUE(cred.is_object() && cred.contains("token")) << "no agent credential file";
  const std::string hostCred = cred["token"].get<std::string>();
  const std::string huge = R"({"name":")" + std::string((1 << 20) + 16, 'a') + R"("})";
  const std::string hugeJob =
      R"({"command":["echo",")" + std::string((1 << 20) + 16, 'a') + R"("]})";

  const std::string joinToken = cliJson(admin, {"host", "join-token"}).at("token");
  const std::string inventory =
      R"({"hostname":"h9","cpus":2,"memory_mib":1024,"gpus":[],"gpu_provider":"simulated"})";
  auto joinBody = [&](const std::string& name, const std::string& inv) {
    return R"({"name":")" + name + R"(","join_token":")" + joinToken + R"(","inventory":)" + inv +
           "}";
  };

  json before = snapshot();

  const std::vector<Case> cases = {
      // Who is calling.
      {"GET", "/api/v1/whoami", "", "", 401, "unauthenticated"},
      {"GET", "/api/v1/whoami", "", "tok-1_not-the-secret", 401, "unauthenticated"},
      {"GET", "/api/v1/jobs", "", "garbage", 401, "unauthenticated"},
      {"GET",
       "/api/v1/jobs",
       "",
       "",
       401,
       "unauthenticated",
       "",
       {{"Authorization", "Basic YTpi"}}},
      {"POST", "/api/v1/jobs", R"({"command":["true"]})", "", 401, "unauthenticated"},
      {"POST", "/api/v1/teams", R"({"name":"t9"})", "", 401, "unauthenticated"},
      {"GET", "/api/v1/teams", "", "", 401, "unauthenticated"},
      {"GET", "/api/v1/users", "", "", 401, "unauthenticated"},
      {"GET", "/api/v1/projects", "", "", 401, "unauthenticated"},
      {"GET", "/api/v1/hosts", "", "", 401, "unauthenticated"},
      {"GET", "/api/v1/hosts/node-a", "", "", 401, "unauthenticated"},
      {"GET", "/api/v1/jobs/" + mine, "", "", 401, "unauthenticated"},
      {"GET", "/api/v1/jobs/" + mine + "/logs", "", "", 401, "unauthenticated"},
      {"POST", "/api/v1/jobs/" + mine + "/cancel", "", "", 401, "unauthenticated"},
      {"POST", "/api/v1/hosts/join-tokens", "{}", "", 401, "unauthenticated"},
      {"GET", "/api/v1/jobs", "", hostCred, 403, "permission_denied"},
      {"POST", "/api/v1/jobs", R"({"command":["true"]})", hostCred, 403, "permission_denied"},
      // Teams.
      {"POST", "/api/v1/teams", "{", admin, 400, "invalid_argument"},
      {"POST", "/api/v1/teams", "[]", admin, 400, "invalid_argument"},
      {"POST", "/api/v1/teams", R"({"name":"t9","color":"red"})", admin, 400, "invalid_argument",
       "color"},
      {"POST", "/api/v1/teams", R"({"name":5})", admin, 400, "invalid_argument", "name"},
      {"POST", "/api/v1/teams", "{}", admin, 400, "invalid_argument", "name"},
      {"POST", "/api/v1/teams", R"({"name":"Bad Name"})", admin, 400, "invalid_argument", "name"},
      {"POST", "/api/v1/teams", R"({"name":"ml"})", admin, 409, "already_exists"},
      {"POST", "/api/v1/teams", R"({"name":"t9"})", alice, 403, "permission_denied"},
      {"POST", "/api/v1/teams", huge, admin, 413, "too_large"},
      // Users.
      {"POST", "/api/v1/users", "{", admin, 400, "invalid_argument"},
      {"POST", "/api/v1/users", R"({"name":"u9","team":"ml","shoe":1})", admin, 400,
       "invalid_argument", "shoe"},
      {"POST", "/api/v1/users", R"({"name":"u9","team":"ml","role":"king"})", admin, 400,
       "invalid_argument", "role"},
      {"POST", "/api/v1/users", R"({"name":"u9","team":"ml","role":1})", admin, 400,
       "invalid_argument", "role"},
      {"POST", "/api/v1/users", R"({"name":"u9","team":["ml"]})", admin, 400, "invalid_argument",
       "team"},
      {"POST", "/api/v1/users", R"({"team":"ml"})", admin, 400, "invalid_argument", "name"},
      {"POST", "/api/v1/users", R"({"name":"u9"})", admin, 400, "invalid_argument", "team"},
      {"POST", "/api/v1/users", R"({"name":"u9","team":"nope"})", admin, 404, "not_found"},
      {"POST", "/api/v1/users", R"({"name":"alice","team":"ml"})", admin, 409, "already_exists"},
      {"POST", "/api/v1/users", R"({"name":"u9","team":"ml"})", alice, 403, "permission_denied"},
      {"POST", "/api/v1/users", huge, admin, 413, "too_large"},
      // Projects.
      {"POST", "/api/v1/projects", "{", alice, 400, "invalid_argument"},
      {"POST", "/api/v1/projects", R"({"name":"p2","x":1})", alice, 400, "invalid_argument", "x"},
      {"POST", "/api/v1/projects", "{}", alice, 400, "invalid_argument", "name"},
      {"POST", "/api/v1/projects", R"({"name":true})", alice, 400, "invalid_argument", "name"},
      {"POST", "/api/v1/projects", R"({"name":"p2","team":"other"})", alice, 404, "not_found"},
      {"POST", "/api/v1/projects", R"({"name":"p1","team":"ml"})", admin, 409, "already_exists"},
      {"POST", "/api/v1/projects", R"({"name":"p3"})", alice, 403, "permission_denied"},
      {"POST", "/api/v1/projects", huge, alice, 413, "too_large"},
      // Join tokens and joining.
      {"POST", "/api/v1/hosts/join-tokens", "{}", alice, 403, "permission_denied"},
      {"POST", "/api/v1/hosts/join-tokens", R"({"ttl":5})", admin, 400, "invalid_argument", "ttl"},
      {"POST", "/api/v1/hosts/join-tokens", R"({"ttl":"soon"})", admin, 400, "invalid_argument",
       "ttl"},
      {"POST", "/api/v1/hosts/join-tokens", R"({"ttl":"24h","x":1})", admin, 400,
       "invalid_argument", "x"},
      {"POST", "/api/v1/hosts/join", "{", "", 400, "invalid_argument"},
      {"POST", "/api/v1/hosts/join", R"({"name":"h9","inventory":{}})", "", 400, "invalid_argument",
       "join_token"},
      {"POST", "/api/v1/hosts/join", R"({"name":"h9","join_token":"x"})", "", 400,
       "invalid_argument", "inventory"},
      {"POST", "/api/v1/hosts/join",
       R"({"name":"h9","join_token":"join-1_bogus","inventory":)" + inventory + "}", "", 401,
       "unauthenticated"},
      {"POST", "/api/v1/hosts/join", joinBody("h9", inventory).insert(1, R"("x":1,)"), "", 400,
       "invalid_argument", "x"},
      {"POST", "/api/v1/hosts/join",
       joinBody("h9", R"({"hostname":"h9","cpus":"many","memory_mib":1,"gpus":[]})"), "", 400,
       "invalid_argument", "inventory"},
      {"POST", "/api/v1/hosts/join", joinBody("h9", R"({"hostname":"h9"})"), "", 400,
       "invalid_argument", "inventory"},
      {"POST", "/api/v1/hosts/join", joinBody("Bad Name", inventory), "", 400, "invalid_argument",
       "name"},
      // Hosts.
      {"GET", "/api/v1/hosts/nope", "", admin, 404, "not_found"},
      {"GET", "/api/v1/hosts/nope", "", alice, 404, "not_found"},
      {"PUT", "/api/v1/hosts/node-a/dedication", R"({"team":"ml"})", alice, 403,
       "permission_denied"},
      {"PUT", "/api/v1/hosts/node-a/dedication", R"({"team":"nope"})", admin, 404, "not_found",
       "team"},
      {"PUT", "/api/v1/hosts/node-a/dedication", "{}", admin, 400, "invalid_argument", "team"},
      {"PUT", "/api/v1/hosts/nope/dedication", R"({"team":"ml"})", admin, 404, "not_found"},
      {"PUT", "/api/v1/hosts/node-a/gpus/99", R"({"shared":true})", admin, 404, "not_found",
       "index"},
      {"PUT", "/api/v1/hosts/node-a/gpus/x", R"({"shared":true})", admin, 400, "invalid_argument",
       "index"},
      {"PUT", "/api/v1/hosts/node-a/gpus/0", R"({"shared":"yes"})", admin, 400, "invalid_argument",
       "shared"},
      {"PUT", "/api/v1/hosts/node-a/gpus/0", R"({"shared":true})", alice, 403, "permission_denied"},
      // Quotas.
      {"PUT", "/api/v1/teams/ml/quota", R"({"weight":2})", alice, 403, "permission_denied"},
      {"PUT", "/api/v1/teams/ml/quota", R"({"weight":2})", bob, 404, "not_found"},
      {"GET", "/api/v1/teams/ml/quota", "", bob, 404, "not_found"},
      {"PUT", "/api/v1/teams/ml/quota", R"({"weight":0})", admin, 400, "invalid_argument",
       "weight"},
      {"PUT", "/api/v1/teams/ml/quota", R"({"guaranteed":{"A100":-1}})", admin, 400,
       "invalid_argument", "guaranteed"},
      {"PUT", "/api/v1/teams/ml/quota", R"({"guaranteed":{"A100":"4"}})", admin, 400,
       "invalid_argument", "guaranteed"},
      {"PUT", "/api/v1/teams/ml/quota", R"({"borrow_limit":-1})", admin, 400, "invalid_argument",
       "borrow_limit"},
      {"PUT", "/api/v1/teams/ml/quota", R"({"cap":1})", admin, 400, "invalid_argument", "cap"},
      {"PUT", "/api/v1/teams/ml/projects/p1/quota", R"({"guaranteed":{"A100":1}})", admin, 400,
       "invalid_argument", "guaranteed"},
      {"PUT", "/api/v1/teams/ml/projects/p1/quota", "{}", admin, 400, "invalid_argument",
       "guaranteed"},
      {"PUT", "/api/v1/teams/ml/projects/p1/quota", R"({"guaranteed":{}})", alice, 403,
       "permission_denied"},
      {"PUT", "/api/v1/teams/ml/projects/nope/quota", R"({"guaranteed":{}})", admin, 404,
       "not_found"},
      // Submitting jobs.
      {"POST", "/api/v1/jobs", "{", alice, 400, "invalid_argument"},
      {"POST", "/api/v1/jobs", R"("true")", alice, 400, "invalid_argument"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"colour":1})", alice, 400, "invalid_argument",
       "colour"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"priority":1001})", alice, 400,
       "invalid_argument", "priority"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"gpus":2,"gpu_milli":500})", alice, 400,
       "invalid_argument", "gpu_milli"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"gpus":1,"whole_host":true})", alice, 400,
       "invalid_argument", "gpus"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"whole_host":"yes"})", alice, 400,
       "invalid_argument", "whole_host"},
      // One set of bounds for every request (model/resource_limits.h).
      {"POST", "/api/v1/jobs", R"({"command":["true"],"gpus":1025})", alice, 400,
       "invalid_argument", "gpus"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"cpu_millis":4096001})", alice, 400,
       "invalid_argument", "cpu_millis"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"gpu_memory_mib":1048577})", alice, 400,
       "invalid_argument", "gpu_memory_mib"},
      {"POST", "/api/v1/sessions", R"({"cpu_millis":4096001})", alice, 400, "invalid_argument",
       "cpu_millis"},
      {"POST", "/api/v1/sessions", R"({"memory_mib":67108865})", alice, 400, "invalid_argument",
       "memory_mib"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"gpus":1,"hosts":0})", alice, 400,
       "invalid_argument", "hosts"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"gpus":1,"hosts":65})", alice, 400,
       "invalid_argument", "hosts"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"gpus":1,"hosts":"2"})", alice, 400,
       "invalid_argument", "hosts"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"hosts":2})", alice, 400, "invalid_argument",
       "hosts"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"whole_host":true,"hosts":2})", alice, 400,
       "invalid_argument", "hosts"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"max_runtime":"soon"})", alice, 400,
       "invalid_argument", "max_runtime"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"max_runtime":"0s"})", alice, 400,
       "invalid_argument", "max_runtime"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"min_cuda":"12.x"})", alice, 400,
       "invalid_argument", "min_cuda"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"gpu_model":"A100","gpu_models":["A100"]})",
       alice, 400, "invalid_argument", "gpu_model"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"gpu_models":"A100"})", alice, 400,
       "invalid_argument", "gpu_models"},
      {"POST", "/api/v1/jobs", R"({"command":"true"})", alice, 400, "invalid_argument", "command"},
      {"POST", "/api/v1/jobs", R"({"command":[1]})", alice, 400, "invalid_argument", "command"},
      {"POST", "/api/v1/jobs", "{}", alice, 400, "invalid_argument", "command"},
      {"POST", "/api/v1/jobs", R"({"command":[]})", alice, 400, "invalid_argument", "command"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"gpus":"two"})", alice, 400,
       "invalid_argument", "gpus"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"gpus":-1})", alice, 400, "invalid_argument",
       "gpus"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"gpus":1.5})", alice, 400, "invalid_argument",
       "gpus"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"gpu_model":7})", alice, 400,
       "invalid_argument", "gpu_model"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"env":{"A":1}})", alice, 400,
       "invalid_argument", "env"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"env":["A=1"]})", alice, 400,
       "invalid_argument", "env"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"env":{"CUDA_VISIBLE_DEVICES":"0"}})", alice,
       400, "invalid_argument", "env"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"name":"Bad Name"})", alice, 400,
       "invalid_argument", "name"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"project":"nope"})", alice, 404, "not_found"},
      {"POST", "/api/v1/jobs", R"({"command":["true"],"team":"other"})", alice, 404, "not_found"},
      {"POST", "/api/v1/jobs", hugeJob, alice, 413, "too_large"},
      // Listing jobs.
      {"GET", "/api/v1/jobs?state=bogus", "", alice, 400, "invalid_argument", "state"},
      {"GET", "/api/v1/jobs?limit=0", "", alice, 400, "invalid_argument", "limit"},
      {"GET", "/api/v1/jobs?limit=abc", "", alice, 400, "invalid_argument", "limit"},
      {"GET", "/api/v1/jobs?limit=-5", "", alice, 400, "invalid_argument", "limit"},
      {"GET", "/api/v1/jobs?since=yesterday", "", alice, 400, "invalid_argument", "since"},
      {"GET", "/api/v1/jobs?until=2026-13-01", "", alice, 400, "invalid_argument", "until"},
      // One job.
      {"GET", "/api/v1/jobs/abc", "", alice, 400, "invalid_argument"},
      {"GET", "/api/v1/jobs/0", "", alice, 400, "invalid_argument"},
      {"GET", "/api/v1/jobs/999999", "", alice, 404, "not_found"},
      {"GET", "/api/v1/jobs/" + theirs, "", alice, 404, "not_found"},
      {"GET", "/api/v1/jobs/j-" + theirs, "", alice, 404, "not_found"},
      {"GET", "/api/v1/jobs/" + mine, "", bob, 404, "not_found"},
      // Logs.
      {"GET", "/api/v1/jobs/" + theirs + "/logs", "", alice, 404, "not_found"},
      {"GET", "/api/v1/jobs/999999/logs", "", alice, 404, "not_found"},
      {"GET", "/api/v1/jobs/abc/logs", "", alice, 400, "invalid_argument"},
      {"GET", "/api/v1/jobs/" + mine + "/logs?offset=-1", "", alice, 400, "invalid_argument",
       "offset"},
      {"GET", "/api/v1/jobs/" + mine + "/logs?offset=x", "", alice, 400, "invalid_argument",
       "offset"},
      {"GET", "/api/v1/jobs/" + mine + "/logs?wait=31", "", alice, 400, "invalid_argument", "wait"},
      {"GET", "/api/v1/jobs/" + mine + "/logs?rank=1", "", alice, 400, "invalid_argument", "rank"},
      {"GET", "/api/v1/jobs/" + mine + "/logs?rank=-1", "", alice, 400, "invalid_argument", "rank"},
      {"GET", "/api/v1/jobs/" + mine + "/logs?wait=soon", "", alice, 400, "invalid_argument",
       "wait"},
      // Cancel.
      {"POST", "/api/v1/jobs/" + theirs + "/cancel", "", alice, 404, "not_found"},
      {"POST", "/api/v1/jobs/999999/cancel", "", alice, 404, "not_found"},
      {"POST", "/api/v1/jobs/abc/cancel", "", alice, 400, "invalid_argument"},
      {"POST", "/api/v1/jobs/" + mine + "/cancel", "{", alice, 400, "invalid_argument"},
      {"POST", "/api/v1/jobs/" + mine + "/cancel", R"({"force":true})", alice, 400,
       "invalid_argument", "force"},
      {"POST", "/api/v1/jobs/" + mine + "/cancel", huge, alice, 413, "too_large"},
      {"POST", "/api/v1/jobs/" + mine + "/cancel", "", alice, 409, "failed_precondition"},
      // Usage reports.
      {"GET", "/api/v1/usage", "", "", 401, "unauthenticated"},
      {"GET", "/api/v1/usage", "", hostCred, 403, "permission_denied"},
      {"GET", "/api/v1/usage?by=color", "", alice, 400, "invalid_argument", "by"},
      {"GET", "/api/v1/usage?from=yesterday-ish", "", alice, 400, "invalid_argument", "from"},
      {"GET", "/api/v1/usage?to=2026-13-45", "", admin, 400, "invalid_argument", "to"},
      {"GET", "/api/v1/usage?from=-1h&to=-2h", "", alice, 400, "invalid_argument", "from"},
      {"GET", "/api/v1/usage?team=other", "", alice, 404, "not_found"},
      {"GET", "/api/v1/usage?team=nope", "", admin, 404, "not_found"},
      // No such endpoint.
      {"GET", "/api/v1/nope", "", admin, 404, "not_found"},
  };

  for (const auto& c : cases) {
    SCOPED_TRACE(describe(c));
    HttpResult r;
    try {
      r = httpRequest(port_, c.method, c.target, c.body, c.token, c.headers);
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    EXPECT_EQ(r.status, c.status) << r.body;
    json body = r.parsed();
    if (!body.is_object() || !body.contains("error") || !body["error"].is_object()) {
      ADD_FAILURE() << "not an error body: " << r.body;
      continue;
    }
    const json& err = body["error"];
    EXPECT_EQ(textOf(err, "code"), c.code) << r.body;
    EXPECT_FALSE(textOf(err, "message").empty()) << r.body;
    if (!c.field.empty()) {
      EXPECT_EQ(textOf(err, "field"), c.field) << r.body;
    }
  }

  // allotd is still up, and not one of those requests left a trace.
  EXPECT_EQ(httpRequest(port_, "GET", "/healthz").status, 200);
  json after = snapshot();
  for (const char* what : {"jobs", "teams", "users", "projects", "hosts"}) {
    EXPECT_EQ(after[what], before[what]) << what << " changed";
  }
}

// A refused `allot run` exits 2 with one line on stderr, nothing on stdout, and no job.
void expectUsageError(const CliResult& r, const std::string& mention) {
  SCOPED_TRACE(r.describe());
  EXPECT_EQ(r.code, 2) << "usage errors exit 2";
  std::string msg = trim(r.err);
  EXPECT_FALSE(msg.empty());
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line";
  if (!mention.empty()) {
    EXPECT_NE(msg.find(mention), std::string::npos);
  }
  EXPECT_EQ(r.out, "");
}

// The usage report shows members their own team only, and admins every team.
TEST_F(ApiErrorsTest, UsageReportShowsMembersOnlyTheirTeam) {
  // The jobs of SetUp hold no GPU, so they are not in the ledger; these hold one each.
  for (const auto& token : {alice_, bob_}) {
    int64_t id = submit(token, {"--gpus", "1"}, {"true"});
    ASSERT_TRUE(waitForJobState(token, id, "succeeded"));
  }
  auto names = [&](const std::string& token, const std::string& query) {
    HttpResult r = httpRequest(port_, "GET", "/api/v1/usage" + query, "", token);
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<std::string> out;
    json body = r.parsed();
    for (const auto& row : body.at("rows")) {
      EXPECT_TRUE(row.contains("gpu_hours_used")) << r.body;
      EXPECT_TRUE(row.at("cost").is_null());  // no prices configured
      EXPECT_GT(row.at("gpu_hours_allocated").get<double>(), 0) << r.body;
      EXPECT_EQ(row.at("peak_gpus").get<double>(), 1) << r.body;
      out.push_back(row.at("name").get<std::string>());
    }
    return out;
  };
  EXPECT_EQ(names(adminToken_, "?by=team"), (std::vector<std::string>{"ml", "other"}));
  EXPECT_EQ(names(adminToken_, "?by=team&team=other"), (std::vector<std::string>{"other"}));
  EXPECT_EQ(names(alice_, "?by=team"), (std::vector<std::string>{"ml"}));
  EXPECT_EQ(names(alice_, "?by=user"), (std::vector<std::string>{"alice"}));
  EXPECT_EQ(names(alice_, "?by=host&team=ml"), (std::vector<std::string>{"node-a"}));
  EXPECT_EQ(names(bob_, "?by=gpu-model"), (std::vector<std::string>{"A100"}));
  EXPECT_TRUE(names(alice_, "?from=-30d&to=-29d").empty());
}

TEST_F(ApiErrorsTest, CliRefusesABadEnvEntry) {
  json before = cliJson(alice_, {"job", "list"});
  expectUsageError(cliAs(alice_, {"run", "--env", "NOEQUALS", "--", "true"}), "NOEQUALS");
  expectUsageError(cliAs(alice_, {"run", "--env", "A=1", "--env", "=value", "--", "true"}),
                   "=value");
  EXPECT_EQ(cliJson(alice_, {"job", "list"}), before) << "a refused `allot run` created a job";
}

TEST_F(ApiErrorsTest, CliRefusesRunWithoutACommand) {
  json before = cliJson(alice_, {"job", "list"});
  expectUsageError(cliAs(alice_, {"run"}), "");
  expectUsageError(cliAs(alice_, {"run", "--gpus", "1", "--"}), "");
  EXPECT_EQ(cliJson(alice_, {"job", "list"}), before) << "a refused `allot run` created a job";
}

}  // namespace
}  // namespace allot::it
