// Sessions' storage kinds (docs/sessions.md, "Storage") on real agents and real directories:
// scratch is removed when the session ends; local is a persistent home on its host, to which the
// owner's next local session goes back; shared is allotd's shared directory (here a plain
// directory standing in for the NFS mount), the same on every host. Usage is measured and shown.

#include <filesystem>

#include "harness.h"

namespace allot::it {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class SessionStorageTest : public TestCluster {
 protected:
  std::vector<std::string> serverFlags() const override {
    return {"--heartbeat", "1s", "--session-shared-dir", path("nfs")};
  }

  void SetUp() override {
    TestCluster::SetUp();
    fs::create_directories(path("nfs"));
    createTeam("red");
    alice_ = createUser("alice", "red");
    startAgent("h1", "sim:1xA100");
    startAgent("h2", "sim:1xA100");
    // Writes a note and 1 MiB into its storage, then stays.
    cli({"profile", "create", "box", "--team", "red", "--gpus", "1", "--storage",
         "scratch,local,shared", "--", "sh", "-c",
         "echo \"from $ALLOT_SESSION_ID\" > \"$ALLOT_STORAGE/note-$ALLOT_SESSION_ID\" && "
         "head -c 1048576 /dev/zero > \"$ALLOT_STORAGE/blob-$ALLOT_SESSION_ID\" && "
         "exec sleep infinity"});
  }

  // A box session with `storage`, once its agent has reported where its storage is and measured
  // the MiB it wrote.
  json start(const std::string& name, const std::string& storage) {
    json s = cliJson(
        alice_, {"session", "create", "--profile", "box", "--name", name, "--storage", storage});
    const std::string id = std::to_string(s["id"].get<int64_t>());
    EXPECT_TRUE(waitFor(
        [&] {
          s = cliJson(alice_, {"session", "show", id});
          return textOf(s, "state") == "running" && s["storage_used_bytes"].is_number() &&
                 s["storage_used_bytes"].get<int64_t>() >= (1 << 20);
        },
        60s))
        << s.dump();
    return s;
  }

  void stop(const json& s) {
    const std::string id = std::to_string(s["id"].get<int64_t>());
    cliJson(alice_, {"session", "stop", id});
    waitForSessionState(alice_, id, "stopped");
  }

  std::string alice_;
};

TEST_F(SessionStorageTest, ScratchIsRemovedWhenTheSessionEnds) {
  json s = start("tmp", "scratch");
  const std::string dir = textOf(s, "storage_path");
  const std::string id = std::to_string(s["id"].get<int64_t>());
  EXPECT_EQ(dir, path("agents/" + textOf(s, "host") + "/scratch/" + id));
  EXPECT_EQ(trim(readFile(dir + "/note-" + id)), "from " + id);
  stop(s);
  EXPECT_TRUE(waitFor([&] { return !fs::exists(dir); })) << dir;
}

TEST_F(SessionStorageTest, LocalIsKeptAndTheNextLocalSessionGoesBackToItsHost) {
  // The first local session goes where a job leaves room: the host the scheduler would not pick
  // first when both are free, so that going back to it is the home's doing.
  const int64_t blocker = submit(alice_, {"--gpus", "1"}, {"sleep", "600"});
  ASSERT_TRUE(waitForJobState(alice_, blocker, "running"));
  const std::string firstPick = textOf(job(alice_, blocker), "host");
  json first = start("home-1", "local");
  const std::string host = textOf(first, "host");
  ASSERT_NE(host, firstPick);
  const std::string home = path("agents/" + host + "/homes/alice");
  EXPECT_EQ(textOf(first, "storage_path"), home);
  stop(first);
  cliJson(alice_, {"job", "cancel", std::to_string(blocker)});
  ASSERT_TRUE(waitForJobState(alice_, blocker, "cancelled"));
  const std::string firstId = std::to_string(first["id"].get<int64_t>());
  EXPECT_EQ(trim(readFile(home + "/note-" + firstId)), "from " + firstId);

  // Both hosts free: local sessions in turn all go back to the home's host, which keeps what
  // each wrote.
  for (int i = 2; i <= 3; ++i) {
    json next = start("home-" + std::to_string(i), "local");
    EXPECT_EQ(textOf(next, "host"), host) << next.dump();
    EXPECT_EQ(textOf(next, "storage_path"), home);
    stop(next);
  }
  EXPECT_TRUE(fs::exists(home + "/note-" + firstId));
  // A scratch session is not drawn there: it goes where the scheduler picks.
  json other = start("tmp", "scratch");
  EXPECT_EQ(textOf(other, "host"), firstPick) << other.dump();
  stop(other);
}

TEST_F(SessionStorageTest, SharedIsTheSameDirectoryOnEveryHost) {
  json a = start("s-1", "shared");
  json b = start("s-2", "shared");
  EXPECT_NE(textOf(a, "host"), textOf(b, "host"));  // one GPU each: both hosts
  EXPECT_EQ(textOf(a, "storage_path"), path("nfs/alice"));
  EXPECT_EQ(textOf(b, "storage_path"), path("nfs/alice"));
  const std::string idA = std::to_string(a["id"].get<int64_t>());
  const std::string idB = std::to_string(b["id"].get<int64_t>());
  EXPECT_TRUE(fs::exists(path("nfs/alice/note-" + idA)));
  EXPECT_TRUE(fs::exists(path("nfs/alice/note-" + idB)));
  EXPECT_EQ(fs::status(path("nfs/alice")).permissions() & fs::perms::all, fs::perms::owner_all);
  stop(a);
  stop(b);
  EXPECT_TRUE(fs::exists(path("nfs/alice/note-" + idA)));  // persistent
}

TEST_F(SessionStorageTest, AStorageKindTheProfileOrClusterLacksIsRefusedNamingTheField) {
  cli({"profile", "create", "scratch-only", "--team", "red", "--gpus", "0", "--", "sleep",
       "infinity"});
  auto r = httpRequest(port_, "POST", "/api/v1/sessions",
                       R"({"profile":"scratch-only","storage":"local"})", alice_);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.parsed()["error"].value("field", ""), "storage") << r.body;
  r = httpRequest(port_, "POST", "/api/v1/sessions", R"({"profile":"box","storage":"nfs"})",
                  alice_);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.parsed()["error"].value("field", ""), "storage") << r.body;
  EXPECT_EQ(cliJson(alice_, {"session", "list"}).size(), 0u);
}

}  // namespace
}  // namespace allot::it
