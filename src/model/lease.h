#pragma once
// Leases: whole hosts reserved for a team over a window (docs/leases.md).
// Part of model.h: plain structs, no behaviour beyond small helpers.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "model/directory.h"

namespace allot::model {

// A time-boxed lease of whole hosts to a team (docs/leases.md). requested -> approved -> active
// -> ended; a request may be rejected; ending a lease before its start cancels it.
enum class LeaseState { kRequested, kApproved, kActive, kEnded, kRejected, kCancelled };
const char* leaseStateName(LeaseState s);
std::optional<LeaseState> parseLeaseState(const std::string& s);

struct Lease {
  int64_t id = 0;
  std::string team;
  std::string requestedBy;
  std::string reason;
  // Named hosts; for a count lease, empty until approval picks them.
  std::vector<std::string> hosts;
  int count = 0;         // a count lease: this many hosts; 0 when hosts were named
  std::string gpuModel;  // count lease: hosts whose GPUs are all of this model; empty = any
  int minGpus = 0;       // count lease: hosts with at least this many GPUs
  TimeMs startAt = 0;
  TimeMs endAt = 0;
  LeaseState state = LeaseState::kRequested;
  TimeMs createdAt = 0;
  std::string decidedBy;  // who approved, rejected or ended it ("allotd": policy or schedule)
  TimeMs decidedAt = 0;
  std::string decision;  // the approval's, rejection's or early end's reason
  TimeMs startedAt = 0;  // when allotd started it (hosts handed over); 0 = not yet
  TimeMs endedAt = 0;
  // Hosts not handed over at the start (failed, retired, gone), with why: "gpu-03: failed".
  std::vector<std::string> skipped;
  // Hosts whose handover to the team began (at the start, or later when the host was busy with
  // another handover then): the lease keeps trying the others until its end.
  std::vector<std::string> claimed;
  std::vector<std::string> returned;  // hosts handed back after the end
  // The team each claimed host was dedicated to before the lease took it ("" = the shared pool):
  // at the end it goes back there, so a team that leased its own dedicated host keeps it.
  std::map<std::string, std::string> dedicatedBefore;
  std::vector<int64_t> noticed;       // jobs already told they will be preempted at the start
};

}  // namespace allot::model
