#pragma once
// The scheduler: a pure function from a snapshot of the cluster to placement decisions.
// No I/O, no clock reads, no randomness of its own: the same snapshot gives the same decisions,
// byte for byte. allotd's scheduling loop builds the snapshot from its in-memory world, asks the
// scheduler, and commits the decisions; allot-sim will drive the same code from a trace.

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"

namespace allot::sched {

struct GpuSlot {
  int index = 0;
  std::string model;
  bool free = true;
};

struct HostView {
  std::string name;
  bool schedulable = true;  // online and accepting work
  std::vector<GpuSlot> gpus;
};

struct PendingJob {
  int64_t id = 0;
  int gpus = 0;
  std::string gpuModel;  // empty = any
  TimeMs submittedAt = 0;
};

struct Snapshot {
  TimeMs now = 0;
  std::vector<HostView> hosts;
  std::vector<PendingJob> pending;  // in queue order
};

struct Placement {
  int64_t jobId = 0;
  std::string host;
  std::vector<int> gpuIndices;
};

// Why a job still waits. Kept compact (no text) because a pass produces one per queued job;
// describeWait turns it into words when someone asks.
enum class WaitKind {
  kNoHosts,          // no host has joined
  kNoSuchModel,      // no host has GPUs of the wanted model
  kTooBig,           // no host has that many GPUs (of the model): it can never fit as asked
  kNeedsOnlineHost,  // a CPU-only job and no host is online
  kNeedsFreeGpus,    // it fits on some host, but not now
  kBehindInQueue,    // FIFO: it waits behind an earlier job
};

struct Wait {
  int64_t jobId = 0;
  WaitKind kind = WaitKind::kNeedsFreeGpus;
  int position = 0;       // 1 = next to be placed
  int64_t blockedBy = 0;  // kBehindInQueue: the job at the head
  int largestHost = 0;    // kTooBig: the most GPUs (of the model) any host has
};

// "no host has 16 A100 GPUs (the largest has 8)", "behind job 12 in the queue (FIFO)", ...
std::string describeWait(const Wait& wait, int gpus, const std::string& gpuModel);

struct Decisions {
  std::vector<Placement> placements;
  std::vector<Wait> waits;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual Decisions decide(const Snapshot& snapshot) const = 0;
};

// Strict FIFO, first fit of whole GPUs: the head of the queue goes on the first host (in name
// order) with enough free GPUs of the wanted model; a job that cannot be placed blocks those
// behind it, so nothing overtakes it (no backfill yet). The scheduler issue replaces this.
class FifoFirstFitScheduler final : public Scheduler {
 public:
  Decisions decide(const Snapshot& snapshot) const override;
};

}  // namespace allot::sched
