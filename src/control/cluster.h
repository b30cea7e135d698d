#pragma once
// Cluster: every operation on the control plane's state. Each operation checks its caller and
// its input first (a refused request changes nothing), then changes the in-memory World and
// returns a Change: the value to show plus the WriteBatch that makes it durable and the hosts
// whose agents must hear about it. The caller commits the batch, waits until it is durable,
// then replies and pushes (see Server). Batches commit in order, so memory may run ahead of the
// disk only by writes that are not yet acknowledged to anyone.
//
// Threading: one thread (allotd's I/O thread) calls everything here.

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "control/contours.h"
#include "control/idle_policy.h"
#include "control/job_request.h"
#include "control/log_store.h"
#include "control/principal.h"
#include "control/usage_report.h"
#include "control/usage_series.h"
#include "control/world.h"
#include "model/agent_protocol.h"
#include "sched/fleet.h"
#include "store/store.h"
#include "telemetry/attribution.h"

namespace allot::control {

template <typename T>
struct Change {
  T value;
  store::WriteBatch batch;
  std::set<std::string> pushHosts;  // agents to send their desired state once durable
};

// A change to a team's quota settings; a field left empty keeps its value. `guaranteed`, when
// set, replaces the whole map.
struct QuotaUpdate {
  std::optional<std::map<std::string, int>> guaranteed;
  std::optional<int> borrowLimit;  // -1 = no limit
  std::optional<int> lendLimit;    // -1 = all of its idle guarantee
  std::optional<double> weight;
  std::optional<bool> lendDedicated;
  // Merged into the team's limits: a number sets the contour's limit, nullopt removes it.
  std::map<std::string, std::optional<int>> contourLimits;
};

// A team's quota as `GET /teams/{team}/quota` shows it.
struct TeamQuotaView {
  model::Team team;
  std::vector<model::Project> projects;   // the team's projects holding a split of its guarantee
  std::optional<TeamQuotaStatus> status;  // absent until a scheduling pass has seen the team
};

// Admin settings of one GPU; a field left empty keeps its value.
struct GpuSettings {
  std::optional<std::string> dedicatedTo;  // "" = not dedicated
  std::optional<bool> shared;
};

// What `allot session create` asks for; unset fields come from the profile's defaults.
struct SessionRequest {
  std::string profile;  // empty: "jupyter"
  std::string name;     // empty: the profile's name, numbered when the owner has one already
  std::string team;     // empty: the caller's team
  std::string project;
  std::optional<int> gpus;
  std::optional<int> gpuMilli;  // a share of one GPU (gpus must then be 1)
  std::optional<int> cpuMillis;
  std::optional<int64_t> memoryMib;
  std::string storage;  // empty: the profile's first storage type
};

struct SessionEndpoint {
  std::string host;
  std::string app;
  std::string token;  // Jupyter's; empty for a "command" session
};

struct JobFilter {
  std::optional<model::JobState> state;
  std::string team;
  TimeMs submittedSince = 0;  // 0: no lower bound
  TimeMs submittedUntil = 0;  // 0: no upper bound (exclusive)
  size_t limit = 1000;
};

// A new account. Local humans may log in with a password (its Argon2id hash, made off the I/O
// thread by the caller); service accounts only with tokens.
struct NewUser {
  std::string name;
  std::map<std::string, model::Role> teams;  // team -> team role
  bool platformAdmin = false;
  model::UserKind kind = model::UserKind::kHuman;
  std::string passwordHash;  // empty: no password login
  // The directory's (LDAP posixAccount) uid and gid; -1: allotd allocates them (docs/access.md).
  int64_t uid = -1;
  int64_t gid = -1;
};
struct CreatedUser {
  model::User user;
  std::string token;  // a first API token, shown once
};
// A change to an account; a field left empty keeps its value.
struct UserUpdate {
  std::optional<bool> platformAdmin;
  std::optional<bool> disabled;
  std::optional<std::string> passwordHash;  // "" removes password login
  // With passwordHash: the token of the caller's own that survives the change (a user changing
  // their own password stays logged in there); every other login and console token of the user
  // ends, since whoever knew the old password may hold one.
  std::string keepTokenId;
};
// A named API token for `user` (empty: the caller), valid for `ttlMs` (0 = no expiry).
struct NewToken {
  std::string user;
  std::string name;
  int64_t ttlMs = 0;
};
struct CreatedToken {
  model::ApiToken token;
  std::string secret;  // shown once
};
// What a directory login found: the user's teams and roles from their groups, their Unix ids.
struct DirectoryLogin {
  std::string name;
  std::map<std::string, model::Role> teams;
  bool platformAdmin = false;
  int64_t uid = -1;
  int64_t gid = -1;
};
struct CreatedJoinToken {
  model::JoinToken token;
  std::string secret;
};
struct JoinedHost {
  model::Host host;
  std::string credential;
};

// Who holds a GPU right now, for `host show`.
struct GpuAllocation {
  int gpuIndex = 0;
  int64_t jobId = 0;
  std::string team;
  std::string user;
  std::string project;
  TimeMs since = 0;  // when the job was given the GPU
  int gpuMilli = 1000;
};

// The agent side of a connected host: where to send its desired state.
class AgentLink {
 public:
  virtual ~AgentLink() = default;
  virtual void send(std::string message) = 0;
};

// A reprovisioning profile (allotd.toml [hooks.profiles.NAME]): what the host's agent runs.
struct HookProfile {
  std::string kind;  // "playbook" (ansible-playbook, connection local) or "script"
  std::string path;  // on the host
};

// Who made a change allotd made by itself (a drain finishing, a task's result, a lease starting),
// in transition records and lease decisions.
inline constexpr const char* kSystemActor = "allotd";

// The most joins one join token may allow (`allot host join-token --uses`).
inline constexpr int kMaxJoinTokenUses = 10'000;

// How hosts are checked and handed over (allotd.toml [health], [handover]; docs/hosts.md).
struct HostLifecycleOptions {
  // A newly joined host is health-checked (commissioning) before it takes work; false: it is
  // available as soon as it joins.
  bool commission = true;
  std::string commissionProfile;  // a hook run while commissioning; "" = none
  // Handovers run the new owner's profile: teamProfiles[team], else defaultProfile ("" = none).
  std::string defaultProfile;
  std::map<std::string, std::string> teamProfiles;
  // The storage policy: team home data on the host is local and removed at every handover.
  bool wipeHome = true;
  int64_t taskTimeoutMs = 30 * 60'000;  // a handover's or commissioning's hook
  // Health checks: what every check requires besides the GPUs the host was commissioned with.
  std::string minDriver;
  int64_t minFreeDiskMib = 1024;
  bool burnIn = true;  // on commissioning, reprovisioning and handovers (never periodic)
  int64_t burnInMs = 3000;
  int64_t healthIntervalMs = 10 * 60'000;  // periodic checks of available hosts; 0 = none
};

// Leases (allotd.toml [leases], docs/leases.md).
struct LeaseOptions {
  // true ("always"): a request within the limits below is approved as it is made; false
  // ("never"): every request waits for a platform admin.
  bool autoApprove = false;
  int maxHosts = 0;           // auto-approval only up to this many hosts; 0 = no limit
  int64_t maxDurationMs = 0;  // auto-approval only up to this long; 0 = no limit
  // Owners of jobs that a lease's start will preempt are told this long before it.
  int64_t noticeMs = 15 * 60'000;
  // A host is held (only work that ends before the lease starts may start there) from this long
  // before its lease starts; earlier, work without a max runtime may start and is preempted at
  // the start, with notice.
  int64_t holdHorizonMs = 24 * 3'600'000;
};

// What a lease request asks (POST /api/v1/leases): named hosts, or a count of hosts matching a
// GPU model and size.
struct LeaseRequest {
  std::string team;
  std::vector<std::string> hosts;
  int count = 0;
  std::string gpuModel;
  int minGpus = 0;
  TimeMs startAt = 0;
  TimeMs endAt = 0;
  std::string reason;
};

// The Unix ids allotd hands out (allotd.toml [identity], docs/access.md): a uid and a
// user-private gid equal to it for each user without one, from [uidMin, uidMax]; a gid for each
// team without one, from [gidMin, gidMax]. The ranges must not overlap each other nor the
// directory's (LDAP posixAccount) ids: a directory uid or gid inside them is refused.
struct UnixIdOptions {
  int64_t uidMin = 200'000;
  int64_t uidMax = 299'999;
  int64_t gidMin = 300'000;
  int64_t gidMax = 399'999;
};

// What one user or team may hold, and what a job that asks for nothing is counted as
// (allotd.toml [limits], docs/access.md "Limits"). 0 = no limit.
struct JobLimits {
  // Jobs queued or running at once (Slurm's MaxSubmitJobs): a submission beyond is refused.
  int maxActiveJobsPerUser = 1'000;
  int maxActiveJobsPerTeam = 5'000;
  // Bytes of commands and environments those jobs hold in allotd's memory and desired states.
  int64_t maxActiveJobBytesPerUser = 32LL << 20;
  int64_t maxActiveJobBytesPerTeam = 128LL << 20;
  // The scheduler counts a job asking no CPU or memory as asking this much, so that such jobs
  // cannot all pile onto one host; the job itself is not limited to it.
  int64_t cpuFloorMillis = 100;
  int64_t memoryFloorMib = 256;
};

struct ClusterOptions {
  int64_t heartbeatMs = 5'000;
  // An unreachable host's jobs are declared lost after this long.
  int64_t lostAfterMs = 5 * 60'000;
  int64_t cancelGraceMs = 10'000;
  // A preempted job gets SIGTERM, then SIGKILL after this long (Kubernetes' default is 30 s).
  int64_t preemptGraceMs = 30'000;
  // Half-life of the usage history that fair share weighs (Slurm's PriorityDecayHalfLife).
  int64_t usageHalfLifeMs = 24 * 3'600'000;
  sched::Policy scheduling;
  // Price of one GPU-hour by GPU model, for the cost column of usage reports; empty = no costs.
  std::map<std::string, double> pricePerGpuHour;
  // Allocated GPU time whose samples read under this utilisation counts as idle in reports.
  double idleBelowPct = 5;
  // The idle-allocation policy of teams and projects that set none (allotd.toml [idle]).
  model::IdlePolicy idleDefault;
  // Reprovisioning hooks by profile name (allotd.toml [hooks]); empty = reprovisioning refused.
  std::map<std::string, HookProfile> hookProfiles;
  HostLifecycleOptions lifecycle;
  ContourOptions contours;
  LeaseOptions leases;
  UnixIdOptions unixIds;
  // Sessions' `shared` storage: a directory mounted at this path on every host (NFS); each user
  // gets <dir>/<user>. "" = sessions cannot ask for shared storage.
  std::string sessionSharedDir;
  JobLimits limits;
  // Where idle-policy webhooks may point: URL prefixes, each ending in '/' after its host
  // (allotd.toml [idle] webhook_allow). Empty: no team may set a webhook.
  std::vector<std::string> webhookAllow;
  // The scheduling pass. Tests replace it to reach what no fleet can make it do: refuse.
  std::function<Result<sched::Decisions>(const sched::Snapshot&)> decide = sched::decide;
};

// Whether `url` starts with one of the allowed prefixes.
bool webhookAllowed(const std::vector<std::string>& allow, const std::string& url);

// Which events `GET /events` lists; empty fields match everything.
struct EventFilter {
  std::string team;
  int64_t jobId = 0;
  std::optional<model::EventKind> kind;
  TimeMs since = 0;  // at or after
  size_t limit = 100;
};

// A job flagged idle, as its owners and the usage report see it.
struct IdleAllocation {
  int64_t jobId = 0;
  std::string team;
  std::string project;
  std::string user;
  std::vector<std::string> hosts;  // rank order
  int gpus = 0;                    // on all hosts together
  TimeMs idleSince = 0;
  TimeMs notifiedAt = 0;
  TimeMs reclaimAt = 0;  // 0 = not to be reclaimed
  double thresholdPct = 0;
};

// What one idle check did: the events to announce (and send to webhooks once durable), and the
// jobs it evicted, whose eviction the caller confirms with evictionsDurable after the commit.
struct IdleCheck {
  std::vector<model::Event> events;
  std::vector<int64_t> reclaimed;
};

class Cluster {
 public:
  Cluster(const Clock& clock, LogStore& logs, ClusterOptions options);

