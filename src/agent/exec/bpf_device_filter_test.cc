#include "agent/exec/bpf_device_filter.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "agent/exec/cgroup_manager.h"

namespace allot::agent {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kChar = BPF_DEVCG_DEV_CHAR;
constexpr uint32_t kBlock = BPF_DEVCG_DEV_BLOCK;

// Runs the program the way the kernel would on one device access: a small interpreter for the
// instruction forms the filter is allowed to use; anything else fails the test.
int verdict(const std::vector<bpf_insn>& prog, uint32_t type, uint32_t major, uint32_t minor) {
  bpf_cgroup_dev_ctx ctx{(BPF_DEVCG_ACC_READ << 16) | type, major, minor};
  uint64_t r[11] = {};
  for (size_t pc = 0; pc < prog.size(); ++pc) {
    const bpf_insn& i = prog[pc];
    const uint64_t imm = static_cast<uint64_t>(static_cast<int64_t>(i.imm));
    switch (i.code) {
      case BPF_LDX | BPF_MEM | BPF_W: {
        EXPECT_EQ(i.src_reg, BPF_REG_1);
        uint32_t v;
        std::memcpy(&v, reinterpret_cast<const char*>(&ctx) + i.off, sizeof v);
        r[i.dst_reg] = v;
        break;
      }
      case BPF_ALU64 | BPF_AND | BPF_K:
        r[i.dst_reg] &= imm;
        break;
      case BPF_ALU64 | BPF_MOV | BPF_K:
        r[i.dst_reg] = imm;
        break;
      case BPF_JMP | BPF_JNE | BPF_K:
        if (r[i.dst_reg] != imm) pc += i.off;
        break;
      case BPF_JMP | BPF_JEQ | BPF_K:
        if (r[i.dst_reg] == imm) pc += i.off;
        break;
      case BPF_JMP | BPF_JGT | BPF_K:
        if (r[i.dst_reg] > imm) pc += i.off;
        break;
      case BPF_JMP | BPF_EXIT:
        return static_cast<int>(r[0]);
      default:
        ADD_FAILURE() << "unexpected opcode " << int(i.code) << " at " << pc;
        return -1;
    }
  }
  ADD_FAILURE() << "program ran off its end";
  return -1;
}

TEST(GpuDeviceFilterProgram, HasOneCompareForEachDistinctAllowedMinor) {
  EXPECT_EQ(gpuDeviceFilterProgram({}).size(), kGpuFilterFixedInsns);
  // Duplicates and minors outside 0..254 (nvidiactl is always allowed) add nothing.
  auto p = gpuDeviceFilterProgram({3, 1, 1, 255, 300, -1});
  ASSERT_EQ(p.size(), kGpuFilterFixedInsns + 2);
  std::vector<int32_t> compared;
  for (const auto& i : p) {
    if (i.code == (BPF_JMP | BPF_JEQ | BPF_K)) compared.push_back(i.imm);
  }
  EXPECT_EQ(compared, (std::vector<int32_t>{1, 3}));
}

TEST(GpuDeviceFilterProgram, DeniesOtherGpusAndAllowsEverythingElse) {
  auto p = gpuDeviceFilterProgram({1, 3});
  EXPECT_EQ(verdict(p, kChar, 195, 1), 1);
  EXPECT_EQ(verdict(p, kChar, 195, 3), 1);
  EXPECT_EQ(verdict(p, kChar, 195, 0), 0);
  EXPECT_EQ(verdict(p, kChar, 195, 2), 0);
  EXPECT_EQ(verdict(p, kChar, 195, 254), 0);  // nvidia-modeset
  EXPECT_EQ(verdict(p, kChar, 195, 255), 1);  // nvidiactl
  EXPECT_EQ(verdict(p, kChar, 511, 0), 1);    // nvidia-uvm, a dynamic major
  EXPECT_EQ(verdict(p, kChar, 511, 1), 1);    // nvidia-uvm-tools
  EXPECT_EQ(verdict(p, kChar, 1, 3), 1);      // /dev/null
  EXPECT_EQ(verdict(p, kBlock, 195, 2), 1);   // a block device that shares the number
  auto none = gpuDeviceFilterProgram({});
  EXPECT_EQ(verdict(none, kChar, 195, 0), 0);
  EXPECT_EQ(verdict(none, kChar, 195, 255), 1);
}

TEST(GpuDeviceFilter, AttachingToADirectoryThatIsNoCgroupFailsWithContext) {
  char tmpl[] = "/tmp/allot-bpf-test-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  Status st = attachGpuDeviceFilter(dir, {0});
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.toString().find("failed to attach GPU device filter to " + dir + ": "),
            std::string::npos)
      << st.toString();
  fs::remove_all(dir);
}

