// Sessions in images and teams' registry logins (docs/environments.md), end to end: a registry
// on loopback that serves one account only (htpasswd), a Jupyter image the suite builds from
// this machine's Debian packages (tests/images/host_packages_rootfs.py), allotd, a root agent
// and the CLI. A session from a profile with an image runs that image's Jupyter, reached through
// allotd's proxy as any session is; the team's login fetches it, another team without one is
// refused by the registry even once the host holds the image, and the password is written
// nowhere in the clear. Needs root (crun, and switching users).

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "image_cluster.h"

namespace allot::it {
namespace {

namespace fs = std::filesystem;

constexpr const char* kAccount = "ml-puller";
constexpr const char* kPassword = "s3cret-for-ml-only";

// The process whose command line holds `needle`, or 0.
int processWith(const std::string& needle) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline");
    std::stringstream text;
    text << in.rdbuf();
    if (text.str().find(needle) != std::string::npos) return std::stoi(name);
  }
  return 0;
}

// Whether any file under `dir` holds `secret`.
bool anyFileHolds(const fs::path& dir, const std::string& secret) {
  std::error_code ec;
  for (auto it =
           fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    std::ifstream in(it->path(), std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (data.find(secret) != std::string::npos) {
      ADD_FAILURE() << it->path() << " holds the password";
      return true;
    }
  }
  return false;
}

class ImageSessionTest : public ImageCluster<ImageSessionTest> {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists("/usr/bin/jupyter-server")) return;
    startRegistry(std::string(kAccount) + ":" + kPassword);
    if (!registry_) return;
    jupyter_ = registry_->pushHostPackages(ALLOT_SOURCE_DIR, "test/jupyter",
                                           {"jupyter-server", "python3-jupyter-server", "dash"},
                                           "/usr/bin/jupyter-server");
  }

  // sshd logs in only users with a passwd entry: the agent sees the host's file plus alice and
  // bob, bind-mounted in a mount namespace of its own (the host's file is never touched). There,
  // too, terminals come from a devpts mounted as Debian mounts it (gid=5, mode=620), which an
  // sshd running as the user needs for a terminal login; this machine's has neither.
  std::vector<std::string> agentWrapper() const override {
    return inOwnMountNamespace(
        "mount --bind \"$0\" /etc/passwd && "
        "mount -t devpts -o newinstance,gid=5,mode=620,ptmxmode=0666 devpts /dev/pts && "
        "mount --bind /dev/pts/ptmx /dev/ptmx",
        path("passwd"));
  }
  void usersCreated() override {
    std::string passwd = readFile("/etc/passwd");
    for (const char* user : {"alice", "bob"}) {
      json u = cliJson(adminToken_, {"user", "show", user});
      passwd += std::string(user) + ":x:" + std::to_string(u["uid"].get<int64_t>()) + ":" +
                std::to_string(u["gid"].get<int64_t>()) + ":" + user + ":/:/bin/sh\n";
    }
    writeFile(path("passwd"), passwd);
    ::chmod(path("passwd").c_str(), 0644);
  }

  void SetUp() override {
    if (!fs::exists("/usr/bin/jupyter-server"))
      GTEST_SKIP() << "Debian's jupyter-server is not installed (scripts/install-deps.sh)";
    ImageCluster::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // cv may use the image too: only the registry, which cv has no login to, keeps it from cv.
    auto set = cli({"team", "image-allow", "set", "cv", registry_->address() + "/test/"});
    ASSERT_EQ(set.code, 0) << set.describe();
  }

  static inline std::string jupyter_;
};

