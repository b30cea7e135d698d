#include "api/job_text.h"

#include <cstdint>
#include <map>
#include <vector>

#include "api/job_reply.h"
#include "common/time_format.h"
#include "model/json_parts.h"
#include "model/json_writer.h"

namespace allot::api {

using model::Job;

std::optional<std::string> jobText(control::Cluster& cluster, const Job& j,
                                   const JobTextOptions& options) {
  // What the document adds only for some jobs, left to it.
  if ((model::isGang(j) && !j.ranks.empty()) || j.session || j.state == model::JobState::kPulling ||
      cluster.idle().flag(j.id)) {
    return std::nullopt;
  }
  static const std::map<std::string, std::string> kNoEnv;
  const auto cut = model::cutSpec(j, options.maxSpecBytes);
  const model::Rank& rank = model::firstRank(j);
  const bool queued = j.state == model::JobState::kQueued;
  std::optional<sched::Wait> wait = queued ? cluster.waitOf(j.id) : std::nullopt;

  std::string out;
  out.reserve(1024);
  model::JsonWriter w(out);
  // Keys in nlohmann's order (std::map: sorted bytewise), as jobJson's dump has them.
  w.beginObject();
  w.key("array");
  if (j.arrayId == 0) {
    w.null();
  } else {
    w.beginObject();
    w.number("id", j.arrayId);
    w.number("index", j.arrayIndex);
    w.number("limit", j.arrayLimit);
    w.endObject();
  }
  if (options.arrayTasks > 0) {
    w.key("array_tasks");
    w.beginArray();
    for (size_t t = 0; t < options.arrayTasks; ++t) {
      w.element();
      w.number(j.id + static_cast<int64_t>(t));
    }
    w.endArray();
  }
  w.boolean("cancel_requested", j.cancelRequested);
  w.strings("command", cut ? *cut : j.command);
  w.stringOrNull("contour", j.contour);
  w.number("cpu_millis", j.resources.cpuMillis);
  w.key("dependencies");
  w.beginArray();
  for (const auto& dependency : j.dependencies) {
    w.element();
    w.beginObject();
    w.number("job", dependency.job);
    w.string("kind", model::dependencyKindName(dependency.kind));
    w.endObject();
  }
  w.endArray();
  w.key("env");
  w.beginObject();
  for (const auto& [k, v] : cut ? kNoEnv : j.env) {
    w.key(k);
    w.string(v);
  }
  w.endObject();
  w.stringOrNull("evicted_for", j.evictedFor);
  w.boolean("evicting", j.evicting);
  w.timeOrNull("evicting_since", j.evictingSince);
  w.numberOrNull("exit_code", j.exitCode);
  if (queued) {
    w.timeOrNull("expected_start", wait ? expectedStart(*wait) : 0);
  }
  w.timeOrNull("finished_at", j.finishedAt);
  w.numbers("gpu_indices", rank.gpuIndices);
  w.number("gpu_memory_mib", j.resources.gpuMemoryMib);
  w.number("gpu_milli", j.resources.gpuMilli);
  w.strings("gpu_models", j.resources.gpuModels);
  w.strings("gpu_uuids", rank.gpuUuids);
  w.number("gpus", j.resources.gpus);
  w.stringOrNull("held_by", j.heldBy);
  w.stringOrNull("host", rank.host);
  w.number("hosts", j.resources.hosts);
  w.number("id", j.id);
  w.stringOrNull("image", j.image);
  w.stringOrNull("image_digest", j.imageDigest);
  w.stringOrNull("image_min_cuda", j.imageMinCuda);
  w.key("max_runtime");
  j.maxRuntimeMs ? w.string(formatDurationSpec(j.maxRuntimeMs)) : w.null();
  w.number("memory_mib", j.resources.memoryMib);
  w.stringOrNull("min_cuda", j.resources.minCuda);
  w.stringOrNull("min_driver", j.resources.minDriver);
  w.string("name", j.name);
  if (queued) {
    w.key("position");
    wait ? w.number(wait->position) : w.null();
  }
  w.boolean("preemptible", j.preemptible);
  w.number("preemptions", j.preemptions);
  w.number("priority", j.priority);
  w.stringOrNull("project", j.project);
  w.stringOrNull("reason", options.reason ? *options.reason : j.reason);
  w.stringOrNull("requeue_requested_by", j.requeueRequestedBy);
  w.timeOrNull("scheduled_at", j.scheduledAt);
  w.numberOrNull("signal", j.signal);
  if (cut) {
    w.boolean("spec_truncated", true);
  }
  w.timeOrNull("started_at", j.startedAt);
  w.string("state", model::jobStateName(j.state));
  w.string("submitted_at", formatIso8601(j.submittedAt));
  w.string("team", j.team);
  w.string("user", j.user);
  w.boolean("whole_host", j.resources.wholeHost);
  w.stringOrNull("workdir", j.workdir);
  w.endObject();
  if (!w.ok()) return std::nullopt;
  return out;
}

}  // namespace allot::api
