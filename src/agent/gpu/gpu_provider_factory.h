#pragma once
// Chooses the agent's GpuProvider from its --gpus flag.

#include <memory>
#include <string>

#include "agent/gpu/gpu_provider.h"
#include "agent/gpu/nvml_gpu_provider.h"

namespace allot::agent {

// The simulated host "auto" falls back to when NVML is not there.
inline constexpr char kFallbackSimSpec[] = "sim:8xH100";

// spec:
//   "auto"   NVML when it opens and reports at least one GPU; otherwise a simulated 8xH100 host,
//            and *note (when non-null) says why, for the agent to log loudly.
//   "nvml"   NVML or an error saying why not.
//   "sim:..."  a SimulatedGpuProvider (see simulated_gpu_provider.h).
// hostSeed makes simulated UUIDs unique per host (the hostname). nvmlLibrary is for tests.
Result<std::unique_ptr<GpuProvider>> makeGpuProvider(
    const std::string& spec, const std::string& hostSeed, std::string* note,
    const std::string& nvmlLibrary = NvmlGpuProvider::kDefaultLibrary);

}  // namespace allot::agent
