// The lease service against its own interfaces, without a Cluster: a World the test fills, a
// FakeClock, and a HostHandover that records what the service asks of the hosts service (and
// refuses when told to, as a host busy with another handover does). The whole path through the
// control plane is in cluster_lease_test.cc.

#include "control/leases/lease_service.h"

#include <gtest/gtest.h>

#include "control/testsupport/principals.h"

namespace allot::control {
namespace {

using model::LeaseState;

constexpr TimeMs kHour = 3'600'000;

// Hands hosts over at once (the real one drains, wipes and checks first), or refuses.
class RecordingHandover : public HostHandover {
 public:
  explicit RecordingHandover(World& world) : world_(world) {}
  Result<Change<model::Host>> handOverHost(const std::string& host, const model::Handover& to,
                                           int64_t deadlineMs) override {
    calls.push_back(host + "->" + (to.team.empty() ? "pool" : to.team) + " lease " +
                    std::to_string(to.leaseId) + " deadline " + std::to_string(deadlineMs));
    if (busy.count(host)) return Status::FailedPrecondition("host " + host + " is busy");
    model::Host& h = world_.hosts.at(host);
    h.dedicatedTo = to.team;
    Change<model::Host> c;
    c.value = h;
    c.batch.add(store::PutHost{h});
    c.pushHosts.insert(host);
    return c;
  }
  std::vector<std::string> calls;
  std::set<std::string> busy;

 private:
  World& world_;
};

class LeaseServiceTest : public ::testing::Test {
 protected:
  LeaseServiceTest() {
    for (const char* team : {"vision", "nlp"}) world_.teams[team].name = team;
    for (const char* name : {"gpu-01", "gpu-02"}) {
      model::Host& h = world_.hosts[name];
      h.name = name;
      h.gpus.resize(4);
    }
  }

  // A request of `hosts` (or of `count` hosts) for `team`, starting in an hour, for an hour.
  LeaseRequest inAnHour(const std::string& team, std::vector<std::string> hosts, int count = 0) {
    LeaseRequest r;
    r.team = team;
    r.hosts = std::move(hosts);
    r.count = count;
    r.startAt = clock_.nowMs() + kHour;
    r.endAt = r.startAt + kHour;
    return r;
  }

  // A lease of `hosts` for carol's team, starting in `in` for an hour, approved by the admin.
  int64_t approved(std::vector<std::string> hosts, TimeMs in) {
    LeaseRequest r;
    r.team = "vision";
    r.hosts = std::move(hosts);
    r.startAt = clock_.nowMs() + in;
    r.endAt = r.startAt + kHour;
    auto c = leases_.create(carol_, r);
    EXPECT_TRUE(c.ok()) << c.status().toString();
    auto a = leases_.approve(admin_, c->value.id, "");
    EXPECT_TRUE(a.ok()) << a.status().toString();
    return c->value.id;
  }

