// Job controls through the control plane: hold and release, requeue of a running job (same id,
// not counted as a preemption), and dependencies that wait, run, or cancel a job whose
// dependency can no longer hold. Who may: the job's owner and admins; another team sees nothing.

#include <gtest/gtest.h>

#include "control/cluster.h"
#include "control/cluster_test_fixture.h"

namespace allot::control {
namespace {

using model::JobState;

class JobControlsTest : public ClusterTest {
 protected:
  int64_t after(const Principal& p, model::DependencyKind kind, int64_t on) {
    JobRequest r = request({"true"}, 1);
    r.dependencies = {{kind, on}};
    return submitRequest(p, r);
  }
};

TEST_F(JobControlsTest, AHeldJobIsNotScheduledUntilReleased) {
  joinHost("gpu-01", 2);
  const int64_t id = submit(alice_, 1);
  EXPECT_EQ(cluster_->holdJob(bob_, id).status().code(), Code::kNotFound)
      << "another team's job does not exist for bob";
  auto held = cluster_->holdJob(alice_, id);
  ASSERT_TRUE(held.ok()) << held.status().toString();
  EXPECT_EQ(held->value.heldBy, "alice");
  EXPECT_NE(findOp<store::PutJob>(*held), nullptr) << "a hold is durable";
  EXPECT_TRUE(place().empty());
  EXPECT_EQ(cluster_->waitReason(job(id)),
            "held by alice; allot job release " + std::to_string(id) + " lets it be scheduled");
  EXPECT_EQ((*cluster_->explainJob(alice_, id))["wait"]["kind"], "held");

  ASSERT_TRUE(cluster_->releaseJob(alice_, id).ok());
  EXPECT_EQ(cluster_->releaseJob(alice_, id).status().code(), Code::kFailedPrecondition)
      << "not held any more";
  EXPECT_EQ(place(), std::vector<int64_t>{id});
  EXPECT_EQ(cluster_->holdJob(alice_, id).status().code(), Code::kFailedPrecondition)
      << "only a queued job can be held";
}

TEST_F(JobControlsTest, RequeueStopsARunningJobAndPutsItBackWithItsId) {
  ActualJob run = runningJob();
  EXPECT_EQ(cluster_->requeueJob(bob_, run.id).status().code(), Code::kNotFound);
  auto asked = cluster_->requeueJob(alice_, run.id);
  ASSERT_TRUE(asked.ok()) << asked.status().toString();
  EXPECT_TRUE(asked->value.evicting);
  EXPECT_EQ(asked->pushHosts, std::set<std::string>{"gpu-01"});
  cluster_->evictionsDurable({run.id});
  reportEnded("gpu-01", run, {}, 15);
  model::Job back = job(run.id);
  EXPECT_EQ(back.state, JobState::kQueued);
  EXPECT_EQ(back.reason, "requeued by alice; waits for host gpu-01 to let go of its last run");
  EXPECT_EQ(back.preemptions, 0) << "asked for, not a preemption";
  EXPECT_TRUE(back.requeueRequestedBy.empty());
  // Until gpu-01's agent has let go of the last run, a new placement would read as that run.
  EXPECT_TRUE(place().empty());
  cluster_->agentStatus("gpu-01", {});
  EXPECT_EQ(place(), std::vector<int64_t>{run.id}) << "it runs again, same id";
  EXPECT_EQ(cluster_->requeueJob(alice_, submit(alice_, 1)).status().code(),
            Code::kFailedPrecondition)
      << "a queued job is already in the queue";
}

TEST_F(JobControlsTest, DependenciesWaitThenRunOrCancelWhenTheyCanNeverHold) {
  joinHost("gpu-01", 1);
  ActualJob first{submit(alice_, 1), ActualState::kRunning, 1, {}, {}, 1, 0, ""};
  ASSERT_EQ(place(), std::vector<int64_t>{first.id});
  cluster_->agentStatus("gpu-01", {first});
  const int64_t onSuccess = after(alice_, model::DependencyKind::kAfterOk, first.id);
  const int64_t onFailure = after(alice_, model::DependencyKind::kAfterNotOk, first.id);
  const int64_t onEnd = after(alice_, model::DependencyKind::kAfterAny, first.id);
  EXPECT_TRUE(place().empty());
  EXPECT_EQ(cluster_->waitReason(job(onSuccess)),
            "waits for job " + std::to_string(first.id) + " to succeed (afterok; it is running)");
  EXPECT_EQ((*cluster_->explainJob(alice_, onSuccess))["wait"]["kind"], "dependency");

  // Another team's job cannot be named; an unknown one neither.
  JobRequest theirs = request({"true"}, 1);
  theirs.dependencies = {{model::DependencyKind::kAfterOk, first.id}};
  auto refused = cluster_->submitJob(bob_, theirs);
  EXPECT_EQ(refused.status().code(), Code::kNotFound);
  EXPECT_EQ(refused.status().field(), "dependencies");

  reportEnded("gpu-01", first, 0);
  auto pass = cluster_->schedulePass();
  cluster_->placementsDurable(pass.value);
  EXPECT_EQ(job(onFailure).state, JobState::kCancelled);
  EXPECT_EQ(job(onFailure).reason, "dependency never satisfied: job " + std::to_string(first.id) +
                                       " succeeded, and it was to end without succeeding "
                                       "(afternotok)");
  EXPECT_EQ(pass.value.size(), 1u) << "one GPU: one of the two that may run now";
  EXPECT_TRUE(pass.value[0] == onSuccess || pass.value[0] == onEnd);
}

}  // namespace
}  // namespace allot::control
