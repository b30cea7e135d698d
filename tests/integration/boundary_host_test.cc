// The tenant boundary on a host (docs/access.md, "Threat model"), attacked by a workload as its
// owner would: the agent runs as root and workloads as their owners (--run-as-owner required),
// as `make run` starts them. Nothing a job or session does may make a root process run its code,
// write or read a file it names, talk to a socket it points at, or start something outside its
// cgroups. Each test failed before the fix it names. Needs root: only root switches users.
//
// sshd logs in only users the host knows: the agents here run in a mount namespace of their own
// whose /etc/passwd is the host's plus alice (the host's own file is never touched).

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <sstream>
#include <thread>

#include "harness.h"

namespace allot::it {
namespace {

namespace fs = std::filesystem;

// The lines of /proc/<pid>/cgroup, sorted; empty when the process is gone.
std::vector<std::string> cgroupsOf(pid_t pid) {
  std::istringstream in(readFile("/proc/" + std::to_string(pid) + "/cgroup"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  return lines;
}

// A root-owned Unix socket server that keeps whatever any client sends it: what a workload's
// link must never lead the agent to.
class RootSocketTrap {
 public:
  explicit RootSocketTrap(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 8) != 0)
      throw std::runtime_error("cannot listen on " + path);
    ::chmod(path.c_str(), 0666);  // anyone may connect: it is the listener's uid that tells
    thread_ = std::thread([this] { serve(); });
  }
  ~RootSocketTrap() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  int connections() const { return connections_; }
  size_t bytesReceived() const { return bytes_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      ++connections_;
      pollfd q{c, POLLIN, 0};
      char buf[4096];
      // A request comes at once or not at all: one second is plenty on loopback.
      while (::poll(&q, 1, 1000) > 0) {
        const ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        bytes_ += static_cast<size_t>(n);
        const std::string reply = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\npwned!";
        (void)!::write(c, reply.data(), reply.size());
      }
      ::close(c);
    }
  }
  int fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<size_t> bytes_{0};
};

class HostBoundaryTest : public TestCluster {
 protected:
  std::vector<std::string> agentWrapper() const override {
    return inOwnMountNamespace("mount --bind \"$0\" /etc/passwd", path("passwd"));
  }
  std::vector<std::string> agentFlags() const override {
    std::vector<std::string> flags = {"--run-as-owner", "required"};
    flags.insert(flags.end(), extraAgentFlags_.begin(), extraAgentFlags_.end());
    return flags;
  }

  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "running workloads as their owners needs root";
    TestCluster::SetUp();
    // Jobs of other users must reach their own directories under the test's (mkdtemp: 0700).
    fs::permissions(root_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    createTeam("red");
    alice_ = createUser("alice", "red");
    json u = cliJson(adminToken_, {"user", "show", "alice"});
    ASSERT_TRUE(u["uid"].is_number_integer()) << u.dump();
    aliceUid_ = u["uid"].get<int64_t>();
    writeFile(path("passwd"), readFile("/etc/passwd") + "alice:x:" + std::to_string(aliceUid_) +
                                  ":" + std::to_string(u["gid"].get<int64_t>()) +
                                  ":alice:/nonexistent:/bin/sh\n");
    ::chmod(path("passwd").c_str(), 0644);
  }

  // A root-owned file nobody else may touch, and whether it is still exactly that.
  std::string makeVictim(const std::string& name) {
    const std::string p = path(name);
    writeFile(p, "precious\n");
    ::chmod(p.c_str(), 0600);
    return p;
  }
  void expectUntouched(const std::string& victim) {
    struct stat st {};
    ASSERT_EQ(::lstat(victim.c_str(), &st), 0);
    EXPECT_EQ(readFile(victim), "precious\n");
    EXPECT_EQ(st.st_uid, 0u);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
  }

  // A Jupyter session of alice's, once it answers (`allot session open --wait`).
  json startSession(const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"session", "create"};
    args.insert(args.end(), flags.begin(), flags.end());
    json s = cliJson(alice_, args);
    const std::string id = std::to_string(s["id"].get<int64_t>());
    auto r = cliAs(alice_, {"session", "open", id, "--no-browser", "--wait", "30s"});
    EXPECT_EQ(r.code, 0) << r.describe() << "\n--- its output:\n"
                         << logs(alice_, s["id"].get<int64_t>());
    return cliJson(alice_, {"session", "show", id});
  }

  std::string agentDir() const { return path("agents/h1"); }

  std::vector<std::string> extraAgentFlags_;
  std::string alice_;
  int64_t aliceUid_ = 0;
};

// Finding 1: with no standby shim the job's own shim, which runs as root, was spawned with the
// job's environment, so an LD_PRELOAD the job named ran its constructor as root.
class PreloadTest : public HostBoundaryTest {
 protected:
  void SetUp() override {
    extraAgentFlags_ = {"--standby-shims", "0"};  // every job gets a shim of its own
    HostBoundaryTest::SetUp();
    if (IsSkipped()) return;
    startAgent("h1");
  }
};

