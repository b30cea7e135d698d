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

namespace allot::model {

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

// The rank of `job` that runs on `host`, or -1. A single-host job's one process is rank 0.
int rankOn(const Job& job, const std::string& host);
// Every host a placed job has a rank on, in rank order; empty when not placed.
std::vector<std::string> rankHosts(const Job& job);

}  // namespace allot::model
