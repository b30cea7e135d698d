// A fake libnvidia-ml for tests, in the spirit of DCGM's injection NVML: NvmlGpuProvider loads
// it by path and discovers GPUs that answer like a two-GPU H200 host. Environment knobs:
//   FAKE_NVML_GPUS=N        how many GPUs (default 2)
//   FAKE_NVML_INIT_FAIL=1   nvmlInit_v2 fails with NVML_ERROR_DRIVER_NOT_LOADED (9)
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct FakeDevice {
  unsigned index;
};
FakeDevice gDevices[16];

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
int nvmlDeviceGetMemoryInfo(FakeDevice*, nvmlMemory_t* m) {
  m->total = 143771ull * 1024 * 1024;
  m->free = m->total;
  m->used = 0;
  return 0;
}
int nvmlDeviceGetPciInfo_v3(FakeDevice* d, nvmlPciInfo_t* p) {
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->busId, sizeof p->busId, "00000000:F%u:00.0", d->index);
  return 0;
}
int nvmlSystemGetDriverVersion(char* buf, unsigned len) { return copyOut("550.54.15", buf, len); }
int nvmlSystemGetCudaDriverVersion_v2(int* v) {
  *v = 12040;
  return 0;
}

}  // extern "C"
