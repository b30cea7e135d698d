// A submission's reply is built before its write (the audit entry keeps it) and shown after it,
// when the scheduling passes that ran meanwhile may have moved the job: refreshWait redoes only a
// queued job's wait, and only while the job itself is as the reply showed it.

#include "api/job_reply.h"

#include <gtest/gtest.h>

#include "control/cluster_test_fixture.h"

namespace allot::control {
namespace {

class JobReplyTest : public ClusterTest {
 protected:
  // A one-GPU job of alice's submitted while gpu-01's two GPUs are taken: its id, and the reply
  // and revision as the submission route builds them.
  int64_t submitBehindAFullHost(nlohmann::json& shown, uint64_t& revision) {
    joinHost("gpu-01", 2);
    submitSleep(alice_, 2);
    place();
    auto c = cluster_->submitJob(alice_, request({"true"}, 1));
    EXPECT_TRUE(c.ok()) << c.status().toString();
    if (!c.ok()) return 0;
    shown = api::jobJson(*cluster_, c->value);
    revision = cluster_->world().jobRevision(c->value.id);
    return c->value.id;
  }
};

TEST_F(JobReplyTest, APassThatLeavesTheJobQueuedRedoesItsWaitAsAWholeRebuildWould) {
  nlohmann::json shown;
  uint64_t revision = 0;
  const int64_t id = submitBehindAFullHost(shown, revision);
  EXPECT_EQ(shown["reason"], "waiting for the scheduler");
  EXPECT_TRUE(shown["position"].is_null());

  place();  // it stays queued: gpu-01 is full
  auto changed = api::refreshWait(*cluster_, alice_, id, revision, shown);
  ASSERT_TRUE(changed.has_value());
  EXPECT_TRUE(*changed);
  EXPECT_EQ(shown, api::jobJson(*cluster_, job(id)));
  EXPECT_EQ(shown["position"], 1);

  // Another pass that moves nothing leaves the text to send as it is.
  place();
  EXPECT_EQ(api::refreshWait(*cluster_, alice_, id, revision, shown), false);
}

TEST_F(JobReplyTest, AJobChangedSinceTheReplyIsRebuiltWhole) {
  nlohmann::json shown;
  uint64_t revision = 0;
  const int64_t id = submitBehindAFullHost(shown, revision);
  ASSERT_TRUE(cluster_->holdJob(alice_, id).ok());  // still queued, but held
  EXPECT_EQ(api::refreshWait(*cluster_, alice_, id, revision, shown), std::nullopt);
  EXPECT_TRUE(shown["held_by"].is_null()) << "refreshWait left it to the caller";
}

TEST_F(JobReplyTest, APlacedJobIsRebuiltWhole) {
  joinHost("gpu-01", 1);
  auto c = cluster_->submitJob(alice_, request({"true"}, 1));
  ASSERT_TRUE(c.ok());
  nlohmann::json shown = api::jobJson(*cluster_, c->value);
  const uint64_t revision = cluster_->world().jobRevision(c->value.id);
  place();
  EXPECT_EQ(api::refreshWait(*cluster_, alice_, c->value.id, revision, shown), std::nullopt);
}

TEST_F(JobReplyTest, NoOneButWhoMaySeeTheJobGetsItsWait) {
  nlohmann::json shown;
  uint64_t revision = 0;
  const int64_t id = submitBehindAFullHost(shown, revision);
  place();
  // bob is of another team; an unknown id and a stale revision are refused alike.
  EXPECT_EQ(api::refreshWait(*cluster_, bob_, id, revision, shown), std::nullopt);
  EXPECT_EQ(api::refreshWait(*cluster_, alice_, id + 100, revision, shown), std::nullopt);
  EXPECT_EQ(api::refreshWait(*cluster_, alice_, id, revision + 1, shown), std::nullopt);
  EXPECT_EQ(shown["reason"], "waiting for the scheduler");
}

}  // namespace
}  // namespace allot::control
