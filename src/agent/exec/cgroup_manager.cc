#include "agent/exec/cgroup_manager.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "agent/exec/bpf_device_filter.h"

namespace allot::agent {
namespace {

namespace fs = std::filesystem;

constexpr int kNvidiaMajor = 195;
constexpr int kNvidiaCtlMinor = 255;
constexpr int64_t kCpuPeriodUs = 100'000;
constexpr int64_t kMinCpuQuotaUs = 1'000;  // the kernel refuses less

bool exists(const std::string& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

// The most tasks (processes and threads) the host can hold: the lower of the kernel's pid_max
// and threads-max; 0 when neither can be read.
int64_t hostTaskLimit() {
  int64_t limit = 0;
  for (const char* file : {"/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"}) {
    std::ifstream in(file);
    int64_t n = 0;
    if (in >> n && n > 0) limit = limit == 0 ? n : std::min(limit, n);
  }
  return limit;
}

// mkdir that accepts an existing directory.
bool makeDir(const std::string& p) { return ::mkdir(p.c_str(), 0755) == 0 || errno == EEXIST; }

// cgroup files take one value per write(2); std::ofstream could split or merge writes.
Status writeValue(const std::string& file, const std::string& value) {
  int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status::Unavailable("failed to open " + file + ": " + std::strerror(errno));
  }
  ssize_t n = ::write(fd, value.data(), value.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return Status::Unavailable("failed to write '" + value + "' to " + file + ": " +
                               std::strerror(err));
  }
  return Status::Ok();
}

std::string jobGroupName(int64_t id) { return "job-" + std::to_string(id); }
std::string spareGroupName(int64_t slot) { return "slot-" + std::to_string(slot); }

// The number after `prefix` in a group's name ("job-42" -> 42); nullopt for other names.
std::optional<int64_t> numberAfter(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  std::string digits = name.substr(prefix.size());
  if (digits.empty() || digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::stoll(digits);
}

// The major number the kernel gave a driver, from /proc/devices; -1 when it is not loaded.
int charMajor(const std::string& driver) {
  std::ifstream in("/proc/devices");
  std::string line;
  bool chars = false;
  while (std::getline(in, line)) {
    if (line == "Character devices:") {
      chars = true;
    } else if (line == "Block devices:") {
      chars = false;
    } else if (chars) {
      std::istringstream l(line);
      int major;
      std::string name;
      if (l >> major >> name && name == driver) return major;
    }
  }
  return -1;
}

}  // namespace

CgroupManager::CgroupManager(std::string groupName, std::string mountRoot,
                             std::string selfCgroupFile)
    : groupName_(std::move(groupName)) {
  if (exists(mountRoot + "/cgroup.controllers")) {
    probeV2(mountRoot);
  } else {
    probeV1(mountRoot, selfCgroupFile);
  }
}

void CgroupManager::probeV2(const std::string& mountRoot) {
  std::string base = mountRoot + "/" + groupName_;
  if (!makeDir(base)) return;
  // Controllers must be enabled on every level above a group for its files to exist. Failures
  // surface later, and only for jobs that ask for the limit.
  for (const std::string& dir : {mountRoot, base}) {
    for (const char* c : {"+memory", "+cpu", "+pids"})
      (void)writeValue(dir + "/cgroup.subtree_control", c);
  }
  // Jobs live here, outside the agent's unit and so outside its TasksMax: all of them together
  // hold at most nine tenths of the host's tasks, so that a fork bomb in one leaves the agent,
  // sshd and the rest of the host room to stop it.
  if (const int64_t tasks = hostTaskLimit(); tasks > 0)
    (void)writeValue(base + "/pids.max", std::to_string(tasks * 9 / 10));
  hierarchies_.push_back({"", base, ::open(base.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)});
  mode_ = "v2";
}

void CgroupManager::probeV1(const std::string& mountRoot, const std::string& selfCgroupFile) {
  // "4:memory:/system.slice/allot-agent.service" -> our own group in each hierarchy.
  std::map<std::string, std::string> own;
  std::ifstream in(selfCgroupFile);
  std::string line;
  while (std::getline(in, line)) {
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::stringstream controllers(line.substr(a + 1, b - a - 1));
    std::string c;
    while (std::getline(controllers, c, ',')) own[c] = line.substr(b + 1);
  }
  for (const char* controller : {"memory", "cpu", "devices"}) {
    std::string root = mountRoot + "/" + controller;
    if (!exists(root + "/cgroup.procs")) continue;
    std::string parent = root;
    auto it = own.find(controller);
    // Inside a cgroup namespace or a partial mount our path may not be visible: use the root.
    if (it != own.end() && it->second != "/" && exists(root + it->second)) parent += it->second;
    std::string base = parent + "/" + groupName_;
    if (!makeDir(base)) continue;  // not ours to write (no root, read-only mount)
    hierarchies_.push_back(
        {controller, base, ::open(base.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)});
  }
  if (!hierarchies_.empty()) mode_ = "v1";
}

CgroupManager::~CgroupManager() {
  for (const auto& groups : recycled_) (void)remove(groups);
  for (const Hierarchy& h : hierarchies_) {
    if (h.baseFd >= 0) ::close(h.baseFd);
  }
}

const CgroupManager::Hierarchy* CgroupManager::hierarchyOf(const std::string& dir,
                                                           std::string* name) const {
  for (const Hierarchy& h : hierarchies_) {
    const size_t n = h.base.size();
    if (h.baseFd < 0 || dir.size() <= n + 1 || dir.compare(0, n, h.base) != 0 || dir[n] != '/' ||
        dir.find('/', n + 1) != std::string::npos) {
      continue;
    }
    *name = dir.substr(n + 1);
    return &h;
  }
  return nullptr;
}

int CgroupManager::openGroupFile(const CgroupManager* m, const std::string& dir, const char* file,
                                 int flags) {
  std::string name;
  if (const Hierarchy* h = m != nullptr ? m->hierarchyOf(dir, &name) : nullptr) {
    const int fd = ::openat(h->baseFd, (name + "/" + file).c_str(), flags);
    // Not there: also when the base was removed and made again since it was opened (the
    // descriptor then names the old one); by the path then, so that a group is never taken for
    // empty, or gone, because of where it was looked for.
    if (fd >= 0 || errno != ENOENT) return fd;
  }
  return ::open((dir + "/" + file).c_str(), flags);
}

Status CgroupManager::writeGroupValue(const std::string& dir, const char* file,
                                      const std::string& value) const {
  const int fd = openGroupFile(this, dir, file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return Status::Unavailable("failed to open " + dir + "/" + file + ": " + std::strerror(errno));
  }
  const ssize_t n = ::write(fd, value.data(), value.size());
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return Status::Unavailable("failed to write '" + value + "' to " + dir + "/" + file + ": " +
                               std::strerror(err));
  }
  return Status::Ok();
}

std::optional<int64_t> CgroupManager::readGroupNumber(const std::string& dir,
                                                      const char* file) const {
  const int fd = openGroupFile(this, dir, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  char text[32];
  ssize_t n;
  do {
    n = ::read(fd, text, sizeof text - 1);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  text[n] = '\0';
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (end == text || errno != 0 || (*end != '\n' && *end != '\0')) return std::nullopt;
  return value;
}

// Any read error counts as holding some: the kernel builds the list when the file is read, and
// may fail to (ENOMEM) for a group holding very many.
bool CgroupManager::holdsNoTask(const std::string& dir) const {
  const int fd = openGroupFile(this, dir, "tasks", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  char byte;
  ssize_t n;
  do {
    n = ::read(fd, &byte, 1);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  return n == 0;
}

std::optional<std::vector<std::string>> CgroupManager::takeRecycled() {
  if (recycled_.empty()) return std::nullopt;
  std::vector<std::string> dirs = std::move(recycled_.back());
  recycled_.pop_back();
  return dirs;
}

Result<std::vector<std::string>> CgroupManager::create(const JobSpec& spec) {
  if (auto dirs = takeRecycled()) {
    if (Status st = applyLimits(*dirs, spec); !st.ok()) {
      remove(*dirs);
      return st;
    }
    return std::move(*dirs);
  }
  std::vector<std::string> dirs;
  for (const Hierarchy& h : hierarchies_) {
    std::string dir = h.base + "/" + jobGroupName(spec.id);
    if (!makeDir(dir)) {
      Status st =
          Status::Unavailable("failed to create cgroup " + dir + ": " + std::strerror(errno));
      remove(dirs);
      return st;
    }
    dirs.push_back(dir);
    Status st = applyHierarchyLimits(h, dir, spec);
    if (!st.ok()) {
      remove(dirs);
      return st;
    }
  }
  return dirs;
}

Result<std::vector<std::string>> CgroupManager::createSpare() {
  if (auto dirs = takeRecycled()) return std::move(*dirs);
  // A slot-<n> that exists anywhere may belong to a running job of an earlier agent (or be a
  // stale standby's, on its way out): never share it, take the next number.
  constexpr int kMaxTries = 1000;
  for (int tries = 0; tries < kMaxTries; ++tries, ++nextSlot_) {
    std::vector<std::string> dirs;
    bool taken = false;
    for (const Hierarchy& h : hierarchies_) {
      std::string dir = h.base + "/" + spareGroupName(nextSlot_);
      if (::mkdir(dir.c_str(), 0755) == 0) {
        dirs.push_back(dir);
        continue;
      }
      int err = errno;
      remove(dirs);
      if (err != EEXIST) {
        return Status::Unavailable("failed to create cgroup " + dir + ": " + std::strerror(err));
      }
      taken = true;
      break;
    }
    if (!taken) {
      ++nextSlot_;
      return dirs;
    }
  }
  return Status::Unavailable("failed to create a spare cgroup: slot-" +
                             std::to_string(nextSlot_ - kMaxTries) + " to slot-" +
                             std::to_string(nextSlot_ - 1) + " all exist");
}

Status CgroupManager::applyLimits(const std::vector<std::string>& groups,
                                  const JobSpec& spec) const {
  if (groups.size() != hierarchies_.size()) {
    return Status::Internal("cannot apply limits to " + std::to_string(groups.size()) +
                            " groups: this host has " + std::to_string(hierarchies_.size()) +
                            " cgroup hierarchies");
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    ALLOT_RETURN_IF_ERROR(applyHierarchyLimits(hierarchies_[i], groups[i], spec));
  }
  return Status::Ok();
}

Status CgroupManager::applyHierarchyLimits(const Hierarchy& h, const std::string& dir,
                                           const JobSpec& spec) const {
  const bool v2 = h.controller.empty();
  if (spec.memoryLimitMib > 0 && (v2 || h.controller == "memory")) {
    std::string bytes = std::to_string(spec.memoryLimitMib * 1024 * 1024);
    ALLOT_RETURN_IF_ERROR(
        writeGroupValue(dir, v2 ? "memory.max" : "memory.limit_in_bytes", bytes));
  }
  if (spec.cpuMillis > 0 && (v2 || h.controller == "cpu")) {
    int64_t quota = std::max<int64_t>(kMinCpuQuotaUs, spec.cpuMillis * kCpuPeriodUs / 1000);
    if (v2) {
      ALLOT_RETURN_IF_ERROR(writeGroupValue(
          dir, "cpu.max", std::to_string(quota) + " " + std::to_string(kCpuPeriodUs)));
    } else {
      ALLOT_RETURN_IF_ERROR(
          writeGroupValue(dir, "cpu.cfs_period_us", std::to_string(kCpuPeriodUs)));
      ALLOT_RETURN_IF_ERROR(writeGroupValue(dir, "cpu.cfs_quota_us", std::to_string(quota)));
    }
  }
  if (spec.realGpus && h.controller == "devices") return writeDeviceRules(dir, spec);
  // v2 has no devices files: the same rules, as an eBPF program attached to the group.
  if (spec.realGpus && v2) return attachGpuDeviceFilter(dir, spec.gpuMinors);
  return Status::Ok();
}

// A v1 devices group starts as its parent's: usually "allow everything". In that mode an allow
// rule only removes an identical deny rule, so "deny 195:*, allow 195:N" would leave 195:N
// denied. Instead we deny every GPU minor the job was not given, one rule each. The allow rules
// matter only under a parent that denies by default (a container); there they may be refused
// when the parent lacks them, which the job will notice as a missing device.
Status CgroupManager::writeDeviceRules(const std::string& dir, const JobSpec& spec) const {
  std::set<int> mine(spec.gpuMinors.begin(), spec.gpuMinors.end());
  auto rule = [](int major, const std::string& minor) {
    return "c " + std::to_string(major) + ":" + minor + " rwm";
  };
  // nvidia-modeset (195:254) is denied with the GPUs: compute jobs have no use for it.
  for (int minor = 0; minor < kNvidiaCtlMinor; ++minor) {
    if (mine.count(minor)) continue;
    ALLOT_RETURN_IF_ERROR(
        writeGroupValue(dir, "devices.deny", rule(kNvidiaMajor, std::to_string(minor))));
  }
  for (int minor : mine) {
    (void)writeGroupValue(dir, "devices.allow", rule(kNvidiaMajor, std::to_string(minor)));
  }
  (void)writeGroupValue(dir, "devices.allow",
                        rule(kNvidiaMajor, std::to_string(kNvidiaCtlMinor)));
  int uvm = charMajor("nvidia-uvm");  // dynamic major: /dev/nvidia-uvm and nvidia-uvm-tools
  if (uvm >= 0) (void)writeGroupValue(dir, "devices.allow", rule(uvm, "*"));
  return Status::Ok();
}

bool CgroupManager::recycle(const std::vector<std::string>& groups) {
  if (mode_ != "v1" || groups.size() != hierarchies_.size() || recycled_.size() >= kMaxRecycled) {
    return false;
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    // Only groups this manager made: directly in its directory, under its names.
    const std::string prefix = hierarchies_[i].base + "/";
    if (groups[i].rfind(prefix, 0) != 0) return false;
    const std::string name = groups[i].substr(prefix.size());
    if (!numberAfter(name, "job-") && !numberAfter(name, "slot-")) return false;
  }
  // Every thread, not only every process (a process whose leader has exited is not in
  // cgroup.procs). Once empty a group stays so: only root may write its tasks files, and nothing
  // is left in it to fork.
  for (const auto& dir : groups) {
    if (!holdsNoTask(dir)) return false;
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    if (!resetHierarchy(hierarchies_[i], groups[i]).ok()) return false;
  }
  auto renamed = renameToSpare(groups);
  if (!renamed.ok()) return false;
  recycled_.push_back(std::move(*renamed));
  return true;
}

void CgroupManager::skipSlotsOf(const std::vector<std::string>& groups) {
  for (const auto& g : groups) {
    if (auto slot = numberAfter(fs::path(g).filename().string(), "slot-")) {
      nextSlot_ = std::max(nextSlot_, *slot + 1);
    }
  }
}

bool CgroupManager::isRecycled(const std::string& dir) const {
  return std::any_of(recycled_.begin(), recycled_.end(), [&](const auto& groups) {
    return std::find(groups.begin(), groups.end(), dir) != groups.end();
  });
}

Status CgroupManager::resetHierarchy(const Hierarchy& h, const std::string& dir) const {
  if (h.controller == "memory") {
    // What the job left charged here (its files' pages in the page cache, a page or two for a
    // short job whose directory is gone) would count against the next job's limit. Emptying it
    // (memory.force_empty) drains every CPU's page lists first, ~1 ms in the agent's loop: a group
    // that holds more than a little is removed instead.
    const int64_t charged = readGroupNumber(dir, "memory.usage_in_bytes").value_or(-1);
    if (charged < 0 || charged > kMaxRecycledChargeBytes) {
      return Status::FailedPrecondition(dir + " still holds " + std::to_string(charged) +
                                        " bytes of memory");
    }
    ALLOT_RETURN_IF_ERROR(writeGroupValue(dir, "memory.limit_in_bytes", "-1"));
  } else if (h.controller == "cpu") {
    // A group left without a quota (a job that asked for no CPU limit) has nothing to undo: the
    // period counts only under a quota, and applyHierarchyLimits() writes it with one. Reading
    // first spares the kernel's bandwidth update, which a write makes whatever the value.
    if (readGroupNumber(dir, "cpu.cfs_quota_us") != -1)
      ALLOT_RETURN_IF_ERROR(writeGroupValue(dir, "cpu.cfs_quota_us", "-1"));
  } else if (h.controller == "devices") {
    // "a" drops the group's own rules and copies its parent's again, as a new group starts; the
    // kernel refuses it under a parent that does not allow everything, and then we remove it.
    ALLOT_RETURN_IF_ERROR(writeGroupValue(dir, "devices.allow", "a"));
  }
  return Status::Ok();
}

Result<std::vector<std::string>> CgroupManager::renameToSpare(
    const std::vector<std::string>& groups) {
  // Always a new name, even for slot-<n> groups: whatever still holds the old path (a shim on its
  // way in, a record) then finds nothing there, never the next job's groups.
  constexpr int kMaxTries = 1000;
  for (int tries = 0; tries < kMaxTries; ++tries, ++nextSlot_) {
    std::vector<std::string> renamed;
    int err = 0;
    for (size_t i = 0; i < groups.size(); ++i) {
      const Hierarchy& h = hierarchies_[i];
      std::string to = h.base + "/" + spareGroupName(nextSlot_);
      // cgroup v1 renames a group within its parent, and never over an existing one (EEXIST).
      // recycle() took only groups directly in h.base.
      const std::string from = groups[i].substr(h.base.size() + 1);
      const bool moved =
          h.baseFd >= 0
              ? ::renameat(h.baseFd, from.c_str(), h.baseFd, spareGroupName(nextSlot_).c_str()) == 0
              : ::rename(groups[i].c_str(), to.c_str()) == 0;
      if (!moved) {
        err = errno;
        break;
      }
      renamed.push_back(std::move(to));
    }
    if (renamed.size() == groups.size()) {
      ++nextSlot_;
      return renamed;
    }
    for (size_t i = 0; i < renamed.size(); ++i)
      (void)::rename(renamed[i].c_str(), groups[i].c_str());
    if (err != EEXIST) {
      return Status::Unavailable("cannot rename cgroup " + groups[renamed.size()] + ": " +
                                 std::strerror(err));
    }
  }
  return Status::Unavailable("cannot rename cgroups: no free slot-<n>");
}

std::vector<std::string> CgroupManager::strayGroups(const std::set<int64_t>& keepJobs,
                                                    const std::set<std::string>& keepGroups) const {
  std::vector<std::string> out;
  for (const Hierarchy& h : hierarchies_) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(h.base, ec)) {
      std::string name = entry.path().filename().string();
      std::string dir = entry.path().string();
      if (auto id = numberAfter(name, "job-")) {
        if (!keepJobs.count(*id) && !keepGroups.count(dir)) out.push_back(dir);
      } else if (numberAfter(name, "slot-")) {
        if (!keepGroups.count(dir) && !isRecycled(dir)) out.push_back(dir);
      }
    }
  }
  return out;
}

std::vector<int> CgroupManager::pids(const std::vector<std::string>& groups) {
  return pidsVia(nullptr, groups);
}

std::vector<int> CgroupManager::pidsIn(const std::vector<std::string>& groups) const {
  return pidsVia(this, groups);
}

bool CgroupManager::killAll(const std::vector<std::string>& groups) {
  return killAllVia(nullptr, groups);
}

bool CgroupManager::killAllIn(const std::vector<std::string>& groups) const {
  return killAllVia(this, groups);
}

std::vector<int> CgroupManager::pidsVia(const CgroupManager* m,
                                        const std::vector<std::string>& groups) {
  std::set<int> all;
  for (const auto& dir : groups) {
    // Plain reads: each job's groups are read as it ends, mostly to find them empty.
    const int fd = openGroupFile(m, dir, "cgroup.procs", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    char buf[4096];
    int pid = 0;
    bool inNumber = false;
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      for (ssize_t i = 0; i < n; ++i) {
        if (buf[i] >= '0' && buf[i] <= '9') {
          pid = pid * 10 + (buf[i] - '0');
          inNumber = true;
        } else if (inNumber) {
          all.insert(pid);
          pid = 0;
          inNumber = false;
        }
      }
    }
    if (inNumber) all.insert(pid);
    ::close(fd);
  }
  return {all.begin(), all.end()};
}

bool CgroupManager::killAllVia(const CgroupManager* m, const std::vector<std::string>& groups) {
  // Enough for a process that forks in a loop to lose the race (each round kills all it read);
  // what is left is tried again at the executor's next poll.
  constexpr int kRounds = 64;
  // cgroup.kill is v2's (Linux 5.14+); a v1 group never has one. Once a group that exists was
  // found without it, the agent's groups are of a kind that lacks it, and the failed open (a walk
  // of the whole path) is not tried again.
  static std::atomic<bool> noKillFile{false};
  bool none = true;
  for (const auto& dir : groups) {
    if (!noKillFile.load(std::memory_order_relaxed)) {
      const int fd = openGroupFile(m, dir, "cgroup.kill", O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
      if (fd >= 0) {
        const bool killed = ::write(fd, "1", 1) == 1;
        ::close(fd);
        if (killed) continue;
      } else if (errno == ENOENT && ::access(dir.c_str(), F_OK) == 0) {
        noKillFile.store(true, std::memory_order_relaxed);
      }
    }
    std::vector<int> left = pidsVia(m, {dir});
    for (int round = 0; round < kRounds && !left.empty(); ++round) {
      for (int pid : left) ::kill(pid, SIGKILL);
      left = pidsVia(m, {dir});
    }
    none = none && left.empty();
  }
  return none;
}

bool CgroupManager::remove(const std::vector<std::string>& groups) {
  bool all = true;
  for (const auto& dir : groups) {
    if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) all = false;
  }
  return all;
}

}  // namespace allot::agent
