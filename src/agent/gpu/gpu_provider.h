#pragma once
// GpuProvider: where the agent learns which GPUs its host has. The product path is NVML
// (NvmlGpuProvider); SimulatedGpuProvider stands in on machines without GPUs for development and
// tests, and is labelled as simulated in every listing (name() and simulated() say so).
//
// Implementations are called from the agent's main loop only; none is thread-safe.

#include <string>
#include <vector>

#include "common/status.h"
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
};

}  // namespace allot::agent
