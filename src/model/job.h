#pragma once
// Jobs and their ranks, sessions (jobs made from a profile), the allocation ledger and
// events.
// Part of model.h: plain structs, no behaviour beyond small helpers.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "model/directory.h"
#include "model/host.h"
#include "model/resource_request.h"

namespace allot::model {

// kPulling: placed, its GPUs held, while its host fetches the job's image (docs/environments.md).
// kPreempted: stopped to give its GPUs back to a team that was guaranteed them, and not requeued
// because it was not marked preemptible.
enum class JobState {
  kQueued,
  kScheduled,
  kPulling,
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
// Placed and holding its GPUs: scheduled, pulling its image or running.
bool holdsGpus(JobState s);

// A job that runs only once another has ended as asked (allot run --dependency, Slurm's
// --dependency): afterok, the other succeeded; afternotok, it ended any other way; afterany, it
// ended at all.
enum class DependencyKind { kAfterOk, kAfterNotOk, kAfterAny };
const char* dependencyKindName(DependencyKind k);
std::optional<DependencyKind> parseDependencyKind(const std::string& s);
struct Dependency {
  DependencyKind kind = DependencyKind::kAfterOk;
  int64_t job = 0;
  bool operator==(const Dependency&) const = default;
};
// Whether a dependency on a job now in `state` holds (true), never can (false), or waits
// (nullopt: the other job has not ended).
std::optional<bool> dependencyHolds(const Dependency& d, JobState state);

// What the agent last said about one rank of a gang job.
enum class RankState { kPending, kRunning, kExited, kFailedToStart, kLost };
const char* rankStateName(RankState s);
std::optional<RankState> parseRankState(const std::string& s);

// One process of a job: where it runs and, for a gang (multi-host) job, how it went. A placed job
// always has its ranks, one per host; a single-host job is one rank, whose state stays kPending
// because the job's own state says how it runs.
struct Rank {
  std::string host{};
  std::vector<int> gpuIndices{};
  std::vector<std::string> gpuUuids{};
  RankState state = RankState::kPending;
  std::optional<int> exitCode{};
  std::optional<int> signal{};
  std::string message{};  // how it ended, in words ("exited with code 3")
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
  std::string workdir;  // where the command starts; empty = its own job directory on the host
  // The OCI image the command runs in (allot run --image, docs/environments.md), as submitted;
  // empty: on the host. imageDigest: the manifest digest its host resolved it to (empty until
  // reported), so that a rerun can pin it (REF@DIGEST).
  std::string image;
  std::string imageDigest;
  // The CUDA version the image declares it needs (NVIDIA_REQUIRE_CUDA), once known: from a host
  // that holds the image at submission, else from the first pull. It raises resources.minCuda,
  // so that the scheduler places the job only where the driver supports it; "" = none.
  std::string imageMinCuda;
  // One task of a job array (allot run --array): the array's id (its first task's), this task's
  // index ($ALLOT_ARRAY_INDEX), and how many of the array's tasks may run at once (0 = no limit).
  int64_t arrayId = 0;
  int arrayIndex = -1;
  int arrayLimit = 0;
  // What it asks for. A whole-host job's gpus is filled in when it is placed: what it holds.
  ResourceRequest resources;
  int priority = 0;          // -1000..1000, higher first
  bool preemptible = false;  // may be stopped and requeued to make room
  int64_t maxRuntimeMs = 0;  // declared limit, enforced; 0 = none
  JobState state = JobState::kQueued;
  std::string reason;  // why it waits, or why it ended the way it did
  // Where it runs, in rank order (one rank per host, so one for a single-host job); empty while
  // it is not placed. The API and the store documents also show rank 0 as flat host/gpu_indices
  // fields, for readers from before gangs.
  std::vector<Rank> ranks;
  // A gang: the port its rank 0's agent chose for the rendezvous (MASTER_PORT); 0 until then.
  int masterPort = 0;
  // A gang: the first rank that failed, started no process or was lost, whose failure stops the
  // other ranks and decides how the job ends; -1 while none has.
  int failedRank = -1;
  std::optional<int> exitCode;
  std::optional<int> signal;
  bool cancelRequested = false;
  // Held (allot job hold): it stays queued and is not scheduled until released; who held it.
  std::string heldBy;
  // It is scheduled only once each of these holds; one that never can cancels it.
  std::vector<Dependency> dependencies;
  // Asked to be stopped and put back in the queue (allot job requeue): it is requeued when it
  // stops, whether or not it is preemptible; "who" for the reason.
  std::string requeueRequestedBy;
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

// A gang: `hosts` processes on as many hosts, each with a rank state of its own (Rank).
inline bool isGang(const Job& job) { return job.resources.hosts > 1; }
// Rank 0: the whole placement of a single-host job, the first host of a gang; an empty Rank (no
// host, no GPUs) when the job is not placed.
const Rank& firstRank(const Job& job);
// The rank of `job` that runs on `host`, or -1. A single-host job's one process is rank 0.
int rankOn(const Job& job, const std::string& host);
// Every host a placed job has a rank on, in rank order; empty when not placed.
std::vector<std::string> rankHosts(const Job& job);

}  // namespace allot::model