  void load(const store::Contents& contents);

  // On first start: the platform admin "admin" and its token (returned once); nullopt if users
  // already exist.
  std::optional<Change<std::string>> bootstrapAdmin();

  std::optional<Principal> authenticate(std::string_view bearer) const;

  // Unix identities (cluster_unix_ids.cc, docs/access.md). At start, after load: gives a uid
  // (and gid) to every user and a gid to every team stored without one; nullopt when none lacks
  // one. New users and teams get theirs as they are created. Ids are never reused: the next of
  // each range is kept in the store (meta next_uid, next_gid).
  std::optional<Change<int>> assignMissingUnixIds();
  // For directory logins: a uid/gid from LDAP is refused (InvalidArgument) when it lies in one
  // of Allot's ranges or another user already holds it.
  Status checkDirectoryIds(const std::string& user, int64_t uid, int64_t gid) const;
  // The identity `job`'s workload runs as; nullopt when its submitter has none (the agent then
  // refuses the job rather than run it as root).
  std::optional<model::RunAs> runAsOf(const model::Job& job) const;
  // The accounts a host profile creates on a host going to `team` ("" = the shared pool): the
  // team's enabled members (every enabled user, for the pool) and platform admins, with ids.
  std::vector<model::UnixAccount> accountsFor(const std::string& team) const;

