// A fake libnvidia-ml for tests, in the spirit of DCGM's injection NVML: NvmlGpuProvider loads
// it by path and discovers GPUs that answer like a two-GPU H200 host. Environment knobs, read on
// every call:
//   FAKE_NVML_GPUS=N        how many GPUs (default 2); GPU i is at PCI bus 0xF0 + i
//   FAKE_NVML_INIT_FAIL=1   nvmlInit_v2 fails with NVML_ERROR_DRIVER_NOT_LOADED (9)
//   FAKE_NVML_NVLINK=...    NVLink as a machine of that shape would report it:
//     none (default)  PCIe cards: every NVLink query is NVML_ERROR_NOT_SUPPORTED
//     pairs           12 links a GPU (more answer NVML_ERROR_INVALID_ARGUMENT); links 0-3 of GPU
//                     2k and 2k+1 join them (the peer's address even when FAKE_NVML_GPUS hides
//                     it), the rest are disabled
//     nvswitch        18 links a GPU, all active, all to NVSwitches at 00000000:C<link%6>:00.0
//     error           nvmlDeviceGetNvLinkState fails with NVML_ERROR_UNKNOWN (999)
//   FAKE_NVML_NO_REMOTE_TYPE=1  nvmlDeviceGetNvLinkRemoteDeviceType is NVML_ERROR_NOT_SUPPORTED,
//                     as on drivers that cannot tell a switch from a GPU
//   FAKE_NVML_PCIE_SWITCH_SIZE=N  GPUs i and j share a PCIe switch when i/N == j/N: common
//                     ancestor SINGLE (10) for a pair i/2 == j/2, else MULTIPLE (20); other
//                     pairs HOSTBRIDGE (30) within i/2N, else SYSTEM (50). Default 1: no sharing
//   FAKE_NVML_TOPOLOGY_FAIL=1  nvmlDeviceGetTopologyCommonAncestor fails with
//                     NVML_ERROR_NOT_SUPPORTED (3)
//   Sampling: GPU i reports utilisation 10*i+5 % (FAKE_NVML_UTIL=P: P % on every GPU),
//   (i+1) GiB of memory used, 40+i C, 250.5 W, SM clock 1980 MHz, i corrected and 0
//   uncorrected ECC errors, and one compute process, pid 1000+i.
//   FAKE_NVML_NO_ECC=1  nvmlDeviceGetTotalEccErrors is NVML_ERROR_NOT_SUPPORTED (ECC off)
//   FAKE_NVML_ECC_UNCORRECTED=G:N  GPU G reports N uncorrected ECC errors
//   FAKE_NVML_PIDS=P,Q  the compute processes of every GPU, instead of 1000+i; only those that
//                     are alive (not zombies) are reported, as NVML forgets a process that exited;
//                     "none" for no process
//   FAKE_NVML_MEM_USED_MIB=M  memory used on every GPU, instead of (i+1) GiB
//   FAKE_NVML_XID=G:X,G:X  critical XID events queued on each new event set: XID X on GPU G,
//                     delivered once each by nvmlEventSetWait_v2
// Built a second time with FAKE_NVML_NO_TOPOLOGY defined, it lacks every topology function, like
// a driver too old to have them; built with FAKE_NVML_NO_SAMPLING, it lacks every optional
// sampling function (all but nvmlDeviceGetMemoryInfo).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

struct FakeDevice {
  unsigned index;
};
FakeDevice gDevices[16];

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr int kUnknown = 999;

// Unused in the build without topology functions.
[[maybe_unused]] bool flag(const char* name) { return std::getenv(name) != nullptr; }
[[maybe_unused]] std::string env(const char* name, const char* otherwise) {
  const char* v = std::getenv(name);
  return v ? v : otherwise;
}

// A process that exists and is not a zombie.
[[maybe_unused]] bool alive(int pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  char buf[512] = {};
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const char* close = std::strrchr(buf, ')');
  return n > 0 && close && close[1] == ' ' && close[2] != 'Z' && close[2] != 'X';
}

unsigned gpuCount() {
  const char* n = std::getenv("FAKE_NVML_GPUS");
  unsigned c = n ? static_cast<unsigned>(std::atoi(n)) : 2;
  return c > 16 ? 16 : c;
}

int copyOut(const char* s, char* buf, unsigned len) {
  if (std::strlen(s) + 1 > len) return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  std::strcpy(buf, s);
  return 0;
}

}  // namespace

