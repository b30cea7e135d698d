#pragma once
// Dotted version numbers of drivers and toolkits ("535.104.05", "12.4"), compared numerically part
// by part, so that 535.104 is newer than 535.54 (text order says the opposite). Shared by the
// scheduler (job minimums), allotd's input checks and the agent's health check.

#include <string>

namespace allot {

// 1 to 4 dotted parts of decimal digits, at most 32 characters: "550", "535.104.05", "12.4".
bool isDottedVersion(const std::string& value);

// <0, 0, >0 as `a` is older than, the same as, or newer than `b`. Missing parts count as 0
// ("12" == "12.0"). A part that is not a number (a provider's "simulated", "N/A") compares as text
// after every number, so it never passes for a newer numeric version by accident of length.
int compareVersions(const std::string& a, const std::string& b);

// `have` is at least `want`. An empty `have` (not reported) satisfies no minimum.
bool versionAtLeast(const std::string& have, const std::string& want);

}  // namespace allot
