#pragma once
// Domain values shared by every module: plain structs, no behaviour beyond small helpers.
// Names (teams, users, projects, hosts) are the ids people type; jobs get a number.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"

namespace allot::model {

// Roles, weakest first, so they compare. A user holds one role in each of their teams: a viewer
// reads the team's work; a member also submits work and cancels their own; a team-admin also
// runs the team (members, projects, the quota split, leases, any of its work). Platform admin is
// not a team role but a flag of the user (User::platformAdmin): it may do everything.
enum class Role { kViewer, kMember, kTeamAdmin, kPlatformAdmin };
const char* roleName(Role r);
std::optional<Role> parseRole(const std::string& s);
// The roles a user may hold in a team: viewer, member, team-admin.
inline bool isTeamRole(Role r) { return r != Role::kPlatformAdmin; }

// What a team is promised and how it shares. GPU counts are per GPU model; the key "" means any
// model (shown as "any" in JSON). The quota policy (sched/quota) gives these their meaning.
struct Quota {
  std::map<std::string, int> guaranteed;
  int borrowLimit = -1;  // most GPUs it may use beyond its guarantee; -1 = no limit
  int lendLimit = -1;    // most of its idle guarantee others may use; -1 = all of it
  double weight = 1.0;   // its fair-share weight when borrowing; > 0
  // Contour -> the most GPUs its work may hold in that contour at once; absent = no limit.
  std::map<std::string, int> contourLimits;
};

// What to do about an allocation whose GPUs all stay under `thresholdPct` utilisation for
// `afterMs`: tell its owners (an event, the job's `idle` field, the webhook), and with kReclaim
// also take the GPUs back `graceMs` after telling them. Set per team or project; absent there,
// the team's or the platform's applies (see control/idle_policy.h).
enum class IdleAction { kNotify, kReclaim };
const char* idleActionName(IdleAction a);
std::optional<IdleAction> parseIdleAction(const std::string& s);

struct IdlePolicy {
  double thresholdPct = 5;        // 0..100
  int64_t afterMs = 30 * 60'000;  // > 0
  IdleAction action = IdleAction::kNotify;
  int64_t graceMs = 15 * 60'000;  // >= 0
  std::string webhook;            // http:// URL to POST events to; empty = none
  bool operator==(const IdlePolicy&) const = default;
};

struct Team {
  std::string name;
  TimeMs createdAt = 0;
  // The Unix group of the team's storage and workloads (allocated by allotd, or the directory's);
  // -1 = none yet.
  int64_t gid = -1;
  Quota quota;
  // The team lets others use its idle dedicated hosts and GPUs, and takes them back by
  // preemption when it needs them.
  bool lendDedicated = false;
  // Decayed GPU-seconds of use, as of usageAt: the fair-share history. Written by the scheduling
  // side; kept here so a restart does not forget who used a lot lately.
  double usageGpuSeconds = 0;
  TimeMs usageAt = 0;
  std::optional<IdlePolicy> idlePolicy;  // absent: the platform's default
};

// A person, or a service account that CI and automation use (it logs in only with tokens).
enum class UserKind { kHuman, kService };
const char* userKindName(UserKind k);
// Where the account lives: in allotd (password set here) or in the directory (LDAP/AD), whose
// groups then decide the user's teams and roles at each login.
enum class UserSource { kLocal, kLdap };
const char* userSourceName(UserSource s);

// An OpenSSH public key a user registered, to reach their sessions over SSH (docs/access.md).
// Only the public half: the private key never leaves the user's machine.
struct SshKey {
  std::string fingerprint;  // "SHA256:<base64, no padding>", as `ssh-keygen -l` prints it
  std::string type;         // "ssh-ed25519", "ssh-rsa", ...
  std::string blob;         // base64, as in the .pub file
  std::string comment;      // free text after the key; may be empty
  TimeMs addedAt = 0;
};
// The key as one line of an authorized_keys file: "type blob comment", never with options.
std::string authorizedKeysLine(const SshKey& k);

struct User {
  std::string name;
  std::map<std::string, Role> teams;  // team -> the user's role in it (a team role)
  bool platformAdmin = false;
  UserKind kind = UserKind::kHuman;
  UserSource source = UserSource::kLocal;
  // Argon2id string (libsodium's crypto_pwhash_str) for a local user's password; empty = none.
  std::string passwordHash;
  // The Unix identity workloads run as: from LDAP's posixAccount, or allocated by allotd. -1 =
  // none yet.
  int64_t uid = -1;
  int64_t gid = -1;
  bool disabled = false;        // a disabled user cannot authenticate; their work stays on record
  std::vector<SshKey> sshKeys;  // in the order added
  TimeMs createdAt = 0;
  std::string createdBy;

