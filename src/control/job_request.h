#pragma once
// JobRequest: what a new job asks for, as validated types, and the checks of its scheduling
// fields that need no world state. Cluster::submitJob checks names, teams and projects.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/model.h"

namespace allot::control {

struct JobRequest {
  std::string name;
  std::string team;  // empty: the caller's team
  std::string project;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  int gpus = 0;
  std::vector<std::string> gpuModels;  // any of these; empty, or one "any", = any model
  int gpuMilli = 1000;                 // per GPU; below 1000 only with gpus == 1
  int64_t gpuMemoryMib = 0;            // GPU memory needed on each GPU; 0 = not stated
  int cpuMillis = 0;
  int64_t memoryMib = 0;
  int priority = 0;
  bool preemptible = false;
  bool wholeHost = false;  // gpus must be 0: the scheduler gives it every GPU of the host
  int hosts = 1;           // > 1: a gang, one process per host with `gpus` whole GPUs each
  int64_t maxRuntimeMs = 0;
  std::string minDriver;
  std::string minCuda;
  std::string contour;  // empty: the default contour
  // Set by Cluster::createSession only (never read from a job submission): the job is a session.
  std::optional<model::SessionSpec> session;
};

inline constexpr int kMinPriority = -1000;
inline constexpr int kMaxPriority = 1000;
inline constexpr int kMaxGangHosts = 64;
inline constexpr int64_t kMaxRuntimeLimitMs = 365LL * 86'400'000;

// Checks GPU shape, priority, runtime limit and version minimums, naming the field at fault, and
// normalizes: model names deduplicated in order, "any" meaning every model.
Status checkSchedulingFields(JobRequest& r);

// "535.104", "12.2": 1-4 dot-separated numbers.
Status validateVersion(const std::string& value, const char* field);

}  // namespace allot::control
