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
    out += '[';
    for (size_t t = 0; t < options.arrayTasks; ++t) {
      if (t) out += ',';
      w.number(j.id + static_cast<int64_t>(t));
    }
    out += ']';
  }
  w.boolean("cancel_requested", j.cancelRequested);
  w.key("command");
  w.strings(cut ? *cut : j.command);
  w.key("contour");
  w.stringOrNull(j.contour);
  w.number("cpu_millis", j.resources.cpuMillis);
  w.key("dependencies");
  out += '[';
  for (size_t i = 0; i < j.dependencies.size(); ++i) {
    if (i) out += ',';
    w.beginObject();
    w.number("job", j.dependencies[i].job);
    w.string("kind", model::dependencyKindName(j.dependencies[i].kind));
    w.endObject();
  }
  out += ']';
  w.key("env");
  w.beginObject();
  for (const auto& [k, v] : cut ? kNoEnv : j.env) {
    w.key(k);
    w.string(v);
  }
  w.endObject();
  w.key("evicted_for");
  w.stringOrNull(j.evictedFor);
  w.boolean("evicting", j.evicting);
  w.key("evicting_since");
  w.timeOrNull(j.evictingSince);
  w.numberOrNull("exit_code", j.exitCode);
  if (queued) {
    const TimeMs start = wait ? expectedStart(*wait) : 0;
    w.key("expected_start");
    start ? w.string(formatIso8601(start)) : w.null();
  }
  w.key("finished_at");
  w.timeOrNull(j.finishedAt);
  w.key("gpu_indices");
  w.numbers(rank.gpuIndices);
  w.number("gpu_memory_mib", j.resources.gpuMemoryMib);
  w.number("gpu_milli", j.resources.gpuMilli);
  w.key("gpu_models");
  w.strings(j.resources.gpuModels);
  w.key("gpu_uuids");
  w.strings(rank.gpuUuids);
  w.number("gpus", j.resources.gpus);
  w.key("held_by");
  w.stringOrNull(j.heldBy);
  w.key("host");
  w.stringOrNull(rank.host);
  w.number("hosts", j.resources.hosts);
  w.number("id", j.id);
  w.key("image");
  w.stringOrNull(j.image);
  w.key("image_digest");
  w.stringOrNull(j.imageDigest);
  w.key("image_min_cuda");
  w.stringOrNull(j.imageMinCuda);
  w.key("max_runtime");
  j.maxRuntimeMs ? w.string(formatDurationSpec(j.maxRuntimeMs)) : w.null();
  w.number("memory_mib", j.resources.memoryMib);
  w.key("min_cuda");
  w.stringOrNull(j.resources.minCuda);
  w.key("min_driver");
  w.stringOrNull(j.resources.minDriver);
  w.string("name", j.name);
  if (queued) {
    w.key("position");
    wait ? w.number(wait->position) : w.null();
  }
  w.boolean("preemptible", j.preemptible);
  w.number("preemptions", j.preemptions);
  w.number("priority", j.priority);
  w.key("project");
  w.stringOrNull(j.project);
  w.key("reason");
  w.stringOrNull(options.reason ? *options.reason : j.reason);
  w.key("requeue_requested_by");
  w.stringOrNull(j.requeueRequestedBy);
  w.key("scheduled_at");
  w.timeOrNull(j.scheduledAt);
  w.numberOrNull("signal", j.signal);
  if (cut) {
    w.boolean("spec_truncated", true);
  }
  w.key("started_at");
  w.timeOrNull(j.startedAt);
  w.string("state", model::jobStateName(j.state));
  w.string("submitted_at", formatIso8601(j.submittedAt));
  w.string("team", j.team);
  w.string("user", j.user);
  w.boolean("whole_host", j.resources.wholeHost);
  w.key("workdir");
  w.stringOrNull(j.workdir);
  w.endObject();
  if (!w.ok()) return std::nullopt;
  return out;
}

}  // namespace allot::api
