// Session profiles through the control plane: the rules a profile keeps (each fault a 400 naming
// its field), who may define which, and who sees which: visible_to for platform-wide profiles, a
// team's own profiles for that team only.

#include <gtest/gtest.h>

#include <functional>

#include "control/authz.h"
#include "control/cluster.h"
#include "control/cluster_test_fixture.h"
#include "control/profile.h"

namespace allot::control {
namespace {

model::Profile profile(std::string name, std::string team = "") {
  model::Profile p;
  p.name = std::move(name);
  p.team = std::move(team);
  p.command = {"jupyter-server", "--no-browser"};
  return p;
}

class ProfileTest : public TeamAdminClusterTest {
 protected:
  std::vector<std::string> names(const Principal& p) {
    std::vector<std::string> out;
    for (const auto& prof : cluster_->profiles().list(p)) out.push_back(prof.name);
    return out;
  }
};

// The field an invalid profile is refused for.
std::string faultOf(const model::Profile& p, const std::map<std::string, model::Team>& teams) {
  Status st = validateProfile(p, teams);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.toString();
  return st.field();
}

// One fault: a valid profile "x" (of `team`, when set) spoiled by `spoil`, refused for `field`.
struct ProfileFault {
  std::string field;
  std::function<void(model::Profile&)> spoil;
  std::string team = "";
};

TEST(ProfileValidationTest, EachFaultNamesItsField) {
  std::map<std::string, model::Team> teams = {{"ml", {}}, {"cv", {}}};
  EXPECT_TRUE(validateProfile(profile("ok"), teams).ok());

  const std::vector<ProfileFault> faults = {
      {"name", [](model::Profile& p) { p.name = "Bad Name"; }},
      {"command", [](model::Profile& p) { p.command.clear(); }},
      {"env", [](model::Profile& p) { p.env["A=B"] = "1"; }},
      {"defaults.gpus",
       [](model::Profile& p) {
         p.defaults.gpus = 4;
         p.maxima.gpus = 2;
       }},
      {"defaults.memory_mib",
       [](model::Profile& p) {
         p.defaults.memoryMib = 32768;
         p.maxima.memoryMib = 16384;
       }},
      {"defaults.cpu_millis",
       [](model::Profile& p) {
         p.defaults.cpuMillis = 8000;
         p.maxima.cpuMillis = 4000;
       }},
      // A fraction needs gpus = 1.
      {"defaults.gpu_milli", [](model::Profile& p) { p.defaults.gpuMilli = 500; }},
      {"storage",
       [](model::Profile& p) {
         p.storage = {"scratch", "nfs"};
       }},
      {"storage", [](model::Profile& p) { p.storage.clear(); }},
      {"idle.threshold_percent", [](model::Profile& p) { p.idleThresholdPct = 101; }},
      {"idle.after", [](model::Profile& p) { p.idleAfterMs = 0; }},
      {"visible_to",
       [](model::Profile& p) {
         p.visibleTo = {"ml", "nope"};
       }},
      // A team's profile is for its team only.
      {"visible_to", [](model::Profile& p) { p.visibleTo = {"cv"}; }, "ml"},
  };
  for (const auto& f : faults) {
    auto p = profile("x", f.team);
    f.spoil(p);
    EXPECT_EQ(faultOf(p, teams), f.field);
  }

  // No maximum (0) leaves the default free; a default at its maximum is fine.
  auto p = profile("x");
  p.defaults.gpus = 8;
  p.maxima = {.gpus = 8, .cpuMillis = 0, .memoryMib = 0};
  EXPECT_TRUE(validateProfile(p, teams).ok());
}

TEST_F(ProfileTest, PlatformWideProfilesAreSeenByTheTeamsTheyAreVisibleTo) {
  auto forVision = profile("vision-nb");
  forVision.visibleTo = {"vision"};
  ASSERT_TRUE(cluster_->profiles().create(admin_, forVision).ok());
  ASSERT_TRUE(cluster_->profiles().create(admin_, profile("everyone")).ok());

  EXPECT_EQ(names(alice_), (std::vector<std::string>{"everyone", "vision-nb"}));
  EXPECT_EQ(names(bob_), (std::vector<std::string>{"everyone"}));
  EXPECT_EQ(cluster_->profiles().get(bob_, "vision-nb").status().code(), Code::kNotFound);
  EXPECT_EQ(names(admin_), (std::vector<std::string>{"everyone", "vision-nb"}));
}

// A job or session no host could ever run is refused, naming the field and changing nothing; only
// a job is told how to queue anyway (a session is wanted now).
TEST_F(ProfileTest, ASessionNoHostCouldRunIsRefusedLikeAJobButWithoutQueueAnyway) {
  joinHost("gpu-01", 2);
  ASSERT_TRUE(cluster_->profiles().create(admin_, profile("nb")).ok());
  const size_t before = cluster_->world().jobs.size();
  SessionRequest big;
  big.profile = "nb";
  big.gpus = 4;
  Status session = cluster_->sessions().create(alice_, big).status();
  EXPECT_EQ(session.field(), "gpus") << session.toString();
  EXPECT_NE(session.message().find("the most on one host is 2"), std::string::npos);
  EXPECT_EQ(session.message().find("queue"), std::string::npos) << session.toString();
  JobRequest job;
  job.command = {"train"};
  job.resources.gpus = 4;
  Status refused = cluster_->submitJob(alice_, job).status();
  EXPECT_EQ(refused.field(), "gpus");
  EXPECT_NE(refused.message().find("--queue-anyway (queue_anyway: true)"), std::string::npos)
      << refused.toString();
  EXPECT_EQ(cluster_->world().jobs.size(), before);
  big.gpus = 2;
  EXPECT_TRUE(cluster_->sessions().create(alice_, big).ok());
}

TEST_F(ProfileTest, ATeamsProfileIsItsTeamsAlone) {
  auto c = cluster_->profiles().create(carol_, profile("vision-gpu", "vision"));
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_EQ(c->value.createdBy, "carol");
  ASSERT_EQ(c->batch.ops.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<store::PutProfile>(c->batch.ops[0]));

  EXPECT_TRUE(cluster_->profiles().get(alice_, "vision-gpu").ok());
  // Another team's profile does not exist for bob, whatever he tries.
  EXPECT_EQ(cluster_->profiles().get(bob_, "vision-gpu").status().code(), Code::kNotFound);
  EXPECT_EQ(cluster_->profiles()
                .replace(bob_, "vision-gpu", profile("vision-gpu", "nlp"))
                .status()
                .code(),
            Code::kNotFound);
  EXPECT_EQ(cluster_->profiles().remove(bob_, "vision-gpu").status().code(), Code::kNotFound);
  EXPECT_TRUE(names(bob_).empty());
}

TEST_F(ProfileTest, MembersCannotDefineProfilesAndTeamAdminsOnlyForTheirTeam) {
  EXPECT_EQ(cluster_->profiles().create(alice_, profile("a", "vision")).status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(cluster_->profiles().create(carol_, profile("b")).status().code(),
            Code::kPermissionDenied);  // platform-wide: platform admins only
  EXPECT_EQ(cluster_->profiles().create(carol_, profile("c", "nlp")).status().code(),
            Code::kNotFound);
  EXPECT_EQ(cluster_->profiles().create(carol_, profile("d", "ghost")).status().code(),
            Code::kNotFound);
  ASSERT_TRUE(cluster_->profiles().create(admin_, profile("shared")).ok());
  // carol sees the platform-wide profile but may not change or delete it.
  EXPECT_EQ(cluster_->profiles().replace(carol_, "shared", profile("shared")).status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(cluster_->profiles().remove(carol_, "shared").status().code(), Code::kPermissionDenied);
  EXPECT_TRUE(cluster_->profiles().list(alice_).size() == 1);
}

TEST_F(ProfileTest, ReplaceKeepsNameAndOriginAndDeleteRemoves) {
  ASSERT_TRUE(cluster_->profiles().create(carol_, profile("nb", "vision")).ok());
  clock_.advance(60'000);
  auto next = profile("nb", "vision");
  next.description = "notebooks";
  next.storage = {"local"};
  auto r = cluster_->profiles().replace(carol_, "nb", next);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->value.createdBy, "carol");
  EXPECT_EQ(cluster_->profiles().get(alice_, "nb")->description, "notebooks");
  EXPECT_EQ(cluster_->profiles().replace(carol_, "nb", profile("other", "vision")).status().field(),
            "name");
  EXPECT_EQ(cluster_->profiles().create(admin_, profile("nb")).status().code(),
            Code::kAlreadyExists);
  auto d = cluster_->profiles().remove(carol_, "nb");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(std::holds_alternative<store::DeleteProfile>(d->batch.ops[0]));
  EXPECT_EQ(cluster_->profiles().get(alice_, "nb").status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace allot::control
