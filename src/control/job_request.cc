#include "control/job_request.h"

#include <algorithm>
#include <cctype>

#include "common/version.h"
#include "control/names.h"

namespace allot::control {
namespace {

constexpr size_t kMaxGpuModels = 32;
constexpr int64_t kMaxGpuMemoryMib = 16LL * 1024 * 1024;

}  // namespace

Status validateVersion(const std::string& value, const char* field) {
  if (isDottedVersion(value)) return Status::Ok();
  return Status::InvalidArgument(std::string(field) + ": '" + value +
                                     "' is not a version (use dotted numbers, e.g. 535.104 or "
                                     "12.2)",
                                 field);
}

Status checkSchedulingFields(JobRequest& r) {
  if (r.resources.gpuModels.size() > kMaxGpuModels)
    return Status::InvalidArgument(
        "gpu_models: at most " + std::to_string(kMaxGpuModels) + " models", "gpu_models");
  std::vector<std::string> models;
  bool any = false;
  for (const auto& m : r.resources.gpuModels) {
    if (m == "any") {
      any = true;
      continue;
    }
    ALLOT_RETURN_IF_ERROR(validateGpuModel(m, "gpu_models"));
    if (std::find(models.begin(), models.end(), m) == models.end()) models.push_back(m);
  }
  if (any && !models.empty())
    return Status::InvalidArgument("gpu_models: 'any' cannot be combined with named models",
                                   "gpu_models");
  r.resources.gpuModels = std::move(models);

  if (r.resources.gpuMilli < 1 || r.resources.gpuMilli > 1000)
    return Status::InvalidArgument(
        "gpu_milli: must be between 1 and 1000, got " + std::to_string(r.resources.gpuMilli),
        "gpu_milli");
  if (r.resources.gpuMilli < 1000 && r.resources.gpus != 1)
    return Status::InvalidArgument("gpu_milli: a fraction of a GPU needs gpus = 1, got gpus = " +
                                       std::to_string(r.resources.gpus),
                                   "gpu_milli");
  if (r.resources.gpuMemoryMib < 0 || r.resources.gpuMemoryMib > kMaxGpuMemoryMib)
    return Status::InvalidArgument(
        "gpu_memory_mib: must be between 0 and " + std::to_string(kMaxGpuMemoryMib),
        "gpu_memory_mib");
  if (r.resources.gpuMemoryMib > 0 && r.resources.gpus == 0 && !r.resources.wholeHost)
    return Status::InvalidArgument("gpu_memory_mib: a job without GPUs needs no GPU memory",
                                   "gpu_memory_mib");
  if (r.resources.wholeHost) {
    if (r.resources.gpus != 0)
      return Status::InvalidArgument(
          "gpus: a whole-host job gets every GPU of its host; leave gpus out or 0", "gpus");
    if (r.resources.gpuMilli != 1000)
      return Status::InvalidArgument("gpu_milli: a whole-host job takes whole GPUs", "gpu_milli");
  }
  if (r.resources.hosts < 1 || r.resources.hosts > kMaxGangHosts)
    return Status::InvalidArgument("hosts: must be between 1 and " + std::to_string(kMaxGangHosts) +
                                       ", got " + std::to_string(r.resources.hosts),
                                   "hosts");
  if (r.resources.hosts > 1) {
    if (r.resources.wholeHost)
      return Status::InvalidArgument("hosts: a whole-host job runs on one host", "hosts");
    if (r.resources.gpus < 1)
      return Status::InvalidArgument("hosts: a multi-host job needs gpus >= 1 on each host",
                                     "hosts");
    if (r.resources.gpuMilli != 1000)
      return Status::InvalidArgument("hosts: a multi-host job takes whole GPUs", "hosts");
  }
  if (r.priority < kMinPriority || r.priority > kMaxPriority)
    return Status::InvalidArgument("priority: must be between " + std::to_string(kMinPriority) +
                                       " and " + std::to_string(kMaxPriority),
                                   "priority");
  if (r.maxRuntimeMs < 0 || r.maxRuntimeMs > kMaxRuntimeLimitMs)
    return Status::InvalidArgument("max_runtime: must be positive and at most 365d", "max_runtime");
  if (!r.resources.minDriver.empty())
    ALLOT_RETURN_IF_ERROR(validateVersion(r.resources.minDriver, "min_driver"));
  if (!r.resources.minCuda.empty())
    ALLOT_RETURN_IF_ERROR(validateVersion(r.resources.minCuda, "min_cuda"));
  return Status::Ok();
}

}  // namespace allot::control
