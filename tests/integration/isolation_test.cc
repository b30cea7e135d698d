// Team isolation, attacked: a member of another team walks every route of the API (as the
// server's own openapi.json lists them) with the real ids and names of team ml's objects, and
// with crafted bodies and queries naming them. Each answer must be exactly what the same request
// gets for objects that do not exist (so nothing leaks, 404 never 403), must not carry ml's data,
// and nothing of ml's may change. Then crafted placement requests must never land on ml's
// dedicated host.

#include <regex>

#include "harness.h"

namespace allot::it {
namespace {

// What the attacker never sends, so it appears in an answer only if the answer leaks it.
constexpr const char* kJobMarker = "ml-secret-arg-7f3c";
constexpr const char* kLeaseMarker = "ml-lease-reason-91b2";
constexpr const char* kProfileMarker = "ml-profile-desc-5e0d";

// ml's objects, by the names the routes' parameters take, and their nonexistent twins.
struct Ids {
  std::string team, project, host, user, job, lease, token, upgrade, profile, sshKey;
};

// An SSH key of alice's (a real ed25519 public key) and its fingerprint, URL-encoded for a path.
constexpr const char* kAliceSshKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF9kklV9X7y0UoHzbilQEwY/y2KxZ9xtoVYuz7pnfH9M alice@ml";
constexpr const char* kAliceSshKeyPath = "SHA256%3ANMrIqlWPlRXo06L5yx4MVnK8IJbiTowYwQOmwKIgZQ0";

class IsolationTest : public TestCluster {
 protected:
  void SetUp() override {
    TestCluster::SetUp();
    startAgent("ml-box", "sim:2xH100");
    startAgent("shared-box", "sim:2xA100");
    createTeam("ml");
    createTeam("other");
    alice_ = createUser("alice", "ml", "team-admin");
    mallory_ = createUser("mallory", "other");
    cli({"host", "dedicate", "ml-box", "--team", "ml"});
    cliJson(adminToken_, {"project", "create", "mlproj", "--team", "ml"});
    aliceJob_ = submit(alice_, {"--gpus", "1", "--project", "mlproj", "--name", "ml-train"},
                       {"sh", "-c", std::string("sleep 600 # ") + kJobMarker});
    EXPECT_TRUE(waitForJobState(alice_, aliceJob_, "running"));
    json lease = cliJson(alice_, {"lease", "create", "--team", "ml", "--host", "shared-box",
                                  "--start", "+30d", "--end", "+31d", "--reason", kLeaseMarker});
    leaseId_ = std::to_string(lease.at("id").get<int64_t>());
    json tokens = cliJson(alice_, {"token", "list"});
    ASSERT_FALSE(tokens.empty());
    tokenId_ = textOf(tokens[0], "id");
    ASSERT_EQ(
        httpRequest(port_, "POST", "/api/v1/ssh-keys", json{{"key", kAliceSshKey}}.dump(), alice_)
            .status,
        201);
    // A profile of team ml's own, defined by its team-admin.
    cliJson(alice_,
            {"profile", "create", "ml-nb", "--team", "ml", "--description", kProfileMarker, "--env",
             std::string("SECRET_HINT=") + kProfileMarker, "--", "jupyter-server"});
  }

  Ids real() const {
    return {"ml",     "mlproj", "ml-box", "alice", std::to_string(aliceJob_),
            leaseId_, tokenId_, "1",      "ml-nb", kAliceSshKeyPath};
  }
  static Ids missing() {
    return {"nosuchteam", "nosuchproj", "nosuchhost", "nosuchuser",    "987654",
            "987654",     "tok-987654", "987654",     "nosuchprofile", "SHA256%3Anosuchkey"};
  }

  // The route's pattern with its parameters filled from `ids` by the collection they name.
  static std::string fill(const std::string& pattern, const Ids& ids) {
    std::string out;
    std::string collection;
    size_t i = 0;
    while (i < pattern.size()) {
      if (pattern[i] != '{') {
        size_t next = pattern.find('/', i + 1);
        std::string seg =
            pattern.substr(i, next == std::string::npos ? std::string::npos : next - i);
        out += seg;
        if (seg.size() > 1 && seg[0] == '/') collection = seg.substr(1);
        i = next == std::string::npos ? pattern.size() : next;
        continue;
      }
      size_t close = pattern.find('}', i);
      std::string param = pattern.substr(i + 1, close - i - 1);
      i = close + 1;
      if (param == "team")
        out += ids.team;
      else if (param == "project")
        out += ids.project;
      else if (param == "user")
        out += ids.user;
      else if (param == "index")
        out += "0";
      else if (param == "fingerprint")
        out += ids.sshKey;
      else if (param == "name")
        out += collection == "users" ? ids.user : collection == "profiles" ? ids.profile : ids.host;
      else if (param == "id") {
        out += collection == "leases"     ? ids.lease
               : collection == "tokens"   ? ids.token
               : collection == "upgrades" ? ids.upgrade
                                          : ids.job;
      } else {
        ADD_FAILURE() << "no value for {" << param << "} in " << pattern;
      }
    }
    return out;
  }

