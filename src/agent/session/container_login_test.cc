#include "agent/session/container_login.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace allot::agent {
namespace {

const char* kStatus = R"({"pid": 4242, "process-start-time": 987654, "cgroup-path": ""})";

// config.json as container_config.cc writes it, with a two-instruction program (8 bytes each).
std::string config(const std::string& annotations = R"({"run.oci.seccomp_bpf_data":
                       "BgAAAAAA/38GAAAAAAAAAA=="})",
                   const std::string& linux = "{}") {
  return R"({"process": {"user": {"uid": 1001, "gid": 1002, "additionalGids": [3000]},
             "env": ["PATH=/usr/bin", "HOME=/home/ann", "JUPYTER_TOKEN=secret", "TERM=dumb"],
             "cwd": "/work"},
             "linux": )" +
         linux + R"(, "annotations": )" + annotations + "}";
}

TEST(ContainerLoginTest, ReadsTheContainersProcessFromCrunsStateAndTheBundle) {
  auto p = parseContainerProcess(kStatus, config());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->pid, 4242);
  EXPECT_EQ(p->startTime, 987654u);
  EXPECT_EQ(p->uid, 1001u);
  EXPECT_EQ(p->gid, 1002u);
  EXPECT_EQ(p->groups, std::vector<gid_t>{3000});
  EXPECT_EQ(p->cwd, "/work");
  EXPECT_EQ(p->seccompBpf.size(), 16u);
}

TEST(ContainerLoginTest, ALoginNeverGetsLessConfinementThanTheSession) {
  // A filter in the OCI form only (crun compiled it at start): no login rather than none.
  auto p = parseContainerProcess(kStatus, config("{}", R"({"seccomp": {"defaultAction": "x"}})"));
  EXPECT_FALSE(p.ok());
  // A program that is not whole instructions.
  EXPECT_FALSE(
      parseContainerProcess(kStatus, config(R"({"run.oci.seccomp_bpf_data": "AAAA"})")).ok());
  EXPECT_FALSE(
      parseContainerProcess(kStatus, config(R"({"run.oci.seccomp_bpf_data": "%%%"})")).ok());
  EXPECT_FALSE(parseContainerProcess(kStatus, config(R"({"run.oci.seccomp_bpf_data": 12})")).ok());
  // No filter at all in the session: none in the login.
  auto none = parseContainerProcess(kStatus, config("{}"));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->seccompBpf.empty());
}

TEST(ContainerLoginTest, MalformedStateOrConfigIsRefused) {
  EXPECT_FALSE(parseContainerProcess("", config()).ok());
  EXPECT_FALSE(parseContainerProcess(R"({"pid": 1})", config()).ok());  // never the host's init
  EXPECT_FALSE(parseContainerProcess(R"({"pid": "12"})", config()).ok());
  EXPECT_FALSE(parseContainerProcess(kStatus, "{}").ok());
  EXPECT_FALSE(parseContainerProcess(kStatus, R"({"process": {"user": {"uid": "x"}}})").ok());
  EXPECT_FALSE(parseContainerProcess(kStatus, R"({"process": {"env": []}})").ok());
}

// Found by fuzz/wire_fuzz.cc: ids and pids were converted with a cast, so a fraction was
// undefined behaviour and a number past 32 bits wrapped onto another id, root's among them.
TEST(ContainerLoginTest, IdsAndPidsThatACastWouldWrapAreRefused) {
  auto withUser = [](const std::string& user) {
    return R"({"process": {"user": )" + user + R"(, "env": [], "cwd": "/"}})";
  };
  ASSERT_TRUE(parseContainerProcess(kStatus, withUser(R"({"uid": 1001, "gid": 1002})")).ok());
  for (const char* user :
       {R"({"uid": 4294967296, "gid": 1002})", R"({"uid": 4294968297, "gid": 1002})",
        R"({"uid": -1, "gid": 1002})", R"({"uid": 1e114, "gid": 1002})",
        R"({"uid": 1001.5, "gid": 1002})", R"({"uid": 1001, "gid": 4294967295})",
        R"({"uid": 1001, "gid": 1002, "additionalGids": [2.5]})",
        R"({"uid": 1001, "gid": 1002, "additionalGids": [4294967296]})"}) {
    EXPECT_FALSE(parseContainerProcess(kStatus, withUser(user)).ok()) << user;
  }
  EXPECT_FALSE(parseContainerProcess(kStatus, R"({"process": {"user": {"uid": 1, "gid": 1},
                                                   "env": [1]}})")
                   .ok());
  for (const char* status : {R"({"pid": 4294971538})", R"({"pid": -4242})", R"({"pid": 42.5})"})
    EXPECT_FALSE(parseContainerProcess(status, config()).ok()) << status;
}

