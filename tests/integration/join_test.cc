// Join tokens with real agents: single use by default, limited uses, revoked, listed without
// their secret; a join under an existing host's name is refused until an admin resets that
// host's credential, which also cuts off the agent holding it.

#include "harness.h"

namespace allot::it {
namespace {

class JoinTest : public TestCluster {
 protected:
  // A join token made through the CLI; `uses` 0 leaves the flag out (the default, one).
  std::string makeToken(int uses = 0) {
    std::vector<std::string> args = {"host", "join-token"};
    if (uses > 0) args.insert(args.end(), {"--uses", std::to_string(uses)});
    return textOf(cliJson(adminToken_, args), "token");
  }
  // An allot-agent joining as `name` with `token`, in a work dir of its own (`dir`).
  std::unique_ptr<Process> spawnJoining(const std::string& name, const std::string& token,
                                        const std::string& dir) {
    return Process::spawn({binPath("allot-agent"), "--server", url_, "--name", name, "--gpus",
                           "sim:1xA100", "--work-dir", path("agents/" + dir), "--cgroup-name",
                           cgroupName(dir), "--join-token", token, "--run-as-owner", "off"},
                          path("proc/" + dir + ".out"), path("proc/" + dir + ".err"), childEnv({}));
  }
  // Waits for the agent to give up; its exit code (throws if it keeps running).
  int refused(Process& agent) {
    auto code = agent.waitFor(kTimeout);
    if (!code) throw std::runtime_error(agent.name() + " kept running");
    return *code;
  }
  // The host's connection state, "" while it is not listed.
  std::string stateOf(const std::string& name) {
    for (const auto& h : cliJson(adminToken_, {"host", "list"}))
      if (textOf(h, "name") == name) return textOf(h, "state");
    return "";
  }
  bool hostListed(const std::string& name) { return !stateOf(name).empty(); }
  bool becomes(const std::string& name, const std::string& state) {
    return waitFor([&] { return stateOf(name) == state; });
  }
};

TEST_F(JoinTest, ASingleUseTokenAdmitsOneHost) {
  const std::string token = makeToken();
  auto first = spawnJoining("node-b", token, "b");
  ASSERT_TRUE(becomes("node-b", "online")) << first->stderrText();
  auto second = spawnJoining("node-c", token, "c");
  EXPECT_NE(refused(*second), 0);
  EXPECT_NE(second->stderrText().find("used up"), std::string::npos) << second->stderrText();
  EXPECT_FALSE(hostListed("node-c"));

  auto tokens = cliJson(adminToken_, {"host", "join-tokens"});
  ASSERT_EQ(tokens.size(), 1u);
  EXPECT_EQ(tokens[0].value("uses_left", -1), 0);
  EXPECT_EQ(textOf(tokens[0], "state"), "used");
  EXPECT_EQ(tokens.dump().find(token.substr(token.find('_') + 1)), std::string::npos)
      << "the secret is never listed";
}

TEST_F(JoinTest, UsesAreCountedAcrossARestart) {
  const std::string token = makeToken(2);
  auto b = spawnJoining("node-b", token, "b");
  ASSERT_TRUE(becomes("node-b", "online")) << b->stderrText();
  restartServer();  // kill -9: only what was committed survives
  auto c = spawnJoining("node-c", token, "c");
  ASSERT_TRUE(becomes("node-c", "online")) << c->stderrText();
  auto d = spawnJoining("node-d", token, "d");
  EXPECT_NE(refused(*d), 0);
  EXPECT_FALSE(hostListed("node-d"));
}

TEST_F(JoinTest, ARevokedTokenAdmitsNoOne) {
  auto made = cliJson(adminToken_, {"host", "join-token", "--uses", "5"});
  auto revoke = cli({"host", "revoke-join-token", textOf(made, "id")});
  ASSERT_EQ(revoke.code, 0) << revoke.describe();
  auto agent = spawnJoining("node-b", textOf(made, "token"), "b");
  EXPECT_NE(refused(*agent), 0);
  EXPECT_NE(agent->stderrText().find("revoked"), std::string::npos) << agent->stderrText();
  // Members may not see or revoke join tokens.
  createTeam("ml");
  auto member = cliAs(createUser("carol", "ml"), {"host", "join-tokens"});
  EXPECT_EQ(member.code, 1) << member.describe();
}

TEST_F(JoinTest, ATakeoverNeedsAnAdminsReset) {
  startAgent("node-a", "sim:1xA100");
  // A reinstalled machine (new work dir, no credential) under the same name is refused...
  auto impostor = spawnJoining("node-a", makeToken(), "a2");
  EXPECT_NE(refused(*impostor), 0);
  EXPECT_NE(impostor->stderrText().find("already joined"), std::string::npos)
      << impostor->stderrText();
  EXPECT_EQ(textOf(host("node-a"), "state"), "online");

  // ...until an admin resets the host's credential: its old agent is cut off,
  auto reset = cli({"host", "reset-credential", "node-a"});
  ASSERT_EQ(reset.code, 0) << reset.describe();
  EXPECT_TRUE(becomes("node-a", "unreachable"));
  // and the reinstalled machine takes the name over, once.
  auto reinstalled = spawnJoining("node-a", makeToken(), "a3");
  EXPECT_TRUE(becomes("node-a", "online")) << reinstalled->stderrText();
  auto again = spawnJoining("node-a", makeToken(), "a4");
  EXPECT_NE(refused(*again), 0);
}

TEST_F(JoinTest, AHostCredentialCannotCallTheUserApi) {
  startAgent("node-a", "sim:1xA100");
  auto saved = json::parse(readFile(path("agents/node-a/credential.json")));
  const std::string credential = textOf(saved, "token");
  ASSERT_FALSE(credential.empty());
  for (auto [method, target] : {std::pair{"GET", "/api/v1/jobs"},
                                {"GET", "/api/v1/hosts"},
                                {"POST", "/api/v1/hosts/join-tokens"},
                                {"POST", "/api/v1/hosts/node-a/reset-credential"}}) {
    auto r = httpRequest(port_, method, target, "{}", credential);
    EXPECT_EQ(r.status, 403) << method << " " << target << ": " << r.body;
  }
  EXPECT_TRUE(cliJson(adminToken_, {"host", "join-tokens"}).size() == 1u);  // the harness's
  EXPECT_EQ(textOf(host("node-a"), "state"), "online");
}

}  // namespace
}  // namespace allot::it