  // Teams, users, projects.
  Result<Change<model::Team>> createTeam(const Principal& p, const std::string& name);
  std::vector<model::Team> listTeams(const Principal& p) const;

  // Accounts, team membership and API tokens (cluster_identity.cc, docs/access.md). Platform
  // admins create humans; team-admins may also create service accounts of their own teams.
  Result<Change<CreatedUser>> createUser(const Principal& p, NewUser u);
  // One team and role, or a platform admin (role kPlatformAdmin, team optional): for tests and
  // tools that make simple accounts.
  Result<Change<CreatedUser>> createUser(const Principal& p, const std::string& name,
                                         const std::string& team, model::Role role);
  std::vector<model::User> listUsers(const Principal& p) const;
  Result<model::User> getUser(const Principal& p, const std::string& name) const;
  Result<Change<model::User>> updateUser(const Principal& p, const std::string& name,
                                         const UserUpdate& update);
  // Adds `user` to `team` with `role`, changes their role, or (nullopt) removes them. Platform
  // admins and the team's team-admins; a team-admin cannot make anyone a platform admin.
  Result<Change<model::User>> setMembership(const Principal& p, const std::string& team,
                                            const std::string& user,
                                            std::optional<model::Role> role);
  // The team's members and their roles, for anyone who may see the team.
  Result<std::vector<std::pair<model::User, model::Role>>> teamMembers(
      const Principal& p, const std::string& team) const;
  // Whether the host credential with public id `tokenId` still belongs to `host`: a reset or a
  // re-join deletes it. A map lookup, for every message of an open agent stream.
  bool hostCredentialLive(const std::string& tokenId, const std::string& host) const;
  // API tokens: one's own, or a service account's for those who manage it; others' are NotFound.
  Result<Change<CreatedToken>> createToken(const Principal& p, const NewToken& t);
  Result<std::vector<model::ApiToken>> listTokens(const Principal& p,
                                                  const std::string& user) const;
  Result<Change<model::ApiToken>> revokeToken(const Principal& p, const std::string& id);
  // SSH public keys (cluster_ssh_keys.cc): `user` "" means the caller. People manage their own;
  // platform admins anyone's; anyone else's keys are NotFound, as if the user did not exist.
  // `line` is one line of a .pub file (control/ssh_key.h says what is accepted).
  Result<Change<model::SshKey>> addSshKey(const Principal& p, const std::string& user,
                                          std::string_view line);
  // `fingerprint` with or without its "SHA256:" prefix.
  Result<Change<model::SshKey>> removeSshKey(const Principal& p, const std::string& user,
                                             const std::string& fingerprint);
  Result<std::vector<model::SshKey>> listSshKeys(const Principal& p, const std::string& user) const;
  // Logins (cluster_login.cc), after the API layer checked the password off the I/O thread.
  // A token for `user` of `kind` (kApi named "login", or kSession named "console"), valid for
  // `ttlMs` (0 = no expiry); the user's expired tokens go at the same time.
  Result<Change<CreatedToken>> issueLoginToken(const std::string& user, model::TokenKind kind,
                                               int64_t ttlMs);
  // Creates or updates the directory user (source ldap) with the teams its groups grant now;
  // teams Allot lacks are skipped. Refuses a local account of the same name and a user left with
  // no team.
  Result<Change<model::User>> syncDirectoryUser(const DirectoryLogin& login);
  // Deletes a token (a session that logged out or went idle), whoever owns it.
  Result<Change<model::ApiToken>> endSession(const std::string& tokenId);
  Result<Change<model::Project>> createProject(const Principal& p, const std::string& name,
                                               const std::string& team);
  std::vector<model::Project> listProjects(const Principal& p) const;

