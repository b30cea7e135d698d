// A team-admin onboards a new hire where the platform lets them ([access]
// team_admins_create_users = true, docs/access.md), through the CLI, and cannot use that to reach
// beyond the team: no other team, no platform admin, no chosen Unix identity.

#include "harness.h"

namespace allot::it {
namespace {

class OnboardingTest : public TestCluster {
 protected:
  std::vector<std::string> serverFlags() const override {
    writeFile(path("allotd.toml"), "[access]\nteam_admins_create_users = true\n");
    return {"--heartbeat", "1s", "--config", path("allotd.toml")};
  }
};

TEST_F(OnboardingTest, ATeamAdminCreatesAPersonInTheirTeamAndNothingBeyondIt) {
  startAgent("gpu-a", "sim:1xA100");
  createTeam("ml");
  createTeam("cv");
  const std::string lead = createUser("lead", "ml", "team-admin");
  const std::string member = createUser("carol", "ml");

  json hire = cliJson(lead, {"user", "create", "newhire", "--team", "ml"});
  ASSERT_TRUE(hire["token"].is_string()) << hire.dump();
  json who = cliJson(hire["token"].get<std::string>(), {"whoami"});
  EXPECT_EQ(textOf(who, "name"), "newhire") << who.dump();
  // The new hire works at once: a job in the team.
  const std::string hireToken = hire["token"];
  const int64_t first = submit(hireToken, {"--gpus", "1"}, {"true"});
  EXPECT_TRUE(waitForJobState(hireToken, first, "succeeded"));
  EXPECT_EQ(textOf(job(hireToken, first), "team"), "ml");
  json shown = cliJson(adminToken_, {"user", "show", "newhire"});
  EXPECT_EQ(textOf(shown, "created_by"), "lead") << shown.dump();

  // Beyond the team: another team is not there for them, the rest is refused, nothing made.
  auto other = cliAs(lead, {"user", "create", "spy", "--team", "cv"});
  EXPECT_NE(other.code, 0) << other.describe();
  EXPECT_NE(other.err.find("cv"), std::string::npos) << other.err;
  auto boss = httpRequest(port_, "POST", "/api/v1/users",
                          json({{"name", "boss"}, {"platform_admin", true}}).dump(), lead);
  EXPECT_EQ(boss.status, 403) << boss.body;
  auto rooty =
      httpRequest(port_, "POST", "/api/v1/users",
                  json({{"name", "rooty"}, {"team", "ml"}, {"uid", 0}, {"gid", 0}}).dump(), lead);
  // No one picks a uid through the API: the platform hands them out (docs/access.md).
  EXPECT_EQ(rooty.status, 400) << rooty.body;
  auto byMember = cliAs(member, {"user", "create", "friend", "--team", "ml"});
  EXPECT_NE(byMember.code, 0) << byMember.describe();
  for (const char* refused : {"spy", "boss", "rooty", "friend"})
    EXPECT_EQ(
        httpRequest(port_, "GET", std::string("/api/v1/users/") + refused, "", adminToken_).status,
        404)
        << refused;
}

// Without the setting (the default), team-admins make service accounts only, and the refusal
// says how a platform admin lets them do more.
class OnboardingOffTest : public TestCluster {};

TEST_F(OnboardingOffTest, WithoutTheSettingATeamAdminIsToldWhoMayCreatePeople) {
  createTeam("ml");
  const std::string lead = createUser("lead", "ml", "team-admin");
  auto r = cliAs(lead, {"user", "create", "newhire", "--team", "ml"});
  EXPECT_NE(r.code, 0) << r.describe();
  EXPECT_NE(r.err.find("team_admins_create_users"), std::string::npos) << r.err;
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/users/newhire", "", adminToken_).status, 404);
}

// With a directory, people come from it: allotd refuses to start with both, naming the setting.
TEST_F(OnboardingOffTest, TheSettingIsRefusedTogetherWithADirectory) {
  writeFile(path("both.toml"),
            "[access]\nteam_admins_create_users = true\n"
            "[ldap]\nurl = \"ldap://127.0.0.1:1\"\nbind_dn = \"cn=admin,dc=example,dc=org\"\n"
            "bind_password = \"x\"\nuser_base = \"ou=people,dc=example,dc=org\"\n");
  auto p = Process::spawn({binPath("allotd"), "--listen", "127.0.0.1:0", "--data-dir",
                           path("data-both"), "--config", path("both.toml")},
                          path("both.out"), path("both.err"), childEnv({}));
  auto code = p->waitFor(kTimeout);
  ASSERT_TRUE(code.has_value()) << "allotd started anyway";
  EXPECT_NE(*code, 0);
  EXPECT_NE(p->stderrText().find("team_admins_create_users cannot be true with [ldap]"),
            std::string::npos)
      << p->stderrText();
}

}  // namespace
}  // namespace allot::it
