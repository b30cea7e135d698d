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

}  // namespace
}  // namespace allot::control
