// Contours in the control plane: who may submit into which contour, hosts' contours as an admin
// setting that survives the agent and restarts, placement by contour, and per-contour limits.

#include "control/authz.h"
#include "control/cluster_test_fixture.h"

namespace allot::control {
namespace {

using model::Role;

class ContourTest : public TeamAdminClusterTest {
 protected:
  Result<Change<model::Job>> submitTo(const Principal& p, const std::string& contour, int gpus = 1,
                                      bool queueAnyway = false) {
    JobRequest r;
    r.command = {"sleep", "3600"};
    r.resources.gpus = gpus;
    r.contour = contour;
    r.queueAnyway = queueAnyway;
    return cluster_->submitJob(p, r);
  }
};

TEST_F(ContourTest, RoleCheckFollowsTheContoursSubmitRole) {
  const ContourOptions contours;  // dev and test: member; prod: team-admin
  const ContourRule& dev = *contours.find("dev");
  const ContourRule& prod = *contours.find("prod");
  EXPECT_TRUE(authz::canSubmitToContour(alice_, "vision", dev).ok());
  Status refused = authz::canSubmitToContour(alice_, "vision", prod);
  EXPECT_EQ(refused.code(), Code::kPermissionDenied);
  EXPECT_EQ(refused.message(),
            "submitting to contour 'prod' needs role team-admin in team 'vision'");
  EXPECT_TRUE(authz::canSubmitToContour(carol_, "vision", prod).ok());
  EXPECT_TRUE(authz::canSubmitToContour(admin_, "nlp", prod).ok());
  // A role in one team says nothing about another.
  EXPECT_FALSE(authz::canSubmitToContour(carol_, "nlp", dev).ok());
}

TEST_F(ContourTest, SubmissionNamesTheContourAndDefaultsToDev) {
  auto job = submitTo(alice_, "");
  ASSERT_TRUE(job.ok()) << job.status().toString();
  EXPECT_EQ(job->value.contour, "dev");
  EXPECT_EQ(submitTo(alice_, "test")->value.contour, "test");

  auto prod = submitTo(alice_, "prod");
  EXPECT_EQ(prod.status().code(), Code::kPermissionDenied);
  EXPECT_NE(prod.status().message().find("contour 'prod' needs role team-admin"),
            std::string::npos);
  EXPECT_TRUE(submitTo(carol_, "prod").ok());

  auto unknown = submitTo(alice_, "qa");
  EXPECT_EQ(unknown.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(unknown.status().field(), "contour");
  EXPECT_NE(unknown.status().message().find("dev, test, prod"), std::string::npos);
}

TEST_F(ContourTest, HostContourIsAnAdminSettingTheAgentDoesNotChange) {
  joinHost("gpu-01", 4);
  EXPECT_EQ(cluster_->hosts().getHost(admin_, "gpu-01")->contour, "dev");  // new hosts: the default

  EXPECT_EQ(cluster_->hosts().setHostContour(alice_, "gpu-01", "prod").status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(cluster_->hosts().setHostContour(admin_, "gpu-09", "prod").status().code(),
            Code::kNotFound);
  auto unknown = cluster_->hosts().setHostContour(admin_, "gpu-01", "qa");
  EXPECT_EQ(unknown.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(unknown.status().field(), "contour");

  auto set = cluster_->hosts().setHostContour(admin_, "gpu-01", "prod");
  ASSERT_TRUE(set.ok());
  const auto* put = findOp<store::PutHost>(*set);
  ASSERT_NE(put, nullptr);  // written through the store
  EXPECT_EQ(put->host.contour, "prod");

  // The agent reconnecting re-reports its inventory; the contour stays.
  cluster_->agentDisconnected("gpu-01", &link_);
  cluster_->agentConnected("gpu-01", &link_, inventory(4), {});
  EXPECT_EQ(cluster_->hosts().getHost(admin_, "gpu-01")->contour, "prod");
}

TEST_F(ContourTest, JobsArePlacedOnlyInTheirContour) {
  joinHost("dev-01", 4);
  joinHost("prod-01", 4);
  ASSERT_TRUE(cluster_->hosts().setHostContour(admin_, "prod-01", "prod").ok());
  int64_t prodJob = submitTo(carol_, "prod", 4)->value.id;
  int64_t devJob = submitTo(alice_, "dev", 4)->value.id;
  // No host is in test: refused, unless queued anyway for hosts about to join.
  auto refused = submitTo(alice_, "test", 1);
  EXPECT_EQ(refused.status().field(), "contour") << refused.status().toString();
  int64_t testJob = submitTo(alice_, "test", 1, /*queueAnyway=*/true)->value.id;
  place();
  EXPECT_EQ(firstRank(*cluster_->getJob(admin_, prodJob)).host, "prod-01");
  EXPECT_EQ(firstRank(*cluster_->getJob(admin_, devJob)).host, "dev-01");
  auto wait = cluster_->waitOf(testJob);
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(wait->kind, sched::WaitKind::kNoHostInContour);
  EXPECT_EQ(wait->contour, "test");
  auto explained = cluster_->explainJob(alice_, testJob);
  ASSERT_TRUE(explained.ok());
  EXPECT_NE(explained->dump().find("no_host_in_contour"), std::string::npos);
}

TEST_F(ContourTest, TeamLimitPerContourIsSetByAdminsAndEnforced) {
  joinHost("prod-01", 8);
  ASSERT_TRUE(cluster_->hosts().setHostContour(admin_, "prod-01", "prod").ok());
  QuotaUpdate u;
  u.contourLimits["prod"] = 2;
  EXPECT_EQ(cluster_->quotas().setTeam(carol_, "vision", u).status().code(),
            Code::kPermissionDenied);
  QuotaUpdate bad;
  bad.contourLimits["qa"] = 2;
  auto refused = cluster_->quotas().setTeam(admin_, "vision", bad);
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(refused.status().field(), "contour_limits");
  QuotaUpdate negative;
  negative.contourLimits["prod"] = -1;
  EXPECT_EQ(cluster_->quotas().setTeam(admin_, "vision", negative).status().field(),
            "contour_limits");

  auto set = cluster_->quotas().setTeam(admin_, "vision", u);
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set->value.quota.contourLimits.at("prod"), 2);

  int64_t first = submitTo(carol_, "prod", 2)->value.id;
  int64_t second = submitTo(carol_, "prod", 1)->value.id;
  place();
  EXPECT_EQ(firstRank(*cluster_->getJob(admin_, first)).host, "prod-01");
  auto wait = cluster_->waitOf(second);
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(wait->kind, sched::WaitKind::kContourLimit);

  // Removing the limit lets it run; other limits of the team stay as they are.
  QuotaUpdate more;
  more.contourLimits["test"] = 3;
  ASSERT_TRUE(cluster_->quotas().setTeam(admin_, "vision", more).ok());
  QuotaUpdate remove;
  remove.contourLimits["prod"] = std::nullopt;
  auto removed = cluster_->quotas().setTeam(admin_, "vision", remove);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed->value.quota.contourLimits, (std::map<std::string, int>{{"test", 3}}));
  place();
  EXPECT_EQ(firstRank(*cluster_->getJob(admin_, second)).host, "prod-01");
}

class ContourDurableTest : public DurableClusterTest {};

TEST_F(ContourDurableTest, ContoursSurviveRestartsAndOldDocumentsLoadAsTheDefault) {
  start();
  bootstrap({"vision"});
  const Principal& root = admin_;
  keepJoinedHost("gpu-01", 2, /*connect=*/false);
  keep(cluster_->hosts().setHostContour(root, "gpu-01", "prod"));
  QuotaUpdate u;
  u.contourLimits["prod"] = 4;
  keep(cluster_->quotas().setTeam(root, "vision", u));
  JobRequest r;
  r.team = "vision";
  r.command = {"true"};
  r.contour = "test";
  r.queueAnyway = true;  // no host is in test
  int64_t job = keep(cluster_->submitJob(root, r)).value.id;
  // Documents from before contours: no contour at all.
  model::Host old;
  old.name = "gpu-00";
  model::Job oldJob;
  oldJob.id = 999;
  oldJob.team = "vision";
  oldJob.command = {"true"};
  oldJob.state = model::JobState::kSucceeded;
  store::WriteBatch b;
  b.add(store::PutHost{old}).add(store::PutJob{oldJob});
  ASSERT_TRUE(store_->commit(b).ok());

  ClusterOptions opts = testOptions();
  opts.contours.defaultContour = "test";
  start(opts);
  EXPECT_EQ(cluster_->hosts().getHost(root, "gpu-01")->contour, "prod");
  EXPECT_EQ(cluster_->hosts().getHost(root, "gpu-00")->contour, "test");
  EXPECT_EQ(cluster_->getJob(root, job)->contour, "test");
  EXPECT_EQ(cluster_->getJob(root, 999)->contour, "test");
  EXPECT_EQ(cluster_->quotas().ofTeam(root, "vision")->team.quota.contourLimits.at("prod"), 4);
}

}  // namespace
}  // namespace allot::control
