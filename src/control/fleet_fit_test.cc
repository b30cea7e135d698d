// Requests no host of the fleet could ever run are refused at submission, naming the field; the
// fleet a team cannot use (another team's dedicated hosts) neither counts nor shows.

#include "control/fleet_fit.h"

#include <gtest/gtest.h>

namespace allot::control {
namespace {

class FleetFitTest : public ::testing::Test {
 protected:
  void host(const std::string& name, int gpus, const std::string& gpuModel,
            const std::string& driver = "550.54", const std::string& contour = "dev") {
    model::Host h;
    h.name = name;
    h.cpus = 64;
    h.memoryMib = 512 * 1024;
    h.contour = contour;
    for (int i = 0; i < gpus; ++i) {
      model::Gpu g;
      g.index = i;
      g.model = gpuModel;
      g.memoryMib = 81920;
      g.driverVersion = driver;
      g.cudaVersion = "12.4";
      h.gpus.push_back(g);
    }
    hosts_[name] = h;
  }

  Status check(const model::ResourceRequest& r, const std::string& team = "vision",
               const std::string& contour = "dev") {
    return checkFleetCanRun({hosts_, teams_, "dev"}, team, contour, r);
  }
  static model::ResourceRequest gpus(int n, std::vector<std::string> models = {}) {
    model::ResourceRequest r;
    r.gpus = n;
    r.gpuModels = std::move(models);
    return r;
  }

  std::map<std::string, model::Host> hosts_;
  std::map<std::string, model::Team> teams_;
};

TEST_F(FleetFitTest, AFleetWithNoHostYetRefusesNothing) { EXPECT_TRUE(check(gpus(16)).ok()); }

TEST_F(FleetFitTest, MoreGpusThanTheLargestHostIsRefusedNamingGpus) {
  host("gpu-01", 8, "H100");
  host("gpu-02", 4, "H100");
  EXPECT_TRUE(check(gpus(8)).ok());
  Status s = check(gpus(16));
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.field(), "gpus");
  EXPECT_NE(s.message().find("the most on one host is 8"), std::string::npos) << s.message();
}

TEST_F(FleetFitTest, AJobInAnImageCountsOnlyHostsThatRunImages) {
  host("gpu-01", 8, "H100");
  Status s = checkFleetCanRun({hosts_, teams_, "dev"}, "vision", "dev", gpus(1), true);
  EXPECT_EQ(s.field(), "image");
  EXPECT_NE(s.message().find("runs jobs in images"), std::string::npos) << s.message();
  host("gpu-02", 4, "H100");
  hosts_["gpu-02"].images = true;
  EXPECT_TRUE(checkFleetCanRun({hosts_, teams_, "dev"}, "vision", "dev", gpus(4), true).ok());
  // Only the image hosts' GPUs count: 8 are on a host that does not run images.
  EXPECT_EQ(checkFleetCanRun({hosts_, teams_, "dev"}, "vision", "dev", gpus(8), true).field(),
            "gpus");
}

TEST_F(FleetFitTest, AModelNoHostHasIsRefusedNamingWhatTheFleetOffers) {
  host("gpu-01", 8, "H100");
  host("gpu-02", 8, "A100");
  EXPECT_TRUE(check(gpus(2, {"V100", "A100"})).ok());
  Status s = check(gpus(1, {"V100"}));
  EXPECT_EQ(s.field(), "gpu_models");
  EXPECT_NE(s.message().find("it offers A100, H100"), std::string::npos) << s.message();
}

TEST_F(FleetFitTest, AnotherTeamsDedicatedHostNeitherCountsNorShows) {
  host("gpu-01", 2, "A100");
  host("secret-01", 8, "H200");
  hosts_["secret-01"].dedicatedTo = "nlp";
  Status s = check(gpus(8, {"H200"}));
  EXPECT_EQ(s.field(), "gpu_models");
  EXPECT_NE(s.message().find("it offers A100)"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("secret"), std::string::npos) << s.message();
  EXPECT_TRUE(check(gpus(8, {"H200"}), "nlp").ok()) << "its own team's host counts";
  // A lending team's idle dedicated capacity may run it: it is not "never".
  teams_["nlp"].lendDedicated = true;
  EXPECT_TRUE(check(gpus(8, {"H200"})).ok());
}

TEST_F(FleetFitTest, AGpuDedicatedToAnotherTeamDoesNotCount) {
  host("gpu-01", 4, "A100");
  hosts_["gpu-01"].gpus[3].dedicatedTo = "nlp";
  EXPECT_TRUE(check(gpus(3)).ok());
  EXPECT_EQ(check(gpus(4)).field(), "gpus");
}

TEST_F(FleetFitTest, AHostThatIsDownOrDrainedStillCounts) {
  host("gpu-01", 8, "H100");
  hosts_["gpu-01"].state = model::HostState::kUnreachable;
  hosts_["gpu-01"].adminState = model::AdminState::kDraining;
  EXPECT_TRUE(check(gpus(8)).ok());
}

TEST_F(FleetFitTest, VersionsMemoryCpuHostsAndContourEachNameTheirField) {
  host("gpu-01", 8, "H100", "535.104");
  host("gpu-02", 8, "H100", "550.54");
  model::ResourceRequest r = gpus(1);
  r.minDriver = "560";
  EXPECT_EQ(check(r).field(), "min_driver");
  EXPECT_NE(check(r).message().find("the newest is 550.54"), std::string::npos);
  r.minDriver = "550";
  EXPECT_TRUE(check(r).ok());
  r.minCuda = "13.0";
  EXPECT_EQ(check(r).field(), "min_cuda");

  r = gpus(1);
  r.gpuMemoryMib = 100 * 1024;
  EXPECT_EQ(check(r).field(), "gpu_memory_mib");
  r = gpus(1);
  r.cpuMillis = 65'000;
  EXPECT_EQ(check(r).field(), "cpu_millis");
  r = gpus(1);
  r.memoryMib = 1024 * 1024;
  EXPECT_EQ(check(r).field(), "memory_mib");

  r = gpus(4);
  r.hosts = 2;
  EXPECT_TRUE(check(r).ok());
  r.hosts = 3;
  EXPECT_EQ(check(r).field(), "hosts");
  EXPECT_NE(check(r).message().find("only 2 hosts"), std::string::npos) << check(r).message();

  EXPECT_EQ(check(gpus(1), "vision", "prod").field(), "contour");
}

TEST_F(FleetFitTest, AWholeHostOrACpuOnlyJobNeedsOnlyAHostOpenToTheTeam) {
  host("cpu-01", 0, "");
  model::ResourceRequest r;
  EXPECT_TRUE(check(r).ok());
  r.wholeHost = true;
  EXPECT_TRUE(check(r).ok());
  r.gpuModels = {"H100"};
  EXPECT_EQ(check(r).field(), "gpu_models");
}

}  // namespace
}  // namespace allot::control
