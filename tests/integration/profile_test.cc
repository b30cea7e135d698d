// Session profiles with real processes, through the CLI and raw HTTP: the default jupyter profile
// is there from the first start; a platform-wide profile is seen only by the teams in its
// visible_to; a team's profile only by that team; members cannot define profiles and team-admins
// only for their own team; bad input is a 400 naming the field; profiles survive a restart.

#include <set>

#include "harness.h"

namespace allot::it {
namespace {

class ProfileTest : public TestCluster {
 protected:
  std::vector<std::string> names(const std::string& token) {
    std::vector<std::string> out;
    for (const auto& p : cliJson(token, {"profile", "list"})) out.push_back(textOf(p, "name"));
    return out;
  }
  HttpResult post(const json& body, const std::string& token) {
    return httpRequest(port_, "POST", "/api/v1/profiles", body.dump(), token);
  }
  // The field a refused request names.
  static std::string badField(const HttpResult& r) {
    json j = r.parsed();
    if (!j.is_object() || !j.contains("error")) return "";
    return textOf(j["error"], "field");
  }
};

TEST_F(ProfileTest, VisibilityRightsValidationAndRestart) {
  createTeam("ml");
  createTeam("cv");
  const std::string mlAdmin = createUser("carol", "ml", "team-admin");
  const std::string mlMember = createUser("alice", "ml");
  const std::string cvMember = createUser("bob", "cv");

  // The default profile, from the first start.
  json jupyter = cliJson(adminToken_, {"profile", "show", "jupyter"});
  EXPECT_EQ(jupyter.at("command"), json::array({"jupyter-server"}));
  EXPECT_TRUE(jupyter.at("team").is_null());
  EXPECT_EQ(jupyter.at("storage"), json::array({"scratch", "local"}));

  // Platform-wide, for ml only.
  json made = cliJson(adminToken_, {"profile",
                                    "create",
                                    "ml-torch",
                                    "--visible-to",
                                    "ml",
                                    "--gpus",
                                    "1",
                                    "--max-gpus",
                                    "4",
                                    "--memory",
                                    "16Gi",
                                    "--storage",
                                    "scratch,local",
                                    "--idle-threshold",
                                    "5",
                                    "--idle-after",
                                    "30m",
                                    "--max-lifetime",
                                    "12h",
                                    "--env",
                                    "VENV=/opt/torch",
                                    "--",
                                    "/opt/torch/bin/jupyter-server"});
  EXPECT_EQ(made.at("defaults").at("memory_mib"), 16384);
  EXPECT_EQ(made.at("max_lifetime"), "12h");
  EXPECT_EQ(made.at("created_by"), "admin");
  EXPECT_EQ(names(mlMember), (std::vector<std::string>{"jupyter", "ml-torch"}));
  EXPECT_EQ(names(cvMember), (std::vector<std::string>{"jupyter"}));
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/profiles/ml-torch", "", cvMember).status, 404);

  // A team's own: its team-admin may define it, for that team only; members may not at all.
  CliResult byMember = cliAs(mlMember, {"profile", "create", "x", "--team", "ml", "--", "sh"});
  EXPECT_NE(byMember.code, 0) << byMember.describe();
  EXPECT_EQ(post({{"name", "x"}, {"team", "ml"}, {"command", {"sh"}}}, mlMember).status, 403);
  EXPECT_EQ(post({{"name", "x"}, {"command", {"sh"}}}, mlAdmin).status, 403);
  EXPECT_EQ(post({{"name", "x"}, {"team", "cv"}, {"command", {"sh"}}}, mlAdmin).status, 404);
  cliJson(mlAdmin, {"profile", "create", "ml-nb", "--team", "ml", "--description", "notebooks",
                    "--", "jupyter-server"});
  EXPECT_EQ(names(mlMember), (std::vector<std::string>{"jupyter", "ml-nb", "ml-torch"}));
  EXPECT_EQ(names(cvMember), (std::vector<std::string>{"jupyter"}));
  // Another team's profile is not there for cv: not to read, replace or delete.
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/profiles/ml-nb", "", cvMember).status, 404);
  EXPECT_EQ(httpRequest(port_, "PUT", "/api/v1/profiles/ml-nb",
                        json{{"team", "cv"}, {"command", {"sh"}}}.dump(), cvMember)
                .status,
            404);
  EXPECT_EQ(httpRequest(port_, "DELETE", "/api/v1/profiles/ml-nb", "", cvMember).status, 404);
  CliResult cvDelete = cliAs(cvMember, {"profile", "delete", "ml-nb"});
  EXPECT_NE(cvDelete.code, 0);
  EXPECT_NE(cvDelete.err.find("no profile"), std::string::npos) << cvDelete.describe();
  // ml's team-admin replaces its profile whole.
  HttpResult put = httpRequest(
      port_, "PUT", "/api/v1/profiles/ml-nb",
      json{{"team", "ml"}, {"command", {"jupyter-lab"}}, {"storage", {"local"}}}.dump(), mlAdmin);
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(put.parsed().at("storage"), json::array({"local"}));
  EXPECT_EQ(put.parsed().at("description"), "");

  // Bad input: a 400 naming the field.
  const json base = {{"name", "bad"}, {"command", {"sh"}}};
  auto withField = [&](json patch) {
    json b = base;
    b.merge_patch(patch);
    return b;
  };
  for (const auto& [patch, field] : std::vector<std::pair<json, std::string>>{
           {{{"defaults", {{"gpus", 4}}}, {"maxima", {{"gpus", 2}}}}, "defaults.gpus"},
           {{{"storage", {"scratch", "nfs"}}}, "storage"},
           {{{"idle", {{"after", "soon"}}}}, "idle.after"},
           {{{"max_lifetime", "forever"}}, "max_lifetime"},
           {{{"visible_to", {"nosuchteam"}}}, "visible_to"},
           {{{"command", json::array()}}, "command"},
           {{{"defaults", {{"gpus", "two"}}}}, "defaults.gpus"},
           {{{"name", "Bad Name"}}, "name"}}) {
    HttpResult r = post(withField(patch), adminToken_);
    EXPECT_EQ(r.status, 400) << patch.dump() << " " << r.body;
    EXPECT_EQ(badField(r), field) << patch.dump() << " " << r.body;
  }
  CliResult badStorage =
      cliAs(adminToken_, {"profile", "create", "bad", "--storage", "tape", "--", "sh"});
  EXPECT_NE(badStorage.code, 0);
  EXPECT_NE(badStorage.err.find("storage"), std::string::npos) << badStorage.describe();

  // Changes are audited like every other: the creation and the replacement, each once.
  HttpResult audit =
      httpRequest(port_, "GET", "/api/v1/audit?object=profile:ml-nb&limit=100", "", adminToken_);
  ASSERT_EQ(audit.status, 200) << audit.body;
  std::multiset<std::string> actions;
  for (const auto& e : audit.parsed()) actions.insert(textOf(e, "action"));
  EXPECT_EQ(actions,
            (std::multiset<std::string>{"POST /api/v1/profiles", "PUT /api/v1/profiles/{name}"}))
      << audit.body;

  // Durable: every profile as it was after allotd is killed and started again.
  const json before = cliJson(adminToken_, {"profile", "list"});
  restartServer();
  EXPECT_EQ(cliJson(adminToken_, {"profile", "list"}), before);
  EXPECT_EQ(names(cvMember), (std::vector<std::string>{"jupyter"}));

  // Deleting: the team-admin its own; it is gone after a restart too.
  ASSERT_EQ(cliAs(mlAdmin, {"profile", "delete", "ml-nb"}).code, 0);
  restartServer();
  EXPECT_EQ(names(mlMember), (std::vector<std::string>{"jupyter", "ml-torch"}));
}

}  // namespace
}  // namespace allot::it
