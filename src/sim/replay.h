#pragma once
// allot-sim replay: a timed replay of a pod list through the fleet scheduler allotd uses
// (sched::decide), driven by a virtual clock. docs/sim.md states every rule; in short:
// - Tasks arrive at their creation_time, are spread over teams by row index modulo the number of
//   teams, and run for deletion_time - scheduled_time once placed (a pod the real cluster never
//   placed runs deletion_time - creation_time; one without a deletion time runs from its arrival
//   to the end of the trace). BE tasks are preemptible: evicted, they go back to the queue and
//   later start from scratch; any other evicted task is killed.
// - The clock jumps from event to event (arrivals, completions, ends of grace periods). At each
//   instant where something changed and the queue is not empty, a Snapshot is built (running jobs
//   with their slices, the queue, teams with decayed usage, `now`) and decided; placements start
//   at once, evictions leave after the grace (0: before the next pass at the same instant).
// - A request the fleet can never hold (no such model, more GPUs than any host) leaves the queue
//   at once; requests still waiting when no event is left are never placed. Both are reported.
// Pure: no I/O, no clock reads; the same inputs give the same result, byte for byte.

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "sched/fleet.h"
#include "sched/placement/cluster.h"
#include "sim/trace.h"

namespace allot::sim {

struct ReplayTask {
  std::string name;
  int team = 0;
  TimeMs arrivalMs = 0;
  TimeMs runtimeMs = 0;
  sched::Request request;  // id (row index + 1), team, resources, preemptible, submittedAt
};

struct ReplayTrace {
  std::vector<ReplayTask> tasks;  // in pod-list order
  TimeMs endMs = 0;       // the end of the trace: its largest creation, scheduled or deletion time
  int timesBorrowed = 0;  // rows whose times came from the --times list
  int timesHashed = 0;    // of those, rows that list does not name (row picked by name hash)
};

// Pod rows to replay tasks for `teams` teams ("team0".."team<N-1>"). A row without creation_time
// takes creation, deletion and scheduled time and qos from the row of `times` with its name, or,
// when `times` has no such name, from its row FNV-1a(name) modulo its size; without `times`, such
// a row is an error.
Result<ReplayTrace> buildReplayTrace(const std::vector<TraceTask>& pods,
                                     const std::vector<TraceTask>* times, int teams);

// An evenly spread `fraction` (0, 1] of the nodes of each GPU model, in list order (node j of a
// model is kept when floor((j + 1) * fraction) > floor(j * fraction)), and at least one node of
// each model: a smaller cluster with the same mix, for a trace too light to contend for the
// whole one (openb's real times never hold more than 66 of its 6,212 GPUs at once).
std::vector<sched::placement::NodeSpec> nodeFraction(
    const std::vector<sched::placement::NodeSpec>& nodes, double fraction);

// Node rows as hosts: every GPU shared (takes fractions; whole-GPU work only while it is empty),
// GPU memory from the model name where it says (0 for G1..G3, which the trace does not disclose).
std::vector<sched::HostView> replayHosts(const std::vector<sched::placement::NodeSpec>& nodes);

struct ReplayOptions {
  int teams = 4;
  double guaranteeShare = 0.8;  // of the fleet's GPUs, split equally among the teams
  std::string policy = "fgd";   // placement: fgd, bestfit, firstfit, random
  uint64_t seed = 42;           // for random
  TimeMs graceMs = 0;           // an evicted job leaves this long after the pass that chose it
  TimeMs sampleMs = 3'600'000;  // utilisation sample period
  TimeMs usageHalfLifeMs = 3'600'000;  // decay of the teams' usage history (fair share)
  bool declareRuntimes = false;        // tell the scheduler each task's runtime (enables backfill)
};

struct DelayStats {
  int64_t count = 0;
  double meanS = 0, p50S = 0, p99S = 0, maxS = 0;  // percentiles by nearest rank
};

struct TeamReplay {
  std::string team{};
  int64_t tasks = 0;
  int64_t placed = 0;     // at least once
  int64_t completed = 0;  // ran to the end
  int64_t requeued = 0;   // evictions that sent it back to the queue
  int64_t killed = 0;     // evictions that ended it
  int64_t neverPlaced = 0;
  DelayStats delay{};  // first placement - creation, over the tasks placed
  // GPU-seconds within [0, end of trace]: what it held, and what it would have held had every
  // task started at its arrival. received / demanded is its service ratio (Jain's x).
  double gpuSecondsReceived = 0;
  double gpuSecondsDemanded = 0;
  double serviceRatio = 0;
};

struct ReplayResult {
  std::string policy;
  std::vector<TeamReplay> teams;
  TeamReplay overall;
  std::vector<double> utilisation;  // percent of GPU milli allocated at k * sampleMs
  TimeMs sampleMs = 0;
  double meanUtilisation = 0;  // percent, time-weighted over [0, endMs]
  double jain = 0;             // over the teams' service ratios (teams that demanded GPU time)
  int64_t passes = 0;          // calls of sched::decide
  int64_t placements = 0;      // including restarts after requeue
  int64_t impossible = 0;      // requests the fleet can never hold (part of neverPlaced)
  int64_t maxPending = 0;
  TimeMs endMs = 0;  // the last event
};

// Validates the options (InvalidArgument naming the flag) and replays.
Result<ReplayResult> runReplay(const std::vector<sched::HostView>& hosts, const ReplayTrace& trace,
                               const ReplayOptions& options);

// Jain's fairness index (sum x)^2 / (n * sum x^2); 1 for an empty or all-zero list.
double jainIndex(const std::vector<double>& x);

}  // namespace allot::sim