  // Quotas (cluster_quota.cc).
  Result<Change<model::Team>> setTeamQuota(const Principal& p, const std::string& team,
                                           const QuotaUpdate& update);
  Result<TeamQuotaView> teamQuota(const Principal& p, const std::string& team) const;
  Result<Change<model::Project>> setProjectQuota(const Principal& p, const std::string& team,
                                                 const std::string& project,
                                                 std::map<std::string, int> guaranteed);
  // The scheduling pass records where each team stands; teamQuota shows it.
  void setQuotaStatus(std::map<std::string, TeamQuotaStatus> status) {
    world_.quotaStatus = std::move(status);
  }

  // Hosts.
  // Join tokens (platform admins): each admits `uses` joins until it expires or is revoked.
  Result<Change<CreatedJoinToken>> createJoinToken(const Principal& p, int64_t ttlMs, int uses = 1);
  Result<std::vector<model::JoinToken>> listJoinTokens(const Principal& p) const;
  Result<Change<model::JoinToken>> revokeJoinToken(const Principal& p, const std::string& id);
  // Spends one use of the token; the use is in the change's batch, with the host and its new
  // credential. A name already joined is refused (AlreadyExists) unless a platform admin reset
  // that host's credential (resetHostCredential), so a join token cannot take over a host.
  Result<Change<JoinedHost>> joinHost(std::string_view joinSecret, const std::string& name,
                                      const model::Inventory& inventory);
  // Revokes every credential of the host (its agent's stream closes at its next message) and
  // lets the next join under its name take it over, keeping its name and history.
  Result<Change<model::Host>> resetHostCredential(const Principal& p, const std::string& host);
  std::vector<model::Host> listHosts(const Principal& p) const;
  Result<model::Host> getHost(const Principal& p, const std::string& name) const;
  // Who holds the host's GPUs, leaving out GPUs `p` may not see.
  std::vector<GpuAllocation> allocations(const Principal& p, const std::string& host) const;

  // Dedication and sharing (cluster_hosts.cc): admin settings that change where the scheduler
  // may place work; nothing is pushed to agents.
  Result<Change<model::Host>> dedicateHost(const Principal& p, const std::string& host,
                                           const std::string& team);
  // Moves a host to another contour (platform admins). Work running there stays until it ends;
  // new work comes only from the new contour.
  Result<Change<model::Host>> setHostContour(const Principal& p, const std::string& host,
                                             const std::string& contour);
  Result<Change<model::Host>> setGpu(const Principal& p, const std::string& host, int index,
                                     const GpuSettings& settings);

  // Host lifecycle (cluster_drain.cc, docs/hosts.md): platform admins change a host's admin
  // state; hosts `p` may not see are NotFound. Each transition is recorded (hostTransitions).
  // drainHost: no new placements; running work may finish until `deadlineMs` from now (0 = no
  // deadline), then is preempted. A host with nothing left on it is in maintenance.
  Result<Change<model::Host>> drainHost(const Principal& p, const std::string& host,
                                        int64_t deadlineMs, const std::string& reason);
  // Back to available from draining, maintenance or failed; a no-op on an available host.
  Result<Change<model::Host>> resumeHost(const Principal& p, const std::string& host);
  // failed or retired, set by hand for now: no new placements; running work is left alone.
  Result<Change<model::Host>> setHostAdminState(const Principal& p, const std::string& host,
                                                model::AdminState to, const std::string& reason);
  // Reprovisioning (cluster_reprovision.cc): a host in maintenance moves to reprovisioning and
  // its agent is told to run the profile's hook within `timeoutMs`; its result moves the host to
  // available (success) or failed, the hook's output kept with the transition. Refused
  // (FailedPrecondition) unless the host is in maintenance; an unknown profile is InvalidArgument.
  Result<Change<model::Host>> reprovisionHost(const Principal& p, const std::string& host,
                                              const std::string& profile, int64_t timeoutMs);
  // A host task's result from `host`'s agent (cluster_host_task.cc): success moves a
  // commissioning or reprovisioning host to available (to its new owner, for a handover);
  // failure leaves it failed, fenced, with the reason and output recorded. A periodic check that
  // fails fences an available host. A result for a task the host no longer waits for (resumed by
  // hand, or already answered) changes nothing.
  Change<int> agentTaskResult(const std::string& host, const model::HostTaskResult& result);
  // Output of the task `host` runs now, as its agent streams it: kept in memory for followers.
  void agentTaskOutput(const std::string& host, const model::TaskOutput& output);
  // The running task's output so far from `offset`, for `allot host log --follow`; NotFound for a
  // host `p` may not see. `running` is false once no task runs or is coming (a handover that
  // still drains has none yet: taskId 0).
  struct TaskOutputView {
    int64_t taskId = 0;
    bool running = false;
    int64_t offset = 0;  // of `data`
    std::string data;
  };
  Result<TaskOutputView> taskOutput(const Principal& p, const std::string& host,
                                    int64_t offset) const;

