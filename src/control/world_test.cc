// World's job indexes: the hash index behind job()/findJob(), and the list of jobs holding GPUs
// that the liveness tick's scans walk.
#include "control/world.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace allot::control {
namespace {

model::Job jobOn(int64_t id, std::vector<std::string> hosts, model::JobState state) {
  model::Job j;
  j.id = id;
  j.user = "alice";
  j.team = "ml";
  j.state = state;
  for (const auto& h : hosts) {
    model::Rank r;
    r.host = h;
    r.gpuIndices = {0};
    j.ranks.push_back(r);
  }
  return j;
}

// Adds a job as Cluster does: into `jobs`, then onJobChanged.
void add(World& w, const model::Job& j) {
  w.jobs[j.id] = j;
  w.onJobChanged(nullptr, j);
}

std::vector<int64_t> idsOf(const std::vector<const model::Job*>& jobs) {
  std::vector<int64_t> out;
  for (const auto* j : jobs) out.push_back(j->id);
  return out;
}

TEST(WorldTest, JobFindsEveryJobKeptAndNothingElse) {
  World w;
  add(w, jobOn(3, {}, model::JobState::kQueued));
  EXPECT_EQ(&w.job(3), &w.jobs.at(3));
  EXPECT_EQ(w.findJob(3), &w.jobs.at(3));
  EXPECT_THROW(w.job(4), std::out_of_range);
  EXPECT_EQ(w.findJob(4), nullptr);
  // One put in `jobs` whose onJobChanged has not come yet is found too.
  w.jobs[5] = jobOn(5, {}, model::JobState::kQueued);
  EXPECT_EQ(w.findJob(5), &w.jobs.at(5));
  // A job assigned again in place is the same element.
  model::Job again = w.jobs.at(3);
  again.priority = 7;
  w.jobs[3] = again;
  EXPECT_EQ(w.job(3).priority, 7);
}

TEST(WorldTest, HeldJobsListsEachJobHoldingGpusOnceAndFollowsChanges) {
  World w;
  add(w, jobOn(1, {"gpu-a"}, model::JobState::kRunning));
  add(w, jobOn(2, {"gpu-a", "gpu-b"}, model::JobState::kScheduled));  // a gang: listed once
  add(w, jobOn(3, {}, model::JobState::kQueued));
  const World& seen = w;
  EXPECT_EQ(idsOf(seen.heldJobs()), (std::vector<int64_t>{1, 2}));

  model::Job before = w.jobs.at(1);
  w.jobs.at(1).state = model::JobState::kSucceeded;
  w.onJobChanged(&before, w.jobs.at(1));
  before = w.jobs.at(3);
  w.jobs.at(3) = jobOn(3, {"gpu-b"}, model::JobState::kScheduled);
  w.onJobChanged(&before, w.jobs.at(3));
  EXPECT_EQ(idsOf(seen.heldJobs()), (std::vector<int64_t>{2, 3}));

  // A copy: a caller that ends jobs as it walks it walks every one.
  auto held = w.heldJobs();
  for (model::Job* j : held) {
    model::Job was = *j;
    j->state = model::JobState::kFailed;
    w.onJobChanged(&was, *j);
  }
  EXPECT_EQ(held.size(), 2u);
  EXPECT_TRUE(seen.heldJobs().empty());

  // A restart rebuilds it from the jobs.
  World loaded;
  store::Contents contents;
  contents.jobs = {jobOn(8, {"gpu-c"}, model::JobState::kRunning),
                   jobOn(9, {}, model::JobState::kQueued)};
  loaded.load(contents);
  EXPECT_EQ(idsOf(std::as_const(loaded).heldJobs()), std::vector<int64_t>{8});
  EXPECT_EQ(&loaded.job(8), &loaded.jobs.at(8));
  // Moved, the index still points at the jobs, which moved with it.
  World moved = std::move(loaded);
  EXPECT_EQ(&moved.job(9), &moved.jobs.at(9));
  EXPECT_EQ(idsOf(std::as_const(moved).heldJobs()), std::vector<int64_t>{8});
}

// What /metrics reports of the jobs, kept as they change rather than counted per scrape.
TEST(WorldTest, CountsJobsByStateAndPreemptionsAsTheyChange) {
  World w;
  add(w, jobOn(1, {"gpu-a"}, model::JobState::kRunning));
  add(w, jobOn(2, {}, model::JobState::kQueued));
  EXPECT_EQ(w.jobsByState().at(model::JobState::kRunning), 1);
  EXPECT_EQ(w.jobsByState().at(model::JobState::kQueued), 1);
  EXPECT_EQ(w.preemptions(), 0);
  // Preempted and requeued: one preemption, and it is queued again.
  model::Job before = w.jobs.at(1);
  w.jobs.at(1) = jobOn(1, {}, model::JobState::kQueued);
  w.jobs.at(1).preemptions = 1;
  w.onJobChanged(&before, w.jobs.at(1));
  EXPECT_EQ(w.jobsByState().at(model::JobState::kRunning), 0);
  EXPECT_EQ(w.jobsByState().at(model::JobState::kQueued), 2);
  EXPECT_EQ(w.preemptions(), 1);
  // Preempted for good: a second one.
  before = w.jobs.at(1);
  w.jobs.at(1).state = model::JobState::kPreempted;
  w.onJobChanged(&before, w.jobs.at(1));
  EXPECT_EQ(w.preemptions(), 2);
  // A reload counts the same.
  w.reindex();
  EXPECT_EQ(w.preemptions(), 2);
  EXPECT_EQ(w.jobsByState().at(model::JobState::kPreempted), 1);
  EXPECT_EQ(w.jobsByState().at(model::JobState::kQueued), 1);
}

}  // namespace
}  // namespace allot::control
