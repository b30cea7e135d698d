// JSON forms of a session profile: durations as specs ("30m") and ISO 8601 times for the API,
// milliseconds for the store's document.

#include "common/time_format.h"
#include "model/json.h"
#include "model/json_fields.h"

namespace allot::model {

namespace {

json resourcesJson(const ProfileResources& r, bool withMilli) {
  json j = {{"gpus", r.gpus}, {"cpu_millis", r.cpuMillis}, {"memory_mib", r.memoryMib}};
  if (withMilli) j["gpu_milli"] = r.gpuMilli;
  return j;
}

ProfileResources resourcesFromJson(const json& j) {
  ProfileResources r;
  if (!j.is_object()) return r;
  r.gpus = j.value("gpus", 0);
  r.gpuMilli = j.value("gpu_milli", 1000);
  r.cpuMillis = j.value("cpu_millis", 0);
  r.memoryMib = j.value("memory_mib", int64_t{0});
  return r;
}

// What the API and the store both say of a profile: what a session of it runs, and with what.
json profileSpec(const Profile& p) {
  return {{"name", p.name},
          {"description", p.description},
          {"command", p.command},
          {"env", p.env},
          {"defaults", resourcesJson(p.defaults, true)},
          {"maxima", resourcesJson(p.maxima, false)},
          {"storage", p.storage},
          {"visible_to", p.visibleTo},
          {"created_by", p.createdBy}};
}

}  // namespace

json toJson(const Profile& p) {
  json out = profileSpec(p);
  out["team"] = fields::nullIfEmpty(p.team);
  out["idle"] = {{"threshold_percent", p.idleThresholdPct},
                 {"after", formatDurationSpec(p.idleAfterMs)}};
  out["max_lifetime"] = formatDurationSpec(p.maxLifetimeMs);
  out["created_at"] = formatIso8601(p.createdAt);
  return out;
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

// The store's decoders: the *OrThrow bodies above throw (nlohmann on a missing or mistyped
// field, parseStored on an unknown name); what leaves the model is a Result.
Result<Profile> profileFromStoreDoc(const json& d) {
  return fields::decodedOrStatus([&] { return profileFromStoreDocOrThrow(d); });
}

}  // namespace allot::model