TEST_F(ImageSessionTest, AnImageProfilesSessionAnswersThroughTheProxyPulledWithItsTeamsLogin) {
  // The team's login, set through the API (the CLI reads the password from the terminal or
  // stdin); shown back without the password.
  const std::string logins = "/api/v1/teams/ml/registry-logins/";
  auto set = httpRequest(port_, "PUT", logins + registry_->address(),
                         json{{"username", kAccount}, {"password", kPassword}}.dump(), adminToken_);
  ASSERT_EQ(set.status, 200) << set.body;
  EXPECT_EQ(set.body.find(kPassword), std::string::npos);
  auto listed = cliAs(alice_, {"team", "registry-login", "list", "ml"});
  EXPECT_EQ(listed.code, 0) << listed.describe();
  EXPECT_NE(listed.out.find(kAccount), std::string::npos) << listed.out;
  EXPECT_EQ(listed.out.find(kPassword), std::string::npos);
  // cv has none: the registry refuses cv's job, which fails saying so.
  json last;
  const int64_t refused = submit(bob_, {"--image", jupyter_}, {"true"});
  ASSERT_TRUE(waitForJobState(bob_, refused, "failed", &last)) << last.dump();
  EXPECT_NE(textOf(last, "reason").find("without a login"), std::string::npos) << last.dump();

  auto profile = cli({"profile", "create", "lab", "--team", "ml", "--image", jupyter_, "--storage",
                      "scratch", "--", "jupyter-server"});
  ASSERT_EQ(profile.code, 0) << profile.describe();
  json s = cliJson(alice_, {"session", "create", "--profile", "lab", "--name", "inimage"});
  const std::string id = std::to_string(s["id"].get<int64_t>());
  auto opened = cliAs(alice_, {"session", "open", "inimage", "--no-browser", "--wait", "180s"});
  ASSERT_EQ(opened.code, 0) << opened.describe() << "\n--- its output:\n"
                            << logs(alice_, s["id"].get<int64_t>());
  json shown = cliJson(alice_, {"job", "show", id});
  EXPECT_EQ(textOf(shown, "image"), jupyter_);
  EXPECT_EQ(textOf(shown, "image_digest").rfind("sha256:", 0), 0u) << shown.dump();

  // Through allotd's proxy, as any session: Jupyter answers, and writes to the session's storage.
  const std::string base = "/sessions/" + id + "/";
  auto status = httpRequest(port_, "GET", base + "api/status", "", alice_);
  EXPECT_EQ(status.status, 200) << status.body;
  EXPECT_EQ(httpRequest(port_, "GET", base + "api/status", "", bob_).status, 404);
  auto wrote = httpRequest(port_, "PUT", base + "api/contents/note.txt",
                           R"({"type":"file","format":"text","content":"from the image"})", alice_);
  EXPECT_EQ(wrote.status, 201) << wrote.body;
  // The Jupyter that answered is the image's: its root holds no skopeo, the host's does.
  const int pid = processWith("base_url=/sessions/" + id + "/");
  ASSERT_NE(pid, 0);
  const fs::path itsRoot = "/proc/" + std::to_string(pid) + "/root";
  EXPECT_TRUE(fs::exists(itsRoot / "usr/bin/jupyter-server"));
  EXPECT_FALSE(fs::exists(itsRoot / "usr/bin/skopeo"));
  EXPECT_TRUE(fs::exists("/usr/bin/skopeo"));

  // Held on h1 now, fetched with ml's login: cv's job is still refused by the registry, not
  // served from the cache.
  const int64_t again = submit(bob_, {"--image", jupyter_}, {"true"});
  ASSERT_TRUE(waitForJobState(bob_, again, "failed", &last)) << last.dump();
  EXPECT_NE(textOf(last, "reason").find("without a login"), std::string::npos) << last.dump();

  cliJson(alice_, {"session", "stop", "inimage"});
  EXPECT_TRUE(waitForSessionState(alice_, id, "stopped"));
  // Nowhere in the clear: not in allotd's or the agent's files, logs or image store.
  EXPECT_FALSE(anyFileHolds(root_, kPassword));
}

