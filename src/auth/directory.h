#pragma once
// Directory (LDAP / Active Directory) logins: what the [ldap] config says, what a login learns
// about the user, and how their groups become teams and roles. The pure parts (filter escaping,
// group mapping) live here; LdapDirectory (ldap_directory.h) talks to the server.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/model.h"

namespace allot::auth {

struct TeamRole {
  std::string team;
  model::Role role = model::Role::kMember;
};

struct LdapConfig {
  std::string url;  // ldap://host:389 or ldaps://host:636; empty = no directory logins
  bool startTls = false;
  std::string bindDn;        // the service account that finds users and reads groups
  std::string bindPassword;  // from bind_password or bind_password_file; never logged
  std::string userBase;
  std::string userFilter = "(uid={user})";    // {user}: the login name, escaped (RFC 4515)
  std::string groupBase;                      // empty: read memberOf from the user's entry
  std::string groupFilter = "(member={dn})";  // {dn}: the user's DN, {user}: the name; escaped
  std::string groupNameAttribute = "cn";
  // Group (its name attribute or its whole DN, case-insensitive) -> the team roles it grants.
  std::map<std::string, std::vector<TeamRole>> groups;
  std::vector<std::string> platformAdminGroups;
  int networkTimeoutMs = 5000;     // connecting
  int operationTimeoutMs = 10000;  // each bind and search
  // How often the teams of directory users who hold tokens are read again, so that a user taken
  // out of a group loses what it granted without logging in again.
  int64_t recheckIntervalMs = 15 * 60 * 1000;

  bool enabled() const { return !url.empty(); }
};

// What a successful directory login learned.
struct DirectoryUser {
  std::string name;
  std::string dn;
  std::vector<std::string> groups;  // each group's DN and its name attribute's values
  int64_t uid = -1;                 // posixAccount uidNumber, -1 when absent
  int64_t gid = -1;
};

struct DirectoryAccess {
  std::map<std::string, model::Role> teams;
  bool platformAdmin = false;
};

// RFC 4515 escaping of a value inside a search filter: '*', '(', ')', '\' and NUL become \2a,
// \28, \29, \5c, \00, so a user name cannot change the filter's meaning.
std::string escapeFilterValue(std::string_view value);
// `filterTemplate` with {user} and {dn} replaced by escaped values.
std::string buildFilter(const std::string& filterTemplate, std::string_view user,
                        std::string_view dn);
// The teams and roles the user's groups grant; in several groups for one team, the highest
// role wins. PermissionDenied (naming the user, not the groups) when no group is mapped.
Result<DirectoryAccess> mapGroups(const LdapConfig& config, const DirectoryUser& user);
// "team:role" (role viewer, member or team-admin) from [ldap.groups].
Result<TeamRole> parseTeamRole(const std::string& text);

}  // namespace allot::auth
