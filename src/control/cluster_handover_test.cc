// Host tasks through the control plane: a new host is commissioned (health-checked) before it
// takes work; assign and unassign hand a host over through drain, wipe, profile and health check,
// and only its new owner sees it after; a failed step fences the host; periodic health checks
// fence a host that went bad; a running task's output can be followed.

#include <gtest/gtest.h>

#include "control/cluster.h"
#include "control/cluster_test_fixture.h"

namespace allot::control {
namespace {

class HandoverTest : public ClusterTest {
 protected:
  void adjustOptions(ClusterOptions& o) override {
    o.hookProfiles["default"] = {"playbook", "/etc/allot/ansible/profiles/default.yml"};
    o.hookProfiles["vision-cuda"] = {"script", "/usr/local/sbin/vision.sh"};
    o.lifecycle.defaultProfile = "default";
    o.lifecycle.teamProfiles["vision"] = "vision-cuda";
    o.lifecycle.minDriver = "550.0";
    o.lifecycle.healthIntervalMs = 10 * kMin;
  }
  // A preemptible job of bob's, placed on gpu-01 and reported running there; its id.
  int64_t runningSpotJob() {
    const int64_t spot = submitSleep(bob_, 1, true);
    EXPECT_EQ(place(), std::vector<int64_t>{spot});
    cluster_->agentStatus("gpu-01", {running(spot)});
    return spot;
  }
  // A fresh Cluster that commissions hosts as they join, as allotd does unless told otherwise.
  void commissionNewHosts() {
    ClusterOptions o = cluster_->options();
    o.lifecycle.commission = true;
    rebuild(o);
  }
  // The task the host's desired state names; null when none.
  nlohmann::json sentTask(const std::string& name) {
    auto msg = nlohmann::json::parse(cluster_->desiredMessage(name));
    return msg.value("task", nlohmann::json());
  }
  // gpu-01 joined and under commissioning, and the agent's report that its health check failed
  // with `problems`; the test sends it. Call it before naming cluster_: it makes a new one.
  model::HostTaskResult failedCommissioningHealth(std::vector<std::string> problems) {
    commissionNewHosts();
    joinOnly("gpu-01", 2);
    cluster_->agentConnected("gpu-01", &link_, inventory(2), {});
    model::HostTaskResult r;
    r.id = host("gpu-01").task->id;
    r.failedStep = "health";
    model::HealthReport health;
    health.problems = std::move(problems);
    r.health = health;
    return r;
  }
  // The agent reporting that every step of the host's current task went well.
  Change<int> taskSucceeds(const std::string& name, int gpus = 2) {
    model::HostTaskResult r;
    r.id = host(name).task->id;
    r.ok = true;
    r.output = "wiped\nhealthy\n";
    model::HealthReport health;
    health.gpuCount = gpus;
    health.gpuModels.assign(static_cast<size_t>(gpus), "A100");
    r.health = health;
    return cluster_->hosts().agentTaskResult(name, r);
  }
};

TEST_F(HandoverTest, ANewHostIsCommissionedBeforeItTakesWork) {
  commissionNewHosts();
  joinOnly("gpu-01", 2);
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kRegistering);
  cluster_->agentConnected("gpu-01", &link_, inventory(2), {});
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kCommissioning);
  nlohmann::json task = sentTask("gpu-01");
  EXPECT_EQ(task.value("purpose", ""), "commissioning");
  EXPECT_FALSE(task.contains("wipe"));
  EXPECT_EQ(task["health"].value("min_driver", ""), "550.0");
  EXPECT_TRUE(task["health"].value("burn_in", false));

  int64_t id = submitSleep(alice_, 1, false);
  EXPECT_TRUE(place().empty()) << "a host being commissioned takes no work";

  taskSucceeds("gpu-01");
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kAvailable);
  // What it had when commissioned is what later checks expect.
  EXPECT_EQ(host("gpu-01").expectedGpuCount, 2);
  EXPECT_EQ(sentTask("gpu-01")["health"].is_null(), true);
  EXPECT_EQ(place(), std::vector<int64_t>{id});
  auto log = *cluster_->hosts().hostTransitions(admin_, "gpu-01");
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].from, AdminState::kRegistering);
  EXPECT_EQ(log[1].reason, "commissioned");
  EXPECT_EQ(log[1].output, "wiped\nhealthy\n");
}

