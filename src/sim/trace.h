#pragma once
// Loading the openb trace (alibaba/clusterdata cluster-trace-gpu-v2023) into the placement
// model. Columns are found by their header name, so extra or reordered columns are fine; a bad
// row fails the load with "FILE:LINE: what".

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "sched/placement/cluster.h"

namespace allot::sim {

// A pod row; its allowed GPU models stay names until a cluster resolves them (resolveTasks).
struct TraceTask {
  std::string name;
  sched::placement::Task task;  // allowedModels unset here
  std::vector<std::string> gpuSpec;
  // Times in seconds since the trace start, -1 where the list has no such column or the field is
  // empty (a pod the real cluster never placed has no scheduled_time).
  int64_t creationTime = -1;
  int64_t deletionTime = -1;
  int64_t scheduledTime = -1;
  std::string qos;  // LS, BE, Burstable, Guaranteed; empty when absent
};

Result<std::vector<sched::placement::NodeSpec>> loadNodes(const std::string& path);
Result<std::vector<TraceTask>> loadTasks(const std::string& path);

std::vector<sched::placement::Task> resolveTasks(const sched::placement::ClusterState& cluster,
                                                 const std::vector<TraceTask>& tasks);

}  // namespace allot::sim