extern "C" {

struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

int nvmlInit_v2() { return std::getenv("FAKE_NVML_INIT_FAIL") ? 9 : 0; }
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int rc) {
  return rc == 9 ? "Driver Not Loaded" : rc == 0 ? "Success" : "Unknown Error";
}
int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = gpuCount();
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, FakeDevice** dev) {
  if (i >= gpuCount()) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  gDevices[i].index = i;
  *dev = &gDevices[i];
  return 0;
}
int nvmlDeviceGetUUID(FakeDevice* d, char* buf, unsigned len) {
  char s[64];
  std::snprintf(s, sizeof s, "GPU-0fa4e000-0000-0000-0000-00000000000%u", d->index);
  return copyOut(s, buf, len);
}
int nvmlDeviceGetName(FakeDevice*, char* buf, unsigned len) {
  return copyOut("NVIDIA H200", buf, len);
}
int nvmlDeviceGetMinorNumber(FakeDevice* d, unsigned* minor) {
  *minor = d->index + 4;  // minors need not equal indices; the agent must not assume so
  return 0;
}
int nvmlDeviceGetMemoryInfo(FakeDevice* d, nvmlMemory_t* m) {
  m->total = 143771ull * 1024 * 1024;
  m->used = (d->index + 1ull) * 1024 * 1024 * 1024;
  if (const char* used = std::getenv("FAKE_NVML_MEM_USED_MIB"))
    m->used = std::strtoull(used, nullptr, 10) * 1024 * 1024;
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetPciInfo_v3(FakeDevice* d, nvmlPciInfo_t* p) {
  std::memset(p, 0, sizeof *p);
  p->bus = 0xF0 + d->index;
  std::snprintf(p->busId, sizeof p->busId, "00000000:%02X:00.0", p->bus);
  return 0;
}

#ifndef FAKE_NVML_NO_TOPOLOGY
// How link `link` of GPU d answers under FAKE_NVML_NVLINK: an NVML error, or success with whether
// it is active and, if so, the PCI bus of its far end and whether that is a switch.
struct Link {
  int rc = kNotSupported;
  bool active = false;
  unsigned remoteBus = 0;
  bool toSwitch = false;
};
Link linkOf(const FakeDevice* d, unsigned link) {
  std::string mode = env("FAKE_NVML_NVLINK", "none");
  Link l;
  if (mode == "pairs") {
    if (link >= 12) return {kInvalidArgument};
    l.rc = kSuccess;
    l.active = link < 4;
    l.remoteBus = 0xF0 + (d->index ^ 1u);
  } else if (mode == "nvswitch") {
    if (link >= 18) return {kInvalidArgument};
    l.rc = kSuccess;
    l.active = true;
    l.remoteBus = 0xC0 + link % 6;
    l.toSwitch = true;
  } else if (mode == "error") {
    l.rc = kUnknown;
  }
  return l;
}

int nvmlDeviceGetNvLinkState(FakeDevice* d, unsigned link, int* isActive) {
  Link l = linkOf(d, link);
  if (l.rc == kSuccess) *isActive = l.active ? 1 : 0;
  return l.rc;
}
int nvmlDeviceGetNvLinkRemotePciInfo_v2(FakeDevice* d, unsigned link, nvmlPciInfo_t* p) {
  Link l = linkOf(d, link);
  if (l.rc != kSuccess) return l.rc;
  if (!l.active) return kInvalidArgument;
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->busId, sizeof p->busId, "00000000:%02X:00.0", l.remoteBus);
  p->bus = l.remoteBus;
  return kSuccess;
}
int nvmlDeviceGetNvLinkRemoteDeviceType(FakeDevice* d, unsigned link, int* type) {
  if (flag("FAKE_NVML_NO_REMOTE_TYPE")) return kNotSupported;
  Link l = linkOf(d, link);
  if (l.rc != kSuccess) return l.rc;
  if (!l.active) return kInvalidArgument;
  *type = l.toSwitch ? 2 : 0;  // NVML_NVLINK_DEVICE_TYPE_SWITCH : _GPU
  return kSuccess;
}
int nvmlDeviceGetTopologyCommonAncestor(FakeDevice* a, FakeDevice* b, int* level) {
  if (flag("FAKE_NVML_TOPOLOGY_FAIL")) return kNotSupported;
  if (a == b) return kInvalidArgument;
  unsigned n = static_cast<unsigned>(std::atoi(env("FAKE_NVML_PCIE_SWITCH_SIZE", "1").c_str()));
  if (n == 0) n = 1;
  unsigned i = a->index, j = b->index;
  if (i / n == j / n) {
    *level = i / 2 == j / 2 ? 10 : 20;  // SINGLE : MULTIPLE
  } else {
    *level = i / (2 * n) == j / (2 * n) ? 30 : 50;  // HOSTBRIDGE : SYSTEM
  }
  return kSuccess;
}
#endif  // FAKE_NVML_NO_TOPOLOGY
#ifndef FAKE_NVML_NO_SAMPLING
struct nvmlUtilization_t {
  unsigned gpu, memory;
};
struct nvmlProcessInfo_t {
  unsigned pid;
  unsigned long long usedGpuMemory;
  unsigned gpuInstanceId, computeInstanceId;
};
int nvmlDeviceGetUtilizationRates(FakeDevice* d, nvmlUtilization_t* u) {
  const char* p = std::getenv("FAKE_NVML_UTIL");
  u->gpu = p ? static_cast<unsigned>(std::atoi(p)) : 10 * d->index + 5;
  u->memory = 0;
  return kSuccess;
}
int nvmlDeviceGetTemperature(FakeDevice* d, int sensor, unsigned* t) {
  if (sensor != 0) return kInvalidArgument;
  *t = 40 + d->index;
  return kSuccess;
}
int nvmlDeviceGetPowerUsage(FakeDevice*, unsigned* mw) {
  *mw = 250500;
  return kSuccess;
}
int nvmlDeviceGetClockInfo(FakeDevice*, int type, unsigned* mhz) {
  if (type != 1) return kInvalidArgument;  // only NVML_CLOCK_SM is faked
  *mhz = 1980;
  return kSuccess;
}
int nvmlDeviceGetTotalEccErrors(FakeDevice* d, int errorType, int counterType,
                                unsigned long long* n) {
  if (std::getenv("FAKE_NVML_NO_ECC")) return kNotSupported;
  if (counterType != 1) return kInvalidArgument;  // only aggregate counts are faked
  *n = errorType == 0 ? d->index : 0;
  unsigned gpu = 0;
  unsigned long long count = 0;
  if (errorType == 1 &&
      std::sscanf(env("FAKE_NVML_ECC_UNCORRECTED", "").c_str(), "%u:%llu", &gpu, &count) == 2 &&
      gpu == d->index)
    *n = count;
  return kSuccess;
}
int nvmlDeviceGetComputeRunningProcesses_v3(FakeDevice* d, unsigned* count,
                                            nvmlProcessInfo_t* infos) {
  if (*count < 1) {
    *count = 1;
    return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  }
  if (const char* list = std::getenv("FAKE_NVML_PIDS")) {
    unsigned n = 0;
    for (const char* p = list; *p && n < *count;) {
      char* end = nullptr;
      long pid = std::strtol(p, &end, 10);
      if (end == p) break;
      if (pid > 0 && alive(static_cast<int>(pid)))
        infos[n++] = {static_cast<unsigned>(pid), 512ull * 1024 * 1024, 0xFFFFFFFF, 0xFFFFFFFF};
      p = *end == ',' ? end + 1 : end;
    }
    *count = n;
    return kSuccess;
  }
  *count = 1;
  infos[0] = {1000 + d->index, 512ull * 1024 * 1024, 0xFFFFFFFF, 0xFFFFFFFF};
  return kSuccess;
}
#endif  // FAKE_NVML_NO_SAMPLING
// XID events: one event set at a time is enough for the agent (one provider per process).
struct nvmlEventData_t {
  FakeDevice* device;
  unsigned long long eventType, eventData;
  unsigned gpuInstanceId, computeInstanceId;
};
struct FakeEventSet {
  unsigned registered = 0;  // bit i: GPU i registered
  size_t delivered = 0;     // events of FAKE_NVML_XID already delivered
};
FakeEventSet gEventSet;
int nvmlEventSetCreate(FakeEventSet** set) {
  gEventSet = FakeEventSet{};
  *set = &gEventSet;
  return kSuccess;
}
int nvmlDeviceRegisterEvents(FakeDevice* d, unsigned long long types, FakeEventSet* set) {
  if (types != 0x8) return kNotSupported;  // only XID critical errors are faked
  set->registered |= 1u << d->index;
  return kSuccess;
}
int nvmlEventSetWait_v2(FakeEventSet* set, nvmlEventData_t* data, unsigned) {
  std::string list = env("FAKE_NVML_XID", "");
  size_t i = 0;
  for (const char* p = list.c_str(); *p;) {
    unsigned gpu = 0;
    unsigned long long xid = 0;
    int used = 0;
    if (std::sscanf(p, "%u:%llu%n", &gpu, &xid, &used) != 2) break;
    p += used;
    if (*p == ',') ++p;
    if (gpu >= 16 || !(set->registered & (1u << gpu))) continue;
    if (i++ < set->delivered) continue;
    ++set->delivered;
    gDevices[gpu].index = gpu;
    *data = {&gDevices[gpu], 0x8, xid, 0xFFFFFFFF, 0xFFFFFFFF};
    return kSuccess;
  }
  return 10;  // NVML_ERROR_TIMEOUT
}
int nvmlEventSetFree(FakeEventSet*) { return kSuccess; }

int nvmlSystemGetDriverVersion(char* buf, unsigned len) { return copyOut("550.54.15", buf, len); }
int nvmlSystemGetCudaDriverVersion_v2(int* v) {
  *v = 12040;
  return 0;
}

}  // extern "C"