// ---- Against the kernel: a real cgroup2 group, real device nodes, a real process. ----

std::string cgroup2Mount() {
  std::ifstream in("/proc/mounts");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::string dev, dir, type;
    if (l >> dev >> dir >> type && type == "cgroup2") return dir;
  }
  return {};
}

// Why kernel tests cannot run here, or "" when they can: a writable cgroup2 mount, bpf() that
// loads a device program, and mknod.
std::string kernelSkipReason() {
  std::string mount = cgroup2Mount();
  if (mount.empty()) return "no cgroup2 mount in /proc/mounts";
  if (::access((mount + "/cgroup.procs").c_str(), W_OK) != 0) {
    return mount + " is not writable: " + std::strerror(errno);
  }
  auto prog = gpuDeviceFilterProgram({});
  bpf_attr attr = deviceProgramLoadAttr(prog);
  long fd = ::syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof attr);
  if (fd < 0 && (errno == EPERM || errno == ENOSYS)) {
    return std::string("bpf(BPF_PROG_LOAD) is not permitted here: ") + std::strerror(errno);
  }
  if (fd >= 0) ::close(static_cast<int>(fd));
  return {};  // any other load error is the filter's fault: let the test see it
}

// Device nodes in a temp dir: 195:1 and 195:2 (GPUs, no driver behind them) and 1:3 (null).
struct Nodes {
  std::string dir, gpu1, gpu2, null;
  ~Nodes() {
    if (!dir.empty()) fs::remove_all(dir);
  }
};
std::string makeNodes(Nodes& n) {
  char tmpl[] = "/tmp/allot-bpf-nodes-XXXXXX";
  n.dir = mkdtemp(tmpl);
  n.gpu1 = n.dir + "/nvidia1";
  n.gpu2 = n.dir + "/nvidia2";
  n.null = n.dir + "/null";
  for (auto [path, major, minor] :
       {std::tuple{n.gpu1, 195, 1}, std::tuple{n.gpu2, 195, 2}, std::tuple{n.null, 1, 3}}) {
    if (::mknod(path.c_str(), S_IFCHR | 0666, makedev(major, minor)) != 0) {
      return "mknod " + path + ": " + std::strerror(errno);
    }
  }
  return {};
}

// Forks a child that joins `cgroup` and opens each path read-write. Per path: 0 when it opened,
// else its errno. nullopt (with a test failure) when the child could not join the group.
std::optional<std::vector<int>> openFromGroup(const std::string& cgroup,
                                              const std::vector<std::string>& paths) {
  std::string procs = cgroup + "/cgroup.procs";
  int fds[2];
  if (::pipe(fds) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return std::nullopt;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::vector<int> out(paths.size() + 1, 0);
    int pf = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (pf < 0 || ::write(pf, "0", 1) != 1) out[0] = errno;  // "0": the writer itself
    for (size_t i = 0; i < paths.size() && out[0] == 0; ++i) {
      int fd = ::open(paths[i].c_str(), O_RDWR | O_CLOEXEC);
      out[i + 1] = fd >= 0 ? 0 : errno;
      if (fd >= 0) ::close(fd);
    }
    ssize_t n = ::write(fds[1], out.data(), out.size() * sizeof(int));
    ::_exit(n == static_cast<ssize_t>(out.size() * sizeof(int)) ? 0 : 1);
  }
  ::close(fds[1]);
  std::vector<int> got(paths.size() + 1, -1);
  size_t want = got.size() * sizeof(int), have = 0;
  while (have < want) {
    ssize_t n = ::read(fds[0], reinterpret_cast<char*>(got.data()) + have, want - have);
    if (n <= 0) break;
    have += static_cast<size_t>(n);
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (have != want) {
    ADD_FAILURE() << "child reported nothing";
    return std::nullopt;
  }
  if (got[0] != 0) {
    ADD_FAILURE() << "child could not join " << cgroup << ": " << std::strerror(got[0]);
    return std::nullopt;
  }
  return std::vector<int>(got.begin() + 1, got.end());
}

// rmdir, waiting (bounded) for the kernel to finish with an exited member.
bool removeGroup(const std::string& dir) {
  for (int i = 0; i < 1000; ++i) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY) return false;
    ::usleep(1000);
  }
  return false;
}