TEST_F(ImageSessionTest, APrepullPresentsTheLoginOfTheTeamItIsFor) {
  auto set = httpRequest(port_, "PUT", "/api/v1/teams/ml/registry-logins/" + registry_->address(),
                         json{{"username", kAccount}, {"password", kPassword}}.dump(), adminToken_);
  ASSERT_EQ(set.status, 200) << set.body;
  auto cache = [&] {
    return httpRequest(port_, "GET", "/api/v1/hosts/h1/images", "", adminToken_).parsed();
  };
  json last;
  // h1 is shared: without a team the prepull goes without a login, and the registry refuses it.
  ASSERT_EQ(cli({"image", "prepull", jupyter_, "--host", "h1"}).code, 0);
  ASSERT_TRUE(waitFor([&] {
    last = cache();
    return last["prepulls"].empty();
  })) << last.dump();
  EXPECT_TRUE(last["images"].empty()) << last.dump();
  // cv may not lend ml's login, and ml's login goes only with images ml may run.
  auto stranger = cliAs(bob_, {"image", "prepull", jupyter_, "--host", "h1", "--team", "ml"});
  EXPECT_NE(stranger.code, 0);
  auto outside = cli({"image", "prepull", "127.0.0.1:1/other/x:1", "--host", "h1", "--team", "ml"});
  EXPECT_NE(outside.code, 0);
  EXPECT_NE(outside.err.find("image"), std::string::npos) << outside.describe();
  // For ml: with ml's login, and held for ml's jobs.
  auto asked = cli({"image", "prepull", jupyter_, "--host", "h1", "--team", "ml"});
  ASSERT_EQ(asked.code, 0) << asked.describe();
  EXPECT_NE(asked.out.find("with team ml's registry login"), std::string::npos) << asked.out;
  ASSERT_TRUE(waitFor(
      [&] {
        last = cache();
        return last["prepulls"].empty() && !last["images"].empty();
      },
      120s))
      << last.dump();
  EXPECT_EQ(textOf(last["images"][0], "ref"), jupyter_);
  // cv's job is still refused by the registry, not served from what ml's login fetched.
  const int64_t theirs = submit(bob_, {"--image", jupyter_}, {"true"});
  ASSERT_TRUE(waitForJobState(bob_, theirs, "failed", &last)) << last.dump();
  EXPECT_NE(textOf(last, "reason").find("without a login"), std::string::npos) << last.dump();
}

// SSH into a session in an image lands in the container, not on the host: sshd stays on the host
// (as alice, in the session's cgroups) and allot-ssh-bridge runs each login inside the session's
// namespaces, as crun ran the session, with its terminal as the controlling one.
class ImageSessionSshTest : public ImageSessionTest {
 protected:
  void SetUp() override {
    for (const char* program : {"/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen"}) {
      if (!fs::exists(program))
        GTEST_SKIP() << program << " is not installed (scripts/install-deps.sh)";
    }
    ImageSessionTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    key_ = path("alice_ed25519");
    auto made = Process::spawn({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key_},
                               key_ + ".log", key_ + ".log", childEnv({}));
    ASSERT_EQ(made->wait(), 0) << readFile(key_ + ".log");
    auto added = cliAs(alice_, {"ssh-key", "add", key_ + ".pub"});
    ASSERT_EQ(added.code, 0) << added.describe();
    auto login =
        httpRequest(port_, "PUT", "/api/v1/teams/ml/registry-logins/" + registry_->address(),
                    json{{"username", kAccount}, {"password", kPassword}}.dump(), adminToken_);
    ASSERT_EQ(login.status, 200) << login.body;
    auto profile = cli({"profile", "create", "lab", "--team", "ml", "--image", jupyter_,
                        "--storage", "scratch", "--", "jupyter-server"});
    ASSERT_EQ(profile.code, 0) << profile.describe();
  }

