// Host lifecycle through the control plane: draining blocks new placements, running work finishes
// (or is preempted at the deadline), a drained host is in maintenance, resume brings it back, and
// every transition is recorded; the deadline survives an allotd restart on a real SqliteStore.

#include <gtest/gtest.h>

#include <filesystem>

#include "common/secrets.h"
#include "control/cluster.h"
#include "control/cluster_test_fixture.h"
#include "store/sqlite/sqlite_store.h"

namespace allot::control {
namespace {

class DrainTest : public ClusterTest {
 protected:
  int64_t submitJob(int gpus, bool preemptible) { return submitSleep(alice_, gpus, preemptible); }
  ActualJob exited(int64_t id, std::optional<int> code, std::optional<int> signal) {
    return {id, ActualState::kExited, 1, code, signal, clock_.nowMs(), clock_.nowMs(), ""};
  }
  AdminState adminState(const std::string& name) { return host(name).adminState; }
};

TEST_F(DrainTest, DrainedHostTakesNoNewWorkUntilResumed) {
  joinHost("gpu-01", 2);
  auto drained = cluster_->hosts().drainHost(admin_, "gpu-01", 0, "kernel update");
  ASSERT_TRUE(drained.ok()) << drained.status().toString();
  // Nothing ran there, so it is drained at once.
  EXPECT_EQ(drained->value.adminState, AdminState::kMaintenance);

  int64_t id = submitJob(1, false);
  EXPECT_TRUE(place().empty());
  auto wait = cluster_->waitOf(id);
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(wait->kind, sched::WaitKind::kHostsDrained);
  EXPECT_NE(cluster_->waitReason(job(id)).find("host gpu-01 is in maintenance"), std::string::npos)
      << cluster_->waitReason(job(id));

  auto resumed = cluster_->hosts().resumeHost(admin_, "gpu-01");
  ASSERT_TRUE(resumed.ok());
  EXPECT_EQ(resumed->value.adminState, AdminState::kAvailable);
  EXPECT_EQ(resumed->value.adminReason, "");
  EXPECT_EQ(place(), std::vector<int64_t>{id});
  EXPECT_EQ(firstRank(job(id)).host, "gpu-01");
}

TEST_F(DrainTest, RunningJobFinishesThenHostIsInMaintenance) {
  joinHost("gpu-01", 2);
  int64_t id = submitJob(1, false);
  ASSERT_EQ(place().size(), 1u);
  cluster_->agentStatus("gpu-01", {running(id)});

  auto d = cluster_->hosts().drainHost(admin_, "gpu-01", 0, "");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->value.adminState, AdminState::kDraining);
  EXPECT_EQ(d->value.drainDeadline, 0);
  // With no deadline it waits as long as the job runs, and places nothing beside it.
  int64_t other = submitJob(1, false);
  clock_.advance(24 * 60 * kMin);
  EXPECT_TRUE(cluster_->hosts().enforceDrains().value.empty());
  EXPECT_TRUE(place().empty());
  EXPECT_EQ(adminState("gpu-01"), AdminState::kDraining);
  EXPECT_EQ(job(id).state, JobState::kRunning);
  EXPECT_FALSE(job(id).evicting);

