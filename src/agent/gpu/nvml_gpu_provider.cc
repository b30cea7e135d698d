#include "agent/gpu/nvml_gpu_provider.h"

#include <dlfcn.h>

#include <cctype>
#include <cstdio>
#include <fstream>

namespace allot::agent {
namespace {

// Our own minimal declarations of the NVML C API (nvml.h), so the build needs nothing from
// NVIDIA. Only the types and functions we call; layouts are NVML's, stable across drivers.
using nvmlReturn_t = int;
constexpr nvmlReturn_t kNvmlSuccess = 0;
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
    if (api_->getPciInfo && api_->getPciInfo(dev, &pci) == kNvmlSuccess)
      g.numaNode = numaNodeOf(pci);
    g.driverVersion = driver;
    g.cudaVersion = cuda;
    gpus.push_back(g);
  }
  return gpus;
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