  // ssh into session `id` as alice, the way `allot ssh` does, with `sshFlags` (-tt) and `input`
  // on its standard input (kept open a moment, so that a terminal login reads all of it).
  CliResult rawSsh(const std::string& id, const std::vector<std::string>& sshFlags,
                   const std::string& command, const std::string& input = "") {
    const std::string self = binPath("allot") + " --server " + url_ + " ssh " + id;
    std::vector<std::string> argv = {
        "/bin/sh", "-c", "{ printf '%s' \"$0\"; sleep 2; } | exec \"$@\"", input, "/usr/bin/ssh"};
    argv.insert(argv.end(), sshFlags.begin(), sshFlags.end());
    argv.insert(argv.end(),
                {"-o", "ProxyCommand=" + self + " --stdio", "-o",
                 "KnownHostsCommand=" + self + " --known-hosts", "-o", "StrictHostKeyChecking=yes",
                 "-o", "UserKnownHostsFile=/dev/null", "-o", "GlobalKnownHostsFile=/dev/null", "-i",
                 key_, "-o", "IdentitiesOnly=yes", "-l", "alice", "allot-session-" + id});
    if (!command.empty()) argv.push_back(command);
    const std::string base = path("ssh." + std::to_string(++calls_));
    auto p = Process::spawn(
        argv, base + ".out", base + ".err",
        childEnv({"ALLOT_TOKEN=" + alice_, "ALLOT_CONFIG=" + path("cli/no-config.json")}));
    CliResult r;
    r.code = p->waitFor(60s).value_or(-1);
    r.out = p->stdoutText();
    r.err = p->stderrText();
    r.command = "ssh " + command;
    return r;
  }

  // The fields after the command's name in a /proc/PID/stat text (state first).
  static std::vector<std::string> statFields(const std::string& text) {
    std::istringstream in(text.substr(text.rfind(')') + 1));
    std::vector<std::string> fields;
    for (std::string f; in >> f;) fields.push_back(f);
    return fields;
  }

  // A session of the "lab" profile named `name`, once it runs and offers SSH (with `direct`, on
  // a port of its own too); its last `session show`, or a failure naming why not.
  json startLab(const std::string& name, bool direct = false) {
    json s = cliJson(alice_, {"session", "create", "--profile", "lab", "--name", name});
    const std::string id = std::to_string(s["id"].get<int64_t>());
    const bool up = waitFor(
        [&] {
          s = cliJson(alice_, {"session", "show", id});
          return textOf(s, "state") == "failed" ||
                 (textOf(s, "state") == "running" && s["ssh"].is_object() &&
                  (!direct || s["ssh"]["direct"].is_string()));
        },
        180s);
    if (!up || textOf(s, "state") != "running")
      ADD_FAILURE() << s.dump() << "\n--- its output:\n" << logs(alice_, s["id"].get<int64_t>());
    return s;
  }

  std::string key_;
  int calls_ = 0;
};