TEST_F(HandoverTest, AFailedCommissioningFencesTheHostSayingWhy) {
  // Made first: the set-up makes cluster_ anew.
  const model::HostTaskResult r = failedCommissioningHealth(
      {"driver 535.54 is older than the required 550.0", "GPU 1: XID 79"});
  cluster_->hosts().agentTaskResult("gpu-01", r);
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kFailed);
  EXPECT_EQ(host("gpu-01").adminReason,
            "commissioning failed: health check: driver 535.54 is older than the required 550.0; "
            "GPU 1: XID 79");
}

// Attack, a host credential's holder: a task result of megabytes (an honest agent sends the last
// 256 KiB of the output, and a line of reason). It was kept whole in the host's transitions, in
// memory and on disk, and its reason written as one line of the log; now it is bounded as the
// agent bounds it, keeping the output's end.
TEST_F(HandoverTest, WhatAHostReportsOfATaskIsKeptWithinBounds) {
  model::HostTaskResult r =
      failedCommissioningHealth(std::vector<std::string>(10'000, std::string(1 << 10, 'p')));
  r.reason = std::string(3 << 20, 'r');
  r.output = std::string(3 << 20, 'o') + "\xc3\xa9the end\n";
  cluster_->hosts().agentTaskResult("gpu-01", r);
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kFailed);
  auto log = *cluster_->hosts().hostTransitions(admin_, "gpu-01");
  ASSERT_FALSE(log.empty());
  const auto& failed = log.back();
  EXPECT_LE(failed.output.size(), 256u * 1024);
  EXPECT_TRUE(failed.output.ends_with("\xc3\xa9the end\n"));
  EXPECT_LE(failed.reason.size(), 20u * 1024);
  EXPECT_LE(host("gpu-01").adminReason.size(), 20u * 1024);
}

TEST_F(HandoverTest, AssignDrainsWipesRunsTheTeamsProfileAndChangesTheOwner) {
  joinHost("gpu-01", 2);
  const int64_t spot = runningSpotJob();

  // Who may, and with what.
  EXPECT_EQ(cluster_->hosts().assignHost(alice_, "gpu-01", "vision", {}, 0, "").status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(cluster_->hosts().assignHost(admin_, "gpu-01", "nope", {}, 0, "").status().code(),
            Code::kNotFound);
  EXPECT_EQ(cluster_->hosts().assignHost(admin_, "gpu-01", "vision", {}, -1, "").status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kAvailable);
  EXPECT_FALSE(host("gpu-01").handover.has_value());

  auto a = cluster_->hosts().assignHost(admin_, "gpu-01", "vision", {}, 5 * kMin, "project X");
  ASSERT_TRUE(a.ok()) << a.status().toString();
  EXPECT_EQ(a->value.adminState, AdminState::kDraining);
  // Others' work may finish until the deadline, then is preempted (requeued: preemptible).
  clock_.advance(5 * kMin);
  auto d = cluster_->hosts().enforceDrains();
  EXPECT_EQ(d.value, std::vector<int64_t>{spot});
  cluster_->evictionsDurable(d.value);
  cluster_->agentStatus(
      "gpu-01", {{spot, ActualState::kExited, 1, {}, 15, clock_.nowMs(), clock_.nowMs(), ""}});
  EXPECT_EQ(cluster_->getJob(admin_, spot)->state, JobState::kQueued);
  d = cluster_->hosts().enforceDrains();
  EXPECT_TRUE(d.pushHosts.count("gpu-01"));

  // Drained: one task of wipe, the new owner's profile and a health check with burn-in.
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kReprovisioning);
  nlohmann::json task = sentTask("gpu-01");
  EXPECT_EQ(task.value("purpose", ""), "handover to team vision");
  EXPECT_TRUE(task["wipe"].value("home", false));
  EXPECT_EQ(task["hook"].value("profile", ""), "vision-cuda");
  EXPECT_EQ(task["hook"].value("team", ""), "vision");
  EXPECT_TRUE(task["health"].value("burn_in", false));
  EXPECT_EQ(task["health"].value("gpu_count", 0), 2);
  EXPECT_TRUE(place().empty()) << "nothing lands on a host being handed over";

  taskSucceeds("gpu-01");
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kAvailable);
  EXPECT_EQ(host("gpu-01").dedicatedTo, "vision");
  EXPECT_FALSE(host("gpu-01").handover.has_value());
  // Only its new owner sees it; the requeued job of the other team has nowhere to go.
  EXPECT_EQ(cluster_->hosts().getHost(bob_, "gpu-01").status().code(), Code::kNotFound);
  EXPECT_TRUE(cluster_->hosts().getHost(alice_, "gpu-01").ok());
  EXPECT_TRUE(place().empty());
  auto log = *cluster_->hosts().hostTransitions(admin_, "gpu-01");
  ASSERT_EQ(log.size(), 4u);  // draining, maintenance, reprovisioning, available
  EXPECT_EQ(log[0].reason, "project X");
  EXPECT_EQ(log[3].reason, "handed over to team vision");
  EXPECT_EQ(log[3].output, "wiped\nhealthy\n");

  // And back: unassign returns it to the shared pool the same way.
  auto u = cluster_->hosts().assignHost(admin_, "gpu-01", "", {}, 0, "");
  ASSERT_TRUE(u.ok()) << u.status().toString();
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kReprovisioning);  // nothing ran: at once
  EXPECT_EQ(sentTask("gpu-01")["hook"].value("profile", ""), "default");
  taskSucceeds("gpu-01");
  EXPECT_EQ(host("gpu-01").dedicatedTo, "");
  EXPECT_EQ(host("gpu-01").adminReason, "");
  EXPECT_EQ(cluster_->hosts().hostTransitions(admin_, "gpu-01")->back().reason,
            "returned to the shared pool");
  // The requeued job goes back once the agent has let go of its last run (its next report).
  cluster_->agentStatus("gpu-01", {});
  EXPECT_EQ(place(), std::vector<int64_t>{spot});
}

