// A scheduling pass decided off the I/O thread (beginPass, the decision, finishPass) while the
// world moves on: what changed under a decision is dropped and decided again, never applied
// against a host, job or quota that is no longer what the decision saw.

#include <gtest/gtest.h>

#include "control/cluster_test_fixture.h"

namespace allot::control {
namespace {

class PassTest : public ClusterTest {
 protected:
  // The first half of a pass and its decision, as the server's scheduler thread makes it.
  struct Decided {
    sched::Snapshot snapshot;
    Result<sched::Decisions> decisions;
  };
  Decided decide() {
    auto begun = cluster_->beginPass();
    EXPECT_TRUE(begun.value.has_value());
    sched::Snapshot s = begun.value ? std::move(*begun.value) : sched::Snapshot{};
    auto d = cluster_->decider()(s);
    return {std::move(s), std::move(d)};
  }
  FinishedPass finish(Decided& d) {
    auto c = cluster_->finishPass(d.snapshot, std::move(d.decisions));
    cluster_->passDurable(c.value);
    return c.value;
  }
  void setGuarantee(const std::string& team, int gpus) {
    QuotaUpdate u;
    u.guaranteed = {{"", gpus}};
    ASSERT_TRUE(cluster_->quotas().setTeam(admin_, team, u).ok());
  }
  // On gpu-01 (2 GPUs), with nlp guaranteed both: alice's preemptible 2-GPU job borrows nlp's
  // idle guarantee and runs; its id. A claim of bob's then evicts it.
  int64_t aliceBorrowsNlpsGuarantee() {
    joinHost("gpu-01", 2);
    setGuarantee("nlp", 2);
    const int64_t borrowed = submitSleep(alice_, 2, /*preemptible=*/true);
    EXPECT_EQ(place(), std::vector<int64_t>{borrowed});
    cluster_->agentStatus("gpu-01", {running(borrowed)});
    return borrowed;
  }
};

TEST_F(PassTest, UnchangedWorldGetsTheDecisionsAsMade) {
  joinHost("gpu-01", 2);
  const int64_t id = submitSleep(alice_, 1);
  Decided d = decide();
  const FinishedPass done = finish(d);
  EXPECT_EQ(done.placed, std::vector<int64_t>{id});
  EXPECT_EQ(done.stale, 0);
  EXPECT_EQ(job(id).state, JobState::kScheduled);
}

TEST_F(PassTest, JobCancelledOrHeldWhileDecidingIsNotPlaced) {
  joinHost("gpu-01", 2);
  const int64_t cancelled = submitSleep(alice_, 1);
  const int64_t held = submitSleep(alice_, 1);
  Decided d = decide();
  ASSERT_TRUE(cluster_->cancelJob(alice_, cancelled).ok());
  ASSERT_TRUE(cluster_->holdJob(alice_, held).ok());
  const FinishedPass done = finish(d);
  EXPECT_TRUE(done.placed.empty());
  EXPECT_EQ(done.stale, 2);
  EXPECT_EQ(job(cancelled).state, JobState::kCancelled);
  EXPECT_EQ(job(held).state, JobState::kQueued);
  EXPECT_TRUE(firstRank(job(held)).host.empty());
}

TEST_F(PassTest, HostDrainedOrDedicatedWhileDecidingTakesNothingThenTheNextPassGoesElsewhere) {
  joinHost("gpu-01", 1);
  const int64_t first = submitSleep(alice_, 1);
  Decided d = decide();
  ASSERT_EQ(d.decisions->placements.size(), 1u);
  ASSERT_EQ(d.decisions->placements[0].slices[0].host, "gpu-01");
  ASSERT_TRUE(cluster_->hosts().drainHost(admin_, "gpu-01", 0, "kernel update").ok());
  const FinishedPass done = finish(d);
  EXPECT_TRUE(done.placed.empty());
  EXPECT_EQ(done.stale, 1);
  EXPECT_EQ(job(first).state, JobState::kQueued);

  // Dedicated to another team while deciding: the same.
  joinHost("gpu-02", 1);
  Decided again = decide();
  ASSERT_EQ(again.decisions->placements.size(), 1u);
  ASSERT_TRUE(cluster_->hosts().dedicateHost(admin_, "gpu-02", "nlp").ok());
  EXPECT_EQ(finish(again).stale, 1);
  EXPECT_EQ(job(first).state, JobState::kQueued);

  joinHost("gpu-03", 1);
  EXPECT_EQ(place(), std::vector<int64_t>{first});
  EXPECT_EQ(firstRank(job(first)).host, "gpu-03");
}

TEST_F(PassTest, HostGoneAwayWhileDecidingTakesNothing) {
  joinHost("gpu-01", 1);
  const int64_t id = submitSleep(alice_, 1);
  Decided d = decide();
  cluster_->agentDisconnected("gpu-01", &link_);
  EXPECT_EQ(finish(d).stale, 1);
  EXPECT_EQ(job(id).state, JobState::kQueued);
}

TEST_F(PassTest, QuotaChangedWhileDecidingDropsEveryDecision) {
  joinHost("gpu-01", 2);
  const int64_t id = submitSleep(alice_, 1);
  Decided d = decide();
  setGuarantee("nlp", 2);
  const FinishedPass done = finish(d);
  EXPECT_TRUE(done.placed.empty());
  EXPECT_EQ(done.stale, 1);
  // Decided again on the new quota: borrowing the idle guarantee is still allowed.
  EXPECT_EQ(place(), std::vector<int64_t>{id});
}

TEST_F(PassTest, JobSubmittedWhileDecidingWaitsForTheNextPass) {
  joinHost("gpu-01", 2);
  const int64_t first = submitSleep(alice_, 1);
  Decided d = decide();
  const int64_t second = submitSleep(alice_, 1);
  EXPECT_EQ(finish(d).placed, std::vector<int64_t>{first});
  EXPECT_EQ(job(second).state, JobState::kQueued);
  EXPECT_EQ(place(), std::vector<int64_t>{second});
}

TEST_F(PassTest, VictimThatEndedWhileDecidingIsNotEvicted) {
  // Bob then claims nlp's guarantee, which needs alice's job gone.
  const int64_t borrowed = aliceBorrowsNlpsGuarantee();
  const int64_t claim = submitSleep(bob_, 2);
  Decided d = decide();
  ASSERT_EQ(d.decisions->evictions.size(), 1u);
  ASSERT_EQ(d.decisions->evictions[0].jobId, borrowed);
  reportEnded("gpu-01", running(borrowed), 0);
  ASSERT_EQ(job(borrowed).state, JobState::kSucceeded);
  const FinishedPass done = finish(d);
  EXPECT_EQ(done.stale, 0);  // evict() passes over a job that has ended
  EXPECT_FALSE(job(borrowed).evicting);
  EXPECT_EQ(place(), std::vector<int64_t>{claim});
}

// Found by a review: evictions were applied whatever became of the request they made room for.
// A claim cancelled or held while the pass decided stopped its victim all the same.
TEST_F(PassTest, VictimIsNotEvictedForARequestCancelledOrHeldWhileDeciding) {
  const int64_t borrowed = aliceBorrowsNlpsGuarantee();
  for (const bool cancel : {true, false}) {
    const int64_t claim = submitSleep(bob_, 2);
    Decided d = decide();
    ASSERT_EQ(d.decisions->evictions.size(), 1u);
    ASSERT_EQ(d.decisions->evictions[0].forJob, claim);
    if (cancel) {
      ASSERT_TRUE(cluster_->cancelJob(bob_, claim).ok());
    } else {
      ASSERT_TRUE(cluster_->holdJob(bob_, claim).ok());
    }
    const FinishedPass done = finish(d);
    EXPECT_EQ(done.stale, 1) << (cancel ? "cancelled" : "held");
    EXPECT_TRUE(done.evicted.empty());
    EXPECT_FALSE(job(borrowed).evicting);
    EXPECT_EQ(job(borrowed).state, JobState::kRunning);
    EXPECT_EQ(cluster_->desiredMessage("gpu-01").find("\"cancel\":true"), std::string::npos);
  }
}

// Found by a review: the victim's hosts were not compared with what the decision saw. Drained
// while the pass decided, its host's work is the drain's to stop, with the drain's reason.
TEST_F(PassTest, VictimOnAHostDrainedWhileDecidingIsNotEvicted) {
  const int64_t borrowed = aliceBorrowsNlpsGuarantee();
  submitSleep(bob_, 2);
  Decided d = decide();
  ASSERT_EQ(d.decisions->evictions.size(), 1u);
  ASSERT_TRUE(cluster_->hosts().drainHost(admin_, "gpu-01", 30 * kMin, "repair").ok());
  const FinishedPass done = finish(d);
  EXPECT_EQ(done.stale, 1);
  EXPECT_FALSE(job(borrowed).evicting);
}

// Found by a review: a victim whose cancel was asked while the pass decided was evicted too, and
// its reason ("cancel requested by alice", "exceeded its maximum runtime") became "preempted".
// One that is cancelling when the pass starts is leaving, and no victim at all.
TEST_F(PassTest, AJobBeingCancelledIsNeverAVictim) {
  const int64_t borrowed = aliceBorrowsNlpsGuarantee();
  const int64_t claim = submitSleep(bob_, 2);
  Decided d = decide();
  ASSERT_EQ(d.decisions->evictions.size(), 1u);
  ASSERT_TRUE(cluster_->cancelJob(alice_, borrowed).ok());
  const std::string reason = job(borrowed).reason;
  const FinishedPass done = finish(d);
  EXPECT_EQ(done.stale, 1);
  EXPECT_FALSE(job(borrowed).evicting);
  EXPECT_EQ(job(borrowed).reason, reason);
  Decided again = decide();
  EXPECT_TRUE(again.decisions->evictions.empty()) << "its GPUs are coming free already";
  finish(again);
  reportEnded("gpu-01", running(borrowed), {}, 15);
  EXPECT_EQ(job(borrowed).state, JobState::kCancelled);
  EXPECT_EQ(place(), std::vector<int64_t>{claim});
}

// Found by a review: a pass's commit released every eviction not yet durable, a drain's or an
// idle reclaim's too, so a pass that committed first let their agents stop work that a crash
// would have left running in the store. Each eviction is released by its own commit now.
TEST_F(PassTest, APassReleasesOnlyItsOwnEvictions) {
  joinHost("gpu-01", 2);
  const int64_t requeued = submitSleep(alice_, 1, /*preemptible=*/true);
  ASSERT_EQ(place(), std::vector<int64_t>{requeued});
  cluster_->agentStatus("gpu-01", {running(requeued)});
  ASSERT_TRUE(cluster_->requeueJob(alice_, requeued).ok());  // its commit still under way
  submitSleep(bob_, 1);
  ASSERT_EQ(place().size(), 1u);  // a pass commits and is durable first
  EXPECT_EQ(cluster_->desiredMessage("gpu-01").find("\"cancel\":true"), std::string::npos)
      << "the requeue is not on disk yet";
  cluster_->evictionsDurable({requeued});
  EXPECT_NE(cluster_->desiredMessage("gpu-01").find("\"cancel\":true"), std::string::npos);
}

}  // namespace
}  // namespace allot::control
