// What a team's work runs in when it names no image, teams' registry logins, profiles in images,
// and an image's NVIDIA_REQUIRE_CUDA (docs/environments.md), through the Cluster as allotd
// runs it.

#include <gtest/gtest.h>

#include "control/cluster_test_fixture.h"
#include "model/json.h"
#include "store/documents.h"

namespace allot::control {
namespace {

using model::ActualJob;
using model::ActualState;
using model::JobState;

class ClusterImagesTest : public TeamAdminClusterTest {
 protected:
  void SetUp() override {
    TeamAdminClusterTest::SetUp();
    ASSERT_TRUE(cluster_->access().setImageAllow(admin_, "vision", {"registry:5000/ml/"}).ok());
    ASSERT_TRUE(cluster_->access().setImageAllow(admin_, "nlp", {"registry:5000/"}).ok());
  }
  // A host whose agent runs images, with a driver of CUDA `cuda`.
  void joinImageHost(const std::string& name, int gpus, const std::string& cuda = "12.4") {
    joinOnly(name, gpus);
    model::Inventory inv = inventory(gpus);
    inv.images = true;
    for (auto& g : inv.gpus) g.cudaVersion = cuda;
    cluster_->agentConnected(name, &link_, inv, {});
  }
  JobRequest inImage(const std::string& image, int gpus = 1) {
    JobRequest r = request({"python3", "train.py"}, gpus);
    r.image = image;
    return r;
  }
  void schedule() { cluster_->passDurable(cluster_->schedulePass().value); }
};

TEST_F(ClusterImagesTest, ATeamsRegistryLoginGoesOnlyToItsOwnJobsAndIsNeverShownBack) {
  auto& logins = cluster_->registryLogins();
  // Its team-admins and platform admins set it; a member may not; another team's is not there.
  EXPECT_EQ(logins.set(alice_, "vision", "registry:5000", "ml-puller", "s3cret").status().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(logins.set(bob_, "vision", "registry:5000", "x", "y").status().code(), Code::kNotFound);
  for (auto [registry, user, password, field] :
       {std::tuple{"not a registry", "u", "p", "registry"},
        std::tuple{"registry:5000/ml", "u", "p", "registry"},
        std::tuple{"registry:5000", "a:b", "p", "username"},
        std::tuple{"registry:5000", "", "p", "username"},
        std::tuple{"registry:5000", "u", "", "password"},
        std::tuple{"registry:5000", "u", "line\nbreak", "password"}}) {
    auto bad = logins.set(carol_, "vision", registry, user, password);
    ASSERT_FALSE(bad.ok()) << registry << " " << user;
    EXPECT_EQ(bad.status().field(), field) << bad.status().message();
  }
  auto set = logins.set(carol_, "vision", "registry:5000", "ml-puller", "s3cret");
  ASSERT_TRUE(set.ok()) << set.status().message();
  // Shown as registry and username; the password, sealed or not, is in no view of the team.
  const std::string shown = model::toJson(set->value).dump();
  EXPECT_NE(shown.find("ml-puller"), std::string::npos);
  EXPECT_EQ(shown.find("s3cret"), std::string::npos);
  EXPECT_EQ(shown.find("sealed"), std::string::npos);
  EXPECT_EQ(model::toJson(*cluster_->access().team(alice_, "vision")).dump().find("s3cret"),
            std::string::npos);
  // Stored sealed: the store's document holds no password in the clear.
  const std::string stored = store::toStoreDoc(set->value).dump();
  EXPECT_NE(stored.find("sealed_password"), std::string::npos);
  EXPECT_EQ(stored.find("s3cret"), std::string::npos);

  joinImageHost("gpu-01", 2);
  joinImageHost("gpu-02", 2);
  // Two GPUs each: one host each.
  const int64_t mine = submitRequest(alice_, inImage("registry:5000/ml/private:1", 2));
  // The same image, allowed to nlp too, which has no login: its job gets none.
  const int64_t theirs = submitRequest(bob_, inImage("registry:5000/ml/private:1", 2));
  schedule();
  const std::string mineHost = firstRank(job(mine)).host;
  const std::string theirHost = firstRank(job(theirs)).host;
  ASSERT_NE(mineHost, theirHost);
  EXPECT_NE(cluster_->desiredMessage(mineHost).find("\"password\":\"s3cret\""), std::string::npos);
  EXPECT_EQ(cluster_->desiredMessage(theirHost).find("s3cret"), std::string::npos);
  // Once its job runs, the host is not sent it any more.
  cluster_->agentStatus(mineHost, {running(mine)});
  EXPECT_EQ(cluster_->desiredMessage(mineHost).find("s3cret"), std::string::npos);

  EXPECT_EQ(logins.remove(alice_, "vision", "registry:5000").status().code(),
            Code::kPermissionDenied);
  ASSERT_TRUE(logins.remove(admin_, "vision", "registry:5000").ok());
  EXPECT_EQ(logins.remove(admin_, "vision", "registry:5000").status().code(), Code::kNotFound);
}

TEST_F(ClusterImagesTest, APrepullGoesWithTheLoginOfTheTeamItIsForAndNoOther) {
  ASSERT_TRUE(cluster_->registryLogins()
                  .set(admin_, "vision", "registry:5000", "ml-puller", "s3cret")
                  .ok());
  joinImageHost("gpu-01", 2);
  joinImageHost("gpu-02", 2);
  ASSERT_TRUE(cluster_->hosts().dedicateHost(admin_, "gpu-02", "vision").ok());
  auto& cache = cluster_->imageCache();
  // A shared host without a team: no login.
  ASSERT_TRUE(cache.prepull(admin_, "registry:5000/ml/private:1", {"gpu-01"}, "").ok());
  EXPECT_EQ(cluster_->desiredMessage("gpu-01").find("s3cret"), std::string::npos);
  // vision's own host: vision's login, with that prepull only.
  ASSERT_TRUE(cache.prepull(carol_, "registry:5000/ml/private:1", {}, "vision").ok());
  const std::string dedicated = cluster_->desiredMessage("gpu-02");
  EXPECT_NE(dedicated.find("\"prepull_logins\""), std::string::npos) << dedicated;
  EXPECT_NE(dedicated.find("\"password\":\"s3cret\""), std::string::npos);
  // The shared host, named for vision: the same.
  ASSERT_TRUE(cache.prepull(admin_, "registry:5000/ml/private:1", {"gpu-01"}, "", "vision").ok());
  EXPECT_NE(cluster_->desiredMessage("gpu-01").find("\"password\":\"s3cret\""), std::string::npos);
  // nlp has no login to it: a prepull for nlp carries none.
  ASSERT_TRUE(cache.prepull(admin_, "registry:5000/nlp/y:1", {"gpu-01"}, "", "nlp").ok());
  const std::string shared = cluster_->desiredMessage("gpu-01");
  EXPECT_EQ(shared.find("registry:5000/nlp/y:1\":{"), std::string::npos) << shared;
}

TEST_F(ClusterImagesTest, ATeamsDefaultImageRunsWhatNamesNoImageAndHostOptsOut) {
  EXPECT_EQ(cluster_->access()
                .setDefaultImage(alice_, "vision", "registry:5000/ml/base:1")
                .status()
                .code(),
            Code::kPermissionDenied);
  EXPECT_EQ(
      cluster_->access().setDefaultImage(bob_, "vision", "registry:5000/ml/base:1").status().code(),
      Code::kNotFound);  // another team's: not even there
  for (const char* bad : {"registry:5000/other/x:1", "base:1", "registry:5000/ml/UPPER:1"}) {
    auto refused = cluster_->access().setDefaultImage(carol_, "vision", bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().field(), "image") << refused.status().message();
  }
  auto set = cluster_->access().setDefaultImage(carol_, "vision", "registry:5000/ml/base");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->value.defaultImage, "registry:5000/ml/base:latest");

  joinImageHost("gpu-01", 2);
  const int64_t plain = submitRequest(alice_, request({"python3", "t.py"}, 1));
  EXPECT_EQ(job(plain).image, "registry:5000/ml/base:latest");
  const int64_t named = submitRequest(alice_, inImage("registry:5000/ml/other:2"));
  EXPECT_EQ(job(named).image, "registry:5000/ml/other:2");
  const int64_t onHost = submitRequest(alice_, inImage("host"));
  EXPECT_EQ(job(onHost).image, "");
  // Another team's work is not touched by it.
  EXPECT_EQ(job(submitRequest(bob_, request({"true"}, 0))).image, "");

  // Sessions: the profile's image, else the team's default.
  model::Profile p;
  p.name = "torch";
  p.team = "vision";
  p.command = {"jupyter-server"};
  p.image = "registry:5000/other/jupyter:1";
  auto outside = cluster_->profiles().create(carol_, p);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().field(), "image");
  p.image = "registry:5000/ml/jupyter";
  auto made = cluster_->profiles().create(carol_, p);
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ(made->value.image, "registry:5000/ml/jupyter:latest");
  SessionRequest s;
  s.profile = "torch";
  s.gpus = 0;
  auto session = cluster_->sessions().create(alice_, s);
  ASSERT_TRUE(session.ok()) << session.status().message();
  EXPECT_EQ(session->value.image, "registry:5000/ml/jupyter:latest");
  model::Profile noImage;  // platform-wide, with no image: the team's default
  noImage.name = "plain";
  noImage.command = {"jupyter-server"};
  ASSERT_TRUE(cluster_->profiles().create(admin_, noImage).ok());
  s.profile = "plain";
  auto byDefault = cluster_->sessions().create(alice_, s);
  ASSERT_TRUE(byDefault.ok()) << byDefault.status().message();
  EXPECT_EQ(byDefault->value.image, "registry:5000/ml/base:latest");

