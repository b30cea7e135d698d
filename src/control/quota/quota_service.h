#pragma once
// QuotaService: what each team is guaranteed and may share (docs/scheduler.md, "Quotas"): a
// team's guarantee by GPU model, its borrow and lend limits, fair-share weight and contour
// limits (platform admins), and its split among the team's projects (team-admins); and where
// each team stands, as the last scheduling pass saw it.
//
// Owns: the quota fields of the directory's teams and projects, and the quota positions the
// scheduler records. Reaches the scheduler through `queueChanged` (a new guarantee may let work
// run). Threading: allotd's I/O thread.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "control/change.h"
#include "control/contours.h"
#include "control/principal.h"
#include "control/world.h"
#include "model/model.h"

namespace allot::control {

// A change to a team's quota settings; a field left empty keeps its value. `guaranteed`, when
// set, replaces the whole map.
struct QuotaUpdate {
  std::optional<std::map<std::string, int>> guaranteed;
  std::optional<int> borrowLimit;  // -1 = no limit
  std::optional<int> lendLimit;    // -1 = all of its idle guarantee
  std::optional<double> weight;
  std::optional<bool> lendDedicated;
  // Merged into the team's limits: a number sets the contour's limit, nullopt removes it.
  std::map<std::string, std::optional<int>> contourLimits;
  // Accept a guarantee that, with the other teams', promises more than the pool has (for a fleet
  // about to grow); the scheduler then scales every guarantee down in proportion.
  bool overcommit = false;
};

// A team's quota as `GET /teams/{team}/quota` shows it.
struct TeamQuotaView {
  model::Team team;
  std::vector<model::Project> projects;   // the team's projects holding a split of its guarantee
  std::optional<TeamQuotaStatus> status;  // absent until a scheduling pass has seen the team
};

class QuotaService {
 public:
  QuotaService(World& world, ContourOptions contours, std::function<void()> queueChanged)
      : world_(world), contours_(std::move(contours)), queueChanged_(std::move(queueChanged)) {}

  Result<Change<model::Team>> setTeam(const Principal& p, const std::string& team,
                                      const QuotaUpdate& update);
  Result<TeamQuotaView> ofTeam(const Principal& p, const std::string& team) const;
  Result<Change<model::Project>> setProject(const Principal& p, const std::string& team,
                                            const std::string& project,
                                            std::map<std::string, int> guaranteed);
  // The scheduling pass records where each team stands; ofTeam shows it.
  void setStatus(std::map<std::string, TeamQuotaStatus> status) {
    world_.quotaStatus = std::move(status);
  }

 private:
  World& world_;
  ContourOptions contours_;
  std::function<void()> queueChanged_;
};

}  // namespace allot::control
