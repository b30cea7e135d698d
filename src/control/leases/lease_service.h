#pragma once
// LeaseService: hosts reserved for a team over a window (docs/leases.md). People ask, platform
// admins or the auto-approve policy decide; on the clock (`enforce`, every second from the
// control loop) a lease's start hands its hosts to the team, its end hands them back to the
// shared pool, and owners of work a start will preempt hear of it beforehand. Everything it
// decides is in the lease's stored document, so a restart of allotd resumes it.
//
// Owns: every lease and their numbering. Reads: the world's hosts, teams and jobs. Reaches the
// hosts service only through HostHandover, the scheduler through `queueChanged` (approved leases
// hold hosts), and writes its events to the EventLog. Threading: allotd's I/O thread.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "control/change.h"
#include "control/disruption.h"
#include "control/events/event_log.h"
#include "control/hosts/host_handover.h"
#include "control/leases/lease_types.h"
#include "control/principal.h"
#include "control/world.h"
#include "model/model.h"

namespace allot::control {

// What approving a lease would do to running work: the hosts it takes and the jobs on them that
// its start would preempt.
struct LeaseImpact {
  std::vector<std::string> hosts;
  TimeMs stopsAt = 0;
  std::vector<StoppedJob> stopped;
};

class LeaseService {
 public:
  struct Deps {
    const Clock& clock;
    const World& world;
    EventLog& events;
    HostHandover& hosts;
    std::function<void()> queueChanged;  // wakes the scheduling loop
  };
  // `cancelGraceMs`: how long a cancelled job has to stop, so a job whose max runtime ends that
  // long before a lease's start needs no notice.
  LeaseService(Deps deps, LeaseOptions options, int64_t cancelGraceMs);

  void load(const std::vector<model::Lease>& stored);

  // Team-admins of the team and platform admins ask. A lease that conflicts with an approved or
  // active one is refused (FailedPrecondition) naming the conflict.
  Result<Change<model::Lease>> create(const Principal& p, LeaseRequest request);
  // Members see their team's leases; another team's are NotFound.
  std::vector<model::Lease> list(const Principal& p) const;
  Result<model::Lease> get(const Principal& p, int64_t id) const;
  // Platform admins decide on requested leases.
  Result<Change<model::Lease>> approve(const Principal& p, int64_t id, const std::string& reason);
  // What approving it would stop, changing nothing (platform admins; for the CLI's question and
  // the console's confirmation).
  Result<LeaseImpact> approvalImpact(const Principal& p, int64_t id) const;
  Result<Change<model::Lease>> reject(const Principal& p, int64_t id, const std::string& reason);
  // A later end for a requested, approved or active lease; refused on conflict.
  Result<Change<model::Lease>> extend(const Principal& p, int64_t id, TimeMs endAt);
  // Ends an active lease now (its hosts go back to the pool), or cancels one not started.
  Result<Change<model::Lease>> end(const Principal& p, int64_t id, const std::string& reason);

  // Periodic, before drains are enforced: starts leases whose start has come, ends those whose
  // end has, and tells owners of jobs a start will preempt. Starts missed while allotd was down
  // happen at once. The value counts the leases that started or ended and the notices sent.
  Change<int> enforce();

  // The lease that has `host` now (active), else the next approved one; for host views.
  std::optional<model::Lease> onHost(const std::string& host) const;
  // Every lease, by id: the scheduler's snapshot holds hosts for approved ones.
  const std::map<int64_t, model::Lease>& all() const { return leases_; }

 private:
  Status conflict(const std::vector<std::string>& hosts, TimeMs start, TimeMs end,
                  int64_t except) const;
  Result<std::vector<std::string>> pickHosts(const model::Lease& l) const;
  void recordEvent(const model::Lease& l, std::string message, store::WriteBatch& batch);
  void start(model::Lease& l, Change<int>& c);
  // Begins the handover to the lease's team of each host not claimed or skipped yet; a host busy
  // with another handover is tried again on the next call.
  void claimHosts(model::Lease& l, Change<int>& c);
  void returnHosts(model::Lease& l, Change<int>& c);
  void notice(model::Lease& l, Change<int>& c);

  Deps deps_;
  LeaseOptions options_;
  int64_t cancelGraceMs_;
  std::map<int64_t, model::Lease> leases_;
  int64_t nextId_ = 1;
};

}  // namespace allot::control
