#include "agent/exec/cgroup_manager.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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

// The group of `groups` in the hierarchy whose files include `file`; "" when there is none.
std::string groupWith(const std::vector<std::string>& groups, const std::string& file) {
  for (const auto& g : groups) {
    if (fs::exists(g + "/" + file)) return g;
  }
  return {};
}

// Moves the calling process into every group (in a forked child).
bool joinGroups(const std::vector<std::string>& groups) {
  for (const auto& g : groups) {
    const int fd = ::open((g + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    const bool joined = fd >= 0 && ::write(fd, "0", 1) == 1;
    if (fd >= 0) ::close(fd);
    if (!joined) return false;
  }
  return true;
}

// Forks a child that joins every group and opens `path` read-write: 0 when it opened, else its
// errno; -1 (with a test failure) when it could not join.
int openFromGroups(const std::vector<std::string>& groups, const std::string& path) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!joinGroups(groups)) ::_exit(255);
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    ::_exit(fd >= 0 ? 0 : errno);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 255;
  if (code == 255) {
    ADD_FAILURE() << "the child could not join the groups";
    return -1;
  }
  return code;
}

// An ended job's groups are kept for the next job (v1): reset to what a new group is, device
// rules included, renamed slot-<n>, handed to the next create(). A device node with no driver
// behind it tells the rules apart: a denied open fails with EPERM, an allowed one with ENXIO.
TEST(CgroupManager, EndedJobsGroupsAreResetAndTakenByTheNextJob) {
  std::vector<std::string> kept;
  {
    CgroupManager m("allot-test");
    if (m.mode() != "v1")
      GTEST_SKIP() << "groups are recycled on cgroup v1 only; this host: " << m.mode();
    char tmpl[] = "/tmp/allot-cgroup-nodes-XXXXXX";
    const std::string nodes = mkdtemp(tmpl);
    const std::string gpu1 = nodes + "/nvidia1";
    ASSERT_EQ(::mknod(gpu1.c_str(), S_IFCHR | 0666, makedev(195, 1)), 0) << std::strerror(errno);

    JobSpec a;
    a.id = 9'000'101;
    a.memoryLimitMib = 32;
    a.cpuMillis = 500;
    a.realGpus = true;
    a.gpuMinors = {0};
    auto groups = m.create(a);
    ASSERT_TRUE(groups.ok()) << groups.status().toString();
    const std::string memory = groupWith(*groups, "memory.limit_in_bytes");
    const std::string cpu = groupWith(*groups, "cpu.cfs_quota_us");
    ASSERT_FALSE(memory.empty());
    ASSERT_FALSE(cpu.empty());
    ASSERT_FALSE(groupWith(*groups, "devices.deny").empty());
    EXPECT_EQ(openFromGroups(*groups, gpu1), EPERM);  // not job a's GPU

    // What a new group holds, to compare with.
    const std::string fresh = fs::path(memory).parent_path().string() + "/fresh-probe";
    ASSERT_EQ(::mkdir(fresh.c_str(), 0755), 0) << std::strerror(errno);
    const std::string unlimited = readFile(fresh + "/memory.limit_in_bytes");
    ASSERT_EQ(::rmdir(fresh.c_str()), 0);

    ASSERT_TRUE(m.recycle(*groups));
    ASSERT_EQ(m.recycled().size(), 1u);
    const std::vector<std::string> slot = m.recycled().front();
    for (const auto& g : *groups) EXPECT_FALSE(fs::exists(g)) << g;
    for (const auto& g : slot) EXPECT_NE(g.find("/allot-test/slot-"), std::string::npos) << g;
    EXPECT_EQ(readFile(groupWith(slot, "memory.limit_in_bytes") + "/memory.limit_in_bytes"),
              unlimited);
    EXPECT_EQ(readFile(groupWith(slot, "cpu.cfs_quota_us") + "/cpu.cfs_quota_us"), "-1\n");
    EXPECT_EQ(openFromGroups(slot, gpu1), ENXIO);  // job a's deny rules are gone
    EXPECT_TRUE(m.strayGroups({}, {}).empty());    // kept, not stray

    // The next job takes them, with its own limits and rules.
    JobSpec b;
    b.id = 9'000'102;
    b.memoryLimitMib = 64;
    b.realGpus = true;
    b.gpuMinors = {1};
    auto next = m.create(b);
    ASSERT_TRUE(next.ok()) << next.status().toString();
    EXPECT_EQ(*next, slot);
    EXPECT_TRUE(m.recycled().empty());
    EXPECT_EQ(readFile(groupWith(*next, "memory.limit_in_bytes") + "/memory.limit_in_bytes"),
              "67108864\n");
    EXPECT_EQ(openFromGroups(*next, gpu1), ENXIO);  // job b's own GPU
    ASSERT_TRUE(m.recycle(*next));
    kept = m.recycled().front();
    fs::remove_all(nodes);
  }
  for (const auto& g : kept) EXPECT_FALSE(fs::exists(g)) << g;  // removed with the manager
}

