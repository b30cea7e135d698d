// Handing a host between teams with real processes: `allot host assign` drains the host of
// another team's work, the real agent wipes it (the previous team's scratch, job directories,
// home data and stray processes, every GPU verified free), runs the new owner's profile (the
// shipped ansible playbook through a real ansible-playbook when installed, a script otherwise)
// and health-checks it; then the host exists for its new team only. `allot host log --follow`
// shows the task as it runs. Unassign brings it back to the shared pool the same way.

#include <filesystem>

#include "harness.h"
#include "hook_cluster.h"

namespace allot::it {
namespace {

namespace fs = std::filesystem;

class HandoverTest : public HookCluster {
 protected:
  std::vector<std::string> serverFlags() const override {
    const std::string script =
        writeScript("profile.sh", "#!/bin/sh\necho \"profile for team '$ALLOT_TEAM'\"\n");
    const std::string profile = haveAnsible() ? "playbook = \"" + kExamplePlaybook + "\"\n"
                                              : "script = \"" + script + "\"\n";
    return flagsWithConfig("[hooks.profiles.default]\n" + profile +
                           "[handover]\ndefault_profile = \"default\"\nwipe_home = true\n");
  }
  std::vector<std::string> agentFlags() const override {
    return {"--home-dir",         path("homes"),         "--scratch-dir", path("scratch"),
            "--session-home-dir", path("session-homes"), "--team-dir",    path("teams")};
  }
  // Whether host `name` comes back available in `pool` once its handover task is done (a wipe and
  // a playbook: far slower than the usual wait).
  bool waitUntilAvailableIn(const std::string& name, const std::string& pool) {
    return waitFor(
        [&] {
          json h = host(name);
          return textOf(h, "admin_state") == "available" && textOf(h, "pool") == pool;
        },
        std::chrono::seconds(120));
  }
  bool hostListed(const std::string& token, const std::string& name) {
    for (const auto& h : cliJson(token, {"host", "list"}))
      if (textOf(h, "name") == name) return true;
    return false;
  }
};

TEST_F(HandoverTest, AssignLeavesNothingOfThePreviousTeamAndUnassignReturnsTheHost) {
  fs::create_directories(path("homes"));
  startAgent("gpu-a", "sim:2xA100");
  const auto [alice, bob] = createTwoTeams("ml", "alice", "nlp", "bob");

  // The previous tenant: a job that leaves scratch data, home data and a daemon behind.
  int64_t spot = submit(bob, {"--gpus", "1", "--preemptible"},
                        {"sh", "-c",
                         "mkdir -p \"$ALLOT_SCRATCH/ckpt\" && echo weights > "
                         "\"$ALLOT_SCRATCH/ckpt/model.bin\" && echo notes > " +
                             path("homes/bob-notes.txt") + " && sleep 600"});
  ASSERT_TRUE(waitForJobState(bob, spot, "running"));
  ASSERT_TRUE(waitFor([&] { return fs::exists(path("homes/bob-notes.txt")); }));
  // A process whose environment marks it as this agent's workload (what a job's daemon inherits),
  // outside any job's process tree.
  auto stray =
      Process::spawn({"/bin/sleep", "1000"}, path("stray.out"), path("stray.err"),
                     childEnv({"ALLOT_JOB_ID=" + std::to_string(spot),
                               "ALLOT_SCRATCH=" + path("scratch") + "/" + std::to_string(spot)}));
  // What the tenant's sessions and team storage leave: a local session home, the team's
  // directory, a session's SSH host key (issue 18: the wipe used to keep all three).
  fs::create_directories(path("session-homes/bob"));
  fs::create_directories(path("teams/nlp"));
  writeFile(path("session-homes/bob/notebook.ipynb"), "{}");
  writeFile(path("teams/nlp/dataset.csv"), "a,b\n");
  fs::create_directories(path("agents/gpu-a/session-ssh/99"));
  writeFile(path("agents/gpu-a/session-ssh/99/host_key"), "PRIVATE KEY\n");
  // Something outside the wiped roots, linked from inside: it must survive.
  writeFile(path("outside.txt"), "keep me\n");
  fs::create_directories(path("scratch"));
  fs::create_symlink(path("outside.txt"), path("scratch/link-to-outside"));

  // Bad input changes nothing.
  HttpResult bad = httpRequest(port_, "POST", "/api/v1/hosts/gpu-a/assign",
                               R"({"team":"ml","deadline":"soon"})", adminToken_);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("deadline"), std::string::npos) << bad.body;
  EXPECT_EQ(
      httpRequest(port_, "POST", "/api/v1/hosts/gpu-a/assign", R"({"team":"nope"})", adminToken_)
          .status,
      404);
  EXPECT_EQ(
      httpRequest(port_, "POST", "/api/v1/hosts/gpu-a/assign", R"({"team":"ml"})", alice).status,
      403);
  EXPECT_EQ(textOf(host("gpu-a"), "admin_state"), "available");

