#pragma once
// IdleService: allocated GPUs that sit idle (docs/accounting.md, "Idle allocations"). Per-team
// and per-project policies over a platform default; detection from the GPUs' live telemetry (and,
// for sessions, from Jupyter's activity and the connections allotd relays); events that tell the
// owners; and reclaiming after a grace through the preemption path (a session is stopped as by
// `allot session stop`).
//
// Detection keeps, per running job, the last moment it was busy: any of its GPUs (every rank of a
// gang) at or above the threshold, or without a current reading (no news is not idleness). It is
// brought up to date on each telemetry round of the job's hosts and on each periodic check, so a
// host that goes silent makes its jobs busy rather than idle. Utilisation is GPU-wide: jobs
// sharing a GPU (fractions) see the GPU's utilisation, not their own.
//
// Owns: the tracks of running jobs (memory only: allotd's start counts as busy), and the idle
// policies of the directory's teams and projects. Reaches the jobs side through JobPreemption
// and SessionJobs, reads sessions' activity from the SessionService, writes events to the
// EventLog. Threading: allotd's I/O thread.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "control/change.h"
#include "control/events/event_log.h"
#include "control/hosts/host_service.h"
#include "control/idle_policy.h"
#include "control/principal.h"
#include "control/sessions/session_service.h"
#include "control/world.h"
#include "model/model.h"

namespace allot::control {

class IdleService {
 public:
  struct Deps {
    const Clock& clock;
    World& world;
    EventLog& events;
    const SessionService& sessions;
    SessionJobs& jobs;          // a culled session is stopped through the jobs side
    JobPreemption& preemption;  // a reclaimed job goes through the preemption path
  };
  struct Options {
    model::IdlePolicy platformDefault;  // for teams and projects that set none
    // Where idle-policy webhooks may point (allotd.toml [idle] webhook_allow).
    std::vector<std::string> webhookAllow;
  };
  IdleService(Deps deps, Options options)
      : clock_(deps.clock),
        world_(deps.world),
        events_(deps.events),
        sessions_(deps.sessions),
        jobs_(deps.jobs),
        preemption_(deps.preemption),
        options_(std::move(options)),
        epoch_(clock_.nowMs()) {}

  // allotd (re)started now: no job counts as idle from before it.
  void restarted() { epoch_ = clock_.nowMs(); }
  // A telemetry round from `host` was taken in: the tracks of its jobs are brought up to date.
  void samplesArrived(const std::string& host);

  // Policies: GET for the team's members and platform admins,
  // set by platform admins and the team's team-admins; `project` "" means the team's own.
  Result<EffectiveIdlePolicy> policy(const Principal& p, const std::string& team,
                                     const std::string& project) const;
  Result<Change<EffectiveIdlePolicy>> setPolicy(const Principal& p, const std::string& team,
                                                const std::string& project,
                                                const IdlePolicyUpdate& update);
  // The project inherits its team's policy again.
  Result<Change<EffectiveIdlePolicy>> clearProjectPolicy(const Principal& p,
                                                         const std::string& team,
                                                         const std::string& project);
  EffectiveIdlePolicy effectivePolicyOf(const std::string& team, const std::string& project) const;
  // Periodic, beside enforceMaxRuntime: flags jobs whose GPUs all stayed under their policy's
  // threshold for its duration, clears them when busy again, reclaims after the grace.
  Change<IdleCheck> check();
  // The job's idle flag, when it is flagged now.
  std::optional<IdleAllocation> flag(int64_t jobId) const;
  // Flagged jobs `p` may see; `team` "" = every team it may see (another team: NotFound).
  Result<std::vector<IdleAllocation>> flagged(const Principal& p, const std::string& team) const;

 private:
  // Brings the track of a running job up to date at `now`.
  IdleTrack& track(const model::Job& j, TimeMs now);
  // The rule a running job is judged idle by: its team's or project's policy, or for a session
  // its profile's.
  model::IdlePolicy policyFor(const model::Job& j) const;

  const Clock& clock_;
  World& world_;
  EventLog& events_;
  const SessionService& sessions_;
  SessionJobs& jobs_;
  JobPreemption& preemption_;
  Options options_;
  std::map<int64_t, IdleTrack> tracks_;  // running jobs, by id
  TimeMs epoch_ = 0;                     // allotd's start
};

}  // namespace allot::control
