#pragma once
// Callers for the services' unit tests, made by hand rather than through the access service
// (which the tests of other services do not build).

#include <string>

#include "control/principal.h"

namespace allot::control::testsupport {

inline Principal userIn(const std::string& name, const std::string& team, model::Role role) {
  Principal p;
  p.name = name;
  p.teams[team] = role;
  return p;
}

inline Principal platformAdmin(const std::string& name = "root") {
  Principal p;
  p.name = name;
  p.platformAdmin = true;
  return p;
}

}  // namespace allot::control::testsupport
