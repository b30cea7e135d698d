#pragma once
// Text forms of time for people and the API: ISO 8601 UTC out; ISO 8601 or relative forms
// ("+2h", "-30m", "now") in. Durations: "90s", "15m", "2h", "1d", or plain seconds.

#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"

namespace allot {

// "2026-11-30T05:29:58Z"; the empty string for 0 (never happened).
std::string formatIso8601(TimeMs t);
// Accepts "2026-11-30T05:29:58Z", "2026-11-30T05:29:58.123+03:00", "2026-11-30", "now",
// "+2h", "-15m".
Result<TimeMs> parseTime(std::string_view text, TimeMs now);
// "90s", "15m", "2h", "1d", "1.5h", "250ms"; at most kMaxDurationMs.
Result<TimeMs> parseDurationMs(std::string_view text);
// 100 years: longer than anything Allot times, and far inside what a time plus it can hold.
inline constexpr TimeMs kMaxDurationMs = TimeMs{36'500} * 86'400'000;
// The shortest text parseDurationMs reads back as exactly `ms`: "2h", "90m", "1500ms"; "0s" for
// 0. For durations people declared, shown back as they would write them.
std::string formatDurationSpec(TimeMs ms);
// "3m12s", "1h05m", "450ms": short and readable, for tables.
std::string formatDuration(TimeMs ms);

}  // namespace allot
