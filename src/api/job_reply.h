#pragma once
// A job as the API shows it, and a submission's reply made true again once its write is durable
// without building the whole job a second time.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

#include "control/cluster.h"

namespace allot::api {

// When a queued job is expected to start, as squeue --start shows it: known only where the pass
// reserved room that frees at a declared time (the work ahead gave --max-runtime) or a lease
// begins; 0 = not known.
TimeMs expectedStart(const sched::Wait& w);

// The job with what only the control plane knows of it now: a queued job's place and expected
// start, a pull's progress, an idle flag. `maxSpecBytes` 0: the whole job (model::toListedJson).
nlohmann::json jobJson(control::Cluster& cluster, const model::Job& j, size_t maxSpecBytes = 0);

// Makes `shown`, jobJson of queued job `id` built before a write, true again when the job itself
// has not changed since (`revision`, World::jobRevision): a pass that left it queued moved only
// its wait (the reason Cluster::getJob gives, its position and expected start), so only that is
// rebuilt, not a whole job per submission. Whether `shown` changed; nullopt when the job did
// change, or is no longer queued or seen by `who`: the caller builds the reply anew.
std::optional<bool> refreshWait(control::Cluster& cluster, const control::Principal& who,
                                int64_t id, uint64_t revision, nlohmann::json& shown);

}  // namespace allot::api
