// The access service against its own interfaces, without a Cluster: a World the test fills
// through the service and a MembershipObserver that records who left teams. What it owns:
// the first admin, teams, accounts and the tokens they authenticate with, and who sees whom.

#include "control/access/access_service.h"

#include <gtest/gtest.h>

#include "common/secrets.h"
#include "control/testsupport/changes.h"
#include "control/testsupport/principals.h"
#include "control/testsupport/service_stubs.h"

namespace allot::control {
namespace {

class AccessServiceTest : public ::testing::Test {
 protected:
  AccessServiceTest() {
    initSecrets();
    auto boot = access_.bootstrapAdmin();
    EXPECT_TRUE(boot.has_value());
    if (boot) admin_ = *access_.authenticate(boot->value);
    for (const char* team : {"vision", "nlp"}) EXPECT_TRUE(access_.createTeam(admin_, team).ok());
  }

  // A member of `team` made by the admin; as their first token authenticates them.
  Principal member(const std::string& name, const std::string& team) {
    auto u = access_.createUser(admin_, name, team, model::Role::kMember);
    EXPECT_TRUE(u.ok()) << u.status().toString();
    return u.ok() ? *access_.authenticate(u->value.token) : Principal{};
  }

  FakeClock clock_;
  World world_;
  testsupport::RecordingMembership membership_;
  AccessService access_{clock_, world_, UnixIdOptions{}, membership_};
  Principal admin_;
};

TEST_F(AccessServiceTest, TheFirstAdminIsMadeOnceAndAccountsAuthenticateAsTheirTeams) {
  EXPECT_TRUE(admin_.isAdmin());
  EXPECT_EQ(admin_.name, "admin");
  EXPECT_FALSE(access_.bootstrapAdmin().has_value()) << "only while no user exists";

  auto made = access_.createUser(admin_, "alice", "vision", model::Role::kMember);
  ASSERT_TRUE(made.ok()) << made.status().toString();
  EXPECT_NE(findOp<store::PutUser>(*made), nullptr) << "the account must be written";
  auto alice = access_.authenticate(made->value.token);
  ASSERT_TRUE(alice.has_value());
  EXPECT_EQ(alice->name, "alice");
  EXPECT_EQ(alice->roleIn("vision"), model::Role::kMember);
  EXPECT_FALSE(alice->isAdmin());
  EXPECT_FALSE(access_.authenticate("nope_not-a-token").has_value());

  // Teams are the platform admins' to make; members see only their own.
  EXPECT_EQ(access_.createTeam(*alice, "rl").status().code(), Code::kPermissionDenied);
  EXPECT_FALSE(world_.teams.count("rl"));
  auto teams = access_.listTeams(*alice);
  ASSERT_EQ(teams.size(), 1u);
  EXPECT_EQ(teams[0].name, "vision");
  EXPECT_EQ(access_.listTeams(admin_).size(), 2u);
}

TEST_F(AccessServiceTest, ABadOrTakenTeamNameIsRefusedAndChangesNothing) {
  auto bad = access_.createTeam(admin_, "Bad Name");
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.status().field(), "name");
  EXPECT_EQ(access_.createTeam(admin_, "vision").status().code(), Code::kAlreadyExists);
  EXPECT_EQ(world_.teams.size(), 2u);
}

TEST_F(AccessServiceTest, AnotherTeamsPeopleAndTeamAreNotFoundToAMember) {
  member("alice", "vision");
  const Principal bob = member("bob", "nlp");
  EXPECT_EQ(access_.getUser(bob, "alice").status().code(), Code::kNotFound);
  EXPECT_EQ(access_.listSshKeys(bob, "alice").status().code(), Code::kNotFound);
  EXPECT_EQ(access_.teamMembers(bob, "vision").status().code(), Code::kNotFound);
  EXPECT_EQ(access_.createProject(bob, "resnet", "vision").status().code(), Code::kNotFound);
  EXPECT_TRUE(world_.projects.empty());
  UserUpdate disable;
  disable.disabled = true;
  EXPECT_EQ(access_.updateUser(bob, "alice", disable).status().code(), Code::kNotFound);
  EXPECT_FALSE(world_.users.at("alice").disabled);
  // Their own team is theirs to see.
  auto members = access_.teamMembers(bob, "nlp");
  ASSERT_TRUE(members.ok());
  ASSERT_EQ(members->size(), 1u);
  EXPECT_EQ((*members)[0].first.name, "bob");
}

TEST_F(AccessServiceTest, TeamAdminsCreatePeopleOnlyWhereThePlatformLetsThemAndOnlyInTheirTeams) {
  auto lead = access_.createUser(admin_, "lead", "vision", model::Role::kTeamAdmin);
  ASSERT_TRUE(lead.ok());
  const Principal teamAdmin = *access_.authenticate(lead->value.token);
  auto hire = [](const std::string& name, const std::string& team) {
    NewUser n;
    n.name = name;
    n.teams[team] = model::Role::kMember;
    return n;
  };
  // Off (the default): service accounts only.
  EXPECT_EQ(access_.createUser(teamAdmin, hire("newhire", "vision")).status().code(),
            Code::kPermissionDenied);

  AccessService open{clock_, world_, UnixIdOptions{}, membership_, /*teamAdminsCreateUsers=*/true};
  auto made = open.createUser(teamAdmin, hire("newhire", "vision"));
  ASSERT_TRUE(made.ok()) << made.status().toString();
  EXPECT_EQ(world_.users.at("newhire").createdBy, "lead");
  EXPECT_EQ(open.createUser(teamAdmin, hire("spy", "nlp")).status().code(), Code::kNotFound)
      << "another team is not there for a vision team-admin";
  NewUser both = hire("both", "vision");
  both.teams["nlp"] = model::Role::kMember;
  EXPECT_EQ(open.createUser(teamAdmin, both).status().code(), Code::kNotFound);
  NewUser boss = hire("boss", "vision");
  boss.platformAdmin = true;
  EXPECT_EQ(open.createUser(teamAdmin, boss).status().code(), Code::kPermissionDenied);
  NewUser root = hire("rooty", "vision");
  root.uid = 0;
  root.gid = 0;
  EXPECT_EQ(open.createUser(teamAdmin, root).status().code(), Code::kPermissionDenied)
      << "a chosen uid could be anyone's on the hosts";
  const Principal alice = member("alice", "vision");
  EXPECT_EQ(open.createUser(alice, hire("friend", "vision")).status().code(),
            Code::kPermissionDenied)
      << "a member is no team-admin";
  for (const char* refused : {"spy", "both", "boss", "rooty", "friend"})
    EXPECT_FALSE(world_.users.count(refused)) << refused;
}

}  // namespace
}  // namespace allot::control
