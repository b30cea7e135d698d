#include "agent/image/digest.h"

#include <sodium.h>

#include "common/hex.h"

namespace allot::agent {

std::string lowerHex(const unsigned char* bytes, size_t n) {
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) appendHexByte(out, bytes[i]);
  return out;
}

std::string sha256Hex(std::string_view bytes) {
  unsigned char d[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(d, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return lowerHex(d, sizeof d);
}

}  // namespace allot::agent
