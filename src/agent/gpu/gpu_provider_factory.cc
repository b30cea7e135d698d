#include "agent/gpu/gpu_provider_factory.h"

#include "agent/gpu/simulated_gpu_provider.h"

namespace allot::agent {
namespace {

Result<std::unique_ptr<GpuProvider>> simulated(const std::string& spec,
                                               const std::string& hostSeed) {
  auto p = SimulatedGpuProvider::create(spec, hostSeed);
  if (!p.ok()) return p.status();
  return std::unique_ptr<GpuProvider>(std::move(p).value());
}

}  // namespace

Result<std::unique_ptr<GpuProvider>> makeGpuProvider(const std::string& spec,
                                                     const std::string& hostSeed, std::string* note,
                                                     const std::string& nvmlLibrary) {
  if (note) note->clear();
  if (spec.rfind("sim:", 0) == 0) return simulated(spec, hostSeed);
  if (spec == "nvml") {
    auto p = NvmlGpuProvider::open(nvmlLibrary);
    if (!p.ok()) return p.status();
    return std::unique_ptr<GpuProvider>(std::move(p).value());
  }
  if (spec != "auto") {
    return Status::InvalidArgument("unknown GPU provider '" + spec +
                                   "': expected auto, nvml or sim:<spec> (e.g. sim:8xH100)");
  }

  std::string why;
  auto p = NvmlGpuProvider::open(nvmlLibrary);
  if (p.ok()) {
    auto gpus = (*p)->discover();
    if (gpus.ok() && !gpus->empty()) return std::unique_ptr<GpuProvider>(std::move(p).value());
    why = gpus.ok() ? "NVML reports no GPUs" : "NVML unavailable (" + gpus.status().message() + ")";
  } else {
    why = "NVML unavailable (" + p.status().message() + ")";
  }
  if (note) *note = why + "; using a SIMULATED 8xH100 host";
  return simulated(kFallbackSimSpec, hostSeed);
}

}  // namespace allot::agent