TEST_F(HandoverTest, AFailedWipeFencesTheHostAndKeepsItsOwner) {
  joinHost("gpu-01", 2);
  ASSERT_TRUE(cluster_->hosts().assignHost(admin_, "gpu-01", "vision", {}, 0, "").ok());
  model::HostTaskResult r;
  r.id = host("gpu-01").task->id;
  r.failedStep = "wipe";
  r.reason = "GPU 1 still has process 4711 (python) using 2048 MiB";
  r.output = "killed 1 stray process\n";
  cluster_->hosts().agentTaskResult("gpu-01", r);
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kFailed);
  EXPECT_EQ(host("gpu-01").dedicatedTo, "");
  EXPECT_EQ(host("gpu-01").adminReason,
            "handover to team vision failed: wipe: GPU 1 still has process 4711 (python) using "
            "2048 MiB");
  // Refused while failed; resumed by hand, it can be handed over again.
  EXPECT_EQ(cluster_->hosts().assignHost(admin_, "gpu-01", "vision", {}, 0, "").status().code(),
            Code::kFailedPrecondition);
  ASSERT_TRUE(cluster_->hosts().resumeHost(admin_, "gpu-01").ok());
  EXPECT_TRUE(cluster_->hosts().assignHost(admin_, "gpu-01", "vision", {}, 0, "").ok());
}

