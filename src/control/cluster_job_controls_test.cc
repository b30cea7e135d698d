// Job controls through the control plane: hold and release, requeue of a running job (same id,
// not counted as a preemption), and dependencies that wait, run, or cancel a job whose
// dependency can no longer hold. Who may: the job's owner and admins; another team sees nothing.

#include <gtest/gtest.h>

#include "control/cluster.h"
#include "control/cluster_test_fixture.h"
#include "control/job_request.h"

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
  nlohmann::json desired(const std::string& host, int64_t id) {
    auto msg = nlohmann::json::parse(cluster_->desiredMessage(host));
    for (const auto& j : msg.at("jobs")) {
      if (j.at("id").get<int64_t>() == id) return j;
    }
    return nullptr;
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
  EXPECT_EQ(back.reason,
            "requeued by alice; waits for host gpu-01 to let go of its last run (or for a "
            "platform admin's `allot host fail gpu-01`)");
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

// Attack: a host's credential keeps reporting a job it was told to stop, so that the job, which
// waits for the host to let go of its last run, never runs anywhere again. An admin who sets
// the host failed releases it, and it runs on another host.
TEST_F(JobControlsTest, AHostThatNeverLetsGoOfARequeuedJobIsOverruledByFailingIt) {
  ActualJob run = runningJob();
  joinHost("gpu-02", 1);
  ASSERT_TRUE(cluster_->requeueJob(alice_, run.id).ok());
  cluster_->evictionsDurable({run.id});
  reportEnded("gpu-01", run, {}, 15);
  ASSERT_EQ(job(run.id).state, JobState::kQueued);
  cluster_->agentStatus("gpu-01", {run});  // "still running", again and again
  EXPECT_TRUE(place().empty());
  ASSERT_TRUE(cluster_->hosts()
                  .setHostAdminState(admin_, "gpu-01", model::AdminState::kFailed, "hostage")
                  .ok());
  EXPECT_EQ(place(), std::vector<int64_t>{run.id});
  EXPECT_EQ(firstRank(job(run.id)).host, "gpu-02");
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
  cluster_->passDurable(pass.value);
  EXPECT_EQ(job(onFailure).state, JobState::kCancelled);
  EXPECT_EQ(job(onFailure).reason, "dependency never satisfied: job " + std::to_string(first.id) +
                                       " succeeded, and it was to end without succeeding "
                                       "(afternotok)");
  EXPECT_EQ(pass.value.placed.size(), 1u) << "one GPU: one of the two that may run now";
  EXPECT_TRUE(pass.value.placed[0] == onSuccess || pass.value.placed[0] == onEnd);
}

}  // namespace
TEST(ArraySpecTest, ReadsSlurmsSyntaxAndRefusesTheRest) {
  auto a = parseArraySpec("0-3,7,10-14:2%2");
  ASSERT_TRUE(a.ok()) << a.status().toString();
  EXPECT_EQ(a->indices, (std::vector<int>{0, 1, 2, 3, 7, 10, 12, 14}));
  EXPECT_EQ(a->limit, 2);
  EXPECT_EQ(parseArraySpec("5")->indices, std::vector<int>{5});
  for (const char* bad : {"", "%3", "1-", "-1", "3-1", "1,,2", "0-9%0", "0-9%x", "a", "1 -2",
                          "0-100000", "0-1000", "1:2", "0-9:0"}) {
    auto r = parseArraySpec(bad);
    EXPECT_FALSE(r.ok()) << "'" << bad << "'";
    if (!r.ok()) {
      EXPECT_EQ(r.status().field(), "array") << bad;
    }
  }
}

TEST_F(JobControlsTest, AnArrayIsOneJobPerIndexRunningNoMoreThanItsLimitAtOnce) {
  joinHost("gpu-01", 8);
  JobRequest r = request({"true"}, 1);
  r.array = parseArraySpec("0-4%2").value();
  auto c = cluster_->submitJob(alice_, r);
  ASSERT_TRUE(c.ok()) << c.status().toString();
  const int64_t first = c->value.id;
  EXPECT_EQ(c->value.arrayId, first);
  EXPECT_EQ(c->batch.ops.size(), 5u) << "every task in the one write";
  for (int t = 0; t < 5; ++t) {
    EXPECT_EQ(job(first + t).arrayId, first);
    EXPECT_EQ(job(first + t).arrayIndex, t);
  }
  EXPECT_EQ(place(), (std::vector<int64_t>{first, first + 1})) << "%2: two at once";
  EXPECT_EQ(job(first + 2).state, JobState::kQueued);
  EXPECT_NE(cluster_->waitReason(job(first + 2)).find("runs at most 2 tasks at once"),
            std::string::npos)
      << cluster_->waitReason(job(first + 2));
  EXPECT_EQ((*cluster_->explainJob(alice_, first + 2))["wait"]["kind"], "array_limit");
  const auto d = desired("gpu-01", first + 1);
  EXPECT_EQ(d.at("env").at("ALLOT_ARRAY_INDEX"), "1");
  EXPECT_EQ(d.at("env").at("ALLOT_ARRAY_ID"), std::to_string(first));

  JobRequest bad = request({"true"}, 0);
  bad.workdir = "relative/dir";
  EXPECT_EQ(cluster_->submitJob(alice_, bad).status().field(), "workdir");
  bad.workdir = "/shared/alice/code\n";
  EXPECT_EQ(cluster_->submitJob(alice_, bad).status().field(), "workdir");
  bad.workdir = "/shared/alice/code";
  bad.array = JobRequest::Array{{3, 1}, 0};
  EXPECT_EQ(cluster_->submitJob(alice_, bad).status().field(), "array") << "not ascending";
}

}  // namespace allot::control
