#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

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

namespace pl = sched::placement;

int64_t requestOf(const std::vector<pl::Task>& tasks, const std::vector<int>& seq) {
  int64_t sum = 0;
  for (int i : seq) sum += tasks[i].gpuRequest();
  return sum;
}

TEST(Protocol, ArrivalsArePermutationThenDrawsUpTo130Percent) {
  std::vector<pl::Task> tasks;
  for (int i = 0; i < 50; ++i) tasks.push_back({1000, 1024, 1 + i % 3, 1000, pl::kAnyModel});
  tasks.push_back({1000, 1024, 1, 250, pl::kAnyModel});
  tasks.push_back({1000, 1024, 0, 0, pl::kAnyModel});
  const int64_t capacity = 200 * 1000;  // the list asks for 100.25 GPUs: about 50%
  auto seq = arrivalSequence(tasks, capacity, 42);
  // First every task once, in some order.
  std::vector<int> head(seq.begin(), seq.begin() + tasks.size());
  std::vector<int> sorted = head;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < tasks.size(); ++i) EXPECT_EQ(sorted[i], int(i));
  EXPECT_NE(head, sorted);  // shuffled
  // Then copies, never past 130%, and close to it (the largest task asks for 3 GPUs).
  const int64_t asked = requestOf(tasks, seq);
  EXPECT_LE(asked * 10, capacity * 13);
  EXPECT_GT(asked + 3000, capacity * 13 / 10);
  EXPECT_GT(seq.size(), tasks.size());
  // Deterministic per seed; another seed gives another sequence.
  EXPECT_EQ(seq, arrivalSequence(tasks, capacity, 42));
  EXPECT_NE(seq, arrivalSequence(tasks, capacity, 43));
}

TEST(Protocol, ArrivalsDropRandomTasksWhenTheListAsksForMoreThan130Percent) {
  std::vector<pl::Task> tasks(100, pl::Task{1000, 1024, 1, 1000, pl::kAnyModel});
  const int64_t capacity = 50 * 1000;  // the list asks for 200%
  auto seq = arrivalSequence(tasks, capacity, 7);
  EXPECT_EQ(seq.size(), 65u);  // 130% of 50 GPUs
  std::set<int> distinct(seq.begin(), seq.end());
  EXPECT_EQ(distinct.size(), seq.size());  // no copies
}

TEST(Protocol, NodeOrderIsADeterministicPermutation) {
  auto a = nodeOrder(100, 42);
  EXPECT_EQ(a, nodeOrder(100, 42));
  EXPECT_NE(a, nodeOrder(100, 43));
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sorted[i], i);
}

TEST(Protocol, AllocationAtAMarkIsTheMeanOverItsWindow) {
  // One node with 10 GPUs and tasks of 10 milli-GPU each: every task fits until the GPUs are
  // full at exactly 100% of arrivals. The decisions whose arrivals round to 100% are those after
  // 99.5%, 99.6%, ..., 100.4%: allocations 99.5..99.9 then five times 100.
  std::vector<pl::NodeSpec> nodes = {{"n", 1'000'000, 1'000'000, 10, "G"}};
  std::vector<pl::Task> tasks = {{1, 1, 1, 10, pl::kAnyModel}};
  for (const char* policy : {"random", "firstfit", "bestfit", "fgd"}) {
    auto r = runAlloc(nodes, tasks, policy, {1});
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_NEAR(r->alloc100, (99.5 + 99.6 + 99.7 + 99.8 + 99.9 + 500) / 10, 1e-9) << policy;
    EXPECT_DOUBLE_EQ(r->alloc130, 100.0) << policy;
    EXPECT_EQ(r->decisions, 1300) << policy;
    EXPECT_EQ(r->placements, 1000) << policy;
  }
}

TEST_F(SimTest, ModelConstraintsHoldWhateverTheNodeOrder) {
  // Tasks resolve their GPU models against one listing of the nodes; runAlloc lists them in
  // another order per seed, and the model ids must still agree.
  auto nodes = loadNodes(write("nodes.csv",
                               "sn,cpu_milli,memory_mib,gpu,model\n"
                               "n0,64000,262144,4,P100\n"
                               "n1,64000,262144,4,V100\n"
                               "n2,64000,262144,1,T4\n"));
  ASSERT_TRUE(nodes.ok());
  auto pods = loadTasks(write("pods.csv",
                              "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"
                              "p0,1000,1024,1,1000,T4\n"));
  ASSERT_TRUE(pods.ok());
  auto cluster = sched::placement::ClusterState::create(*nodes);
  ASSERT_TRUE(cluster.ok());
  auto tasks = resolveTasks(*cluster, *pods);
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    auto r = runAlloc(*nodes, tasks, "firstfit", {seed});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->perSeed[0].placements, 1) << seed;  // only the T4 node's one GPU
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