  // A body for the route's request schema: every property that names an object gets ml's (or the
  // missing twin's) value; the rest stay out, so the request is otherwise well formed.
  static std::string bodyFor(const json& op, const Ids& ids) {
    const json* props = nullptr;
    try {
      props =
          &op.at("requestBody").at("content").at("application/json").at("schema").at("properties");
    } catch (const std::exception&) {
      return "";
    }
    json body = json::object();
    for (const auto& [key, schema] : props->items()) {
      if (key == "team" || key == "pool")
        body[key] = ids.team;
      else if (key == "teams")
        body[key] = {{ids.team, "member"}};
      else if (key == "project")
        body[key] = ids.project;
      else if (key == "user")
        body[key] = ids.user;
      else if (key == "host")
        body[key] = ids.host;
      else if (key == "hosts")
        body[key] = json::array({ids.host});
      else if (key == "command")
        body[key] = json::array({"true"});
      else if (key == "name")
        body[key] = "attacker-made";
    }
    return body.dump();
  }

  // The answer's status and error code: what a caller can tell apart.
  static std::string shape(const HttpResult& r) {
    json j = r.parsed();
    std::string code;
    if (j.is_object() && j.contains("error") && j["error"].is_object())
      code = textOf(j["error"], "code");
    return std::to_string(r.status) + " " + code;
  }

  // What ml owns, as the admin sees it; the walk must leave it exactly so.
  json mlState() {
    json jobs = json::array();
    for (const auto& j : cliJson(adminToken_, {"job", "list", "--team", "ml"}))
      jobs.push_back({j.at("id"), j.at("state"), j.value("host", json())});
    return {
        {"jobs", jobs},
        {"host", cliJson(adminToken_, {"host", "show", "ml-box"}).value("dedicated_to", json())},
        {"projects", cliJson(adminToken_, {"project", "list"})},
        {"members", cliJson(adminToken_, {"team", "members", "ml"})},
        {"leases", cliJson(adminToken_, {"lease", "list"})},
        {"tokens", cliJson(alice_, {"token", "list"})},
        {"profiles", cliJson(adminToken_, {"profile", "list"})},
        {"ssh_keys", cliJson(alice_, {"ssh-key", "list"})}};
  }

