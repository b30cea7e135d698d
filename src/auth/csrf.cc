#include "auth/csrf.h"

#include <sodium.h>

namespace allot::auth {

std::string csrfTokenFor(std::string_view sessionSecret) {
  // BLAKE2b keys are at most 64 bytes: key with the secret's own hash, which keeps all of it.
  unsigned char key[crypto_generichash_KEYBYTES];
  crypto_generichash(key, sizeof key, reinterpret_cast<const unsigned char*>(sessionSecret.data()),
                     sessionSecret.size(), nullptr, 0);
  static constexpr std::string_view kLabel = "allot console csrf v1";
  unsigned char out[32];
  crypto_generichash(out, sizeof out, reinterpret_cast<const unsigned char*>(kLabel.data()),
                     kLabel.size(), key, sizeof key);
  char hex[65];
  sodium_bin2hex(hex, sizeof hex, out, sizeof out);
  return hex;
}

bool csrfTokenMatches(std::string_view sessionSecret, std::string_view presented) {
  const std::string expected = csrfTokenFor(sessionSecret);
  if (presented.size() != expected.size()) return false;
  return sodium_memcmp(expected.data(), presented.data(), expected.size()) == 0;
}

}  // namespace allot::auth
