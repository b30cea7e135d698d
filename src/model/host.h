#pragma once
// Hosts and their GPUs: inventory, live and admin state, host tasks (wipe, hook, health
// check), handovers, rolling upgrades and the record of transitions.
// Part of model.h: plain structs, no behaviour beyond small helpers.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "model/directory.h"

namespace allot::model {

struct Gpu {
  int index = 0;
  std::string uuid{};
  int minor = 0;
  std::string model{};
  int64_t memoryMib = 0;
  int numaNode = -1;
  std::string driverVersion{};
  std::string cudaVersion{};
  // Admin settings, not hardware: they survive the agent re-reporting its inventory.
  std::string dedicatedTo{};  // team this GPU is reserved for; empty = the host's pool
  bool shared = false;        // fractional jobs may share it
  // Topology, -1 when unknown or shared with no other GPU: GPUs of a host with the same
  // nvlinkDomain are joined by NVLink (directly or through NVSwitches); the same pcieSwitch sit
  // under one PCIe switch. Last, not beside numaNode, so that brace-initialised Gpus elsewhere
  // (tests write {index, uuid, minor, model, memory, numa, driver, cuda}) keep their meaning.
  int nvlinkDomain = -1;
  int pcieSwitch = -1;
};

enum class HostState { kOnline, kUnreachable };
const char* hostStateName(HostState s);

// The administrative (lifecycle) state of a host, set by people and by allotd; apart from
// HostState, which is only whether its agent is connected. Only an available host takes new work.
// Registering: joined, its agent not heard from yet. Commissioning: its first host task (health
// check, optional profile) runs. Reprovisioning: a drained host runs a host task (wipe, profile,
// health check) before it goes back to service, or to another team. See docs/hosts.md.
enum class AdminState {
  kAvailable,
  kDraining,
  kMaintenance,
  kFailed,
  kRetired,
  kReprovisioning,
  kRegistering,
  kCommissioning
};
const char* adminStateName(AdminState s);
std::optional<AdminState> parseAdminState(const std::string& s);

// A reprovisioning hook: an ansible playbook or a plain script on the host, from the allotd
// config's [hooks.profiles.NAME]. `id` is its host task's id.
// A Unix account that a host profile creates (docs/access.md, "Workloads run as their owner"):
// a user who may run on the host, their uid and user-private gid, and their teams' groups.
struct UnixAccount {
  std::string name;
  int64_t uid = -1;
  int64_t gid = -1;
  std::map<std::string, int64_t> teams;  // team -> its gid
  bool operator==(const UnixAccount&) const = default;
};

struct HookSpec {
  int64_t id = 0;
  std::string profile{};
  std::string team{};  // the team the host goes to (allot_team); empty = the shared pool
  std::string kind{};  // "playbook" or "script"
  std::string path{};  // on the host
  int64_t timeoutMs = 0;
  // The accounts the profile makes (allot_accounts): every user who may run on the host, as the
  // task starts. Filled by allotd when it starts the task.
  std::vector<UnixAccount> accounts{};
};

// Wipe: what the previous tenant left on the host removed (agent/host_ops/wipe.h): every
// workload's scratch and job directories, stray workload processes, and, when `home`, the team
// home data (the platform's storage policy says whether homes are local and wiped). Then every
// GPU is verified free of processes and memory.
struct WipeStep {
  bool home = false;
};

// Health check: what the host must look like to take work (agent/host_ops/health_check.h).
// A field left at its default is not checked.
struct HealthStep {
  int gpuCount = -1;                   // -1: any
  std::vector<std::string> gpuModels;  // by GPU index; empty: any
  std::string minDriver;               // dotted version, compared numerically; empty: any
  int64_t minFreeDiskMib = 0;          // on the agent's work directory's file system
  // A short compute burn-in on every GPU; only on real GPUs (the simulated provider skips it,
  // saying so in the report).
  bool burnIn = false;
  int64_t burnInMs = 3000;
};

// A host task: the steps allotd asks a host's agent to run between tenants, in this order, each
// only when present: wipe, hook, health check. It rides in the host's desired state until the
// agent reports its result (model/agent_protocol.h). `id` is the transition that started it.
struct HostTask {
  int64_t id = 0;
  std::string purpose;  // for people: "reprovision", "handover to ml", "commission", ...
  std::optional<WipeStep> wipe;
  std::optional<HookSpec> hook;
  std::optional<HealthStep> health;
};

// Who asked a host to change hands, and for what: kept on the host until the handover ends.
// A rolling upgrade uses the same path without a change of owner or a wipe.
struct Handover {
  std::string team;  // the new owner; "" = the shared pool
  std::string by;
  std::string reason;
  int64_t leaseId = 0;    // the lease it starts or ends; 0 = none
  int64_t upgradeId = 0;  // the rolling upgrade it is a step of; 0 = none
  std::string profile;    // the hook to run; "" = the new owner's profile (HostLifecycleOptions)
  bool wipe = true;       // false only for an upgrade: the tenant stays
};
// A handover to a new owner (by hand, or for a lease), with the new owner's profile and a wipe.
inline Handover handoverTo(std::string team, std::string by, std::string reason,
                           int64_t leaseId = 0) {
  Handover h;
  h.team = std::move(team);
  h.by = std::move(by);
  h.reason = std::move(reason);
  h.leaseId = leaseId;
  return h;
}

struct Host {
  std::string name;
  HostState state = HostState::kUnreachable;
  bool simulated = false;   // GPUs come from the simulated provider, not NVML
  std::string gpuProvider;  // "nvml" or "simulated"
  int cpus = 0;
  int64_t memoryMib = 0;
  std::vector<Gpu> gpus;
  std::string agentVersion;
  std::string cgroup;  // what confinement the host offers: "v1", "v2", "none"
  // Whether the agent starts workloads as their owner's Unix identity ("required") or as itself
  // ("off": an agent that is not root cannot switch users). docs/access.md.
  std::string runAsOwner;
  // Its agent runs jobs in OCI images (Inventory::images).
  bool images = false;
  TimeMs joinedAt = 0;
  TimeMs lastSeenAt = 0;        // last message from its agent
  TimeMs unreachableSince = 0;  // 0 while online
  std::string dedicatedTo;      // team the whole host is reserved for; empty = the shared pool
  AdminState adminState = AdminState::kAvailable;
  std::string adminReason;  // why it is in its admin state, as its last transition said
  // Draining only: when running work is preempted; 0 = it may run to its end.
  TimeMs drainDeadline = 0;
  // The host task its agent is to run now (sent with every desired state until the agent
  // reports its result): commissioning's, reprovisioning's or a periodic health check's.
  std::optional<HostTask> task;
  int64_t lastTaskId = 0;  // host tasks are numbered per host, from 1
  // A handover under way: once drained, the host is wiped, given `team`'s profile and
  // health-checked, and then belongs to `team` ("" = the shared pool). See
  // control/hosts/handover.cc.
  std::optional<Handover> handover;
  // What its health checks expect: the GPUs it had when commissioned (count -1: not yet known).
  int expectedGpuCount = -1;
  std::vector<std::string> expectedGpuModels;
  // The sizes allotd last took from its agent while it was out of service (joining,
  // commissioning, in maintenance, fenced for growth until an admin resumed it). A hello while it
  // is in service is measured against these, so that rises within the fence's tolerances cannot
  // add up over reconnections. 0 / absent: the figures it holds (documents written before these).
  int64_t admittedMemoryMib = 0;
  std::map<std::string, int64_t> admittedGpuMemoryMib;  // by GPU: its UUID, else "#<index>"
  TimeMs healthCheckedAt = 0;  // the last health check that passed
  // Its contour (an admin setting, kept when the agent re-reports): only work of this contour
  // runs here. Empty only in documents written before contours; allotd loads those as the
  // default contour (control/contours.h).
  std::string contour;
  // A platform admin reset its credential (`allot host reset-credential`): the next join under
  // its name takes it over. Without it, a join under an existing host's name is refused.
  bool credentialReset = false;
  // Where other hosts reach it, as its agent last reported (Inventory::address); empty until then.
  std::string address;
  // What its image cache is asked to do (`allot image prune|prepull`, model/image_cache.h), kept
  // with the host so that an allotd restart loses no request: prunes asked so far, and the
  // references still to fetch ahead of jobs.
  int64_t imagePrunes = 0;
  std::vector<std::string> imagePrepulls;
  // The team whose registry login a prepull pulls with, by reference (`--team`); none = the
  // team of the host's pool, if any.
  std::map<std::string, std::string> imagePrepullTeams;
};

// A rolling upgrade of a pool ("shared", or a team's hosts): batch by batch, each host drained,
// given `profile`'s hook, health-checked and returned to service, at most `maxUnavailable` hosts
// out at once; the first failure stops it, leaving the hosts not yet started untouched. The
// state lives here and in the hosts' handovers, so an allotd restart resumes it. See
// control/hosts/upgrades.cc and docs/hosts.md.
enum class UpgradeState { kRunning, kSucceeded, kStopped };
const char* upgradeStateName(UpgradeState s);
std::optional<UpgradeState> parseUpgradeState(const std::string& s);

enum class UpgradeHostState { kPending, kRunning, kDone, kFailed, kSkipped };
const char* upgradeHostStateName(UpgradeHostState s);
std::optional<UpgradeHostState> parseUpgradeHostState(const std::string& s);

struct UpgradeHost {
  std::string host;
  UpgradeHostState state = UpgradeHostState::kPending;
  std::string reason;  // failed: why; skipped: the host's state at the start
  TimeMs startedAt = 0;
  TimeMs endedAt = 0;
};

struct Upgrade {
  int64_t id = 0;
  std::string pool;  // "shared" or a team
  std::string profile;
  int maxUnavailable = 1;
  int64_t drainDeadlineMs = 0;  // others' work is preempted this long after the drain; 0 = none
  std::string by;
  TimeMs createdAt = 0;
  UpgradeState state = UpgradeState::kRunning;
  std::vector<UpgradeHost> hosts;  // in the order they are upgraded
  TimeMs endedAt = 0;
  std::string stoppedAt;  // stopped: the host whose step failed ("" when stopped otherwise)
  std::string reason;     // stopped: why
};

// The host's driver and CUDA versions: one kernel module serves all its GPUs, so the first GPU
// that reports one speaks for the host; "" when none does (no GPUs, or a provider that cannot
// tell).
std::string hostDriverVersion(const Host& h);
std::string hostCudaVersion(const Host& h);

// One change of a host's admin state: who, when, from, to and why. Append-only, kept for audit
// and shown by `allot host log`. `output` is what ran for the transition (reprovisioning hooks,
// later); empty for now.
struct HostTransition {
  int64_t id = 0;  // append order over all hosts, from 1
  std::string host;
  TimeMs at = 0;
  std::string by;  // a user's name, or "allotd" for automatic transitions
  AdminState from = AdminState::kAvailable;
  AdminState to = AdminState::kAvailable;
  std::string reason;
  std::string output;
};

}  // namespace allot::model
