#pragma once
// LdapDirectory: a directory login against an LDAP server with OpenLDAP's libldap. Each call
// opens its own connections (one as the service account to find the user and read groups, one
// to bind as the user), so calls may run on several WorkerPool threads at once. Blocking, with
// the network and operation timeouts of the config: never call it on the I/O thread.

#include "auth/directory.h"

namespace allot::auth {

class LdapDirectory {
 public:
  explicit LdapDirectory(LdapConfig config) : config_(std::move(config)) {}

  // Finds the user, checks the password with a bind as them, reads their groups.
  // Unauthenticated: no such user, several matches, a wrong or empty password.
  // Unavailable: the server is unreachable, or the service account cannot bind or search.
  // Error text never holds a password.
  Result<DirectoryUser> login(const std::string& user, const std::string& password) const;
  // Whether the user filter finds an entry for `user` (as the service account; no password).
  // Unavailable as for login.
  Result<bool> hasUser(const std::string& user) const;
  // The user's entry and groups as they are now, as the service account (no password): what a
  // login would learn. NotFound only when a search that worked found no entry; Unauthenticated
  // when it found several; Unavailable when it could not tell (the user base missing included).
  Result<DirectoryUser> lookup(const std::string& user) const;
  const LdapConfig& config() const { return config_; }

 private:
  LdapConfig config_;
};

}  // namespace allot::auth