  CliResult assigned = cli({"host", "assign", "gpu-a", "--team", "ml", "--reason", "project X"});
  ASSERT_EQ(assigned.code, 0) << assigned.describe();
  // Following the log shows the task as it runs and ends with the transition its result made.
  CliResult followed = cli({"host", "log", "gpu-a", "--follow"});
  ASSERT_EQ(followed.code, 0) << followed.describe();
  ASSERT_TRUE(waitUntilAvailableIn("gpu-a", "ml")) << host("gpu-a").dump();
  EXPECT_NE(followed.out.find("handover to team ml"), std::string::npos) << followed.out;
  EXPECT_NE(followed.out.find("running now"), std::string::npos) << followed.out;
  EXPECT_NE(followed.out.find("killed 1 stray process"), std::string::npos) << followed.out;

  // The other team's job was preempted and requeued; nothing of it is left on the host.
  json last;
  EXPECT_TRUE(waitFor([&] {
    last = job(bob, spot);
    return textOf(last, "state") == "queued";
  })) << last.dump();
  EXPECT_FALSE(stray->running()) << "the stray workload process must be killed";
  EXPECT_FALSE(fs::exists(path("homes/bob-notes.txt")));
  EXPECT_TRUE(fs::exists(path("homes"))) << "the home root itself stays";
  EXPECT_TRUE(fs::is_empty(path("scratch")));
  EXPECT_FALSE(fs::exists(path("session-homes/bob")));
  EXPECT_FALSE(fs::exists(path("teams/nlp")));
  EXPECT_FALSE(fs::exists(path("agents/gpu-a/session-ssh/99")));
  EXPECT_EQ(readFile(path("outside.txt")), "keep me\n") << "a symlink's target is not wiped";
  if (fs::exists(path("agents/gpu-a/jobs"))) {
    EXPECT_TRUE(fs::is_empty(path("agents/gpu-a/jobs")));
  }

  // The record: the whole task's output with the transition that ended it.
  json log = cliJson(adminToken_, {"host", "log", "gpu-a"});
  const json& back = log[log.size() - 1];
  EXPECT_EQ(textOf(back, "reason"), "handed over to team ml");
  const std::string output = textOf(back, "output");
  EXPECT_NE(output.find("killed"), std::string::npos) << output;
  EXPECT_NE(output.find(haveAnsible() ? "PLAY RECAP" : "profile for team 'ml'"), std::string::npos)
      << output;

  // Only its new team sees it now.
  EXPECT_TRUE(hostListed(alice, "gpu-a"));
  EXPECT_FALSE(hostListed(bob, "gpu-a"));
  CliResult hidden = cliAs(bob, {"host", "show", "gpu-a"});
  EXPECT_NE(hidden.code, 0);
  EXPECT_NE(hidden.err.find("no host 'gpu-a'"), std::string::npos) << hidden.describe();
  int64_t mine = submit(alice, {"--gpus", "2"}, {"sleep", "600"});
  ASSERT_TRUE(waitForJobState(alice, mine, "running"));
  EXPECT_EQ(textOf(job(bob, spot), "state"), "queued");

  // Unassign: the owner's work goes, the host is wiped again and returns to the shared pool.
  CliResult unassigned = cli({"host", "unassign", "gpu-a"});
  ASSERT_EQ(unassigned.code, 0) << unassigned.describe();
  ASSERT_TRUE(waitUntilAvailableIn("gpu-a", "shared")) << host("gpu-a").dump();
  EXPECT_TRUE(hostListed(bob, "gpu-a"));
  EXPECT_TRUE(waitForJobState(bob, spot, "running", &last)) << last.dump();
}

}  // namespace
}  // namespace allot::it
