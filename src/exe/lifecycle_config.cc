#include "exe/lifecycle_config.h"

#include "common/time_format.h"

namespace allot {
namespace {

Status readDuration(const toml::table& section, const char* section_name, const char* key,
                    int64_t& into, bool zeroAllowed) {
  auto text = section[key].value<std::string>();
  if (!text) {
    if (section.contains(key))
      return Status::InvalidArgument(std::string(section_name) + "." + key +
                                     ": expected a duration such as \"10m\"");
    return Status::Ok();
  }
  auto ms = parseDurationMs(*text);
  if (!ms.ok() || *ms < 0 || (*ms == 0 && !zeroAllowed))
    return Status::InvalidArgument(std::string(section_name) + "." + key + ": '" + *text +
                                   "' is not a " + (zeroAllowed ? "" : "positive ") +
                                   "duration such as \"10m\"");
  into = *ms;
  return Status::Ok();
}

Status knownProfile(const std::map<std::string, control::HookProfile>& profiles,
                    const std::string& key, const std::string& name) {
  if (name.empty() || profiles.count(name)) return Status::Ok();
  return Status::InvalidArgument(key + ": no profile '" + name + "' in [hooks.profiles]");
}

}  // namespace

Status readLifecycleConfig(const toml::table& tbl,
                           const std::map<std::string, control::HookProfile>& profiles,
                           control::HostLifecycleOptions& out) {
  if (const toml::table* h = tbl["health"].as_table()) {
    out.commission = (*h)["commission"].value_or(out.commission);
    out.minDriver = (*h)["min_driver"].value_or(out.minDriver);
    out.burnIn = (*h)["burn_in"].value_or(out.burnIn);
    auto disk = (*h)["min_free_disk_mib"].value<int64_t>();
    if (disk) {
      if (*disk < 0) return Status::InvalidArgument("health.min_free_disk_mib: must be >= 0");
      out.minFreeDiskMib = *disk;
    }
    ALLOT_RETURN_IF_ERROR(readDuration(*h, "health", "interval", out.healthIntervalMs, true));
    ALLOT_RETURN_IF_ERROR(readDuration(*h, "health", "burn_in_duration", out.burnInMs, false));
  }
  if (const toml::table* h = tbl["handover"].as_table()) {
    out.wipeHome = (*h)["wipe_home"].value_or(out.wipeHome);
    out.defaultProfile = (*h)["default_profile"].value_or(out.defaultProfile);
    out.commissionProfile = (*h)["commission_profile"].value_or(out.commissionProfile);
    ALLOT_RETURN_IF_ERROR(readDuration(*h, "handover", "timeout", out.taskTimeoutMs, false));
    ALLOT_RETURN_IF_ERROR(knownProfile(profiles, "handover.default_profile", out.defaultProfile));
    ALLOT_RETURN_IF_ERROR(
        knownProfile(profiles, "handover.commission_profile", out.commissionProfile));
    if (const toml::table* teams = (*h)["team_profiles"].as_table()) {
      for (const auto& [team, node] : *teams) {
        const std::string key = "handover.team_profiles." + std::string(team.str());
        auto name = node.value<std::string>();
        if (!name) return Status::InvalidArgument(key + ": expected a profile name");
        ALLOT_RETURN_IF_ERROR(knownProfile(profiles, key, *name));
        out.teamProfiles[std::string(team.str())] = *name;
      }
    }
  }
  return Status::Ok();
}

}  // namespace allot
