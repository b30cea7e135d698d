// Reprovisioning a drained host with real processes: allotd sends the hook to the real agent,
// which runs the shipped example profile (deploy/ansible/profiles/default.yml) through a real
// ansible-playbook; the host comes back available with the playbook's output in `allot host log`.
// A failing script leaves the host failed, with its output.

#include "harness.h"
#include "hook_cluster.h"

namespace allot::it {
namespace {

class ReprovisionTest : public HookCluster {
 protected:
  std::vector<std::string> serverFlags() const override {
    const std::string broken = writeScript(
        "broken.sh",
        "#!/bin/sh\necho 'wiping scratch'\necho 'disk /dev/nvme9 not found' >&2\nexit 4\n");
    return flagsWithConfig("[hooks.profiles.default]\nplaybook = \"" + kExamplePlaybook +
                           "\"\n[hooks.profiles.broken]\nscript = \"" + broken + "\"\n");
  }
};

TEST_F(ReprovisionTest, ExamplePlaybookBringsADrainedHostBack) {
  if (!haveAnsible())
    GTEST_SKIP() << "ansible-playbook is not installed (scripts/install-deps.sh installs Debian's "
                    "ansible-core)";
  startAgent("gpu-a", "sim:1xA100");
  createTeam("ml");
  ASSERT_EQ(cli({"host", "dedicate", "gpu-a", "--team", "ml"}).code, 0);

  // Only a drained host.
  CliResult early = cli({"host", "reprovision", "gpu-a"});
  EXPECT_NE(early.code, 0) << early.describe();
  EXPECT_NE(early.err.find("available"), std::string::npos) << early.describe();

  ASSERT_EQ(cli({"host", "drain", "gpu-a", "--reason", "handover"}).code, 0);
  ASSERT_TRUE(waitFor([&] { return adminState("gpu-a") == "maintenance"; }));
  CliResult r = cli({"host", "reprovision", "gpu-a", "--profile", "default", "--timeout", "5m"});
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_NE(r.out.find("reprovisioning"), std::string::npos) << r.out;

  ASSERT_TRUE(
      waitFor([&] { return adminState("gpu-a") == "available"; }, std::chrono::seconds(120)))
      << host("gpu-a").dump();
  // The playbook ran on the agent's host with the vars Allot generated.
  const std::string marker = readFile(path("agents/gpu-a/host-state/profile.json"));
  json m = json::parse(marker, nullptr, false);
  ASSERT_TRUE(m.is_object()) << "marker: '" << marker << "'";
  EXPECT_EQ(textOf(m, "team"), "ml");
  EXPECT_EQ(textOf(m, "profile"), "default");
  EXPECT_EQ(textOf(m, "host"), "gpu-a");

  json log = cliJson(adminToken_, {"host", "log", "gpu-a"});
  ASSERT_GE(log.size(), 4u) << log.dump();
  const json& back = log[log.size() - 1];
  EXPECT_EQ(textOf(log[log.size() - 2], "to"), "reprovisioning");
  EXPECT_EQ(textOf(back, "to"), "available");
  EXPECT_EQ(textOf(back, "by"), "allotd");
  EXPECT_NE(textOf(back, "output").find("PLAY RECAP"), std::string::npos) << back.dump();
  CliResult shown = cli({"host", "log", "gpu-a"});
  EXPECT_NE(shown.out.find("reprovisioning -> available"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("Record the profile applied"), std::string::npos) << shown.out;
}

TEST_F(ReprovisionTest, FailingScriptLeavesTheHostFailedWithItsOutput) {
  startAgent("gpu-a", "sim:1xA100");
  ASSERT_EQ(cli({"host", "drain", "gpu-a"}).code, 0);
  ASSERT_TRUE(waitFor([&] { return adminState("gpu-a") == "maintenance"; }));
  HttpResult bad = httpRequest(port_, "POST", "/api/v1/hosts/gpu-a/reprovision",
                               R"({"profile":"gold"})", adminToken_);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("profile"), std::string::npos) << bad.body;
  bad = httpRequest(port_, "POST", "/api/v1/hosts/gpu-a/reprovision", R"({"timeout":"soon"})",
                    adminToken_);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(adminState("gpu-a"), "maintenance");

  ASSERT_EQ(cli({"host", "reprovision", "gpu-a", "--profile", "broken"}).code, 0);
  ASSERT_TRUE(waitFor([&] { return adminState("gpu-a") == "failed"; })) << host("gpu-a").dump();
  EXPECT_EQ(textOf(host("gpu-a"), "admin_reason"),
            "reprovisioning with profile broken failed: exit code 4");
  json log = cliJson(adminToken_, {"host", "log", "gpu-a"});
  const std::string output = textOf(log[log.size() - 1], "output");
  EXPECT_NE(output.find("wiping scratch"), std::string::npos) << log.dump();
  EXPECT_NE(output.find("/dev/nvme9 not found"), std::string::npos) << log.dump();

  // What a task printed may be any team's (authz::canSeeTaskOutput): a member of a team sees
  // that the shared host's task ran and failed, not what it said.
  createTeam("ml");
  const std::string erin = createUser("erin", "ml");
  json seen = cliJson(erin, {"host", "log", "gpu-a"});
  ASSERT_FALSE(seen.empty()) << seen.dump();
  EXPECT_TRUE(seen[seen.size() - 1]["output"].is_null()) << seen.dump();
  EXPECT_EQ(seen.dump().find("nvme9"), std::string::npos) << seen.dump();
}

}  // namespace
}  // namespace allot::it
