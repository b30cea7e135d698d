#pragma once
// The usage report over time: the window cut into equal buckets, and per group (team, project,
// user, ...) the allocated GPU time and its measured use in each bucket. One pass over the
// ledger's intervals, each clipped to the buckets it overlaps. Pure, like usage_report.h: the
// index, the query, `now` and a way to read measured use inside part of an interval in.

#include <cstdint>
#include <string>
#include <vector>

#include "control/usage_report.h"

namespace allot::control {

struct SeriesQuery {
  UsageBy by = UsageBy::kTeam;
  TimeMs from = 0;   // the first bucket's start
  TimeMs to = 0;     // exclusive; the last bucket ends here (and may be shorter than step)
  TimeMs step = 0;   // > 0
  TimeMs now = 0;    // intervals still open count up to here
  std::string team;  // only this team's intervals; empty = every team
};

struct SeriesRow {
  std::string name;
  std::vector<int64_t> milliGpuMs;          // allocated, per bucket, exact
  std::vector<telemetry::UsageCell> usage;  // measured, used and idle, per bucket
};

// How many buckets [from, to) makes with `step`: ceil((to - from) / step).
int64_t seriesBucketCount(TimeMs from, TimeMs to, TimeMs step);

// Rows sorted by name, one per group holding GPUs in some bucket. A piece of an interval (its
// part inside one bucket) that is the whole interval adds its measured total; a cut piece asks
// `within`, while at most `maxWithinCalls` have been asked, else takes the total prorated by time
// (as the usage report does when the detail is gone). allotd's `within` reads telemetry.db on
// the I/O thread, about 26 us a read (docs/benchmarks.md): the default budget bounds that to
// ~100 ms. Summed over the buckets, allocation equals usageReport's for the same window exactly.
std::vector<SeriesRow> usageSeries(const LedgerIndex& index, const SeriesQuery& q,
                                   const UsageWithin& within = {}, int64_t maxWithinCalls = 4'000);

}  // namespace allot::control
