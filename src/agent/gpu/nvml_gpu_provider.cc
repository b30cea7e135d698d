#include "agent/gpu/nvml_gpu_provider.h"

#include <dlfcn.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "common/log.h"

namespace allot::agent {
namespace {

// Our own minimal declarations of the NVML C API (nvml.h), so the build needs nothing from
// NVIDIA. Only the types and functions we call; layouts are NVML's, stable across drivers.
using nvmlReturn_t = int;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlErrorInvalidArgument = 2;  // e.g. a link number the GPU lacks
constexpr nvmlReturn_t kNvmlErrorNotSupported = 3;     // e.g. NVLink on a PCIe-only GPU
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};
constexpr unsigned kUuidBufferSize = 96;     // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned kNameBufferSize = 96;     // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kVersionBufferSize = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
constexpr unsigned kNvlinkMaxLinks = 18;     // NVML_NVLINK_MAX_LINKS (6 and 12 in older drivers)
constexpr int kNvmlFeatureEnabled = 1;       // nvmlEnableState_t NVML_FEATURE_ENABLED
// nvmlIntNvLinkDeviceType_t: what is at the far end of an NVLink.
constexpr int kNvlinkDeviceTypeGpu = 0;
constexpr int kNvlinkDeviceTypeIbmNpu = 1;
constexpr int kNvlinkDeviceTypeSwitch = 2;
constexpr int kNvlinkDeviceTypeUnknown = 0xFF;
// nvmlGpuTopologyLevel_t: SINGLE (10) is one PCIe switch between two GPUs, MULTIPLE (20) several
// switches but no host bridge; both mean the GPUs sit under one (top-level) switch.
constexpr int kNvmlTopologyMultiple = 20;
// For sampling.
struct nvmlUtilization_t {
  unsigned int gpu;  // percent of time a kernel ran, over the driver's last sample period
  unsigned int memory;
};
// nvmlProcessInfo_t as the _v2 and _v3 functions fill it (the same layout).
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
constexpr int kNvmlTemperatureGpu = 0;          // NVML_TEMPERATURE_GPU
constexpr int kNvmlClockSm = 1;                 // NVML_CLOCK_SM
constexpr int kNvmlMemoryErrorCorrected = 0;    // NVML_MEMORY_ERROR_TYPE_CORRECTED
constexpr int kNvmlMemoryErrorUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kNvmlAggregateEcc = 1;            // NVML_AGGREGATE_ECC: since the GPU was made
constexpr unsigned kMaxProcesses = 256;
// For XID events.
using nvmlEventSet_t = struct nvmlEventSet_st*;
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the XID for XID events
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
constexpr unsigned long long kNvmlEventTypeXidCriticalError = 0x8;

}  // namespace