TEST(ContainerLoginTest, TheRequestCarriesOnlyTheTerminalLocaleAndConnection) {
  LoginRequest r;
  r.command = "nvidia-smi -L";
  r.tty = true;
  r.env = {{"TERM", "xterm-256color"},
           {"LC_ALL", "C.UTF-8"},
           {"LD_PRELOAD", "/tmp/evil.so"},
           {"SSH_CONNECTION", "1 2 3 4"},
           {"PATH", "/tmp"}};
  auto back = decodeLoginRequest(encodeLoginRequest(r));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->command, "nvidia-smi -L");
  EXPECT_TRUE(back->tty);
  EXPECT_EQ(back->env.size(), 3u);
  EXPECT_FALSE(back->env.count("LD_PRELOAD"));
  EXPECT_FALSE(back->env.count("PATH"));
}

TEST(ContainerLoginTest, AForgedRequestIsRefusedWhole) {
  // The owner may write the request themselves: whatever is not a login's is refused.
  EXPECT_FALSE(decodeLoginRequest(R"({"command": "", "tty": false,
                                      "env": {"LD_PRELOAD": "/tmp/x.so"}})")
                   .ok());
  EXPECT_FALSE(decodeLoginRequest(R"({"command": "", "tty": false, "env": {"LC_": "x"}})").ok());
  EXPECT_FALSE(decodeLoginRequest(R"({"command": 1, "tty": false, "env": {}})").ok());
  EXPECT_FALSE(decodeLoginRequest(R"({"command": "", "env": {}})").ok());
  EXPECT_FALSE(decodeLoginRequest(R"({"command": "", "tty": false, "env": {"TERM": 5}})").ok());
  EXPECT_FALSE(decodeLoginRequest("not json").ok());
  EXPECT_FALSE(decodeLoginRequest(std::string(kMaxLoginRequest + 1, ' ')).ok());
  EXPECT_FALSE(decodeLoginRequest(std::string(R"({"command": "a\u0000b", "tty": false,
                                                  "env": {}})"))
                   .ok());
}

TEST(ContainerLoginTest, TheLoginsEnvironmentIsTheContainersWithTheClientsTerminal) {
  auto p = parseContainerProcess(kStatus, config());
  ASSERT_TRUE(p.ok());
  LoginRequest r;
  r.env = {{"TERM", "xterm"}, {"LANG", "C.UTF-8"}};
  const auto env = loginEnvironment(*p, r, "ann", "/bin/bash");
  auto has = [&](const std::string& e) { return std::count(env.begin(), env.end(), e) == 1; };
  EXPECT_TRUE(has("PATH=/usr/bin"));
  EXPECT_TRUE(has("HOME=/home/ann"));
  EXPECT_TRUE(has("TERM=xterm"));
  EXPECT_TRUE(has("LANG=C.UTF-8"));
  EXPECT_TRUE(has("USER=ann"));
  EXPECT_TRUE(has("LOGNAME=ann"));
  EXPECT_TRUE(has("SHELL=/bin/bash"));
  for (const auto& e : env) EXPECT_NE(e.rfind("JUPYTER_TOKEN=", 0), 0u) << e;
}

TEST(ContainerLoginTest, AnInteractiveLoginIsALoginShellAndACommandGoesToDashC) {
  EXPECT_EQ(loginArgv("/bin/bash", ""), std::vector<std::string>{"-bash"});
  EXPECT_EQ(loginArgv("/bin/sh", "echo hi; id"),
            (std::vector<std::string>{"sh", "-c", "echo hi; id"}));
}

}  // namespace
}  // namespace allot::agent
