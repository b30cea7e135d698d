// The API's JSON form of a session profile: durations as specs ("30m"), ISO 8601 times (its store
// document: store/documents_leases.cc).

#include "common/time_format.h"
#include "model/json.h"
#include "model/json_fields.h"
#include "model/json_parts.h"

namespace allot::model {

json profileResourcesJson(const ProfileResources& r, bool withMilli) {
  json j = {{"gpus", r.gpus}, {"cpu_millis", r.cpuMillis}, {"memory_mib", r.memoryMib}};
  if (withMilli) j["gpu_milli"] = r.gpuMilli;
  return j;
}

json profileSpec(const Profile& p) {
  return {{"name", p.name},
          {"description", p.description},
          {"command", p.command},
          {"image", fields::nullIfEmpty(p.image)},
          {"env", p.env},
          {"defaults", profileResourcesJson(p.defaults, true)},
          {"maxima", profileResourcesJson(p.maxima, false)},
          {"storage", p.storage},
          {"visible_to", p.visibleTo},
          {"created_by", p.createdBy}};
}

json toJson(const Profile& p) {
  json out = profileSpec(p);
  out["team"] = fields::nullIfEmpty(p.team);
  out["idle"] = {{"threshold_percent", p.idleThresholdPct},
                 {"after", formatDurationSpec(p.idleAfterMs)}};
  out["max_lifetime"] = formatDurationSpec(p.maxLifetimeMs);
  out["created_at"] = formatIso8601(p.createdAt);
  return out;
}

}  // namespace allot::model