  FakeClock clock_;
  World world_;
  EventLog events_{clock_, world_.teams};
  RecordingHandover handover_{world_};
  int wakes_ = 0;
  LeaseService leases_{
      {clock_, world_, events_, handover_, [this] { ++wakes_; }}, LeaseOptions{}, 10'000};
  Principal admin_ = testsupport::platformAdmin();
  Principal carol_ = testsupport::userIn("carol", "vision", model::Role::kTeamAdmin);
  Principal bob_ = testsupport::userIn("bob", "nlp", model::Role::kMember);
};

TEST_F(LeaseServiceTest, StartAndEndHandHostsOverThroughTheInterface) {
  const int64_t id = approved({"gpu-01", "gpu-02"}, kHour);
  EXPECT_EQ(wakes_, 1) << "an approved lease holds hosts: the scheduler must look again";
  EXPECT_TRUE(leases_.enforce().batch.empty()) << "nothing happens before the start";
  EXPECT_TRUE(handover_.calls.empty());

  clock_.advance(kHour);
  Change<int> started = leases_.enforce();
  EXPECT_EQ(started.value, 1);
  EXPECT_EQ(handover_.calls, (std::vector<std::string>{"gpu-01->vision lease 1 deadline 0",
                                                       "gpu-02->vision lease 1 deadline 0"}));
  EXPECT_EQ(started.pushHosts, (std::set<std::string>{"gpu-01", "gpu-02"}))
      << "the handovers' pushes travel with the lease's change";
  EXPECT_EQ(leases_.get(admin_, id)->state, LeaseState::kActive);
  EXPECT_EQ(leases_.onHost("gpu-02")->id, id);

  handover_.calls.clear();
  clock_.advance(kHour);
  EXPECT_EQ(leases_.enforce().value, 1);
  EXPECT_EQ(handover_.calls, (std::vector<std::string>{"gpu-01->pool lease 1 deadline 0",
                                                       "gpu-02->pool lease 1 deadline 0"}));
  EXPECT_EQ(leases_.get(admin_, id)->state, LeaseState::kEnded);
  EXPECT_EQ(leases_.get(admin_, id)->returned.size(), 2u);
}

TEST_F(LeaseServiceTest, AHostBusyWithAnotherHandoverIsClaimedOnALaterTick) {
  const int64_t id = approved({"gpu-01", "gpu-02"}, kHour);
  handover_.busy.insert("gpu-02");
  clock_.advance(kHour);
  leases_.enforce();
  EXPECT_EQ(leases_.get(admin_, id)->claimed, (std::vector<std::string>{"gpu-01"}));

  handover_.busy.clear();
  handover_.calls.clear();
  Change<int> later = leases_.enforce();
  EXPECT_EQ(handover_.calls, (std::vector<std::string>{"gpu-02->vision lease 1 deadline 0"}));
  EXPECT_EQ(leases_.get(admin_, id)->claimed.size(), 2u);
  EXPECT_FALSE(later.batch.empty()) << "the lease's record of the claim is written";
}

TEST_F(LeaseServiceTest, AnotherTeamsLeaseIsNotFoundAndConflictsAreNamed) {
  const int64_t id = approved({"gpu-01"}, kHour);
  EXPECT_EQ(leases_.get(bob_, id).status().code(), Code::kNotFound);
  EXPECT_EQ(leases_.end(bob_, id, "").status().code(), Code::kNotFound);
  EXPECT_TRUE(leases_.list(bob_).empty());

  LeaseRequest overlapping;
  overlapping.team = "vision";
  overlapping.hosts = {"gpu-01"};
  overlapping.startAt = clock_.nowMs() + kHour / 2;
  overlapping.endAt = overlapping.startAt + kHour;
  auto refused = leases_.create(carol_, overlapping);
  ASSERT_EQ(refused.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("lease " + std::to_string(id)), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(leases_.list(admin_).size(), 1u) << "a refused request leaves nothing behind";
}

// Attack: a team-admin of vision who is also in nlp sees nlp's dedicated host, and must not be
// able to take it for vision by naming it, nor by a count, nor take a shared host whose GPUs nlp
// holds (the handover would end those dedications for good).
TEST_F(LeaseServiceTest, ALeaseTakesNoHostOrGpuAnotherTeamHolds) {
  world_.hosts["gpu-01"].dedicatedTo = "nlp";
  world_.hosts["gpu-02"].gpus[2].index = 2;
  world_.hosts["gpu-02"].gpus[2].dedicatedTo = "nlp";
  Principal both = carol_;
  both.teams["nlp"] = model::Role::kMember;
  auto request = [&](std::vector<std::string> hosts, int count) {
    return leases_.create(both, inAnHour("vision", std::move(hosts), count));
  };
  auto dedicatedHost = request({"gpu-01"}, 0);
  ASSERT_EQ(dedicatedHost.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(dedicatedHost.status().field(), "hosts");
  EXPECT_NE(dedicatedHost.status().message().find("dedicated to team 'nlp'"), std::string::npos)
      << dedicatedHost.status().message();
  auto dedicatedGpu = request({"gpu-02"}, 0);
  ASSERT_EQ(dedicatedGpu.status().code(), Code::kInvalidArgument);
  EXPECT_NE(dedicatedGpu.status().message().find("a GPU of host gpu-02 is dedicated to team 'nlp'"),
            std::string::npos)
      << dedicatedGpu.status().message();
  // To carol, who is not in nlp (its GPU is hidden from her), the holder stays unnamed.
  auto unnamed = leases_.create(carol_, inAnHour("vision", {"gpu-02"}));
  ASSERT_EQ(unnamed.status().code(), Code::kInvalidArgument);
  EXPECT_NE(unnamed.status().message().find("another team"), std::string::npos)
      << unnamed.status().message();
  EXPECT_EQ(unnamed.status().message().find("nlp"), std::string::npos)
      << unnamed.status().message();
  auto byCount = request({}, 1);
  ASSERT_EQ(byCount.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(byCount.status().message().find("0 match"), std::string::npos)
      << byCount.status().message();
  EXPECT_TRUE(leases_.list(admin_).empty()) << "a refused request leaves nothing behind";

  // A platform admin may lease nlp's host for vision (it goes back to nlp at the end), but not a
  // host with a GPU of nlp's: the handover would end that dedication.
  auto adminLease = leases_.create(admin_, inAnHour("vision", {"gpu-01"}));
  EXPECT_TRUE(adminLease.ok()) << adminLease.status().toString();
  EXPECT_EQ(leases_.create(admin_, inAnHour("vision", {"gpu-02"})).status().code(),
            Code::kInvalidArgument);
  ASSERT_TRUE(leases_.reject(admin_, adminLease->value.id, "").ok());

  // nlp's own team-admin may lease them: the host and the GPU are nlp's.
  Principal nlpAdmin = testsupport::userIn("dana", "nlp", model::Role::kTeamAdmin);
  EXPECT_TRUE(leases_.create(nlpAdmin, inAnHour("nlp", {"gpu-01", "gpu-02"})).ok());
}

// A named host with a GPU dedicated to another team since the request is not approved into the
// lease.
TEST_F(LeaseServiceTest, ApprovalRefusesAHostWithAGpuDedicatedElsewhereSinceTheRequest) {
  auto c = leases_.create(carol_, inAnHour("vision", {"gpu-01"}));
  ASSERT_TRUE(c.ok()) << c.status().toString();
  world_.hosts["gpu-01"].gpus[1].dedicatedTo = "nlp";
  auto a = leases_.approve(admin_, c->value.id, "");
  ASSERT_EQ(a.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(a.status().message().find("dedicated to team 'nlp'"), std::string::npos)
      << a.status().message();
  EXPECT_EQ(leases_.get(admin_, c->value.id)->state, LeaseState::kRequested);
}

TEST_F(LeaseServiceTest, EventsGoToTheLogInTheSameBatch) {
  LeaseRequest r;
  r.team = "vision";
  r.hosts = {"gpu-01"};
  r.startAt = clock_.nowMs() + kHour;
  r.endAt = r.startAt + kHour;
  auto c = leases_.create(carol_, r);
  ASSERT_TRUE(c.ok());
  bool eventWritten = false;
  for (const auto& op : c->batch.ops)
    eventWritten |= std::holds_alternative<store::AppendEvent>(op);
  EXPECT_TRUE(eventWritten);
  auto listed = events_.list(carol_, {});
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().kind, model::EventKind::kLeaseChanged);
}

}  // namespace
}  // namespace allot::control
