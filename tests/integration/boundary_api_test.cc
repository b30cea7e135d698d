// The tenant boundary at the API (docs/access.md, "Threat model"), attacked over HTTP as a team
// member, a team-admin and an unauthenticated client would: no team-admin reaches another team
// through its accounts, no request crashes allotd or makes a durable write fail, and no JSON
// reader or string field can be made to. Each test here failed before the fix it names.

#include <sys/stat.h>

#include <cctype>
#include <filesystem>

#include "harness.h"

namespace allot::it {
namespace {

class ApiBoundaryTest : public TestCluster {
 protected:
  void SetUp() override {
    TestCluster::SetUp();
    createTeam("red");
    createTeam("blue");
    tom_ = createUser("tom", "red", "team-admin");
    mia_ = createUser("mia", "red");
    bob_ = createUser("bob", "blue", "team-admin");
  }

  // allotd still answers, and has not restarted (the same process).
  void expectAlive(const std::string& after) {
    ASSERT_TRUE(serverRunning()) << "allotd died after " << after;
    auto health = httpRequest(port_, "GET", "/healthz");
    ASSERT_EQ(health.status, 200) << "after " << after;
  }

  // PUT /api/v1/teams/TEAM/members/USER with `role`, as `token`.
  HttpResult putMember(const std::string& team, const std::string& user, const std::string& role,
                       const std::string& token) {
    return httpRequest(port_, "PUT", "/api/v1/teams/" + team + "/members/" + user,
                       json{{"role", role}}.dump(), token);
  }

  // Every route of the API (from its own openapi.json) as (method, path with each parameter
  // replaced by `param`).
  std::vector<std::pair<std::string, std::string>> routes(const std::string& param) {
    auto spec = httpRequest(port_, "GET", "/api/v1/openapi.json").parsed();
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [path, methods] : spec["paths"].items()) {
      std::string filled;
      for (size_t i = 0; i < path.size(); ++i) {
        if (path[i] != '{') {
          filled += path[i];
          continue;
        }
        filled += param;
        i = path.find('}', i);
      }
      for (const auto& [method, op] : methods.items()) {
        std::string m = method;
        for (auto& c : m) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        out.emplace_back(m, filled);
      }
    }
    return out;
  }

