// Reprovisioning through the control plane: only a host in maintenance may be reprovisioned; its
// agent is told the hook in its desired state; the agent's result brings it back to available or
// leaves it failed, the hook's output kept in the record; a late or stray result changes nothing.

#include <gtest/gtest.h>

#include "control/cluster.h"
#include "control/cluster_test_fixture.h"

namespace allot::control {
namespace {

constexpr int64_t kTimeout = 600'000;

class ReprovisionTest : public ClusterTest {
 protected:
  void adjustOptions(ClusterOptions& o) override {
    o.hookProfiles["default"] = {"playbook", "/etc/allot/ansible/profiles/default.yml"};
    o.hookProfiles["wipe"] = {"script", "/usr/local/sbin/wipe.sh"};
  }
  AdminState adminState(const std::string& host) {
    return cluster_->world().hosts.at(host).adminState;
  }
  // The hook of the task the host's desired state names; null when none.
  nlohmann::json sentHook() {
    auto msg = nlohmann::json::parse(cluster_->desiredMessage("gpu-01"));
    return msg.value("task", nlohmann::json::object()).value("hook", nlohmann::json());
  }
  // What the agent reports of a task whose hook ran.
  static model::HostTaskResult hookRan(int64_t id, bool ok, int exitCode, bool timedOut,
                                       std::string output) {
    model::HostTaskResult r;
    r.id = id;
    r.ok = ok;
    r.failedStep = ok ? "" : "hook";
    r.hook = model::HookResult{id, ok, exitCode, timedOut, output};
    r.output = std::move(output);
    return r;
  }
  int64_t startReprovision(const std::string& profile = "default") {
    joinHost("gpu-01", 1);
    EXPECT_TRUE(cluster_->hosts().drainHost(admin_, "gpu-01", 0, "handover").ok());
    auto r = cluster_->hosts().reprovisionHost(admin_, "gpu-01", profile, kTimeout);
    EXPECT_TRUE(r.ok()) << r.status().toString();
    EXPECT_EQ(r->value.adminState, AdminState::kReprovisioning);
    EXPECT_TRUE(r->pushHosts.count("gpu-01"));
    cluster_->push(r->pushHosts);
    return r->value.task->id;
  }
};

TEST_F(ReprovisionTest, RefusedUnlessInMaintenance) {
  joinHost("gpu-01", 1);
  auto r = cluster_->hosts().reprovisionHost(admin_, "gpu-01", "default", kTimeout);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("available"), std::string::npos) << r.status().message();
  EXPECT_EQ(adminState("gpu-01"), AdminState::kAvailable);
  EXPECT_TRUE(cluster_->hosts().hostTransitions(admin_, "gpu-01")->empty());

