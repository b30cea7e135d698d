#include "agent/host_ops/health_check.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <thread>

#include "common/version.h"

namespace allot::agent {
namespace {

// What NVIDIA's XID catalogue calls the common critical ones, for the report.
const char* xidMeaning(int64_t xid) {
  switch (xid) {
    case 13:
      return "graphics engine exception";
    case 31:
      return "GPU memory page fault";
    case 43:
      return "GPU stopped processing";
    case 48:
      return "double-bit ECC error";
    case 63:
      return "ECC page retirement or row remapping";
    case 64:
      return "ECC page retirement or row remapper failure";
    case 74:
      return "NVLink error";
    case 79:
      return "fallen off the bus";
    case 92:
      return "high single-bit ECC error rate";
    case 94:
      return "contained ECC error";
    case 95:
      return "uncontained ECC error";
    default:
      return "critical error";
  }
}

// The burn-in on a thread of its own, waited for at most its duration plus kBurnInSlack: a hung
// GPU can block a CUDA call for ever, and the health check must end. A thread that overruns is
// abandoned (detached; it holds only its own copies), which is the lesser harm: the host is
// reported unhealthy, and an operator will reset the GPU or reboot.
constexpr auto kBurnInSlack = std::chrono::seconds(30);

BurnInResult burnInBounded(const std::vector<BurnInGpu>& gpus, int64_t ms,
                           const std::string& library) {
  auto promise = std::make_shared<std::promise<BurnInResult>>();
  auto result = promise->get_future();
  std::thread([promise, gpus, ms, library] {
    promise->set_value(runBurnIn(gpus, ms, library));
  }).detach();
  const auto limit = std::chrono::milliseconds(ms) + kBurnInSlack;
  if (result.wait_for(limit) != std::future_status::ready)
    return {false,
            "failed: did not finish within " +
                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(limit).count()) +
                " s (a GPU hung?)"};
  return result.get();
}

}  // namespace

model::HealthReport runHealthCheck(const HealthCheckOptions& o,
                                   const std::function<void(std::string_view)>& onLine) {
  model::HealthReport r;
  auto problem = [&](const std::string& p) {
    r.problems.push_back(p);
    if (onLine) onLine("health problem: " + p + "\n");
  };
  const model::HealthStep& step = o.step;
  std::vector<model::Gpu> gpus;
  if (!o.gpus) {
    problem("no GPU provider");
  } else if (auto found = o.gpus->discover(); !found.ok()) {
    problem("cannot list the GPUs: " + found.status().message());
  } else {
    gpus = *found;
  }
  r.gpuCount = static_cast<int>(gpus.size());
  for (const auto& g : gpus) {
    r.gpuModels.push_back(g.model);
    if (r.driverVersion.empty()) r.driverVersion = g.driverVersion;
    if (r.cudaVersion.empty()) r.cudaVersion = g.cudaVersion;
  }
  if (r.driverVersion.empty() && o.gpus) r.driverVersion = o.gpus->driverVersion();

  if (step.gpuCount >= 0 && r.gpuCount != step.gpuCount)
    problem("expected " + std::to_string(step.gpuCount) + " GPUs, found " +
            std::to_string(r.gpuCount));
  for (size_t i = 0; i < step.gpuModels.size() && i < gpus.size(); ++i) {
    if (!step.gpuModels[i].empty() && gpus[i].model != step.gpuModels[i])
      problem("GPU " + std::to_string(gpus[i].index) + " is '" + gpus[i].model +
              "' but was commissioned as '" + step.gpuModels[i] + "'");
  }
  if (!step.minDriver.empty()) {
    if (r.driverVersion.empty()) {
      problem("driver version unknown; " + step.minDriver + " or newer is required");
    } else if (!versionAtLeast(r.driverVersion, step.minDriver)) {
      problem("driver " + r.driverVersion + " is older than the required " + step.minDriver);
    }
  }

  struct statvfs fsStat = {};
  if (::statvfs(o.diskPath.c_str(), &fsStat) == 0) {
    r.freeDiskMib = static_cast<int64_t>(fsStat.f_bavail * fsStat.f_frsize / (1024 * 1024));
    if (step.minFreeDiskMib > 0 && r.freeDiskMib < step.minFreeDiskMib)
      problem(std::to_string(r.freeDiskMib) + " MiB free on " + o.diskPath + ", need " +
              std::to_string(step.minFreeDiskMib) + " MiB");
  } else if (step.minFreeDiskMib > 0) {
    problem("cannot tell the free space on " + o.diskPath + ": " + std::strerror(errno));
  }

  if (o.gpus && !gpus.empty()) {
    if (auto samples = o.gpus->sample(); !samples.ok()) {
      problem("cannot read the GPUs: " + samples.status().message());
    } else {
      for (const auto& s : *samples) {
        if (s.eccUncorrected.value_or(0) > 0)
          problem("GPU " + std::to_string(s.index) + ": " + std::to_string(*s.eccUncorrected) +
                  " uncorrectable ECC errors");
      }
    }
  }
  for (const auto& x : o.xidSource ? o.xidSource() : o.xidEvents) {
    problem((x.gpuIndex >= 0 ? "GPU " + std::to_string(x.gpuIndex) : std::string("a GPU")) +
            ": XID " + std::to_string(x.xid) + " (" + xidMeaning(x.xid) + ") at " +
            std::to_string(x.at) + " ms since the epoch");
  }

  if (!step.burnIn) {
    r.burnIn = "not asked for";
  } else if (o.gpus && o.gpus->simulated()) {
    r.burnIn = "skipped: simulated GPUs";
  } else if (gpus.empty()) {
    r.burnIn = "skipped: no GPUs";
  } else {
    if (onLine) onLine("burn-in: " + std::to_string(step.burnInMs) + " ms on every GPU at once\n");
    std::vector<BurnInGpu> targets;
    for (const auto& g : gpus) targets.push_back({g.index, g.uuid});
    BurnInResult b = burnInBounded(targets, step.burnInMs, o.cudaLibrary);
    r.burnIn = b.summary;
    if (!b.ok) problem("burn-in " + b.summary);
  }
  if (onLine) onLine(describeHealth(r));
  return r;
}

std::string describeHealth(const model::HealthReport& r) {
  std::string models;
  for (const auto& m : r.gpuModels) models += (models.empty() ? "" : ", ") + m;
  std::string out = "health: " + std::to_string(r.gpuCount) + " GPUs" +
                    (models.empty() ? "" : " (" + models + ")") + ", driver " +
                    (r.driverVersion.empty() ? "unknown" : r.driverVersion) + ", CUDA " +
                    (r.cudaVersion.empty() ? "unknown" : r.cudaVersion) + ", " +
                    (r.freeDiskMib >= 0 ? std::to_string(r.freeDiskMib) + " MiB" : "unknown") +
                    " free disk, burn-in " + r.burnIn + "\n";
  out += r.problems.empty() ? "health: ok\n"
                            : "health: " + std::to_string(r.problems.size()) + " problem" +
                                  (r.problems.size() == 1 ? "" : "s") + "\n";
  return out;
}

}  // namespace allot::agent
