#include "common/time_format.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace allot {
namespace {

bool parseInt(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

// A field of a date or time: digits only (from_chars alone takes "-1"), as many as it has.
bool parseDigits(std::string_view s, int64_t& out) {
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return parseInt(s, out);
}

int daysInMonth(int64_t year, int64_t month) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : kDays[month - 1];
}

}  // namespace

std::string formatIso8601(TimeMs t) {
  if (t == 0) return "";
  // Down, not toward zero: a millisecond before 1970 is 1969-12-31T23:59:59.
  const int64_t secs = t / 1000 - (t % 1000 < 0 ? 1 : 0);
  // Years 0000-9999 by arithmetic: every job in a reply has two or three times, and gmtime_r with
  // strftime (the locale's machinery) took 1,650 instructions each. Outside them chrono's
  // year_month_day wraps (a year of 65,555 came out as 0019), so they are tested first.
  constexpr int64_t kFirstOfYear0 = -62'167'219'200, kLastOfYear9999 = 253'402'300'799;
  if (secs < kFirstOfYear0 || secs > kLastOfYear9999) {  // strftime's %Y for more digits
    time_t raw = static_cast<time_t>(secs);
    struct tm tm {};
    // int64 milliseconds stay within struct tm's years (±292 million); were one not to, the
    // number, never a zeroed date.
    if (gmtime_r(&raw, &tm) == nullptr) return std::to_string(t) + "ms";
    char buf[48];
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
  }
  using namespace std::chrono;
  const sys_seconds at{seconds{secs}};
  const sys_days day = floor<days>(at);
  const year_month_day date{day};
  const int year = static_cast<int>(date.year());
  const int64_t ofDay = (at - day).count();
  char text[] = "0000-00-00T00:00:00Z";
  auto put = [&text](size_t pos, int digits, int64_t value) {
    for (int i = digits - 1; i >= 0; --i, value /= 10)
      text[pos + i] = static_cast<char>('0' + value % 10);
  };
  put(0, 4, year);
  put(5, 2, static_cast<unsigned>(date.month()));
  put(8, 2, static_cast<unsigned>(date.day()));
  put(11, 2, ofDay / 3600);
  put(14, 2, ofDay / 60 % 60);
  put(17, 2, ofDay % 60);
  return std::string(text, sizeof text - 1);
}

Result<TimeMs> parseDurationMs(std::string_view text) {
  if (text.empty()) return Status::InvalidArgument("empty duration");
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  std::string num(text.substr(0, i));
  std::string_view unit = text.substr(i);
  double value = 0;
  try {
    size_t used = 0;
    value = std::stod(num, &used);
    if (used != num.size()) throw std::invalid_argument("trailing");
  } catch (...) {
    return Status::InvalidArgument("'" + std::string(text) +
                                   "' is not a duration (use e.g. 90s, 15m, 2h, 1d)");
  }
  double mult = 1000;
  if (unit.empty() || unit == "s")
    mult = 1000;
  else if (unit == "ms")
    mult = 1;
  else if (unit == "m")
    mult = 60'000;
  else if (unit == "h")
    mult = 3'600'000;
  else if (unit == "d")
    mult = 86'400'000;
  else
    return Status::InvalidArgument("'" + std::string(text) +
                                   "' has an unknown unit (use ms, s, m, h or d)");
  // Compared as a double before the cast, which is undefined past int64's range (found by
  // fuzz/text_fuzz.cc); a time plus or minus the duration cannot overflow either.
  if (value * mult > double(kMaxDurationMs))
    return Status::InvalidArgument("'" + std::string(text) + "' is longer than 100 years");
  return static_cast<TimeMs>(value * mult);
}