  // Handover (cluster_handover.cc, docs/hosts.md): the host goes to `team` ("" = the shared
  // pool) with nothing of its previous tenant left. Others' work is drained (preempted
  // `deadlineMs` from now; 0 = at once); once drained, the host is reprovisioning: wiped, given
  // its new owner's profile and health-checked; then it is available to its new owner. Platform
  // admins only; refused (FailedPrecondition) for a host that is failed, retired, or running a
  // task. assignHost with `gpus` dedicates those GPUs only, without a wipe (see the docs).
  Result<Change<model::Host>> assignHost(const Principal& p, const std::string& host,
                                         const std::string& team, const std::vector<int>& gpus,
                                         int64_t deadlineMs, const std::string& reason);
  // The same for allotd's own reasons (leases): recorded as by `by`.
  Result<Change<model::Host>> handOverHost(const std::string& host, const model::Handover& to,
                                           int64_t deadlineMs);
  // Rolling upgrades (cluster_upgrade.cc, docs/hosts.md): the hosts of `pool` ("shared", or a
  // team's hosts) go through a handover that keeps the owner and wipes nothing (drain, the
  // `profile` hook, a health check, back in service), at most `maxUnavailable` at a time; others'
  // work is preempted `drainDeadlineMs` after a host's drain (0: it may run to its end). The
  // first failure stops the upgrade, leaving hosts not started as they are. Platform admins only;
  // another team's pool is NotFound; a second running upgrade of a pool is FailedPrecondition.
  // Hosts failed, retired, unreachable or mid-handover are skipped and listed.
  Result<Change<model::Upgrade>> startUpgrade(const Principal& p, const std::string& pool,
                                              const std::string& profile, int maxUnavailable,
                                              int64_t drainDeadlineMs);
  // Upgrades of the shared pool and of the teams `p` may see, oldest first.
  std::vector<model::Upgrade> listUpgrades(const Principal& p) const;
  Result<model::Upgrade> getUpgrade(const Principal& p, int64_t id) const;
  // Periodic (every second, from the liveness loop): starts each running upgrade's next hosts
  // while fewer than its maxUnavailable are out, notices steps given up by hand, and ends
  // upgrades with nothing left. The value counts the upgrades that changed.
  Change<int> advanceUpgrades();
  // Periodic, beside enforceDrains: starts the health checks that are due (healthIntervalMs).
  Change<int> scheduleHealthChecks();
  // The host's transitions, oldest first; for anyone who may see the host.
  Result<std::vector<model::HostTransition>> hostTransitions(const Principal& p,
                                                             const std::string& host) const;
  // Periodic, beside enforceMaxRuntime: draining hosts with nothing left become maintenance, and
  // past their deadline their jobs are preempted. The value lists the jobs evicted, whose
  // eviction the caller confirms with evictionsDurable after the commit.
  Change<std::vector<int64_t>> enforceDrains();

  // Leases (cluster_leases.cc, docs/leases.md). Team-admins of the team and platform admins ask;
  // platform admins approve and reject (or the auto-approve policy does). A lease that conflicts
  // with an approved or active one is refused (FailedPrecondition) naming the conflict. Members
  // see their team's leases; another team's are NotFound.
  Result<Change<model::Lease>> createLease(const Principal& p, LeaseRequest request);
  std::vector<model::Lease> listLeases(const Principal& p) const;
  Result<model::Lease> getLease(const Principal& p, int64_t id) const;
  Result<Change<model::Lease>> approveLease(const Principal& p, int64_t id,
                                            const std::string& reason);
  Result<Change<model::Lease>> rejectLease(const Principal& p, int64_t id,
                                           const std::string& reason);
  // A later end for a requested, approved or active lease; refused on conflict.
  Result<Change<model::Lease>> extendLease(const Principal& p, int64_t id, TimeMs endAt);
  // Ends an active lease now (its hosts go back to the pool), or cancels one not started.
  Result<Change<model::Lease>> endLease(const Principal& p, int64_t id, const std::string& reason);
  // Periodic, before enforceDrains: starts leases whose start has come (handing their hosts to
  // the team), ends those whose end has (handing them back to the shared pool), and tells owners
  // of jobs a start will preempt. Starts missed while allotd was down happen at once.
  Change<int> enforceLeases();
  // The lease that has `host` now (active), else the next approved one; for host views.
  std::optional<model::Lease> hostLease(const std::string& host) const;

  // Session profiles (cluster_profiles.cc, docs/sessions.md). Names are unique cluster-wide.
  // Platform admins define platform-wide ones (team ""), team-admins their team's; a profile the
  // caller may not see is NotFound. Created and replaced whole; createdBy/createdAt are set here
  // (a replacement keeps the original's).
  Result<Change<model::Profile>> createProfile(const Principal& p, model::Profile profile);
  Result<Change<model::Profile>> replaceProfile(const Principal& p, const std::string& name,
                                                model::Profile profile);
  Result<Change<model::Profile>> deleteProfile(const Principal& p, const std::string& name);
  // The profiles `p` may use, by name.
  std::vector<model::Profile> listProfiles(const Principal& p) const;
  Result<model::Profile> getProfile(const Principal& p, const std::string& name) const;

