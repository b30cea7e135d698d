// The store's documents of leases and session profiles (store/documents.h).

#include "model/json_fields.h"
#include "model/json_parts.h"
#include "store/documents.h"

namespace allot::store {

using namespace model;  // NOLINT(google-build-using-namespace): a codec of the model's types

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
  out["dedicated_before"] = l.dedicatedBefore;
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
  // Absent from a lease stored before it was kept: its hosts go back to the pool, as they did.
  l.dedicatedBefore = d.value("dedicated_before", std::map<std::string, std::string>{});
  return l;
}

Result<Lease> leaseFromStoreDoc(const json& d) {
  return fields::decodedOrStatus([&] { return leaseFromStoreDocOrThrow(d); });
}

static ProfileResources resourcesFromJson(const json& j) {
  ProfileResources r;
  if (!j.is_object()) return r;
  r.gpus = j.value("gpus", 0);
  r.gpuMilli = j.value("gpu_milli", 1000);
  r.cpuMillis = j.value("cpu_millis", 0);
  r.memoryMib = j.value("memory_mib", int64_t{0});
  return r;
}

json toStoreDoc(const Profile& p) {
  json out = profileSpec(p);
  out["team"] = p.team;
  out["idle_threshold_percent"] = p.idleThresholdPct;
  out["idle_after_ms"] = p.idleAfterMs;
  out["max_lifetime_ms"] = p.maxLifetimeMs;
  out["created_ms"] = p.createdAt;
  return out;
}

static Profile profileFromStoreDocOrThrow(const json& d) {
  Profile p;
  p.name = d.value("name", "");
  p.team = d.value("team", "");
  p.description = d.value("description", "");
  p.command = d.value("command", std::vector<std::string>{});
  if (d.contains("image") && d["image"].is_string()) p.image = d["image"].get<std::string>();
  p.env = d.value("env", std::map<std::string, std::string>{});
  if (d.contains("defaults")) p.defaults = resourcesFromJson(d.at("defaults"));
  if (d.contains("maxima")) p.maxima = resourcesFromJson(d.at("maxima"));
  p.storage = d.value("storage", std::vector<std::string>{"scratch"});
  p.idleThresholdPct = d.value("idle_threshold_percent", 5.0);
  p.idleAfterMs = d.value("idle_after_ms", int64_t{30 * 60'000});
  p.maxLifetimeMs = d.value("max_lifetime_ms", int64_t{0});
  p.visibleTo = d.value("visible_to", std::vector<std::string>{});
  p.createdBy = d.value("created_by", "");
  p.createdAt = d.value("created_ms", TimeMs{0});
  return p;
}

Result<Profile> profileFromStoreDoc(const json& d) {
  return fields::decodedOrStatus([&] { return profileFromStoreDocOrThrow(d); });
}

}  // namespace allot::store