Result<TimeMs> parseTime(std::string_view text, TimeMs now) {
  if (text == "now") return now;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    auto d = parseDurationMs(text.substr(1));
    if (!d.ok()) return d.status();
    return text[0] == '+' ? now + *d : now - *d;
  }
  // YYYY-MM-DD[THH:MM[:SS[.fff]]][Z|+HH:MM|-HH:MM]
  auto bad = [&] {
    return Status::InvalidArgument(
        "'" + std::string(text) +
        "' is not a time (use ISO 8601 like 2026-11-30T14:00:00Z, or +2h)");
  };
  if (text.size() < 10 || text[4] != '-' || text[7] != '-') return bad();
  int64_t y, mo, d, h = 0, mi = 0, s = 0, frac = 0;
  if (!parseDigits(text.substr(0, 4), y) || !parseDigits(text.substr(5, 2), mo) ||
      !parseDigits(text.substr(8, 2), d))
    return bad();
  size_t pos = 10;
  int64_t offsetMin = 0;
  if (pos < text.size() && (text[pos] == 'T' || text[pos] == ' ')) {
    if (text.size() < pos + 6 || text[pos + 3] != ':') return bad();
    if (!parseDigits(text.substr(pos + 1, 2), h) || !parseDigits(text.substr(pos + 4, 2), mi))
      return bad();
    pos += 6;
    if (pos < text.size() && text[pos] == ':') {
      if (!parseDigits(text.substr(pos + 1, 2), s)) return bad();
      pos += 3;
      if (pos < text.size() && text[pos] == '.') {
        size_t start = ++pos;
        while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
        std::string f(text.substr(start, pos - start));
        f = (f + "000").substr(0, 3);
        if (!parseDigits(f, frac)) return bad();
      }
    }
    if (pos < text.size()) {
      if (text[pos] == 'Z') {
        ++pos;
      } else if (text[pos] == '+' || text[pos] == '-') {
        int64_t oh, om;
        if (text.size() < pos + 6 || text[pos + 3] != ':' ||
            !parseDigits(text.substr(pos + 1, 2), oh) ||
            !parseDigits(text.substr(pos + 4, 2), om) || oh > 23 || om > 59)
          return bad();
        offsetMin = (oh * 60 + om) * (text[pos] == '+' ? 1 : -1);
        pos += 6;
      }
    }
  }
  if (pos != text.size()) return bad();
  if (mo < 1 || mo > 12 || d < 1 || d > daysInMonth(y, mo) || h > 23 || mi > 59 || s > 60)
    return bad();
  struct tm tm {};
  tm.tm_year = static_cast<int>(y - 1900);
  tm.tm_mon = static_cast<int>(mo - 1);
  tm.tm_mday = static_cast<int>(d);
  tm.tm_hour = static_cast<int>(h);
  tm.tm_min = static_cast<int>(mi);
  tm.tm_sec = static_cast<int>(s);
  time_t secs = timegm(&tm);
  return (static_cast<TimeMs>(secs) - offsetMin * 60) * 1000 + frac;
}

std::string formatDurationSpec(TimeMs ms) {
  if (ms <= 0) return "0s";
  for (auto [unit, size] :
       {std::pair{"d", 86'400'000LL}, {"h", 3'600'000LL}, {"m", 60'000LL}, {"s", 1'000LL}}) {
    if (ms % size == 0) return std::to_string(ms / size) + unit;
  }
  return std::to_string(ms) + "ms";
}

std::string formatDuration(TimeMs ms) {
  if (ms < 0) ms = 0;
  char buf[48];
  if (ms < 1000) {
    snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(ms));
  } else if (ms < 59'950) {  // 59,950 ms and more would round to "60.0s"
    snprintf(buf, sizeof buf, "%.1fs", ms / 1000.0);
  } else if (ms < 3'600'000) {
    ms = std::max<TimeMs>(ms, 60'000);  // the last 50 ms of a minute: as "%.1f" would round them
    snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(ms / 60'000),
             static_cast<long long>((ms / 1000) % 60));
  } else if (ms < 86'400'000) {
    snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(ms / 3'600'000),
             static_cast<long long>((ms / 60'000) % 60));
  } else {
    snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(ms / 86'400'000),
             static_cast<long long>((ms / 3'600'000) % 24));
  }
  return buf;
}

}  // namespace allot
