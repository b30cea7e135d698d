// Job arrays (allot run --array 0-99%10): many jobs from one submission, each with its index in
// $ALLOT_ARRAY_INDEX, and at most a given number of them running at once, as Slurm's
// --array=0-99%10 does. Submission is Cluster::submitJob; docs/jobs.md.

#include "control/cluster.h"

namespace allot::control {

using model::Job;

std::map<int64_t, int> Cluster::activeArrayTasks() const {
  std::map<int64_t, int> out;
  for (const Job* held : world_.heldJobs()) {
    const Job& j = *held;
    if (j.arrayLimit > 0) ++out[j.arrayId];
  }
  return out;
}

std::optional<std::string> Cluster::arrayLimitReason(const Job& j) const {
  if (j.arrayLimit <= 0) return std::nullopt;
  auto it = arrayWaits_.find(j.id);
  if (it == arrayWaits_.end()) return std::nullopt;
  return it->second;
}

// The snapshot's part: of each limited array, only as many queued tasks as it has room for are
// offered, lowest index first; a pass could otherwise start them all at once.
bool Cluster::offerArrayTask(const Job& j, std::map<int64_t, int>& room,
                             const std::map<int64_t, int>& active) const {
  if (j.arrayLimit <= 0) return true;
  const auto running = active.find(j.arrayId);
  const int n = running == active.end() ? 0 : running->second;
  // The array's first queued task seen this pass sets its room; later ones use what is left.
  auto slot = room.try_emplace(j.arrayId, j.arrayLimit - n).first;
  if (slot->second > 0) {
    --slot->second;
    return true;
  }
  std::string why = "array " + std::to_string(j.arrayId) + " runs at most " +
                    std::to_string(j.arrayLimit) + " tasks at once (%" +
                    std::to_string(j.arrayLimit) + "): " + std::to_string(n) + " running";
  if (n < j.arrayLimit) why += ", " + std::to_string(j.arrayLimit - n) + " queued ahead of it";
  arrayWaits_[j.id] = why + "; it starts as they end";
  return false;
}

}  // namespace allot::control
