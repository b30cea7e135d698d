// The hosts service against its own interfaces, without a Cluster: a World the test fills, the
// access service it mints host credentials with, and a JobPreemption that records what it was
// asked to preempt. What it owns: join tokens, joins, who sees which host, and admin states
// with their record. The whole path through the control plane is in cluster_join_test.cc,
// cluster_drain_test.cc and cluster_handover_test.cc.

#include "control/hosts/host_service.h"

#include <gtest/gtest.h>

#include "common/secrets.h"
#include "control/testsupport/changes.h"
#include "control/testsupport/inventory.h"
#include "control/testsupport/principals.h"
#include "control/testsupport/service_stubs.h"

namespace allot::control {
namespace {

using model::AdminState;

class HostServiceTest : public ::testing::Test {
 protected:
  HostServiceTest() {
    initSecrets();
    for (const char* team : {"vision", "nlp"}) world_.teams[team].name = team;
  }

  // Hosts are in service as soon as they join: commissioning has tests of its own.
  static HostService::Options inServiceOnJoin() {
    HostService::Options o;
    o.lifecycle.commission = false;
    return o;
  }
  // `name` joined on a fresh token of the admin's; the join's change.
  Change<JoinedHost> join(const std::string& name, int gpus = 2) {
    auto token = hosts_.createJoinToken(admin_, 3'600'000);
    EXPECT_TRUE(token.ok()) << token.status().toString();
    auto joined = hosts_.joinHost(token->value.secret, name, inventory(gpus));
    EXPECT_TRUE(joined.ok()) << joined.status().toString();
    return std::move(joined).value();
  }

