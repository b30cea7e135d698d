#pragma once
// HostService: the hosts of the fleet as admins run them (docs/hosts.md). Joins and host
// credentials, who sees which host, dedication and sharing, the admin-state lifecycle (drain,
// maintenance, resume, fail, retire) with every transition recorded, host tasks (commissioning,
// reprovisioning, periodic health checks) and their results, handovers between teams, and rolling
// upgrades of a pool.
//
// Owns: the hosts' admin side in the World (admin states, tasks, handovers, dedications), join
// tokens, host transitions and upgrades; the agents side of Cluster owns the hosts' live state
// (reachability, inventory). Reaches the jobs side through JobPreemption (a drain past its
// deadline, a handover), the access service for host credentials and the accounts a hook creates,
// and the scheduler through `queueChanged` (what may run where changed). Implements HostHandover
// for the lease service. Threading: allotd's I/O thread.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "control/access/access_service.h"
#include "control/change.h"
#include "control/cluster_options.h"
#include "control/disruption.h"
#include "control/hosts/host_handover.h"
#include "control/principal.h"
#include "control/world.h"
#include "model/model.h"
#include "sched/fleet.h"

namespace allot::control {

// Admin settings of one GPU; a field left empty keeps its value.
struct GpuSettings {
  std::optional<std::string> dedicatedTo;  // "" = not dedicated
  std::optional<bool> shared;
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

// The most joins one join token may allow (`allot host join-token --uses`).
inline constexpr int kMaxJoinTokenUses = 10'000;

// What the hosts service needs of the jobs side: preempting a job (marked evicting, its agents
// told to stop it once durable; the caller confirms with evictionsDurable after the commit).
class JobPreemption {
 public:
  virtual ~JobPreemption() = default;
  virtual void evict(const sched::Eviction& e, Change<std::vector<int64_t>>& c) = 0;
};

class HostService : public HostHandover {
 public:
  struct Deps {
    const Clock& clock;
    World& world;
    AccessService& access;
    JobPreemption& jobs;
    std::function<void()> queueChanged;  // wakes the scheduling loop
  };
  struct Options {
    HostLifecycleOptions lifecycle;
    std::map<std::string, HookProfile> hookProfiles;
    ContourOptions contours;
  };
  HostService(Deps deps, Options options)
      : clock_(deps.clock),
        world_(deps.world),
        access_(deps.access),
        jobs_(deps.jobs),
        queueChanged_(std::move(deps.queueChanged)),
        options_(std::move(options)) {}

  // Joins and host views (joins.cc). Join tokens (platform admins): each admits `uses` joins until
  // it expires or is revoked.
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

  // Dedication and sharing (dedication.cc): admin settings that change where the scheduler
  // may place work; nothing is pushed to agents.
  Result<Change<model::Host>> dedicateHost(const Principal& p, const std::string& host,
                                           const std::string& team);
  // Moves a host to another contour (platform admins). Work running there stays until it ends;
  // new work comes only from the new contour.
  Result<Change<model::Host>> setHostContour(const Principal& p, const std::string& host,
                                             const std::string& contour);
  Result<Change<model::Host>> setGpu(const Principal& p, const std::string& host, int index,
                                     const GpuSettings& settings);

  // Host lifecycle (drain.cc, docs/hosts.md): platform admins change a host's admin
  // state; hosts `p` may not see are NotFound. Each transition is recorded (hostTransitions).
  // drainHost: no new placements; running work may finish until `deadlineMs` from now (0 = no
  // deadline), then is preempted. A host with nothing left on it is in maintenance.
  Result<Change<model::Host>> drainHost(const Principal& p, const std::string& host,
                                        int64_t deadlineMs, const std::string& reason);
  // What draining with `deadlineMs` would stop, changing nothing: the work still on the host at
  // the deadline (none without one: it may finish). Platform admins.
  Result<std::vector<StoppedJob>> drainImpact(const Principal& p, const std::string& host,
                                              int64_t deadlineMs, TimeMs* stopsAt) const;
  // Back to available from draining, maintenance or failed; a no-op on an available host.
  Result<Change<model::Host>> resumeHost(const Principal& p, const std::string& host);
  // failed or retired, set by hand for now: no new placements; running work is left alone.
  Result<Change<model::Host>> setHostAdminState(const Principal& p, const std::string& host,
                                                model::AdminState to, const std::string& reason);
  // Reprovisioning (reprovision.cc): a host in maintenance moves to reprovisioning and
  // its agent is told to run the profile's hook within `timeoutMs`; its result moves the host to
  // available (success) or failed, the hook's output kept with the transition. Refused
  // (FailedPrecondition) unless the host is in maintenance; an unknown profile is InvalidArgument.
  Result<Change<model::Host>> reprovisionHost(const Principal& p, const std::string& host,
                                              const std::string& profile, int64_t timeoutMs);
  // A host task's result from `host`'s agent (host_tasks.cc): success moves a
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

  // Handover (handover.cc, docs/hosts.md): the host goes to `team` ("" = the shared
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
                                           int64_t deadlineMs) override;
  // Rolling upgrades (upgrades.cc, docs/hosts.md): the hosts of `pool` ("shared", or a
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

  // For the agents side, which commissions a newly joined host and fences one whose hello claims
  // more than it was commissioned with (host_tasks.cc, drain.cc).
  // Moves `h` to `to`, recording who and why, and writes both.
  // `output` is what ran for the transition (a hook's stdout and stderr).
  void transitionHost(model::Host& h, model::AdminState to, const std::string& by,
                      const std::string& reason, store::WriteBatch& batch,
                      const std::string& output = "");
  // Host tasks (host_tasks.cc). The health step every full check runs: the GPUs the host
  // was commissioned with, the driver, free disk, and the burn-in when `burnIn`.
  model::HealthStep healthStep(const model::Host& h, bool burnIn) const;
  // Gives `h` its next task (numbered) and writes it; the caller pushes the host.
  void startTask(model::Host& h, model::HostTask task, store::WriteBatch& batch);

 private:
  // A host that just reached maintenance with a handover pending starts its handover task.
  void continueHandover(model::Host& h, store::WriteBatch& batch, std::set<std::string>& push);
  // Rolling upgrades (upgrades.cc). One upgrade's advance; true when it changed.
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

  const Clock& clock_;
  World& world_;
  AccessService& access_;
  JobPreemption& jobs_;
  std::function<void()> queueChanged_;
  Options options_;
  // The running task's output by host, as streamed; dropped when its result arrives (the
  // record keeps the whole output then).
  std::map<std::string, TaskOutputView> taskOutputs_;
};

}  // namespace allot::control
