#pragma once
// Human passwords: the policy a new password must meet, and Argon2id hashing (libsodium's
// crypto_pwhash_str, whose string carries its own salt and cost, so older hashes keep verifying
// after the cost changes). Hashing is slow and memory-hungry on purpose: call these on a
// WorkerPool thread, never on allotd's I/O thread. Thread-safe; call initSecrets() first.

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace allot::auth {

// The cost of one Argon2id hash. The default is libsodium's "interactive" level: 2 passes over
// 64 MiB, about 50-100 ms on one core of a server. A login is rare next to API calls (the CLI
// and console trade the password for a token once), so this is cheap for allotd and expensive
// for anyone guessing against a stolen database; with kHashWorkers threads the hashing memory
// peaks at 128 MiB. Tests use the minimum cost.
struct PasswordCost {
  unsigned long long opsLimit;
  size_t memLimitBytes;
  static PasswordCost interactive();
  static PasswordCost minimum();  // for tests only
};

// At least 10 characters (bytes), so that a guess costs something; at most 1024, so a request
// cannot make us hash a megabyte; no NUL bytes (libsodium takes the length, but C clients do
// not). The field name goes into the error.
inline constexpr size_t kMinPasswordBytes = 10;
inline constexpr size_t kMaxPasswordBytes = 1024;
Status checkPasswordPolicy(std::string_view password, const char* field);

// The crypto_pwhash_str string ("$argon2id$v=19$m=...").
Result<std::string> hashPassword(std::string_view password, PasswordCost cost);
// True when `password` matches `hash`; false for a wrong password or a malformed hash.
bool verifyPassword(const std::string& hash, std::string_view password);

}  // namespace allot::auth
