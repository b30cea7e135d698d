// A fake libcuda for tests (no GPU here): the few driver API entry points burn_in.cc uses. A
// launch of the "burn" kernel is run on the CPU with the kernel's arithmetic, from the parameters
// it was given. Environment knobs, read on every call:
//   FAKE_CUDA_DEVICES=N        how many devices (default 2)
//   FAKE_CUDA_WRONG_DEVICE=D   device D computes a wrong value for one thread, as bad memory would
//   FAKE_CUDA_PTX_FAIL=1       cuModuleLoadData fails with CUDA_ERROR_INVALID_PTX (218)
//   FAKE_CUDA_REVERSED=1       devices are numbered the other way round from the fake NVML's GPUs
// Device D's UUID is the fake NVML's GPU-0fa4e000-0000-0000-0000-00000000000<i>, where i is D,
// or N-1-D when reversed.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Buffer {
  std::vector<float> data;
};
// As in the real driver, the current context is per thread; the burn-in loads every GPU at once,
// one thread each, so the buffers are shared under a lock.
thread_local int gCurrentDevice = -1;
std::mutex gMu;
std::map<unsigned long long, Buffer> gBuffers;
unsigned long long gNextPtr = 0x10000;
int gModule, gFunction, gContext;

int env(const char* name, int otherwise) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : otherwise;
}

}  // namespace

extern "C" {

int cuInit(unsigned) { return 0; }
int cuDeviceGetCount(int* n) {
  *n = env("FAKE_CUDA_DEVICES", 2);
  return 0;
}
int cuDeviceGet(int* dev, int ordinal) {
  if (ordinal < 0 || ordinal >= env("FAKE_CUDA_DEVICES", 2)) return 101;  // INVALID_DEVICE
  *dev = ordinal;
  return 0;
}
int cuCtxCreate_v2(void** ctx, unsigned, int dev) {
  gCurrentDevice = dev;
  *ctx = &gContext;
  return 0;
}
int cuCtxDestroy_v2(void*) {
  gCurrentDevice = -1;
  return 0;
}
int cuCtxSynchronize() { return 0; }
int cuModuleLoadData(void** mod, const void* image) {
  if (std::getenv("FAKE_CUDA_PTX_FAIL")) return 218;
  // The real driver would reject a module without the entry; so does the fake.
  if (!std::strstr(static_cast<const char*>(image), ".entry burn(")) return 218;
  *mod = &gModule;
  return 0;
}
int cuModuleUnload(void*) { return 0; }
int cuModuleGetFunction(void** fn, void*, const char* name) {
  if (std::strcmp(name, "burn") != 0) return 500;  // CUDA_ERROR_NOT_FOUND
  *fn = &gFunction;
  return 0;
}
int cuMemAlloc_v2(unsigned long long* ptr, size_t bytes) {
  std::lock_guard lock(gMu);
  *ptr = gNextPtr;
  gNextPtr += 0x10000;
  gBuffers[*ptr].data.assign(bytes / sizeof(float), 0.0f);
  return 0;
}
int cuMemFree_v2(unsigned long long ptr) {
  std::lock_guard lock(gMu);
  return gBuffers.erase(ptr) ? 0 : 1;
}
int cuMemcpyDtoH_v2(void* dst, unsigned long long src, size_t bytes) {
  std::lock_guard lock(gMu);
  auto it = gBuffers.find(src);
  if (it == gBuffers.end()) return 1;
  std::memcpy(dst, it->second.data.data(), bytes);
  return 0;
}
int cuLaunchKernel(void*, unsigned gx, unsigned, unsigned, unsigned bx, unsigned, unsigned,
                   unsigned, void*, void** params, void**) {
  unsigned long long out = *static_cast<unsigned long long*>(params[0]);
  uint32_t iters = *static_cast<uint32_t*>(params[1]);
  std::lock_guard lock(gMu);
  auto it = gBuffers.find(out);
  if (it == gBuffers.end()) return 700;  // CUDA_ERROR_ILLEGAL_ADDRESS
  float decay;
  const uint32_t bits = 0x3F7FF000;
  std::memcpy(&decay, &bits, sizeof decay);
  for (uint32_t t = 0; t < gx * bx && t < it->second.data.size(); ++t) {
    const float x = static_cast<float>(t) * 0x1p-10f;
    float acc = 0;
    for (uint32_t i = 0; i < iters; ++i) acc = std::fmaf(acc, decay, x);
    it->second.data[t] = acc;
  }
  if (env("FAKE_CUDA_WRONG_DEVICE", -1) == gCurrentDevice) it->second.data[77] += 1.0f;
  return 0;
}
int cuDeviceGetUuid(unsigned char* uuid, int dev) {
  const int n = env("FAKE_CUDA_DEVICES", 2);
  const int gpu = env("FAKE_CUDA_REVERSED", 0) ? n - 1 - dev : dev;
  const unsigned char bytes[16] = {0x0f, 0xa4, 0xe0, 0, 0, 0, 0, 0,
                                   0,    0,    0,    0, 0, 0, 0, static_cast<unsigned char>(gpu)};
  std::memcpy(uuid, bytes, 16);
  return 0;
}
int cuGetErrorName(int rc, const char** name) {
  *name = rc == 218   ? "CUDA_ERROR_INVALID_PTX"
          : rc == 101 ? "CUDA_ERROR_INVALID_DEVICE"
                      : "CUDA_ERROR_UNKNOWN";
  return 0;
}

}  // extern "C"
