// SSH into sessions (docs/sessions.md, "SSH") with real OpenSSH: `allot ssh` runs the system's
// ssh, whose ProxyCommand (`allot ssh --stdio`) carries the connection through allotd and the
// agent's tunnel to an `sshd -i` the agent starts in the session; the host key is pinned from
// what the agent reported. Only the owner gets in, only with a registered key, and an open
// connection keeps the session from being culled.

#include <filesystem>
#include <thread>

#include "harness.h"
#include "tenants.h"

namespace allot::it {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class SessionSshTest : public RedAndBlueCluster {
 protected:
  void SetUp() override {
    for (const char* program : {"/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen"}) {
      if (!fs::exists(program))
        GTEST_SKIP() << program << " is not installed (scripts/install-deps.sh)";
    }
    TestCluster::SetUp();
    createRedAndBlue();
    aliceKey_ = makeKey("alice");
    auto added = cliAs(alice_, {"ssh-key", "add", aliceKey_ + ".pub"});
    ASSERT_EQ(added.code, 0) << added.describe();
  }

  // Sessions here run as root, and sshd starts a command through root's login shell, which reads
  // root's ~/.bashrc (Debian's bash does for a command from sshd): the machine's own dotfiles,
  // which may hang (a pyenv rehash lock left by a killed shell kept every login waiting 60 s). The
  // agent, and so every session, sees an empty home of the test's own over /root, in a mount
  // namespace of its own: the host's /root is never touched.
  std::vector<std::string> agentWrapper() const override {
    return inOwnMountNamespace("mkdir -p \"$0\" && mount --bind \"$0\" /root", path("root-home"));
  }

  // A fresh ed25519 key pair in the test's directory; the private key's path.
  std::string makeKey(const std::string& name) {
    const std::string key = path(name + "_ed25519");
    auto p = Process::spawn({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key},
                            key + ".log", key + ".log", childEnv({}));
    EXPECT_EQ(p->wait(), 0) << readFile(key + ".log");
    return key;
  }

  // A session of the shell profile (a plain command, no GPU), running and offering SSH.
  json startShellSession(const std::string& name, const std::string& idleAfter = "30m") {
    cli({"profile", "create", "shell-" + name, "--team", "red", "--gpus", "0", "--idle-after",
         idleAfter, "--", "sleep", "infinity"});
    json s = cliJson(alice_, {"session", "create", "--profile", "shell-" + name, "--name", name});
    const std::string id = std::to_string(s["id"].get<int64_t>());
    EXPECT_TRUE(waitFor([&] {
      s = cliJson(alice_, {"session", "show", id});
      return textOf(s, "state") == "running" && s["ssh"].is_object();
    })) << s.dump();
    return s;
  }

  // `allot ssh` as `token`'s user with alice's key (or `key`).
  CliResult ssh(const std::string& token, const std::string& session,
                const std::vector<std::string>& command, const std::string& key = "") {
    std::vector<std::string> args = {"ssh", session, "-i", key.empty() ? aliceKey_ : key, "--"};
    args.insert(args.end(), command.begin(), command.end());
    return cliAs(token, args);
  }

  // alice's `allot ssh` into session `id` running `sleep SECONDS`, once the session counts its
  // connection; throws when it never does.
  std::unique_ptr<Process> holdConnection(const std::string& id, const std::string& seconds) {
    auto held = Process::spawn({binPath("allot"), "--server", url_, "--token", alice_, "ssh", id,
                                "-i", aliceKey_, "--", "sleep", seconds},
                               path("held.out"), path("held.err"),
                               childEnv({"ALLOT_CONFIG=" + path("cli/no-config.json")}));
    if (!waitFor([&] {
          return cliJson(alice_, {"session", "show", id}).value("connections", 0) == 1;
        }))
      throw std::runtime_error("the session never counted the connection: " + held->stderrText());
    return held;
  }

