#pragma once
// The fleet scheduler: one pure, deterministic decision pass from a snapshot of the fleet (hosts,
// teams and their quotas, running work, the queue, `now`) to decisions (placements, evictions,
// reservations, and a reason for every request that waits). No I/O, no clock reads, no
// randomness: the same snapshot gives the same decisions. allotd builds the snapshot from its
// world on every pass; allot-sim drives the same code from a trace with a virtual clock.
//
// How a pass decides (docs/scheduler.md tells the same for users):
// 1. Capacity. Every schedulable host becomes one or more placement nodes ("segments"): its GPUs
//    in the shared pool, its GPUs dedicated to a team (a whole host, or single GPUs), and its
//    GPUs in shared mode are separate segments; a host with more than one segment splits its CPU
//    and memory among them in proportion to their GPUs. Each segment gets a placement "kind" (GPU
//    model, owner, shared mode, driver and CUDA version), and a request's set of allowed kinds
//    says where it may go: so dedicated capacity is invisible to other teams, fractions go only
//    to shared GPUs (whole-GPU work takes a shared GPU only while nothing is on it, and no
//    fraction joins a GPU held whole), and version minimums hold, all with the placement
//    policy's one bitmask test.
// 2. Dedicated capacity first. A request of a team that owns dedicated capacity is tried there
//    first; that needs no quota.
// 3. Quota. The rest goes through the quota policy (sched/quota), counted in milli-GPUs over the
//    pool: guarantees, borrow and lend limits, fair share by weight and decayed usage, and
//    preemption of borrowed work only. Its admissions are placed in its order with the placement
//    policy (fragmentation gradient descent by default); multi-GPU requests get GPUs that share
//    NVLink, a PCIe switch or a NUMA node when the host reports topology; gangs (N hosts x M GPUs)
//    are placed all or nothing.
// 4. Lent dedicated capacity. A request quota refused, or that found no room in the pool, may go
//    on another team's dedicated capacity when that team lends it; such work is reclaimed as soon
//    as the owner needs the room.
// 5. Reservations and backfill. An admitted request that finds no host with room right now
//    (fragmented) reserves the segment where it can start soonest (from the declared maximum
//    runtimes of what runs there); later requests may use the reserved room only when their own
//    maximum runtime ends before that start.
// Every request that waits gets a compact Wait (a kind and numbers); describeWait makes words.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/version.h"

namespace allot::sched {

inline constexpr int kMilliPerGpu = 1000;

struct GpuView {
  int index = 0;
  std::string model;
  int64_t memoryMib = 0;
  bool shared = false;        // shared mode: takes fractions, and whole work only when all free
  std::string dedicatedTo{};  // a team, or empty; ignored when the host itself is dedicated
  // Topology, -1 when unknown. GPUs with the same nvlinkDomain are joined by NVLink; the same
  // pcieSwitch sit under one PCIe switch; numaNode is their CPU socket.
  int nvlinkDomain = -1;
  int pcieSwitch = -1;
  int numaNode = -1;

  bool operator==(const GpuView&) const = default;
};

struct HostView {
  std::string name;
  bool schedulable = true;  // online, not drained, not held
  bool drained = false;     // online, but an admin took it out of service (draining, maintenance)
  // A drained host's admin state in words ("draining", "in maintenance", "reprovisioning"), and
  // when a drain stops the work still on it (0 = none): a request only such hosts could run
  // waits saying so, not "no such GPUs".
  std::string outOfService;
  TimeMs drainDeadline = 0;
  int64_t cpuMillis = 0;
  int64_t memoryMib = 0;
  std::string dedicatedTo;  // the whole host belongs to this team
  // Held for a lease that starts at heldFrom (0 = not held): only work whose declared maximum
  // runtime ends by then may start here (docs/leases.md).
  TimeMs heldFrom = 0;
  int64_t heldLease = 0;
  std::string driverVersion;
  std::string cudaVersion;
  std::vector<GpuView> gpus;
  // Its contour (DEV, TEST, PROD, ...): only work of the same contour runs here.
  std::string contour;
  bool images = false;  // its agent runs jobs in container images