  ASSERT_TRUE(cluster_->hosts().drainHost(admin_, "gpu-01", 0, "").ok());
  // Who may, and with what.
  EXPECT_EQ(
      cluster_->hosts().reprovisionHost(alice_, "gpu-01", "default", kTimeout).status().code(),
      Code::kPermissionDenied);
  EXPECT_EQ(cluster_->hosts().reprovisionHost(admin_, "nope", "default", kTimeout).status().code(),
            Code::kNotFound);
  auto unknown = cluster_->hosts().reprovisionHost(admin_, "gpu-01", "gold", kTimeout);
  EXPECT_EQ(unknown.status().code(), Code::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("default, wipe"), std::string::npos)
      << unknown.status().message();
  EXPECT_EQ(adminState("gpu-01"), AdminState::kMaintenance);
  EXPECT_FALSE(cluster_->world().hosts.at("gpu-01").task.has_value());
}

TEST_F(ReprovisionTest, SuccessBringsTheHostBackWithTheOutput) {
  const int64_t id = startReprovision();
  nlohmann::json hook = sentHook();
  EXPECT_EQ(hook.value("id", 0), id);
  EXPECT_EQ(hook.value("kind", ""), "playbook");
  EXPECT_EQ(hook.value("path", ""), "/etc/allot/ansible/profiles/default.yml");
  EXPECT_EQ(hook.value("timeout_ms", 0), kTimeout);
  // A reprovisioning host takes no new work, and cannot be drained under the hook.
  EXPECT_EQ(cluster_->hosts().drainHost(admin_, "gpu-01", 0, "").status().code(),
            Code::kFailedPrecondition);

  auto r = hookRan(id, true, 0, false, "PLAY RECAP ok=3 failed=0\n");
  auto c = cluster_->hosts().agentTaskResult("gpu-01", r);
  EXPECT_EQ(c.value, 1);
  EXPECT_TRUE(c.pushHosts.count("gpu-01"));
  EXPECT_EQ(adminState("gpu-01"), AdminState::kAvailable);
  EXPECT_TRUE(sentHook().is_null()) << "the agent must stop being told the hook";

  auto log = *cluster_->hosts().hostTransitions(admin_, "gpu-01");
  ASSERT_EQ(log.size(), 4u);  // draining, maintenance, reprovisioning, available
  EXPECT_EQ(log[2].to, AdminState::kReprovisioning);
  EXPECT_EQ(log[2].by, "admin");
  EXPECT_EQ(log[3].from, AdminState::kReprovisioning);
  EXPECT_EQ(log[3].to, AdminState::kAvailable);
  EXPECT_EQ(log[3].by, "allotd");
  EXPECT_EQ(log[3].output, "PLAY RECAP ok=3 failed=0\n");

  // A repeated result (the agent resends until it hears) changes nothing.
  EXPECT_EQ(cluster_->hosts().agentTaskResult("gpu-01", r).value, 0);
  EXPECT_EQ(cluster_->hosts().hostTransitions(admin_, "gpu-01")->size(), 4u);
}

TEST_F(ReprovisionTest, FailureLeavesTheHostFailedWithTheOutput) {
  const int64_t id = startReprovision("wipe");
  EXPECT_EQ(sentHook().value("kind", ""), "script");
  // A result for another run is not this one's.
  EXPECT_EQ(
      cluster_->hosts().agentTaskResult("gpu-01", hookRan(id + 100, true, 0, false, "")).value, 0);
  EXPECT_EQ(adminState("gpu-01"), AdminState::kReprovisioning);

  auto c =
      cluster_->hosts().agentTaskResult("gpu-01", hookRan(id, false, 3, false, "disk not found\n"));
  EXPECT_EQ(c.value, 1);
  const auto& h = cluster_->world().hosts.at("gpu-01");
  EXPECT_EQ(h.adminState, AdminState::kFailed);
  EXPECT_EQ(h.adminReason, "reprovisioning with profile wipe failed: exit code 3");
  auto log = *cluster_->hosts().hostTransitions(admin_, "gpu-01");
  EXPECT_EQ(log.back().to, AdminState::kFailed);
  EXPECT_EQ(log.back().output, "disk not found\n");
}

TEST_F(ReprovisionTest, TimeoutSaysSo) {
  const int64_t id = startReprovision();
  cluster_->hosts().agentTaskResult("gpu-01", hookRan(id, false, -1, true, "TASK [packages]\n"));
  EXPECT_EQ(adminState("gpu-01"), AdminState::kFailed);
  EXPECT_EQ(cluster_->world().hosts.at("gpu-01").adminReason,
            "reprovisioning with profile default failed: timed out after 600s");
}

TEST_F(ReprovisionTest, DisconnectKeepsWaitingAndResumeByHandEndsTheWait) {
  const int64_t id = startReprovision();
  cluster_->agentDisconnected("gpu-01", &link_);
  EXPECT_EQ(adminState("gpu-01"), AdminState::kReprovisioning);
  // Reconnecting, the agent hears the hook again with its desired state.
  auto reconnected = cluster_->agentConnected("gpu-01", &link_, inventory(1), {});
  EXPECT_TRUE(reconnected.pushHosts.count("gpu-01"));
  EXPECT_EQ(sentHook().value("id", 0), id);

  // An admin may give up on the hook; a result arriving later changes nothing.
  ASSERT_TRUE(cluster_->hosts().resumeHost(admin_, "gpu-01").ok());
  EXPECT_FALSE(cluster_->world().hosts.at("gpu-01").task.has_value());
  EXPECT_EQ(cluster_->hosts().agentTaskResult("gpu-01", hookRan(id, false, 1, false, "late")).value,
            0);
  EXPECT_EQ(adminState("gpu-01"), AdminState::kAvailable);
}

}  // namespace
}  // namespace allot::control