  // The user's role in `team`, if a member.
  std::optional<Role> roleIn(const std::string& team) const {
    auto it = teams.find(team);
    return it == teams.end() ? std::nullopt : std::optional<Role>(it->second);
  }
};

// What a token is for: the API (CLI, scripts; named by its owner), a console login (a browser
// session behind a cookie), or an agent's host credential.
enum class TokenKind { kApi, kSession, kHost };
const char* tokenKindName(TokenKind k);

// An API credential. The secret is shown once; the store keeps only its hash.
struct ApiToken {
  std::string id;     // public part, "tok-<n>"
  std::string owner;  // user name, or "host:<name>" for a host credential
  std::string hash;
  TimeMs createdAt = 0;
  TimeMs expiresAt = 0;  // 0 = never
  std::string name;      // the owner's label for it ("laptop", "ci"); may be empty
  TokenKind kind = TokenKind::kApi;
};

struct Project {
  std::string name;
  std::string team;
  TimeMs createdAt = 0;
  // Its split of the team's guarantee, same keys as Quota::guaranteed. Over a team's projects the
  // split never exceeds the team's guarantee, key by key.
  std::map<std::string, int> guaranteed;
  std::optional<IdlePolicy> idlePolicy;  // absent: its team's
};

// An admin-made token that lets agents join: `uses` joins (1 by default) until it expires or is
// revoked. Each join counts one use in the same store commit as the join itself.
struct JoinToken {
  std::string id;
  std::string hash;
  std::string createdBy;
  TimeMs createdAt = 0;
  TimeMs expiresAt = 0;
  int uses = 1;          // joins allowed in all
  int used = 0;          // joins made with it
  TimeMs revokedAt = 0;  // 0: not revoked

