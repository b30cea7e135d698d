#pragma once
// GpuProvider: where the agent learns which GPUs its host has. The product path is NVML
// (NvmlGpuProvider); SimulatedGpuProvider stands in on machines without GPUs for development and
// tests, and is labelled as simulated in every listing (name() and simulated() say so).
//
// Implementations are called from the agent's main loop only; none is thread-safe.

#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/agent_protocol.h"
#include "model/model.h"

namespace allot::agent {

// A critical XID error the driver reported on a GPU (NVML's nvmlEventTypeXidCriticalError): XID 79
// is "fallen off the bus", 48 a double-bit ECC error, ... See NVIDIA's XID catalogue.
struct XidEvent {
  int gpuIndex = -1;  // -1: the driver did not say which GPU
  int64_t xid = 0;
  TimeMs at = 0;  // when the agent drained it, wall-clock ms
};

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

  // The critical XID events the driver reported since the last call, oldest first; never blocks.
  // Providers without an event source (the simulated one) have none.
  virtual std::vector<XidEvent> drainXidEvents() { return {}; }
};

}  // namespace allot::agent
