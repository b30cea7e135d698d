#pragma once
// The [login] and [ldap] settings of allotd (deploy/allotd.example.toml, docs/login.md).

#include <cstddef>
#include <cstdint>

#include "auth/directory.h"
#include "auth/failure_limiter.h"
#include "auth/password.h"

namespace allot::auth {

struct LoginConfig {
  // `allot login --user`: the API token it earns.
  int64_t cliTokenTtlMs = 30LL * 24 * 3600 * 1000;
  // Console sessions end this long after login whatever happens, or after this long unused.
  int64_t sessionLifetimeMs = 12LL * 3600 * 1000;
  int64_t sessionIdleMs = 3600LL * 1000;
  // Failed logins: per account (a guess at one person's password) and per client address (one
  // host spraying guesses over many accounts).
  FailureLimit accountLimit{5, 15 * 60 * 1000};
  FailureLimit addressLimit{20, 15 * 60 * 1000};
  // Hashing and directory binds run on this many threads; more than `queue` waiting is a 503.
  size_t hashWorkers = 2;
  size_t hashQueue = 32;
  PasswordCost passwordCost = PasswordCost::interactive();
  // The session cookie gets `Secure` when allotd serves HTTPS (set by the TLS listener config).
  bool secureCookies = false;
  LdapConfig ldap;
};

}  // namespace allot::auth
