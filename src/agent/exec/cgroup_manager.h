#pragma once
// CgroupManager: confines jobs with the host's cgroups. It probes once, at construction, for
// cgroup v2 (a unified hierarchy at the mount root, with cgroup.controllers), else v1 (one
// hierarchy per controller), else nothing usable: then mode() is "none", create() gives no groups
// and jobs run unconfined. A host without cgroups never fails a job; the host reports its mode so
// allotd can show what confinement it offers.
//
// Where the groups go:
//   v1  <hierarchy>/<the agent's own group>/allot/<group>, for memory, cpu and devices. Nesting
//       under the agent's own group keeps jobs inside whatever the agent itself was given (a
//       systemd slice with Delegate=yes, a container) and v1 allows processes in inner groups.
//   v2  <mount>/allot/<group>. Not under the agent's group: v2 forbids enabling controllers for
//       children of a group that itself holds processes (the agent), and the root is exempt.
// <group> is job-<id> for a group made for one job (create()), or slot-<n> for a spare group made
// ahead of any job (createSpare()) that a standby shim joins early and a job later takes over,
// limits written then (applyLimits()). See process_executor.h.
//
// Recycling (v1). Under a stream of short jobs, making and removing three groups per job is much
// of the agent's work: a memory group's mkdir, 0.15 ms at the median, stalls for 5 ms at the 90th
// percentile and up to 27 ms (measured with 8 jobs at a time on one host), in the agent's one
// loop; and a removed memory group lingers in the kernel until its last page is reclaimed. So an
// ended job's emptied groups are reset to what a new group is (no limits, the parent's device
// rules), renamed slot-<n> and kept for the next create() or createSpare() (recycle()). v2 groups
// are removed as before.
//
// Device confinement, for jobs on real GPUs: v1 writes devices.deny/allow rules; v2 attaches a
// BPF_PROG_TYPE_CGROUP_DEVICE program to the job's group (bpf_device_filter.h) with the same
// effect. Either way a job whose device rules cannot be applied is not started. See
// docs/agent.md "Confinement".
//
// Called from the agent's loop only. Group directories are returned to the caller, which persists
// them with the job, so pids() and remove() work on jobs from before an agent restart.

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/exec/executor.h"
#include "common/status.h"

namespace allot::agent {

class CgroupManager {
 public:
  // groupName names the directory job groups are made in ("allot/job-<id>"): agents sharing a
  // host (test clusters) use different names so that job ids cannot collide.
  explicit CgroupManager(std::string groupName = "allot", std::string mountRoot = "/sys/fs/cgroup",
                         std::string selfCgroupFile = "/proc/self/cgroup");
  // Removes the groups kept by recycle(): nothing is left behind on a clean stop.
  ~CgroupManager();
  CgroupManager(const CgroupManager&) = delete;
  CgroupManager& operator=(const CgroupManager&) = delete;

  // "v1", "v2" or "none".
  const std::string& mode() const { return mode_; }
  // The directories job groups are made in, one per hierarchy (the shim server opens them, so
  // that shims join their groups relative to them: see job_shim_main.cc).
  std::vector<std::string> bases() const {
    std::vector<std::string> out;
    for (const Hierarchy& h : hierarchies_) out.push_back(h.base);
    return out;
  }

  // The job's groups, with spec's limits applied: memory when memoryLimitMib > 0, CPU bandwidth
  // when cpuMillis > 0, and device rules (v1 files, v2 eBPF) when realGpus. Recycled slot-<n>
  // groups if there are some, else new job-<id> groups. Returns the group directories, whose
  // cgroup.procs the job's shim joins; empty in mode "none". An error (a limit or device filter
  // that cannot be applied) leaves nothing behind.
  Result<std::vector<std::string>> create(const JobSpec& spec);

  // A spare group (slot-<n>) in every hierarchy, with no limits, for a standby shim to join before
  // there is a job: a recycled one if there is one, else made under a name no existing group has.
  // Empty in mode "none". An error leaves nothing behind.
  Result<std::vector<std::string>> createSpare();
  // Writes spec's limits (as create() does) into groups made by this manager: one per hierarchy,
  // in the order create() and createSpare() return them. Leaves earlier writes on error.
  Status applyLimits(const std::vector<std::string>& groups, const JobSpec& spec) const;

