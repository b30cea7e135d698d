#pragma once
// Cluster: the control plane. It builds the services (access, hosts, leases, quotas, sessions and
// profiles, idle, accounting, the event log; docs/architecture.md, "The control plane's
// services"), wires them together, and keeps the jobs side itself: submissions, cancels, the
// scheduling pass, the agents' links, reports and desired states, liveness. Like every service,
// each operation checks its caller and input first (a refused request changes nothing), then
// changes the in-memory World and returns a Change: the value to show, the WriteBatch that makes
// it durable and the hosts whose agents must hear about it. The caller commits the batch, waits
// until it is durable, then replies and pushes (see Server). Batches commit in order, so memory
// may run ahead of the disk only by writes that are not yet acknowledged to anyone.
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
#include "control/access/access_service.h"
#include "control/accounting/accounting_service.h"
#include "control/change.h"
#include "control/cluster_options.h"
#include "control/contours.h"
#include "control/events/event_log.h"
#include "control/hosts/host_service.h"
#include "control/idle/idle_service.h"
#include "control/idle_policy.h"
#include "control/images/image_cache_service.h"
#include "control/images/registry_logins.h"
#include "control/job_request.h"
#include "control/leases/lease_service.h"
#include "control/log_store.h"
#include "control/names.h"
#include "control/principal.h"
#include "control/quota/quota_service.h"
#include "control/sessions/profile_service.h"
#include "control/sessions/session_service.h"
#include "control/world.h"
#include "model/agent_protocol.h"
#include "sched/fleet.h"
#include "store/store.h"
#include "telemetry/attribution.h"

namespace allot::control {

struct JobFilter {
  std::set<model::JobState> states;  // any of these; empty = any state
  std::string team;
  std::string user;           // only this user's; empty = anyone's the caller may see
  TimeMs submittedSince = 0;  // 0: no lower bound
  TimeMs submittedUntil = 0;  // 0: no upper bound (exclusive)
  size_t limit = 1000;
};

// What a scheduling pass changed: the jobs it placed, and how many of its decisions it dropped
// because the world changed under them while it decided (they are decided again).
struct FinishedPass {
  std::vector<int64_t> placed;
  std::vector<int64_t> evicted;  // agents hear of them once durable: evictionsDurable
  int stale = 0;
};

// The agent side of a connected host: where to send its desired state.
class AgentLink {
 public:
  virtual ~AgentLink() = default;
  virtual void send(std::string message) = 0;
};

class Cluster : public SessionJobs, private JobPreemption {
 public:
  Cluster(const Clock& clock, LogStore& logs, ClusterOptions options);

  void load(const store::Contents& contents);

  // Jobs.
  Result<Change<model::Job>> submitJob(const Principal& p, JobRequest request) override;
  std::vector<model::Job> listJobs(const Principal& p, const JobFilter& filter) const;
  // The same jobs, newest first, handed to `fn` one at a time without copying the list; a queued
  // job comes with its current wait reason.
  void visitJobs(const Principal& p, const JobFilter& filter,
                 const std::function<void(const model::Job&)>& fn) const;
  Result<model::Job> getJob(const Principal& p, int64_t id) const;
  // Queue position (1 = next) and why a queued job waits, from the last scheduling pass.
  std::optional<sched::Wait> waitOf(int64_t id) const;
  // A job whose host is pulling its image: bytes fetched and in all (0 = not known yet), as its
  // agent last said; nullopt when none is being pulled for it. Kept in memory only.
  struct PullProgress {
    int64_t bytes = 0;
    int64_t total = 0;
  };
  std::optional<PullProgress> pullOf(int64_t id) const;
  std::string waitReason(const model::Job& job) const override;
  // Why a job waits or went where it went, as the last pass decided (see `explain` in the API).
  Result<nlohmann::json> explainJob(const Principal& p, int64_t id) const;
  Result<Change<model::Job>> cancelJob(const Principal& p, int64_t id) override;
  // Job controls (cluster_job_controls.cc), for whoever may cancel the job. hold: a queued job
  // stays queued but is not scheduled; release: it may be again. requeue: a placed job is
  // stopped and put back in the queue, keeping its id (its agent is told once the change is
  // durable: evictionsDurable).
  Result<Change<model::Job>> holdJob(const Principal& p, int64_t id);
  Result<Change<model::Job>> releaseJob(const Principal& p, int64_t id);
  Result<Change<model::Job>> requeueJob(const Principal& p, int64_t id);