TEST(GpuDeviceFilter, KernelDeniesOnlyTheOtherGpusToProcessesInTheGroup) {
  if (std::string why = kernelSkipReason(); !why.empty()) GTEST_SKIP() << why;
  Nodes nodes;
  if (std::string why = makeNodes(nodes); !why.empty()) GTEST_SKIP() << why;
  std::string group = cgroup2Mount() + "/allot-bpf-test-" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(group.c_str(), 0755), 0) << group << ": " << std::strerror(errno);

  Status st = attachGpuDeviceFilter(group, {1});
  EXPECT_TRUE(st.ok()) << st.toString();
  auto got = openFromGroup(group, {nodes.gpu1, nodes.gpu2, nodes.null});
  if (st.ok() && got) {
    // No driver for major 195 here: the allowed GPU fails past the filter (ENXIO/ENODEV).
    EXPECT_NE((*got)[0], EPERM) << "allowed GPU: " << std::strerror((*got)[0]);
    EXPECT_EQ((*got)[1], EPERM) << "other GPU: " << std::strerror((*got)[1]);
    EXPECT_EQ((*got)[2], 0) << "null: " << std::strerror((*got)[2]);
  }
  // The same nodes from outside the group: nothing denied, so the EPERM above is the filter's.
  auto outside = openFromGroup(cgroup2Mount(), {nodes.gpu2});
  if (outside) {
    EXPECT_NE((*outside)[0], EPERM);
  }
  EXPECT_TRUE(removeGroup(group)) << group << ": " << std::strerror(errno);
}

TEST(GpuDeviceFilter, CgroupManagerOnV2ConfinesOnlyJobsWithRealGpus) {
  if (std::string why = kernelSkipReason(); !why.empty()) GTEST_SKIP() << why;
  Nodes nodes;
  if (std::string why = makeNodes(nodes); !why.empty()) GTEST_SKIP() << why;
  std::string mount = cgroup2Mount();
  const std::string name = "allot-bpf-test-" + std::to_string(::getpid());
  CgroupManager m(name, mount);
  ASSERT_EQ(m.mode(), "v2");

  JobSpec gpuJob;
  gpuJob.id = 9'100'001;
  gpuJob.realGpus = true;
  gpuJob.gpuMinors = {1};
  auto groups = m.create(gpuJob);
  ASSERT_TRUE(groups.ok()) << groups.status().toString();
  ASSERT_EQ(groups->size(), 1u);
  if (auto got = openFromGroup(groups->front(), {nodes.gpu1, nodes.gpu2, nodes.null})) {
    EXPECT_NE((*got)[0], EPERM);
    EXPECT_EQ((*got)[1], EPERM);
    EXPECT_EQ((*got)[2], 0);
  }

  JobSpec simulated = gpuJob;  // simulated GPUs: nothing to confine
  simulated.id = 9'100'002;
  simulated.realGpus = false;
  auto plain = m.create(simulated);
  ASSERT_TRUE(plain.ok()) << plain.status().toString();
  if (auto got = openFromGroup(plain->front(), {nodes.gpu2})) {
    EXPECT_NE((*got)[0], EPERM);
  }

  for (const auto& g : *groups) EXPECT_TRUE(removeGroup(g)) << g;
  for (const auto& g : *plain) EXPECT_TRUE(removeGroup(g)) << g;
  EXPECT_TRUE(removeGroup(mount + "/" + name));
}

}  // namespace
}  // namespace allot::agent
