#pragma once
// JobRequest: what a new job asks for, as validated types, and the checks of its scheduling
// fields that need no world state. Cluster::submitJob checks names, teams and projects.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/model.h"

namespace allot::control {

// JobRequest::image's word for "on the host, whatever the team's default image".
inline constexpr std::string_view kOnTheHost = "host";

struct JobRequest {
  std::string name{};
  std::string team{};  // empty: the caller's team
  std::string project{};
  std::vector<std::string> command{};
  std::map<std::string, std::string> env{};
  std::string workdir{};  // an absolute path on the hosts; empty: the job's own directory
  // An OCI image reference to run the command in (docs/environments.md); empty: the team's
  // default image, or on the host when it has none; kOnTheHost: on the host regardless.
  std::string image{};
  // A job array (allot run --array 0-99%10): one task per index, each a job of its own with
  // $ALLOT_ARRAY_INDEX, at most `limit` of them running at once (0: no limit).
  struct Array {
    std::vector<int> indices;  // ascending, distinct
    int limit = 0;
  };
  std::optional<Array> array{};
  // As the job will hold it, except that gpuModels may still say "any", and a whole-host request
  // must leave gpus 0 (the scheduler fills it).
  model::ResourceRequest resources{};
  int priority = 0;
  bool preemptible = false;
  int64_t maxRuntimeMs = 0;
  std::string contour{};  // empty: the default contour
  // Queue it even when no host of the fleet could ever run it (control/fleet_fit.h): for hosts
  // about to join.
  bool queueAnyway = false;
  // It is scheduled only once these hold (jobs the submitter may see; at most
  // kMaxDependencies).
  std::vector<model::Dependency> dependencies{};
  // Set by Cluster::createSession only (never read from a job submission): the job is a session.
  std::optional<model::SessionSpec> session{};
};

inline constexpr int kMinPriority = -1000;
inline constexpr int kMaxPriority = 1000;
inline constexpr int kMaxGangHosts = 64;
inline constexpr size_t kMaxDependencies = 64;
// Slurm's default MaxArraySize is 1001 (indices 0..1000); an array is one request and one
// transaction, so its size bounds a write.
inline constexpr int kMaxArrayTasks = 1000;
inline constexpr int kMaxArrayIndex = 99'999;
inline constexpr size_t kMaxWorkdirBytes = 4096;
inline constexpr int64_t kMaxRuntimeLimitMs = 365LL * 86'400'000;

// Checks GPU shape, priority, runtime limit and version minimums, naming the field at fault, and
// normalizes: model names deduplicated in order, "any" meaning every model.
Status checkSchedulingFields(JobRequest& r);

// Slurm's --array syntax: "0-99", "1,3,5-7", "0-15:4" (every 4th), each with an optional "%N"
// at the end, at most N tasks running at once. Indices come out ascending and distinct.
Result<JobRequest::Array> parseArraySpec(const std::string& spec);

// "535.104", "12.2": 1-4 dot-separated numbers.
Status validateVersion(const std::string& value, const char* field);

}  // namespace allot::control