  int usesLeft() const { return revokedAt != 0 || used >= uses ? 0 : uses - used; }
};

struct Gpu {
  int index = 0;
  std::string uuid;
  int minor = 0;
  std::string model;
  int64_t memoryMib = 0;
  int numaNode = -1;
  std::string driverVersion;
  std::string cudaVersion;
  // Admin settings, not hardware: they survive the agent re-reporting its inventory.
  std::string dedicatedTo;  // team this GPU is reserved for; empty = the host's pool
  bool shared = false;      // fractional jobs may share it
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
  std::string profile;
  std::string team;  // the team the host goes to (allot_team); empty = the shared pool
  std::string kind;  // "playbook" or "script"
  std::string path;  // on the host
  int64_t timeoutMs = 0;
  // The accounts the profile makes (allot_accounts): every user who may run on the host, as the
  // task starts. Filled by allotd when it starts the task.
  std::vector<UnixAccount> accounts;
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
  // health-checked, and then belongs to `team` ("" = the shared pool). See cluster_handover.cc.
  std::optional<Handover> handover;
  // What its health checks expect: the GPUs it had when commissioned (count -1: not yet known).
  int expectedGpuCount = -1;
  std::vector<std::string> expectedGpuModels;
  TimeMs healthCheckedAt = 0;  // the last health check that passed
  // Its contour (an admin setting, kept when the agent re-reports): only work of this contour
  // runs here. Empty only in documents written before contours; allotd loads those as the
  // default contour (control/contours.h).
  std::string contour;
  // A platform admin reset its credential (`allot host reset-credential`): the next join under
  // its name takes it over. Without it, a join under an existing host's name is refused.
  bool credentialReset = false;
};

// A rolling upgrade of a pool ("shared", or a team's hosts): batch by batch, each host drained,
// given `profile`'s hook, health-checked and returned to service, at most `maxUnavailable` hosts
// out at once; the first failure stops it, leaving the hosts not yet started untouched. The
// state lives here and in the hosts' handovers, so an allotd restart resumes it. See
// control/cluster_upgrade.cc and docs/hosts.md.
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

// kPreempted: stopped to give its GPUs back to a team that was guaranteed them, and not requeued
// because it was not marked preemptible.
enum class JobState {
  kQueued,
  kScheduled,
  kRunning,
  kSucceeded,
  kFailed,
  kCancelled,
  kLost,
  kPreempted
};
const char* jobStateName(JobState s);
std::optional<JobState> parseJobState(const std::string& s);
bool isTerminal(JobState s);

// What the agent last said about one rank of a gang job.
enum class RankState { kPending, kRunning, kExited, kFailedToStart, kLost };
const char* rankStateName(RankState s);
std::optional<RankState> parseRankState(const std::string& s);

// One process of a gang (multi-host) job: where it runs and how it went. Rank 0 is also kept in
// the job's flat host/gpuIndices/gpuUuids fields, so that readers of single-host jobs keep working.
struct Rank {
  std::string host;
  std::vector<int> gpuIndices;
  std::vector<std::string> gpuUuids;
  RankState state = RankState::kPending;
  std::optional<int> exitCode;
  std::optional<int> signal;
  std::string message;  // how it ended, in words ("exited with code 3")
};

// What makes a job an interactive session (docs/sessions.md): the profile it was made from, what
// the agent runs for it and when it counts as idle. Everything else (resources, placement,
// accounting, the lifetime as maxRuntimeMs) is the job's own, so that a session is scheduled,
// accounted and isolated exactly like any other allocation.
struct SessionSpec {
  std::string profile;
  // "jupyter-server" or "jupyter-notebook": the agent starts that Jupyter app (through its fork
  // server when it has one) under /sessions/{id}/; "command": the profile's command as it is.
  std::string app;
  std::string storage;  // "local", "scratch" or "shared"
  double idleThresholdPct = 5;
  int64_t idleAfterMs = 0;
  std::vector<std::string> sharedWith;  // users who may open it besides its owner
  bool operator==(const SessionSpec&) const = default;
};

struct Job {
  int64_t id = 0;
  std::string name;
  std::string team;
  std::string project;
  std::string user;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  int gpus = 0;
  std::vector<std::string> gpuModels;  // any of these; empty = any model
  int gpuMilli = 1000;       // share of each GPU; below 1000 only with gpus == 1 (a shared GPU)
  int64_t gpuMemoryMib = 0;  // GPU memory it needs on each GPU; 0 = not stated
  int cpuMillis = 0;         // CPU limit in millicores; 0 = unlimited
  int64_t memoryMib = 0;     // memory limit; 0 = unlimited
  int priority = 0;          // -1000..1000, higher first
  bool preemptible = false;  // may be stopped and requeued to make room
  bool wholeHost = false;    // every GPU, CPU and byte of one host; the scheduler fills gpus
  int hosts = 1;             // > 1: a gang of `hosts` processes, one per host, `gpus` GPUs each
  int64_t maxRuntimeMs = 0;  // declared limit, enforced; 0 = none
  std::string minDriver;     // lowest NVIDIA driver version it runs on ("535.104"); empty = any
  std::string minCuda;       // lowest CUDA version ("12.2"); empty = any
  JobState state = JobState::kQueued;
  std::string reason;  // why it waits, or why it ended the way it did
  std::string host;
  std::vector<int> gpuIndices;
  std::vector<std::string> gpuUuids;
  // A placed gang's ranks in rank order (rank 0 first, mirroring host/gpuIndices/gpuUuids); empty
  // for a single-host job and for a gang not placed.
  std::vector<Rank> ranks;
  // A gang: the first rank that failed, started no process or was lost, whose failure stops the
  // other ranks and decides how the job ends; -1 while none has.
  int failedRank = -1;
  std::optional<int> exitCode;
  std::optional<int> signal;
  bool cancelRequested = false;
  // Written by the scheduler: how often it was preempted, whether it is leaving now to make
  // room, and for what.
  int preemptions = 0;
  bool evicting = false;
  TimeMs evictingSince = 0;
  std::string evictedFor;
  TimeMs submittedAt = 0;
  TimeMs scheduledAt = 0;
  TimeMs startedAt = 0;
  TimeMs finishedAt = 0;
  std::string contour;  // runs only on hosts of this contour; empty as for Host::contour
  std::optional<SessionSpec> session;  // set for an interactive session
};

// The allocation ledger (accounting): who held which GPUs when, append-only. An open entry records
// one host's share of a placed job (one per rank of a gang) from `startAt`; a close entry (`ref` =
// the open entry's seq) says when the job stopped holding them; a correction entry gives a closed
// interval a better end (a host that went silent: it ended when the host was last seen). Entries
// are never changed once written; the last close or correction of an interval wins.
enum class LedgerKind { kOpen, kClose, kCorrect };
const char* ledgerKindName(LedgerKind k);
std::optional<LedgerKind> parseLedgerKind(const std::string& s);

struct LedgerEntry {
  int64_t seq = 0;  // append order, from 1
  LedgerKind kind = LedgerKind::kOpen;
  int64_t ref = 0;  // close/correct: the seq of the open entry; 0 for an open entry
  int64_t jobId = 0;
  // Open entries only (close and correction entries leave them empty).
  std::string team;
  std::string project;
  std::string user;
  std::string host;
  std::string gpuModel;
  std::vector<int> gpuIndices;
  int gpuMilli = 1000;  // milli-GPUs held on each of gpuIndices
  TimeMs startAt = 0;   // open: when the job was placed
  TimeMs endAt = 0;     // close/correct: when the hold ended
  std::string reason;   // close/correct: why ("succeeded", "requeued", "host last seen", ...)
};

// Something that happened to an allocation, for its owners (API, CLI, webhook). Append-only:
// written once, never changed. `details` is a JSON object, kept as text so that the model stays
// free of a JSON dependency.
// Lease events (kLease*) concern a team's lease rather than one allocation: jobId is 0 there,
// except for a preemption notice, which names the job that the lease's start will preempt.
enum class EventKind {
  kAllocationIdle,
  kAllocationBusyAgain,
  kAllocationReclaimed,
  kLeaseChanged,
  kLeasePreemptionNotice,
  kSchedulerError  // cluster-wide (no team): the scheduler refused the fleet's snapshot
};
const char* eventKindName(EventKind k);
std::optional<EventKind> parseEventKind(const std::string& s);

struct Event {
  int64_t id = 0;  // append order, from 1
  TimeMs at = 0;
  EventKind kind = EventKind::kAllocationIdle;
  std::string team;
  std::string project;
  std::string user;
  int64_t jobId = 0;
  std::vector<std::string> hosts;  // rank order
  std::string message;
  std::string details = "{}";
};

// A time-boxed lease of whole hosts to a team (docs/leases.md). requested -> approved -> active
// -> ended; a request may be rejected; ending a lease before its start cancels it.
enum class LeaseState { kRequested, kApproved, kActive, kEnded, kRejected, kCancelled };
const char* leaseStateName(LeaseState s);
std::optional<LeaseState> parseLeaseState(const std::string& s);

struct Lease {
  int64_t id = 0;
  std::string team;
  std::string requestedBy;
  std::string reason;
  // Named hosts; for a count lease, empty until approval picks them.
  std::vector<std::string> hosts;
  int count = 0;         // a count lease: this many hosts; 0 when hosts were named
  std::string gpuModel;  // count lease: hosts whose GPUs are all of this model; empty = any
  int minGpus = 0;       // count lease: hosts with at least this many GPUs
  TimeMs startAt = 0;
  TimeMs endAt = 0;
  LeaseState state = LeaseState::kRequested;
  TimeMs createdAt = 0;
  std::string decidedBy;  // who approved, rejected or ended it ("allotd": policy or schedule)
  TimeMs decidedAt = 0;
  std::string decision;  // the approval's, rejection's or early end's reason
  TimeMs startedAt = 0;  // when allotd started it (hosts handed over); 0 = not yet
  TimeMs endedAt = 0;
  // Hosts not handed over at the start (failed, retired, gone), with why: "gpu-03: failed".
  std::vector<std::string> skipped;
  // Hosts whose handover to the team began (at the start, or later when the host was busy with
  // another handover then): the lease keeps trying the others until its end.
  std::vector<std::string> claimed;
  std::vector<std::string> returned;  // hosts handed back to the pool after the end
  std::vector<int64_t> noticed;       // jobs already told they will be preempted at the start
};

// A session profile (docs/sessions.md): what an interactive session runs and within which limits.
// Platform-wide (team "", made by platform admins, seen by the teams in visibleTo, or by every
// team when that is empty) or a team's own (made by its team-admins, seen by that team only).
// Names are unique cluster-wide.
struct ProfileResources {
  int gpus = 0;
  int gpuMilli = 1000;  // defaults only: the share of each GPU
  int cpuMillis = 0;
  int64_t memoryMib = 0;
  bool operator==(const ProfileResources&) const = default;
};

struct Profile {
  std::string name;
  std::string team;  // "" = platform-wide
  std::string description;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  ProfileResources defaults;
  ProfileResources maxima;                         // 0 = no maximum (gpuMilli unused)
  std::vector<std::string> storage = {"scratch"};  // of local, scratch, shared
  double idleThresholdPct = 5;
  int64_t idleAfterMs = 30 * 60'000;
  int64_t maxLifetimeMs = 0;           // 0 = none
  std::vector<std::string> visibleTo;  // platform-wide only; empty = every team
  std::string createdBy;
  TimeMs createdAt = 0;
};

// The rank of `job` that runs on `host`, or -1. A single-host job's one process is rank 0.
int rankOn(const Job& job, const std::string& host);
// Every host a placed job has a rank on, in rank order; empty when not placed.
std::vector<std::string> rankHosts(const Job& job);

}  // namespace allot::model
