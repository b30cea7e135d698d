#include "common/utf8.h"

#include <cstdint>
#include <cstring>

namespace allot {

bool isValidUtf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    // Eight ASCII bytes at a time: most text is ASCII.
    uint64_t eight;
    if (i + sizeof eight <= n) {
      std::memcpy(&eight, s.data() + i, sizeof eight);
      if ((eight & 0x8080808080808080ULL) == 0) {
        i += sizeof eight;
        continue;
      }
    }
    const auto c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint8_t lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return false;  // a continuation byte first, an overlong C0/C1, or F5 and above
    }
    if (n - i < len) return false;
    const auto second = static_cast<uint8_t>(s[i + 1]);
    if (second < lo || second > hi) return false;
    for (size_t k = 2; k < len; ++k) {
      const auto b = static_cast<uint8_t>(s[i + k]);
      if (b < 0x80 || b > 0xBF) return false;
    }
    i += len;
  }
  return true;
}

std::string cutUtf8(std::string_view s, size_t maxBytes) {
  if (s.size() <= maxBytes) return std::string(s);
  size_t end = maxBytes;
  // Back off continuation bytes (10xxxxxx) to the start of the character that did not fit.
  while (end > 0 && (static_cast<uint8_t>(s[end]) & 0xC0) == 0x80) --end;
  return std::string(s.substr(0, end));
}

}  // namespace allot
