#pragma once
// GpuProvider: where the agent learns which GPUs its host has. The product path is NVML
// (NvmlGpuProvider); SimulatedGpuProvider stands in on machines without GPUs for development and
// tests, and is labelled as simulated in every listing (name() and simulated() say so).
//
// Implementations are called from the agent's main loop only; none is thread-safe.

#include <string>
#include <vector>

#include "common/status.h"
#include "model/agent_protocol.h"
#include "model/model.h"

namespace allot::agent {

class GpuProvider {
 public:
  virtual ~GpuProvider() = default;
  // The host's GPUs, ordered by index. An error means the driver could not be asked, not that
  // there are no GPUs (an empty list).
  virtual Result<std::vector<model::Gpu>> discover() = 0;
  // "nvml" or "simulated": what the host reports as its gpu_provider.
  virtual std::string name() const = 0;
  virtual bool simulated() const = 0;
  // The driver version the GPUs run under; empty when unknown.
  virtual std::string driverVersion() const { return {}; }

  // Every GPU's readings now, ordered by index. A reading the driver cannot give is left absent
  // in each sample (and the reason logged once); an error means no GPU could be read at all.
  virtual Result<std::vector<model::GpuSample>> sample() = 0;

  // What a job on the host declares about its GPU use. Only a simulated provider, which has no
  // hardware to read, makes its readings from these; real providers ignore them.
  struct Workload {
    std::vector<int> gpuIndices;
    double declaredUtilPct = 0;  // ALLOT_SIM_GPU_UTIL at start
    std::string utilFile;        // $ALLOT_SIM_GPU_UTIL_FILE: a number written here overrides it
  };
  virtual void setWorkloads(std::vector<Workload> workloads) { (void)workloads; }
};

}  // namespace allot::agent
