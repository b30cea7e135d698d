#include "control/world.h"

#include <charconv>

namespace allot::control {
namespace {

// Public token ids look like "tok-12"; the sequence resumes after the largest one seen.
int64_t seqOf(const std::string& id) {
  auto dash = id.rfind('-');
  if (dash == std::string::npos) return 0;
  int64_t v = 0;
  std::from_chars(id.data() + dash + 1, id.data() + id.size(), v);
  return v;
}

using model::holdsGpus;

// Calls fn(host, gpuIndices) for each rank of a placed job.
template <typename F>
void forEachRank(const model::Job& j, F fn) {
  for (const auto& r : j.ranks) fn(r.host, r.gpuIndices);
}

}  // namespace

void World::load(const store::Contents& c) {
  for (const auto& t : c.teams) teams[t.name] = t;
  for (const auto& u : c.users) users[u.name] = u;
  for (const auto& t : c.tokens) {
    tokens[t.id] = t;
    nextSecretSeq = std::max(nextSecretSeq, seqOf(t.id) + 1);
  }
  for (const auto& p : c.projects) projects[projectKey(p.team, p.name)] = p;
  for (const auto& j : c.joinTokens) {
    joinTokens[j.id] = j;
    nextSecretSeq = std::max(nextSecretSeq, seqOf(j.id) + 1);
  }
  for (auto h : c.hosts) {
    h.state = model::HostState::kUnreachable;  // until its agent connects again
    hosts[h.name] = h;
  }
  for (const auto& j : c.jobs) {
    jobs[j.id] = j;
    nextJobId = std::max(nextJobId, j.id + 1);
  }
  for (const auto& [key, value] : c.meta) {
    if (key == "next_uid") nextUid = std::max<int64_t>(nextUid, std::stoll(value));
    if (key == "next_gid") nextGid = std::max<int64_t>(nextGid, std::stoll(value));
  }
  for (const auto& e : c.ledger) ledger.apply(e);
  for (const auto& t : c.hostTransitions) {
    hostTransitions[t.host].push_back(t);
    nextHostTransitionId = std::max(nextHostTransitionId, t.id + 1);
  }
  for (const auto& u : c.upgrades) {
    upgrades[u.id] = u;
    nextUpgradeId = std::max(nextUpgradeId, u.id + 1);
  }
  reindex();
}

int64_t specBytes(const model::Job& j) {
  int64_t bytes = 0;
  for (const auto& a : j.command) bytes += static_cast<int64_t>(a.size()) + 1;
  for (const auto& [k, v] : j.env) bytes += static_cast<int64_t>(k.size() + v.size()) + 2;
  return bytes;
}

void World::reindex() {
  queued_.clear();
  queuedWithDependencies_.clear();
  activeByUser_.clear();
  activeByTeam_.clear();
  gpuHolders_.clear();
  hostJobs_.clear();
  heldJobs_.clear();
  heldListStale_ = true;
  jobsByState_.clear();
  preemptions_ = 0;
  for (const auto& [id, j] : jobs) onJobChanged(nullptr, j);
}

void World::onJobChanged(const model::Job* before, const model::Job& after) {
  IndexedJob& indexed = jobIndex_[after.id];
  ++indexed.revision;
  if (indexed.job == nullptr) indexed.job = &jobs.at(after.id);
  if (!holdsGpus(after.state)) placedBy.erase(after.id);  // its explanation is history now
  auto preempted = [](const model::Job& j) {
    return j.preemptions + (j.state == model::JobState::kPreempted ? 1 : 0);
  };
  if (before) {
    --jobsByState_[before->state];
    preemptions_ -= preempted(*before);
  }
  ++jobsByState_[after.state];
  preemptions_ += preempted(after);
  auto count = [](std::map<std::string, Active>& m, const std::string& key, int sign,
                  int64_t bytes) {
    Active& a = m[key];
    a.jobs += sign;
    a.specBytes += sign * bytes;
    if (a.jobs <= 0) m.erase(key);
  };
  if (before && !model::isTerminal(before->state)) {
    const int64_t bytes = specBytes(*before);
    count(activeByUser_, before->user, -1, bytes);
    count(activeByTeam_, before->team, -1, bytes);
  }
  if (!model::isTerminal(after.state)) {
    const int64_t bytes = specBytes(after);
    count(activeByUser_, after.user, +1, bytes);
    count(activeByTeam_, after.team, +1, bytes);
  }
  if (before) {
    if (before->state == model::JobState::kQueued) {
      queued_.erase(before->id);
      queuedWithDependencies_.erase(before->id);
    }
    if (holdsGpus(before->state)) {
      forEachRank(*before, [&](const std::string& host, const std::vector<int>& gpus) {
        auto& holders = gpuHolders_[host];
        for (int g : gpus) {
          for (auto [it, end] = holders.equal_range(g); it != end; ++it) {
            if (it->second == before->id) {
              holders.erase(it);
              break;
            }
          }
        }
        hostJobs_[host].erase(before->id);
        heldJobs_.erase(before->id);
        heldListStale_ = true;
      });
    }
  }
  if (after.state == model::JobState::kQueued) {
    queued_.emplace_hint(queued_.end(), after.id, indexed.job);
    if (!after.dependencies.empty()) queuedWithDependencies_.insert(after.id);
  }
  if (holdsGpus(after.state)) {
    forEachRank(after, [&](const std::string& host, const std::vector<int>& gpus) {
      for (int g : gpus) gpuHolders_[host].emplace(g, after.id);
      hostJobs_[host].insert(after.id);
      heldJobs_.insert(after.id);
      heldListStale_ = true;
    });
  }
}

std::vector<model::Job*> World::heldJobs() {
  if (heldListStale_) {
    heldList_.clear();
    heldList_.reserve(heldJobs_.size());
    for (int64_t id : heldJobs_) heldList_.push_back(&job(id));
    heldListStale_ = false;
  }
  return heldList_;
}

std::vector<const model::Job*> World::heldJobs() const {
  auto held = const_cast<World*>(this)->heldJobs();
  return {held.begin(), held.end()};
}

std::set<std::string> World::sessionHostsOf(const std::string& user) const {
  std::set<std::string> hosts;
  for (const auto& [id, j] : jobs) {
    if (j.session && j.user == user && !model::isTerminal(j.state) && !firstRank(j).host.empty())
      hosts.insert(firstRank(j).host);
  }
  return hosts;
}

const GpuTelemetry* World::freshTelemetry(const std::string& host, int gpu, TimeMs now) const {
  auto h = telemetry.find(host);
  if (h == telemetry.end()) return nullptr;
  auto g = h->second.find(gpu);
  if (g == h->second.end()) return nullptr;
  const GpuTelemetry& t = g->second;
  return now - t.receivedAt < kTelemetryFreshIntervals * t.intervalMs ? &t : nullptr;
}

}  // namespace allot::control
