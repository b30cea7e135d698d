// Contours in the fleet scheduler: work runs only on hosts of its own contour, waits say when its
// contour is what keeps it waiting, and a team's per-contour GPU limit holds.

#include <gtest/gtest.h>

#include <set>

#include "sched/fleet.h"
#include "sched/fleet_test_support.h"

namespace allot::sched {
namespace {

using fleettest::placementOf;
using fleettest::run;
using fleettest::team;
using fleettest::waitKindOf;
using fleettest::waitOf;

// The shared builders, each in a contour.
HostView host(const std::string& name, int gpus, const std::string& contour) {
  HostView h = fleettest::host(name, gpus);
  h.contour = contour;
  return h;
}

Request req(int64_t id, const std::string& team, int gpus, const std::string& contour) {
  Request r = fleettest::req(id, team, gpus);
  r.contour = contour;
  return r;
}

RunningJob running(int64_t id, const std::string& team, const std::string& h, std::vector<int> gpus,
                   const std::string& contour) {
  RunningJob j = fleettest::running(id, team, h, std::move(gpus));
  j.contour = contour;
  return j;
}

// The wait of the snapshot's one pending job, which nothing places and its contour keeps waiting.
Wait contourWaitOf(const Snapshot& s) {
  const int64_t id = s.pending.at(0).id;
  auto d = run(s);
  EXPECT_TRUE(d.placements.empty());
  EXPECT_EQ(waitKindOf(d, id), WaitKind::kNoHostInContour);
  const Wait* w = waitOf(d, id);
  return w ? *w : Wait{};
}

TEST(FleetContour, JobsRunOnlyOnHostsOfTheirContour) {
  Snapshot s;
  // The prod host is the best fit for the dev job's 4 GPUs if contours were ignored.
  s.hosts = {host("dev-1", 8, "dev"), host("prod-1", 4, "prod"), host("test-1", 8, "test")};
  s.teams = {team("ml")};
  s.pending = {req(1, "ml", 4, "dev"), req(2, "ml", 2, "prod"), req(3, "ml", 8, "test")};
  auto d = run(s);
  ASSERT_EQ(d.placements.size(), 3u);
  EXPECT_EQ(placementOf(d, 1)->slices[0].host, "dev-1");
  EXPECT_EQ(placementOf(d, 2)->slices[0].host, "prod-1");
  EXPECT_EQ(placementOf(d, 3)->slices[0].host, "test-1");
}

TEST(FleetContour, NoHostOfItsContourIsItsOwnWait) {
  Snapshot s;
  s.hosts = {host("dev-1", 8, "dev")};
  s.teams = {team("ml")};
  s.pending = {req(1, "ml", 2, "prod")};
  const Wait w = contourWaitOf(s);
  EXPECT_TRUE(w.contourNever);
  EXPECT_EQ(std::string(waitKindName(w.kind)), "no_host_in_contour");
  EXPECT_NE(describeWait(w, s.pending[0]).find("no host in contour prod"), std::string::npos);

  // Too big for its contour's hosts, though another contour has a host that big.
  s.hosts.push_back(host("prod-1", 2, "prod"));
  s.pending = {req(2, "ml", 8, "prod")};
  EXPECT_EQ(waitKindOf(run(s), 2), WaitKind::kNoHostInContour);

  // Too big for every host: the contour is not what stands in the way.
  s.pending = {req(3, "ml", 16, "prod")};
  EXPECT_EQ(waitKindOf(run(s), 3), WaitKind::kTooBig);
}

TEST(FleetContour, BusyContourWhileOthersHaveRoomSaysSo) {
  Snapshot s;
  s.hosts = {host("dev-1", 8, "dev"), host("prod-1", 4, "prod")};
  s.teams = {team("ml")};
  s.running = {running(10, "ml", "prod-1", {0, 1, 2, 3}, "prod")};
  s.pending = {req(1, "ml", 2, "prod")};
  const Wait w = contourWaitOf(s);
  EXPECT_FALSE(w.contourNever);
  EXPECT_EQ(w.host, "prod-1");  // it still holds its place in line there
  EXPECT_NE(describeWait(w, s.pending[0]).find("hosts of other contours have room"),
            std::string::npos);

  // With the other contour full too, it is an ordinary wait for GPUs.
  s.running.push_back(running(11, "ml", "dev-1", {0, 1, 2, 3, 4, 5, 6, 7}, "dev"));
  EXPECT_EQ(waitKindOf(run(s), 1), WaitKind::kReserved);
}

TEST(FleetContour, GangsAndFractionsStayInTheirContour) {
  Snapshot s;
  s.hosts = {host("dev-1", 4, "dev"), host("dev-2", 4, "dev"), host("prod-1", 4, "prod"),
             host("prod-2", 4, "prod"), host("prod-3", 4, "prod")};
  s.hosts[0].gpus[0].shared = true;
  s.teams = {team("ml")};
  s.pending = {req(1, "ml", 4, "prod"), req(2, "ml", 1, "dev")};
  s.pending[0].hosts = 3;
  s.pending[1].gpuMilli = 500;
  auto d = run(s);
  ASSERT_NE(placementOf(d, 1), nullptr);
  std::set<std::string> gangHosts;
  for (const auto& sl : placementOf(d, 1)->slices) gangHosts.insert(sl.host);
  EXPECT_EQ(gangHosts, (std::set<std::string>{"prod-1", "prod-2", "prod-3"}));
  ASSERT_NE(placementOf(d, 2), nullptr);
  EXPECT_EQ(placementOf(d, 2)->slices[0].host, "dev-1");
  EXPECT_EQ(placementOf(d, 2)->slices[0].gpuMilli, 500);

  // A gang of 3 in dev, where only 2 hosts exist, waits for its contour.
  s.pending = {req(3, "ml", 1, "dev")};
  s.pending[0].hosts = 3;
  EXPECT_EQ(waitKindOf(run(s), 3), WaitKind::kNoHostInContour);

  // A fraction in test, where no host is, waits for its contour too.
  s.pending = {req(4, "ml", 1, "test")};
  s.pending[0].gpuMilli = 250;
  EXPECT_EQ(waitKindOf(run(s), 4), WaitKind::kNoHostInContour);
}

TEST(FleetContour, TeamLimitInAContourHolds) {
  Snapshot s;
  s.hosts = {host("dev-1", 8, "dev"), host("prod-1", 8, "prod")};
  s.teams = {team("ml"), team("cv")};
  s.teams[0].contourLimits["prod"] = 4;
  s.running = {running(10, "ml", "prod-1", {0, 1}, "prod")};
  // 2 more fit the limit, the next 1 does not; dev and other teams are not limited.
  s.pending = {req(1, "ml", 2, "prod"), req(2, "ml", 1, "prod"), req(3, "ml", 6, "dev"),
               req(4, "cv", 3, "prod")};
  auto d = run(s);
  EXPECT_NE(placementOf(d, 1), nullptr);
  EXPECT_EQ(placementOf(d, 2), nullptr);
  EXPECT_NE(placementOf(d, 3), nullptr);
  EXPECT_NE(placementOf(d, 4), nullptr);
  const Wait* w = waitOf(d, 2);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->kind, WaitKind::kContourLimit);
  EXPECT_EQ(w->limitMilli, 4000);
  EXPECT_EQ(w->usedMilli, 4000);
  EXPECT_EQ(std::string(waitKindName(w->kind)), "contour_limit");
  EXPECT_EQ(describeWait(*w, s.pending[1]),
            "contour limit: team ml may hold at most 4 GPUs in contour prod and holds 4");

