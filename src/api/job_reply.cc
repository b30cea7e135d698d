#include "api/job_reply.h"

#include <string>

#include "common/time_format.h"
#include "control/authz.h"
#include "model/json.h"

namespace allot::api {
namespace {

// Where a queued job waits, as the last pass left it: its place in the queue and when it is
// expected to start (expectedStart).
void putWait(const control::Cluster& cluster, const model::Job& j, nlohmann::json& out) {
  auto w = cluster.waitOf(j.id);
  out["position"] = w ? nlohmann::json(w->position) : nlohmann::json(nullptr);
  const TimeMs start = w ? expectedStart(*w) : 0;
  out["expected_start"] = start ? nlohmann::json(formatIso8601(start)) : nullptr;
}

}  // namespace

TimeMs expectedStart(const sched::Wait& w) {
  const bool dated = w.startAt > 0 && (w.kind == sched::WaitKind::kReserved ||
                                       w.kind == sched::WaitKind::kHeldForLease);
  return dated ? w.startAt : 0;
}

nlohmann::json jobJson(control::Cluster& cluster, const model::Job& j, size_t maxSpecBytes) {
  auto out = model::toListedJson(j, maxSpecBytes);
  if (j.state == model::JobState::kQueued) putWait(cluster, j, out);
  // A pull under way (docs/environments.md): bytes of the image fetched and in all (0: not known
  // yet), as the host last said.
  if (j.state == model::JobState::kPulling) {
    auto pull = cluster.pullOf(j.id);
    out["pull"] = pull ? nlohmann::json{{"bytes", pull->bytes}, {"total", pull->total}}
                       : nlohmann::json(nullptr);
  }
  // The owner's view of an idle flag (see docs/accounting.md); absent while not flagged.
  if (auto idle = cluster.idle().flag(j.id)) {
    auto at = [](TimeMs t) { return t ? nlohmann::json(formatIso8601(t)) : nlohmann::json(); };
    out["idle"] = {{"since", at(idle->idleSince)},
                   {"notified_at", at(idle->notifiedAt)},
                   {"reclaim_at", at(idle->reclaimAt)}};
  }
  return out;
}

std::optional<bool> refreshWait(control::Cluster& cluster, const control::Principal& who,
                                int64_t id, uint64_t revision, nlohmann::json& shown) {
  const auto& jobs = cluster.world().jobs;
  auto it = jobs.find(id);
  if (cluster.world().jobRevision(id) != revision || it == jobs.end() ||
      !control::authz::canSeeJob(who, it->second) || it->second.state != model::JobState::kQueued)
    return std::nullopt;
  const model::Job& j = it->second;
  const std::string reason = cluster.waitReason(j);  // as Cluster::getJob shows a queued job's
  nlohmann::json fresh = nlohmann::json::object();
  fresh["reason"] = reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(reason);
  putWait(cluster, j, fresh);
  bool changed = false;
  for (const auto& [key, value] : fresh.items()) {
    if (shown[key] == value) continue;
    shown[key] = value;
    changed = true;
  }
  return changed;
}

}  // namespace allot::api