TEST_F(HandoverTest, OneHandoverAtATime) {
  joinHost("gpu-01", 1);
  const int64_t spot = runningSpotJob();
  ASSERT_TRUE(cluster_->hosts().assignHost(admin_, "gpu-01", "vision", {}, 60 * kMin, "").ok());
  // Another owner while the first handover drains: refused, naming what is under way.
  auto other = cluster_->hosts().assignHost(admin_, "gpu-01", "nlp", {}, 0, "");
  EXPECT_EQ(other.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("a handover by admin"), std::string::npos)
      << other.status().message();
  EXPECT_EQ(host("gpu-01").handover->team, "vision");
  // Draining it again by hand once the job left still goes on with the handover.
  cluster_->agentStatus(
      "gpu-01", {{spot, ActualState::kExited, 1, 0, {}, clock_.nowMs(), clock_.nowMs(), ""}});
  ASSERT_TRUE(cluster_->hosts().drainHost(admin_, "gpu-01", 0, "now").ok());
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kReprovisioning);
  ASSERT_TRUE(host("gpu-01").task.has_value());
  // Failing it by hand ends the handover: nothing keeps waiting for it.
  ASSERT_TRUE(
      cluster_->hosts().setHostAdminState(admin_, "gpu-01", AdminState::kFailed, "bad fan").ok());
  EXPECT_FALSE(host("gpu-01").handover.has_value());
  EXPECT_FALSE(cluster_->hosts().taskOutput(admin_, "gpu-01", 0)->running);
}

TEST_F(HandoverTest, TaskOutputIsForPlatformAdminsOnly) {
  joinHost("gpu-01", 1);
  ASSERT_TRUE(cluster_->hosts().assignHost(admin_, "gpu-01", "", {}, 0, "").ok());
  EXPECT_EQ(cluster_->hosts().taskOutput(alice_, "gpu-01", 0).status().code(),
            Code::kPermissionDenied);
}

TEST_F(HandoverTest, SingleGpusAreDedicatedAtOnceWithoutAWipe) {
  joinHost("gpu-01", 4);
  auto bad = cluster_->hosts().assignHost(admin_, "gpu-01", "vision", {1, 9}, 0, "");
  EXPECT_EQ(bad.status().code(), Code::kNotFound);
  EXPECT_EQ(host("gpu-01").gpus[1].dedicatedTo, "") << "a bad index changes nothing";
  auto a = cluster_->hosts().assignHost(admin_, "gpu-01", "vision", {0, 1}, 0, "");
  ASSERT_TRUE(a.ok()) << a.status().toString();
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kAvailable);
  EXPECT_EQ(host("gpu-01").gpus[0].dedicatedTo, "vision");
  EXPECT_EQ(host("gpu-01").gpus[1].dedicatedTo, "vision");
  EXPECT_FALSE(host("gpu-01").task.has_value());
  ASSERT_TRUE(cluster_->hosts().assignHost(admin_, "gpu-01", "", {0}, 0, "").ok());
  EXPECT_EQ(host("gpu-01").gpus[0].dedicatedTo, "");
  EXPECT_EQ(host("gpu-01").gpus[1].dedicatedTo, "vision");
}

TEST_F(HandoverTest, PeriodicHealthCheckFencesAHostThatWentBad) {
  joinHost("gpu-01", 2);
  EXPECT_EQ(host("gpu-01").expectedGpuCount, 2);
  auto c = cluster_->hosts().scheduleHealthChecks();
  EXPECT_EQ(c.value, 1);
  nlohmann::json task = sentTask("gpu-01");
  EXPECT_EQ(task.value("purpose", ""), "periodic health check");
  EXPECT_FALSE(task["health"].value("burn_in", true)) << "no burn-in beside running work";
  EXPECT_FALSE(task.contains("wipe"));
  EXPECT_EQ(cluster_->hosts().scheduleHealthChecks().value, 0) << "one at a time";
  taskSucceeds("gpu-01");
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kAvailable);
  EXPECT_TRUE(cluster_->hosts().hostTransitions(admin_, "gpu-01")->empty())
      << "a pass is not a transition";
  EXPECT_EQ(cluster_->hosts().scheduleHealthChecks().value, 0) << "not due yet";

  clock_.advance(10 * kMin);
  ASSERT_EQ(cluster_->hosts().scheduleHealthChecks().value, 1);
  model::HostTaskResult r;
  r.id = host("gpu-01").task->id;
  r.failedStep = "health";
  model::HealthReport health;
  health.problems = {"expected 2 GPUs, found 1"};
  r.health = health;
  cluster_->hosts().agentTaskResult("gpu-01", r);
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kFailed);
  EXPECT_EQ(host("gpu-01").adminReason,
            "periodic health check failed: health check: expected 2 GPUs, found 1");
}

