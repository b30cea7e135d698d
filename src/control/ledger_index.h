#pragma once
// LedgerIndex: the allocation ledger (model::LedgerEntry) folded into intervals, kept in World for
// usage reports. The store holds the entries; this holds one compact interval per open entry,
// with its latest end, the running total of its measured use (from GPU samples, see
// telemetry/attribution.h), and names interned so that a year of a large fleet fits in memory
// (80 bytes an interval). Not thread-safe: allotd's I/O thread owns it, like World.

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "model/model.h"
#include "telemetry/usage_cell.h"

namespace allot::control {

// What a report groups by; also the index of the interned name table.
enum class UsageBy { kTeam = 0, kProject, kUser, kHost, kGpuModel };
constexpr int kUsageDimensions = 5;

struct LedgerInterval {
  int64_t openSeq = 0;
  TimeMs start = 0;
  TimeMs end = 0;                         // 0 while open
  int64_t milli = 0;                      // milli-GPUs held: GPUs x milli per GPU
  uint32_t names[kUsageDimensions] = {};  // ids in LedgerIndex::names(dim), by UsageBy
  telemetry::UsageCell usage;             // what samples said of it so far, whole
};

class LedgerIndex {
 public:
  // Folds in one entry; entries come in seq order. A close or correction of an unknown interval
  // is ignored (the store refuses none, and an index must load whatever history holds).
  void apply(const model::LedgerEntry& e);

  // Adds measured use to the interval an open entry began; unknown entries are ignored.
  void addUsage(int64_t openSeq, const telemetry::UsageCell& c) {
    if (LedgerInterval* i = find(openSeq)) i->usage += c;
  }

  int64_t nextSeq() const { return nextSeq_; }
  // Intervals in seq order, which is start order unless the clock stepped back (startsSorted).
  const std::vector<LedgerInterval>& intervals() const { return intervals_; }
  bool startsSorted() const { return startsSorted_; }
  const std::vector<std::string>& names(UsageBy by) const {
    return tables_[static_cast<int>(by)].names;
  }
  // The id of `name` among names(by), -1 when no interval has it.
  int64_t nameId(UsageBy by, const std::string& name) const {
    const auto& n = names(by);
    auto it = std::find(n.begin(), n.end(), name);
    return it == n.end() ? -1 : it - n.begin();
  }
  // The interval an open entry began; nullptr if unknown.
  const LedgerInterval* interval(int64_t openSeq) const;
  // The open entries of the job's placement while it holds GPUs (one per rank), in rank order.
  std::vector<int64_t> openPlacement(int64_t jobId) const;
  // The host of an interval, by name.
  const std::string& hostOf(const LedgerInterval& i) const {
    return names(UsageBy::kHost)[i.names[static_cast<int>(UsageBy::kHost)]];
  }
  // The key a project is grouped under: projects are named within their team.
  static std::string projectKey(const std::string& team, const std::string& project) {
    return team + "/" + (project.empty() ? "-" : project);
  }

 private:
  struct Table {
    std::vector<std::string> names;
    std::unordered_map<std::string, uint32_t> ids;
    uint32_t intern(const std::string& name);
  };
  LedgerInterval* find(int64_t openSeq);

  std::vector<LedgerInterval> intervals_;
  bool startsSorted_ = true;
  // Jobs holding GPUs -> their open entries; a job leaves when all of them are closed.
  std::unordered_map<int64_t, std::vector<int64_t>> placements_;
  Table tables_[kUsageDimensions];
  int64_t nextSeq_ = 1;
};

}  // namespace allot::control
