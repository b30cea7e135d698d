#include "control/job_request.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>

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

namespace allot::control {

Result<JobRequest::Array> parseArraySpec(const std::string& spec) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("array: '" + spec + "': " + why +
                                       " (e.g. 0-99, 1,3,5-7, 0-15:4, each with %N for at most N "
                                       "running at once)",
                                   "array");
  };
  // Digits only, so that no sign, space or overflow gets through std::stoi's leniency.
  auto number = [](std::string_view s, int* out) {
    if (s.empty() || s.size() > 6) return false;
    int v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    *out = v;
    return true;
  };
  JobRequest::Array a;
  std::string_view list = spec;
  if (size_t pct = list.find('%'); pct != std::string_view::npos) {
    if (!number(list.substr(pct + 1), &a.limit) || a.limit < 1)
      return bad("the limit after % must be a positive number");
    list = list.substr(0, pct);
  }
  if (list.empty()) return bad("no indices");
  std::set<int> indices;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (item.empty() && comma != std::string_view::npos) return bad("an empty item");
    int lo = 0, hi = 0, step = 1;
    const size_t colon = item.find(':');
    if (colon != std::string_view::npos) {
      if (!number(item.substr(colon + 1), &step) || step < 1)
        return bad("the step after : must be a positive number");
      item = item.substr(0, colon);
    }
    const size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      if (!number(item, &lo) || colon != std::string_view::npos)
        return bad("'" + std::string(item) + "' is not an index or a range");
      hi = lo;
    } else if (!number(item.substr(0, dash), &lo) || !number(item.substr(dash + 1), &hi) ||
               lo > hi) {
      return bad("'" + std::string(item) + "' is not a range LO-HI with LO <= HI");
    }
    if (hi > kMaxArrayIndex) return bad("indices go up to " + std::to_string(kMaxArrayIndex));
    for (int i = lo; i <= hi; i += step) {
      indices.insert(i);
      if (indices.size() > static_cast<size_t>(kMaxArrayTasks))
        return bad("more than the " + std::to_string(kMaxArrayTasks) + " tasks an array may have");
    }
  }
  a.indices.assign(indices.begin(), indices.end());
  return a;
}

}  // namespace allot::control
