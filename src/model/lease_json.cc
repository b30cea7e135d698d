// JSON forms of a lease: ISO 8601 times for the API, milliseconds for the store's document.

#include "common/time_format.h"
#include "model/json.h"
#include "model/json_fields.h"

namespace allot::model {

namespace {

using fields::nullIfEmpty;
using fields::timeOrNull;

json countOrNull(int n) { return n > 0 ? json(n) : json(nullptr); }

// What the API and the store both say of a lease: who asked for what, and where it stands.
json leaseRequest(const Lease& l) {
  return {{"id", l.id},       {"team", l.team},     {"state", leaseStateName(l.state)},
          {"hosts", l.hosts}, {"reason", l.reason}, {"requested_by", l.requestedBy}};
}

}  // namespace

json toJson(const Lease& l) {
  json out = leaseRequest(l);
  out["count"] = countOrNull(l.count);
  out["gpu_model"] = nullIfEmpty(l.gpuModel);
  out["min_gpus"] = countOrNull(l.minGpus);
  out["start"] = formatIso8601(l.startAt);
  out["end"] = formatIso8601(l.endAt);
  out["created_at"] = formatIso8601(l.createdAt);
  out["decided_by"] = nullIfEmpty(l.decidedBy);
  out["decided_at"] = timeOrNull(l.decidedAt);
  out["decision"] = nullIfEmpty(l.decision);
  out["started_at"] = timeOrNull(l.startedAt);
  out["ended_at"] = timeOrNull(l.endedAt);
  out["skipped_hosts"] = l.skipped;
  return out;
}

json toStoreDoc(const Lease& l) {
  json out = leaseRequest(l);
  out["count"] = l.count;
  out["gpu_model"] = l.gpuModel;
  out["min_gpus"] = l.minGpus;
  out["start_ms"] = l.startAt;
  out["end_ms"] = l.endAt;
  out["created_ms"] = l.createdAt;
  out["decided_by"] = l.decidedBy;
  out["decided_ms"] = l.decidedAt;
  out["decision"] = l.decision;
  out["started_ms"] = l.startedAt;
  out["ended_ms"] = l.endedAt;
  out["skipped"] = l.skipped;
  out["claimed"] = l.claimed;
  out["returned"] = l.returned;
  out["noticed"] = l.noticed;
  return out;
}

static Lease leaseFromStoreDocOrThrow(const json& d) {
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

// The store's decoders: the *OrThrow bodies above throw (nlohmann on a missing or mistyped
// field, parseStored on an unknown name); what leaves the model is a Result.
Result<Lease> leaseFromStoreDoc(const json& d) {
  return fields::decodedOrStatus([&] { return leaseFromStoreDocOrThrow(d); });
}

}  // namespace allot::model
