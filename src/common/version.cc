#include "common/version.h"

#include <cctype>
#include <string_view>

namespace allot {
namespace {

bool allDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// Numbers by value: leading zeros do not count and length decides before digits do.
int compareNumbers(std::string_view a, std::string_view b) {
  while (a.size() > 1 && a.front() == '0') a.remove_prefix(1);
  while (b.size() > 1 && b.front() == '0') b.remove_prefix(1);
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return a.compare(b) < 0 ? -1 : (a == b ? 0 : 1);
}

std::string_view nextPart(std::string_view s, size_t& pos) {
  if (pos >= s.size()) return "0";
  size_t end = s.find('.', pos);
  if (end == std::string_view::npos) end = s.size();
  std::string_view part = s.substr(pos, end - pos);
  pos = end + 1;
  return part;
}

}  // namespace

bool isDottedVersion(const std::string& value) {
  if (value.empty() || value.size() > 32) return false;
  int parts = 0;
  size_t pos = 0;
  std::string_view s = value;
  while (pos <= s.size()) {
    size_t end = s.find('.', pos);
    if (end == std::string_view::npos) end = s.size();
    if (!allDigits(s.substr(pos, end - pos))) return false;
    ++parts;
    pos = end + 1;
  }
  return parts <= 4;
}

int compareVersions(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    std::string_view pa = nextPart(a, i), pb = nextPart(b, j);
    const bool na = allDigits(pa), nb = allDigits(pb);
    int c = 0;
    if (na && nb) {
      c = compareNumbers(pa, pb);
    } else if (na != nb) {
      c = na ? -1 : 1;
    } else {
      c = pa.compare(pb) < 0 ? -1 : (pa == pb ? 0 : 1);
    }
    if (c != 0) return c;
  }
  return 0;
}

bool versionAtLeast(const std::string& have, const std::string& want) {
  if (want.empty()) return true;
  if (have.empty() || !isDottedVersion(have)) return false;
  return compareVersions(have, want) >= 0;
}

}  // namespace allot
