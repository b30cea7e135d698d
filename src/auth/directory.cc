#include "auth/directory.h"

#include <algorithm>
#include <cctype>

#include "common/hex.h"

namespace allot::auth {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

int rank(model::Role r) {
  switch (r) {
    case model::Role::kViewer:
      return 0;
    case model::Role::kMember:
      return 1;
    default:
      return 2;
  }
}

}  // namespace

std::string escapeFilterValue(std::string_view value) {
  std::string out;
  for (unsigned char c : value) {
    if (c == '*' || c == '(' || c == ')' || c == '\\' || c == '\0') {
      out += '\\';
      appendHexByte(out, c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string buildFilter(const std::string& filterTemplate, std::string_view user,
                        std::string_view dn) {
  // One pass over the template: a value put in is never read again for a placeholder, so a user
  // name spelled "al{dn}ice" stays that name and cannot turn into "alice".
  std::string out;
  for (size_t i = 0; i < filterTemplate.size();) {
    const std::string_view rest = std::string_view(filterTemplate).substr(i);
    if (rest.starts_with("{user}")) {
      out += escapeFilterValue(user);
      i += 6;
    } else if (rest.starts_with("{dn}")) {
      out += escapeFilterValue(dn);
      i += 4;
    } else {
      out += filterTemplate[i++];
    }
  }
  return out;
}

Result<DirectoryAccess> mapGroups(const LdapConfig& config, const DirectoryUser& user) {
  std::map<std::string, const std::vector<TeamRole>*> byName;
  for (const auto& [group, grants] : config.groups) byName[lower(group)] = &grants;
  std::vector<std::string> adminGroups;
  for (const auto& g : config.platformAdminGroups) adminGroups.push_back(lower(g));
  DirectoryAccess access;
  for (const auto& group : user.groups) {
    const std::string key = lower(group);
    if (std::find(adminGroups.begin(), adminGroups.end(), key) != adminGroups.end())
      access.platformAdmin = true;
    auto it = byName.find(key);
    if (it == byName.end()) continue;
    for (const auto& grant : *it->second) {
      auto [pos, added] = access.teams.emplace(grant.team, grant.role);
      if (!added && rank(grant.role) > rank(pos->second)) pos->second = grant.role;
    }
  }
  if (access.teams.empty() && !access.platformAdmin)
    return Status::PermissionDenied("user '" + user.name +
                                    "' is in no directory group that grants access to Allot; ask "
                                    "an administrator to add you to one");
  return access;
}

Result<TeamRole> parseTeamRole(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return Status::InvalidArgument("expected 'team:role', got '" + text + "'");
  auto role = model::parseRole(text.substr(colon + 1));
  if (!role || !model::isTeamRole(*role))
    return Status::InvalidArgument("role must be viewer, member or team-admin in '" + text + "'");
  return TeamRole{text.substr(0, colon), *role};
}

}  // namespace allot::auth
