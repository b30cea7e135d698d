#pragma once
// Who is calling: a user (with a role in each of their teams, and perhaps platform admin) or a
// host's agent.

#include <map>
#include <optional>
#include <string>

#include "model/model.h"

namespace allot::control {

struct Principal {
  enum class Kind { kUser, kHost };
  Kind kind = Kind::kUser;
  std::string name;  // user name or host name
  bool platformAdmin = false;
  std::map<std::string, model::Role> teams;  // team -> the user's role in it

  bool isAdmin() const { return kind == Kind::kUser && platformAdmin; }
  bool isUser() const { return kind == Kind::kUser; }
  bool inTeam(const std::string& team) const { return isUser() && teams.count(team) > 0; }
  std::optional<model::Role> roleIn(const std::string& team) const {
    auto it = teams.find(team);
    if (!isUser() || it == teams.end()) return std::nullopt;
    return it->second;
  }
  // The team a request that names none is about: the caller's only team; empty when the caller
  // has none or several (then the request must name one).
  std::string soleTeam() const { return teams.size() == 1 ? teams.begin()->first : ""; }

  static Principal ofUser(const model::User& u) {
    Principal p;
    p.name = u.name;
    p.platformAdmin = u.platformAdmin;
    p.teams = u.teams;
    return p;
  }
};

}  // namespace allot::control