// A process left in a job's group (an escapee that outlived the job) must not enter the next
// job's limits and device rules: such groups are not kept, nor are groups the manager did not make.
TEST(CgroupManager, GroupsWithAProcessLeftOrNotItsOwnAreNotRecycled) {
  CgroupManager m("allot-test");
  if (m.mode() != "v1")
    GTEST_SKIP() << "groups are recycled on cgroup v1 only; this host: " << m.mode();
  JobSpec s;
  s.id = 9'000'103;
  auto groups = m.create(s);
  ASSERT_TRUE(groups.ok()) << groups.status().toString();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!joinGroups(*groups)) ::_exit(1);
    (void)::write(ready[1], "r", 1);
    ::pause();
    ::_exit(0);
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_FALSE(m.recycle(*groups));
  EXPECT_TRUE(m.recycled().empty());
  for (const auto& g : *groups) EXPECT_TRUE(fs::exists(g)) << g;  // left where they were
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);

  // Not this manager's: groups elsewhere, names it does not give, fewer groups than it has
  // hierarchies.
  std::vector<std::string> elsewhere, renamed;
  for (const auto& g : *groups) {
    elsewhere.push_back("/tmp" + g.substr(g.rfind('/')));
    renamed.push_back(fs::path(g).parent_path().string() + "/mine");
  }
  EXPECT_FALSE(m.recycle(elsewhere));
  EXPECT_FALSE(m.recycle(renamed));
  EXPECT_FALSE(m.recycle({groups->front()}));
  EXPECT_TRUE(m.recycle(*groups));
}

// A restarted agent's jobs may name slot groups that are gone; new ones never take those names.
TEST(CgroupManager, SlotsNamedByEarlierJobsAreNotGivenOut) {
  CgroupManager m("allot-test");
  if (m.mode() == "none") GTEST_SKIP() << "no writable cgroup hierarchy here";
  m.skipSlotsOf({"/sys/fs/cgroup/memory/allot-test/slot-700", "/elsewhere/job-9"});
  auto spare = m.createSpare();
  ASSERT_TRUE(spare.ok()) << spare.status().toString();
  ASSERT_FALSE(spare->empty());
  const std::string name = fs::path(spare->front()).filename().string();
  EXPECT_GT(std::stoll(name.substr(name.find('-') + 1)), 700) << name;
  EXPECT_TRUE(CgroupManager::remove(*spare));
}

// Memory a job leaves charged to its group (a file on tmpfs outlives it) must not count against
// the next job's limit: such a group is removed, not kept.
TEST(CgroupManager, AGroupStillChargedWithMemoryIsNotRecycled) {
  CgroupManager m("allot-test");
  if (m.mode() != "v1")
    GTEST_SKIP() << "groups are recycled on cgroup v1 only; this host: " << m.mode();
  JobSpec s;
  s.id = 9'000'104;
  auto groups = m.create(s);
  ASSERT_TRUE(groups.ok()) << groups.status().toString();
  const std::string file = "/dev/shm/allot-cgroup-test-" + std::to_string(::getpid());
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!joinGroups(*groups)) ::_exit(1);
    std::ofstream(file) << std::string(4 * CgroupManager::kMaxRecycledChargeBytes, 'x');
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_FALSE(m.recycle(*groups));
  fs::remove(file);  // its pages, and their charge, go with it
  EXPECT_TRUE(m.recycle(*groups));
}

}  // namespace
}  // namespace allot::agent