  std::string aliceKey_;
};

TEST_F(SessionSshTest, AllotSshRunsACommandInTheSessionAndOnlyItsOwnerGetsIn) {
  json s = startShellSession("box");
  const std::string id = std::to_string(s["id"].get<int64_t>());
  EXPECT_EQ(s["ssh"]["user"], "root");  // this agent runs workloads as its own user (root)
  EXPECT_EQ(textOf(s["ssh"], "host_key").rfind("ssh-ed25519 ", 0), 0u) << s.dump();

  // A command runs in the session: its environment is the session's.
  auto r = ssh(alice_, "box", {"echo", "in-session-$ALLOT_SESSION_ID"});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_EQ(r.out, "in-session-" + id + "\n");

  // By id as well; and stdin reaches the remote command.
  r = ssh(alice_, id, {"test", "-d", "$ALLOT_SCRATCH", "&&", "echo", "scratch-ok"});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_EQ(r.out, "scratch-ok\n");

  // Another team's user, and a teammate it is shared with, are told it does not exist.
  r = cliAs(bob_, {"ssh", id, "--", "true"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("no session " + id), std::string::npos) << r.describe();
  cliJson(alice_, {"session", "share", id, "--with", "carol"});
  r = cliAs(carol_, {"ssh", id, "--", "true"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("no session " + id), std::string::npos) << r.describe();
  // Straight at the relay, without the CLI: the same 404, and 401 with no credential.
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/sessions/" + id + "/ssh", "", bob_,
                        {{"Connection", "Upgrade"}, {"Upgrade", "tcp"}})
                .status,
            404);
  EXPECT_EQ(httpRequest(port_, "GET", "/api/v1/sessions/" + id + "/ssh", "", "",
                        {{"Connection", "Upgrade"}, {"Upgrade", "tcp"}})
                .status,
            401);
  auto plain = httpRequest(port_, "GET", "/api/v1/sessions/" + id + "/ssh", "", alice_);
  EXPECT_EQ(plain.status, 400) << plain.body;
  EXPECT_EQ(plain.parsed()["error"].value("field", ""), "upgrade") << plain.body;

  // A key alice never registered is refused by sshd itself.
  const std::string stranger = makeKey("stranger");
  r = ssh(alice_, "box", {"true"}, stranger);
  EXPECT_EQ(r.code, 255) << r.describe();
  EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.describe();

  // A removed key stops working at the next connection.
  json keys = cliJson(alice_, {"ssh-key", "list"});
  ASSERT_EQ(keys.size(), 1u);
  cliJson(alice_, {"ssh-key", "remove", textOf(keys[0], "fingerprint")});
  EXPECT_TRUE(waitFor([&] { return ssh(alice_, "box", {"true"}).code != 0; }));
  cliJson(alice_, {"ssh-key", "add", aliceKey_ + ".pub"});
  EXPECT_TRUE(waitFor([&] { return ssh(alice_, "box", {"true"}).code == 0; }));

  // allot ssh-config's entries work with plain ssh (the token from the environment).
  r = cliAs(alice_, {"ssh-config"});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_NE(r.out.find("Host allot-box\n"), std::string::npos) << r.out;
  writeFile(path("ssh_config"), r.out);
  auto plainSsh = Process::spawn(
      {"/usr/bin/ssh", "-F", path("ssh_config"), "-i", aliceKey_, "-o", "IdentitiesOnly=yes",
       "allot-box", "echo", "via-config"},
      path("plain-ssh.out"), path("plain-ssh.err"),
      childEnv({"ALLOT_TOKEN=" + alice_, "ALLOT_CONFIG=" + path("cli/no-config.json")}));
  EXPECT_EQ(plainSsh->wait(), 0) << plainSsh->stderrText();
  EXPECT_EQ(plainSsh->stdoutText(), "via-config\n");
}

TEST_F(SessionSshTest, AnOpenSshConnectionKeepsTheSessionFromBeingCulled) {
  json s = startShellSession("held", "6s");
  const std::string id = std::to_string(s["id"].get<int64_t>());
  auto held = holdConnection(id, "14");
  // Well past its idle time, with nothing but the SSH connection in use: kept.
  for (auto end = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < end;
       std::this_thread::sleep_for(250ms)) {
    ASSERT_EQ(textOf(cliJson(alice_, {"session", "show", id}), "state"), "running")
        << held->stderrText();
  }
  EXPECT_EQ(held->wait(), 0) << held->stderrText();
  // The connection gone, it is culled once idle for its 6 s.
  json last;
  EXPECT_TRUE(waitForSessionState(alice_, id, "stopped", &last, 60s));
  EXPECT_EQ(textOf(last, "reason").rfind("culled: ", 0), 0u) << last.dump();
}

// Issue 18: an SSH connection held open through allotd ends when the token that opened it is
// revoked (the relay re-checks its credential every 2 s), not when the user hangs up.
TEST_F(SessionSshTest, ARevokedTokensOpenSshConnectionIsClosed) {
  json s = startShellSession("revoked");
  const std::string id = std::to_string(s["id"].get<int64_t>());
  HttpResult minted = httpRequest(port_, "POST", "/api/v1/tokens", R"({"name":"laptop"})", alice_);
  ASSERT_EQ(minted.status, 201) << minted.body;
  const std::string token = textOf(minted.parsed(), "token");
  auto held = Process::spawn({binPath("allot"), "--server", url_, "--token", token, "ssh", id, "-i",
                              aliceKey_, "--", "echo logged-in; sleep 120"},
                             path("revoked.out"), path("revoked.err"),
                             childEnv({"ALLOT_CONFIG=" + path("cli/no-config.json")}));
  // Logged in and running the command: the connection is up end to end.
  ASSERT_TRUE(waitFor([&] { return held->stdoutText() == "logged-in\n"; })) << held->stderrText();
  HttpResult revoked =
      httpRequest(port_, "DELETE", "/api/v1/tokens/" + textOf(minted.parsed(), "id"), "", alice_);
  ASSERT_EQ(revoked.status, 200) << revoked.body;
  auto code = held->waitFor(15s);
  ASSERT_TRUE(code.has_value()) << "the SSH connection outlived its revoked token";
  EXPECT_NE(*code, 0);
  // The owner's other token still gets in.
  EXPECT_EQ(ssh(alice_, id, {"echo", "still-in"}).out, "still-in\n");
}

// Where hosts are reachable, a session can also have an sshd of its own on a port of the host
// (allot-agent --ssh-direct-ports); allot ssh then goes straight there.
class SessionSshDirectTest : public SessionSshTest {
 protected:
  std::vector<std::string> agentFlags() const override {
    return {"--ssh-direct-ports", "22100-22199", "--ssh-direct-address", "127.0.0.1"};
  }
};

TEST_F(SessionSshDirectTest, AllotSshGoesStraightToTheSessionsPortAndItClosesWithIt) {
  json s = startShellSession("direct");
  const std::string id = std::to_string(s["id"].get<int64_t>());
  ASSERT_TRUE(waitFor([&] {
    s = cliJson(alice_, {"session", "show", id});
    return s["ssh"].is_object() && s["ssh"]["direct"].is_string();
  })) << s.dump();
  const std::string direct = textOf(s["ssh"], "direct");
  EXPECT_EQ(direct.rfind("127.0.0.1:221", 0), 0u) << direct;

  auto r = ssh(alice_, "direct", {"echo", "direct-$ALLOT_SESSION_ID"});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_EQ(r.out, "direct-" + id + "\n");
  r = cliAs(alice_, {"ssh", "direct", "--via-allotd", "-i", aliceKey_, "--", "echo", "relayed"});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_EQ(r.out, "relayed\n");
  // A key it does not know is refused there too.
  r = ssh(alice_, "direct", {"true"}, makeKey("stranger"));
  EXPECT_EQ(r.code, 255) << r.describe();

  // An open direct connection is seen by the host (allotd relays nothing) and counted.
  auto held = holdConnection(id, "30");

  // Stopping the session ends its sshd, and the connection with it.
  cliJson(alice_, {"session", "stop", id});
  EXPECT_TRUE(held->waitFor(30s).has_value());
  r = ssh(alice_, "direct", {"true"});
  EXPECT_NE(r.code, 0);
}

}  // namespace
}  // namespace allot::it