  std::string tom_, mia_, bob_;
};

// Finding 3: a team-admin of red adds blue's service account to red, then mints its token.
TEST_F(ApiBoundaryTest, ATeamAdminCannotTakeOverAnotherTeamsServiceAccount) {
  auto ci =
      httpRequest(port_, "POST", "/api/v1/users",
                  json{{"name", "ci-blue"}, {"team", "blue"}, {"kind", "service"}}.dump(), bob_);
  ASSERT_EQ(ci.status, 201) << ci.body;

  auto add = putMember("red", "ci-blue", "viewer", tom_);
  EXPECT_EQ(add.status, 404) << add.body;
  // Exactly what a name nobody has gets: the PUT tells no names.
  auto nobody = putMember("red", "no-such-user", "viewer", tom_);
  EXPECT_EQ(nobody.status, 404);
  EXPECT_EQ(add.parsed()["error"]["message"].get<std::string>(),
            nobody.parsed()["error"]["message"].get<std::string>().replace(
                std::string("no user '").size(), std::string("no-such-user").size(), "ci-blue"));
  // Nor a person of another team, whom a platform admin adds.
  EXPECT_EQ(putMember("red", "bob", "viewer", tom_).status, 404);

  auto mint = httpRequest(port_, "POST", "/api/v1/tokens", json{{"user", "ci-blue"}}.dump(), tom_);
  EXPECT_EQ(mint.status, 404) << mint.body;
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/tokens?user=ci-blue", "", tom_).status, 404);

  // An account in both teams (a platform admin's doing) acts for blue too: red's team-admin
  // alone does not hold its tokens; one who runs both teams does.
  ASSERT_EQ(putMember("red", "ci-blue", "member", adminToken_).status, 200);
  mint = httpRequest(port_, "POST", "/api/v1/tokens", json{{"user", "ci-blue"}}.dump(), tom_);
  EXPECT_EQ(mint.status, 403) << mint.body;
  ASSERT_EQ(putMember("blue", "tom", "team-admin", adminToken_).status, 200);
  mint = httpRequest(port_, "POST", "/api/v1/tokens", json{{"user", "ci-blue"}}.dump(), tom_);
  EXPECT_EQ(mint.status, 201) << mint.body;
  // The token acts with the account's rights as they are now: once it leaves blue, blue's jobs
  // are another team's to it.
  const std::string token = textOf(mint.parsed(), "token");
  ASSERT_EQ(
      httpRequest(port_, "DELETE", "/api/v1/teams/blue/members/ci-blue", "", adminToken_).status,
      200);
  auto job = httpRequest(port_, "POST", "/api/v1/jobs",
                         json{{"team", "blue"}, {"command", {"true"}}}.dump(), token);
  EXPECT_EQ(job.status, 404) << job.body;
}

// A record that is shared with another team tells a red caller only of red: a colleague's teams
// (GET /users, /users/{name}) and a platform-wide profile's visible_to list (GET /profiles,
// /profiles/{name}). A platform admin, and the user herself, see all of it.
TEST_F(ApiBoundaryTest, ARecordSharedWithAnotherTeamNamesOnlyTheCallersTeams) {
  ASSERT_EQ(putMember("blue", "mia", "viewer", adminToken_).status, 200);
  auto teamsOf = [](const json& user) {
    std::vector<std::string> out;
    for (const auto& [team, role] : user.at("teams").items()) out.push_back(team);
    return out;
  };
  const std::vector<std::string> red = {"red"}, both = {"blue", "red"};
  auto mia = httpRequest(port_, "GET", "/api/v1/users/mia", "", tom_);
  ASSERT_EQ(mia.status, 200) << mia.body;
  EXPECT_EQ(teamsOf(mia.parsed()), red) << mia.body;
  auto listed = httpRequest(port_, "GET", "/api/v1/users", "", tom_);
  ASSERT_EQ(listed.status, 200);
  EXPECT_EQ(listed.body.find("blue"), std::string::npos) << listed.body;
  EXPECT_EQ(teamsOf(httpRequest(port_, "GET", "/api/v1/users/mia", "", mia_).parsed()), both);
  EXPECT_EQ(teamsOf(httpRequest(port_, "GET", "/api/v1/users/mia", "", adminToken_).parsed()),
            both);

  auto made = httpRequest(
      port_, "POST", "/api/v1/profiles",
      json{{"name", "pair"}, {"visible_to", {"red", "blue"}}, {"command", {"sh"}}}.dump(),
      adminToken_);
  ASSERT_EQ(made.status, 201) << made.body;
  auto one = httpRequest(port_, "GET", "/api/v1/profiles/pair", "", tom_);
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(one.parsed().at("visible_to"), json(red));
  auto all = httpRequest(port_, "GET", "/api/v1/profiles", "", tom_);
  ASSERT_EQ(all.status, 200);
  EXPECT_EQ(all.body.find("blue"), std::string::npos) << all.body;
  auto admins = httpRequest(port_, "GET", "/api/v1/profiles/pair", "", adminToken_).parsed();
  EXPECT_EQ(admins.at("visible_to").size(), 2u);
}

// The class: every route that takes a user name answers a team-admin (and a member) exactly as
// for a name nobody has when the user is of another team, and changes nothing.
TEST_F(ApiBoundaryTest, NoRouteThatNamesAUserTellsOfAnotherTeamsUsers) {
  const std::string key =
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHvUyjyXTk7k7p0nBq9b7XJk2qJr0VhKq3x0aQm6X5pA x";
  struct Call {
    std::string method, path, body;
  };
  auto calls = [&](const std::string& u) {
    return std::vector<Call>{
        {"PUT", "/api/v1/teams/red/members/" + u, json{{"role", "viewer"}}.dump()},
        {"DELETE", "/api/v1/teams/red/members/" + u, ""},
        {"GET", "/api/v1/users/" + u, ""},
        {"PATCH", "/api/v1/users/" + u, json{{"disabled", true}}.dump()},
        {"PUT", "/api/v1/users/" + u + "/password",
         json{{"password", "a long enough password 1"}}.dump()},
        {"POST", "/api/v1/tokens", json{{"user", u}}.dump()},
        {"GET", "/api/v1/tokens?user=" + u, ""},
        {"GET", "/api/v1/ssh-keys?user=" + u, ""},
        {"POST", "/api/v1/ssh-keys?user=" + u, json{{"key", key}}.dump()},
    };
  };
  const auto real = calls("bob"), none = calls("no-such-user");
  for (const std::string* caller : {&tom_, &mia_}) {
    for (size_t i = 0; i < real.size(); ++i) {
      auto a = httpRequest(port_, real[i].method, real[i].path, real[i].body, *caller);
      auto b = httpRequest(port_, none[i].method, none[i].path, none[i].body, *caller);
      EXPECT_EQ(a.status, b.status) << real[i].method << " " << real[i].path << ": " << a.body;
      std::string expected = b.body;
      for (size_t at; (at = expected.find("no-such-user")) != std::string::npos;)
        expected.replace(at, std::string("no-such-user").size(), "bob");
      EXPECT_EQ(a.body, expected) << real[i].method << " " << real[i].path;
      EXPECT_GE(a.status, 400) << real[i].method << " " << real[i].path << ": " << a.body;
    }
  }
  // bob is as he was.
  json bob = httpRequest(port_, "GET", "/api/v1/users/bob", "", adminToken_).parsed();
  EXPECT_EQ(bob["teams"], (json{{"blue", "team-admin"}})) << bob.dump();
  EXPECT_EQ(bob.value("disabled", false), false);
}

// Issue 18, finding 4: after a password reset, what the old password's logins minted kept
// working for 30 days. It ends with the password; named tokens stay; a user changing their own
// password keeps the session they changed it from.
TEST_F(ApiBoundaryTest, APasswordChangeEndsWhatTheOldPasswordLoggedIn) {
  const std::string first = "correct horse battery staple", second = "another long passphrase 2";
  ASSERT_EQ(
      httpRequest(port_, "POST", "/api/v1/users",
                  json{{"name", "dora"}, {"team", "red"}, {"password", first}}.dump(), adminToken_)
          .status,
      201);
  auto login = [&](const std::string& password, bool session) {
    return httpRequest(port_, "POST", "/api/v1/login",
                       json{{"user", "dora"}, {"password", password}, {"session", session}}.dump());
  };
  auto cookieOf = [](const HttpResult& r) {
    const std::string c = r.headers.at("set-cookie");
    return c.substr(0, c.find(';'));
  };
  auto whoami = [&](const std::string& token, const std::string& cookie = "") {
    return httpRequest(port_, "GET", "/api/v1/whoami", "", token,
                       cookie.empty() ? std::map<std::string, std::string>{}
                                      : std::map<std::string, std::string>{{"Cookie", cookie}})
        .status;
  };
  const std::string loginToken = textOf(login(first, false).parsed(), "token");
  const std::string cookie = cookieOf(login(first, true));
  auto named =
      httpRequest(port_, "POST", "/api/v1/tokens", json{{"name", "ci"}}.dump(), loginToken);
  ASSERT_EQ(named.status, 201) << named.body;
  const std::string namedToken = textOf(named.parsed(), "token");
  ASSERT_EQ(whoami(loginToken), 200);
  ASSERT_EQ(whoami("", cookie), 200);

  // An admin resets it: the login token and the console session end, the named token stays.
  ASSERT_EQ(httpRequest(port_, "PUT", "/api/v1/users/dora/password",
                        json{{"password", second}}.dump(), adminToken_)
                .status,
            200);
  EXPECT_EQ(whoami(loginToken), 401);
  EXPECT_EQ(whoami("", cookie), 401);
  EXPECT_EQ(whoami(namedToken), 200);

  // Dora changes it herself from one console session: that one stays, her others end.
  const std::string mine = cookieOf(login(second, true));
  const std::string other = textOf(login(second, false).parsed(), "token");
  auto csrf = httpRequest(port_, "GET", "/api/v1/whoami", "", "", {{"Cookie", mine}}).parsed();
  auto changed = httpRequest(port_, "PUT", "/api/v1/users/dora/password",
                             json{{"password", first}, {"current_password", second}}.dump(), "",
                             {{"Cookie", mine}, {"X-CSRF-Token", textOf(csrf, "csrf_token")}});
  ASSERT_EQ(changed.status, 200) << changed.body;
  EXPECT_EQ(whoami("", mine), 200);
  EXPECT_EQ(whoami(other), 401);
}

// Issue 18, finding 7: the data directory and database were made with the umask (0644: job
// environments and token hashes readable by every user of allotd's machine).
TEST_F(ApiBoundaryTest, AllotdsDataIsItsOwnAlone) {
  struct stat st {};
  ASSERT_EQ(::stat(path("data").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u) << std::oct << st.st_mode;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(path("data"))) {
    ASSERT_EQ(::lstat(entry.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 077, 0u) << entry.path() << " " << std::oct << st.st_mode;
  }
}

// A team's registry login (docs/environments.md, "Registry credentials"): another team's
// team-admin is told nothing of it, a member may not set or remove it, nobody unauthenticated
// reaches it, and no answer ever carries the password.
TEST_F(ApiBoundaryTest, ATeamsRegistryLoginIsItsOwnAndItsPasswordNeverComesBack) {
  const std::string login = "/api/v1/teams/blue/registry-logins/registry.example.com";
  const std::string body = json{{"username", "blue-puller"}, {"password", "blue-secret"}}.dump();
  EXPECT_EQ(httpRequest(port_, "PUT", login, body).status, 401);
  EXPECT_EQ(httpRequest(port_, "PUT", login, body, tom_).status, 404);  // red's team-admin
  auto set = httpRequest(port_, "PUT", login, body, bob_);
  ASSERT_EQ(set.status, 200) << set.body;
  EXPECT_EQ(set.body.find("blue-secret"), std::string::npos);
  for (const std::string* other : {&tom_, &mia_}) {
    EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/teams/blue/registry-logins", "", *other).status,
              404);
    EXPECT_EQ(httpRequest(port_, "DELETE", login, "", *other).status, 404);
    EXPECT_EQ(httpRequest(port_, "PUT", "/api/v1/teams/blue/default-image",
                          json{{"image", "registry.example.com/x:1"}}.dump(), *other)
                  .status,
              404);
  }
  // Red's member may read red's logins (registry and username), not set them.
  auto redLogin = "/api/v1/teams/red/registry-logins/registry.example.com";
  EXPECT_EQ(httpRequest(port_, "PUT", redLogin, body, mia_).status, 403);
  ASSERT_EQ(httpRequest(port_, "PUT", redLogin, body, tom_).status, 200);
  auto listed = httpRequest(port_, "GET", "/api/v1/teams/red/registry-logins", "", mia_);
  EXPECT_EQ(listed.status, 200);
  EXPECT_NE(listed.body.find("blue-puller"), std::string::npos);
  EXPECT_EQ(listed.body.find("blue-secret"), std::string::npos);
  for (const std::string path : {"/api/v1/teams", "/api/v1/audit", "/api/v1/audit?limit=1000"}) {
    auto shown = httpRequest(port_, "GET", path, "", adminToken_);
    EXPECT_EQ(shown.body.find("blue-secret"), std::string::npos) << path;
  }
  EXPECT_EQ(httpRequest(port_, "DELETE", redLogin, "", mia_).status, 403);
}

// Finding 4: one unauthenticated request with deeply nested JSON overflowed the stack.
TEST_F(ApiBoundaryTest, DeeplyNestedJsonIsRefusedBeforeAnyoneIsAuthenticated) {
  const std::string deep(100'000, '[');
  auto login = httpRequest(port_, "POST", "/api/v1/login", deep);
  EXPECT_EQ(login.status, 400) << login.body;
  EXPECT_EQ(login.parsed()["error"].value("field", ""), "body") << login.body;
  expectAlive("a deep login body");
  // The same nesting inside a valid-looking object.
  auto inner =
      httpRequest(port_, "POST", "/api/v1/login", "{\"user\":" + std::string(50'000, '[') + "}");
  EXPECT_EQ(inner.status, 400);
  expectAlive("a deep field");
}

// The class: every route that reads a body, with a deep and a huge one, as an admin (who gets
// furthest) and with no credential.
TEST_F(ApiBoundaryTest, NoRouteFallsOverOnDeepOrHugeBodies) {
  const std::string deep = "{\"a\":" + std::string(200'000, '[') + "}";
  const std::string huge = "{\"name\":\"" + std::string(2 << 20, 'x') + "\"}";
  const std::string nearLimit = "{\"name\":\"" + std::string((1 << 20) - 100, 'x') + "\"}";
  int tried = 0;
  for (const auto& [method, path] : routes("1")) {
    // Logging out would end the admin's token, which the rest of the loop needs.
    if (method == "GET" || method == "HEAD" || path == "/api/v1/logout") continue;
    for (const std::string& token : {adminToken_, std::string()}) {
      for (const std::string* body : {&deep, &huge, &nearLimit}) {
        auto r = httpRequest(port_, method, path, *body, token);
        EXPECT_LT(r.status, 500) << method << " " << path << ": " << r.body.substr(0, 300);
        ++tried;
      }
    }
  }
  EXPECT_GT(tried, 100);
  expectAlive("deep and huge bodies on every route");
}

// Finding 5: a command of 32 two-byte characters made a job name cut inside a character, which
// the store could not encode: allotd aborted on the commit.
// Issue 18, finding 1 (its first part): a few jobs of ~1 MB of environment each filled a host's
// desired state. A job's command and environment are each capped at 256 KiB.
TEST_F(ApiBoundaryTest, AJobsCommandAndEnvironmentAreCapped) {
  auto submit = [&](const json& body) {
    return httpRequest(port_, "POST", "/api/v1/jobs", body.dump(), mia_);
  };
  auto env = submit(
      {{"team", "red"}, {"command", {"true"}}, {"env", {{"PAD", std::string(300 << 10, 'x')}}}});
  EXPECT_EQ(env.status, 400) << env.body.substr(0, 200);
  EXPECT_EQ(env.parsed()["error"].value("field", ""), "env");
  auto command = submit({{"team", "red"}, {"command", {"echo", std::string(300 << 10, 'x')}}});
  EXPECT_EQ(command.status, 400) << command.body.substr(0, 200);
  EXPECT_EQ(command.parsed()["error"].value("field", ""), "command");
  auto jobs = httpRequest(port_, "GET", "/api/v1/jobs", "", adminToken_).parsed();
  EXPECT_TRUE(jobs.is_array() && jobs.empty()) << jobs.dump().substr(0, 200);
  // Under the cap is fine.
  auto fits = submit(
      {{"team", "red"}, {"command", {"true"}}, {"env", {{"PAD", std::string(200 << 10, 'x')}}}});
  EXPECT_EQ(fits.status, 201) << fits.body.substr(0, 200);
}

TEST_F(ApiBoundaryTest, ANameCutFromACommandStaysUtf8AndTheJobIsDurable) {
  std::string command = "/opt/";
  for (int i = 0; i < 32; ++i) command += "\xC3\xA9";  // é
  auto r = httpRequest(port_, "POST", "/api/v1/jobs",
                       json{{"team", "red"}, {"command", {command}}}.dump(), mia_);
  ASSERT_EQ(r.status, 201) << r.body;
  const int64_t id = r.parsed()["id"].get<int64_t>();
  const std::string name = textOf(r.parsed(), "name");
  EXPECT_LE(name.size(), 63u);
  EXPECT_EQ(name.rfind("\xC3\xA9", 0), 0u) << name;
  EXPECT_EQ(name.size() % 2, 0u) << "cut inside a character";
  expectAlive("a job named by a cut command");
  restartServer();  // acknowledged means durable
  auto again = httpRequest(port_, "GET", "/api/v1/jobs/" + std::to_string(id), "", mia_);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(textOf(again.parsed(), "name"), name);
}

// The class: strings that are not UTF-8, or are cut inside a character, in bodies, path
// parameters and queries, are refused with a 4xx naming where they were; nothing is stored.
TEST_F(ApiBoundaryTest, StringsThatAreNotUtf8AreRefusedEverywhere) {
  // In a body: the JSON reader refuses it.
  const std::string cut = "{\"team\":\"red\",\"command\":[\"/opt/\xC3\"]}";
  auto body = httpRequest(port_, "POST", "/api/v1/jobs", cut, mia_);
  EXPECT_EQ(body.status, 400) << body.body;
  EXPECT_EQ(body.parsed()["error"].value("field", ""), "body");
  // In a path parameter and in a query, on every route.
  int tried = 0;
  for (const auto& [method, path] : routes("%C3")) {
    if (path.find("%C3") == std::string::npos) continue;
    auto r = httpRequest(port_, method, path, method == "GET" ? "" : "{}", adminToken_);
    EXPECT_EQ(r.status, 400) << method << " " << path << ": " << r.body;
    // Named as not UTF-8, or (the SSH relay, which reads its id itself) as not an id.
    EXPECT_FALSE(r.parsed()["error"].value("field", "").empty()) << r.body;
    ++tried;
  }
  EXPECT_GT(tried, 30);
  auto query = httpRequest(port_, "GET", "/api/v1/jobs?team=%FF%FE", "", adminToken_);
  EXPECT_EQ(query.status, 400) << query.body;
  EXPECT_EQ(query.parsed()["error"].value("field", ""), "team");
  // Nothing was stored: the job list holds no job at all.
  auto jobs = httpRequest(port_, "GET", "/api/v1/jobs", "", adminToken_).parsed();
  EXPECT_TRUE(jobs.is_array() && jobs.empty()) << jobs.dump();
  expectAlive("strings that are not UTF-8");
}

}  // namespace
}  // namespace allot::it
