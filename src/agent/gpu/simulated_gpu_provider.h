#pragma once
// SimulatedGpuProvider: GPUs that do not exist, for developing and testing Allot on machines
// without GPUs. A development aid only: name() is "simulated" and every listing says so.
//
// Specs:
//   sim:4xA100              four A100s
//   sim:2xA100,2xH100       terms are laid out in order: indices 0-1 are A100, 2-3 are H100
//   sim:/path/to/host.toml  a file describing each GPU (a path starts with '/' or '.', or ends
//                           in ".toml")
//
// The TOML file (all keys but `model` optional):
//   driver_version = "535.104.05"  # default "550.54.15" (shorthand specs get the defaults)
//   cuda_version = "12.2"          # default "12.4"
//   [[gpu]]
//   model = "H100"                 # short name, as users type it in --gpu-model
//   count = 4                      # this entry repeated; default 1
//   memory_mib = 81920             # default from the model (A100/H100 81920, H200 143771, ...)
//   numa_node = 0                  # default -1 (unknown)
//   nvlink_group = 0               # GPUs sharing a group are NVLink-connected; default -1 (none)
//   pcie_switch = 0                # GPUs sharing a switch are PCIe peers; default -1 (unknown)
//
// Shorthand specs describe a two-socket host: the first half of the GPUs on NUMA node 0, the
// rest on node 1; within each term, runs of up to 4 GPUs share an NVLink domain and pairs
// share a PCIe switch, numbered across the host in index order. A GPU left alone in its run has
// -1 (it shares that with no other GPU), and terms never share. sim:8xH100 has domains
// 0,0,0,0,1,1,1,1 and switches 0,0,1,1,2,2,3,3; sim:2xA100,5xH100 has domains 0,0,1,1,1,1,-1
// and switches 0,0,1,1,2,2,-1. A file sets all three itself.
//
// UUIDs are "GPU-sim-<8 hex digits of a hash of hostSeed>-<index>": stable across restarts of the
// same host, different between hosts, and plainly not real NVIDIA UUIDs. The minor number is the
// index, as /dev/nvidia<index> would be on a real host.
//
// Telemetry is what the host's workloads declare (setWorkloads, a test aid; see docs/agent.md):
// a GPU's utilisation is the sum over the jobs on it of each one's declared percent (the number
// last written to its util file, else its ALLOT_SIM_GPU_UTIL), capped at 100; 0 with no job.
// The other readings follow it so that dashboards show something plausible: memory used is that
// percent of the GPU's memory, temperature 30 + 0.5 * util C, power 60 + 6 * util W, SM clock
// 1980 MHz when busy and 210 MHz idle, no ECC errors, no processes.

#include <memory>
#include <string>
#include <vector>

#include "agent/gpu/gpu_provider.h"

namespace allot::agent {

class SimulatedGpuProvider final : public GpuProvider {
 public:
  // Parses spec ("sim:..."); InvalidArgument naming the spec when it is malformed, or the file
  // when it cannot be read or parsed.
  static Result<std::unique_ptr<SimulatedGpuProvider>> create(const std::string& spec,
                                                              const std::string& hostSeed);

  // Memory of a model by its short name ("H200" -> 143771); 16384 for a model we do not know.
  static int64_t defaultMemoryMib(const std::string& model);

  // GpuProvider
  Result<std::vector<model::Gpu>> discover() override { return gpus_; }
  std::string name() const override { return "simulated"; }
  bool simulated() const override { return true; }
  std::string driverVersion() const override { return driverVersion_; }
  Result<std::vector<model::GpuSample>> sample() override;
  void setWorkloads(std::vector<Workload> workloads) override { workloads_ = std::move(workloads); }

 private:
  SimulatedGpuProvider() = default;

  std::vector<model::Gpu> gpus_;
  std::string driverVersion_;
  std::vector<Workload> workloads_;
};

}  // namespace allot::agent