  cluster_->agentStatus("gpu-01", {exited(id, 0, {})});
  EXPECT_EQ(job(id).state, JobState::kSucceeded);
  auto c = cluster_->hosts().enforceDrains();
  EXPECT_NE(findOp<store::AppendHostTransition>(c), nullptr);
  EXPECT_EQ(adminState("gpu-01"), AdminState::kMaintenance);
  EXPECT_TRUE(place().empty());
  EXPECT_EQ(job(other).state, JobState::kQueued);
}

TEST_F(DrainTest, DeadlinePreemptsWhatStillRuns) {
  joinHost("gpu-01", 2);
  int64_t spot = submitJob(1, true);
  int64_t pinned = submitJob(1, false);
  ASSERT_EQ(place().size(), 2u);
  cluster_->agentStatus("gpu-01", {running(spot), running(pinned)});

  ASSERT_TRUE(cluster_->hosts().drainHost(admin_, "gpu-01", 30 * kMin, "kernel update").ok());
  clock_.advance(30 * kMin - 1);
  EXPECT_TRUE(cluster_->hosts().enforceDrains().value.empty());
  clock_.advance(1);
  auto c = cluster_->hosts().enforceDrains();
  EXPECT_EQ(c.value, (std::vector<int64_t>{spot, pinned}));
  EXPECT_TRUE(c.pushHosts.count("gpu-01"));
  cluster_->evictionsDurable(c.value);
  EXPECT_TRUE(job(spot).evicting);
  EXPECT_TRUE(cluster_->hosts().enforceDrains().value.empty());  // asked once

  cluster_->agentStatus("gpu-01", {exited(spot, {}, 15), exited(pinned, {}, 15)});
  // Preemptible: back to the queue; the other ends preempted, saying why.
  EXPECT_EQ(job(spot).state, JobState::kQueued);
  EXPECT_EQ(job(spot).preemptions, 1);
  EXPECT_EQ(job(pinned).state, JobState::kPreempted);
  EXPECT_NE(job(pinned).reason.find("host drained: kernel update"), std::string::npos)
      << job(pinned).reason;
  cluster_->hosts().enforceDrains();
  EXPECT_EQ(adminState("gpu-01"), AdminState::kMaintenance);
  // The requeued job does not go back to the drained host.
  EXPECT_TRUE(place().empty());
}

TEST_F(DrainTest, ResumeFromFailedButNotFromRetired) {
  joinHost("gpu-01", 1);
  joinHost("gpu-02", 1);
  ASSERT_TRUE(
      cluster_->hosts().setHostAdminState(admin_, "gpu-01", AdminState::kFailed, "ECC").ok());
  int64_t id = submitJob(1, false);
  EXPECT_EQ(place(), std::vector<int64_t>{id});
  EXPECT_EQ(firstRank(job(id)).host, "gpu-02");  // not on the failed host
  ASSERT_TRUE(cluster_->hosts().resumeHost(admin_, "gpu-01").ok());
  EXPECT_EQ(adminState("gpu-01"), AdminState::kAvailable);

  ASSERT_TRUE(cluster_->hosts().setHostAdminState(admin_, "gpu-01", AdminState::kRetired, "").ok());
  auto r = cluster_->hosts().resumeHost(admin_, "gpu-01");
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(adminState("gpu-01"), AdminState::kRetired);
  EXPECT_EQ(cluster_->hosts().drainHost(admin_, "gpu-01", 0, "").status().code(),
            Code::kFailedPrecondition);
  EXPECT_EQ(cluster_->hosts()
                .setHostAdminState(admin_, "gpu-01", AdminState::kFailed, "")
                .status()
                .code(),
            Code::kFailedPrecondition);
  // Maintenance is reached by draining, not set by hand.
  EXPECT_EQ(cluster_->hosts()
                .setHostAdminState(admin_, "gpu-02", AdminState::kMaintenance, "")
                .status()
                .code(),
            Code::kInvalidArgument);
  EXPECT_EQ(adminState("gpu-02"), AdminState::kAvailable);
}

TEST_F(DrainTest, OnlyPlatformAdminsDrainAndOthersSeeNothingTheyCannotSee) {
  joinHost("gpu-01", 1);
  joinHost("gpu-02", 1);
  ASSERT_TRUE(cluster_->hosts().dedicateHost(admin_, "gpu-02", "nlp").ok());

  EXPECT_EQ(cluster_->hosts().drainHost(alice_, "gpu-01", 0, "").status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(cluster_->hosts().resumeHost(alice_, "gpu-01").status().code(),
            Code::kPermissionDenied);
  // Another team's dedicated host does not exist for alice.
  EXPECT_EQ(cluster_->hosts().drainHost(alice_, "gpu-02", 0, "").status().code(), Code::kNotFound);
  EXPECT_EQ(cluster_->hosts().hostTransitions(alice_, "gpu-02").status().code(), Code::kNotFound);
  EXPECT_EQ(cluster_->hosts().drainHost(admin_, "nope", 0, "").status().code(), Code::kNotFound);
  EXPECT_EQ(adminState("gpu-01"), AdminState::kAvailable);
  EXPECT_TRUE(cluster_->hosts().hostTransitions(admin_, "gpu-01")->empty());
}

TEST_F(DrainTest, EveryTransitionIsRecordedWithWhoWhenAndWhy) {
  joinHost("gpu-01", 1);
  int64_t id = submitJob(1, false);
  place();
  cluster_->agentStatus("gpu-01", {running(id)});
  const TimeMs drainedAt = clock_.nowMs();
  auto d = cluster_->hosts().drainHost(admin_, "gpu-01", 10 * kMin, "PSU swap");
  ASSERT_TRUE(d.ok());
  const auto* put = findOp<store::AppendHostTransition>(*d);
  ASSERT_NE(put, nullptr);
  EXPECT_EQ(put->transition.by, "admin");
  clock_.advance(kMin);
  cluster_->agentStatus("gpu-01", {exited(id, 0, {})});
  cluster_->hosts().enforceDrains();
  ASSERT_TRUE(cluster_->hosts().resumeHost(admin_, "gpu-01").ok());

  // Anyone who sees the host may read its record.
  auto log = cluster_->hosts().hostTransitions(alice_, "gpu-01");
  ASSERT_TRUE(log.ok());
  ASSERT_EQ(log->size(), 3u);
  const auto& t = *log;
  EXPECT_EQ(t[0].by, "admin");
  EXPECT_EQ(t[0].at, drainedAt);
  EXPECT_EQ(t[0].from, AdminState::kAvailable);
  EXPECT_EQ(t[0].to, AdminState::kDraining);
  EXPECT_EQ(t[0].reason, "PSU swap");
  EXPECT_EQ(t[1].by, "allotd");
  EXPECT_EQ(t[1].from, AdminState::kDraining);
  EXPECT_EQ(t[1].to, AdminState::kMaintenance);
  EXPECT_EQ(t[1].at, drainedAt + kMin);
  EXPECT_EQ(t[2].to, AdminState::kAvailable);
  EXPECT_LT(t[0].id, t[1].id);
  EXPECT_LT(t[1].id, t[2].id);
}

// The deadline and the record outlive allotd: a Cluster restarted from the same store still
// preempts at the deadline set before the restart.
class DrainRestartTest : public OneHostDurableTest {};

TEST_F(DrainRestartTest, DeadlineSurvivesARestart) {
  JobRequest r;
  r.command = {"sleep", "3600"};
  r.resources.gpus = 1;
  r.team = "vision";
  int64_t id = keep(cluster_->submitJob(admin_, r)).value.id;
  auto pass = keep(cluster_->schedulePass());
  ASSERT_EQ(pass.value.placed.size(), 1u);
  cluster_->passDurable(pass.value);
  const ActualJob run = running(id);
  keep(cluster_->agentStatus("gpu-01", {run}));
  auto d = keep(cluster_->hosts().drainHost(admin_, "gpu-01", 10 * kMin, "rack move"));
  const TimeMs deadline = d.value.drainDeadline;
  ASSERT_GT(deadline, 0);

  start();  // allotd restarts
  const auto& h = cluster_->world().hosts.at("gpu-01");
  EXPECT_EQ(h.adminState, AdminState::kDraining);
  EXPECT_EQ(h.drainDeadline, deadline);
  EXPECT_EQ(h.adminReason, "rack move");
  auto log = cluster_->hosts().hostTransitions(admin_, "gpu-01");
  ASSERT_TRUE(log.ok());
  ASSERT_EQ(log->size(), 1u);
  EXPECT_EQ((*log)[0].to, AdminState::kDraining);
  keep(cluster_->agentConnected("gpu-01", &link_, inventory(1), {run}));

  clock_.advance(10 * kMin - 1);
  EXPECT_TRUE(keep(cluster_->hosts().enforceDrains()).value.empty());
  clock_.advance(1);
  auto c = keep(cluster_->hosts().enforceDrains());
  EXPECT_EQ(c.value, std::vector<int64_t>{id});
  EXPECT_EQ(cluster_->getJob(admin_, id)->evictedFor, "host drained: rack move");

  // New transitions continue the numbering after the loaded ones.
  start();
  ActualJob killed = run;
  killed.state = ActualState::kExited;
  killed.signal = 15;
  keep(cluster_->agentConnected("gpu-01", &link_, inventory(1), {killed}));
  EXPECT_EQ(cluster_->getJob(admin_, id)->state, JobState::kPreempted);
  keep(cluster_->hosts().enforceDrains());
  start();
  log = cluster_->hosts().hostTransitions(admin_, "gpu-01");
  ASSERT_EQ(log->size(), 2u);
  EXPECT_EQ((*log)[1].to, AdminState::kMaintenance);
  EXPECT_EQ((*log)[1].id, (*log)[0].id + 1);
  EXPECT_EQ(cluster_->world().hosts.at("gpu-01").adminState, AdminState::kMaintenance);
}

}  // namespace
}  // namespace allot::control
