// The admin's settings of hosts and GPUs: dedication to a team and shared
// (fractional) mode. They change where the scheduler may place work, not what runs now: running
// jobs stay, and agents hear nothing. See host_service.h and docs/api.md.

#include <spdlog/spdlog.h>

#include <algorithm>

#include "control/authz.h"
#include "control/hosts/host_service.h"
#include "control/names.h"

namespace allot::control {

Result<Change<model::Host>> HostService::dedicateHost(const Principal& p, const std::string& name,
                                                      const std::string& team) {
  auto it = world_.hosts.find(name);
  if (it == world_.hosts.end() || !authz::canSeeHost(p, it->second))
    return Status::NotFound("no host '" + name + "'");
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "dedicate hosts"));
  if (!team.empty() && !world_.teams.count(team))
    return Status::NotFound("no team '" + team + "'", "team");
  model::Host& h = it->second;
  if (!team.empty()) {
    // A GPU of a dedicated host may be dedicated only to the host's own team.
    for (const auto& g : h.gpus) {
      if (!g.dedicatedTo.empty() && g.dedicatedTo != team) {
        return Status::FailedPrecondition("GPU " + std::to_string(g.index) + " of host " + name +
                                          " is dedicated to team '" + g.dedicatedTo +
                                          "'; undedicate it first");
      }
    }
  }
  h.dedicatedTo = team;
  Change<model::Host> c;
  c.value = h;
  c.batch.add(store::PutHost{h});
  spdlog::info("host dedication: host={} team={} by={}", name, team.empty() ? "(pool)" : team,
               p.name);
  queueChanged_();
  return c;
}

Result<Change<model::Host>> HostService::setHostContour(const Principal& p, const std::string& name,
                                                        const std::string& contour) {
  auto it = world_.hosts.find(name);
  if (it == world_.hosts.end() || !authz::canSeeHost(p, it->second))
    return Status::NotFound("no host '" + name + "'");
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "move hosts between contours"));
  ALLOT_RETURN_IF_ERROR(options_.contours.check(contour, "contour"));
  model::Host& h = it->second;
  const std::string before = h.contour;
  h.contour = contour;
  Change<model::Host> c;
  c.value = h;
  c.batch.add(store::PutHost{h});
  spdlog::info("host contour: host={} from={} to={} by={}", name, before, contour, p.name);
  queueChanged_();
  return c;
}

Result<Change<model::Host>> HostService::setGpu(const Principal& p, const std::string& name,
                                                int index, const GpuSettings& s) {
  auto it = world_.hosts.find(name);
  if (it == world_.hosts.end() || !authz::canSeeHost(p, it->second))
    return Status::NotFound("no host '" + name + "'");
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "change GPU settings"));
  model::Host& h = it->second;
  auto g = std::find_if(h.gpus.begin(), h.gpus.end(),
                        [&](const model::Gpu& x) { return x.index == index; });
  if (g == h.gpus.end())
    return Status::NotFound("host " + name + " has no GPU " + std::to_string(index), "index");
  if (s.dedicatedTo && !s.dedicatedTo->empty()) {
    const std::string& team = *s.dedicatedTo;
    if (!world_.teams.count(team))
      return Status::NotFound("no team '" + team + "'", "dedicated_to");
    if (!h.dedicatedTo.empty() && h.dedicatedTo != team)
      return Status::InvalidArgument("dedicated_to: host " + name + " is dedicated to team '" +
                                         h.dedicatedTo + "'; its GPUs cannot go to team '" + team +
                                         "'",
                                     "dedicated_to");
  }
  if (s.dedicatedTo) g->dedicatedTo = *s.dedicatedTo;
  if (s.shared) g->shared = *s.shared;
  Change<model::Host> c;
  c.value = h;
  c.batch.add(store::PutHost{h});
  spdlog::info("gpu settings: host={} gpu={} dedicated_to={} shared={} by={}", name, index,
               g->dedicatedTo.empty() ? "(none)" : g->dedicatedTo, g->shared, p.name);
  queueChanged_();
  return c;
}

}  // namespace allot::control
