#pragma once
// Burn-in: a short compute load on every GPU, through the CUDA driver API loaded at run time
// (dlopen of libcuda.so.1, as NVML is loaded), so the agent needs no CUDA toolkit to build.
// The kernel is a small PTX module embedded here (JIT-compiled by the driver for whatever GPU it
// meets): each thread runs a fixed chain of fused multiply-adds and writes its result; the host
// checks every result against the value computed on the CPU with the same float arithmetic, so a
// GPU that computes wrongly (bad memory, bad SMs) fails even when it does not crash.
//
// Threading: blocks for about `durationMs`, loading every GPU at once from a thread each; runs on
// the host task's thread. Touches no
// GpuProvider.

#include <cstdint>
#include <string>
#include <vector>

namespace allot::agent {

inline constexpr char kDefaultCudaLibrary[] = "libcuda.so.1";

struct BurnInResult {
  bool ok = false;
  // "passed (N launches, X GFLOP/s)", "failed: GPU 2: wrong result ...",
  // "failed: cuModuleLoadData: CUDA_ERROR_...", "failed: cannot load libcuda.so.1: ..."
  std::string summary;
};

// A GPU to load: its NVML index (for the report) and UUID ("GPU-xxxxxxxx-..."), by which its CUDA
// device is found: CUDA numbers devices fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, so
// its ordinals need not be NVML's indexes. Without a UUID (or cuDeviceGetUuid) the index is used.
struct BurnInGpu {
  int index = 0;
  std::string uuid;
};

// Runs the load on every GPU at once for durationMs.
BurnInResult runBurnIn(const std::vector<BurnInGpu>& gpus, int64_t durationMs,
                       const std::string& library = kDefaultCudaLibrary);

// What every thread of the kernel must write, computed with the kernel's float arithmetic.
float burnInExpected(uint32_t thread);

// The kernel's shape, shared with the fake libcuda of the tests.
inline constexpr uint32_t kBurnInThreads = 256;
inline constexpr uint32_t kBurnInBlocks = 64;
inline constexpr uint32_t kBurnInIterations = 4096;  // FMAs per thread per launch

}  // namespace allot::agent
