#pragma once
// Contours: every host and every job belongs to one (dev, test, prod by default; allotd.toml
// [contours]). A job runs only on hosts of its own contour, and submitting into a contour needs
// at least the contour's submit role in the job's team (authz::canSubmitToContour). Teams may be
// limited in GPUs per contour (model::Quota::contourLimits). See docs/contours.md.

#include <string>
#include <vector>

#include "common/status.h"
#include "model/model.h"

namespace allot::control {

// One contour and the least role in a team that may submit work into it.
struct ContourRule {
  std::string name;
  model::Role submitRole = model::Role::kMember;
};

struct ContourOptions {
  std::vector<ContourRule> contours = {{"dev", model::Role::kMember},
                                       {"test", model::Role::kMember},
                                       {"prod", model::Role::kTeamAdmin}};
  // New hosts, jobs that name none, and documents written before contours.
  std::string defaultContour = "dev";

  // The rule of a configured contour; nullptr when there is none of that name.
  const ContourRule* find(const std::string& name) const;
  // "dev, test, prod", for messages.
  std::string namesText() const;
  // Names valid and distinct, at least one, and the default among them; errors name the
  // allotd.toml key at fault.
  Status validate() const;
  // InvalidArgument naming `field` unless `name` is a configured contour.
  Status check(const std::string& name, const char* field) const;
};

}  // namespace allot::control