  // Keeps the groups of an ended job or a retired standby, made by this manager (one per
  // hierarchy, in create()'s order), for the next create() or createSpare(): resets them to what a
  // new group is and renames them slot-<n>, a number not used before. False, with the
  // groups left as they were or reset but under their old names, when they cannot be kept; the
  // caller then removes them. Not kept: in mode v2 or "none"; while any thread is in them (kept,
  // it would enter the next job's limits and device rules); with more than
  // kMaxRecycledChargeBytes still charged to the memory group (it would count against the next
  // job's limit, and emptying it would stall the agent's loop); when a reset is refused (a
  // devices parent that denies by default refuses "allow all"); beyond kMaxRecycled sets.
  bool recycle(const std::vector<std::string>& groups);
  // Groups a job recorded before this manager existed (an earlier agent's) may be gone, their
  // slot-<n> names free: new slot groups get higher numbers, so that sweeping that job's groups
  // never reaches another job's.
  void skipSlotsOf(const std::vector<std::string>& groups);
  // The sets recycle() keeps now, each one per hierarchy (tests, diagnostics).
  const std::vector<std::vector<std::string>>& recycled() const { return recycled_; }
  static constexpr size_t kMaxRecycled = 32;
  static constexpr int64_t kMaxRecycledChargeBytes = 1 << 20;

  // Groups under this manager's directories that no known job holds: job groups whose id is not
  // in `keepJobs` (forgotten while a process lingered, then the agent restarted) and spare groups
  // not in `keepGroups` (a standby of an earlier agent, or the groups of a job it took over that
  // the executor no longer knows). Recycled groups are this manager's own, never stray.
  std::vector<std::string> strayGroups(const std::set<int64_t>& keepJobs,
                                       const std::set<std::string>& keepGroups) const;

  // Every process in the groups.
  static std::vector<int> pids(const std::vector<std::string>& groups);
  // SIGKILLs every process in the groups, and what they fork meanwhile: v2's cgroup.kill does it
  // at once; on v1 the members are read and killed again until none is left (a bounded number of
  // rounds), since a process may fork between the read and its kill. True when none is left.
  static bool killAll(const std::vector<std::string>& groups);
  // The same, with the files of groups in this manager's directories opened relative to them
  // (see Hierarchy::baseFd): what the executor calls as each job ends.
  std::vector<int> pidsIn(const std::vector<std::string>& groups) const;
  bool killAllIn(const std::vector<std::string>& groups) const;
  // Removes the groups; false while any still holds a process (retry after they exit).
  static bool remove(const std::vector<std::string>& groups);

 private:
  struct Hierarchy {
    std::string controller;  // v1: "memory", "cpu", "devices"; v2: ""
    std::string base;        // the allot/ directory job groups are made in
    // base, opened (O_PATH). Each ended job's groups are read, reset and renamed, a dozen files;
    // opened by a path from the mount root, each walked every cgroupfs directory above its group,
    // twice, as cgroupfs' lookups drop out of the kernel's lock-free walk (path walks were a tenth
    // of the agent's CPU under a stream of short jobs). Relative to this: "<group>/<file>".
    int baseFd = -1;
  };
  // dir/file, opened relative to the base of the hierarchy dir is a group of; by its whole path
  // when it is none of this manager's (an earlier agent's, a test's). m may be null.
  static int openGroupFile(const CgroupManager* m, const std::string& dir, const char* file,
                           int flags);
  // Writes value to dir/file in one write(2).
  Status writeGroupValue(const std::string& dir, const char* file, const std::string& value) const;
  // The number dir/file holds; nullopt when it cannot be read or holds something else.
  std::optional<int64_t> readGroupNumber(const std::string& dir, const char* file) const;
  // Whether the group holds no thread (see recycle()).
  bool holdsNoTask(const std::string& dir) const;
  static std::vector<int> pidsVia(const CgroupManager* m, const std::vector<std::string>& groups);
  static bool killAllVia(const CgroupManager* m, const std::vector<std::string>& groups);
  // The hierarchy whose base dir is directly in, and the group's name there; nullptr if none.
  const Hierarchy* hierarchyOf(const std::string& dir, std::string* name) const;
  void probeV2(const std::string& mountRoot);
  void probeV1(const std::string& mountRoot, const std::string& selfCgroupFile);

  Status applyHierarchyLimits(const Hierarchy& h, const std::string& dir,
                              const JobSpec& spec) const;
  Status writeDeviceRules(const std::string& dir, const JobSpec& spec) const;
  bool isRecycled(const std::string& dir) const;
  // A kept set, taken off the list; nullopt when none is kept.
  std::optional<std::vector<std::string>> takeRecycled();
  // Undoes whatever applyHierarchyLimits() wrote, and the charges a job left (see recycle()).
  Status resetHierarchy(const Hierarchy& h, const std::string& dir) const;
  // Renames the groups slot-<n>, n unused in every hierarchy; the new names, or an error with
  // the old names restored as far as the kernel lets.
  Result<std::vector<std::string>> renameToSpare(const std::vector<std::string>& groups);

  std::string groupName_;
  std::string mode_ = "none";
  std::vector<Hierarchy> hierarchies_;
  int64_t nextSlot_ = 1;  // where createSpare() starts looking for an unused slot-<n>
  std::vector<std::vector<std::string>> recycled_;
};

}  // namespace allot::agent
