#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "sim/alloc_sim.h"
#include "sim/trace.h"

namespace allot::sim {
namespace {

namespace fs = std::filesystem;

class SimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("allot_sim_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    auto p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  fs::path dir_;
};

TEST_F(SimTest, RunsTheProtocolOnATinyTrace) {
  auto nodes = loadNodes(write("nodes.csv",
                               "sn,cpu_milli,memory_mib,gpu,model\n"
                               "n0,64000,262144,2,P100\n"
                               "n1,64000,262144,4,V100\n"));
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  auto pods = loadTasks(write("pods.csv",
                              "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n"
                              "p0,1000,1024,1,500,,LS\n"
                              "p1,1000,1024,2,1000,V100,LS\n"
                              "p2,1000,1024,0,0,,BE\n"
                              "p3,1000,1024,1,1000,P100|V100,LS\n"));
  ASSERT_TRUE(pods.ok()) << pods.status().message();
  ASSERT_EQ(pods->size(), 4u);
  EXPECT_EQ((*pods)[3].gpuSpec, (std::vector<std::string>{"P100", "V100"}));
  auto cluster = sched::placement::ClusterState::create(*nodes);
  ASSERT_TRUE(cluster.ok());
  auto tasks = resolveTasks(*cluster, *pods);
  for (const char* policy : {"random", "firstfit", "bestfit", "fgd"}) {
    auto r = runAlloc(*nodes, tasks, policy, {42, 43});
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->perSeed.size(), 2u);
    EXPECT_GT(r->alloc100, 0);
    EXPECT_LE(r->alloc130, 100.0);
    EXPECT_GE(r->alloc130, r->alloc100);
    auto again = runAlloc(*nodes, tasks, policy, {42, 43});
    EXPECT_EQ(again->alloc130, r->alloc130) << policy;
  }
}

TEST_F(SimTest, BadRowNamesFileAndLine) {
  std::string path = write("pods.csv",
                           "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
                           "p0,1000,1024,1,500,\n"
                           "p1,lots,1024,1,500,\n");
  auto pods = loadTasks(path);
  ASSERT_FALSE(pods.ok());
  EXPECT_NE(pods.status().message().find(path + ":3: bad cpu_milli 'lots'"), std::string::npos)
      << pods.status().message();
  auto nodes = loadNodes(write("nodes.csv", "sn,cpu_milli,gpu\n"));
  ASSERT_FALSE(nodes.ok());
  EXPECT_NE(nodes.status().message().find("missing column 'memory_mib'"), std::string::npos);
  EXPECT_FALSE(loadNodes((dir_ / "absent.csv").string()).ok());
}

}  // namespace
}  // namespace allot::sim
