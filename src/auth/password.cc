#include "auth/password.h"

#include <sodium.h>

namespace allot::auth {

PasswordCost PasswordCost::interactive() {
  return {crypto_pwhash_OPSLIMIT_INTERACTIVE, crypto_pwhash_MEMLIMIT_INTERACTIVE};
}

PasswordCost PasswordCost::minimum() {
  return {crypto_pwhash_OPSLIMIT_MIN, crypto_pwhash_MEMLIMIT_MIN};
}

Status checkPasswordPolicy(std::string_view password, const char* field) {
  if (password.size() < kMinPasswordBytes)
    return Status::InvalidArgument(
        std::string(field) + ": at least " + std::to_string(kMinPasswordBytes) + " characters",
        field);
  if (password.size() > kMaxPasswordBytes)
    return Status::InvalidArgument(
        std::string(field) + ": at most " + std::to_string(kMaxPasswordBytes) + " bytes", field);
  if (password.find('\0') != std::string_view::npos)
    return Status::InvalidArgument(std::string(field) + ": must not contain NUL bytes", field);
  return Status::Ok();
}

Result<std::string> hashPassword(std::string_view password, PasswordCost cost) {
  char out[crypto_pwhash_STRBYTES];
  if (crypto_pwhash_str(out, password.data(), password.size(), cost.opsLimit, cost.memLimitBytes) !=
      0)
    return Status::Unavailable("password hashing ran out of memory");
  return std::string(out);
}

bool verifyPassword(const std::string& hash, std::string_view password) {
  if (hash.empty() || hash.size() >= crypto_pwhash_STRBYTES) return false;
  return crypto_pwhash_str_verify(hash.c_str(), password.data(), password.size()) == 0;
}

}  // namespace allot::auth
