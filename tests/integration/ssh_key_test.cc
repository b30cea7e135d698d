// Users' SSH public keys through the real CLI and allotd: keys made by the real ssh-keygen, their
// fingerprints checked against OpenSSH's, refusals, isolation and durability (docs/access.md).

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

#include "harness.h"

namespace allot::it {
namespace {

std::string shell(const std::string& cmd) {
  std::string out;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  ::pclose(f);
  return out;
}

std::string urlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

class SshKeyTest : public TestCluster {
 protected:
  void SetUp() override {
    if (shell("command -v ssh-keygen").empty()) GTEST_SKIP() << "ssh-keygen is not installed";
    TestCluster::SetUp();
  }
  // A new ed25519 key pair in the test's dir; the private key's path (the public one adds .pub).
  std::string keygen(const std::string& name) {
    const std::string key = path(name);
    shell("ssh-keygen -q -N '' -t ed25519 -C '" + name + "@laptop' -f " + key + " 2>&1");
    if (readFile(key + ".pub").empty()) throw std::runtime_error("ssh-keygen made no " + key);
    return key;
  }
  // What `ssh-keygen -lf` says the fingerprint is.
  std::string fingerprintOf(const std::string& pub) {
    std::istringstream in(shell("ssh-keygen -lf " + pub));
    std::string bits, fp;
    in >> bits >> fp;
    return fp;
  }
  HttpResult postKey(const std::string& token, const std::string& key) {
    return httpRequest(port_, "POST", "/api/v1/ssh-keys", json{{"key", key}}.dump(), token);
  }
};

TEST_F(SshKeyTest, AUserAddsListsAndRemovesTheirKeys) {
  const auto [alice, mallory] = createTwoTeams("ml", "alice", "other", "mallory");
  const std::string key = keygen("alice");
  const std::string fp = fingerprintOf(key + ".pub");
  ASSERT_EQ(fp.rfind("SHA256:", 0), 0u) << fp;

  CliResult added = cliAs(alice, {"ssh-key", "add", key + ".pub"});
  ASSERT_EQ(added.code, 0) << added.describe();
  EXPECT_NE(added.out.find(fp), std::string::npos) << added.out;

  json list = cliJson(alice, {"ssh-key", "list"});
  ASSERT_EQ(list.size(), 1u) << list.dump();
  EXPECT_EQ(textOf(list[0], "fingerprint"), fp);
  EXPECT_EQ(textOf(list[0], "type"), "ssh-ed25519");
  EXPECT_EQ(textOf(list[0], "comment"), "alice@laptop");
  EXPECT_FALSE(textOf(list[0], "added_at").empty());

  // The same key again is a conflict, through the CLI too.
  CliResult again = cliAs(alice, {"ssh-key", "add", key + ".pub"});
  EXPECT_NE(again.code, 0);
  EXPECT_NE(again.err.find("already has"), std::string::npos) << again.describe();

  // The private half: the CLI will not send it; allotd refuses it with a 400 naming `key`.
  CliResult priv = cliAs(alice, {"ssh-key", "add", key});
  EXPECT_NE(priv.code, 0);
  EXPECT_NE(priv.err.find("PRIVATE key: never upload it"), std::string::npos) << priv.describe();
  HttpResult privApi = postKey(alice, readFile(key));
  EXPECT_EQ(privApi.status, 400) << privApi.body;
  EXPECT_EQ(privApi.parsed()["error"].value("field", ""), "key");
  EXPECT_NE(privApi.body.find("PRIVATE key"), std::string::npos) << privApi.body;
  EXPECT_EQ(privApi.body.find("OPENSSH PRIVATE KEY-----\\n"), std::string::npos)
      << "the answer echoes the private key";

  HttpResult garbage = postKey(alice, "ssh-ed25519 this-is-not-a-key");
  EXPECT_EQ(garbage.status, 400) << garbage.body;
  EXPECT_EQ(garbage.parsed()["error"].value("field", ""), "key");
  HttpResult options = postKey(alice, "command=\"/bin/sh\" " + readFile(key + ".pub"));
  EXPECT_EQ(options.status, 400) << options.body;
  EXPECT_EQ(options.parsed()["error"].value("field", ""), "key");

  // Another team's member: alice's keys do not exist for them, listed or removed.
  const std::string target = "/api/v1/ssh-keys/" + urlEncode(fp);
  HttpResult peek = httpRequest(port_, "GET", "/api/v1/ssh-keys?user=alice", "", mallory);
  HttpResult nobody = httpRequest(port_, "GET", "/api/v1/ssh-keys?user=nosuchuser", "", mallory);
  EXPECT_EQ(peek.status, 404);
  EXPECT_EQ(peek.body.find(fp.substr(7)), std::string::npos);
  EXPECT_EQ(peek.parsed()["error"].value("code", ""), nobody.parsed()["error"].value("code", ""));
  EXPECT_EQ(httpRequest(port_, "DELETE", target + "?user=alice", "", mallory).status, 404);
  EXPECT_EQ(httpRequest(port_, "DELETE", target, "", mallory).status, 404);
  EXPECT_TRUE(cliJson(mallory, {"ssh-key", "list"}).empty());
  CliResult malloryRemove = cliAs(mallory, {"ssh-key", "remove", fp, "--user", "alice"});
  EXPECT_NE(malloryRemove.code, 0);
  // Nothing of alice's changed; a platform admin sees her key.
  json asAdmin = cliJson(adminToken_, {"ssh-key", "list", "--user", "alice"});
  ASSERT_EQ(asAdmin.size(), 1u);
  EXPECT_EQ(textOf(asAdmin[0], "fingerprint"), fp);

  // Every change is audited, named by the key.
  HttpResult audit = httpRequest(port_, "GET", "/api/v1/audit?limit=1000", "", adminToken_);
  ASSERT_EQ(audit.status, 200);
  EXPECT_NE(audit.body.find("\"ssh-key:" + fp + "\""), std::string::npos) << audit.body;

  // Keys are durable: they survive allotd being killed.
  restartServer();
  list = cliJson(alice, {"ssh-key", "list"});
  ASSERT_EQ(list.size(), 1u) << list.dump();
  EXPECT_EQ(textOf(list[0], "fingerprint"), fp);

  // Removal, by the fingerprint without its prefix as well.
  CliResult removed = cliAs(alice, {"ssh-key", "remove", fp.substr(7)});
  ASSERT_EQ(removed.code, 0) << removed.describe();
  EXPECT_NE(removed.out.find(fp), std::string::npos) << removed.out;
  EXPECT_TRUE(cliJson(alice, {"ssh-key", "list"}).empty());
  CliResult gone = cliAs(alice, {"ssh-key", "remove", fp});
  EXPECT_NE(gone.code, 0);
  EXPECT_EQ(std::count(gone.err.begin(), gone.err.end(), '\n'), 1) << "one-line error";
}

TEST_F(SshKeyTest, AKeyComesFromStdinAndAnAdminManagesAnyonesKeys) {
  createTeam("ml");
  const std::string alice = createUser("alice", "ml");
  const std::string key = keygen("ops");
  const std::string fp = fingerprintOf(key + ".pub");
  // `allot ssh-key add -` reads stdin; the harness gives /dev/null, so pipe through a shell.
  const std::string out = shell(binPath("allot") + " --server " + url_ + " --token " + adminToken_ +
                                " ssh-key add - --user alice < " + key + ".pub 2>&1");
  EXPECT_NE(out.find(fp), std::string::npos) << out;
  json list = cliJson(alice, {"ssh-key", "list"});
  ASSERT_EQ(list.size(), 1u) << list.dump();
  EXPECT_EQ(textOf(list[0], "fingerprint"), fp);
  CliResult removed = cliAs(adminToken_, {"ssh-key", "remove", fp, "--user", "alice"});
  EXPECT_EQ(removed.code, 0) << removed.describe();
  EXPECT_TRUE(cliJson(alice, {"ssh-key", "list"}).empty());
}

}  // namespace
}  // namespace allot::it