  bool operator==(const HostView&) const = default;
};

// What one job holds on one host.
struct Slice {
  std::string host;
  std::vector<int> gpus;        // GPU indices
  int gpuMilli = kMilliPerGpu;  // per GPU; < 1000 for a fraction of one shared GPU
  int64_t cpuMillis = 0;
  int64_t memoryMib = 0;
};

struct RunningJob {
  int64_t id = 0;
  std::string team;
  std::string project;
  int priority = 0;
  bool preemptible = false;
  TimeMs startedAt = 0;   // when it was placed
  TimeMs endsBy = 0;      // startedAt + declared maximum runtime; 0 = unknown
  bool evicting = false;  // already chosen as a victim, in its grace period
  std::vector<Slice> slices;
  std::string contour;  // counts against its team's limit in this contour
};

struct Request {
  int64_t id = 0;
  std::string team;
  std::string project;
  int priority = 0;  // higher first
  bool preemptible = false;
  TimeMs submittedAt = 0;
  int gpus = 0;                     // per host
  int gpuMilli = kMilliPerGpu;      // < 1000: a fraction of one shared GPU (gpus must be 1)
  int64_t gpuMemoryMib = 0;         // GPU memory a fraction needs (raises its share, see .cc)
  std::vector<std::string> models;  // any of; empty = any
  int64_t cpuMillis = 0;
  int64_t memoryMib = 0;
  int hosts = 1;           // > 1: a gang of `hosts` x `gpus`, all or nothing, on distinct hosts
  bool wholeHost = false;  // an entire idle host; gpus, CPU and memory are then ignored
  std::string minDriver;   // dotted versions; empty = none
  std::string minCuda;
  TimeMs maxRuntimeMs = 0;  // declared; 0 = none (then it cannot backfill)
  std::string contour;      // runs only on hosts of this contour
  bool images = false;      // runs in a container image: only on hosts whose agent runs those
  // Hosts to place it on when one of them has room (a session's persistent local storage is
  // there); otherwise anywhere, as usual. Single-host requests only.
  std::vector<std::string> preferHosts;
  // Hosts whose image cache holds the job's image: they win the placement policy's ties, and
  // nothing more (quotas, dedication and the policy's score still decide). Single-host only.
  std::vector<std::string> imageHosts;
};

struct TeamView {
  std::string name;
  std::map<std::string, int> guaranteed;  // GPU model (or "" = any model) -> GPUs
  int borrowLimit = -1;                   // GPUs beyond its guarantee; -1 = no limit
  int lendLimit = -1;                     // of its idle guarantee; -1 = all of it
  double weight = 1.0;
  bool lendDedicated = false;  // others may use its idle dedicated capacity, until it needs it
  double usageGpuSeconds = 0;  // decayed history
  // Project name -> its split of the team's guarantee (same keys). Requests of a project under
  // its split go before the team's other requests.
  std::map<std::string, std::map<std::string, int>> projectSplits;
  // Contour -> the most GPUs its work may hold in that contour at once (absent: no limit). A cap
  // on top of guarantees and borrowing, which count over the whole fleet.
  std::map<std::string, int> contourLimits;

