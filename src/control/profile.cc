#include "control/profile.h"

#include <set>

#include "control/images/image_policy.h"
#include "control/names.h"

namespace allot::control {
namespace {

constexpr size_t kMaxDescriptionBytes = 1024;
constexpr size_t kMaxCommandArgs = 4096;
constexpr size_t kMaxEnvEntries = 1024;
constexpr int kMaxGpus = 1024;

Status bad(const std::string& field, const std::string& why) {
  return Status::InvalidArgument(field + ": " + why, field);
}

// One resource: not negative, and within its maximum when there is one (0 = none).
Status withinMaximum(const char* name, int64_t value, int64_t maximum) {
  const std::string field = std::string("defaults.") + name;
  if (value < 0) return bad(field, "must not be negative");
  if (maximum < 0) return bad(std::string("maxima.") + name, "must not be negative");
  if (maximum > 0 && value > maximum)
    return bad(field, std::to_string(value) + " is above the maximum " + std::to_string(maximum));
  return Status::Ok();
}

}  // namespace

bool isStorageType(const std::string& s) { return s == "local" || s == "scratch" || s == "shared"; }

Status validateProfile(const model::Profile& p, const std::map<std::string, model::Team>& teams) {
  ALLOT_RETURN_IF_ERROR(validateName(p.name, "name"));
  if (p.description.size() > kMaxDescriptionBytes)
    return bad("description", "at most " + std::to_string(kMaxDescriptionBytes) + " bytes");
  if (p.command.empty() || p.command[0].empty())
    return bad("command", "must name a program (for example jupyter-server)");
  if (p.command.size() > kMaxCommandArgs)
    return bad("command", "at most " + std::to_string(kMaxCommandArgs) + " arguments");
  if (!p.image.empty()) {
    // A team's profile is held to the team's allow-list now; a platform-wide one to each
    // team's when a session of that team starts from it (as a job's image is).
    auto ref = model::parseImageRef(p.image);
    if (!ref.ok()) return ref.status();  // names "image"
    if (auto team = teams.find(p.team); !p.team.empty() && team != teams.end())
      ALLOT_RETURN_IF_ERROR(checkImageAllowed(p.team, team->second.imageAllow, *ref));
  }
  if (p.env.size() > kMaxEnvEntries)
    return bad("env", "at most " + std::to_string(kMaxEnvEntries) + " variables");
  for (const auto& [key, value] : p.env) {
    if (key.empty() || key.find('=') != std::string::npos || key.find('\0') != std::string::npos)
      return bad("env", "'" + key + "' is not a variable name");
  }

  const model::ProfileResources& d = p.defaults;
  const model::ProfileResources& m = p.maxima;
  if (d.gpus > kMaxGpus || m.gpus > kMaxGpus)
    return bad(d.gpus > kMaxGpus ? "defaults.gpus" : "maxima.gpus",
               "at most " + std::to_string(kMaxGpus));
  ALLOT_RETURN_IF_ERROR(withinMaximum("gpus", d.gpus, m.gpus));
  ALLOT_RETURN_IF_ERROR(withinMaximum("cpu_millis", d.cpuMillis, m.cpuMillis));
  ALLOT_RETURN_IF_ERROR(withinMaximum("memory_mib", d.memoryMib, m.memoryMib));
  if (d.gpuMilli < 1 || d.gpuMilli > 1000)
    return bad("defaults.gpu_milli", "must be between 1 and 1000");
  if (d.gpuMilli < 1000 && d.gpus != 1)
    return bad("defaults.gpu_milli", "a fraction of a GPU goes with gpus = 1");

  if (p.storage.empty()) return bad("storage", "must allow at least one storage type");
  std::set<std::string> seen;
  for (const auto& s : p.storage) {
    if (!isStorageType(s))
      return bad("storage", "'" + s + "' is not a storage type (local, scratch, shared)");
    if (!seen.insert(s).second) return bad("storage", "'" + s + "' is listed twice");
  }

  if (p.idleThresholdPct < 0 || p.idleThresholdPct > 100)
    return bad("idle.threshold_percent", "must be between 0 and 100");
  if (p.idleAfterMs <= 0) return bad("idle.after", "must be longer than 0");
  if (p.maxLifetimeMs < 0) return bad("max_lifetime", "must not be negative");

  if (!p.team.empty() && !p.visibleTo.empty())
    return bad("visible_to", "a team's profile is visible to its team only; leave it empty");
  for (const auto& t : p.visibleTo) {
    if (!teams.count(t)) return bad("visible_to", "no team '" + t + "'");
  }
  return Status::Ok();
}

}  // namespace allot::control
