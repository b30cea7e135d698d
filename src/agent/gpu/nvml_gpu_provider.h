#pragma once
// NvmlGpuProvider: the host's real GPUs, read through NVML. libnvidia-ml.so.1 is loaded at run
// time (dlopen), so the agent builds and runs on machines without the NVIDIA driver; only open()
// fails there. NVML is initialised for the provider's lifetime and shut down by its destructor.
//
// Besides each GPU's identity and memory it reports topology: the NVLink domain (GPUs joined by
// active NVLinks, directly or through NVSwitches) and the PCIe switch each GPU shares with
// others. Topology is best effort: the NVML functions it needs are optional, and when one is
// missing or fails the GPUs say -1 (unknown), the reason is logged once at debug level, and
// discover() still succeeds.

#include <memory>
#include <string>
#include <vector>

#include "agent/gpu/gpu_provider.h"

struct nvmlDevice_st;  // NVML's opaque device; nvmlDevice_t is a pointer to it

namespace allot::agent {

class NvmlGpuProvider final : public GpuProvider {
 public:
  static constexpr char kDefaultLibrary[] = "libnvidia-ml.so.1";

  // Loads the library and initialises NVML. Unavailable when the library is missing, lacks a
  // function we need, or nvmlInit fails (the message carries nvmlErrorString). `library` is
  // replaceable so tests can load a fake NVML.
  static Result<std::unique_ptr<NvmlGpuProvider>> open(
      const std::string& library = kDefaultLibrary);
  ~NvmlGpuProvider() override;
  NvmlGpuProvider(const NvmlGpuProvider&) = delete;
  NvmlGpuProvider& operator=(const NvmlGpuProvider&) = delete;

  // GpuProvider
  Result<std::vector<model::Gpu>> discover() override;
  std::string name() const override { return "nvml"; }
  bool simulated() const override { return false; }
  std::string driverVersion() const override;
  // Utilisation, memory used, temperature, power, SM clock, aggregate ECC counts and compute
  // processes, through the provider's one NVML session. All but memory are optional symbols.
  Result<std::vector<model::GpuSample>> sample() override;
  // Critical XID events, from an NVML event set each GPU joins when discover() first sees it.
  std::vector<XidEvent> drainXidEvents() override;

 private:
  struct Api;
  explicit NvmlGpuProvider(std::unique_ptr<Api> api);
  // Fill in gpus[i].nvlinkDomain / pcieSwitch; devices[i] and busIds[i] are GPU i's NVML handle
  // and PCI address (empty when unknown).
  void findNvlinkDomains(const std::vector<nvmlDevice_st*>& devices,
                         const std::vector<std::string>& busIds, std::vector<model::Gpu>& gpus);
  void findPcieSwitches(const std::vector<nvmlDevice_st*>& devices, std::vector<model::Gpu>& gpus);
  void registerXidEvents(const std::vector<nvmlDevice_st*>& devices);

  std::unique_ptr<Api> api_;
};

// The name users type for a GPU, from NVML's marketing name: "NVIDIA A100-SXM4-80GB" -> "A100",
// "NVIDIA H200" -> "H200", "Tesla V100-PCIE-32GB" -> "V100", "NVIDIA RTX A6000" -> "A6000",
// "NVIDIA GeForce RTX 4090" -> "RTX4090".
std::string shortGpuModel(const std::string& fullName);

}  // namespace allot::agent