  FakeClock clock_;
  World world_;
  testsupport::RecordingMembership membership_;
  AccessService access_{clock_, world_, UnixIdOptions{}, membership_};
  testsupport::RecordingPreemption preemption_;
  int wakes_ = 0;
  HostService hosts_{{clock_, world_, access_, preemption_, [this] { ++wakes_; }},
                     inServiceOnJoin()};
  Principal admin_ = testsupport::platformAdmin();
  Principal alice_ = testsupport::userIn("alice", "vision", model::Role::kMember);
  Principal bob_ = testsupport::userIn("bob", "nlp", model::Role::kMember);
};

TEST_F(HostServiceTest, AJoinTokenAdmitsAHostWhoseCredentialAuthenticatesAsIt) {
  EXPECT_EQ(hosts_.createJoinToken(alice_, 3'600'000).status().code(), Code::kPermissionDenied);
  auto token = hosts_.createJoinToken(admin_, 3'600'000);
  ASSERT_TRUE(token.ok()) << token.status().toString();
  EXPECT_NE(findOp<store::PutJoinToken>(*token), nullptr) << "the token must be written";

  auto joined = hosts_.joinHost(token->value.secret, "gpu-01", inventory(2));
  ASSERT_TRUE(joined.ok()) << joined.status().toString();
  EXPECT_NE(findOp<store::PutHost>(*joined), nullptr);
  EXPECT_EQ(world_.hosts.at("gpu-01").gpus.size(), 2u);
  EXPECT_EQ(world_.hosts.at("gpu-01").adminState, AdminState::kAvailable);
  auto agent = access_.authenticate(joined->value.credential);
  ASSERT_TRUE(agent.has_value());
  EXPECT_EQ(agent->kind, Principal::Kind::kHost);
  EXPECT_EQ(agent->name, "gpu-01");

  // Single use by default; the name is taken until an admin resets its credential.
  auto again = hosts_.joinHost(token->value.secret, "gpu-02", inventory(1));
  EXPECT_EQ(again.status().code(), Code::kUnauthenticated);
  EXPECT_FALSE(world_.hosts.count("gpu-02"));
  auto other = hosts_.createJoinToken(admin_, 3'600'000);
  EXPECT_EQ(hosts_.joinHost(other->value.secret, "gpu-01", inventory(1)).status().code(),
            Code::kAlreadyExists);
  EXPECT_EQ(world_.hosts.at("gpu-01").gpus.size(), 2u) << "a refused join changes nothing";
}

TEST_F(HostServiceTest, BadTokensAndSettingsAreRefusedNamingTheirField) {
  auto noUses = hosts_.createJoinToken(admin_, 3'600'000, 0);
  EXPECT_EQ(noUses.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(noUses.status().field(), "uses");
  EXPECT_EQ(hosts_.createJoinToken(admin_, 0).status().field(), "ttl");
  EXPECT_EQ(hosts_.joinHost("join_forged", "gpu-01", inventory(1)).status().code(),
            Code::kUnauthenticated);
  join("gpu-01");
  auto negative = hosts_.drainHost(admin_, "gpu-01", -1, "");
  EXPECT_EQ(negative.status().field(), "deadline");
  EXPECT_EQ(world_.hosts.at("gpu-01").adminState, AdminState::kAvailable);
  EXPECT_EQ(world_.joinTokens.size(), 1u) << "only the token that was made";
}

TEST_F(HostServiceTest, DrainAndResumeAreRecordedAndOnlyAdminsChangeTheAdminState) {
  join("gpu-01");
  EXPECT_EQ(hosts_.drainHost(alice_, "gpu-01", 0, "").status().code(), Code::kPermissionDenied);
  auto drained = hosts_.drainHost(admin_, "gpu-01", 0, "kernel update");
  ASSERT_TRUE(drained.ok()) << drained.status().toString();
  EXPECT_EQ(drained->value.adminState, AdminState::kMaintenance) << "nothing ran there";
  EXPECT_TRUE(preemption_.evicted.empty());
  ASSERT_TRUE(hosts_.resumeHost(admin_, "gpu-01").ok());
  auto record = hosts_.hostTransitions(alice_, "gpu-01");
  ASSERT_TRUE(record.ok());
  ASSERT_EQ(record->size(), 3u) << "draining, drained at once, resumed";
  EXPECT_EQ((*record)[0].to, AdminState::kDraining);
  EXPECT_EQ((*record)[0].by, "root");
  EXPECT_EQ((*record)[0].reason, "kernel update");
  EXPECT_EQ((*record)[1].to, AdminState::kMaintenance);
  EXPECT_EQ((*record)[2].to, AdminState::kAvailable);
}

TEST_F(HostServiceTest, AnotherTeamsDedicatedHostIsNotFoundToAMember) {
  join("gpu-01");
  ASSERT_TRUE(hosts_.dedicateHost(admin_, "gpu-01", "vision").ok());
  const int wakes = wakes_;
  EXPECT_GT(wakes, 0) << "a dedication changes where work may run";
  EXPECT_TRUE(hosts_.getHost(alice_, "gpu-01").ok());
  EXPECT_EQ(hosts_.getHost(bob_, "gpu-01").status().code(), Code::kNotFound);
  EXPECT_TRUE(hosts_.listHosts(bob_).empty());
  EXPECT_EQ(hosts_.hostTransitions(bob_, "gpu-01").status().code(), Code::kNotFound);
  EXPECT_EQ(hosts_.drainHost(bob_, "gpu-01", 0, "").status().code(), Code::kNotFound);
  EXPECT_EQ(hosts_.taskOutput(bob_, "gpu-01", 0).status().code(), Code::kNotFound);
  EXPECT_EQ(hosts_.dedicateHost(bob_, "gpu-01", "nlp").status().code(), Code::kNotFound);
  EXPECT_EQ(world_.hosts.at("gpu-01").dedicatedTo, "vision");
  EXPECT_EQ(wakes_, wakes) << "nothing changed, so the scheduler need not look again";
  EXPECT_EQ(world_.hosts.at("gpu-01").adminState, AdminState::kAvailable);
}

}  // namespace
}  // namespace allot::control