  std::string alice_, mallory_;
  int64_t aliceJob_ = 0;
  std::string leaseId_, tokenId_;
};

TEST_F(IsolationTest, AnotherTeamsMemberFindsNothingOnAnyRoute) {
  const json before = mlState();
  HttpResult spec = httpRequest(port_, "GET", "/api/v1/openapi.json");
  ASSERT_EQ(spec.status, 200);
  // Not for users: the agents' stream and join (host credentials), and public documents.
  const std::set<std::string> skip = {"/api/v1/agent/stream", "/api/v1/hosts/join",
                                      "/api/v1/openapi.json", "/healthz",
                                      "/api/v1/login",        "/api/v1/logout"};
  const std::vector<std::string> queries = {"",        "?team=T", "?project=P",
                                            "?host=H", "?user=U", "?pool=T"};
  int requests = 0;
  const json paths = spec.parsed().at("paths");
  for (const auto& [pattern, ops] : paths.items()) {
    if (skip.count(pattern)) continue;
    for (const auto& [method, op] : ops.items()) {
      // A stream of server-sent events never ends, so it cannot be compared; it carries topics
      // only, never objects (console_test.cc checks that it names none).
      const json* ok = op.at("responses").contains("200") ? &op.at("responses").at("200") : nullptr;
      if (ok && ok->contains("content") && ok->at("content").contains("text/event-stream"))
        continue;
      std::string verb = method;
      for (char& c : verb) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      for (const auto& q : queries) {
        auto withQuery = [&](const Ids& ids) {
          std::string s = q;
          s = std::regex_replace(s, std::regex("=T"), "=" + ids.team);
          s = std::regex_replace(s, std::regex("=P"), "=" + ids.project);
          s = std::regex_replace(s, std::regex("=H"), "=" + ids.host);
          s = std::regex_replace(s, std::regex("=U"), "=" + ids.user);
          return fill(pattern, ids) + s;
        };
        const std::string realTarget = withQuery(real());
        HttpResult attack = httpRequest(port_, verb, realTarget, bodyFor(op, real()), mallory_);
        HttpResult control =
            httpRequest(port_, verb, withQuery(missing()), bodyFor(op, missing()), mallory_);
        ++requests;
        const std::string what = verb + " " + realTarget + " " + bodyFor(op, real());
        // A list may legitimately differ (the attacker's own objects are the same in both);
        // what matters for lists is that ml's data is absent, checked below.
        EXPECT_EQ(shape(attack), shape(control))
            << what << "\n  real ids: " << attack.body.substr(0, 300)
            << "\n  missing ids: " << control.body.substr(0, 300);
        for (const std::string& leak :
             {std::string(kJobMarker), std::string(kLeaseMarker), std::string(kProfileMarker),
              std::string("\"ml-nb\""), std::string("ml-train"), std::string("mlproj\""),
              std::string("\"ml-box\""), std::string("\"alice\"")}) {
          EXPECT_EQ(attack.body.find(leak), std::string::npos)
              << what << " leaked " << leak << ": " << attack.body.substr(0, 400);
        }
      }
    }
  }
  EXPECT_GT(requests, 200);
  EXPECT_EQ(mlState(), before) << "the walk changed team ml's objects";
}

TEST_F(IsolationTest, CraftedConstraintsNeverPlaceWorkOnAnotherTeamsHost) {
  // ml-box has the only H100s; mallory asks for them in every way the API allows. No host open
  // to her could ever run these, so each is refused, without a word of ml-box; queued anyway,
  // none is placed there either.
  const std::vector<std::vector<std::string>> crafted = {{"--gpus", "1", "--gpu-model", "H100"},
                                                         {"--gpus", "2", "--gpu-model", "H100"},
                                                         {"--whole-host", "--gpu-model", "H100"},
                                                         {"--gpus", "1", "--hosts", "2"}};
  std::vector<int64_t> jobs;
  for (const auto& flags : crafted) {
    std::vector<std::string> args = {"run"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "sleep", "60"});
    CliResult refused = cliAs(mallory_, args);
    EXPECT_NE(refused.code, 0) << refused.describe();
    EXPECT_NE(refused.err.find("--queue-anyway"), std::string::npos) << refused.describe();
    EXPECT_EQ(refused.err.find("ml-box"), std::string::npos) << refused.describe();
    std::vector<std::string> anyway = flags;
    anyway.push_back("--queue-anyway");
    jobs.push_back(submit(mallory_, anyway, {"sleep", "60"}));
  }
  jobs.push_back(submit(mallory_, {"--gpus", "2", "--gpu-model", "H100,A100"}, {"sleep", "60"}));
  // Naming ml's team or project is refused as if they did not exist.
  for (const auto& flags : std::vector<std::vector<std::string>>{
           {"--team", "ml"}, {"--project", "mlproj"}, {"--team", "ml", "--project", "mlproj"}}) {
    CliResult r = cliAs(mallory_, [&] {
      std::vector<std::string> args = {"run"};
      args.insert(args.end(), flags.begin(), flags.end());
      args.insert(args.end(), {"--", "true"});
      return args;
    }());
    EXPECT_NE(r.code, 0) << r.describe();
    EXPECT_NE(r.err.find("no "), std::string::npos) << r.describe();
  }
  // The scheduler has had passes to place them; none is on ml-box, and no answer names it.
  ASSERT_TRUE(waitFor([&] {
    json j = job(mallory_, jobs.front());
    return textOf(j, "state") != "queued" || !textOf(j, "reason").empty();
  }));
  for (int64_t id : jobs) {
    json j = job(mallory_, id);
    EXPECT_NE(textOf(j, "host"), "ml-box") << j.dump();
    HttpResult why =
        httpRequest(port_, "GET", "/api/v1/jobs/" + std::to_string(id) + "/explain", "", mallory_);
    EXPECT_EQ(why.body.find("ml-box"), std::string::npos) << why.body;
    EXPECT_EQ(j.dump().find("ml-box"), std::string::npos) << j.dump();
  }
  // And the host list, GPU counts included, shows mallory only the shared host.
  json hosts = cliJson(mallory_, {"host", "list"});
  ASSERT_EQ(hosts.size(), 1u) << hosts.dump();
  EXPECT_EQ(textOf(hosts[0], "name"), "shared-box");
}

}  // namespace
}  // namespace allot::it
