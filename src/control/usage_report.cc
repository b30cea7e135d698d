#include "control/usage_report.h"

#include <algorithm>
#include <numeric>
#include <queue>

namespace allot::control {
namespace {

constexpr const char* kByNames[kUsageDimensions] = {"team", "project", "user", "host", "gpu-model"};

// One group's holds that are still running at the sweep's position: ends in a min-heap.
struct Group {
  bool seen = false;
  int64_t milliGpuMs = 0;
  telemetry::UsageCell usage;
  int64_t held = 0;
  int64_t peak = 0;
  std::priority_queue<std::pair<TimeMs, int64_t>, std::vector<std::pair<TimeMs, int64_t>>,
                      std::greater<>>
      ends;
};

}  // namespace

std::optional<UsageBy> parseUsageBy(const std::string& s) {
  for (int i = 0; i < kUsageDimensions; ++i) {
    if (s == kByNames[i]) return static_cast<UsageBy>(i);
  }
  return std::nullopt;
}

const char* usageByName(UsageBy by) { return kByNames[static_cast<int>(by)]; }

std::vector<UsageRow> usageReport(const LedgerIndex& index, const UsageQuery& q,
                                  const UsageWithin& within) {
  const auto& intervals = index.intervals();
  const int dim = static_cast<int>(q.by);
  const int teamDim = static_cast<int>(UsageBy::kTeam);
  const int modelDim = static_cast<int>(UsageBy::kGpuModel);
  const int64_t teamId = q.team.empty() ? -1 : index.nameId(UsageBy::kTeam, q.team);
  if (!q.team.empty() && teamId < 0) return {};
  const size_t groupCount = index.names(q.by).size();
  const size_t modelCount = index.names(UsageBy::kGpuModel).size();
  std::vector<Group> groups(groupCount);
  std::vector<int64_t> byModel(groupCount * modelCount, 0);

  // The peak sweep needs intervals in start order; they are, unless the clock stepped back.
  std::vector<uint32_t> order;
  if (!index.startsSorted()) {
    order.resize(intervals.size());
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return intervals[a].start < intervals[b].start;
    });
  }
  const size_t n = intervals.size();
  for (size_t k = 0; k < n; ++k) {
    const LedgerInterval& i = order.empty() ? intervals[k] : intervals[order[k]];
    if (i.start >= q.to) break;
    if (teamId >= 0 && i.names[teamDim] != teamId) continue;
    const TimeMs s = std::max(i.start, q.from);
    const TimeMs e = std::min(i.end == 0 ? q.now : i.end, q.to);
    if (e <= s) continue;
    Group& g = groups[i.names[dim]];
    g.seen = true;
    const int64_t amount = i.milli * (e - s);
    g.milliGpuMs += amount;
    const TimeMs end = i.end == 0 ? q.now : i.end;
    telemetry::UsageCell use;
    if (s == i.start && e == end) {
      use = i.usage;
    } else if (!i.usage.empty()) {
      std::optional<telemetry::UsageCell> part;
      if (within) part = within(i.openSeq, s, e);
      use = part ? *part : i.usage.scaled(e - s, std::max<TimeMs>(1, end - i.start));
    }
    // A sample that arrived before the news that its job had ended (the agent reports the end by
    // its own clock, or a lost host's end is moved back) may have covered moments after the
    // end: samples never measure more than was allocated.
    if (use.measured > amount) use = use.scaled(amount, use.measured);
    g.usage += use;
    byModel[i.names[dim] * modelCount + i.names[modelDim]] += amount;
    // Holds are [s, e): one that ended at s no longer counts.
    while (!g.ends.empty() && g.ends.top().first <= s) {
      g.held -= g.ends.top().second;
      g.ends.pop();
    }
    g.ends.emplace(e, i.milli);
    g.held += i.milli;
    g.peak = std::max(g.peak, g.held);
  }

  std::vector<UsageRow> rows;
  const auto& names = index.names(q.by);
  const auto& models = index.names(UsageBy::kGpuModel);
  for (size_t id = 0; id < groupCount; ++id) {
    if (!groups[id].seen) continue;
    UsageRow r{names[id], groups[id].milliGpuMs, groups[id].usage, groups[id].peak, {}};
    for (size_t m = 0; m < modelCount; ++m) {
      if (int64_t v = byModel[id * modelCount + m]; v > 0) r.milliGpuMsByModel[models[m]] = v;
    }
    rows.push_back(std::move(r));
  }
  std::sort(rows.begin(), rows.end(),
            [](const UsageRow& a, const UsageRow& b) { return a.name < b.name; });
  return rows;
}

}  // namespace allot::control
