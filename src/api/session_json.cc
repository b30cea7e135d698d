#include "api/session_json.h"

#include <algorithm>

#include "api/server.h"
#include "common/time_format.h"

namespace allot::api {

const char* sessionState(const model::Job& j, bool ready) {
  using model::JobState;
  switch (j.state) {
    case JobState::kQueued:
      return "queued";
    case JobState::kScheduled:
    case JobState::kPulling:
      return "starting";
    case JobState::kRunning:
      if (j.cancelRequested) return "stopping";
      return ready ? "running" : "starting";
    case JobState::kSucceeded:
    case JobState::kCancelled:
    case JobState::kPreempted:
      return "stopped";
    case JobState::kFailed:
      return "failed";
    case JobState::kLost:
      return "lost";
  }
  return "lost";
}

nlohmann::json sessionJson(Server& s, const model::Job& j) {
  using nlohmann::json;
  auto at = [](TimeMs t) { return t ? json(formatIso8601(t)) : json(nullptr); };
  auto text = [](const std::string& v) { return v.empty() ? json(nullptr) : json(v); };
  const auto rt = s.cluster().sessions().runtime(j.id);
  const bool ready = rt && rt->ready;
  const model::SessionSpec spec = j.session.value_or(model::SessionSpec{});
  const bool jupyter = spec.app.rfind("jupyter", 0) == 0;
  json out = {{"id", j.id},
              {"name", j.name},
              {"profile", spec.profile},
              {"app", spec.app},
              {"user", j.user},
              {"team", j.team},
              {"project", text(j.project)},
              {"state", sessionState(j, ready)},
              {"job_state", model::jobStateName(j.state)},
              {"reason", text(j.reason)},
              {"host", text(firstRank(j).host)},
              {"gpus", j.resources.gpus},
              {"gpu_milli", j.resources.gpuMilli},
              {"gpu_indices", firstRank(j).gpuIndices},
              {"cpu_millis", j.resources.cpuMillis},
              {"memory_mib", j.resources.memoryMib},
              {"storage", spec.storage},
              {"url", jupyter ? json("/sessions/" + std::to_string(j.id) + "/") : json(nullptr)},
              {"shared_with", spec.sharedWith},
              {"idle",
               {{"threshold_percent", spec.idleThresholdPct},
                {"after", formatDurationSpec(spec.idleAfterMs)}}},
              {"max_lifetime", j.maxRuntimeMs ? json(formatDurationSpec(j.maxRuntimeMs)) : json()},
              {"created_at", at(j.submittedAt)},
              {"started_at", at(j.startedAt)},
              {"ended_at", at(j.finishedAt)}};
  // How to reach it over SSH: the login name and the host key clients pin (allot ssh does).
  if (rt && !rt->sshHostKey.empty() && !model::isTerminal(j.state))
    out["ssh"] = {{"user", rt->sshUser},
                  {"host_key", rt->sshHostKey},
                  {"direct", rt->sshDirect.empty() ? json(nullptr) : json(rt->sshDirect)}};
  else
    out["ssh"] = nullptr;
  // Where its files are on its host and how much they take, as its agent last measured.
  out["storage_path"] = rt && !rt->storagePath.empty() ? json(rt->storagePath) : json(nullptr);
  out["storage_used_bytes"] = rt && rt->storageBytes >= 0 ? json(rt->storageBytes) : json(nullptr);
  if (rt) {
    // Jupyter's own count (its kernels' and terminals' WebSockets), or else what allotd relays
    // (SSH, and WebSockets to a command session): the two overlap for Jupyter.
    out["connections"] = std::max(rt->connections, s.cluster().sessions().relays(j.id));
    out["busy_kernels"] = rt->busyKernels;
    out["last_activity"] = at(rt->lastActivity);
  } else {
    out["connections"] = nullptr;
    out["busy_kernels"] = nullptr;
    out["last_activity"] = nullptr;
  }
  return out;
}

}  // namespace allot::api
