#pragma once
// What the access operations take and give: new accounts, account changes, tokens shown once,
// and what a directory (LDAP) login found. docs/access.md.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/model.h"

namespace allot::control {

// A new account. Local humans may log in with a password (its Argon2id hash, made off the I/O
// thread by the caller); service accounts only with tokens.
struct NewUser {
  std::string name;
  std::map<std::string, model::Role> teams;  // team -> team role
  bool platformAdmin = false;
  model::UserKind kind = model::UserKind::kHuman;
  std::string passwordHash;  // empty: no password login
  // The directory's (LDAP posixAccount) uid and gid; -1: allotd allocates them (docs/access.md).
  int64_t uid = -1;
  int64_t gid = -1;
};
struct CreatedUser {
  model::User user;
  std::string token;  // a first API token, shown once
};
// A change to an account; a field left empty keeps its value.
struct UserUpdate {
  std::optional<bool> platformAdmin;
  std::optional<bool> disabled;
  std::optional<std::string> passwordHash;  // "" removes password login
  // With passwordHash: the token of the caller's own that survives the change (a user changing
  // their own password stays logged in there); every other login and console token of the user
  // ends, since whoever knew the old password may hold one.
  std::string keepTokenId;
};
// A named API token for `user` (empty: the caller), valid for `ttlMs` (0 = no expiry).
struct NewToken {
  std::string user;
  std::string name;
  int64_t ttlMs = 0;
};
struct CreatedToken {
  model::ApiToken token;
  std::string secret;  // shown once
};
// What a directory login found: the user's teams and roles from their groups, their Unix ids.
struct DirectoryLogin {
  std::string name;
  std::map<std::string, model::Role> teams;
  bool platformAdmin = false;
  int64_t uid = -1;
  int64_t gid = -1;
};

}  // namespace allot::control
