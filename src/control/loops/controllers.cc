#include "control/loops/controllers.h"

#include <spdlog/spdlog.h>

#include "model/json.h"

namespace allot::control {

Step Controllers::schedulingPass() {
  auto change = cluster_.schedulePass();
  FinishedPass pass = std::move(change.value);
  Step s = stepOf("scheduling pass", std::move(change));
  s.placed = pass.placed.size();
  s.notifyJobs = pass.placed;
  // Their agents hear of placements and evictions only once durable: a placement lost in a crash
  // must never have run, nor an eviction lost in one have stopped anything.
  s.afterDurable = [this, pass = std::move(pass)] { cluster_.passDurable(pass); };
  return s;
}

Step Controllers::passStart(std::optional<sched::Snapshot>& snapshot) {
  auto change = cluster_.beginPass();
  snapshot = std::move(change.value);
  return stepOf("scheduling pass (dependencies)", std::move(change));
}

Step Controllers::passFinish(const sched::Snapshot& snapshot, Result<sched::Decisions> decisions) {
  auto change = cluster_.finishPass(snapshot, std::move(decisions));
  FinishedPass pass = std::move(change.value);
  Step s = stepOf("scheduling pass", std::move(change));
  s.placed = pass.placed.size();
  s.notifyJobs = pass.placed;
  s.wakeScheduler = pass.stale > 0;  // what the world changed under is decided again
  s.afterDurable = [this, pass = std::move(pass)] { cluster_.passDurable(pass); };
  return s;
}

std::vector<std::function<Step()>> Controllers::tick() {
  return {
      [this] { return stepOf("liveness", cluster_.checkLiveness()); },
      [this] { return stepOf("max runtime", cluster_.enforceMaxRuntime()); },
      // Before the drains: a lease's start drains its hosts with a deadline of now.
      [this] { return leases(); },
      [this] { return drains(); },
      [this] { return stepOf("upgrades", cluster_.hosts().advanceUpgrades()); },
      [this] { return stepOf("health checks", cluster_.hosts().scheduleHealthChecks()); },
      [this] { return stepOf("fair-share usage", cluster_.accountUsage()); },
      [this] { return idle(); },
  };
}

Step Controllers::leases() {
  auto change = cluster_.leases().enforce();
  const bool changed = change.value > 0;
  Step s = stepOf("leases", std::move(change));
  s.wakeScheduler = changed;  // hosts changed hands or holds
  return s;
}

Step Controllers::drains() {
  auto change = cluster_.hosts().enforceDrains();
  std::vector<int64_t> evicted = change.value;
  Step s = stepOf("drains", std::move(change));
  s.notifyJobs = evicted;
  // Only once durable may agents hear of the evictions: a crash must not stop work the restarted
  // allotd still thinks is running.
  s.afterDurable = [this, evicted = std::move(evicted)] { cluster_.evictionsDurable(evicted); };
  return s;
}

Step Controllers::idle() {
  auto change = cluster_.idle().check();
  IdleCheck check = std::move(change.value);
  Step s = stepOf("idle allocations", std::move(change));
  s.notifyJobs = check.reclaimed;
  s.afterDurable = [this, reclaimed = check.reclaimed] { cluster_.evictionsDurable(reclaimed); };
  for (const auto& e : check.events) {
    const auto effective = cluster_.idle().effectivePolicyOf(e.team, e.project);
    // A team or project policy with no webhook of its own reports where the platform's does.
    const bool own =
        effective.source != PolicySource::kPlatform && !effective.policy.webhook.empty();
    const std::string& url =
        own ? effective.policy.webhook : cluster_.options().idleDefault.webhook;
    if (url.empty()) continue;
    // A team's webhook stored before the allow-list changed goes nowhere the list leaves out;
    // the platform's own (allotd.toml [idle] webhook) is the admins' word already.
    if (own && !webhookAllowed(cluster_.options().webhookAllow, url)) {
      spdlog::warn("idle webhook of team {} not sent: its target is not allowed any more", e.team);
      continue;
    }
    s.webhooks.emplace_back(url, model::toJson(e).dump());
  }
  return s;
}

}  // namespace allot::control
