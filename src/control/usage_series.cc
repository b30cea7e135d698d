#include "control/usage_series.h"

#include <algorithm>
#include <unordered_map>

namespace allot::control {

int64_t seriesBucketCount(TimeMs from, TimeMs to, TimeMs step) {
  if (to <= from || step <= 0) return 0;
  return (to - from + step - 1) / step;
}

std::vector<SeriesRow> usageSeries(const LedgerIndex& index, const SeriesQuery& q,
                                   const UsageWithin& within, int64_t maxWithinCalls) {
  const int64_t buckets = seriesBucketCount(q.from, q.to, q.step);
  if (buckets == 0) return {};
  const int dim = static_cast<int>(q.by);
  const int teamDim = static_cast<int>(UsageBy::kTeam);
  const int64_t teamId = q.team.empty() ? -1 : index.nameId(UsageBy::kTeam, q.team);
  if (!q.team.empty() && teamId < 0) return {};
  // Rows only for groups that appear: a large fleet has many users, few in any one window.
  std::unordered_map<uint32_t, SeriesRow> rows;
  int64_t withinCalls = 0;
  for (const LedgerInterval& i : index.intervals()) {
    // Not `break` on a late start: intervals are in seq order, which is start order only while
    // the clock never stepped back.
    if (i.start >= q.to) continue;
    if (teamId >= 0 && i.names[teamDim] != teamId) continue;
    const TimeMs end = i.end == 0 ? q.now : i.end;
    const TimeMs s = std::max(i.start, q.from);
    const TimeMs e = std::min(end, q.to);
    if (e <= s) continue;
    auto [it, fresh] = rows.try_emplace(i.names[dim]);
    SeriesRow& row = it->second;
    if (fresh) {
      row.milliGpuMs.assign(buckets, 0);
      row.usage.assign(buckets, {});
    }
    const int64_t first = (s - q.from) / q.step;
    const int64_t last = (e - 1 - q.from) / q.step;
    for (int64_t b = first; b <= last; ++b) {
      const TimeMs bs = std::max(s, q.from + b * q.step);
      const TimeMs be = std::min(e, q.from + (b + 1) * q.step);
      const int64_t amount = i.milli * (be - bs);
      row.milliGpuMs[b] += amount;
      if (i.usage.empty()) continue;
      telemetry::UsageCell use;
      if (bs == i.start && be == end) {
        use = i.usage;
      } else {
        std::optional<telemetry::UsageCell> part;
        if (within && withinCalls < maxWithinCalls) {
          ++withinCalls;
          part = within(i.openSeq, bs, be);
        }
        use = part ? *part : i.usage.scaled(be - bs, std::max<TimeMs>(1, end - i.start));
      }
      // As in the usage report: samples never measure more than was allocated.
      if (use.measured > amount) use = use.scaled(amount, use.measured);
      row.usage[b] += use;
    }
  }
  std::vector<SeriesRow> out;
  out.reserve(rows.size());
  const auto& names = index.names(q.by);
  for (auto& [id, row] : rows) {
    row.name = names[id];
    out.push_back(std::move(row));
  }
  std::sort(out.begin(), out.end(),
            [](const SeriesRow& a, const SeriesRow& b) { return a.name < b.name; });
  return out;
}

}  // namespace allot::control