  bool operator==(const TeamView&) const = default;
};

struct Policy {
  std::string placement = "fgd";  // fgd, bestfit, firstfit, random
  uint64_t seed = 42;             // for random
  TimeMs shareWindowMs = 3'600'000;
  int maxReservations = 16;  // fragmented requests that reserve room, in queue order
};

struct Snapshot {
  TimeMs now = 0;
  std::vector<HostView> hosts;
  std::vector<TeamView> teams;  // a request's or job's team must be here
  std::vector<RunningJob> running;
  std::vector<Request> pending;
  Policy policy;
};

// How a placement was decided, for `explain`.
enum class PlacedBy {
  kDedicated,      // on its team's dedicated capacity
  kQuota,          // in the pool, within guarantee and/or borrowed
  kLentDedicated,  // on capacity another team dedicated and lends
  kBackfill,       // in room reserved for another request, ending before that one starts
};
const char* placedByName(PlacedBy by);

struct Placement {
  int64_t jobId = 0;
  std::vector<Slice> slices;  // one per host; a gang has `hosts` slices
  PlacedBy by = PlacedBy::kQuota;
  int withinMilli = 0;       // quota: counted within the team's guarantee
  int borrowedMilli = 0;     // quota: borrowed
  int candidates = 0;        // segments where it could have gone
  int64_t reservedFor = 0;   // kBackfill: the request whose room it uses
  bool imageCached = false;  // a host it went to held its image already (Request::imageHosts)
};

struct Eviction {
  int64_t jobId = 0;
  bool requeue = false;  // preemptible: back to the queue; otherwise stopped
  int64_t forJob = 0;
  std::string reason;  // "reclaimed by team ml for job 42"
};

enum class WaitKind {
  kNoHosts,            // no schedulable host at all
  kHostsDrained,       // no schedulable host, but online hosts an admin took out of service
  kNoSuchModel,        // no host this team may use has that GPU model (or the versions)
  kTooBig,             // no host it may use has that many GPUs (of the model): `largest`
  kNeedsOnlineHost,    // CPU-only, and no host has the CPU and memory free
  kOverQuota,          // at its guarantee and borrow limit
  kNoFreeGpus,         // quota allows it, but the GPUs are in use
  kWaitingForLenders,  // its borrow is allowed, but unowned and lendable capacity is in use
  kWaitingForGrace,    // within guarantee; reclaimed jobs are leaving (`waitingFor`)
  kGuaranteeInUse,     // within guarantee, but held by others' guaranteed work
  kFragmented,         // enough free GPUs in total (`freeTotal`) but not on one host (`largest`)
  kGang,               // a gang: only `hostsReady` of `hostsWanted` hosts have room
  kNoIdleHost,         // whole host: no idle host it may use
  kReserved,           // holds a reservation on `host`, starting at `startAt` (0 = unknown)
  kDriverTooOld,       // hosts it may use have the GPUs, but none the driver asked (`newest`)
  kCudaTooOld,         // the same for the CUDA version
  kHeldForLease,       // fits only on hosts held for lease `lease` from `startAt` (`host`)
  kNoHostInContour,    // hosts of other contours could take it, none of its own (`contour`)
  kContourLimit,       // its team is at its limit in its contour (`limitMilli`, `usedMilli`)
  kSchedulerError,     // the pass refused the fleet's snapshot: nothing places (allotd's log)
  kNoImageHosts,       // in an image, and no host it may use runs jobs in images
};
const char* waitKindName(WaitKind kind);

struct Wait {
  int64_t jobId = 0;
  WaitKind kind = WaitKind::kNoFreeGpus;
  int position = 0;  // 1 = next to be considered
  int largest = 0;
  bool cpuMemory = false;  // kTooBig: hosts have the GPUs, but none also the CPU and memory
  int64_t freeTotal = 0;   // milli
  int hostsReady = 0;
  int hostsWanted = 0;
  std::string host{};
  TimeMs startAt = 0;
  std::vector<int64_t> waitingFor{};
  std::string newest{};   // kDriverTooOld, kCudaTooOld: the newest version it may use; "" = none
  int64_t lease = 0;      // kHeldForLease
  std::string contour{};  // kNoHostInContour, kContourLimit
  // kNoHostInContour: true when its contour has no host it could ever fit on (none at all, or
  // none big enough); false when its contour's hosts are only busy while others have room.
  bool contourNever = false;
  int64_t limitMilli = 0;  // kContourLimit
  int64_t usedMilli = 0;   // kContourLimit: what its team holds (and was given) in the contour
  // kHostsDrained: the out-of-service hosts that could run it, by name (the first few).
  struct HostOutOfService {
    std::string host{};
    std::string state;  // HostView::outOfService
    TimeMs drainDeadline = 0;
  };
  std::vector<HostOutOfService> outOfService{};
  int outOfServiceMore = 0;  // how many more there are
};

// "no host has 16 A100 GPUs (the largest has 8)", ...
std::string describeWait(const Wait& wait, const Request& request);

// A team's quota position after the pass, for the API.
struct TeamStatus {
  std::string team;
  int guaranteedMilli = 0;
  int withinMilli = 0;
  int borrowedMilli = 0;
  int lendableMilli = 0;
  double share = 0;
};

struct Decisions {
  std::vector<Placement> placements;
  std::vector<Eviction> evictions;
  std::vector<Wait> waits;  // in queue order (priority, then submission)
  std::vector<TeamStatus> teams;
};

// Validates the snapshot (unknown teams, bad sizes, duplicate ids: InvalidArgument naming the
// field) and decides one pass.
Result<Decisions> decide(const Snapshot& snapshot);

// Dotted version comparison (common/version.h): "535.104.05" >= "535.54".
using ::allot::versionAtLeast;

}  // namespace allot::sched
