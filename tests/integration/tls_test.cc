// allotd serving TLS: a CA and a server certificate for 127.0.0.1/localhost are made with the
// `openssl` command in the test's own directory; allotd gets --tls-cert/--tls-key, the agent joins
// and streams over wss://, the CLI talks https://. Clients that do not trust the CA, or dial a name
// the certificate does not carry, are refused; plain HTTP to the TLS port gets no API answer.

#include <cstdlib>
#include <filesystem>

#include "harness.h"

namespace allot::it {
namespace {

// Runs `command` with sh; throws when it fails.
void shell(const std::string& command) {
  if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
}

// A CA (ca.crt/ca.key) in `dir`, and a certificate `name`.crt/.key it signs for `altNames`
// ("DNS:localhost,IP:127.0.0.1"). EC P-256 keys: quick to make.
void makeCa(const std::string& dir, const std::string& ca) {
  shell("cd '" + dir + "' && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 " +
        "-nodes -keyout " + ca + ".key -out " + ca + ".crt -days 2 -subj '/CN=" + ca +
        "' -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign " +
        ">/dev/null 2>&1");
}
void makeCert(const std::string& dir, const std::string& ca, const std::string& name,
              const std::string& altNames) {
  writeFile(dir + "/" + name + ".ext", "subjectAltName=" + altNames +
                                           "\nbasicConstraints=CA:FALSE\n"
                                           "extendedKeyUsage=serverAuth\n");
  shell("cd '" + dir + "' && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes " +
        "-keyout " + name + ".key -out " + name + ".csr -subj '/CN=" + name + "' >/dev/null 2>&1" +
        " && openssl x509 -req -in " + name + ".csr -CA " + ca + ".crt -CAkey " + ca +
        ".key -CAcreateserial -out " + name + ".crt -days 2 -extfile " + name + ".ext" +
        " >/dev/null 2>&1");
}

class TlsTest : public TestCluster {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/allot-tls-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    certs_ = tmpl;
    makeCa(certs_, "ca");
    makeCert(certs_, "ca", "server", "DNS:localhost,IP:127.0.0.1");
    makeCert(certs_, "ca", "elsewhere", "DNS:allot.example.com");
    makeCa(certs_, "other-ca");
    serverCert_ = "server";
    TestCluster::SetUp();
    // cliAs gives --server and --token but no CA: the CLI takes it from its config file's
    // ca_file (the harness points ALLOT_CONFIG here).
    writeFile(path("cli/no-config.json"), json{{"ca_file", cert("ca.crt")}}.dump());
  }
  void TearDown() override {
    TestCluster::TearDown();
    std::error_code ec;
    std::filesystem::remove_all(certs_, ec);
  }
  std::vector<std::string> serverFlags() const override {
    return {"--heartbeat", "1s",
            "--tls-cert",  cert(serverCert_ + ".crt"),
            "--tls-key",   cert(serverCert_ + ".key")};
  }
  std::vector<std::string> agentFlags() const override { return {"--ca-file", cert("ca.crt")}; }
  std::string cert(const std::string& file) const { return certs_ + "/" + file; }

  // The CLI with its own flags only and no config file, against `server`. The system's trusted
  // CAs are `other-ca` alone (SSL_CERT_FILE); `env` adds variables.
  CliResult bareCli(const std::string& server, const std::vector<std::string>& args,
                    std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {binPath("allot"), "--server", server, "--token", adminToken_};
    argv.insert(argv.end(), args.begin(), args.end());
    env.push_back("ALLOT_CONFIG=" + path("cli/none.json"));
    env.push_back("SSL_CERT_FILE=" + cert("other-ca.crt"));
    auto proc = Process::spawn(argv, path("cli/bare.out"), path("cli/bare.err"), childEnv(env));
    CliResult r;
    r.command = "allot " + joinStrings(args, " ");
    auto code = proc->waitFor(60s);
    if (!code) throw std::runtime_error(r.command + ": still running after 60 s");
    r.code = *code;
    r.out = proc->stdoutText();
    r.err = proc->stderrText();
    return r;
  }

