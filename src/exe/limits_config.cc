#include "exe/limits_config.h"

#include "control/idle_policy.h"

namespace allot {
namespace {

// An integer key within [lo, hi]; absent keeps `into`.
template <typename T>
Status readInt(const toml::table& section, const char* key, int64_t lo, int64_t hi, T& into) {
  if (!section.contains(key)) return Status::Ok();
  auto v = section[key].value<int64_t>();
  if (!v || *v < lo || *v > hi)
    return Status::InvalidArgument("limits." + std::string(key) +
                                   ": expected a whole number from " + std::to_string(lo) + " to " +
                                   std::to_string(hi) + (lo == 0 ? " (0 = no limit)" : ""));
  into = static_cast<T>(*v);
  return Status::Ok();
}

}  // namespace

Status checkWebhookPrefix(const std::string& prefix) {
  auto parsed = control::parseWebhookUrl(prefix);
  if (!parsed.ok())
    return Status::InvalidArgument("idle.webhook_allow: '" + prefix +
                                   "': " + parsed.status().message());
  constexpr std::string_view kScheme = "http://";
  if (prefix.find('/', kScheme.size()) == std::string::npos ||
      prefix.find('?') != std::string::npos)
    return Status::InvalidArgument("idle.webhook_allow: '" + prefix +
                                   "': end the host with '/' (http://hooks.example.com/), "
                                   "with no query");
  return Status::Ok();
}

Status readLimitsConfig(const toml::table& tbl, control::JobLimits& jobs,
                        control::LogStoreOptions& logs, std::vector<std::string>& webhookAllow,
                        api::ConnectionLimits& connections, int64_t& writeReserveBytes) {
  if (const toml::table* l = tbl["limits"].as_table()) {
    ALLOT_RETURN_IF_ERROR(
        readInt(*l, "max_active_jobs_per_user", 0, 10'000'000, jobs.maxActiveJobsPerUser));
    ALLOT_RETURN_IF_ERROR(
        readInt(*l, "max_active_jobs_per_team", 0, 10'000'000, jobs.maxActiveJobsPerTeam));
    int64_t userMib = jobs.maxActiveJobBytesPerUser >> 20,
            teamMib = jobs.maxActiveJobBytesPerTeam >> 20;
    ALLOT_RETURN_IF_ERROR(readInt(*l, "max_active_job_mib_per_user", 0, 1 << 20, userMib));
    ALLOT_RETURN_IF_ERROR(readInt(*l, "max_active_job_mib_per_team", 0, 1 << 20, teamMib));
    jobs.maxActiveJobBytesPerUser = userMib << 20;
    jobs.maxActiveJobBytesPerTeam = teamMib << 20;
    ALLOT_RETURN_IF_ERROR(readInt(*l, "job_cpu_floor_millis", 0, 64'000, jobs.cpuFloorMillis));
    ALLOT_RETURN_IF_ERROR(readInt(*l, "job_memory_floor_mib", 0, 1 << 20, jobs.memoryFloorMib));
    ALLOT_RETURN_IF_ERROR(readInt(*l, "max_log_bytes", 0, int64_t{1} << 40, logs.maxBytes));
    int64_t reserveMib = logs.reserveBytes >> 20;
    ALLOT_RETURN_IF_ERROR(readInt(*l, "log_disk_reserve_mib", 0, int64_t{1} << 30, reserveMib));
    logs.reserveBytes = reserveMib << 20;
    int64_t writeReserveMib = writeReserveBytes >> 20;
    ALLOT_RETURN_IF_ERROR(
        readInt(*l, "write_disk_reserve_mib", 0, int64_t{1} << 30, writeReserveMib));
    writeReserveBytes = writeReserveMib << 20;
    ALLOT_RETURN_IF_ERROR(readInt(*l, "max_connections", 0, 1'000'000, connections.total));
    ALLOT_RETURN_IF_ERROR(
        readInt(*l, "max_connections_per_client", 0, 1'000'000, connections.perClient));
    if (logs.maxBytes > 0 && logs.maxBytes < 4096)
      return Status::InvalidArgument("limits.max_log_bytes: at least 4096, or 0 for no cap");
  }
  if (const toml::node* allow = tbl["idle"]["webhook_allow"].node()) {
    const toml::array* list = allow->as_array();
    if (!list)
      return Status::InvalidArgument("idle.webhook_allow: expected a list of URL prefixes");
    webhookAllow.clear();
    for (const auto& item : *list) {
      auto prefix = item.value<std::string>();
      if (!prefix) return Status::InvalidArgument("idle.webhook_allow: expected strings");
      ALLOT_RETURN_IF_ERROR(checkWebhookPrefix(*prefix));
      webhookAllow.push_back(*prefix);
    }
  }
  return Status::Ok();
}

}  // namespace allot
