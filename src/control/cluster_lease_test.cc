// Leases through the control plane on a FakeClock: who may ask, approve and see; conflicts named;
// holds that let only work ending in time start; notices and preemption at the start; hosts
// handed to the team at the start and back to the pool at the end; and a start that allotd was
// down for, on a real SqliteStore.

#include <gtest/gtest.h>

#include "control/cluster.h"
#include "control/cluster_test_fixture.h"

namespace allot::control {
namespace {

using model::LeaseState;

model::HostTaskResult taskOk(int64_t id) {
  model::HostTaskResult r;
  r.id = id;
  r.ok = true;
  return r;
}

class LeaseTest : public TeamAdminClusterTest {
 protected:
  LeaseRequest hostsLease(std::vector<std::string> hosts, TimeMs in, TimeMs length,
                          std::string team = "vision") {
    LeaseRequest r;
    r.team = std::move(team);
    r.hosts = std::move(hosts);
    r.startAt = clock_.nowMs() + in;
    r.endAt = r.startAt + length;
    r.reason = "training run";
    return r;
  }
  // A lease asked by carol and approved by the platform admin; its id.
  int64_t approvedLease(std::vector<std::string> hosts, TimeMs in, TimeMs length) {
    auto c = cluster_->leases().create(carol_, hostsLease(std::move(hosts), in, length));
    EXPECT_TRUE(c.ok()) << c.status().toString();
    auto a = cluster_->leases().approve(admin_, c->value.id, "");
    EXPECT_TRUE(a.ok()) << a.status().toString();
    return c->value.id;
  }
  int64_t submitFor(const Principal& p, int gpus, TimeMs maxRuntime) {
    return submitSleep(p, gpus, false, maxRuntime);
  }
  // Completes the host's handover task as a healthy agent would.
  void finishTask(const std::string& name) {
    ASSERT_TRUE(host(name).task.has_value()) << name << " runs no task";
    cluster_->hosts().agentTaskResult(name, taskOk(host(name).task->id));
  }
  model::Lease lease(int64_t id) { return *cluster_->leases().get(admin_, id); }
  std::vector<model::Event> eventsOf(model::EventKind kind) {
    EventFilter f;
    f.kind = kind;
    return *cluster_->eventLog().list(admin_, f);
  }
};

TEST_F(LeaseTest, RequestedThenApprovedOrRejected) {
  joinHost("gpu-01", 2);
  joinHost("gpu-02", 2);
  auto c = cluster_->leases().create(carol_, hostsLease({"gpu-01"}, kHour, 2 * kHour));
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_EQ(c->value.state, LeaseState::kRequested);
  EXPECT_NE(findOp<store::PutLease>(*c), nullptr) << "the request must be written";
  auto a = cluster_->leases().approve(admin_, c->value.id, "ok");
  ASSERT_TRUE(a.ok()) << a.status().toString();
  EXPECT_EQ(a->value.state, LeaseState::kApproved);
  EXPECT_EQ(a->value.decidedBy, "admin");
  // Approving twice is refused.
  EXPECT_EQ(cluster_->leases().approve(admin_, c->value.id, "").status().code(),
            Code::kFailedPrecondition);

  auto other = cluster_->leases().create(carol_, hostsLease({"gpu-02"}, kHour, kHour));
  ASSERT_TRUE(other.ok());
  auto r = cluster_->leases().reject(admin_, other->value.id, "not this week");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->value.state, LeaseState::kRejected);
  EXPECT_EQ(r->value.decision, "not this week");
  EXPECT_EQ(eventsOf(model::EventKind::kLeaseChanged).size(), 4u);
}

TEST_F(LeaseTest, TeamAdminAsksMemberCannotOtherTeamSeesNothing) {
  joinHost("gpu-01", 2);
  auto byMember = cluster_->leases().create(alice_, hostsLease({"gpu-01"}, kHour, kHour));
  EXPECT_EQ(byMember.status().code(), Code::kPermissionDenied);
  auto byOther = cluster_->leases().create(bob_, hostsLease({"gpu-01"}, kHour, kHour));
  EXPECT_EQ(byOther.status().code(), Code::kNotFound);
  // A platform admin may ask for any team.
  EXPECT_TRUE(cluster_->leases().create(admin_, hostsLease({"gpu-01"}, kHour, kHour, "nlp")).ok());

  auto c = cluster_->leases().create(carol_, hostsLease({"gpu-01"}, 3 * kHour, kHour));
  ASSERT_TRUE(c.ok());
  const int64_t id = c->value.id;
  EXPECT_EQ(cluster_->leases().approve(carol_, id, "").status().code(), Code::kPermissionDenied);
  EXPECT_EQ(cluster_->leases().approve(bob_, id, "").status().code(), Code::kNotFound);
  EXPECT_EQ(cluster_->leases().end(bob_, id, "").status().code(), Code::kNotFound);
  EXPECT_TRUE(cluster_->leases().get(alice_, id).ok()) << "members see their team's leases";
  EXPECT_EQ(cluster_->leases().get(bob_, id).status().code(), Code::kNotFound);
  EXPECT_EQ(cluster_->leases().list(alice_).size(), 1u);
  EXPECT_EQ(cluster_->leases().list(bob_).size(), 1u) << "bob sees only nlp's";
  EXPECT_EQ(cluster_->leases().list(admin_).size(), 2u);
}

TEST_F(LeaseTest, BadInputIsRefusedNamingTheField) {
  joinHost("gpu-01", 2);
  auto r = hostsLease({"gpu-01"}, kHour, kHour);
  r.endAt = r.startAt;
  EXPECT_EQ(cluster_->leases().create(carol_, r).status().field(), "end");
  r = hostsLease({"gpu-01"}, -kHour, 3 * kHour);
  EXPECT_EQ(cluster_->leases().create(carol_, r).status().field(), "start");
  r = hostsLease({"gpu-09"}, kHour, kHour);
  EXPECT_EQ(cluster_->leases().create(carol_, r).status().field(), "hosts");
  r = hostsLease({"gpu-01"}, kHour, kHour);
  r.count = 2;
  EXPECT_EQ(cluster_->leases().create(carol_, r).status().field(), "hosts");
  r = hostsLease({}, kHour, kHour);
  EXPECT_EQ(cluster_->leases().create(carol_, r).status().field(), "count");
  EXPECT_TRUE(cluster_->leases().list(admin_).empty()) << "a refused request changes nothing";
}

TEST_F(LeaseTest, ConflictsAreRefusedNamingTheLease) {
  joinHost("gpu-01", 2);
  joinHost("gpu-02", 2);
  const int64_t first = approvedLease({"gpu-01"}, kHour, 2 * kHour);
  auto clash = cluster_->leases().create(admin_, hostsLease({"gpu-01"}, 2 * kHour, kHour, "nlp"));
  ASSERT_EQ(clash.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(clash.status().message().find("host gpu-01 is leased from "), std::string::npos)
      << clash.status().message();
  EXPECT_NE(clash.status().message().find("(lease " + std::to_string(first) + ")"),
            std::string::npos);
  // Back to back is no conflict.
  EXPECT_TRUE(
      cluster_->leases().create(admin_, hostsLease({"gpu-01"}, 3 * kHour, kHour, "nlp")).ok());

  // A count lease that needs both hosts: only one is free then.
  LeaseRequest count = hostsLease({}, kHour, kHour, "nlp");
  count.count = 2;
  auto short_ = cluster_->leases().create(admin_, count);
  ASSERT_EQ(short_.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(short_.status().message().find("2 match and 1 of them are free"), std::string::npos)
      << short_.status().message();
  EXPECT_NE(short_.status().message().find("lease " + std::to_string(first)), std::string::npos);

  // Extending into another approved lease is refused too.
  const int64_t later = approvedLease({"gpu-02"}, 5 * kHour, kHour);
  const int64_t early = approvedLease({"gpu-02"}, kHour, kHour);
  auto ext = cluster_->leases().extend(admin_, early, clock_.nowMs() + 6 * kHour);
  ASSERT_EQ(ext.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(ext.status().message().find("(lease " + std::to_string(later) + ")"),
            std::string::npos);
  EXPECT_TRUE(cluster_->leases().extend(admin_, early, clock_.nowMs() + 4 * kHour).ok());
}

TEST_F(LeaseTest, CountLeasePicksMatchingHostsAtApproval) {
  joinHost("gpu-01", 2);
  joinHost("gpu-02", 4);
  LeaseRequest r = hostsLease({}, kHour, kHour);
  r.count = 1;
  r.minGpus = 4;
  r.gpuModel = "A100";
  auto c = cluster_->leases().create(carol_, r);
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_TRUE(c->value.hosts.empty()) << "hosts are picked at approval";
  auto a = cluster_->leases().approve(admin_, c->value.id, "");
  ASSERT_TRUE(a.ok()) << a.status().toString();
  EXPECT_EQ(a->value.hosts, std::vector<std::string>{"gpu-02"});
}

TEST_F(LeaseTest, HeldHostTakesOnlyWorkThatEndsInTime) {
  joinHost("gpu-01", 2);
  const int64_t id = approvedLease({"gpu-01"}, kHour, kHour);
  const int64_t shortJob = submitFor(bob_, 1, 30 * kMin);
  const int64_t longJob = submitFor(bob_, 1, 2 * kHour);
  const int64_t unbounded = submitFor(bob_, 1, 0);
  EXPECT_EQ(place(), std::vector<int64_t>{shortJob});
  for (int64_t j : {longJob, unbounded}) {
    auto wait = cluster_->waitOf(j);
    ASSERT_TRUE(wait.has_value());
    EXPECT_EQ(wait->kind, sched::WaitKind::kHeldForLease);
    EXPECT_EQ(wait->lease, id);
    const std::string reason = cluster_->waitReason(*cluster_->getJob(admin_, j));
    EXPECT_NE(reason.find("held for lease " + std::to_string(id) + ", which starts"),
              std::string::npos)
        << reason;
  }
  EXPECT_EQ(cluster_->leases().onHost("gpu-01")->id, id);
}

// A pass decides on a snapshot, and its decisions are applied up to a pass later. By then a job
// may no longer end before the lease holding its host starts, or a lease may have begun to hold
// the host: such a placement is dropped, and the next pass decides on the world as it is.
TEST_F(LeaseTest, APlacementIsCheckedAgainstTheLeaseHoldsOfWhenItIsApplied) {
  joinHost("gpu-01", 2);
  approvedLease({"gpu-01"}, kHour, kHour);
  const int64_t justInTime = submitFor(bob_, 1, kHour - 1'000);  // ends 1 s before the lease
  auto begun = cluster_->beginPass();
  ASSERT_TRUE(begun.value.has_value());
  auto decided = cluster_->decider()(*begun.value);
  ASSERT_TRUE(decided.ok());
  ASSERT_EQ(decided->placements.size(), 1u);
  clock_.advance(2'000);  // the decision's own time
  auto done = cluster_->finishPass(*begun.value, std::move(decided));
  cluster_->passDurable(done.value);
  EXPECT_TRUE(done.value.placed.empty());
  EXPECT_EQ(done.value.stale, 1);
  EXPECT_TRUE(place().empty()) << "it no longer ends before the lease starts";
  EXPECT_EQ(cluster_->waitOf(justInTime)->kind, sched::WaitKind::kHeldForLease);
  ASSERT_TRUE(cluster_->cancelJob(bob_, justInTime).ok());

  // A lease that comes within the hold's horizon while the pass decides.
  joinHost("gpu-02", 2);
  const TimeMs horizon = 24 * kHour;
  auto c = cluster_->leases().create(carol_, hostsLease({"gpu-02"}, horizon + 1'000, kHour));
  ASSERT_TRUE(c.ok()) << c.status().toString();
  ASSERT_TRUE(cluster_->leases().approve(admin_, c->value.id, "").ok());
  const int64_t unbounded = submitFor(bob_, 1, 0);
  begun = cluster_->beginPass();
  ASSERT_TRUE(begun.value.has_value());
  decided = cluster_->decider()(*begun.value);
  ASSERT_TRUE(decided.ok());
  ASSERT_EQ(decided->placements.size(), 1u);
  EXPECT_EQ(decided->placements[0].slices[0].host, "gpu-02");
  clock_.advance(2'000);
  done = cluster_->finishPass(*begun.value, std::move(decided));
  cluster_->passDurable(done.value);
  EXPECT_TRUE(done.value.placed.empty());
  EXPECT_TRUE(place().empty()) << "gpu-02 is held for its lease now";
  EXPECT_EQ(cluster_->waitOf(unbounded)->kind, sched::WaitKind::kHeldForLease);
}

TEST_F(LeaseTest, StartPreemptsWithNoticeAndAssignsTheHosts) {
  joinHost("gpu-01", 2);
  joinHost("gpu-02", 2);
  // Running before the lease was approved, without a max runtime: it will be in the way.
  JobRequest req;
  req.command = {"sleep", "3600"};
  req.resources.gpus = 2;
  req.preemptible = true;
  auto job = cluster_->submitJob(bob_, req);
  ASSERT_TRUE(job.ok());
  const int64_t jobId = job->value.id;
  ASSERT_EQ(place().size(), 1u);
  const std::string busy = firstRank(*cluster_->getJob(admin_, jobId)).host;
  const std::string idle = busy == "gpu-01" ? "gpu-02" : "gpu-01";
  cluster_->agentStatus(busy, {{jobId, ActualState::kRunning, 1, {}, {}, clock_.nowMs(), 0, ""}});

  const int64_t id = approvedLease({busy, idle}, kHour, kHour);
  EXPECT_EQ(cluster_->leases().enforce().value, 0) << "no notice an hour before";
  clock_.advance(50 * kMin);
  auto notice = cluster_->leases().enforce();
  EXPECT_EQ(notice.value, 1);
  EXPECT_NE(findOp<store::PutLease>(notice), nullptr) << "who was told is kept";
  auto notices = eventsOf(model::EventKind::kLeasePreemptionNotice);
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0].jobId, jobId);
  EXPECT_EQ(notices[0].team, "nlp");
  // nlp's owners learn that the host is leased, not to which team.
  EXPECT_NE(notices[0].message.find("leased to another team (lease " + std::to_string(id) + ")"),
            std::string::npos)
      << notices[0].message;
  EXPECT_EQ(notices[0].message.find("vision"), std::string::npos) << notices[0].message;
  EXPECT_EQ(cluster_->leases().enforce().value, 0) << "told once";

  clock_.advance(10 * kMin);
  auto start = cluster_->leases().enforce();
  EXPECT_EQ(start.value, 1);
  EXPECT_EQ(lease(id).state, LeaseState::kActive);
  EXPECT_EQ(lease(id).startedAt, lease(id).startAt);
  // The idle host goes straight to its handover task; the busy one drains at once.
  EXPECT_EQ(host(idle).adminState, AdminState::kReprovisioning);
  ASSERT_TRUE(host(busy).handover.has_value());
  EXPECT_EQ(host(busy).handover->leaseId, id);
  auto drains = cluster_->hosts().enforceDrains();
  EXPECT_EQ(drains.value, std::vector<int64_t>{jobId});
  cluster_->evictionsDurable(drains.value);
  cluster_->agentStatus(
      busy, {{jobId, ActualState::kExited, 1, {}, 15, clock_.nowMs(), clock_.nowMs(), ""}});
  EXPECT_EQ(cluster_->getJob(admin_, jobId)->state, model::JobState::kQueued) << "requeued";
  // The next tick finds the host empty: maintenance, then its handover task.
  cluster_->hosts().enforceDrains();
  EXPECT_EQ(host(busy).adminState, AdminState::kReprovisioning);
  finishTask(busy);
  finishTask(idle);
  for (const auto& h : {busy, idle}) {
    EXPECT_EQ(host(h).adminState, AdminState::kAvailable);
    EXPECT_EQ(host(h).dedicatedTo, "vision");
  }
  // Other teams no longer see the hosts.
  EXPECT_EQ(cluster_->hosts().getHost(bob_, busy).status().code(), Code::kNotFound);
}

TEST_F(LeaseTest, EndReturnsHostsToThePoolAndSkipsFailedHosts) {
  joinHost("gpu-01", 2);
  joinHost("gpu-02", 2);
  const int64_t id = approvedLease({"gpu-01", "gpu-02"}, kHour, kHour);
  ASSERT_TRUE(
      cluster_->hosts().setHostAdminState(admin_, "gpu-02", AdminState::kFailed, "bad fan").ok());
  clock_.advance(kHour);
  cluster_->leases().enforce();
  EXPECT_EQ(lease(id).skipped, std::vector<std::string>{"gpu-02: failed"});
  finishTask("gpu-01");
  EXPECT_EQ(host("gpu-01").dedicatedTo, "vision");

  clock_.advance(kHour);
  auto end = cluster_->leases().enforce();
  EXPECT_EQ(end.value, 1);
  EXPECT_EQ(lease(id).state, LeaseState::kEnded);
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kReprovisioning) << "wiped on the way back";
  finishTask("gpu-01");
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kAvailable);
  EXPECT_EQ(host("gpu-01").dedicatedTo, "");
  EXPECT_FALSE(cluster_->leases().onHost("gpu-01").has_value());
}

TEST_F(LeaseTest, AHostDedicatedBeforeTheLeaseGoesBackToItsTeamAtTheEnd) {
  joinHost("gpu-01", 2);
  joinHost("gpu-02", 2);
  // gpu-02 is already vision's own; vision leases it with a pool host for an hour.
  ASSERT_TRUE(cluster_->hosts().dedicateHost(admin_, "gpu-02", "vision").ok());
  const int64_t id = approvedLease({"gpu-01", "gpu-02"}, kHour, kHour);
  clock_.advance(kHour);
  cluster_->leases().enforce();
  finishTask("gpu-01");
  finishTask("gpu-02");
  EXPECT_EQ(host("gpu-02").dedicatedTo, "vision");
  EXPECT_EQ(lease(id).dedicatedBefore.at("gpu-02"), "vision");

  clock_.advance(kHour);
  cluster_->leases().enforce();
  finishTask("gpu-01");
  finishTask("gpu-02");
  EXPECT_EQ(host("gpu-01").dedicatedTo, "") << "the pool's host goes back to the pool";
  EXPECT_EQ(host("gpu-02").dedicatedTo, "vision") << "vision keeps its own host, not the pool";
}

TEST_F(LeaseTest, ApprovalImpactListsTheWorkItsStartWouldStopAndChangesNothing) {
  joinHost("gpu-01", 2);
  const int64_t running = submitFor(bob_, 1, 0);
  const int64_t ending = submitFor(bob_, 1, 10 * kMin);  // ends before the start: spared
  ASSERT_EQ(place().size(), 2u);
  auto asked = cluster_->leases().create(carol_, hostsLease({"gpu-01"}, kHour, kHour));
  ASSERT_TRUE(asked.ok()) << asked.status().toString();
  const int64_t id = asked->value.id;

  auto impact = cluster_->leases().approvalImpact(admin_, id);
  ASSERT_TRUE(impact.ok()) << impact.status().toString();
  ASSERT_EQ(impact->stopped.size(), 1u);
  EXPECT_EQ(impact->stopped[0].id, running);
  EXPECT_EQ(impact->stopped[0].team, "nlp");
  EXPECT_EQ(impact->stopped[0].host, "gpu-01");
  EXPECT_EQ(impact->stopsAt, lease(id).startAt);
  EXPECT_NE(impact->stopped[0].id, ending);
  EXPECT_EQ(lease(id).state, LeaseState::kRequested) << "asking changes nothing";
  // Only platform admins decide, and so only they see it; another team's lease is not there.
  EXPECT_EQ(cluster_->leases().approvalImpact(carol_, id).status().code(), Code::kPermissionDenied);
  EXPECT_EQ(cluster_->leases().approvalImpact(bob_, id).status().code(), Code::kNotFound);

  // A drain with a deadline stops what still runs then; without one, nothing.
  TimeMs stopsAt = 0;
  auto drain = cluster_->hosts().drainImpact(admin_, "gpu-01", 30 * kMin, &stopsAt);
  ASSERT_TRUE(drain.ok());
  ASSERT_EQ(drain->size(), 1u);
  EXPECT_EQ((*drain)[0].id, running);
  EXPECT_TRUE(cluster_->hosts().drainImpact(admin_, "gpu-01", 0, &stopsAt)->empty());
  EXPECT_EQ(cluster_->hosts().drainImpact(bob_, "gpu-01", kMin, &stopsAt).status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kAvailable) << "asking changes nothing";
}

TEST_F(LeaseTest, BackToBackLeasesHandTheHostOnWithoutTakingItFromTheNext) {
  joinHost("gpu-01", 2);
  // The later lease was asked first, so it comes first in every tick.
  const int64_t later = approvedLease({"gpu-01"}, 2 * kHour, kHour);
  const int64_t earlier = approvedLease({"gpu-01"}, kHour, kHour);
  clock_.advance(kHour);
  cluster_->leases().enforce();
  finishTask("gpu-01");
  EXPECT_EQ(lease(earlier).state, LeaseState::kActive);

  clock_.advance(kHour);  // one ends, the other starts, in the same tick
  cluster_->leases().enforce();
  EXPECT_EQ(lease(earlier).state, LeaseState::kEnded);
  EXPECT_EQ(lease(later).state, LeaseState::kActive);
  ASSERT_TRUE(host("gpu-01").handover.has_value());
  EXPECT_EQ(host("gpu-01").handover->leaseId, later) << "the ended lease must not take it back";
  EXPECT_EQ(lease(earlier).returned, std::vector<std::string>{"gpu-01"});
  finishTask("gpu-01");
  cluster_->leases().enforce();
  EXPECT_EQ(host("gpu-01").dedicatedTo, "vision");
  EXPECT_FALSE(host("gpu-01").handover.has_value());
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kAvailable);
}

TEST_F(LeaseTest, AHostBusyAtTheStartIsClaimedOnceFree) {
  joinHost("gpu-01", 2);
  const int64_t id = approvedLease({"gpu-01"}, kHour, 2 * kHour);
  // An admin's handover is under way when the lease starts.
  ASSERT_TRUE(cluster_->hosts().assignHost(admin_, "gpu-01", "", {}, 0, "reimage").ok());
  clock_.advance(kHour);
  cluster_->leases().enforce();
  EXPECT_TRUE(lease(id).skipped.empty()) << "busy is not skipped: it is tried again";
  EXPECT_TRUE(lease(id).claimed.empty());
  finishTask("gpu-01");
  clock_.advance(1000);
  cluster_->leases().enforce();
  EXPECT_EQ(lease(id).claimed, std::vector<std::string>{"gpu-01"});
  finishTask("gpu-01");
  EXPECT_EQ(host("gpu-01").dedicatedTo, "vision");
}

TEST_F(LeaseTest, ALeaseEndedWhileAllotdWasDownTouchesNoHost) {
  joinHost("gpu-01", 2);
  const int64_t id = approvedLease({"gpu-01"}, kHour, kHour);
  clock_.advance(3 * kHour);
  cluster_->leases().enforce();
  EXPECT_EQ(lease(id).state, LeaseState::kEnded);
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kAvailable);
  EXPECT_FALSE(host("gpu-01").task.has_value()) << "nothing was handed over, nothing to wipe";
}

TEST_F(LeaseTest, EarlyEndReturnsHostsAndEndBeforeStartCancels) {
  joinHost("gpu-01", 2);
  const int64_t id = approvedLease({"gpu-01"}, kHour, 4 * kHour);
  clock_.advance(kHour);
  cluster_->leases().enforce();
  finishTask("gpu-01");
  auto e = cluster_->leases().end(carol_, id, "done early");
  ASSERT_TRUE(e.ok()) << e.status().toString();
  EXPECT_EQ(e->value.state, LeaseState::kEnded);
  EXPECT_EQ(e->value.endAt, clock_.nowMs());
  finishTask("gpu-01");
  EXPECT_EQ(host("gpu-01").dedicatedTo, "");

  const int64_t next = approvedLease({"gpu-01"}, kHour, kHour);
  auto cancelled = cluster_->leases().end(carol_, next, "");
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->value.state, LeaseState::kCancelled);
  clock_.advance(kHour);
  EXPECT_EQ(cluster_->leases().enforce().value, 0);
  EXPECT_EQ(host("gpu-01").adminState, AdminState::kAvailable);
}

TEST_F(LeaseTest, AutoApprovePolicyWithinLimits) {
  LeaseOptions o;
  o.autoApprove = true;
  o.maxHosts = 1;
  // A fresh cluster with the policy: options are fixed at construction.
  ClusterOptions opts = cluster_->options();
  opts.leases = o;
  rebuild(opts);
  joinHost("gpu-01", 2);
  joinHost("gpu-02", 2);
  auto one = cluster_->leases().create(admin_, hostsLease({"gpu-01"}, kHour, kHour));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->value.state, LeaseState::kApproved);
  EXPECT_EQ(one->value.decidedBy, "allotd");
  auto two = cluster_->leases().create(admin_, hostsLease({"gpu-01", "gpu-02"}, 3 * kHour, kHour));
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->value.state, LeaseState::kRequested) << "beyond max_hosts: an admin decides";
}

