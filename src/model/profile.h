#pragma once
// Session profiles: what an interactive session runs and within which limits.
// Part of model.h: plain structs, no behaviour beyond small helpers.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "model/directory.h"

namespace allot::model {

// A session profile (docs/sessions.md): what an interactive session runs and within which limits.
// Platform-wide (team "", made by platform admins, seen by the teams in visibleTo, or by every
// team when that is empty) or a team's own (made by its team-admins, seen by that team only).
// Names are unique cluster-wide.
struct ProfileResources {
  int gpus = 0;
  int gpuMilli = 1000;  // defaults only: the share of each GPU
  int cpuMillis = 0;
  int64_t memoryMib = 0;
  bool operator==(const ProfileResources&) const = default;
};

struct Profile {
  std::string name;
  std::string team;  // "" = platform-wide
  std::string description;
  std::vector<std::string> command;
  // The OCI image the session runs in (docs/environments.md); "" = the team's default image, or
  // on the host when the team has none.
  std::string image;
  std::map<std::string, std::string> env;
  ProfileResources defaults;
  ProfileResources maxima;                         // 0 = no maximum (gpuMilli unused)
  std::vector<std::string> storage = {"scratch"};  // of local, scratch, shared
  double idleThresholdPct = 5;
  int64_t idleAfterMs = 30 * 60'000;
  int64_t maxLifetimeMs = 0;           // 0 = none
  std::vector<std::string> visibleTo;  // platform-wide only; empty = every team
  std::string createdBy;
  TimeMs createdAt = 0;
};

}  // namespace allot::model
