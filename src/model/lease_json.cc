// JSON forms of a lease: ISO 8601 times for the API, milliseconds for the store's document.

#include "common/time_format.h"
#include "model/json.h"

namespace allot::model {

namespace {

json timeOrNull(TimeMs t) { return t ? json(formatIso8601(t)) : json(nullptr); }
json textOrNull(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

}  // namespace

json toJson(const Lease& l) {
  return {{"id", l.id},
          {"team", l.team},
          {"state", leaseStateName(l.state)},
          {"hosts", l.hosts},
          {"count", l.count > 0 ? json(l.count) : json(nullptr)},
          {"gpu_model", textOrNull(l.gpuModel)},
          {"min_gpus", l.minGpus > 0 ? json(l.minGpus) : json(nullptr)},
          {"start", formatIso8601(l.startAt)},
          {"end", formatIso8601(l.endAt)},
          {"reason", l.reason},
          {"requested_by", l.requestedBy},
          {"created_at", formatIso8601(l.createdAt)},
          {"decided_by", textOrNull(l.decidedBy)},
          {"decided_at", timeOrNull(l.decidedAt)},
          {"decision", textOrNull(l.decision)},
          {"started_at", timeOrNull(l.startedAt)},
          {"ended_at", timeOrNull(l.endedAt)},
          {"skipped_hosts", l.skipped}};
}

json toStoreDoc(const Lease& l) {
  return {{"id", l.id},
          {"team", l.team},
          {"state", leaseStateName(l.state)},
          {"hosts", l.hosts},
          {"count", l.count},
          {"gpu_model", l.gpuModel},
          {"min_gpus", l.minGpus},
          {"start_ms", l.startAt},
          {"end_ms", l.endAt},
          {"reason", l.reason},
          {"requested_by", l.requestedBy},
          {"created_ms", l.createdAt},
          {"decided_by", l.decidedBy},
          {"decided_ms", l.decidedAt},
          {"decision", l.decision},
          {"started_ms", l.startedAt},
          {"ended_ms", l.endedAt},
          {"skipped", l.skipped},
          {"claimed", l.claimed},
          {"returned", l.returned},
          {"noticed", l.noticed}};
}

Lease leaseFromStoreDoc(const json& d) {
  Lease l;
  l.id = d.value("id", int64_t{0});
  l.team = d.value("team", "");
  // An unknown state cannot come from this code; reading it as ended keeps it out of the way.
  l.state = parseLeaseState(d.value("state", "")).value_or(LeaseState::kEnded);
  l.hosts = d.value("hosts", std::vector<std::string>{});
  l.count = d.value("count", 0);
  l.gpuModel = d.value("gpu_model", "");
  l.minGpus = d.value("min_gpus", 0);
  l.startAt = d.value("start_ms", TimeMs{0});
  l.endAt = d.value("end_ms", TimeMs{0});
  l.reason = d.value("reason", "");
  l.requestedBy = d.value("requested_by", "");
  l.createdAt = d.value("created_ms", TimeMs{0});
  l.decidedBy = d.value("decided_by", "");
  l.decidedAt = d.value("decided_ms", TimeMs{0});
  l.decision = d.value("decision", "");
  l.startedAt = d.value("started_ms", TimeMs{0});
  l.endedAt = d.value("ended_ms", TimeMs{0});
  l.skipped = d.value("skipped", std::vector<std::string>{});
  l.returned = d.value("returned", std::vector<std::string>{});
  l.claimed = d.value("claimed", std::vector<std::string>{});
  l.noticed = d.value("noticed", std::vector<int64_t>{});
  return l;
}

}  // namespace allot::model