  // Interactive sessions (cluster_sessions.cc, docs/sessions.md): jobs made from a profile. A
  // session is visible like any job of its team; only its owner and the users it is shared with
  // may open it (openSession), and another user is told it does not exist.
  Result<Change<model::Job>> createSession(const Principal& p, SessionRequest request);
  // The caller's own sessions, newest first; with `all`, every session they may see.
  std::vector<model::Job> listSessions(const Principal& p, bool all, bool live) const;
  Result<model::Job> getSession(const Principal& p, int64_t id) const;
  // The owner (or a team-admin, or a platform admin) stops it; it ends as cancelled.
  Result<Change<model::Job>> stopSession(const Principal& p, int64_t id);
  // Shares a session with `users` (replacing the list); the owner only.
  Result<Change<model::Job>> shareSession(const Principal& p, int64_t id,
                                          std::vector<std::string> users);
  // allotd's own view of a session's use: the proxy calls these for each request it forwards and
  // for each WebSocket it relays (open while `open`), which count as activity at once, before the
  // agent's next look at Jupyter.
  void sessionProxied(int64_t id);
  void sessionRelay(int64_t id, bool open);
  // What its agent last said about a running session; nullopt when nothing yet.
  std::optional<model::ActualSession> sessionRuntime(int64_t id) const;
  // The WebSockets and SSH connections allotd relays to the session now.
  int sessionRelays(int64_t id) const {
    auto it = sessionRelays_.find(id);
    return it == sessionRelays_.end() ? 0 : it->second;
  }
  // Where to reach a session for its owner (or a user it is shared with), either still in the
  // session's team: its host and, for Jupyter, the token to supply. NotFound for anyone else;
  // Unavailable while it starts. The proxy asks at every request.
  Result<SessionEndpoint> openSession(const Principal& p, int64_t id) const;
  // The same for an SSH connection: the owner's only (anyone else is told it does not exist),
  // and only where the session's host offers SSH.
  Result<SessionEndpoint> openSessionSsh(const Principal& p, int64_t id) const;

  // Jobs.
  Result<Change<model::Job>> submitJob(const Principal& p, JobRequest request);
  std::vector<model::Job> listJobs(const Principal& p, const JobFilter& filter) const;
  // The same jobs, newest first, handed to `fn` one at a time without copying the list; a queued
  // job comes with its current wait reason.
  void visitJobs(const Principal& p, const JobFilter& filter,
                 const std::function<void(const model::Job&)>& fn) const;
  Result<model::Job> getJob(const Principal& p, int64_t id) const;
  // Queue position (1 = next) and why a queued job waits, from the last scheduling pass.
  std::optional<sched::Wait> waitOf(int64_t id) const;
  std::string waitReason(const model::Job& job) const;
  // Why a job waits or went where it went, as the last pass decided (see `explain` in the API).
  Result<nlohmann::json> explainJob(const Principal& p, int64_t id) const;
  Result<Change<model::Job>> cancelJob(const Principal& p, int64_t id);

  // Accounting (cluster_ledger.cc): allocated GPU time from the ledger. Members see only their
  // own team (naming another team is NotFound); platform admins see every team, or the one named.
  Result<std::vector<UsageRow>> usage(const Principal& p, UsageQuery q) const;
  // The same over time (control/usage_series.h), under the same visibility.
  Result<std::vector<SeriesRow>> usageSeries(const Principal& p, SeriesQuery q) const;
  // After load: jobs holding GPUs with no open ledger entry (placed before the ledger existed,
  // schema < 3) get their open entries now, from when they were placed. The value counts them.
  Change<int> adoptUnledgeredJobs();
  // Measured use (cluster_ledger.cc). At start: each allocation's running totals, as the
  // telemetry store kept them. Then: where reports read the use inside part of an interval.
  void loadUsageTotals(const std::vector<std::pair<int64_t, telemetry::UsageCell>>& totals);
  void setUsageHistory(UsageWithin history) { history_ = std::move(history); }
  // Samples, rollups and attributed use since the last call, for the telemetry store.
  telemetry::TelemetryBatch drainTelemetry() { return usage_.drain(); }

  // Scheduling: one pass over the queue; the value lists the jobs placed. Their agents hear of
  // them only after `placementsDurable` (a placement lost in a crash must never have run).
  // Victims of preemption are marked evicting and their agents told to stop them.
  Change<std::vector<int64_t>> schedulePass();
  // Fair share's memory: advances each team's decayed GPU-seconds by what it holds now (called
  // every second by the liveness loop, and before each pass). Written to the store at most once a
  // minute per team: losing under a minute of history in a crash changes no one's share much.
  Change<int> accountUsage(bool persist = true);
  void placementsDurable(const std::vector<int64_t>& jobs);

