#pragma once
// The usage report over the allocation ledger: allocated GPU time by team, project, user, host or
// GPU model within a window, and the most GPUs each group held at once. Pure: the index, the
// window and `now` in, rows out.

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

struct UsageRow {
  std::string name;
  int64_t milliGpuMs = 0;  // allocated: milli-GPUs x milliseconds, exact
  int64_t peakMilli = 0;   // most milli-GPUs held at once within the window
  std::map<std::string, int64_t> milliGpuMsByModel;  // the allocation split by GPU model
};

// Rows sorted by name, one per group that held GPUs within [from, to).
std::vector<UsageRow> usageReport(const LedgerIndex& index, const UsageQuery& q);

}  // namespace allot::control
