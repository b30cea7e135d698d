// The controllers on a FakeClock, without a server: a tick's steps run in their order, each
// handed to the caller to commit before the next, and nothing of a step reaches an agent before
// the caller confirms it durable.

#include "control/loops/controllers.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "control/cluster_test_fixture.h"

namespace allot::control {
namespace {

class ControllersTest : public ClusterTest {
 protected:
  // Whether the desired state of `host` tells its agent to stop `job`.
  bool toldToStop(const std::string& host, int64_t job) {
    auto msg = nlohmann::json::parse(cluster_->desiredMessage(host));
    for (const auto& j : msg.at("jobs")) {
      if (j.at("id").get<int64_t>() == job) return j.value("cancel", false);
    }
    return false;
  }
};

TEST_F(ControllersTest, ALeaseStartPreemptsOnItsHostInTheSameTickOnlyOnceDurable) {
  joinHost("gpu-01", 2);
  const int64_t bobs = submitSleep(bob_, 2);
  ASSERT_EQ(place(), (std::vector<int64_t>{bobs}));
  LeaseRequest r;
  r.team = "vision";
  r.hosts = {"gpu-01"};
  r.startAt = clock_.nowMs();
  r.endAt = r.startAt + 3'600'000;
  auto lease = cluster_->leases().create(admin_, r);
  ASSERT_TRUE(lease.ok()) << lease.status().toString();
  ASSERT_TRUE(cluster_->leases().approve(admin_, lease->value.id, "").ok());
  clock_.advance(1'000);

  Controllers controllers(*cluster_);
  std::vector<std::string> ran;
  bool sawDrain = false;
  for (auto& run : controllers.tick()) {
    Step step = run();
    ran.push_back(step.name);
    if (ran.back() == "leases") {
      EXPECT_TRUE(step.wakeScheduler) << "the host changed hands: the queue may move";
      EXPECT_FALSE(step.batch.empty());
    }
    if (ran.back() == "drains") {
      sawDrain = true;
      EXPECT_EQ(step.notifyJobs, (std::vector<int64_t>{bobs}))
          << "the lease's start drained its host with a deadline of now, in this same tick";
      EXPECT_FALSE(toldToStop("gpu-01", bobs)) << "not before the eviction is durable";
      ASSERT_TRUE(step.afterDurable);
      step.afterDurable();
      EXPECT_TRUE(toldToStop("gpu-01", bobs));
      continue;
    }
    if (step.afterDurable) step.afterDurable();
  }
  EXPECT_TRUE(sawDrain);
  EXPECT_EQ(ran,
            (std::vector<std::string>{"liveness", "max runtime", "leases", "drains", "upgrades",
                                      "health checks", "fair-share usage", "idle allocations"}));
}

TEST_F(ControllersTest, APlacementReachesItsAgentOnlyOnceDurable) {
  joinHost("gpu-01", 2);
  const int64_t job = submitSleep(alice_, 1);
  Controllers controllers(*cluster_);
  Step pass = controllers.schedulingPass();
  EXPECT_EQ(pass.placed, 1u);
  EXPECT_EQ(pass.notifyJobs, (std::vector<int64_t>{job}));
  auto before = nlohmann::json::parse(cluster_->desiredMessage("gpu-01"));
  EXPECT_TRUE(before.at("jobs").empty()) << "a placement lost in a crash must never have run";
  pass.afterDurable();
  auto after = nlohmann::json::parse(cluster_->desiredMessage("gpu-01"));
  ASSERT_EQ(after.at("jobs").size(), 1u);
  EXPECT_EQ(after["jobs"][0].at("id").get<int64_t>(), job);
}

}  // namespace
}  // namespace allot::control