  // Agents.
  Change<int> agentConnected(const std::string& host, AgentLink* link,
                             const model::Inventory& inventory,
                             const std::vector<model::ActualJob>& jobs);
  Change<int> agentStatus(const std::string& host, const std::vector<model::ActualJob>& jobs);
  Status agentLog(const std::string& host, const model::LogChunk& chunk);
  // A sample round from `host`'s agent: kept as each GPU's latest readings, and attributed to the
  // allocations holding the GPUs (see telemetry/attribution.h). Rejected whole
  // (InvalidArgument/PermissionDenied, nothing kept) when it names another host or a GPU index
  // the host does not have.
  Status agentTelemetry(const std::string& host, const model::Telemetry& telemetry);
  void agentDisconnected(const std::string& host, AgentLink* link);
  // Periodic: hosts silent too long become unreachable; jobs of hosts unreachable too long are
  // lost and their GPUs freed.
  Change<int> checkLiveness();
  // Periodic, beside checkLiveness: running jobs past their max runtime are cancelled through the
  // cancel path (the agent stops them with the usual grace). The value counts them.
  Change<int> enforceMaxRuntime();
  // Idle allocations (cluster_idle.cc). Policies: GET for the team's members and platform admins,
  // set by platform admins and the team's team-admins; `project` "" means the team's own.
  Result<EffectiveIdlePolicy> idlePolicy(const Principal& p, const std::string& team,
                                         const std::string& project) const;
  Result<Change<EffectiveIdlePolicy>> setIdlePolicy(const Principal& p, const std::string& team,
                                                    const std::string& project,
                                                    const IdlePolicyUpdate& update);
  // The project inherits its team's policy again.
  Result<Change<EffectiveIdlePolicy>> clearProjectIdlePolicy(const Principal& p,
                                                             const std::string& team,
                                                             const std::string& project);
  EffectiveIdlePolicy effectiveIdlePolicyOf(const std::string& team,
                                            const std::string& project) const;
  // Periodic, beside enforceMaxRuntime: flags jobs whose GPUs all stayed under their policy's
  // threshold for its duration, clears them when busy again, reclaims after the grace.
  Change<IdleCheck> checkIdleAllocations();
  // The jobs' evictions are durable: their agents may now be told to stop them.
  void evictionsDurable(const std::vector<int64_t>& jobs);
  // The job's idle flag, when it is flagged now.
  std::optional<IdleAllocation> idleFlag(int64_t jobId) const;
  // Flagged jobs `p` may see; `team` "" = every team it may see (another team: NotFound).
  Result<std::vector<IdleAllocation>> idleAllocations(const Principal& p,
                                                      const std::string& team) const;
  // Recent events, oldest first, the newest `limit` of those matching; members see their own
  // team's (naming another team is NotFound).
  Result<std::vector<model::Event>> events(const Principal& p, const EventFilter& f) const;

  // Sends each named host's agent its desired state, if connected.
  void push(const std::set<std::string>& hosts);
  std::string desiredMessage(const std::string& host);

  // Wakes the scheduling loop; set by the Server.
  void setOnQueueChanged(std::function<void()> fn) { onQueueChanged_ = std::move(fn); }

  const World& world() const { return world_; }
  const ClusterOptions& options() const { return options_; }

 private:
  // Takes `u` off the share lists of live sessions of teams it is no longer in: a share ends
  // with the membership it was made under.
  void endSharesOutsideTeams(const model::User& u, store::WriteBatch& batch);
  // The team a usage report covers, under the visibility usage() describes: the one named, else
  // the caller's only team, "" for all (platform admins). nullopt: the caller has no team, so the
  // report is empty. Also checks that from is before to.
  Result<std::optional<std::string>> usageTeam(const Principal& p, const std::string& team,
                                               TimeMs from, TimeMs to) const;
  // The measured use within a span: telemetry.db's tiers plus what is not written there yet.
  UsageWithin measuredUsage() const;
  std::string newSecretId(const char* kind);
  // Gives `tok` (owner, name, kind and times set) an id of `idKind` and a fresh secret, keeps its
  // hash in memory and in `batch`, and returns it with the secret, which exists nowhere else.
  CreatedToken mintToken(model::ApiToken tok, const char* idKind, store::WriteBatch& batch);
  // Deletes every credential of the host, in `batch` and in memory.
  void revokeHostCredentials(const std::string& host, store::WriteBatch& batch);
  // Give `u` / `t` ids from the ranges when they have none, recording the next free ids.
  Status assignUnixIds(model::User& u, store::WriteBatch& batch);
  Status assignTeamGid(model::Team& t, store::WriteBatch& batch);
  // Changes a job in memory and records the write; keeps indexes right.
  void updateJob(model::Job& job, const model::Job& before, store::WriteBatch& batch);
  void applyActual(const std::string& host, const model::ActualJob& actual,
                   store::WriteBatch& batch, std::set<std::string>& push);
  // A report about one rank of a gang (a job with ranks) on `host`.
  void applyRankActual(model::Job& job, const std::string& host, const model::ActualJob& actual,
                       store::WriteBatch& batch, std::set<std::string>& push);
  // The ledger side of a job change: an open entry per rank when it starts holding GPUs, a close
  // entry for each when it stops (cluster_ledger.cc).
  void recordLedger(const model::Job& before, const model::Job& after, store::WriteBatch& batch);
  // A correction: the given intervals on `host` ended at `end` (when it was last seen).
  void correctLedgerEnd(int64_t jobId, const std::vector<int64_t>& openSeqs,
                        const std::string& host, TimeMs end, const std::string& why,
                        store::WriteBatch& batch);
  void finishJob(model::Job& job, model::JobState state, std::string reason,
                 store::WriteBatch& batch);
  // A preempted job has stopped: back to the queue if preemptible, otherwise ended.
  void preemptedJobStopped(model::Job& job, const std::string& how, store::WriteBatch& batch);
  sched::Snapshot snapshot() const;
  // Idle detection: brings the track of a running job up to date at `now` (cluster_idle.cc).
  IdleTrack& trackIdle(const model::Job& j, TimeMs now);
  // The rule a running job is judged idle by: its team's or project's policy, or for a session its
  // profile's (cluster_idle.cc).
  model::IdlePolicy idlePolicyFor(const model::Job& j) const;
  void noteTelemetry(const std::string& host);
  model::Event& addEvent(model::EventKind kind, const model::Job& j, std::string message,
                         const nlohmann::json& details, store::WriteBatch& batch);
  // Numbers, stamps and keeps an event, and writes it.
  model::Event& appendEvent(model::Event e, store::WriteBatch& batch);
  // Leases (cluster_leases.cc).
  Status leaseConflict(const std::vector<std::string>& hosts, TimeMs start, TimeMs end,
                       int64_t except) const;
  Result<std::vector<std::string>> pickLeaseHosts(const model::Lease& l) const;
  void leaseEvent(const model::Lease& l, std::string message, store::WriteBatch& batch);
  void startLease(model::Lease& l, Change<int>& c);
  // Begins the handover to the lease's team of each host not claimed or skipped yet; a host busy
  // with another handover is tried again on the next call.
  void claimLeaseHosts(model::Lease& l, Change<int>& c);
  void returnLeaseHosts(model::Lease& l, Change<int>& c);
  void noticeLease(model::Lease& l, Change<int>& c);
  void evict(const sched::Eviction& e, Change<std::vector<int64_t>>& c);
  // A pass whose snapshot the scheduler refused: every queued job waits, admins hear.
  void refuseSnapshot(const std::string& error, store::WriteBatch& batch);
  // Moves `h` to `to`, recording who and why, and writes both.
  // `output` is what ran for the transition (a hook's stdout and stderr).
  void transitionHost(model::Host& h, model::AdminState to, const std::string& by,
                      const std::string& reason, store::WriteBatch& batch,
                      const std::string& output = "");
  // Host tasks (cluster_host_task.cc). The health step every full check runs: the GPUs the host
  // was commissioned with, the driver, free disk, and the burn-in when `burnIn`.
  model::HealthStep healthStep(const model::Host& h, bool burnIn) const;
  // Gives `h` its next task (numbered) and writes it; the caller pushes the host.
  void startTask(model::Host& h, model::HostTask task, store::WriteBatch& batch);
  // A host that just reached maintenance with a handover pending starts its handover task.
  void continueHandover(model::Host& h, store::WriteBatch& batch, std::set<std::string>& push);
  // Rolling upgrades (cluster_upgrade.cc). One upgrade's advance; true when it changed.
  bool advanceUpgrade(model::Upgrade& u, store::WriteBatch& batch, std::set<std::string>& push);
  void stopUpgrade(model::Upgrade& u, const std::string& host, const std::string& why);
  // A host's upgrade step ended with its task's result (agentTaskResult).
  void upgradeStepDone(int64_t upgradeId, const std::string& host, bool ok,
                       const std::string& reason, store::WriteBatch& batch,
                       std::set<std::string>& push);
  // The hook a handover to `team` runs: `profile` when named, else the team's or the default
  // profile, if one is configured.
  std::optional<model::HookSpec> handoverHook(const std::string& team,
                                              const std::string& profile = "") const;