  // Scheduling: one pass over the queue; the value lists the jobs placed and evicted. Their
  // agents hear of them only after `passDurable` (a placement lost in a crash must never have
  // run, nor an eviction lost in one have stopped work the restarted allotd thinks runs).
  Change<FinishedPass> schedulePass();
  // The same pass in three steps, so that the decision can run off the I/O thread while the world
  // moves on (api/server.cc): beginPass() ends queued jobs whose dependencies can never hold (its
  // batch) and takes the snapshot, nullopt when nothing is queued; decider() decides on it on any
  // thread; finishPass() applies what still holds of the decisions to the world as it is by then.
  Change<std::optional<sched::Snapshot>> beginPass();
  SchedulerFn decider() const;
  Change<FinishedPass> finishPass(const sched::Snapshot& snapshot,
                                  Result<sched::Decisions> decisions);
  // Fair share's memory: advances each team's decayed GPU-seconds by what it holds now (called
  // every second by the liveness loop, and before each pass). Written to the store at most once a
  // minute per team: losing under a minute of history in a crash changes no one's share much.
  Change<int> accountUsage(bool persist = true);
  void passDurable(const FinishedPass& pass);

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
  // The jobs' evictions are durable: their agents may now be told to stop them.
  void evictionsDurable(const std::vector<int64_t>& jobs);

  // Sends each named host's agent its desired state, if connected.
  void push(const std::set<std::string>& hosts);
  std::string desiredMessage(const std::string& host);

  // Wakes the scheduling loop; set by the Server.
  void setOnQueueChanged(std::function<void()> fn) { onQueueChanged_ = std::move(fn); }

  // The services carved out of Cluster so far (docs/architecture.md): routes and controllers
  // reach them directly.
  AccountingService& accounting() { return accounting_; }
  HostService& hosts() { return hosts_; }
  AccessService& access() { return access_; }
  const AccessService& access() const { return access_; }
  LeaseService& leases() { return leases_; }
  IdleService& idle() { return idle_; }
  QuotaService& quotas() { return quotas_; }
  SessionService& sessions() { return sessions_; }
  ProfileService& profiles() { return profiles_; }
  ImageCacheService& imageCache() { return imageCache_; }
  RegistryLogins& registryLogins() { return registryLogins_; }
  const EventLog& eventLog() const { return events_; }

  const World& world() const { return world_; }
  const ClusterOptions& options() const { return options_; }

 private:
  // Changes a job in memory and records the write; keeps indexes right.
  void updateJob(model::Job& job, const model::Job& before, store::WriteBatch& batch);
  void jobUpdated(model::Job& job, const model::Job& before, store::WriteBatch& batch) override {
    updateJob(job, before, batch);
  }
  void applyActual(const std::string& host, const model::ActualJob& actual,
                   store::WriteBatch& batch, std::set<std::string>& push);
  // A report about one rank of a gang (a job with ranks) on `host`.
  void applyRankActual(model::Job& job, const std::string& host, const model::ActualJob& actual,
                       store::WriteBatch& batch, std::set<std::string>& push);
  void finishJob(model::Job& job, model::JobState state, std::string reason,
                 store::WriteBatch& batch);
  // A preempted job has stopped: back to the queue if preemptible, otherwise ended.
  void preemptedJobStopped(model::Job& job, const std::string& how, store::WriteBatch& batch);
  sched::Snapshot snapshot() const;
  // Hosts held for approved leases starting within the horizon, from when and for which lease.
  struct LeaseHold {
    TimeMs startAt = 0;
    int64_t lease = 0;
  };
  std::map<std::string, LeaseHold> leaseHolds(TimeMs now) const;
  // The scheduler's view of one host, and the teams' quotas (appended to s.teams).
  sched::HostView hostView(const std::string& name, const model::Host& h,
                           const std::map<std::string, LeaseHold>& holds) const;
  void addTeams(sched::Snapshot& s) const;
  // Whether the teams' quotas are still those the snapshot `s` was taken with.
  bool quotasAsIn(const sched::Snapshot& s) const;
  // Marks the job evicting; its agents hear once the change is durable (JobPreemption).
  void evict(const sched::Eviction& e, Change<std::vector<int64_t>>& c) override;
  // A pass whose snapshot the scheduler refused: every queued job waits, admins hear.
  void refuseSnapshot(const std::string& error, store::WriteBatch& batch);

