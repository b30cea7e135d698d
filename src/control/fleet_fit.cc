#include "control/fleet_fit.h"

#include <algorithm>
#include <set>

#include "common/version.h"

namespace allot::control {
namespace {

Status refuse(const std::string& message, const char* field) {
  return Status::InvalidArgument(std::string(field) + ": " + message, field);
}

std::string joined(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

// A host or GPU dedicated to another team is usable only when that team lends its idle capacity.
bool openTo(const FleetFitQuery& f, const std::string& dedicatedTo, const std::string& team) {
  if (dedicatedTo.empty() || dedicatedTo == team) return true;
  auto owner = f.teams.find(dedicatedTo);
  return owner != f.teams.end() && owner->second.lendDedicated;
}

bool modelAsked(const model::ResourceRequest& r, const std::string& gpuModel) {
  return r.gpuModels.empty() ||
         std::find(r.gpuModels.begin(), r.gpuModels.end(), gpuModel) != r.gpuModels.end();
}

// The hosts that pass each test of the request in turn: the test that ruled the last ones out
// says what to tell the user.
struct Narrowing {
  int inContour = 0;          // hosts of the contour open to the team
  int runsImages = 0;         // ... whose agent runs jobs in images, when the request needs it
  int withModel = 0;          // hosts with an open GPU of a model asked (every host, without GPUs)
  int64_t mostGpuMemory = 0;  // on one such GPU
  int withMemory = 0;         // ... that also has the GPU memory asked
  std::string newestDriver, newestCuda;
  int withVersions = 0;  // ... whose driver and CUDA meet the minimums
  int largest = 0;       // the most such GPUs on one such host
  int bigEnough = 0;     // hosts with enough such GPUs
  int withCpu = 0;       // ... and the CPU asked
  int fits = 0;          // ... and the memory asked
};

void keepNewest(std::string& newest, const std::string& v) {
  if (newest.empty() || compareVersions(v, newest) > 0) newest = v;
}

}  // namespace

Status checkFleetCanRun(const FleetFitQuery& f, const std::string& team, const std::string& contour,
                        const model::ResourceRequest& r, bool inImage) {
  if (f.hosts.empty()) return Status::Ok();
  auto candidate = [&](const model::Host& h) {
    const std::string& hostContour = h.contour.empty() ? f.defaultContour : h.contour;
    return hostContour == contour && openTo(f, h.dedicatedTo, team);
  };
  Narrowing n;
  const int gpusPerHost = r.wholeHost ? 0 : r.gpus;
  // A request without GPUs needs no model; a whole host needs a GPU of the models it names.
  const bool needsModel = gpusPerHost > 0 || (r.wholeHost && !r.gpuModels.empty());
  // One pass, stopping at the first hosts that fit; a refusal's numbers come from the full pass.
  for (const auto& [name, host] : f.hosts) {
    if (!candidate(host)) continue;
    ++n.inContour;
    if (inImage && !host.images) continue;
    ++n.runsImages;
    const model::Host* h = &host;
    int ofModel = 0, withMemory = 0;
    for (const auto& g : h->gpus) {
      if (!openTo(f, g.dedicatedTo, team) || !modelAsked(r, g.model)) continue;
      ++ofModel;
      n.mostGpuMemory = std::max(n.mostGpuMemory, g.memoryMib);
      // A fraction's memory is on its one shared GPU, a whole GPU's on each: the same test.
      if (r.gpuMemoryMib <= 0 || g.memoryMib <= 0 || g.memoryMib >= r.gpuMemoryMib) ++withMemory;
    }
    if (needsModel && ofModel == 0) continue;
    ++n.withModel;
    if (needsModel && withMemory == 0) continue;
    ++n.withMemory;
    const std::string driver = model::hostDriverVersion(*h), cuda = model::hostCudaVersion(*h);
    keepNewest(n.newestDriver, driver);
    keepNewest(n.newestCuda, cuda);
    if ((!r.minDriver.empty() && !versionAtLeast(driver, r.minDriver)) ||
        (!r.minCuda.empty() && !versionAtLeast(cuda, r.minCuda)))
      continue;
    ++n.withVersions;
    n.largest = std::max(n.largest, withMemory);
    if (withMemory < gpusPerHost) continue;
    ++n.bigEnough;
    // A whole host takes what the host has; a host that reports no CPU or memory (0) is not
    // judged on them.
    if (!r.wholeHost && h->cpus > 0 && r.cpuMillis > int64_t{h->cpus} * 1000) continue;
    ++n.withCpu;
    if (!r.wholeHost && h->memoryMib > 0 && r.memoryMib > h->memoryMib) continue;
    // Most requests fit on the first hosts they look at: no need to look further.
    if (++n.fits >= r.hosts) return Status::Ok();
  }
  if (n.inContour == 0)
    return refuse("no host of contour '" + contour + "' is open to team '" + team + "'", "contour");
  const std::string where = "no host of contour '" + contour + "' open to team '" + team + "'";
  if (n.runsImages == 0)
    return refuse(where +
                      " runs jobs in images (an agent does where its workloads run as their "
                      "owners and crun, skopeo and a seccomp profile are there)",
                  "image");
  if (n.withModel == 0) {
    std::set<std::string> offered;  // the models on GPUs open to the team there
    for (const auto& [name, h] : f.hosts) {
      if (!candidate(h)) continue;
      for (const auto& g : h.gpus) {
        if (openTo(f, g.dedicatedTo, team)) offered.insert(g.model);
      }
    }
    std::string asked;
    for (const auto& m : r.gpuModels) asked += (asked.empty() ? "" : " or ") + m;
    return refuse(where + " has a GPU of model " + asked + " (it offers " + joined(offered) + ")",
                  "gpu_models");
  }
  if (n.withMemory == 0)
    return refuse(where + " has a GPU of the models asked with " + std::to_string(r.gpuMemoryMib) +
                      " MiB of memory (the most is " + std::to_string(n.mostGpuMemory) + " MiB)",
                  "gpu_memory_mib");
  if (n.withVersions == 0) {
    if (!r.minDriver.empty() && !versionAtLeast(n.newestDriver, r.minDriver))
      return refuse(where + " with the GPUs asked has NVIDIA driver " + r.minDriver +
                        " or newer (the newest is " +
                        (n.newestDriver.empty() ? "unknown" : n.newestDriver) + ")",
                    "min_driver");
    return refuse(where + " with the GPUs asked has CUDA " + r.minCuda +
                      " or newer (the newest is " +
                      (n.newestCuda.empty() ? "unknown" : n.newestCuda) + ")",
                  "min_cuda");
  }
  if (n.bigEnough == 0)
    return refuse(where + " has " + std::to_string(gpusPerHost) +
                      " GPUs of the kind asked (the most on one host is " +
                      std::to_string(n.largest) + ")",
                  "gpus");
  if (n.withCpu == 0)
    return refuse(
        where + " with the GPUs asked has " + std::to_string(r.cpuMillis) + " millicores of CPU",
        "cpu_millis");
  if (n.fits == 0)
    return refuse(
        where + " with the GPUs asked has " + std::to_string(r.memoryMib) + " MiB of memory",
        "memory_mib");
  return refuse("only " + std::to_string(n.fits) + (n.fits == 1 ? " host" : " hosts") +
                    " of contour '" + contour + "' open to team '" + team +
                    "' can take a rank of this job, and it asks for " + std::to_string(r.hosts),
                "hosts");
}

}  // namespace allot::control