TEST_F(ImageSessionSshTest, ALoginRunsInTheSessionsContainerAsItsOwnerConfinedAsTheSession) {
  json s = startLab("sshimage");
  ASSERT_FALSE(HasFailure());
  const std::string id = std::to_string(s["id"].get<int64_t>());
  const int64_t aliceUid = cliJson(adminToken_, {"user", "show", "alice"})["uid"].get<int64_t>();

  // `allot ssh` with a command: the image's files, not the host's (it has a shell, Python and
  // Jupyter, no coreutils: builtins read /proc); alice's uid; PID 1 is the session's Jupyter; no
  // capability, no new privileges, the container's seccomp filter.
  auto r = cliAs(alice_, {"ssh", "sshimage", "-i", key_, "--",
                          "test -e /usr/bin/jupyter-server && test ! -e /usr/bin/skopeo && "
                          "echo in-image; while read -r k v; do case $k in "
                          "Uid:|NoNewPrivs:|Seccomp:|CapEff:|CapBnd:) echo \"$k $v\";; esac; "
                          "done </proc/self/status; "
                          "python3 -c 'print(open(\"/proc/1/cmdline\").read().split(chr(0)))'"});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_NE(r.out.find("in-image\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Uid: " + std::to_string(aliceUid) + "\t"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/usr/bin/jupyter-server'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NoNewPrivs: 1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Seccomp: 2\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CapEff: 0000000000000000\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CapBnd: 0000000000000000\n"), std::string::npos) << r.out;
  // Its exit status comes back; the session's storage is the login's home, writable.
  r = cliAs(alice_,
            {"ssh", "sshimage", "-i", key_, "--", "echo from-ssh > \"$HOME/ssh-note\" && exit 7"});
  EXPECT_EQ(r.code, 7) << r.describe();

  // A terminal: the login's controlling one (tty_nr set), with the login in its foreground; an
  // interactive login shell reads what is typed and exits with its status.
  r = rawSsh(id, {"-tt"}, "read -r line </proc/self/stat; echo \"$line\"");
  ASSERT_EQ(r.code, 0) << r.describe();
  const auto fields = statFields(r.out);
  ASSERT_GE(fields.size(), 6u) << r.out;
  EXPECT_NE(fields[4], "0") << "no controlling terminal: " << r.out;              // tty_nr
  EXPECT_EQ(fields[5], fields[2]) << "not the terminal's foreground: " << r.out;  // tpgid, pgrp
  r = rawSsh(id, {"-tt"}, "", "echo typed-$((6*7)); exit 3\n");
  EXPECT_EQ(r.code, 3) << r.describe();
  EXPECT_NE(r.out.find("typed-42"), std::string::npos) << r.out;

  // sftp reaches the same storage, served on the host.
  const std::string batch = path("sftp.batch");
  writeFile(batch, "get ssh-note " + path("fetched-note") + "\n");
  const std::string self = binPath("allot") + " --server " + url_ + " ssh " + id;
  auto sftp = Process::spawn(
      {"/usr/bin/sftp", "-b", batch, "-o", "ProxyCommand=" + self + " --stdio", "-o",
       "KnownHostsCommand=" + self + " --known-hosts", "-o", "StrictHostKeyChecking=yes", "-o",
       "UserKnownHostsFile=/dev/null", "-o", "GlobalKnownHostsFile=/dev/null", "-i", key_, "-o",
       "IdentitiesOnly=yes", "alice@allot-session-" + id},
      path("sftp.out"), path("sftp.err"),
      childEnv({"ALLOT_TOKEN=" + alice_, "ALLOT_CONFIG=" + path("cli/no-config.json")}));
  EXPECT_EQ(sftp->waitFor(60s).value_or(-1), 0) << readFile(path("sftp.err"));
  EXPECT_EQ(readFile(path("fetched-note")), "from-ssh\n");

  cliJson(alice_, {"session", "stop", "sshimage"});
  EXPECT_TRUE(waitForSessionState(alice_, id, "stopped"));
}

TEST_F(ImageSessionSshTest, TheLoginSocketServesItsOwnerOnly) {
  json s = startLab("guarded");
  ASSERT_FALSE(HasFailure());
  const std::string id = std::to_string(s["id"].get<int64_t>());
  // A connection held open (the image has no sleep): its bridge listens on the session's login
  // socket meanwhile.
  auto held = Process::spawn({binPath("allot"), "--server", url_, "--token", alice_, "ssh", id,
                              "-i", key_, "--", "python3 -c 'import time; time.sleep(30)'"},
                             path("held.out"), path("held.err"),
                             childEnv({"ALLOT_CONFIG=" + path("cli/no-config.json")}));
  const fs::path dir = path("agents/h1/session-ssh/" + id);
  const int64_t aliceUid = cliJson(adminToken_, {"user", "show", "alice"})["uid"].get<int64_t>();
  // The bridge binds the socket as root, then gives it to alice: it is hers once that is done
  // (root's, mode 0600 already, in between).
  std::string socket;
  struct stat st {};
  ASSERT_TRUE(waitFor([&] {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("login-", 0) == 0) socket = e.path().string();
    }
    return !socket.empty() && ::lstat(socket.c_str(), &st) == 0 &&
           static_cast<int64_t>(st.st_uid) == aliceUid;
  })) << "login socket '"
      << socket << "' owned by uid " << st.st_uid << ", not alice's " << aliceUid << "\n"
      << held->stderrText();
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // Another user cannot even open it; root can, and the bridge still refuses anyone but alice.
  for (const std::vector<std::string>& who :
       {std::vector<std::string>{"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                 "--clear-groups"},
        std::vector<std::string>{}}) {
    std::vector<std::string> argv = who;
    argv.insert(argv.end(), {binPath("allot-ssh-bridge"), "enter", socket});
    auto p = Process::spawn(argv, path("intruder.out"), path("intruder.err"),
                            childEnv({"SSH_ORIGINAL_COMMAND=id"}));
    EXPECT_EQ(p->waitFor(20s).value_or(-1), 255) << readFile(path("intruder.err"));
    EXPECT_EQ(readFile(path("intruder.out")), "");
  }
  // alice, holding a descriptor of a terminal that is another session's controlling one, asks
  // for it as her login's: the login takes it as alice may, which is not at all, and the other
  // session keeps it.
  const int64_t aliceGid = cliJson(adminToken_, {"user", "show", "alice"})["gid"].get<int64_t>();
  auto probe = Process::spawn(
      {"/usr/bin/python3", std::string(ALLOT_SOURCE_DIR) + "/tests/integration/tty_steal_probe.py",
       socket, std::to_string(st.st_uid), std::to_string(aliceGid)},
      path("probe.out"), path("probe.err"), childEnv({}));
  EXPECT_EQ(probe->waitFor(30s).value_or(-1), 0) << readFile(path("probe.err"));
  const std::string probed = readFile(path("probe.out"));
  EXPECT_NE(probed.find("code=126 message="), std::string::npos)
      << probed << readFile(path("probe.err"));
  EXPECT_NE(probed.find("the terminal"), std::string::npos) << probed;
  EXPECT_NE(probed.find("victim-kept-terminal"), std::string::npos) << probed;

  held->signal(SIGKILL);
  cliJson(alice_, {"session", "stop", "guarded"});
  EXPECT_TRUE(waitForSessionState(alice_, id, "stopped"));
}

// A session's own port (allot-agent --ssh-direct-ports): its bridge runs the listening sshd and
// logs each connection into the container too, and goes with the session.
class ImageSessionSshDirectTest : public ImageSessionSshTest {
 protected:
  std::vector<std::string> agentFlags() const override {
    auto flags = ImageSessionSshTest::agentFlags();
    flags.insert(flags.end(),
                 {"--ssh-direct-ports", "22300-22399", "--ssh-direct-address", "127.0.0.1"});
    return flags;
  }
};

TEST_F(ImageSessionSshDirectTest, ADirectPortLogsIntoTheContainerAndClosesWithTheSession) {
  json s = startLab("direct", /*direct=*/true);
  ASSERT_FALSE(HasFailure());
  const std::string id = std::to_string(s["id"].get<int64_t>());
  EXPECT_EQ(textOf(s["ssh"], "direct").rfind("127.0.0.1:223", 0), 0u) << s.dump();
  auto r = cliAs(alice_, {"ssh", "direct", "-i", key_, "--",
                          "test ! -e /usr/bin/skopeo && echo direct-in-image"});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_EQ(r.out, "direct-in-image\n");
  const std::string socket = path("agents/h1/session-ssh/" + id + "/login-direct.sock");
  EXPECT_NE(processWith(socket), 0);

  cliJson(alice_, {"session", "stop", "direct"});
  EXPECT_TRUE(waitForSessionState(alice_, id, "stopped"));
  EXPECT_TRUE(waitFor([&] { return processWith(socket) == 0; }));
}

}  // namespace
}  // namespace allot::it