struct NvmlGpuProvider::Api {
  void* lib = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*errorString)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*getCount)(unsigned int*) = nullptr;
  nvmlReturn_t (*getHandleByIndex)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*getUuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*getName)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*getMinor)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*getMemory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*getDriverVersion)(char*, unsigned int) = nullptr;
  // Optional: older drivers lack them, and we can live without CUDA version or NUMA node.
  nvmlReturn_t (*getCudaVersion)(int*) = nullptr;
  nvmlReturn_t (*getPciInfo)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  // Optional, for topology: without them GPUs report -1 (unknown) for NVLink domain and PCIe
  // switch, and inventory goes on.
  nvmlReturn_t (*getNvLinkState)(nvmlDevice_t, unsigned int, int*) = nullptr;
  nvmlReturn_t (*getNvLinkRemotePciInfo)(nvmlDevice_t, unsigned int, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*getNvLinkRemoteDeviceType)(nvmlDevice_t, unsigned int, int*) = nullptr;
  nvmlReturn_t (*getTopologyCommonAncestor)(nvmlDevice_t, nvmlDevice_t, int*) = nullptr;
  // Optional, for sampling: without one, that reading is absent from every sample.
  nvmlReturn_t (*getUtilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*getTemperature)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*getPowerUsage)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*getClockInfo)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*getTotalEccErrors)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*getComputeProcesses)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*) = nullptr;
  // Optional, for XID events: without them no XID is ever reported (logged once).
  nvmlReturn_t (*eventSetCreate)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*registerEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*eventSetWait)(nvmlEventSet_t, nvmlEventData_t*, unsigned int) = nullptr;
  nvmlReturn_t (*eventSetFree)(nvmlEventSet_t) = nullptr;
  nvmlEventSet_t eventSet = nullptr;
  std::map<nvmlDevice_t, int> xidDevices;  // registered devices, by handle, to their index

  // Why topology is unknown, each said once (at debug level) for the provider's lifetime:
  // discover() runs for every inventory, and the reason rarely changes.
  std::set<std::string> noted;
  void note(const std::string& why) {
    if (noted.insert(why).second) spdlog::debug("GPU topology: {}", why);
  }

  // The same for readings a sample leaves out, at info level: an operator wondering why a panel
  // is empty should find the reason in the agent's log.
  std::set<std::string> sampleNoted;
  void sampleNote(const std::string& why) {
    if (sampleNoted.insert(why).second) spdlog::info("GPU telemetry: {}", why);
  }

  std::string error(nvmlReturn_t rc) const {
    const char* s = errorString ? errorString(rc) : nullptr;
    return s ? std::string(s) : "NVML error " + std::to_string(rc);
  }
};

