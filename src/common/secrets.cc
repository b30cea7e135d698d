#include "common/secrets.h"

#include <sodium.h>

#include <cstdio>
#include <cstdlib>

namespace allot {

void initSecrets() {
  if (sodium_init() < 0) {
    std::fprintf(stderr, "fatal: libsodium failed to initialise\n");
    std::abort();
  }
}

std::string newToken(std::string_view prefix) {
  unsigned char raw[32];
  randombytes_buf(raw, sizeof raw);
  char b64[sodium_base64_ENCODED_LEN(32, sodium_base64_VARIANT_URLSAFE_NO_PADDING)];
  sodium_bin2base64(b64, sizeof b64, raw, sizeof raw, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  return std::string(prefix) + "_" + b64;
}

std::string hashToken(std::string_view token) {
  unsigned char out[32];
  crypto_generichash(out, sizeof out, reinterpret_cast<const unsigned char*>(token.data()),
                     token.size(), nullptr, 0);
  char hex[65];
  sodium_bin2hex(hex, sizeof hex, out, sizeof out);
  return hex;
}

std::string toBase64(std::string_view bytes) {
  std::string out(sodium_base64_ENCODED_LEN(bytes.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()),
                    bytes.size(), sodium_base64_VARIANT_ORIGINAL);
  out.resize(out.size() - 1);  // the encoder's terminating NUL
  return out;
}

bool hashesEqual(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace allot
