#pragma once
// RegistryLogins: each team's credentials for the registries its images come from
// (docs/environments.md, "Registry credentials"). Kept in the team's record with the password
// sealed (common/sealed_box.h); shown back as registry and username only. The password leaves
// allotd in one place: the desired state of that team's own job in an image from that registry,
// while the job may still start (authFor), to the agent that pulls it.
//
// Who may: platform admins and the team's team-admins set and remove them; whoever sees the team
// sees which registries it has a login for. Threading: allotd's I/O thread.

#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "control/change.h"
#include "control/principal.h"
#include "control/world.h"

namespace allot::control {

class RegistryLogins {
 public:
  // `sealKey`: ClusterOptions::sealKey, or "" for a random key of this process's.
  RegistryLogins(const Clock& clock, World& world, const std::string& sealKey);

  // Sets (or replaces) `team`'s login to `registry` (HOST[:PORT], as references name it).
  // Errors name the field: registry, username, password.
  Result<Change<model::Team>> set(const Principal& p, const std::string& team,
                                  const std::string& registry, const std::string& username,
                                  const std::string& password);
  Result<Change<model::Team>> remove(const Principal& p, const std::string& team,
                                     const std::string& registry);
  // What the agent pulling `job`'s image presents: its team's login to the image's registry,
  // unsealed; nullopt when the job has no image, its team has no login there, or the login does
  // not open (allotd's seal key was replaced: logged, and the pull goes without).
  std::optional<model::DesiredJob::RegistryAuth> authFor(const model::Job& job) const;
  // The same for a prepull of `image` with `team`'s login ("" = none); `what` names it in the log.
  std::optional<model::RegistryAuth> authFor(const std::string& team, const std::string& image,
                                             const std::string& what) const;

 private:
  Result<model::Team*> manageable(const Principal& p, const std::string& team);

  const Clock& clock_;
  World& world_;
  std::string key_;
};

}  // namespace allot::control