namespace {

template <typename F>
bool bind(void* lib, const char* symbol, F*& out) {
  out = reinterpret_cast<F*>(dlsym(lib, symbol));
  return out != nullptr;
}

// The NUMA node of a PCI device, from sysfs; NVML's busId "00000000:3B:00.0" names it
// "0000:3b:00.0" there. -1 when unknown (single-socket hosts report -1 too).
int numaNodeOf(const nvmlPciInfo_t& pci) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  if (std::sscanf(pci.busId, "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) return -1;
  char sysfsId[32];
  std::snprintf(sysfsId, sizeof sysfsId, "%04x:%02x:%02x.%x", domain & 0xffff, bus, device,
                function);
  std::ifstream in(std::string("/sys/bus/pci/devices/") + sysfsId + "/numa_node");
  int node = -1;
  if (!(in >> node)) return -1;
  return node;
}

// A PCI address as "domain:bus:device", the same whichever way NVML spelled it; empty when
// NVML gave none. Functions are left out: a GPU or NVSwitch is function 0.
std::string pciKey(const nvmlPciInfo_t& pci) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  char key[32];
  if (std::sscanf(pci.busId, "%x:%x:%x.%x", &domain, &bus, &device, &function) == 4) {
    std::snprintf(key, sizeof key, "%x:%x:%x", domain, bus, device);
    return key;
  }
  if (pci.domain == 0 && pci.bus == 0 && pci.device == 0) return {};
  std::snprintf(key, sizeof key, "%x:%x:%x", pci.domain, pci.bus, pci.device);
  return key;
}

// Union-find over a host's GPUs, for grouping them by what they share.
class Groups {
 public:
  explicit Groups(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  void join(size_t a, size_t b) { parent_[root(a)] = root(b); }
  // Each GPU's group: 0, 1, ... in the order of each group's lowest index; -1 for a GPU that
  // shares its group with no other.
  std::vector<int> labels() {
    std::vector<int> size(parent_.size(), 0);
    for (size_t i = 0; i < parent_.size(); ++i) ++size[root(i)];
    std::map<size_t, int> label;
    std::vector<int> out(parent_.size(), -1);
    for (size_t i = 0; i < parent_.size(); ++i) {
      size_t r = root(i);
      if (size[r] < 2) continue;
      auto it = label.emplace(r, static_cast<int>(label.size())).first;
      out[i] = it->second;
    }
    return out;
  }

 private:
  size_t root(size_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  std::vector<size_t> parent_;
};

std::string cudaVersionText(int v) {
  // NVML encodes 12.4 as 12040.
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace

Result<std::unique_ptr<NvmlGpuProvider>> NvmlGpuProvider::open(const std::string& library) {
  auto api = std::make_unique<Api>();
  api->lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (api->lib == nullptr) {
    return Status::Unavailable(library + " not found: is the NVIDIA driver installed?");
  }
  auto missing = [&](const char* symbol) {
    dlclose(api->lib);
    return Status::Unavailable(library + " lacks " + symbol + ": is the NVIDIA driver too old?");
  };
  void* lib = api->lib;
  if (!bind(lib, "nvmlInit_v2", api->init)) return missing("nvmlInit_v2");
  if (!bind(lib, "nvmlShutdown", api->shutdown)) return missing("nvmlShutdown");
  if (!bind(lib, "nvmlErrorString", api->errorString)) return missing("nvmlErrorString");
  if (!bind(lib, "nvmlDeviceGetCount_v2", api->getCount)) return missing("nvmlDeviceGetCount_v2");
  if (!bind(lib, "nvmlDeviceGetHandleByIndex_v2", api->getHandleByIndex)) {
    return missing("nvmlDeviceGetHandleByIndex_v2");
  }
  if (!bind(lib, "nvmlDeviceGetUUID", api->getUuid)) return missing("nvmlDeviceGetUUID");
  if (!bind(lib, "nvmlDeviceGetName", api->getName)) return missing("nvmlDeviceGetName");
  if (!bind(lib, "nvmlDeviceGetMinorNumber", api->getMinor)) {
    return missing("nvmlDeviceGetMinorNumber");
  }
  if (!bind(lib, "nvmlDeviceGetMemoryInfo", api->getMemory)) {
    return missing("nvmlDeviceGetMemoryInfo");
  }
  if (!bind(lib, "nvmlSystemGetDriverVersion", api->getDriverVersion)) {
    return missing("nvmlSystemGetDriverVersion");
  }
  if (!bind(lib, "nvmlSystemGetCudaDriverVersion_v2", api->getCudaVersion)) {
    bind(lib, "nvmlSystemGetCudaDriverVersion", api->getCudaVersion);
  }
  bind(lib, "nvmlDeviceGetPciInfo_v3", api->getPciInfo);
  bind(lib, "nvmlDeviceGetNvLinkState", api->getNvLinkState);
  bind(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", api->getNvLinkRemotePciInfo);
  bind(lib, "nvmlDeviceGetNvLinkRemoteDeviceType", api->getNvLinkRemoteDeviceType);
  bind(lib, "nvmlDeviceGetTopologyCommonAncestor", api->getTopologyCommonAncestor);
  bind(lib, "nvmlDeviceGetUtilizationRates", api->getUtilization);
  bind(lib, "nvmlDeviceGetTemperature", api->getTemperature);
  bind(lib, "nvmlDeviceGetPowerUsage", api->getPowerUsage);
  bind(lib, "nvmlDeviceGetClockInfo", api->getClockInfo);
  bind(lib, "nvmlDeviceGetTotalEccErrors", api->getTotalEccErrors);
  if (!bind(lib, "nvmlDeviceGetComputeRunningProcesses_v3", api->getComputeProcesses)) {
    bind(lib, "nvmlDeviceGetComputeRunningProcesses_v2", api->getComputeProcesses);
  }
  bind(lib, "nvmlEventSetCreate", api->eventSetCreate);
  bind(lib, "nvmlDeviceRegisterEvents", api->registerEvents);
  if (!bind(lib, "nvmlEventSetWait_v2", api->eventSetWait)) {
    bind(lib, "nvmlEventSetWait", api->eventSetWait);
  }
  bind(lib, "nvmlEventSetFree", api->eventSetFree);

  nvmlReturn_t rc = api->init();
  if (rc != kNvmlSuccess) {
    std::string why = api->error(rc);
    dlclose(api->lib);
    return Status::Unavailable("failed to initialise NVML: " + why);
  }
  return std::unique_ptr<NvmlGpuProvider>(new NvmlGpuProvider(std::move(api)));
}

NvmlGpuProvider::NvmlGpuProvider(std::unique_ptr<Api> api) : api_(std::move(api)) {}

NvmlGpuProvider::~NvmlGpuProvider() {
  if (api_->eventSet && api_->eventSetFree) api_->eventSetFree(api_->eventSet);
  api_->shutdown();
  dlclose(api_->lib);
}

std::string NvmlGpuProvider::driverVersion() const {
  char buf[kVersionBufferSize] = {};
  if (api_->getDriverVersion(buf, sizeof buf) != kNvmlSuccess) return {};
  return buf;
}

Result<std::vector<model::Gpu>> NvmlGpuProvider::discover() {
  unsigned count = 0;
  nvmlReturn_t rc = api_->getCount(&count);
  if (rc != kNvmlSuccess) return Status::Unavailable("failed to get GPU count: " + api_->error(rc));

  std::string driver = driverVersion();
  std::string cuda;
  int cudaRaw = 0;
  if (api_->getCudaVersion && api_->getCudaVersion(&cudaRaw) == kNvmlSuccess) {
    cuda = cudaVersionText(cudaRaw);
  }

  std::vector<model::Gpu> gpus;
  std::vector<nvmlDevice_t> devices;
  std::vector<std::string> busIds;  // pciKey of each GPU; empty when unknown
  for (unsigned i = 0; i < count; ++i) {
    auto fail = [&](const char* what, nvmlReturn_t r) {
      return Status::Unavailable("failed to get " + std::string(what) + " of GPU " +
                                 std::to_string(i) + ": " + api_->error(r));
    };
    nvmlDevice_t dev = nullptr;
    if ((rc = api_->getHandleByIndex(i, &dev)) != kNvmlSuccess) return fail("handle", rc);
    char uuid[kUuidBufferSize] = {};
    if ((rc = api_->getUuid(dev, uuid, sizeof uuid)) != kNvmlSuccess) return fail("UUID", rc);
    char name[kNameBufferSize] = {};
    if ((rc = api_->getName(dev, name, sizeof name)) != kNvmlSuccess) return fail("name", rc);
    unsigned minor = 0;
    if ((rc = api_->getMinor(dev, &minor)) != kNvmlSuccess) return fail("minor number", rc);
    nvmlMemory_t mem = {};
    if ((rc = api_->getMemory(dev, &mem)) != kNvmlSuccess) return fail("memory", rc);

    model::Gpu g;
    g.index = static_cast<int>(i);
    g.uuid = uuid;
    g.minor = static_cast<int>(minor);
    g.model = shortGpuModel(name);
    g.memoryMib = static_cast<int64_t>(mem.total / (1024 * 1024));
    nvmlPciInfo_t pci = {};
    std::string busId;
    if (api_->getPciInfo && api_->getPciInfo(dev, &pci) == kNvmlSuccess) {
      g.numaNode = numaNodeOf(pci);
      busId = pciKey(pci);
    }
    g.driverVersion = driver;
    g.cudaVersion = cuda;
    gpus.push_back(g);
    devices.push_back(dev);
    busIds.push_back(busId);
  }
  findNvlinkDomains(devices, busIds, gpus);
  findPcieSwitches(devices, gpus);
  registerXidEvents(devices);
  return gpus;
}

// Each GPU is registered once, when first discovered; the set then queues its events in the
// driver until drainXidEvents() reads them.
void NvmlGpuProvider::registerXidEvents(const std::vector<nvmlDevice_st*>& devices) {
  Api& api = *api_;
  if (!api.eventSetCreate || !api.registerEvents || !api.eventSetWait) {
    api.sampleNote("NVML lacks the event functions; XID errors are not watched");
    return;
  }
  if (!api.eventSet) {
    if (nvmlReturn_t rc = api.eventSetCreate(&api.eventSet); rc != kNvmlSuccess) {
      api.sampleNote("nvmlEventSetCreate failed: " + api.error(rc) + "; XID errors not watched");
      api.eventSet = nullptr;
      return;
    }
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    if (api.xidDevices.count(devices[i])) continue;
    nvmlReturn_t rc = api.registerEvents(devices[i], kNvmlEventTypeXidCriticalError, api.eventSet);
    if (rc != kNvmlSuccess) {
      api.sampleNote("nvmlDeviceRegisterEvents failed on GPU " + std::to_string(i) + ": " +
                     api.error(rc) + "; its XID errors are not watched");
      continue;
    }
    api.xidDevices[devices[i]] = static_cast<int>(i);
  }
}

std::vector<XidEvent> NvmlGpuProvider::drainXidEvents() {
  std::vector<XidEvent> out;
  Api& api = *api_;
  if (!api.eventSet) return out;
  // Bounded: a flood of events must not hold the caller (and the provider's lock) for long.
  for (int n = 0; n < 1024; ++n) {
    nvmlEventData_t data = {};
    if (api.eventSetWait(api.eventSet, &data, 0) != kNvmlSuccess) break;  // timeout: none left
    if ((data.eventType & kNvmlEventTypeXidCriticalError) == 0) continue;
    XidEvent e;
    auto it = api.xidDevices.find(data.device);
    e.gpuIndex = it == api.xidDevices.end() ? -1 : it->second;
    e.xid = static_cast<int64_t>(data.eventData);
    e.at = SystemClock().nowMs();
    out.push_back(e);
  }
  return out;
}

Result<std::vector<model::GpuSample>> NvmlGpuProvider::sample() {
  unsigned count = 0;
  nvmlReturn_t rc = api_->getCount(&count);
  if (rc != kNvmlSuccess) return Status::Unavailable("failed to get GPU count: " + api_->error(rc));
  Api& api = *api_;
  // A reading is absent when its function is missing or fails; either reason is logged once.
  auto missing = [&](const char* symbol) {
    api.sampleNote(std::string("NVML lacks ") + symbol + "; that reading is left out");
  };
  auto failed = [&](const char* symbol, unsigned gpu, nvmlReturn_t r) {
    api.sampleNote(std::string(symbol) + " failed on GPU " + std::to_string(gpu) + ": " +
                   api.error(r) + "; that reading is left out");
  };
  std::vector<model::GpuSample> out;
  out.reserve(count);
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    if ((rc = api.getHandleByIndex(i, &dev)) != kNvmlSuccess) {
      failed("nvmlDeviceGetHandleByIndex_v2", i, rc);
      continue;
    }
    model::GpuSample s;
    s.index = static_cast<int>(i);
    if (!api.getUtilization) {
      missing("nvmlDeviceGetUtilizationRates");
    } else {
      nvmlUtilization_t u = {};
      if ((rc = api.getUtilization(dev, &u)) == kNvmlSuccess) {
        s.utilizationPct = u.gpu;
      } else {
        failed("nvmlDeviceGetUtilizationRates", i, rc);
      }
    }
    nvmlMemory_t mem = {};
    if ((rc = api.getMemory(dev, &mem)) == kNvmlSuccess) {
      s.memoryUsedMib = static_cast<int64_t>(mem.used / (1024 * 1024));
    } else {
      failed("nvmlDeviceGetMemoryInfo", i, rc);
    }
    // A reading NVML gives as one unsigned, after the device and `args`; none when `fn` is
    // missing or fails.
    auto unsignedReading = [&](const char* symbol, auto fn,
                               auto... args) -> std::optional<unsigned> {
      if (!fn) {
        missing(symbol);
        return std::nullopt;
      }
      unsigned v = 0;
      if ((rc = fn(dev, args..., &v)) == kNvmlSuccess) return v;
      failed(symbol, i, rc);
      return std::nullopt;
    };
    // A reading no GPU survives is a driver's garbage: sent on, a value past 2^31 would have
    // allotd refuse the host's whole telemetry message (fractionsWithinIntRange).
    if (auto v =
            unsignedReading("nvmlDeviceGetTemperature", api.getTemperature, kNvmlTemperatureGpu);
        v && *v < 1000)
      s.temperatureC = *v;
    if (auto v = unsignedReading("nvmlDeviceGetPowerUsage", api.getPowerUsage))
      s.powerW = *v / 1000.0;  // NVML says milliwatts
    if (auto v = unsignedReading("nvmlDeviceGetClockInfo", api.getClockInfo, kNvmlClockSm))
      s.smClockMhz = *v;
    if (!api.getTotalEccErrors) {
      missing("nvmlDeviceGetTotalEccErrors");
    } else {
      unsigned long long n = 0;
      if ((rc = api.getTotalEccErrors(dev, kNvmlMemoryErrorCorrected, kNvmlAggregateEcc, &n)) ==
          kNvmlSuccess) {
        s.eccCorrected = static_cast<int64_t>(n);
        if ((rc = api.getTotalEccErrors(dev, kNvmlMemoryErrorUncorrected, kNvmlAggregateEcc, &n)) ==
            kNvmlSuccess) {
          s.eccUncorrected = static_cast<int64_t>(n);
        }
      }
      // NOT_SUPPORTED on GPUs without ECC (or with it off): absent, not zero.
      if (rc != kNvmlSuccess) failed("nvmlDeviceGetTotalEccErrors", i, rc);
    }
    if (!api.getComputeProcesses) {
      missing("nvmlDeviceGetComputeRunningProcesses_v3 and _v2");
    } else {
      nvmlProcessInfo_t procs[kMaxProcesses];
      unsigned n = kMaxProcesses;
      if ((rc = api.getComputeProcesses(dev, &n, procs)) == kNvmlSuccess) {
        for (unsigned p = 0; p < n && p < kMaxProcesses; ++p) {
          s.pids.push_back(static_cast<int>(procs[p].pid));
        }
      } else {
        failed("nvmlDeviceGetComputeRunningProcesses", i, rc);
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

// NVLink domains are the connected components of GPUs joined by active links. A link's far end
// is a GPU of this host (found by PCI address), an NVSwitch, something else (an IBM NPU), or a GPU
// NVML does not show us (the agent sees a subset). On NVSwitch systems every GPU's links go to
// switches, all on one fabric, so every GPU with a link to a switch is in one domain. Without
// nvmlDeviceGetNvLinkRemoteDeviceType (older drivers) a far end that is not one of our GPUs is
// taken to be a switch.
void NvmlGpuProvider::findNvlinkDomains(const std::vector<nvmlDevice_st*>& devices,
                                        const std::vector<std::string>& busIds,
                                        std::vector<model::Gpu>& gpus) {
  if (!api_->getNvLinkState || !api_->getNvLinkRemotePciInfo || !api_->getPciInfo) {
    api_->note(
        "NVML lacks nvmlDeviceGetNvLinkState, nvmlDeviceGetNvLinkRemotePciInfo_v2 or "
        "nvmlDeviceGetPciInfo_v3; NVLink domains unknown");
    return;
  }
  std::map<std::string, size_t> byBusId;
  for (size_t i = 0; i < busIds.size(); ++i) {
    if (!busIds[i].empty()) byBusId[busIds[i]] = i;
  }
  Groups groups(devices.size());
  std::optional<size_t> firstOnSwitch;
  for (size_t i = 0; i < devices.size(); ++i) {
    auto failed = [&](const char* what, nvmlReturn_t rc) {
      api_->note(std::string(what) + " failed on GPU " + std::to_string(i) + ": " +
                 api_->error(rc) + "; its own NVLinks are left out");
    };
    for (unsigned link = 0; link < kNvlinkMaxLinks; ++link) {
      int state = 0;
      nvmlReturn_t rc = api_->getNvLinkState(devices[i], link, &state);
      // No NVLink at all, or fewer links than the most NVML knows of.
      if (rc == kNvmlErrorNotSupported || rc == kNvmlErrorInvalidArgument) continue;
      if (rc != kNvmlSuccess) {
        failed("nvmlDeviceGetNvLinkState", rc);
        break;
      }
      if (state != kNvmlFeatureEnabled) continue;
      int type = kNvlinkDeviceTypeUnknown;
      if (!api_->getNvLinkRemoteDeviceType ||
          api_->getNvLinkRemoteDeviceType(devices[i], link, &type) != kNvmlSuccess ||
          (type != kNvlinkDeviceTypeGpu && type != kNvlinkDeviceTypeIbmNpu &&
           type != kNvlinkDeviceTypeSwitch)) {
        type = kNvlinkDeviceTypeUnknown;
      }
      std::optional<size_t> peer;
      if (type != kNvlinkDeviceTypeSwitch) {
        nvmlPciInfo_t remote = {};
        rc = api_->getNvLinkRemotePciInfo(devices[i], link, &remote);
        if (rc != kNvmlSuccess) {
          failed("nvmlDeviceGetNvLinkRemotePciInfo_v2", rc);
          continue;
        }
        auto it = byBusId.find(pciKey(remote));
        if (it != byBusId.end() && it->second != i) peer = it->second;
      }
      if (peer) {
        groups.join(i, *peer);
      } else if (type == kNvlinkDeviceTypeSwitch || type == kNvlinkDeviceTypeUnknown) {
        if (!firstOnSwitch) firstOnSwitch = i;
        groups.join(i, *firstOnSwitch);
      }
      // else: a GPU we cannot see, or not a GPU; it joins nothing here.
    }
  }
  std::vector<int> labels = groups.labels();
  for (size_t i = 0; i < gpus.size(); ++i) gpus[i].nvlinkDomain = labels[i];
}

// PCIe switches: GPUs whose closest common ancestor is a switch (NVML_TOPOLOGY_SINGLE or
// MULTIPLE, not a host bridge or further) are grouped, transitively. Any failed query leaves
// every GPU's switch unknown rather than half a picture.
void NvmlGpuProvider::findPcieSwitches(const std::vector<nvmlDevice_st*>& devices,
                                       std::vector<model::Gpu>& gpus) {
  if (!api_->getTopologyCommonAncestor) {
    api_->note("NVML lacks nvmlDeviceGetTopologyCommonAncestor; PCIe switches unknown");
    return;
  }
  Groups groups(devices.size());
  for (size_t a = 0; a < devices.size(); ++a) {
    for (size_t b = a + 1; b < devices.size(); ++b) {
      int level = 0;
      nvmlReturn_t rc = api_->getTopologyCommonAncestor(devices[a], devices[b], &level);
      if (rc != kNvmlSuccess) {
        api_->note("nvmlDeviceGetTopologyCommonAncestor failed for GPUs " + std::to_string(a) +
                   " and " + std::to_string(b) + ": " + api_->error(rc) +
                   "; PCIe switches unknown");
        return;
      }
      if (level <= kNvmlTopologyMultiple) groups.join(a, b);
    }
  }
  std::vector<int> labels = groups.labels();
  for (size_t i = 0; i < gpus.size(); ++i) gpus[i].pcieSwitch = labels[i];
}

std::string shortGpuModel(const std::string& fullName) {
  std::string s = fullName;
  for (const char* prefix : {"NVIDIA ", "Tesla ", "GeForce ", "Quadro "}) {
    if (s.rfind(prefix, 0) == 0) s = s.substr(std::string(prefix).size());
  }
  auto firstToken = [](const std::string& t) { return t.substr(0, t.find_first_of(" -")); };
  std::string token = firstToken(s);
  // "RTX A6000" is an A6000; "RTX 4090" needs its family to mean anything.
  if ((token == "RTX" || token == "GTX") && s.size() > token.size() + 1) {
    std::string next = firstToken(s.substr(token.size() + 1));
    if (!next.empty()) {
      return std::isdigit(static_cast<unsigned char>(next[0])) ? token + next : next;
    }
  }
  return token.empty() ? fullName : token;
}

}  // namespace allot::agent
