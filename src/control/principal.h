#pragma once
// Who is calling: a user (with a role and a team) or a host's agent.

#include <string>

#include "model/model.h"

namespace allot::control {

struct Principal {
  enum class Kind { kUser, kHost };
  Kind kind = Kind::kUser;
  std::string name;  // user name or host name
  std::string team;  // empty for a platform admin without a team, and for hosts
  model::Role role = model::Role::kMember;

  bool isAdmin() const { return kind == Kind::kUser && role == model::Role::kPlatformAdmin; }
  bool isUser() const { return kind == Kind::kUser; }
};

}  // namespace allot::control
