// Roles against actions: each role of team vision (and a user of another team, and a platform
// admin) tries each thing people do, and gets exactly what docs/access.md promises.

#include <gtest/gtest.h>

#include "control/cluster.h"
#include "control/cluster_test_fixture.h"

namespace allot::control {
namespace {

using model::Role;

// What an attempt came to: done, refused (403) or, for what the caller may not see, NotFound.
enum class Outcome { kOk, kDenied, kNotFound };

Outcome outcomeOf(const Status& st) {
  if (st.ok()) return Outcome::kOk;
  if (st.code() == Code::kPermissionDenied) return Outcome::kDenied;
  EXPECT_EQ(st.code(), Code::kNotFound) << st.toString();
  return Outcome::kNotFound;
}

const char* outcomeName(Outcome o) {
  return o == Outcome::kOk ? "ok" : o == Outcome::kDenied ? "denied" : "not found";
}

class AccessTest : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    ASSERT_TRUE(cluster_->access().createProject(admin_, "resnet", "vision").ok());
    for (auto [name, role] :
         {std::pair{"vic", Role::kViewer}, {"mia", Role::kMember}, {"tom", Role::kTeamAdmin}}) {
      auto u = cluster_->access().createUser(admin_, name, "vision", role);
      ASSERT_TRUE(u.ok());
      callers_[name] = *cluster_->access().authenticate(u->value.token);
    }
    callers_["bob (nlp)"] = bob_;
    callers_["admin"] = admin_;
    callers_["alice (owner)"] = alice_;
  }

  // A fresh queued job of alice's in vision, for each attempt that changes one.
  int64_t alicesJob() { return submitSleep(alice_, 0); }
  // vision-ci, a service account of vision's, as its team-admin creates it.
  static NewUser visionServiceAccount() {
    NewUser svc;
    svc.name = "vision-ci";
    svc.kind = model::UserKind::kService;
    svc.teams["vision"] = Role::kMember;
    return svc;
  }

  std::map<std::string, Principal> callers_;
};

struct Action {
  const char* what;
  std::function<Status(const Principal&)> run;
  // Expected outcome for: viewer, member, team-admin, other team, platform admin, job owner.
  Outcome viewer, member, teamAdmin, otherTeam, admin, owner;
};

