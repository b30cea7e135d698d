// Rolling upgrades: a pool's hosts are upgraded a few at a time (at most `maxUnavailable` out of
// service at once), each through a handover that keeps its owner and wipes nothing: drain, the
// profile's hook, a health check, back to available (handover.cc, host_tasks.cc).
// The first step that fails stops the upgrade; hosts not yet started stay as they are, so a bad
// hook costs one batch, not the pool. Progress is kept in the upgrade (store table `upgrades`)
// and in each host's handover, so an allotd restart picks it up where it was. See docs/hosts.md.

#include <spdlog/spdlog.h>

#include <algorithm>

#include "control/authz.h"
#include "control/hosts/host_service.h"
#include "control/names.h"

namespace allot::control {

using model::AdminState;
using model::UpgradeHostState;
using model::UpgradeState;

namespace {

constexpr const char* kSharedPool = "shared";
constexpr int kMaxUnavailableLimit = 1000;
constexpr int64_t kMaxDrainDeadlineMs = 7LL * 24 * 3'600'000;

bool inPool(const model::Host& h, const std::string& pool) {
  return pool == kSharedPool ? h.dedicatedTo.empty() : h.dedicatedTo == pool;
}

bool canSeeUpgrade(const Principal& p, const model::Upgrade& u) {
  return u.pool == kSharedPool || authz::canSeeTeam(p, u.pool);
}

// Why a host cannot take its step now ("" when it can): a host an admin fenced, or one whose
// agent cannot run the hook, is left out and listed, rather than holding the pool up.
std::string cannotUpgrade(const model::Host& h) {
  switch (h.adminState) {
    case AdminState::kAvailable:
    case AdminState::kDraining:
    case AdminState::kMaintenance:
      break;
    default:
      return std::string("host is ") + model::adminStateName(h.adminState);
  }
  if (h.handover) return "a handover of the host is under way";
  if (h.state != model::HostState::kOnline) return "host is unreachable";
  return "";
}

model::UpgradeHost* entryOf(model::Upgrade& u, const std::string& host) {
  for (auto& e : u.hosts)
    if (e.host == host) return &e;
  return nullptr;
}

}  // namespace

Result<Change<model::Upgrade>> HostService::startUpgrade(const Principal& p,
                                                         const std::string& pool,
                                                         const std::string& profile,
                                                         int maxUnavailable,
                                                         int64_t drainDeadlineMs) {
  if (pool.empty()) return Status::InvalidArgument("pool: required", "pool");
  if (pool != kSharedPool) {
    ALLOT_RETURN_IF_ERROR(validateName(pool, "pool"));
    // Another team's pool does not exist for the caller.
    if (!world_.teams.count(pool) || !authz::canSeeTeam(p, pool))
      return Status::NotFound("no pool '" + pool + "' (a team name, or 'shared')", "pool");
  }
  ALLOT_RETURN_IF_ERROR(authz::requireAdmin(p, "upgrade hosts"));
  if (profile.empty()) return Status::InvalidArgument("profile: required", "profile");
  if (!options_.hookProfiles.count(profile)) {
    std::string known;
    for (const auto& [name, _] : options_.hookProfiles) known += (known.empty() ? "" : ", ") + name;
    return Status::InvalidArgument("profile: no profile '" + profile + "' in [hooks.profiles] (" +
                                       (known.empty() ? "none configured" : "known: " + known) +
                                       ")",
                                   "profile");
  }
  if (maxUnavailable < 1 || maxUnavailable > kMaxUnavailableLimit)
    return Status::InvalidArgument("max_unavailable: must be between 1 and " +
                                       std::to_string(kMaxUnavailableLimit) + ", got " +
                                       std::to_string(maxUnavailable),
                                   "max_unavailable");
  if (drainDeadlineMs < 0 || drainDeadlineMs > kMaxDrainDeadlineMs)
    return Status::InvalidArgument("drain_deadline: must be between 0 and 7d", "drain_deadline");
  for (const auto& [id, u] : world_.upgrades) {
    if (u.pool == pool && u.state == UpgradeState::kRunning)
      return Status::FailedPrecondition("upgrade " + std::to_string(id) + " is running in pool " +
                                        pool + "; one upgrade per pool at a time");
  }
  model::Upgrade u;
  for (const auto& [name, h] : world_.hosts) {
    if (!inPool(h, pool)) continue;
    model::UpgradeHost e;
    e.host = name;
    if (std::string why = cannotUpgrade(h); !why.empty()) {
      e.state = UpgradeHostState::kSkipped;
      e.reason = why + " at the start";
    }
    u.hosts.push_back(std::move(e));
  }
  if (u.hosts.empty())
    return Status::InvalidArgument("pool: pool " + pool + " has no hosts", "pool");
  // Nothing to do would read as "succeeded" while no host changed.
  if (std::none_of(u.hosts.begin(), u.hosts.end(),
                   [](const auto& e) { return e.state == UpgradeHostState::kPending; })) {
    std::string why;
    for (const auto& e : u.hosts) why += (why.empty() ? "" : "; ") + e.host + ": " + e.reason;
    return Status::FailedPrecondition("no host of pool " + pool + " can be upgraded now (" + why +
                                      ")");
  }

  Change<model::Upgrade> c;
  u.id = world_.nextUpgradeId++;
  u.pool = pool;
  u.profile = profile;
  u.maxUnavailable = maxUnavailable;
  u.drainDeadlineMs = drainDeadlineMs;
  u.by = p.name;
  u.createdAt = clock_.nowMs();
  const int64_t id = u.id;
  model::Upgrade& stored = world_.upgrades[id] = std::move(u);
  // The first batch starts at once; the liveness loop's advanceUpgrades takes it from there.
  advanceUpgrade(stored, c.batch, c.pushHosts);
  c.batch.add(store::PutUpgrade{stored});
  spdlog::info("upgrade: id={} pool={} profile={} max_unavailable={} by={} hosts={}", stored.id,
               pool, profile, maxUnavailable, p.name, stored.hosts.size());
  c.value = stored;
  return c;
}

std::vector<model::Upgrade> HostService::listUpgrades(const Principal& p) const {
  std::vector<model::Upgrade> out;
  for (const auto& [id, u] : world_.upgrades)
    if (canSeeUpgrade(p, u)) out.push_back(u);
  return out;
}

Result<model::Upgrade> HostService::getUpgrade(const Principal& p, int64_t id) const {
  auto it = world_.upgrades.find(id);
  if (it == world_.upgrades.end() || !canSeeUpgrade(p, it->second))
    return Status::NotFound("no upgrade " + std::to_string(id));
  return it->second;
}

Change<int> HostService::advanceUpgrades() {
  Change<int> c;
  c.value = 0;
  for (auto& [id, u] : world_.upgrades) {
    if (u.state != UpgradeState::kRunning) continue;
    if (advanceUpgrade(u, c.batch, c.pushHosts)) {
      c.batch.add(store::PutUpgrade{u});
      ++c.value;
    }
  }
  return c;
}

bool HostService::advanceUpgrade(model::Upgrade& u, store::WriteBatch& batch,
                                 std::set<std::string>& push) {
  bool changed = false;
  const TimeMs now = clock_.nowMs();
  // Steps that ended without their task's result: the host was resumed by hand (which gives up
  // its handover), fenced by hand, or removed. An upgrade must not wait for them forever.
  for (auto& e : u.hosts) {
    if (e.state != UpgradeHostState::kRunning) continue;
    auto it = world_.hosts.find(e.host);
    std::string why;
    if (it == world_.hosts.end()) {
      why = "host is gone";
    } else if (!it->second.handover || it->second.handover->upgradeId != u.id) {
      why = "its upgrade step was given up (the host was resumed by hand, now " +
            std::string(model::adminStateName(it->second.adminState)) + ")";
    } else if (it->second.adminState == AdminState::kFailed ||
               it->second.adminState == AdminState::kRetired) {
      why = std::string("host was set ") + model::adminStateName(it->second.adminState) +
            (it->second.adminReason.empty() ? "" : ": " + it->second.adminReason);
    }
    if (why.empty()) continue;
    e.state = UpgradeHostState::kFailed;
    e.reason = why;
    e.endedAt = now;
    changed = true;
    if (u.state == UpgradeState::kRunning) stopUpgrade(u, e.host, why);
  }
  if (u.state != UpgradeState::kRunning) return changed;

  int unavailable = 0;
  for (const auto& e : u.hosts) unavailable += e.state == UpgradeHostState::kRunning ? 1 : 0;
  for (auto& e : u.hosts) {
    if (unavailable >= u.maxUnavailable) break;
    if (e.state != UpgradeHostState::kPending) continue;
    changed = true;
    auto it = world_.hosts.find(e.host);
    std::string why = it == world_.hosts.end() ? "host is gone" : cannotUpgrade(it->second);
    if (why.empty() && !inPool(it->second, u.pool)) why = "host left the pool";
    if (!why.empty()) {
      e.state = UpgradeHostState::kSkipped;
      e.reason = why + " when its turn came";
      e.endedAt = now;
      continue;
    }
    model::Host& h = it->second;
    const std::string reason = "upgrade " + std::to_string(u.id);
    // The owner stays, nothing is wiped: only the profile's hook and a health check run.
    auto step = handOverHost(
        h.name, model::Handover{h.dedicatedTo, u.by, reason, 0, u.id, u.profile, false},
        u.drainDeadlineMs);
    if (!step.ok()) {
      e.state = UpgradeHostState::kSkipped;
      e.reason = step.status().message();
      e.endedAt = now;
      continue;
    }
    for (auto& op : step->batch.ops) batch.ops.push_back(std::move(op));
    push.insert(step->pushHosts.begin(), step->pushHosts.end());
    if (u.drainDeadlineMs == 0 && h.adminState == AdminState::kDraining && h.drainDeadline != 0) {
      // handOverHost reads 0 as "preempt at once"; an upgrade without a deadline lets running
      // work finish, as `allot host drain` without one does.
      h.drainDeadline = 0;
      batch.add(store::PutHost{h});
    }
    e.state = UpgradeHostState::kRunning;
    e.startedAt = now;
    ++unavailable;
  }
  if (unavailable == 0 && std::none_of(u.hosts.begin(), u.hosts.end(), [](const auto& e) {
        return e.state == UpgradeHostState::kPending;
      })) {
    u.state = UpgradeState::kSucceeded;
    u.endedAt = now;
    changed = true;
    spdlog::info("upgrade: id={} pool={} succeeded", u.id, u.pool);
  }
  return changed;
}

void HostService::stopUpgrade(model::Upgrade& u, const std::string& host, const std::string& why) {
  u.state = UpgradeState::kStopped;
  u.endedAt = clock_.nowMs();
  u.stoppedAt = host;
  u.reason = "host " + host + ": " + why;
  // Hosts not started are not touched: they keep serving on what they run now.
  for (auto& e : u.hosts) {
    if (e.state != UpgradeHostState::kPending) continue;
    e.state = UpgradeHostState::kSkipped;
    e.reason = "not started: the upgrade stopped at " + host;
  }
  spdlog::warn("upgrade: id={} pool={} stopped at host {}: {}", u.id, u.pool, host, why);
}

void HostService::upgradeStepDone(int64_t upgradeId, const std::string& host, bool ok,
                                  const std::string& reason, store::WriteBatch& batch,
                                  std::set<std::string>& /*push*/) {
  auto it = world_.upgrades.find(upgradeId);
  if (it == world_.upgrades.end()) return;
  model::Upgrade& u = it->second;
  model::UpgradeHost* e = entryOf(u, host);
  if (!e || e->state != UpgradeHostState::kRunning) return;
  e->state = ok ? UpgradeHostState::kDone : UpgradeHostState::kFailed;
  e->reason = ok ? "" : reason;
  e->endedAt = clock_.nowMs();
  // A stopped upgrade still records how its other running steps ended, but stops only once.
  if (!ok && u.state == UpgradeState::kRunning) stopUpgrade(u, host, reason);
  batch.add(store::PutUpgrade{u});
}

}  // namespace allot::control
