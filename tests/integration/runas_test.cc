// Workloads run as their owner (docs/access.md): on a root agent with --run-as-owner required,
// each job runs as its submitter's allocated uid, never 0; one user's job can neither read
// another's job directory nor signal its processes, whatever their teams; a team's directory
// belongs to the team's group and other teams cannot list it. Needs root (it is skipped
// otherwise): only root can switch users.

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "harness.h"
#include "tenants.h"

namespace allot::it {
namespace {

namespace fs = std::filesystem;

class RunAsTest : public RedAndBlueCluster {
 protected:
  std::vector<std::string> agentFlags() const override {
    return {"--run-as-owner", "required", "--team-dir", path("teams")};
  }

  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "switching users needs root";
    TestCluster::SetUp();
    // Jobs of other users must reach their own directories under the test's (mkdtemp: 0700).
    fs::permissions(root_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    createRedAndBlue();
  }

  int64_t uidOf(const std::string& user) {
    json u = cliJson(adminToken_, {"user", "show", user});
    if (!u["uid"].is_number_integer()) throw std::runtime_error("no uid: " + u.dump());
    return u["uid"].get<int64_t>();
  }

  int64_t gidOfTeam(const std::string& team) {
    for (const auto& t : cliJson(adminToken_, {"team", "list"})) {
      if (textOf(t, "name") == team && t["gid"].is_number_integer()) return t["gid"].get<int64_t>();
    }
    throw std::runtime_error("team " + team + " has no gid");
  }
};

TEST_F(RunAsTest, OneUsersJobCannotReadOrSignalAnothersJob) {
  const int64_t aliceUid = uidOf("alice");
  const int64_t bobUid = uidOf("bob");
  const int64_t redGid = gidOfTeam("red");
  EXPECT_GT(aliceUid, 0);
  EXPECT_NE(aliceUid, bobUid);

  // Job A: writes a secret into its own directory and into its team's, then sleeps.
  int64_t a = submit(alice_, {},
                     {"sh", "-c",
                      "echo secret > secret.txt && echo shared > \"$ALLOT_TEAM_DIR/red.txt\" && "
                      "echo uid=$(id -u) home=$HOME user=$USER && echo pid=$$ > pid.tmp && "
                      "mv pid.tmp pid && exec sleep 600"});
  ASSERT_TRUE(waitForJobState(alice_, a, "running"));
  const std::string aWork = path("agents/h1/jobs/" + std::to_string(a) + "/work");
  pid_t aPid = 0;
  ASSERT_TRUE(waitFor([&] {
    std::string text = readFile(aWork + "/pid");
    if (text.rfind("pid=", 0) == 0) aPid = std::stoi(text.substr(4));
    return aPid > 0;
  })) << logs(alice_, a);
  std::string aLog;
  EXPECT_TRUE(waitFor([&] {
    aLog = logs(alice_, a);
    return aLog.find("user=alice") != std::string::npos;
  })) << aLog;
  EXPECT_NE(aLog.find("uid=" + std::to_string(aliceUid) + " "), std::string::npos) << aLog;
  EXPECT_NE(aLog.find("home=" + aWork + " user=alice"), std::string::npos) << aLog;

  // What the host holds: the job's files are alice's, the team's directory red's group's.
  struct stat st {};
  ASSERT_EQ(::stat((aWork + "/secret.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, static_cast<uid_t>(aliceUid));
  ASSERT_EQ(::stat(aWork.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::stat(path("teams/red").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_gid, static_cast<gid_t>(redGid));
  EXPECT_EQ(st.st_mode & 07777, 02770u);

  // Job B, another team's: can neither read A's secret nor signal A, nor list red's directory.
  const std::string probe = "cat '" + aWork + "/secret.txt'; echo cat=$?; kill -TERM " +
                            std::to_string(aPid) + "; echo kill=$?; ls '" + path("teams/red") +
                            "'; echo ls=$?; echo uid=$(id -u)";
  std::string b = runToEnd(bob_, probe);
  EXPECT_NE(b.find("Permission denied"), std::string::npos) << b;
  EXPECT_EQ(b.find("secret\n"), std::string::npos) << b;
  EXPECT_NE(b.find("cat=1"), std::string::npos) << b;
  EXPECT_NE(b.find("not permitted"), std::string::npos) << b;
  EXPECT_NE(b.find("kill=1"), std::string::npos) << b;
  EXPECT_NE(b.find("ls=2"), std::string::npos) << b;
  EXPECT_NE(b.find("uid=" + std::to_string(bobUid)), std::string::npos) << b;
  EXPECT_EQ(b.find("uid=0\n"), std::string::npos) << b;

  // Job C, a team-mate's: shares the team's directory, but not alice's job directory or process.
  std::string c = runToEnd(carol_, probe + "; cat \"$ALLOT_TEAM_DIR/red.txt\"");
  EXPECT_NE(c.find("cat=1"), std::string::npos) << c;
  EXPECT_EQ(c.find("secret\n"), std::string::npos) << c;
  EXPECT_NE(c.find("kill=1"), std::string::npos) << c;
  EXPECT_NE(c.find("ls=0"), std::string::npos) << c;
  EXPECT_NE(c.find("shared\n"), std::string::npos) << c;

  // A survived both.
  EXPECT_FALSE(processGone(aPid));
  EXPECT_EQ(textOf(job(alice_, a), "state"), "running");
  cliJson(alice_, {"job", "cancel", std::to_string(a)});
  EXPECT_TRUE(waitForJobState(alice_, a, "cancelled"));
}

TEST_F(RunAsTest, AWorkdirIsEnteredAsTheOwnerSoAnotherTeamsOrRootsDirectoryIsRefused) {
  // Alice's code on her team's shared storage: her job starts there.
  const std::string code = path("teams/red");
  std::string mine = runToEnd(alice_, "pwd; id -u", {"--workdir", code});
  EXPECT_EQ(mine.rfind(code + "\n", 0), 0u) << mine;

  // Bob points his job at red's directory, and at one only root may enter: the shim enters the
  // directory after it has become bob, so both fail to start, saying why, and nothing ran.
  const std::string rootOnly = path("root-only");
  fs::create_directories(rootOnly);
  fs::permissions(rootOnly, fs::perms::owner_all);
  // Where bob's job would leave a mark had it run: open to everyone.
  fs::create_directories(path("drop"));
  fs::permissions(path("drop"), fs::perms::all);
  for (const std::string& dir : {code, rootOnly}) {
    const std::string marker = path("drop/ran-in-" + fs::path(dir).filename().string());
    int64_t id = submit(bob_, {"--workdir", dir}, {"sh", "-c", "touch '" + marker + "'"});
    json last;
    ASSERT_TRUE(waitForJobState(bob_, id, "failed", &last)) << last.dump();
    EXPECT_NE(textOf(last, "reason")
                  .find("cannot enter working directory " + dir + ": Permission denied"),
              std::string::npos)
        << last.dump();
    EXPECT_FALSE(fs::exists(marker)) << dir;
  }
}

TEST_F(RunAsTest, IdsAreAllocatedOnceAndKeptAcrossRestarts) {
  const int64_t alice = uidOf("alice"), bob = uidOf("bob"), red = gidOfTeam("red");
  EXPECT_GE(alice, 200000);
  EXPECT_GE(red, 300000);
  restartServer();
  EXPECT_EQ(uidOf("alice"), alice);
  EXPECT_EQ(uidOf("bob"), bob);
  EXPECT_EQ(gidOfTeam("red"), red);
  // The host shows that it switches users.
  EXPECT_EQ(textOf(host("h1"), "run_as_owner"), "required");
}

}  // namespace
}  // namespace allot::it
