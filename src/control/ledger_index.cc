#include "control/ledger_index.h"

#include <algorithm>

namespace allot::control {

uint32_t LedgerIndex::Table::intern(const std::string& name) {
  auto [it, added] = ids.try_emplace(name, static_cast<uint32_t>(names.size()));
  if (added) names.push_back(name);
  return it->second;
}

void LedgerIndex::apply(const model::LedgerEntry& e) {
  nextSeq_ = std::max(nextSeq_, e.seq + 1);
  if (e.kind != model::LedgerKind::kOpen) {
    LedgerInterval* i = find(e.ref);
    if (!i) return;
    i->end = std::max(e.endAt, i->start);
    auto p = placements_.find(e.jobId);
    if (p != placements_.end() && std::all_of(p->second.begin(), p->second.end(), [&](int64_t s) {
          const LedgerInterval* o = interval(s);
          return !o || o->end != 0;
        })) {
      placements_.erase(p);
    }
    return;
  }
  LedgerInterval i;
  i.openSeq = e.seq;
  i.start = e.startAt;
  i.milli = static_cast<int64_t>(e.gpuIndices.size()) * e.gpuMilli;
  i.names[static_cast<int>(UsageBy::kTeam)] = tables_[0].intern(e.team);
  i.names[static_cast<int>(UsageBy::kProject)] = tables_[1].intern(projectKey(e.team, e.project));
  i.names[static_cast<int>(UsageBy::kUser)] = tables_[2].intern(e.user);
  i.names[static_cast<int>(UsageBy::kHost)] = tables_[3].intern(e.host);
  i.names[static_cast<int>(UsageBy::kGpuModel)] = tables_[4].intern(e.gpuModel);
  if (!intervals_.empty() && (i.openSeq <= intervals_.back().openSeq)) return;  // seen already
  if (!intervals_.empty() && i.start < intervals_.back().start) startsSorted_ = false;
  intervals_.push_back(i);
  placements_[e.jobId].push_back(e.seq);
}

LedgerInterval* LedgerIndex::find(int64_t openSeq) {
  auto at = std::lower_bound(intervals_.begin(), intervals_.end(), openSeq,
                             [](const LedgerInterval& x, int64_t s) { return x.openSeq < s; });
  return at != intervals_.end() && at->openSeq == openSeq ? &*at : nullptr;
}

const LedgerInterval* LedgerIndex::interval(int64_t openSeq) const {
  return const_cast<LedgerIndex*>(this)->find(openSeq);
}

std::vector<int64_t> LedgerIndex::openPlacement(int64_t jobId) const {
  auto it = placements_.find(jobId);
  return it == placements_.end() ? std::vector<int64_t>{} : it->second;
}

}  // namespace allot::control
