#pragma once
// ImageCacheService: each host's image cache as allotd sees and runs it (docs/environments.md,
// "The cache"). Agents report what their caches hold (kept in memory: an agent sends its whole
// cache on each connection); admins ask a host to prune what no job uses, or to fetch an image
// ahead of the jobs that will want it. The requests are kept with the host (Host::imagePrunes,
// imagePrepulls) and reach its agent in the desired state; a prepull is dropped once the agent
// reports the image cached or its pull failed.
//
// Who may: what a shared host caches may be any team's, so only platform admins see or run it;
// a host dedicated to a team is also its members' to see and its team-admins' to run. For a
// team-admin, a prepull must pass the team's allow-list as a job's image would. A prepull pulls
// with a team's registry login (the team named, or the host's pool's), as that team's job would,
// and the cached image then serves only jobs that bring the same login. Hosts a caller may not
// see are NotFound. Threading: allotd's I/O thread.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "control/change.h"
#include "control/principal.h"
#include "control/world.h"
#include "model/image_cache.h"

namespace allot::control {

// A host's cache as `allot image list` shows it.
struct HostImages {
  std::string host;
  std::optional<model::ImageReport> report;  // none until its agent reported one
  TimeMs reportedAt = 0;
  int64_t prunesAsked = 0;
  std::vector<std::string> prepullsAsked;  // still to be done
};

class ImageCacheService {
 public:
  ImageCacheService(const Clock& clock, World& world) : clock_(clock), world_(world) {}

  Result<HostImages> hostImages(const Principal& p, const std::string& host) const;
  // Asks the host's agent to remove every image no job uses.
  Result<Change<HostImages>> prune(const Principal& p, const std::string& host);
  // Asks each host of `hosts`, or of `pool` ("shared", or a team's dedicated hosts), to fetch
  // `image`; the hosts asked. Only hosts whose agents run images are asked; a host named that
  // does not is FailedPrecondition. The pull presents `team`'s registry login, when it has one
  // there ("" = the team of the host's pool, if any): the caller must be one who may submit work
  // to the team, the image must pass its allow-list, and every host must be one the team's jobs
  // may use (shared, or the team's). Errors name the field: image, hosts, pool, team.
  Result<Change<std::vector<std::string>>> prepull(const Principal& p, const std::string& image,
                                                   const std::vector<std::string>& hosts,
                                                   const std::string& pool,
                                                   const std::string& team = "");
  // Whose registry login host `h`'s prepull of `ref` presents: the team named for it, else the
  // team of the host's pool; "" = none, and none either when that team's jobs may not run there
  // (loginMayGoTo), which a handover since the request can make so.
  static std::string prepullTeam(const model::Host& h, const std::string& ref);
  // Whether `team`'s registry login may be sent to host `h`: only where that team's own jobs
  // would take it, the shared pool and the team's dedicated hosts. Another team's host may be
  // root-held by that team, which could read the login off its agent.
  static bool loginMayGoTo(const model::Host& h, const std::string& team);
  // An agent's report: kept, and the prepulls it shows done (cached, or failed) dropped.
  Change<int> agentReport(const std::string& host, model::ImageReport report);
  // The CUDA version image `ref` declares it needs (NVIDIA_REQUIRE_CUDA), as the hosts that hold
  // it and that `team`'s work may use (the pool, its own) reported: the lowest of their needs;
  // "" when none does or one reported none. Only hosts online and in service count.
  std::string knownMinCuda(const std::string& ref, const std::string& team) const;
  // The hosts online and in service whose last report lists image `ref` (the scheduler's
  // locality tie-break).
  std::vector<std::string> hostsHolding(const std::string& ref) const;

 private:
  bool reportCounts(const std::string& host) const;
  // The host, if `p` may see it; NotFound otherwise.
  Result<const model::Host*> visible(const Principal& p, const std::string& host) const;
  // PermissionDenied unless `p` may run the host's cache.
  Status mayRun(const Principal& p, const model::Host& h) const;
  HostImages view(const model::Host& h) const;

  struct Reported {
    model::ImageReport report;
    TimeMs at = 0;
  };
  const Clock& clock_;
  World& world_;
  std::map<std::string, Reported> reports_;
  // Image reference -> the hosts whose last report holds it -> its NVIDIA_REQUIRE_CUDA ("" none).
  std::map<std::string, std::map<std::string, std::string>> holders_;
};

}  // namespace allot::control
