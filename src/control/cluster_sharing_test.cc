// Quotas, dedication, shared GPUs, the scheduling fields of jobs and max-runtime enforcement.

#include <gtest/gtest.h>

#include <cmath>

#include "control/cluster.h"
#include "control/cluster_test_fixture.h"

namespace allot::control {
namespace {

class SharingTest : public TeamAdminClusterTest {
 protected:
  void SetUp() override {
    TeamAdminClusterTest::SetUp();
    ASSERT_TRUE(cluster_->access().createProject(carol_, "resnet", "").ok());
    ASSERT_TRUE(cluster_->access().createProject(carol_, "vit", "").ok());
  }

  void setVisionGuarantee(std::map<std::string, int> g) {
    QuotaUpdate u;
    u.guaranteed = std::move(g);
    auto c = cluster_->quotas().setTeam(admin_, "vision", u);
    ASSERT_TRUE(c.ok()) << c.status().toString();
  }

  const model::Team& vision() const { return cluster_->world().teams.at("vision"); }
};

// ---- team quota ----

TEST_F(SharingTest, TeamQuotaIsSetByAdminsAndWrittenDurably) {
  QuotaUpdate u;
  u.guaranteed = {{"A100", 4}, {"", 2}, {"H100", 0}};
  u.borrowLimit = 3;
  u.weight = 2.5;
  u.lendDedicated = true;
  auto c = cluster_->quotas().setTeam(admin_, "vision", u);
  ASSERT_TRUE(c.ok()) << c.status().toString();
  const auto* put = findOp<store::PutTeam>(*c);
  ASSERT_NE(put, nullptr);
  // A guarantee of 0 is no guarantee: dropped.
  EXPECT_EQ(put->team.quota.guaranteed, (std::map<std::string, int>{{"A100", 4}, {"", 2}}));
  EXPECT_EQ(put->team.quota.borrowLimit, 3);
  EXPECT_EQ(put->team.quota.lendLimit, -1);
  EXPECT_EQ(put->team.quota.weight, 2.5);
  EXPECT_TRUE(put->team.lendDedicated);
  EXPECT_EQ(vision().quota.guaranteed, put->team.quota.guaranteed);

  // Omitted fields keep their values; a limit of -1 (null in the API) clears it.
  QuotaUpdate only;
  only.weight = 1.0;
  only.borrowLimit = -1;
  ASSERT_TRUE(cluster_->quotas().setTeam(admin_, "vision", only).ok());
  EXPECT_EQ(vision().quota.guaranteed.at("A100"), 4);
  EXPECT_EQ(vision().quota.borrowLimit, -1);
  EXPECT_TRUE(vision().lendDedicated);
}

TEST_F(SharingTest, TeamQuotaRefusesOthersAndBadInputChangingNothing) {
  QuotaUpdate u;
  u.weight = 2;
  EXPECT_EQ(cluster_->quotas().setTeam(alice_, "vision", u).status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(cluster_->quotas().setTeam(carol_, "vision", u).status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(cluster_->quotas().setTeam(bob_, "vision", u).status().code(), Code::kNotFound);
  EXPECT_EQ(cluster_->quotas().setTeam(admin_, "nope", u).status().code(), Code::kNotFound);

  auto fieldOf = [&](auto edit) {
    QuotaUpdate bad;
    edit(bad);
    return cluster_->quotas().setTeam(admin_, "vision", bad).status().field();
  };
  using Q = QuotaUpdate;
  EXPECT_EQ(fieldOf([](Q& q) { q.guaranteed = {{"A100", -1}}; }), "guaranteed");
  EXPECT_EQ(fieldOf([](Q& q) { q.guaranteed = {{"A100", 100'001}}; }), "guaranteed");
  EXPECT_EQ(fieldOf([](Q& q) { q.guaranteed = {{"A100,H100", 1}}; }), "guaranteed");
  // The API maps "any" to ""; as a model name it is refused.
  EXPECT_EQ(fieldOf([](Q& q) { q.guaranteed = {{"any", 1}}; }), "guaranteed");
  EXPECT_EQ(fieldOf([](Q& q) { q.weight = 0; }), "weight");
  EXPECT_EQ(fieldOf([](Q& q) { q.weight = 1000.5; }), "weight");
  EXPECT_EQ(fieldOf([](Q& q) { q.weight = std::nan(""); }), "weight");
  EXPECT_EQ(fieldOf([](Q& q) { q.borrowLimit = -2; }), "borrow_limit");
  EXPECT_EQ(fieldOf([](Q& q) { q.lendLimit = 100'001; }), "lend_limit");
  // A bad field after good ones: still nothing changes.
  EXPECT_EQ(fieldOf([](Q& q) {
              q.guaranteed = {{"A100", 8}};
              q.lendLimit = 100'001;
            }),
            "lend_limit");
  EXPECT_TRUE(vision().quota.guaranteed.empty());
  EXPECT_EQ(vision().quota.weight, 1.0);
}

TEST_F(SharingTest, TeamQuotaViewIsForTheTeamAndAdmins) {
  setVisionGuarantee({{"A100", 4}});
  auto v = cluster_->quotas().ofTeam(alice_, "vision");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->team.quota.guaranteed.at("A100"), 4);
  EXPECT_FALSE(v->status.has_value());  // no scheduling pass has looked yet
  EXPECT_TRUE(cluster_->quotas().ofTeam(admin_, "vision").ok());
  EXPECT_EQ(cluster_->quotas().ofTeam(bob_, "vision").status().code(), Code::kNotFound);

  TeamQuotaStatus st;
  st.guaranteed = 4;
  st.within = 3;
  st.known = true;
  cluster_->quotas().setStatus({{"vision", st}, {"nlp", TeamQuotaStatus{}}});
  v = cluster_->quotas().ofTeam(alice_, "vision");
  ASSERT_TRUE(v->status.has_value());
  EXPECT_EQ(v->status->within, 3);
  EXPECT_FALSE(cluster_->quotas().ofTeam(bob_, "nlp")->status.has_value());  // not known
}

// ---- project split ----

TEST_F(SharingTest, TeamAdminsSplitTheGuaranteeAmongProjects) {
  setVisionGuarantee({{"A100", 4}, {"", 2}});
  auto c = cluster_->quotas().setProject(carol_, "vision", "resnet", {{"A100", 3}, {"", 2}});
  ASSERT_TRUE(c.ok()) << c.status().toString();
  const auto* put = findOp<store::PutProject>(*c);
  ASSERT_NE(put, nullptr);
  EXPECT_EQ(put->project.guaranteed.at("A100"), 3);
  EXPECT_EQ(put->project.team, "vision");

  // 3 + 2 A100 would exceed the team's 4.
  auto over = cluster_->quotas().setProject(carol_, "vision", "vit", {{"A100", 2}});
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().field(), "guaranteed");
  EXPECT_NE(over.status().message().find("5 A100 GPUs"), std::string::npos)
      << over.status().message();
  EXPECT_NE(over.status().message().find("of 4"), std::string::npos);
  // A model the team has no guarantee for.
  EXPECT_EQ(cluster_->quotas().setProject(admin_, "vision", "vit", {{"H100", 1}}).status().field(),
            "guaranteed");
  EXPECT_TRUE(cluster_->world().projects.at("vision/vit").guaranteed.empty());
  // Re-splitting one project replaces its own share, it does not add to it.
  EXPECT_TRUE(cluster_->quotas().setProject(admin_, "vision", "resnet", {{"A100", 4}}).ok());
  EXPECT_TRUE(cluster_->quotas().setProject(carol_, "vision", "vit", {{"", 2}}).ok());

  // The team's guarantee cannot drop under what its projects hold.
  QuotaUpdate lower;
  lower.guaranteed = {{"A100", 2}, {"", 2}};
  auto refused = cluster_->quotas().setTeam(admin_, "vision", lower);
  EXPECT_EQ(refused.status().field(), "guaranteed");
  EXPECT_EQ(vision().quota.guaranteed.at("A100"), 4);

  auto view = cluster_->quotas().ofTeam(alice_, "vision");
  ASSERT_EQ(view->projects.size(), 2u);
}

TEST_F(SharingTest, ProjectSplitIsForTeamAdminsOfThatTeam) {
  setVisionGuarantee({{"A100", 4}});
  EXPECT_EQ(
      cluster_->quotas().setProject(alice_, "vision", "resnet", {{"A100", 1}}).status().code(),
      Code::kPermissionDenied);
  EXPECT_EQ(cluster_->quotas().setProject(bob_, "vision", "resnet", {{"A100", 1}}).status().code(),
            Code::kNotFound);
  EXPECT_EQ(cluster_->quotas().setProject(carol_, "vision", "nope", {{"A100", 1}}).status().code(),
            Code::kNotFound);
  // A team-admin of another team is just another team.
  auto danP = addUser("dan", "nlp", model::Role::kTeamAdmin);
  EXPECT_EQ(cluster_->quotas().setProject(danP, "vision", "resnet", {{"A100", 1}}).status().code(),
            Code::kNotFound);
  EXPECT_TRUE(cluster_->world().projects.at("vision/resnet").guaranteed.empty());
}

TEST_F(SharingTest, TeamAdminsAreMembersWhoCanRunTheirTeam) {
  EXPECT_EQ(carol_.roleIn("vision"), model::Role::kTeamAdmin);
  EXPECT_TRUE(cluster_->access().createProject(carol_, "detr", "").ok());
  EXPECT_EQ(cluster_->access().createProject(carol_, "x", "nlp").status().code(), Code::kNotFound);
  EXPECT_EQ(cluster_->access().createTeam(carol_, "rogue").status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(
      cluster_->access().createUser(admin_, "erin", "", model::Role::kTeamAdmin).status().field(),
      "team");
}

// ---- dedication and visibility ----

TEST_F(SharingTest, DedicatedHostExistsOnlyForItsTeam) {
  joinHost("gpu-01", 2);
  joinHost("gpu-02", 2);
  auto c = cluster_->hosts().dedicateHost(admin_, "gpu-01", "vision");
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_TRUE(c->pushHosts.empty());
  const auto* put = findOp<store::PutHost>(*c);
  ASSERT_NE(put, nullptr);
  EXPECT_EQ(put->host.dedicatedTo, "vision");

  auto names = [&](const Principal& p) {
    std::vector<std::string> out;
    for (const auto& h : cluster_->hosts().listHosts(p)) out.push_back(h.name);
    return out;
  };
  EXPECT_EQ(names(bob_), std::vector<std::string>{"gpu-02"});
  EXPECT_EQ(names(alice_), (std::vector<std::string>{"gpu-01", "gpu-02"}));
  EXPECT_EQ(names(admin_), (std::vector<std::string>{"gpu-01", "gpu-02"}));
  EXPECT_EQ(cluster_->hosts().getHost(bob_, "gpu-01").status().code(), Code::kNotFound);
  EXPECT_TRUE(cluster_->hosts().getHost(alice_, "gpu-01").ok());
  EXPECT_TRUE(cluster_->hosts().allocations(bob_, "gpu-01").empty());

  // Others cannot even learn it exists by trying to change it.
  EXPECT_EQ(cluster_->hosts().dedicateHost(bob_, "gpu-01", "").status().code(), Code::kNotFound);
  EXPECT_EQ(cluster_->hosts().dedicateHost(alice_, "gpu-01", "").status().code(),
            Code::kPermissionDenied);
  auto unknown = cluster_->hosts().dedicateHost(admin_, "gpu-02", "nope");
  EXPECT_EQ(unknown.status().code(), Code::kNotFound);
  EXPECT_EQ(unknown.status().field(), "team");
  EXPECT_EQ(cluster_->world().hosts.at("gpu-02").dedicatedTo, "");

  ASSERT_TRUE(cluster_->hosts().dedicateHost(admin_, "gpu-01", "").ok());  // back to the pool
  EXPECT_EQ(names(bob_).size(), 2u);
}

TEST_F(SharingTest, DedicatedGpuOnAPoolHostIsLeftOutForOthers) {
  joinHost("gpu-01", 2);
  GpuSettings s;
  s.dedicatedTo = "vision";
  auto c = cluster_->hosts().setGpu(admin_, "gpu-01", 1, s);
  ASSERT_TRUE(c.ok()) << c.status().toString();
  ASSERT_NE(findOp<store::PutHost>(*c), nullptr);
  EXPECT_EQ(findOp<store::PutHost>(*c)->host.gpus[1].dedicatedTo, "vision");

  auto bobView = cluster_->hosts().getHost(bob_, "gpu-01");
  ASSERT_TRUE(bobView.ok());
  ASSERT_EQ(bobView->gpus.size(), 1u);
  EXPECT_EQ(bobView->gpus[0].index, 0);
  EXPECT_EQ(cluster_->hosts().listHosts(bob_)[0].gpus.size(), 1u);
  EXPECT_EQ(cluster_->hosts().getHost(alice_, "gpu-01")->gpus.size(), 2u);
  EXPECT_EQ(cluster_->hosts().getHost(admin_, "gpu-01")->gpus.size(), 2u);

  // Two vision jobs, one on its dedicated GPU (first) and one in the pool: bob sees only the
  // pool GPU's allocation. (A job never spans dedicated and pool GPUs: docs/scheduler.md.)
  submit(alice_, 1);
  submit(alice_, 1);
  cluster_->passDurable(cluster_->schedulePass().value);
  EXPECT_EQ(cluster_->hosts().allocations(alice_, "gpu-01").size(), 2u);
  auto bobAllocs = cluster_->hosts().allocations(bob_, "gpu-01");
  ASSERT_EQ(bobAllocs.size(), 1u);
  EXPECT_EQ(bobAllocs[0].gpuIndex, 0);
}

TEST_F(SharingTest, GpuSettingsAreCheckedAndKeptAcrossReports) {
  joinHost("gpu-01", 2);
  GpuSettings s;
  s.shared = true;
  EXPECT_EQ(cluster_->hosts().setGpu(alice_, "gpu-01", 0, s).status().code(),
            Code::kPermissionDenied);
  auto noGpu = cluster_->hosts().setGpu(admin_, "gpu-01", 7, s);
  EXPECT_EQ(noGpu.status().code(), Code::kNotFound);
  EXPECT_EQ(noGpu.status().field(), "index");
  EXPECT_EQ(cluster_->hosts().setGpu(admin_, "nope", 0, s).status().code(), Code::kNotFound);
  GpuSettings badTeam;
  badTeam.dedicatedTo = "nope";
  EXPECT_EQ(cluster_->hosts().setGpu(admin_, "gpu-01", 0, badTeam).status().field(),
            "dedicated_to");

  ASSERT_TRUE(cluster_->hosts().setGpu(admin_, "gpu-01", 0, s).ok());
  GpuSettings ded;
  ded.dedicatedTo = "vision";
  ASSERT_TRUE(cluster_->hosts().setGpu(admin_, "gpu-01", 1, ded).ok());
  // A host may not be dedicated to a team other than one of its GPUs'.
  EXPECT_EQ(cluster_->hosts().dedicateHost(admin_, "gpu-01", "nlp").status().code(),
            Code::kFailedPrecondition);
  ASSERT_TRUE(cluster_->hosts().dedicateHost(admin_, "gpu-01", "vision").ok());
  GpuSettings other;
  other.dedicatedTo = "nlp";
  EXPECT_EQ(cluster_->hosts().setGpu(admin_, "gpu-01", 0, other).status().field(), "dedicated_to");

  // The agent reconnects and re-reports: the settings stay, in memory and in what is written.
  auto again = cluster_->agentConnected("gpu-01", &link_, inventory(2), {});
  const auto* put = findOp<store::PutHost>(again);
  ASSERT_NE(put, nullptr);
  EXPECT_TRUE(put->host.gpus[0].shared);
  EXPECT_EQ(put->host.gpus[1].dedicatedTo, "vision");
  EXPECT_EQ(put->host.dedicatedTo, "vision");
  // And a re-join (a reinstalled host, after an admin reset its credential) keeps them too.
  ASSERT_TRUE(cluster_->hosts().resetHostCredential(admin_, "gpu-01").ok());
  auto jt = cluster_->hosts().createJoinToken(admin_, 3'600'000);
  auto rejoined = cluster_->hosts().joinHost(jt->value.secret, "gpu-01", inventory(2));
  ASSERT_TRUE(rejoined.ok());
  EXPECT_TRUE(rejoined->value.host.gpus[0].shared);
  EXPECT_EQ(rejoined->value.host.dedicatedTo, "vision");

  // Fields left out keep their value.
  GpuSettings onlyShared;
  onlyShared.shared = false;
  ASSERT_TRUE(cluster_->hosts().setGpu(admin_, "gpu-01", 1, onlyShared).ok());
  EXPECT_EQ(cluster_->world().hosts.at("gpu-01").gpus[1].dedicatedTo, "vision");
}

// ---- jobs ----

TEST_F(SharingTest, SubmitKeepsTheSchedulingFields) {
  JobRequest r;
  r.command = {"python", "serve.py"};
  r.resources.gpus = 1;
  r.resources.gpuModels = {"A100", "H100", "A100"};
  r.resources.gpuMilli = 250;
  r.resources.gpuMemoryMib = 10240;
  r.priority = 50;
  r.preemptible = true;
  r.maxRuntimeMs = 7'200'000;
  r.resources.minDriver = "535.104";
  r.resources.minCuda = "12.2";
  auto c = cluster_->submitJob(alice_, r);
  ASSERT_TRUE(c.ok()) << c.status().toString();
  const auto* put = findOp<store::PutJob>(*c);
  ASSERT_NE(put, nullptr);
  const model::Job& j = put->job;
  EXPECT_EQ(j.resources.gpuModels, (std::vector<std::string>{"A100", "H100"}));
  EXPECT_EQ(j.resources.gpuMilli, 250);
  EXPECT_EQ(j.resources.gpuMemoryMib, 10240);
  EXPECT_EQ(j.priority, 50);
  EXPECT_TRUE(j.preemptible);
  EXPECT_EQ(j.maxRuntimeMs, 7'200'000);
  EXPECT_EQ(j.resources.minDriver, "535.104");
  EXPECT_EQ(j.resources.minCuda, "12.2");

  JobRequest whole;
  whole.command = {"x"};
  whole.resources.wholeHost = true;
  whole.resources.gpuModels = {"any"};
  auto w = cluster_->submitJob(alice_, whole);
  ASSERT_TRUE(w.ok()) << w.status().toString();
  EXPECT_TRUE(w->value.resources.wholeHost);
  EXPECT_TRUE(w->value.resources.gpuModels.empty());
}

TEST_F(SharingTest, BadSchedulingFieldsAreRefusedByName) {
  auto before = cluster_->world().jobs.size();
  auto fieldOf = [&](auto edit) {
    JobRequest r;
    r.command = {"x"};
    r.resources.gpus = 1;
    edit(r);
    return cluster_->submitJob(alice_, r).status().field();
  };
  EXPECT_EQ(fieldOf([](JobRequest& r) { r.resources.gpuMilli = 0; }), "gpu_milli");
  EXPECT_EQ(fieldOf([](JobRequest& r) { r.resources.gpuMilli = 1001; }), "gpu_milli");
  EXPECT_EQ(fieldOf([](JobRequest& r) {
              r.resources.gpus = 2;
              r.resources.gpuMilli = 500;
            }),
            "gpu_milli");
  EXPECT_EQ(fieldOf([](JobRequest& r) {
              r.resources.gpus = 0;
              r.resources.gpuMemoryMib = 1024;
            }),
            "gpu_memory_mib");
  EXPECT_EQ(fieldOf([](JobRequest& r) { r.resources.gpuMemoryMib = -1; }), "gpu_memory_mib");
  EXPECT_EQ(fieldOf([](JobRequest& r) { r.resources.wholeHost = true; }), "gpus");
  EXPECT_EQ(fieldOf([](JobRequest& r) { r.priority = 1001; }), "priority");
  EXPECT_EQ(fieldOf([](JobRequest& r) { r.priority = -1001; }), "priority");
  EXPECT_EQ(fieldOf([](JobRequest& r) { r.maxRuntimeMs = -1; }), "max_runtime");
  EXPECT_EQ(fieldOf([](JobRequest& r) { r.resources.gpuModels = {"A100", "any"}; }), "gpu_models");
  EXPECT_EQ(fieldOf([](JobRequest& r) { r.resources.gpuModels = {"A100=2"}; }), "gpu_models");
  EXPECT_EQ(fieldOf([](JobRequest& r) { r.resources.gpuModels = {""}; }), "gpu_models");
  for (const char* v : {"abc", "12.", ".5", "1..2", "1.2.3.4.5", "12-rc1"}) {
    EXPECT_EQ(fieldOf([&](JobRequest& r) { r.resources.minDriver = v; }), "min_driver") << v;
  }
  EXPECT_EQ(fieldOf([](JobRequest& r) { r.resources.minCuda = "twelve"; }), "min_cuda");
  EXPECT_EQ(cluster_->world().jobs.size(), before);
}

TEST_F(SharingTest, RunningJobPastItsMaxRuntimeIsCancelled) {
  joinHost("gpu-01", 2);
  JobRequest r;
  r.command = {"train"};
  r.resources.gpus = 1;
  r.maxRuntimeMs = 7'200'000;
  int64_t id = cluster_->submitJob(alice_, r)->value.id;
  JobRequest q = r;  // one that stays queued: its clock has not started
  q.resources.gpus = 2;
  int64_t queued = cluster_->submitJob(alice_, q)->value.id;
  cluster_->passDurable(cluster_->schedulePass().value);
  model::ActualJob run{id, model::ActualState::kRunning, 1, {}, {}, clock_.nowMs(), 0, ""};
  cluster_->agentStatus("gpu-01", {run});

  clock_.advance(7'200'000);
  EXPECT_EQ(cluster_->enforceMaxRuntime().value, 0);  // exactly at its limit: not past it
  clock_.advance(1'000);
  auto c = cluster_->enforceMaxRuntime();
  EXPECT_EQ(c.value, 1);
  EXPECT_TRUE(c.pushHosts.count("gpu-01"));
  const auto* put = findOp<store::PutJob>(c);
  ASSERT_NE(put, nullptr);
  EXPECT_TRUE(put->job.cancelRequested);
  EXPECT_EQ(put->job.reason, "exceeded its maximum runtime of 2h");
  EXPECT_NE(cluster_->desiredMessage("gpu-01").find("\"cancel\":true"), std::string::npos);
  EXPECT_EQ(cluster_->enforceMaxRuntime().value, 0);  // asked once

  reportEnded("gpu-01", run, {}, 15);
  auto j = cluster_->getJob(alice_, id);
  EXPECT_EQ(j->state, JobState::kCancelled);
  EXPECT_EQ(j->reason, "exceeded its maximum runtime of 2h; killed by signal 15");
  EXPECT_EQ(cluster_->getJob(alice_, queued)->state, JobState::kQueued);
}

}  // namespace
}  // namespace allot::control

namespace allot::control {
namespace {

TEST_F(ClusterTest, AFractionOfASharedGpuIsToldItsShare) {
  joinHost("gpu-01", 1);
  GpuSettings s;
  s.shared = true;
  ASSERT_TRUE(cluster_->hosts().setGpu(admin_, "gpu-01", 0, s).ok());
  JobRequest r;
  r.command = {"python", "serve.py"};
  r.resources.gpus = 1;
  r.resources.gpuMilli = 250;
  auto c = cluster_->submitJob(alice_, r);
  ASSERT_TRUE(c.ok()) << c.status().toString();
  auto pass = cluster_->schedulePass().value;
  ASSERT_EQ(pass.placed.size(), 1u);
  cluster_->passDurable(pass);
  std::string desired = cluster_->desiredMessage("gpu-01");
  EXPECT_NE(desired.find("\"ALLOT_GPU_FRACTION\":\"0.25\""), std::string::npos) << desired;
  EXPECT_NE(desired.find("\"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE\":\"25\""), std::string::npos)
      << desired;
  EXPECT_NE(desired.find("\"ALLOT_GPU_MEMORY_MIB\":\"20480\""), std::string::npos) << desired;
}

}  // namespace
}  // namespace allot::control