class LeaseRestartTest : public DurableClusterTest {};

TEST_F(LeaseRestartTest, StartMissedWhileDownHappensWhenBack) {
  start();
  bootstrap({"vision"});
  keepJoinedHost("gpu-01", 2);
  LeaseRequest r;
  r.team = "vision";
  r.hosts = {"gpu-01"};
  r.startAt = clock_.nowMs() + kHour;
  r.endAt = r.startAt + kHour;
  auto c = keep(cluster_->leases().create(admin_, r));
  keep(cluster_->leases().approve(admin_, c.value.id, ""));

  // allotd is down across the start.
  cluster_.reset();
  clock_.advance(kHour + 5 * kMin);
  start();
  auto lease = cluster_->leases().get(*cluster_->access().authenticate(adminToken_), c.value.id);
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->state, LeaseState::kApproved);
  auto started = keep(cluster_->leases().enforce());
  EXPECT_EQ(started.value, 1);
  const model::Host& h = host("gpu-01");
  ASSERT_TRUE(h.handover.has_value());
  EXPECT_EQ(h.handover->team, "vision");
  EXPECT_EQ(h.handover->leaseId, c.value.id);

  // And the start itself was durable: a second restart does not start it again.
  cluster_.reset();
  start();
  EXPECT_EQ(cluster_->leases().all().at(c.value.id).state, LeaseState::kActive);
  EXPECT_EQ(cluster_->leases().enforce().value, 0);
}

}  // namespace
}  // namespace allot::control
