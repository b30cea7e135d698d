#pragma once
// Secrets allotd must read back (a team's registry password), sealed at rest with a key of its
// own: libsodium's crypto_secretbox (XSalsa20-Poly1305) under a random nonce. Unlike tokens
// (common/secrets.h, kept as hashes), these are handed on, so they are encrypted, not hashed.
// The key lives in a file beside the database, never in it: a copy of the store alone reads
// nothing.

#include <string>
#include <string_view>

#include "common/status.h"

namespace allot {

inline constexpr size_t kSealKeyBytes = 32;

// A new random key (initSecrets() first).
std::string newSealKey();
// "v1." + base64(nonce || ciphertext).
std::string seal(std::string_view key, std::string_view plain);
// Fails (InvalidArgument) on anything seal() did not make with this key.
Result<std::string> unseal(std::string_view key, std::string_view sealed);
// Reads the key kept at `path`, or makes one there (mode 0600, refusing to follow a link) when
// there is none. A file of another size, or one others may read, is an error naming it.
Result<std::string> loadOrCreateSealKey(const std::string& path);

}  // namespace allot
