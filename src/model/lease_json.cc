// The API's JSON form of a lease (its store document: store/documents_leases.cc).

#include "common/time_format.h"
#include "model/json.h"
#include "model/json_fields.h"
#include "model/json_parts.h"

namespace allot::model {

namespace {

using fields::nullIfEmpty;
using fields::timeOrNull;

json countOrNull(int n) { return n > 0 ? json(n) : json(nullptr); }

}  // namespace

json leaseRequest(const Lease& l) {
  return {{"id", l.id},       {"team", l.team},     {"state", leaseStateName(l.state)},
          {"hosts", l.hosts}, {"reason", l.reason}, {"requested_by", l.requestedBy}};
}

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

}  // namespace allot::model