TEST_F(PreloadTest, ALibraryTheJobPreloadsNeverLoadsIntoARootProcess) {
  // The library records who loaded it; the system's compiler builds it, as a user's job could.
  const std::string log = path("preload.log");
  writeFile(log, "");
  ::chmod(log.c_str(), 0666);
  writeFile(path("preload.c"),
            "#include <stdio.h>\n#include <unistd.h>\n"
            "__attribute__((constructor)) static void probe(void) {\n"
            "  FILE* f = fopen(\"" +
                log +
                "\", \"a\");\n"
                "  if (f) { fprintf(f, \"uid=%d euid=%d\\n\", (int)getuid(), (int)geteuid()); "
                "fclose(f); }\n}\n");
  auto cc = Process::spawn(
      {"/usr/bin/cc", "-shared", "-fPIC", "-o", path("preload.so"), path("preload.c")},
      path("cc.out"), path("cc.err"), childEnv({}));
  ASSERT_EQ(cc->wait(), 0) << cc->stderrText();
  ::chmod(path("preload.so").c_str(), 0755);

  const std::string out = runToEnd(
      alice_, "/bin/true && echo ran",
      {"--env", "LD_PRELOAD=" + path("preload.so"), "--env", "LD_LIBRARY_PATH=" + path("")});
  EXPECT_NE(out.find("ran"), std::string::npos) << out;
  const std::string loaded = readFile(log);
  // It did load: in the job (the shell and true), as alice. LD_PRELOAD in a job is legitimate.
  EXPECT_NE(loaded.find("uid=" + std::to_string(aliceUid_) + " euid=" + std::to_string(aliceUid_)),
            std::string::npos)
      << loaded;
  EXPECT_EQ(loaded.find("uid=0 "), std::string::npos) << "a root process loaded it:\n" << loaded;
  EXPECT_EQ(loaded.find("euid=0\n"), std::string::npos) << loaded;
}

// Finding 2: the session's SSH directory was its owner's, and the agent wrote and chowned files
// there as root through whatever links the owner planted (authorized_keys.new -> /etc/shadow),
// and read the "host key" it reported through them.
class SshSetupTest : public HostBoundaryTest {
 protected:
  void SetUp() override {
    HostBoundaryTest::SetUp();
    if (IsSkipped()) return;
    startAgent("h1");
  }
};

TEST_F(SshSetupTest, ASessionOwnerCannotAimTheSshSetupAtAHostFile) {
  const std::string key = path("alice_ed25519");
  auto keygen = Process::spawn({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key},
                               key + ".log", key + ".log", childEnv({}));
  ASSERT_EQ(keygen->wait(), 0) << readFile(key + ".log");
  ASSERT_EQ(cliAs(alice_, {"ssh-key", "add", key + ".pub"}).code, 0);
  cli({"profile", "create", "shell", "--team", "red", "--gpus", "0", "--", "sleep", "infinity"});
  json s = cliJson(alice_, {"session", "create", "--profile", "shell", "--name", "box"});
  const std::string id = std::to_string(s["id"].get<int64_t>());
  ASSERT_TRUE(waitFor([&] {
    s = cliJson(alice_, {"session", "show", id});
    return s["ssh"].is_object();
  })) << s.dump();

  const std::string victim = makeVictim("shadow");
  const std::string dir = agentDir() + "/session-ssh/" + id;
  // The owner's own job plants the links the agent would write and read through.
  const std::string out =
      runToEnd(alice_,
               "for f in authorized_keys.new sshd_config.new direct.new host_ed25519.pub; do "
               "ln -sf " +
                   victim + " " + dir +
                   "/$f 2>/dev/null && echo planted-$f || echo refused-$f; "
                   "done");
  for (const char* f : {"authorized_keys.new", "sshd_config.new", "direct.new", "host_ed25519.pub"})
    EXPECT_NE(out.find(std::string("refused-") + f), std::string::npos) << out;
  // A connection makes the agent write authorized_keys and sshd_config for it; and it works,
  // as alice, with the directory the agent's.
  auto login = cliAs(alice_, {"ssh", id, "-i", key, "--", "id", "-u"});
  EXPECT_EQ(login.code, 0) << login.describe();
  EXPECT_EQ(login.out, std::to_string(aliceUid_) + "\n");
  expectUntouched(victim);
  struct stat st {};
  ASSERT_EQ(::lstat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u) << "the session's SSH directory is the agent's";
  EXPECT_EQ(st.st_mode & 022, 0u);
  // What the agent reports as the host key is the key it made.
  restartAgent("h1");  // a new agent reads it back from the directory
  EXPECT_TRUE(waitFor([&] {
    json now = cliJson(alice_, {"session", "show", id});
    return now["ssh"].is_object() && textOf(now["ssh"], "host_key").rfind("ssh-ed25519 ", 0) == 0;
  }));
}