  std::string certs_;
  std::string serverCert_;
};

TEST_F(TlsTest, AgentsJoinOverWssAndTheCliRunsAJobOverHttps) {
  ASSERT_EQ(url_.rfind("https://", 0), 0u) << url_;
  startAgent("node-a", "sim:1xA100");
  EXPECT_EQ(textOf(host("node-a"), "state"), "online");
  createTeam("ml");
  const std::string token = createUser("carol", "ml");
  auto r = cliAs(token, {"run", "--wait", "--", "sh", "-c", "echo over tls"});
  EXPECT_EQ(r.code, 0) << r.describe();
  EXPECT_EQ(r.out, "over tls\n") << r.describe();
  // The certificate's DNS name works as well as its address, and the CA may come from the
  // environment.
  const std::string byName = "https://localhost:" + std::to_string(port_);
  auto who = bareCli(byName, {"whoami"}, {"ALLOT_CA_FILE=" + cert("ca.crt")});
  EXPECT_EQ(who.code, 0) << who.describe();
  EXPECT_NE(who.out.find("platform admin"), std::string::npos) << who.out;
}

TEST_F(TlsTest, ClientsThatDoNotTrustTheCaAreRefused) {
  // The system's CAs (here: another CA) do not vouch for allotd's certificate.
  auto untrusted = bareCli(url_, {"whoami"});
  EXPECT_EQ(untrusted.code, 1) << untrusted.describe();
  EXPECT_NE(untrusted.err.find("TLS handshake failed"), std::string::npos) << untrusted.err;
  auto otherCa = bareCli(url_, {"--ca-file", cert("other-ca.crt"), "whoami"});
  EXPECT_EQ(otherCa.code, 1) << otherCa.describe();
  EXPECT_EQ(otherCa.out, "");

  // An agent that does not trust the CA cannot join, and no host appears.
  auto agent =
      Process::spawn({binPath("allot-agent"), "--server", url_, "--ca-file", cert("other-ca.crt"),
                      "--name", "rogue", "--gpus", "sim:1xA100", "--work-dir", path("agents/rogue"),
                      "--cgroup-name", cgroupName("rogue"), "--run-as-owner", "off", "--join-token",
                      textOf(cliJson(adminToken_, {"host", "join-token"}), "token")},
                     path("proc/rogue.out"), path("proc/rogue.err"), childEnv({}));
  auto code = agent->waitFor(kTimeout);
  ASSERT_TRUE(code.has_value()) << "the agent kept running";
  EXPECT_NE(*code, 0);
  EXPECT_NE(agent->stderrText().find("certificate verify failed"), std::string::npos)
      << agent->stderrText();
  EXPECT_TRUE(cliJson(adminToken_, {"host", "list"}).empty());
}

TEST_F(TlsTest, ACertificateForAnotherNameIsRefused) {
  serverCert_ = "elsewhere";
  restartServer();
  auto r = cliAs(adminToken_, {"whoami"});
  EXPECT_EQ(r.code, 1) << r.describe();
  EXPECT_NE(r.err.find("TLS handshake failed"), std::string::npos) << r.err;
}

TEST_F(TlsTest, PlainHttpToTheTlsPortGetsNoApiAnswer) {
  bool answered = false;
  try {
    auto r = httpRequest(port_, "GET", "/api/v1/whoami", "", adminToken_);
    answered = r.status == 200 || r.body.find("admin") != std::string::npos;
  } catch (const std::exception&) {
    // No HTTP reply at all: the connection ended after the failed handshake.
  }
  EXPECT_FALSE(answered);
  // And allotd is still serving TLS clients.
  EXPECT_EQ(cliAs(adminToken_, {"whoami"}).code, 0);
}

}  // namespace
}  // namespace allot::it
