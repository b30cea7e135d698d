#include "control/disruption.h"

#include <algorithm>
#include <set>

#include "common/time_format.h"

namespace allot::control {

std::vector<StoppedJob> workStoppedOn(const World& world, const std::vector<std::string>& hosts,
                                      TimeMs stopAt, int64_t graceMs) {
  std::set<int64_t> seen;
  std::vector<StoppedJob> out;
  for (const auto& host : hosts) {
    auto held = world.hostJobs().find(host);
    if (held == world.hostJobs().end()) continue;
    for (int64_t id : held->second) {
      const model::Job& j = world.job(id);
      const TimeMs from = j.startedAt ? j.startedAt : j.scheduledAt;
      if (j.maxRuntimeMs > 0 && from + j.maxRuntimeMs + graceMs <= stopAt) continue;
      if (!seen.insert(id).second) continue;
      int gpus = 0;
      for (const auto& rank : j.ranks) {
        if (rank.host == host) gpus += static_cast<int>(rank.gpuIndices.size());
      }
      out.push_back({id, j.team, j.user, j.name, host, gpus});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const StoppedJob& a, const StoppedJob& b) { return a.id < b.id; });
  return out;
}

nlohmann::json impactJson(const std::vector<StoppedJob>& stopped, TimeMs stopAt) {
  nlohmann::json jobs = nlohmann::json::array();
  for (const auto& s : stopped) {
    jobs.push_back({{"job", s.id},
                    {"team", s.team},
                    {"user", s.user},
                    {"name", s.name},
                    {"host", s.host},
                    {"gpus", s.gpus}});
  }
  return {{"would_stop", std::move(jobs)}, {"stops_at", formatIso8601(stopAt)}};
}

}  // namespace allot::control
