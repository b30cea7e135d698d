// Cluster::enforceMaxRuntime: a job's declared max runtime is a promise the scheduler plans
// with (backfill), so the control plane keeps it. See cluster.h.

#include <spdlog/spdlog.h>

#include "common/time_format.h"
#include "control/cluster.h"

namespace allot::control {

Change<int> Cluster::enforceMaxRuntime() {
  Change<int> c;
  c.value = 0;
  auto now = clock_.nowMs();
  // A copy: updateJob edits the index.
  for (model::Job* held : world_.heldJobs()) {
    model::Job& j = *held;
    const int64_t id = j.id;
    if (j.state != model::JobState::kRunning || j.maxRuntimeMs <= 0 || j.cancelRequested ||
        j.startedAt == 0 || now - j.startedAt <= j.maxRuntimeMs)
      continue;
    // The same path as `allot job cancel`: the agent stops the process tree with the usual
    // grace, and the job ends as cancelled, keeping this reason.
    model::Job before = j;
    j.cancelRequested = true;
    // A session's limit is its profile's maximum lifetime (docs/sessions.md).
    j.reason =
        (j.session ? "reached its maximum lifetime of " : "exceeded its maximum runtime of ") +
        formatDurationSpec(j.maxRuntimeMs);
    updateJob(j, before, c.batch);
    for (const auto& h : model::rankHosts(j)) c.pushHosts.insert(h);
    ++c.value;
    spdlog::info("job over its max runtime: job={} host={} max_runtime_ms={}", id,
                 firstRank(j).host, j.maxRuntimeMs);
  }
  return c;
}

}  // namespace allot::control
