#pragma once
// The usage report over the allocation ledger: allocated GPU time by team, project, user, host or
// GPU model within a window, how much of it the GPUs really worked and how much sat idle (from
// the samples attributed to each interval), and the most GPUs each group held at once. Pure: the
// index, the window, `now` and a way to read usage inside part of an interval in; rows out.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "control/ledger_index.h"

namespace allot::control {

std::optional<UsageBy> parseUsageBy(const std::string& s);
const char* usageByName(UsageBy by);

struct UsageQuery {
  UsageBy by = UsageBy::kTeam;
  TimeMs from = 0;   // inclusive
  TimeMs to = 0;     // exclusive
  TimeMs now = 0;    // intervals still open count up to here
  std::string team;  // only this team's intervals; empty = every team
};

// The measured use of one interval (by its open entry's seq) within [from, to); nullopt when the
// history no longer holds that span in detail.
using UsageWithin =
    std::function<std::optional<telemetry::UsageCell>(int64_t openSeq, TimeMs from, TimeMs to)>;

struct UsageRow {
  std::string name;
  int64_t milliGpuMs = 0;      // allocated: milli-GPUs x milliseconds, exact
  telemetry::UsageCell usage;  // measured, used and idle, in the same units
  int64_t peakMilli = 0;       // most milli-GPUs held at once within the window
  std::map<std::string, int64_t> milliGpuMsByModel;  // the allocation split by GPU model
};

// Rows sorted by name, one per group that held GPUs within [from, to). An interval wholly inside
// the window adds its running total of measured use; one the window cuts asks `within` for the
// part inside (and, if that is gone, takes its total prorated by time). Without `within`, a cut
// interval counts its total prorated.
std::vector<UsageRow> usageReport(const LedgerIndex& index, const UsageQuery& q,
                                  const UsageWithin& within = {});

}  // namespace allot::control