  // The per-user and per-team limits on jobs queued or running (options_.limits), for a new job
  // whose command and environment take `bytes`: `jobs` of them (the tasks of an array).
  Status checkJobLimits(const std::string& user, const std::string& team, int64_t bytes,
                        int jobs = 1) const;
  // A submission's working directory and array, as far as they can be checked alone.
  static Status checkWorkdir(const std::string& dir);
  static Status checkArray(const JobRequest::Array& a, bool session);
  // The tasks of job arrays with a limit on how many run at once (--array 0-99%10) that are
  // scheduled or running, by array id.
  std::map<int64_t, int> activeArrayTasks() const;
  // Why a queued task of a limited array was not offered to the last pass: as many of its
  // array's tasks as the limit allows ran or were ahead of it. nullopt when it was offered.
  std::optional<std::string> arrayLimitReason(const model::Job& job) const;
  // Filled by each snapshot(): the tasks it left out for their array's limit, and why.
  mutable std::map<int64_t, std::string> arrayWaits_;
  // Whether snapshot() offers queued task `j`, given each limited array's tasks running
  // (`active`) and the room left in this snapshot (`room`, filled as it goes).
  bool offerArrayTask(const model::Job& j, std::map<int64_t, int>& room,
                      const std::map<int64_t, int>& active) const;
  // A gang rank's rendezvous environment (RANK, MASTER_ADDR, ...) in its desired state.
  void addRendezvous(const model::Job& job, int rank, model::DesiredJob& d) const;
  // Job `id` for a control by `p` (cancel, hold, release, requeue): another team's is not there;
  // the rest need the right to cancel it.
  Result<model::Job*> jobToControl(const Principal& p, int64_t id);
  // Dependencies a submission may name: jobs `p` may see, at most kMaxDependencies.
  Status checkDependencies(const Principal& p, const std::vector<model::Dependency>& deps) const;
  // Why a queued job is kept out of the scheduler's snapshot (held, or a dependency that has
  // yet to hold); nullopt when it is not.
  std::optional<std::string> blockedReason(const model::Job& job) const;
  // Before a pass: queued jobs with a dependency that can never hold end cancelled, saying which.
  void cancelUnsatisfiable(store::WriteBatch& batch);
  // A requeued job keeps its id, and an agent that still holds the record of its last run would
  // take a new placement for that run: it is placed again only once each of its last hosts
  // (while online) has reported without it, having forgotten it.
  std::map<int64_t, std::set<std::string>> lastRunOn_;
  void forgottenBy(const std::string& host, const std::vector<model::ActualJob>& reported);

  const Clock& clock_;
  LogStore& logs_;
  ClusterOptions options_;
  World world_;
  AccessService access_;
  EventLog events_{clock_, world_.teams};
  ProfileService profiles_{clock_, world_.teams};
  SessionService sessions_{clock_, world_, profiles_, *this, options_.sessionSharedDir};
  QuotaService quotas_;
  HostService hosts_;
  LeaseService leases_;
  AccountingService accounting_;
  IdleService idle_;
  ImageCacheService imageCache_{clock_, world_};
  RegistryLogins registryLogins_{clock_, world_, options_.sealKey};
  std::map<std::string, AgentLink*> links_;
  // Per host, when its next telemetry round is due at the sustained pace (agentTelemetry).
  std::map<std::string, TimeMs> telemetryDue_;
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
  std::map<int64_t, PullProgress> pulls_;  // pullOf(), by job
  // From an agent's report of job `j`: records the digest its image resolved to (true when it
  // changed), and a pull's progress and reason.
  bool noteImageDigest(model::Job& j, const model::ActualJob& a);
  void pullReported(model::Job& j, const model::ActualJob& a);
  // A job whose image, once pulled, declared a CUDA version above its host's driver's
  // (NVIDIA_REQUIRE_CUDA): its agent did not start it, and it goes back to the queue with that
  // minimum (docs/environments.md, "GPUs").
  bool imageNeedsNewerCuda(const model::Job& j, const std::string& host,
                           const model::ActualJob& a) const;
  void requeueForImageCuda(model::Job& j, const std::string& host, const model::ActualJob& a,
                           store::WriteBatch& batch);
  // Its pull is over (its process runs): the progress is dropped, and the reason that told of
  // the pull.
  void pullEnded(model::Job& j);
  std::function<void()> onQueueChanged_;
  std::set<int64_t> placementsInFlight_;            // placed in memory, not yet on disk
  std::map<std::string, TimeMs> usagePersistedAt_;  // by team
  std::set<int64_t> evictionsInFlight_;             // marked evicting in memory, not yet on disk
};

}  // namespace allot::control