  // A limit of 0 keeps the team out of the contour; CPU-only work holds no GPUs and still runs.
  s.teams[0].contourLimits["prod"] = 0;
  s.running.clear();
  s.pending = {req(5, "ml", 1, "prod"), req(6, "ml", 0, "prod")};
  d = run(s);
  EXPECT_EQ(waitKindOf(d, 5), WaitKind::kContourLimit);
  EXPECT_NE(placementOf(d, 6), nullptr);
}

TEST(FleetContour, GuaranteeDoesNotPreemptWorkInAnotherContour) {
  Snapshot s;
  s.hosts = {host("dev-1", 4, "dev"), host("prod-1", 4, "prod")};
  s.teams = {team("ml", 4), team("cv")};
  // cv borrows every GPU of the pool, preemptibly, in both contours.
  s.running = {running(10, "cv", "dev-1", {0, 1, 2, 3}, "dev"),
               running(11, "cv", "prod-1", {0, 1, 2, 3}, "prod")};
  s.running[0].preemptible = true;
  s.running[1].preemptible = true;
  s.running[0].startedAt = 5;  // the most recent: quota's first choice of victim
  s.pending = {req(1, "ml", 4, "prod")};
  auto d = run(s);
  for (const auto& e : d.evictions) EXPECT_NE(e.jobId, 10) << "dev work preempted for prod";
}

}  // namespace
}  // namespace allot::sched
