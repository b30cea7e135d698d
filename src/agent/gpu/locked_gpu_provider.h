#pragma once
// LockedGpuProvider: a GpuProvider that may be called from several threads. Providers are not
// thread-safe (NVML handles and the simulated provider's workloads are plain state), yet the agent
// samples GPUs for telemetry on its I/O thread while a host task (wipe, health check) reads them
// on the task's thread. Every call goes through one mutex to the wrapped provider; calls are short
// (NVML queries), so the I/O thread never waits long. Owns nothing: `inner` outlives it.

#include <mutex>

#include "agent/gpu/gpu_provider.h"

namespace allot::agent {

class LockedGpuProvider final : public GpuProvider {
 public:
  explicit LockedGpuProvider(GpuProvider& inner) : inner_(inner) {}

  // GpuProvider
  Result<std::vector<model::Gpu>> discover() override {
    std::lock_guard lock(mu_);
    return inner_.discover();
  }
  std::string name() const override { return inner_.name(); }  // constant: no lock needed
  bool simulated() const override { return inner_.simulated(); }
  std::string driverVersion() const override {
    std::lock_guard lock(mu_);
    return inner_.driverVersion();
  }
  Result<std::vector<model::GpuSample>> sample() override {
    std::lock_guard lock(mu_);
    return inner_.sample();
  }
  void setWorkloads(std::vector<Workload> workloads) override {
    std::lock_guard lock(mu_);
    inner_.setWorkloads(std::move(workloads));
  }
  std::vector<XidEvent> drainXidEvents() override {
    std::lock_guard lock(mu_);
    return inner_.drainXidEvents();
  }

 private:
  GpuProvider& inner_;
  mutable std::mutex mu_;
};

}  // namespace allot::agent