TEST_F(HandoverTest, ARunningTasksOutputCanBeFollowed) {
  joinHost("gpu-01", 1);
  ASSERT_TRUE(cluster_->hosts().assignHost(admin_, "gpu-01", "vision", {}, 0, "").ok());
  const int64_t id = host("gpu-01").task->id;
  cluster_->hosts().agentTaskOutput("gpu-01", {id, 0, "wiping\n"});
  cluster_->hosts().agentTaskOutput("gpu-01",
                                    {id, 0, "wiping\nPLAY [all]\n"});  // resent after reconnect
  cluster_->hosts().agentTaskOutput("gpu-01", {id + 1, 0, "not this task\n"});
  auto v = cluster_->hosts().taskOutput(admin_, "gpu-01", 0);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->running);
  EXPECT_EQ(v->taskId, id);
  EXPECT_EQ(v->data, "wiping\nPLAY [all]\n");
  EXPECT_EQ(cluster_->hosts().taskOutput(admin_, "gpu-01", 7)->data, "PLAY [all]\n");
  EXPECT_EQ(cluster_->hosts().taskOutput(admin_, "gpu-09", 0).status().code(), Code::kNotFound);
  EXPECT_EQ(cluster_->hosts().taskOutput(admin_, "gpu-01", -1).status().code(),
            Code::kInvalidArgument);
  taskSucceeds("gpu-01", 1);
  EXPECT_FALSE(cluster_->hosts().taskOutput(admin_, "gpu-01", 0)->running);
}

TEST_F(HandoverTest, AHandoverSurvivesTheAgentReconnecting) {
  joinHost("gpu-01", 1);
  ASSERT_TRUE(cluster_->hosts().assignHost(admin_, "gpu-01", "vision", {}, 0, "").ok());
  const int64_t id = host("gpu-01").task->id;
  cluster_->agentDisconnected("gpu-01", &link_);
  auto c = cluster_->agentConnected("gpu-01", &link_, inventory(1), {});
  EXPECT_TRUE(c.pushHosts.count("gpu-01"));
  EXPECT_EQ(sentTask("gpu-01").value("id", 0), id);
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kReprovisioning);
}

// A handover outlives allotd: restarted mid-task, it still waits for the same task's result and
// completes it with the owner asked for.
class HandoverRestartTest : public OneHostDurableTest {};

TEST_F(HandoverRestartTest, AHandoverSurvivesARestartMidTask) {
  keep(cluster_->hosts().assignHost(admin_, "gpu-01", "vision", {}, 0, "project X"));
  const int64_t id = cluster_->world().hosts.at("gpu-01").task->id;

  start();  // allotd restarts
  const model::Host& h = cluster_->world().hosts.at("gpu-01");
  EXPECT_EQ(h.adminState, AdminState::kReprovisioning);
  ASSERT_TRUE(h.task.has_value());
  EXPECT_EQ(h.task->id, id);
  EXPECT_TRUE(h.task->wipe.has_value());
  ASSERT_TRUE(h.handover.has_value());
  EXPECT_EQ(h.handover->team, "vision");
  keep(cluster_->agentConnected("gpu-01", &link_, inventory(1), {}));
  auto msg = nlohmann::json::parse(cluster_->desiredMessage("gpu-01"));
  EXPECT_EQ(msg["task"].value("id", 0), id) << "the agent hears the same task again";

  model::HostTaskResult r;
  r.id = id;
  r.ok = true;
  keep(cluster_->hosts().agentTaskResult("gpu-01", r));
  start();
  EXPECT_EQ(cluster_->world().hosts.at("gpu-01").adminState, AdminState::kAvailable);
  EXPECT_EQ(cluster_->world().hosts.at("gpu-01").dedicatedTo, "vision");
  EXPECT_FALSE(cluster_->world().hosts.at("gpu-01").task.has_value());
  // Task ids go on from where they were: a new task is never mistaken for the old one.
  keep(cluster_->hosts().assignHost(admin_, "gpu-01", "", {}, 0, ""));
  EXPECT_GT(cluster_->world().hosts.at("gpu-01").task->id, id);
}

}  // namespace
}  // namespace allot::control
