#pragma once
// ResourceRequest: what one allocation asks of the fleet (GPUs, a share and memory of each, the
// models it runs on, CPU and memory, driver and CUDA minimums, a whole host, a gang of hosts). One
// value, embedded in jobs, job submissions and sessions (which are jobs), so that a new resource
// field is added in one place and reaches every kind of allocation. The bounds of each field are in
// resource_limits.h; the checks that need no world state in control/job_request.h. The scheduler
// has its own request (sched/fleet.h), made from this one in one place (control/cluster_schedule.cc),
// so that sched/ stays free of the model.
// Part of model.h: plain structs, no behaviour beyond small helpers.

#include <cstdint>
#include <string>
#include <vector>

namespace allot::model {

struct ResourceRequest {
  int gpus = 0;                        // per host
  std::vector<std::string> gpuModels;  // any of these; empty = any model
  int gpuMilli = 1000;                 // share of each GPU; below 1000 only with gpus == 1
  int64_t gpuMemoryMib = 0;            // GPU memory needed on each GPU; 0 = not stated
  int cpuMillis = 0;                   // CPU limit in millicores; 0 = unlimited
  int64_t memoryMib = 0;               // memory limit; 0 = unlimited
  bool wholeHost = false;  // every GPU, CPU and byte of one host; the scheduler fills gpus
  int hosts = 1;           // > 1: a gang of `hosts` processes, one per host, `gpus` GPUs each
  std::string minDriver;   // lowest NVIDIA driver version it runs on ("535.104"); empty = any
  std::string minCuda;     // lowest CUDA version ("12.2"); empty = any
  bool operator==(const ResourceRequest&) const = default;
};

}  // namespace allot::model