  // The per-user and per-team limits on jobs queued or running (options_.limits), for a new job
  // whose command and environment take `bytes`.
  Status checkJobLimits(const std::string& user, const std::string& team, int64_t bytes) const;

  const Clock& clock_;
  LogStore& logs_;
  ClusterOptions options_;
  World world_;
  std::map<std::string, AgentLink*> links_;
  // A flapping agent (issue 18): a link that comes back does not end the host's outage until it
  // has stayed up for kStableLinkHeartbeats heartbeats; until then awaySince keeps the outage's
  // start, and checkLiveness counts the host as unreachable since then. A single gap as long as
  // --lost-after is an outage of its own (its jobs were lost in it), not flapping.
  struct LinkHistory {
    TimeMs connectedAt = 0;
    TimeMs disconnectedAt = 0;  // the last time the link went away
    TimeMs awaySince = 0;       // 0: the last outage ended
    bool flapped = false;       // a link of this outage dropped before it was stable
  };
  static constexpr int kStableLinkHeartbeats = 3;
  std::map<std::string, LinkHistory> linkHistory_;
  // Hosts whose last desired state deferred some job's spec: pushed again as jobs start there.
  std::set<std::string> deferredHosts_;
  std::function<void()> onQueueChanged_;
  std::set<int64_t> placementsInFlight_;            // placed in memory, not yet on disk
  std::map<std::string, TimeMs> usagePersistedAt_;  // by team
  std::set<int64_t> evictionsInFlight_;             // marked evicting in memory, not yet on disk
  telemetry::UsageAttributor usage_;                // samples -> allocations, until drained
  UsageWithin history_;                             // the telemetry store's tiers; empty in tests
  std::map<int64_t, IdleTrack> idle_;               // running jobs, by id
  // The running task's output by host, as streamed; dropped when its result arrives (the
  // record keeps the whole output then).
  std::map<std::string, TaskOutputView> taskOutputs_;
  TimeMs idleEpoch_ = 0;  // allotd's start: no job counts as idle from before it
  // Running sessions as their agents last reported them (tokens included): memory only, filled
  // again by each agent's hello after a restart of allotd.
  std::map<int64_t, model::ActualSession> sessionRuntime_;
  std::map<int64_t, TimeMs> sessionProxiedAt_;  // the last request the proxy forwarded
  // User -> hosts that hold their sessions' `local` storage (they ran a local session there):
  // the scheduler places their next local session on one of them when it can.
  std::map<std::string, std::set<std::string>> localHomes_;
  void noteLocalHome(const model::Job& j) {
    if (j.session && j.session->storage == "local" && !j.host.empty() && j.startedAt > 0)
      localHomes_[j.user].insert(j.host);
  }
  std::map<int64_t, int> sessionRelays_;  // WebSockets and SSH connections relayed now
};

// The message for a request that names no team when the caller's team is not implied: they have
// none, or several.
std::string teamRequired(const Principal& p);

// Names people type: 1-63 characters of [a-z0-9._-], starting with a letter or digit.
Status validateName(const std::string& value, const char* field);
// GPU model names as NVML reports them ("A100", "NVIDIA H100 80GB HBM3"): 1-128 printable ASCII
// characters without ',' or '=' (the CLI's list separators), no space at either end, and not
// "any", which stands for every model.
Status validateGpuModel(const std::string& value, const std::string& field);

}  // namespace allot::control