  ASSERT_TRUE(cluster_->access().setDefaultImage(carol_, "vision", "").ok());
  EXPECT_EQ(job(submitRequest(alice_, request({"true"}, 0))).image, "");
}

TEST_F(ClusterImagesTest, AnImagesRequiredCudaRequeuesItFromAnOlderDriverAndIsKnownAfter) {
  joinImageHost("old", 2, "11.8");
  const int64_t a = submitRequest(alice_, inImage("registry:5000/ml/cuda:12"));
  schedule();
  ASSERT_EQ(firstRank(job(a)).host, "old");
  // Pulled, the image says it needs CUDA 12.1: the agent does not start it, and allotd puts it
  // back in the queue with that minimum rather than failing it.
  ActualJob refused{
      a, ActualState::kFailedToStart, 0, {}, {}, 0, clock_.nowMs(), "its image needs CUDA 12.1"};
  refused.imageMinCuda = "12.1";
  cluster_->agentStatus("old", {refused});
  model::Job j = job(a);
  EXPECT_EQ(j.state, JobState::kQueued) << j.reason;
  EXPECT_EQ(j.resources.minCuda, "12.1");
  EXPECT_EQ(j.imageMinCuda, "12.1");
  EXPECT_NE(j.reason.find("needs CUDA 12.1"), std::string::npos) << j.reason;
  EXPECT_TRUE(cluster_->hosts().allocations(admin_, "old").empty());  // its GPU freed
  cluster_->agentStatus("old", {});  // its agent let go of the run it did not start
  schedule();
  EXPECT_EQ(job(a).state, JobState::kQueued);  // the old driver cannot take it
  joinImageHost("new", 2, "12.4");
  schedule();
  ASSERT_EQ(job(a).state, JobState::kScheduled) << job(a).reason;
  EXPECT_EQ(firstRank(job(a)).host, "new");

  // Once a host says it holds the image and what it needs, a new job knows at submission.
  model::ImageReport report;
  report.images.push_back(
      {"registry:5000/ml/cuda:12", "sha256:" + std::string(64, 'c'), 10, 0, false, "12.1"});
  cluster_->imageCache().agentReport("new", report);
  const int64_t b = submitRequest(alice_, inImage("registry:5000/ml/cuda:12"));
  EXPECT_EQ(job(b).resources.minCuda, "12.1");
  EXPECT_EQ(job(b).imageMinCuda, "12.1");
  // Work without GPUs is not held to it, as the NVIDIA container toolkit does not.
  const int64_t c = submitRequest(alice_, inImage("registry:5000/ml/cuda:12", 0));
  EXPECT_EQ(job(c).resources.minCuda, "");

  // Attack: a host's credential reports an image every team uses as needing CUDA 99.0, to have
  // their jobs in it refused or held at submission. Where another host the team may use says
  // less, the lowest need wins (a review found the highest did); once the host is gone (stream
  // closed, host retired), its word counts for nothing at all.
  model::ImageReport poisoned;
  poisoned.images.push_back(
      {"registry:5000/ml/cuda:12", "sha256:" + std::string(64, 'c'), 10, 0, false, "99.0"});
  cluster_->imageCache().agentReport("old", poisoned);
  EXPECT_EQ(cluster_->imageCache().knownMinCuda("registry:5000/ml/cuda:12", "vision"), "12.1");
  EXPECT_EQ(job(submitRequest(alice_, inImage("registry:5000/ml/cuda:12"))).resources.minCuda,
            "12.1");
  cluster_->agentDisconnected("old", &link_);
  EXPECT_EQ(cluster_->imageCache().knownMinCuda("registry:5000/ml/cuda:12", "vision"), "12.1");
  EXPECT_EQ(cluster_->imageCache().hostsHolding("registry:5000/ml/cuda:12"),
            std::vector<std::string>{"new"});
}

TEST_F(ClusterImagesTest, AmongEquallyGoodHostsOneHoldingTheImageIsPreferredAndExplainSaysSo) {
  joinImageHost("gpu-01", 2);
  joinImageHost("gpu-02", 2);
  model::ImageReport report;
  report.images.push_back(
      {"registry:5000/ml/big:1", "sha256:" + std::string(64, 'b'), 10, 0, false, ""});
  cluster_->imageCache().agentReport("gpu-02", report);
  const int64_t a = submitRequest(alice_, inImage("registry:5000/ml/big:1"));
  const int64_t other = submitRequest(alice_, inImage("registry:5000/ml/small:1"));
  schedule();
  EXPECT_EQ(firstRank(job(a)).host, "gpu-02");
  auto why = cluster_->explainJob(alice_, a);
  ASSERT_TRUE(why.ok());
  EXPECT_EQ((*why)["placement"].value("image_cached", false), true) << why->dump();
  auto plain = cluster_->explainJob(alice_, other);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE((*plain)["placement"].contains("image_cached")) << plain->dump();

  // A minimum the image set is explained as the image's.
  model::ImageReport needs;
  needs.images.push_back(
      {"registry:5000/ml/cuda:12", "sha256:" + std::string(64, 'c'), 10, 0, false, "12.1"});
  cluster_->imageCache().agentReport("gpu-01", needs);
  const int64_t c = submitRequest(alice_, inImage("registry:5000/ml/cuda:12"));
  auto cuda = cluster_->explainJob(alice_, c);
  ASSERT_TRUE(cuda.ok());
  EXPECT_EQ((*cuda)["image_min_cuda"].value("cuda", ""), "12.1") << cuda->dump();
}

}  // namespace
}  // namespace allot::control
