// The quota service on a World the test fills, without a Cluster: who may set what, guarantees
// that the projects' split must fit in, and the scheduler woken only by a change that was made.

#include "control/quota/quota_service.h"

#include <gtest/gtest.h>

#include "control/testsupport/principals.h"

namespace allot::control {
namespace {

class QuotaServiceTest : public ::testing::Test {
 protected:
  QuotaServiceTest() {
    for (const char* team : {"ml", "nlp"}) world_.teams[team].name = team;
    model::Project& p = world_.projects[World::projectKey("ml", "vision")];
    p.name = "vision";
    p.team = "ml";
  }

  World world_;
  int wakes_ = 0;
  QuotaService quotas_{world_, ContourOptions{}, [this] { ++wakes_; }};
  Principal admin_ = testsupport::platformAdmin();
  Principal lead_ = testsupport::userIn("lead", "ml", model::Role::kTeamAdmin);
  Principal bob_ = testsupport::userIn("bob", "nlp", model::Role::kMember);
};

TEST_F(QuotaServiceTest, PlatformAdminsSetGuaranteesAndTeamAdminsSplitThem) {
  QuotaUpdate u;
  u.guaranteed = std::map<std::string, int>{{"A100", 4}};
  EXPECT_EQ(quotas_.setTeam(lead_, "ml", u).status().code(), Code::kPermissionDenied);
  EXPECT_EQ(quotas_.setTeam(bob_, "ml", u).status().code(), Code::kNotFound)
      << "another team's quota does not exist for a member of nlp";
  EXPECT_EQ(wakes_, 0);
  ASSERT_TRUE(quotas_.setTeam(admin_, "ml", u).ok());
  EXPECT_EQ(wakes_, 1) << "a new guarantee may let work run";

  EXPECT_EQ(quotas_.setProject(lead_, "ml", "vision", {{"A100", 5}}).status().code(),
            Code::kInvalidArgument)
      << "a project's split must fit in the team's guarantee";
  ASSERT_TRUE(quotas_.setProject(lead_, "ml", "vision", {{"A100", 3}}).ok());
  u.guaranteed = std::map<std::string, int>{{"A100", 2}};
  auto lowered = quotas_.setTeam(admin_, "ml", u);
  ASSERT_EQ(lowered.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(lowered.status().field(), "guaranteed");
  EXPECT_EQ(world_.teams.at("ml").quota.guaranteed.at("A100"), 4) << "a refusal changes nothing";

  auto view = quotas_.ofTeam(lead_, "ml");
  ASSERT_TRUE(view.ok());
  ASSERT_EQ(view->projects.size(), 1u);
  EXPECT_FALSE(view->status.has_value()) << "no scheduling pass has seen the team yet";
  TeamQuotaStatus seen;
  seen.known = true;
  seen.guaranteed = 4;
  quotas_.setStatus({{"ml", seen}});
  EXPECT_EQ(quotas_.ofTeam(lead_, "ml")->status->guaranteed, 4);
  EXPECT_EQ(quotas_.ofTeam(bob_, "ml").status().code(), Code::kNotFound);
}

TEST_F(QuotaServiceTest, BadSettingsNameTheirField) {
  QuotaUpdate weight;
  weight.weight = 0;
  EXPECT_EQ(quotas_.setTeam(admin_, "ml", weight).status().field(), "weight");
  QuotaUpdate contour;
  contour.contourLimits["nowhere"] = 3;
  EXPECT_EQ(quotas_.setTeam(admin_, "ml", contour).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(wakes_, 0);
}

// A host of `gpus` GPUs of `model` in the pool, or dedicated to `team`.
void addHost(World& w, const std::string& name, const std::string& model, int gpus,
             const std::string& dedicatedTo = "") {
  model::Host& h = w.hosts[name];
  h.name = name;
  h.dedicatedTo = dedicatedTo;
  for (int i = 0; i < gpus; ++i) h.gpus.push_back(model::Gpu{.index = i, .model = model});
}

TEST_F(QuotaServiceTest, GuaranteesBeyondThePoolAreRefusedUnlessOvercommitted) {
  addHost(world_, "a1", "A100", 8);
  addHost(world_, "h1", "H100", 4);
  addHost(world_, "own", "H100", 8, "nlp");  // dedicated: outside the pool
  QuotaUpdate nlp;
  nlp.guaranteed = std::map<std::string, int>{{"", 4}};
  ASSERT_TRUE(quotas_.setTeam(admin_, "nlp", nlp).ok());

  QuotaUpdate tooMany;
  tooMany.guaranteed = std::map<std::string, int>{{"", 20}};
  auto refused = quotas_.setTeam(admin_, "ml", tooMany);
  ASSERT_EQ(refused.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(refused.status().field(), "guaranteed");
  EXPECT_NE(refused.status().message().find("the pool has 12 GPUs (8 A100, 4 H100) and other "
                                            "teams are guaranteed 4; team 'ml' can be "
                                            "guaranteed at most 8 in all, not 20"),
            std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("--overcommit"), std::string::npos);
  EXPECT_TRUE(world_.teams.at("ml").quota.guaranteed.empty()) << "a refusal changes nothing";

  QuotaUpdate models;
  models.guaranteed = std::map<std::string, int>{{"H100", 5}};
  auto perModel = quotas_.setTeam(admin_, "ml", models);
  ASSERT_EQ(perModel.status().code(), Code::kInvalidArgument);
  EXPECT_NE(perModel.status().message().find("guaranteed.H100: the pool has 4 H100 GPUs"),
            std::string::npos)
      << perModel.status().message();

  QuotaUpdate fits;
  fits.guaranteed = std::map<std::string, int>{{"", 8}};
  EXPECT_TRUE(quotas_.setTeam(admin_, "ml", fits).ok()) << "exactly the pool is fine";
  tooMany.overcommit = true;
  ASSERT_TRUE(quotas_.setTeam(admin_, "ml", tooMany).ok());
  EXPECT_EQ(world_.teams.at("ml").quota.guaranteed.at(""), 20);

  // The pool shrank (a host retired): lowering an overcommitted guarantee is always allowed.
  world_.hosts.at("a1").adminState = model::AdminState::kRetired;
  QuotaUpdate lower;
  lower.guaranteed = std::map<std::string, int>{{"", 10}};
  EXPECT_TRUE(quotas_.setTeam(admin_, "ml", lower).ok());
}

TEST_F(QuotaServiceTest, ASplitOfTheWrongKindSuggestsTheFormThatFits) {
  QuotaUpdate byModel;
  byModel.guaranteed = std::map<std::string, int>{{"H100", 4}};
  ASSERT_TRUE(quotas_.setTeam(admin_, "ml", byModel).ok());
  auto any = quotas_.setProject(lead_, "ml", "vision", {{"", 2}});
  ASSERT_EQ(any.status().code(), Code::kInvalidArgument);
  EXPECT_NE(any.status().message().find("allot project quota set PROJECT --gpus H100=2"),
            std::string::npos)
      << any.status().message();

  QuotaUpdate anyModel;
  anyModel.guaranteed = std::map<std::string, int>{{"", 4}};
  ASSERT_TRUE(quotas_.setTeam(admin_, "ml", anyModel).ok());
  auto model = quotas_.setProject(lead_, "ml", "vision", {{"H100", 6}});
  ASSERT_EQ(model.status().code(), Code::kInvalidArgument);
  EXPECT_NE(model.status().message().find("--any 4"), std::string::npos)
      << model.status().message();
}

TEST_F(QuotaServiceTest, AFleetWithNoHostYetTakesGuaranteesAheadOfIt) {
  QuotaUpdate u;
  u.guaranteed = std::map<std::string, int>{{"A100", 16}};
  EXPECT_TRUE(quotas_.setTeam(admin_, "ml", u).ok());
}

}  // namespace
}  // namespace allot::control
