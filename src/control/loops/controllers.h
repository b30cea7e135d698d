#pragma once
// Controllers: the control plane's periodic work, apart from HTTP. Each step changes memory and
// returns a Step for the caller to commit before the next step runs; only then may agents hear
// of it (`pushHosts`), may evictions and placements be confirmed (`afterDurable`), may job
// watchers wake and webhooks go out. allotd's Server runs the steps on its I/O thread, the tick
// every second and the scheduling pass when the queue changed (api/server.cc); tests run them on
// a FakeClock and commit into nothing (controllers_test.cc).
//
// The order of a tick's steps matters and is kept here: a lease's start drains its hosts with a
// deadline of now, which the drain step enforces in the same tick; upgrades advance after the
// drains, so a step whose host just reached maintenance is under way and the next batch starts
// from an up-to-date count of hosts out.
//
// Threading: allotd's I/O thread, like the services it drives.

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "control/cluster.h"
#include "store/store.h"
#include "telemetry/attribution.h"

namespace allot::control {

// One step's outcome, to be committed by the caller before anything of it leaves allotd.
struct Step {
  const char* name = "";
  store::WriteBatch batch;
  std::set<std::string> pushHosts;
  // Confirms to the control plane that the batch is durable (placements, evictions).
  std::function<void()> afterDurable;
  std::vector<int64_t> notifyJobs;  // jobs whose watchers wake once durable
  // Idle events for teams' webhooks once durable: (url, event JSON).
  std::vector<std::pair<std::string, std::string>> webhooks;
  bool wakeScheduler = false;  // the queue may move: run a pass
  size_t placed = 0;           // jobs a scheduling pass placed, for the pass metrics
};

class Controllers {
 public:
  explicit Controllers(Cluster& cluster) : cluster_(cluster) {}

  // The scheduling pass: placements and the evictions they need, decided on this thread.
  Step schedulingPass();
  // The same pass in two steps around its decision, which may run on another thread meanwhile
  // (Cluster::beginPass): passStart() gives the snapshot to decide on (none when nothing is
  // queued), passFinish() applies the decisions; each step is committed before the next.
  Step passStart(std::optional<sched::Snapshot>& snapshot);
  Step passFinish(const sched::Snapshot& snapshot, Result<sched::Decisions> decisions);
  // The steps of one tick (every second), in order; each is run, then committed, before the
  // next is run: `tick()[i]()` must be called in order.
  std::vector<std::function<Step()>> tick();
  // Measured use since the last tick, for the telemetry store (not part of the main store's
  // writes: telemetry.db has its own writer).
  telemetry::TelemetryBatch drainTelemetry() { return cluster_.accounting().drainTelemetry(); }

 private:
  template <typename T>
  static Step stepOf(const char* name, Change<T>&& c) {
    Step s;
    s.name = name;
    s.batch = std::move(c.batch);
    s.pushHosts = std::move(c.pushHosts);
    return s;
  }
  Step drains();
  Step leases();
  Step idle();

  Cluster& cluster_;
};

}  // namespace allot::control
