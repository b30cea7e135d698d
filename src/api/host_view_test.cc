#include "api/host_view.h"

#include <gtest/gtest.h>

namespace allot::api {
namespace {

control::Principal member(const std::string& team) {
  control::Principal p;
  p.name = "eve";
  p.teams[team] = model::Role::kMember;
  return p;
}

TEST(HostView, AHandoverHidesTheReceivingTeamFromOthers) {
  model::Host h;
  h.name = "gpu-01";
  h.adminState = model::AdminState::kDraining;
  h.adminReason = "handover to team vision (lease 4)";
  h.handover = model::Handover{};
  h.handover->team = "vision";
  auto outsider = hostJsonFor(member("nlp"), h);
  EXPECT_EQ(outsider["handover_to"], "another team");
  EXPECT_EQ(outsider["admin_reason"], "handover to another team (lease 4)");
  EXPECT_EQ(outsider.dump().find("vision"), std::string::npos) << outsider.dump();
  auto insider = hostJsonFor(member("vision"), h);
  EXPECT_EQ(insider["handover_to"], "vision");
  EXPECT_EQ(insider["admin_reason"], "handover to team vision (lease 4)");
  control::Principal admin;
  admin.platformAdmin = true;
  EXPECT_EQ(hostJsonFor(admin, h)["handover_to"], "vision");
}

TEST(HostView, OnlyTeamNamesAreRewritten) {
  auto p = member("nlp");
  EXPECT_EQ(hideOtherTeams(p, "handover to team vision."), "handover to another team.");
  EXPECT_EQ(hideOtherTeams(p, "team nlp and team cv-2"), "team nlp and another team");
  EXPECT_EQ(hideOtherTeams(p, "handover to the shared pool"), "handover to the shared pool");
  EXPECT_EQ(hideOtherTeams(p, "team "), "team ");
}

}  // namespace
}  // namespace allot::api