TEST_F(AccessTest, EachRoleGetsWhatItMayDoAndNothingMore) {
  using O = Outcome;
  const std::vector<Action> actions = {
      {"see the team's job",
       [this](const Principal& p) { return cluster_->getJob(p, alicesJob()).status(); }, O::kOk,
       O::kOk, O::kOk, O::kNotFound, O::kOk, O::kOk},
      {"cancel alice's job",
       [this](const Principal& p) { return cluster_->cancelJob(p, alicesJob()).status(); },
       O::kDenied, O::kDenied, O::kOk, O::kNotFound, O::kOk, O::kOk},
      {"create a project in vision",
       [this](const Principal& p) {
         static int n = 0;
         return cluster_->access().createProject(p, "p" + std::to_string(n++), "vision").status();
       },
       O::kDenied, O::kDenied, O::kOk, O::kNotFound, O::kOk, O::kDenied},
      {"split vision's quota",
       [this](const Principal& p) {
         return cluster_->quotas().setProject(p, "vision", "resnet", {}).status();
       },
       O::kDenied, O::kDenied, O::kOk, O::kNotFound, O::kOk, O::kDenied},
      // A team-admin adds only people they can see; bob shares no team with vision's.
      {"add a person of another team to vision",
       [this](const Principal& p) {
         return cluster_->access().setMembership(p, "vision", "bob", Role::kViewer).status();
       },
       O::kDenied, O::kDenied, O::kNotFound, O::kNotFound, O::kOk, O::kDenied},
      {"change the role of a member of vision",
       [this](const Principal& p) {
         return cluster_->access().setMembership(p, "vision", "mia", Role::kMember).status();
       },
       O::kDenied, O::kDenied, O::kOk, O::kNotFound, O::kOk, O::kDenied},
      {"list vision's members",
       [this](const Principal& p) { return cluster_->access().teamMembers(p, "vision").status(); },
       O::kOk, O::kOk, O::kOk, O::kNotFound, O::kOk, O::kOk},
      {"create a service account for vision",
       [this](const Principal& p) {
         static int n = 0;
         NewUser u;
         u.name = "ci" + std::to_string(n++);
         u.kind = model::UserKind::kService;
         u.teams["vision"] = Role::kMember;
         return cluster_->access().createUser(p, u).status();
       },
       O::kDenied, O::kDenied, O::kOk, O::kNotFound, O::kOk, O::kDenied},
      {"create a person's account",
       [this](const Principal& p) {
         static int n = 0;
         return cluster_->access()
             .createUser(p, "h" + std::to_string(n++), "vision", Role::kMember)
             .status();
       },
       O::kDenied, O::kDenied, O::kDenied, O::kNotFound, O::kOk, O::kDenied},
      {"create a team",
       [this](const Principal& p) {
         static int n = 0;
         return cluster_->access().createTeam(p, "t" + std::to_string(n++)).status();
       },
       O::kDenied, O::kDenied, O::kDenied, O::kDenied, O::kOk, O::kDenied},
      {"set vision's quota",
       [this](const Principal& p) {
         QuotaUpdate q;
         q.weight = 2;
         return cluster_->quotas().setTeam(p, "vision", q).status();
       },
       O::kDenied, O::kDenied, O::kDenied, O::kNotFound, O::kOk, O::kDenied},
      {"make a join token",
       [this](const Principal& p) { return cluster_->hosts().createJoinToken(p, 60'000).status(); },
       O::kDenied, O::kDenied, O::kDenied, O::kDenied, O::kOk, O::kDenied},
  };
  const std::vector<std::string> order = {"vic",       "mia",   "tom",
                                          "bob (nlp)", "admin", "alice (owner)"};
  for (const auto& a : actions) {
    const Outcome want[] = {a.viewer, a.member, a.teamAdmin, a.otherTeam, a.admin, a.owner};
    for (size_t i = 0; i < order.size(); ++i) {
      Outcome got = outcomeOf(a.run(callers_.at(order[i])));
      EXPECT_EQ(got, want[i]) << order[i] << " tried to " << a.what << ": got " << outcomeName(got)
                              << ", want " << outcomeName(want[i]);
    }
  }
}

TEST_F(AccessTest, ViewersReadButDoNotSubmitAndOtherTeamsSeeNoTeam) {
  JobRequest r;
  r.team = "vision";
  r.command = {"true"};
  EXPECT_EQ(outcomeOf(cluster_->submitJob(callers_.at("vic"), r).status()), Outcome::kDenied);
  EXPECT_EQ(outcomeOf(cluster_->submitJob(callers_.at("mia"), r).status()), Outcome::kOk);
  EXPECT_EQ(outcomeOf(cluster_->submitJob(callers_.at("tom"), r).status()), Outcome::kOk);
  EXPECT_EQ(outcomeOf(cluster_->submitJob(bob_, r).status()), Outcome::kNotFound);
  EXPECT_EQ(outcomeOf(cluster_->submitJob(admin_, r).status()), Outcome::kOk);
}

TEST_F(AccessTest, AUserOfSeveralTeamsNamesOneAndHasEachTeamsRole) {
  ASSERT_TRUE(cluster_->access().setMembership(admin_, "nlp", "mia", Role::kViewer).ok());
  auto mia = cluster_->access().getUser(admin_, "mia");
  ASSERT_TRUE(mia.ok());
  Principal p = Principal::ofUser(*mia);
  JobRequest r;
  r.command = {"true"};
  auto noTeam = cluster_->submitJob(p, r);
  EXPECT_EQ(noTeam.status().field(), "team");
  EXPECT_NE(noTeam.status().message().find("nlp, vision"), std::string::npos);
  r.team = "nlp";
  EXPECT_EQ(cluster_->submitJob(p, r).status().code(), Code::kPermissionDenied);  // viewer there
  r.team = "vision";
  EXPECT_TRUE(cluster_->submitJob(p, r).ok());
  // Removing her from nlp takes nlp away.
  ASSERT_TRUE(cluster_->access().setMembership(admin_, "nlp", "mia", std::nullopt).ok());
  p = Principal::ofUser(*cluster_->access().getUser(admin_, "mia"));
  EXPECT_EQ(p.soleTeam(), "vision");
}

// Attack: vic sees his colleague mia, who is also in nlp; he must not learn of nlp through her
// record, in the list or by name. mia herself and the platform admin see both teams.
TEST_F(AccessTest, AColleaguesRecordNamesOnlyTheTeamsTheCallerShares) {
  ASSERT_TRUE(cluster_->access().setMembership(admin_, "nlp", "mia", Role::kViewer).ok());
  const Principal& vic = callers_.at("vic");
  auto seen = cluster_->access().getUser(vic, "mia");
  ASSERT_TRUE(seen.ok());
  EXPECT_EQ(seen->teams, (std::map<std::string, Role>{{"vision", Role::kMember}}));
  for (const auto& u : cluster_->access().listUsers(vic))
    EXPECT_EQ(u.teams.count("nlp"), 0u) << u.name;
  Principal mia = Principal::ofUser(*cluster_->access().getUser(admin_, "mia"));
  EXPECT_EQ(cluster_->access().getUser(mia, "mia")->teams.size(), 2u);
  EXPECT_EQ(cluster_->access().getUser(admin_, "mia")->teams.size(), 2u);
  // An account vision's team-admin made, later shared with nlp: bob (nlp) sees the account but
  // not who made it, a user outside his teams.
  NewUser svc;
  svc.name = "shared-ci";
  svc.kind = model::UserKind::kService;
  svc.teams["vision"] = Role::kMember;
  ASSERT_TRUE(cluster_->access().createUser(callers_.at("tom"), svc).ok());
  ASSERT_TRUE(cluster_->access().setMembership(admin_, "nlp", "shared-ci", Role::kMember).ok());
  auto bobSees = cluster_->access().getUser(bob_, "shared-ci");
  ASSERT_TRUE(bobSees.ok());
  EXPECT_EQ(bobSees->createdBy, "");
  EXPECT_EQ(bobSees->teams.count("vision"), 0u);
  EXPECT_EQ(cluster_->access().getUser(vic, "shared-ci")->createdBy, "tom");
}

TEST_F(AccessTest, TeamAdminsCannotGrantPlatformRightsOrReachOtherTeams) {
  const Principal& tom = callers_.at("tom");
  EXPECT_EQ(
      cluster_->access().setMembership(tom, "vision", "mia", Role::kPlatformAdmin).status().field(),
      "role");
  EXPECT_EQ(cluster_->access().setMembership(tom, "nlp", "mia", Role::kMember).status().code(),
            Code::kNotFound);
  UserUpdate up;
  up.platformAdmin = true;
  EXPECT_EQ(cluster_->access().updateUser(tom, "tom", up).status().code(), Code::kPermissionDenied);
  NewUser svc;
  svc.name = "nlp-ci";
  svc.kind = model::UserKind::kService;
  svc.teams["nlp"] = Role::kMember;
  EXPECT_EQ(cluster_->access().createUser(tom, svc).status().code(), Code::kNotFound);
}

TEST_F(AccessTest, TokensAreNamedExpireAndAreRevokedAtOnce) {
  NewToken t;
  t.name = "laptop";
  t.ttlMs = 60'000;
  auto made = cluster_->access().createToken(alice_, t);
  ASSERT_TRUE(made.ok()) << made.status().toString();
  EXPECT_TRUE(cluster_->access().authenticate(made->value.secret).has_value());
  auto list = cluster_->access().listTokens(alice_, "");
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(std::any_of(list->begin(), list->end(),
                          [](const model::ApiToken& x) { return x.name == "laptop"; }));
  // Others cannot see or revoke it: it does not exist for them.
  EXPECT_EQ(cluster_->access().revokeToken(bob_, made->value.token.id).status().code(),
            Code::kNotFound);
  EXPECT_EQ(
      cluster_->access().revokeToken(callers_.at("tom"), made->value.token.id).status().code(),
      Code::kNotFound);
  EXPECT_EQ(cluster_->access().listTokens(bob_, "alice").status().code(), Code::kNotFound);
  EXPECT_EQ(cluster_->access().listTokens(callers_.at("mia"), "alice").status().code(),
            Code::kPermissionDenied);
  // Expiry.
  clock_.advance(60'001);
  EXPECT_FALSE(cluster_->access().authenticate(made->value.secret).has_value());
  // Revocation.
  auto second = cluster_->access().createToken(alice_, NewToken{"", "ci", 0});
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(cluster_->access().authenticate(second->value.secret).has_value());
  ASSERT_TRUE(cluster_->access().revokeToken(alice_, second->value.token.id).ok());
  EXPECT_FALSE(cluster_->access().authenticate(second->value.secret).has_value());
  // Bad input.
  EXPECT_EQ(cluster_->access().createToken(alice_, NewToken{"", "Bad Name", 0}).status().field(),
            "name");
  EXPECT_EQ(cluster_->access().createToken(alice_, NewToken{"", "", -5}).status().field(),
            "expires_in");
}

TEST_F(AccessTest, TeamAdminsRunTheirServiceAccountsTokens) {
  const Principal& tom = callers_.at("tom");
  ASSERT_TRUE(cluster_->access().createUser(tom, visionServiceAccount()).ok());
  auto tok = cluster_->access().createToken(tom, NewToken{"vision-ci", "gitlab", 0});
  ASSERT_TRUE(tok.ok()) << tok.status().toString();
  auto p = cluster_->access().authenticate(tok->value.secret);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->name, "vision-ci");
  EXPECT_TRUE(cluster_->access().listTokens(tom, "vision-ci").ok());
  // A member of the team may not; nor may tom mint tokens for a person.
  EXPECT_EQ(cluster_->access()
                .createToken(callers_.at("mia"), NewToken{"vision-ci", "x", 0})
                .status()
                .code(),
            Code::kPermissionDenied);
  EXPECT_EQ(cluster_->access().createToken(tom, NewToken{"mia", "x", 0}).status().code(),
            Code::kPermissionDenied);
}

// Attack, found by a review: tom, vision's team-admin, keeps a token of an account he may manage
// now; the account later gains rights beyond his (a second team, platform admin). The token must
// not come along: every token of a service account ends when it gains them.
TEST_F(AccessTest, AServiceAccountsTokensEndWhenItGainsATeamOrPlatformAdmin) {
  const Principal& tom = callers_.at("tom");
  ASSERT_TRUE(cluster_->access().createUser(tom, visionServiceAccount()).ok());
  auto kept = cluster_->access().createToken(tom, NewToken{"vision-ci", "kept", 0});
  ASSERT_TRUE(kept.ok());
  ASSERT_TRUE(cluster_->access().setMembership(admin_, "nlp", "vision-ci", Role::kMember).ok());
  EXPECT_FALSE(cluster_->access().authenticate(kept->value.secret).has_value())
      << "tom's token would act in nlp";
  auto fresh = cluster_->access().createToken(admin_, NewToken{"vision-ci", "ci", 0});
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(cluster_->access().authenticate(fresh->value.secret).has_value());
  // A change of role within its teams is no new team: the token stays.
  ASSERT_TRUE(cluster_->access().setMembership(admin_, "nlp", "vision-ci", Role::kViewer).ok());
  EXPECT_TRUE(cluster_->access().authenticate(fresh->value.secret).has_value());
  UserUpdate promote;
  promote.platformAdmin = true;
  ASSERT_TRUE(cluster_->access().updateUser(admin_, "vision-ci", promote).ok());
  EXPECT_FALSE(cluster_->access().authenticate(fresh->value.secret).has_value());
}

// The same for a person a team-admin created: the first token went to the team-admin, and ends
// when the person gains a team or sets a password. Alice's own tokens are hers and stay.
class TeamAdminsCreateUsersTest : public AccessTest {
 protected:
  void adjustOptions(ClusterOptions& o) override { o.teamAdminsCreateUsers = true; }
};

TEST_F(TeamAdminsCreateUsersTest, APersonsFirstTokenEndsWhenTheyGainATeamOrSetAPassword) {
  const Principal& tom = callers_.at("tom");
  for (const bool byPassword : {false, true}) {
    const std::string name = byPassword ? "newhire2" : "newhire";
    auto made = cluster_->access().createUser(tom, name, "vision", Role::kMember);
    ASSERT_TRUE(made.ok()) << made.status().toString();
    const std::string initial = made->value.token;
    const Principal self = *cluster_->access().authenticate(initial);
    auto own = cluster_->access().createToken(self, NewToken{"", "laptop", 0});
    ASSERT_TRUE(own.ok());
    if (byPassword) {
      UserUpdate pw;
      pw.passwordHash = "$argon2id$stand-in";
      ASSERT_TRUE(cluster_->access().updateUser(self, name, pw).ok());
    } else {
      ASSERT_TRUE(cluster_->access().setMembership(admin_, "nlp", name, Role::kMember).ok());
    }
    EXPECT_FALSE(cluster_->access().authenticate(initial).has_value()) << name;
    EXPECT_TRUE(cluster_->access().authenticate(own->value.secret).has_value()) << name;
  }
}

// Attack: a platform admin's service account placed in vision (for CI, or a scraper of
// /metrics) must not let vision's team-admin mint, list or revoke its tokens: its token would
// make him platform admin.
TEST_F(AccessTest, ATeamAdminCannotHoldAPlatformAdminServiceAccountsTokens) {
  const Principal& tom = callers_.at("tom");
  NewUser svc;
  svc.name = "fleet-ci";
  svc.kind = model::UserKind::kService;
  svc.platformAdmin = true;
  svc.teams["vision"] = Role::kMember;
  ASSERT_TRUE(cluster_->access().createUser(admin_, svc).ok());
  auto minted = cluster_->access().createToken(tom, NewToken{"fleet-ci", "mine", 0});
  EXPECT_EQ(minted.status().code(), Code::kPermissionDenied) << minted.status().toString();
  EXPECT_EQ(cluster_->access().listTokens(tom, "fleet-ci").status().code(),
            Code::kPermissionDenied);
  // The platform admin still may.
  EXPECT_TRUE(cluster_->access().createToken(admin_, NewToken{"fleet-ci", "ci", 0}).ok());
}

TEST_F(AccessTest, DisabledUsersCannotAuthenticateAndTheLastAdminStays) {
  auto tok = cluster_->access().createToken(alice_, NewToken{"", "t", 0});
  ASSERT_TRUE(tok.ok());
  UserUpdate off;
  off.disabled = true;
  ASSERT_TRUE(cluster_->access().updateUser(admin_, "alice", off).ok());
  EXPECT_FALSE(cluster_->access().authenticate(tok->value.secret).has_value());
  UserUpdate demote;
  demote.platformAdmin = false;
  EXPECT_EQ(cluster_->access().updateUser(admin_, "admin", demote).status().code(),
            Code::kFailedPrecondition);
}

}  // namespace
}  // namespace allot::control
