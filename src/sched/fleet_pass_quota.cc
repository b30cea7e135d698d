// The bridge to the quota policy: the snapshot it decides on, and the model it admits a request
// on (fleet_pass.h).

#include "sched/fleet_pass.h"

namespace allot::sched::fleet_pass {

std::string Pass::quotaModel(const Request& r, Item& it) {
  if (it.wholeHostNode >= 0) return f_.kindOf(it.wholeHostNode).model;
  if (r.models.size() == 1) return r.models.front();
  // The first call comes before anything is placed (the workload in run()), and what it reads
  // (the free room at the start of the pass) never changes: later calls repeat its answer.
  if (!it.quotaModel) it.quotaModel = quotaModelUncached(r);
  return *it.quotaModel;
}

std::string Pass::quotaModelUncached(const Request& r) {
  // Only models whose pool hosts could ever hold it (GPUs, CPU, memory) are candidates: quota
  // reserves GPUs on the model it is given and placement then keeps to it, so a model where it
  // never fits would leave it waiting forever (an 8-GPU task asking 120 CPUs fits only on the
  // hosts with 128). Among them, the one with the most free pool capacity at the start of the
  // pass. Worked out once per request shape: a deep queue repeats a few.
  // The per-node scan is done once per (pool kinds, GPUs); a request then sums the few distinct
  // (model, CPU, memory) capacities it fits.
  const pl::ModelSet pool = mask(r, Phase::kPool);
  auto key = std::tuple(pool, fractional(r) ? 1 : r.gpus);
  auto cached = modelRoom_.find(key);
  if (cached == modelRoom_.end()) {
    ModelRoom room;
    for (int n = 0; n < st_.size(); ++n) {
      if (!kindAllowed(n, pool)) continue;
      const std::string& m = f_.kindOf(n).model;
      room.models.insert(m);
      const int gpus = fractional(r) ? 1 : st_.numGpus(n);
      if (gpus >= r.gpus) room.free[{m, st_.cpuCap(n), st_.memCap(n)}] += st_.gpuFreeTotal(n);
    }
    cached = modelRoom_.emplace(key, std::move(room)).first;
  }
  std::map<std::string, int64_t> free;  // models that can hold it -> free milli
  for (const auto& [shape, milli] : cached->second.free) {
    const auto& [m, cpu, mem] = shape;
    if (cpu >= r.cpuMillis && mem >= r.memoryMib) free[m] += milli;
  }
  if (r.models.empty() && free.size() == cached->second.models.size()) return "";  // quota picks
  if (free.empty()) return r.models.empty() ? "" : r.models.front();
  std::string best;
  int64_t most = -1;
  auto consider = [&](const std::string& m) {
    auto itf = free.find(m);
    if (itf != free.end() && itf->second > most) {
      most = itf->second;
      best = m;
    }
  };
  if (r.models.empty()) {
    for (const auto& [m, v] : free) consider(m);
  } else {
    for (const auto& m : r.models) consider(m);
  }
  return best;
}

q::QuotaSnapshot Pass::quotaSnapshot(const std::vector<Item*>& forQuota) {
  q::QuotaSnapshot qs;
  qs.now = s_.now;
  qs.policy.shareWindowMs = s_.policy.shareWindowMs;
  // Pool capacity per model, in milli-GPUs.
  for (int n = 0; n < st_.size(); ++n) {
    const fleet::Kind& k = f_.kindOf(n);
    if (k.owner.empty() && !k.model.empty())
      qs.capacity[k.model] += int64_t{st_.numGpus(n)} * kMilliPerGpu;
  }
  int64_t capacityTotal = 0;
  for (const auto& [m, c] : qs.capacity) capacityTotal += c;
  // Guarantees beyond what the pool has now (hosts away, or quotas set ahead of hardware) are
  // scaled down in proportion, per model first, then overall.
  std::map<std::string, int64_t> specific;
  for (const auto& t : s_.teams) {
    for (const auto& [m, g] : t.guaranteed) {
      if (!m.empty()) specific[m] += int64_t{g} * kMilliPerGpu;
    }
  }
  auto scaled = [](int64_t v, int64_t num, int64_t den) {
    return den <= 0 ? int64_t{0} : v * num / den;
  };
  int64_t specificAfter = 0;
  for (const auto& t : s_.teams) {
    q::Team qt;
    qt.name = t.name;
    qt.weight = t.weight;
    qt.usageGpuSeconds = std::max(0.0, t.usageGpuSeconds) * kMilliPerGpu;
    for (const auto& [m, g] : t.guaranteed) {
      if (m.empty()) continue;
      int64_t v = int64_t{g} * kMilliPerGpu;
      int64_t cap = qs.capacity.count(m) ? qs.capacity.at(m) : 0;
      if (specific[m] > cap) v = scaled(v, cap, specific[m]);
      qt.guaranteed[m] = static_cast<int>(v);
      specificAfter += v;
    }
    out_.teams.push_back({t.name});
    qs.teams.push_back(std::move(qt));
  }
  int64_t anyTotal = 0;
  for (const auto& t : s_.teams) {
    auto it = t.guaranteed.find("");
    if (it != t.guaranteed.end()) anyTotal += int64_t{it->second} * kMilliPerGpu;
  }
  const int64_t anyRoom = std::max<int64_t>(0, capacityTotal - specificAfter);
  for (size_t i = 0; i < s_.teams.size(); ++i) {
    const TeamView& t = s_.teams[i];
    q::Team& qt = qs.teams[i];
    auto it = t.guaranteed.find("");
    if (it != t.guaranteed.end()) {
      int64_t v = int64_t{it->second} * kMilliPerGpu;
      if (anyTotal > anyRoom) v = scaled(v, anyRoom, anyTotal);
      qt.guaranteed[""] = static_cast<int>(v);
    }
    int64_t g = 0;
    for (const auto& [m, v] : qt.guaranteed) g += v;
    qt.borrowLimit =
        t.borrowLimit < 0
            ? kUnlimited
            : static_cast<int>(std::min<int64_t>(int64_t{t.borrowLimit} * 1000, INT32_MAX));
    qt.lendLimit = t.lendLimit < 0
                       ? static_cast<int>(g)
                       : static_cast<int>(std::min<int64_t>(int64_t{t.lendLimit} * 1000, g));
  }
  // Running work in the pool.
  for (const RunningJob& j : s_.running) {
    q::Allocation a;
    a.jobId = j.id;
    a.team = j.team;
    a.priority = j.priority;
    a.preemptible = j.preemptible;
    a.startedAt = j.startedAt;
    a.evicting = j.evicting;
    for (const Slice& sl : j.slices) {
      int host = f_.hostIndex(sl.host);
      if (host < 0) continue;
      for (int g : sl.gpus) {
        auto [node, local] = f_.locate(host, g);
        if (node < 0 || !f_.kindOf(node).owner.empty()) continue;
        if (a.model.empty()) a.model = f_.kindOf(node).model;
        a.gpus += sl.gpuMilli;
      }
    }
    if (a.gpus > 0) qs.running.push_back(std::move(a));
  }
  for (Item* it : forQuota) {
    const Request& r = *it->r;
    q::Request qr;
    qr.jobId = r.id;
    qr.team = r.team;
    qr.model = quotaModel(r, *it);
    int64_t milli = it->wholeHostNode >= 0
                        ? int64_t{st_.numGpus(it->wholeHostNode)} * kMilliPerGpu
                        : int64_t{r.gpus} * taskFor(r, mask(r, Phase::kPool)).gpuMilli * r.hosts;
    qr.gpus = static_cast<int>(std::min<int64_t>(milli, INT32_MAX));
    // Within a team, a project under its split of the guarantee goes first.
    bool underSplit = false;
    if (const TeamView* tv = teams_.at(r.team); tv->projectSplits.count(r.project)) {
      int64_t split = 0;
      for (const auto& [m, g] : tv->projectSplits.at(r.project)) split += int64_t{g} * 1000;
      auto used = projectUsage_.find({r.team, r.project});
      underSplit = (used == projectUsage_.end() ? 0 : used->second) < split;
    }
    qr.priority = r.priority * 2 + (underSplit ? 1 : 0);
    qr.submittedAt = r.submittedAt;
    qs.pending.push_back(std::move(qr));
  }
  return qs;
}

}  // namespace allot::sched::fleet_pass
