#pragma once
// Case-insensitive comparison of ASCII text (HTTP header values, host names, content codings).
// Boost.Beast's own iequals (Boost 1.74, Debian 12) reads one character past both strings once
// they differ in case (its slow loop loads the next pair before it tests the count): harmless
// inside Beast's header storage, which a "\r\n" follows, but out of bounds on any other view.
// fuzz/http_fuzz.cc found it under ASan through sessionOfHost.

#include <string_view>

namespace allot {

constexpr char asciiLower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

constexpr bool asciiIEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (asciiLower(a[i]) != asciiLower(b[i])) return false;
  }
  return true;
}

}  // namespace allot
