#include "agent/exec/cgroup_manager.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace allot::agent {
namespace {

namespace fs = std::filesystem;

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(CgroupManager, NoHierarchyMeansModeNoneAndNoGroups) {
  char tmpl[] = "/tmp/allot-cgroup-test-XXXXXX";
  std::string root = mkdtemp(tmpl);
  CgroupManager m("allot-test", root, root + "/no-such-file");
  EXPECT_EQ(m.mode(), "none");
  JobSpec s;
  s.id = 1;
  s.memoryLimitMib = 100;
  auto groups = m.create(s);
  ASSERT_TRUE(groups.ok());
  EXPECT_TRUE(groups->empty());
  fs::remove_all(root);
}

// On v2 the jobs' groups sit outside the agent's unit (and its TasksMax): together they may hold
// nine tenths of the host's tasks, not all of them. A tree of plain files stands in for cgroupfs.
TEST(CgroupManager, OnV2AllJobsTogetherLeaveTheHostATenthOfItsTasks) {
  char tmpl[] = "/tmp/allot-cgroup-test-XXXXXX";
  const std::string root = mkdtemp(tmpl);
  std::ofstream(root + "/cgroup.controllers") << "cpu memory pids\n";
  std::ofstream(root + "/cgroup.subtree_control");
  fs::create_directory(root + "/allot-test");
  std::ofstream(root + "/allot-test/cgroup.subtree_control");
  std::ofstream(root + "/allot-test/pids.max") << "max\n";
  CgroupManager m("allot-test", root, root + "/no-such-file");
  EXPECT_EQ(m.mode(), "v2");
  int64_t pidMax = 0, threadsMax = 0;
  std::ifstream("/proc/sys/kernel/pid_max") >> pidMax;
  std::ifstream("/proc/sys/kernel/threads-max") >> threadsMax;
  ASSERT_GT(pidMax, 0);
  ASSERT_GT(threadsMax, 0);
  EXPECT_EQ(std::stoll(readFile(root + "/allot-test/pids.max")),
            std::min(pidMax, threadsMax) * 9 / 10);
  fs::remove_all(root);
}

TEST(CgroupManager, CreatesLimitsAndRemovesJobGroups) {
  CgroupManager m("allot-test");
  if (m.mode() == "none") GTEST_SKIP() << "no writable cgroup hierarchy here";
  JobSpec s;
  s.id = 9'000'001;
  s.memoryLimitMib = 32;
  s.cpuMillis = 5;  // below the kernel's minimum quota: clamped, not refused
  auto groups = m.create(s);
  ASSERT_TRUE(groups.ok()) << groups.status().toString();
  ASSERT_FALSE(groups->empty());
  bool sawMemory = false;
  for (const auto& g : *groups) {
    EXPECT_NE(g.find("/allot-test/job-9000001"), std::string::npos) << g;
    EXPECT_TRUE(fs::is_directory(g));
    if (fs::exists(g + "/memory.limit_in_bytes")) {
      EXPECT_EQ(readFile(g + "/memory.limit_in_bytes"), "33554432\n");
      sawMemory = true;
    }
    if (fs::exists(g + "/memory.max")) {
      EXPECT_EQ(readFile(g + "/memory.max"), "33554432\n");
      sawMemory = true;
    }
    if (fs::exists(g + "/cpu.cfs_quota_us")) {
      EXPECT_EQ(readFile(g + "/cpu.cfs_quota_us"), "1000\n");
    }
  }
  EXPECT_TRUE(sawMemory);
  EXPECT_TRUE(CgroupManager::pids(*groups).empty());
  EXPECT_TRUE(CgroupManager::remove(*groups));
  for (const auto& g : *groups) EXPECT_FALSE(fs::exists(g));
}

TEST(CgroupManager, SpareGroupsTakeLimitsLaterAndAreStrayUntilAJobHoldsThem) {
  CgroupManager m("allot-test");
  if (m.mode() == "none") GTEST_SKIP() << "no writable cgroup hierarchy here";
  auto a = m.createSpare();
  auto b = m.createSpare();
  ASSERT_TRUE(a.ok()) << a.status().toString();
  ASSERT_TRUE(b.ok()) << b.status().toString();
  ASSERT_FALSE(a->empty());
  EXPECT_NE(*a, *b);
  for (const auto& g : *a) {
    EXPECT_NE(g.find("/allot-test/slot-"), std::string::npos) << g;
    EXPECT_TRUE(fs::is_directory(g));
  }
  JobSpec s;
  s.id = 9'000'002;
  s.memoryLimitMib = 32;
  ASSERT_TRUE(m.applyLimits(*a, s).ok());
  bool sawMemory = false;
  for (const auto& g : *a) {
    for (const char* file : {"/memory.limit_in_bytes", "/memory.max"}) {
      if (fs::exists(g + file)) {
        EXPECT_EQ(readFile(g + file), "33554432\n");
        sawMemory = true;
      }
    }
  }
  EXPECT_TRUE(sawMemory);
  EXPECT_FALSE(m.applyLimits({}, s).ok());  // not this manager's groups

  auto stray = m.strayGroups({}, std::set<std::string>(a->begin(), a->end()));
  for (const auto& g : *a) EXPECT_EQ(std::count(stray.begin(), stray.end(), g), 0) << g;
  for (const auto& g : *b) EXPECT_EQ(std::count(stray.begin(), stray.end(), g), 1) << g;
  EXPECT_TRUE(CgroupManager::remove(*a));
  EXPECT_TRUE(CgroupManager::remove(*b));
}

}  // namespace
}  // namespace allot::agent