// Findings 7 (agent side) and 8: the agent connected as root to jupyter.sock in the owner's own
// directory, wherever a link there led; the Jupyter fork server served any job and joined only
// its cgroup v2 group, leaving a v1 host's memory, cpu and device groups behind.
class JupyterHostTest : public HostBoundaryTest {
 protected:
  void SetUp() override {
    if (!fs::exists("/usr/bin/jupyter-server"))
      GTEST_SKIP() << "Debian's jupyter-server is not installed (scripts/install-deps.sh)";
    HostBoundaryTest::SetUp();
    if (IsSkipped()) return;
    startAgent("h1");
    // Sessions go through the fork server once it listens (before that they start Jupyter
    // plainly, which these tests are not about).
    ASSERT_TRUE(waitFor([&] { return fs::exists(agentDir() + "/forkserver/jupyter.sock"); }));
  }
};

TEST_F(JupyterHostTest, TheAgentTalksOnlyToAJupyterTheSessionsOwnerServes) {
  json s = startSession({"--name", "nb"});
  const std::string id = std::to_string(s["id"].get<int64_t>());
  const std::string status = "/sessions/" + id + "/api/status";
  ASSERT_TRUE(waitFor([&] { return httpRequest(port_, "GET", status, "", alice_).status == 200; }));

  RootSocketTrap trap(path("root.sock"));
  const std::string work = agentDir() + "/jobs/" + id + "/work";
  const std::string out =
      runToEnd(alice_, "cd " + work + " && mv jupyter.sock real.sock && ln -s " +
                           path("root.sock") + " jupyter.sock && echo swapped");
  ASSERT_NE(out.find("swapped"), std::string::npos) << out;
  // The proxy (a new connection, so a new tunnel stream) and the agent's activity probe (every
  // 2 s) both try it now.
  for (int i = 0; i < 3; ++i) {
    auto r = httpRequest(port_, "GET", status, "", alice_);
    EXPECT_NE(r.body, "pwned!");
    EXPECT_NE(r.status, 200) << r.body;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  EXPECT_EQ(trap.bytesReceived(), 0u) << "the agent sent a request to a root socket";
}

TEST_F(JupyterHostTest, TheForkServerServesOnlySessionsAndInAllTheirCgroups) {
  json s = startSession({"--name", "nb"});
  const int64_t id = s["id"].get<int64_t>();
  const std::string work = agentDir() + "/jobs/" + std::to_string(id) + "/work";

  // The session's Jupyter (the process listening on its socket) is in every group its job is
  // in, in every hierarchy: the memory, cpu and devices groups of a v1 host included.
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", (work + "/jupyter.sock").c_str());
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ucred jupyter{};
  socklen_t len = sizeof jupyter;
  ASSERT_EQ(::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &jupyter, &len), 0);
  ::close(fd);
  const pid_t main = std::stoi(readFile(agentDir() + "/jobs/" + std::to_string(id) + "/pid"));
  EXPECT_NE(jupyter.pid, main);  // forked by the fork server, not exec'd by the job
  EXPECT_EQ(static_cast<int64_t>(jupyter.uid), aliceUid_);
  EXPECT_EQ(cgroupsOf(jupyter.pid), cgroupsOf(main));

  // A job that is no session asks the fork server for a Jupyter: refused (its client then
  // starts Jupyter itself, in its own groups, which gains it nothing).
  const int64_t other = submit(alice_, {},
                               {binPath("allot-jupyter-forkserver"), "run", "--socket",
                                agentDir() + "/forkserver/jupyter.sock", "--",
                                "--ServerApp.sock=" + path("other.sock"), "--no-browser"});
  std::string log;
  EXPECT_TRUE(waitFor([&] {
    log = logs(alice_, other);
    return log.find("refused:") != std::string::npos;
  })) << log;
  EXPECT_NE(log.find("is not a session"), std::string::npos) << log;
  cliAs(alice_, {"job", "cancel", std::to_string(other)});
}

// Issue 18, finding 8: under a work dir that workloads cannot reach (a `mktemp -d` directory,
// mode 0700), every session failed later with an obscure "No such directory". The agent now
// refuses to start, naming the directory and its mode.
TEST(AgentStart, AWorkDirWorkloadsCannotReachIsRefusedNamingTheDirectory) {
  if (::geteuid() != 0) GTEST_SKIP() << "running workloads as their owners needs root";
  char tmpl[] = "/tmp/allot-closed-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);  // mode 0700
  const std::string closed = tmpl;
  auto agent =
      Process::spawn({binPath("allot-agent"), "--server", "http://127.0.0.1:9", "--gpus",
                      "sim:1xA100", "--run-as-owner", "required", "--work-dir", closed + "/agent"},
                     closed + ".out", closed + ".err", childEnv({}));
  auto code = agent->waitFor(kTimeout);
  ASSERT_TRUE(code.has_value()) << "the agent kept running";
  EXPECT_NE(*code, 0);
  const std::string err = readFile(closed + ".err");
  EXPECT_NE(err.find(closed + " (mode 0700) lets only its owner through"), std::string::npos)
      << err;
  std::filesystem::remove_all(closed);
  std::filesystem::remove(closed + ".out");
  std::filesystem::remove(closed + ".err");
}

}  // namespace
}  // namespace allot::it
