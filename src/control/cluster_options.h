#pragma once
// ClusterOptions: what allotd.toml and allotd's flags set for the control plane, gathered by
// allotd_main and handed to Cluster, which gives each service its slice.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "control/contours.h"
#include "control/leases/lease_types.h"
#include "model/model.h"
#include "sched/fleet.h"

namespace allot::control {

// A reprovisioning profile (allotd.toml [hooks.profiles.NAME]): what the host's agent runs.
struct HookProfile {
  std::string kind;  // "playbook" (ansible-playbook, connection local) or "script"
  std::string path;  // on the host
};

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

// The scheduler's decision on a snapshot: touches nothing else, so it runs on any thread.
using SchedulerFn = std::function<Result<sched::Decisions>(const sched::Snapshot&)>;

struct ClusterOptions {
  // Seals what allotd must read back (teams' registry passwords; common/sealed_box.h):
  // allotd's <data-dir>/seal.key. "" = a random key for this process (tests).
  std::string sealKey;
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
  // allotd.toml [access] team_admins_create_users: team-admins may create human accounts in the
  // teams they manage (docs/access.md); off, only platform admins create people.
  bool teamAdminsCreateUsers = false;
  // Sessions' `shared` storage: a directory mounted at this path on every host (NFS); each user
  // gets <dir>/<user>. "" = sessions cannot ask for shared storage.
  std::string sessionSharedDir;
  JobLimits limits;
  // Where idle-policy webhooks may point: URL prefixes, each ending in '/' after its host
  // (allotd.toml [idle] webhook_allow). Empty: no team may set a webhook.
  std::vector<std::string> webhookAllow;
  // The scheduling pass. Tests replace it to reach what no fleet can make it do: refuse. It may
  // run on a thread of its own (Cluster::decider), one call at a time.
  SchedulerFn decide = sched::decide;
};

}  // namespace allot::control
