#include "agent/host_ops/burn_in.h"

#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace allot::agent {
namespace {

// Our own declarations of the few CUDA driver API entry points used (cuda.h), so the build needs
// nothing from NVIDIA. Handles are opaque pointers; device pointers 64-bit.
using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUdeviceptr = unsigned long long;
constexpr CUresult kCudaSuccess = 0;

// acc = acc * kDecay + x, kIterations times, x = thread * 2^-10: bounded (acc < x / (1 - kDecay))
// and exact to reproduce, since fma.rn.f32 is IEEE's fused multiply-add, as std::fmaf is.
// Written for sm_50 and PTX ISA 6.0, which every driver since CUDA 9 JIT-compiles.
constexpr char kPtx[] = R"(
.version 6.0
.target sm_50
.address_size 64

.visible .entry burn(.param .u64 burn_out, .param .u32 burn_iters)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<4>;

  ld.param.u64 %rd1, [burn_out];
  ld.param.u32 %r1, [burn_iters];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.u32 %r5, %r2, %r3, %r4;
  cvt.rn.f32.u32 %f1, %r5;
  mul.rn.f32 %f1, %f1, 0f3A800000;
  mov.f32 %f2, 0f00000000;
  mov.u32 %r6, 0;
LOOP:
  setp.ge.u32 %p1, %r6, %r1;
  @%p1 bra DONE;
  fma.rn.f32 %f2, %f2, 0f3F7FF000, %f1;
  add.u32 %r6, %r6, 1;
  bra LOOP;
DONE:
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd2, %rd2, %rd3;
  st.global.f32 [%rd2], %f2;
  ret;
}
)";

struct Cuda {
  void* lib = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*deviceGetCount)(int*) = nullptr;
  CUresult (*deviceGet)(CUdevice*, int) = nullptr;
  CUresult (*ctxCreate)(CUcontext*, unsigned, CUdevice) = nullptr;
  CUresult (*ctxDestroy)(CUcontext) = nullptr;
  CUresult (*ctxSynchronize)() = nullptr;
  CUresult (*moduleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*moduleUnload)(CUmodule) = nullptr;
  CUresult (*moduleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*memAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*memFree)(CUdeviceptr) = nullptr;
  CUresult (*memcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*launchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, void*, void**, void**) = nullptr;
  CUresult (*getErrorName)(CUresult, const char**) = nullptr;
  CUresult (*deviceGetUuid)(unsigned char*, CUdevice) = nullptr;  // optional (CUDA 9.2+)

  ~Cuda() {
    if (lib) dlclose(lib);
  }
  std::string error(const char* call, CUresult rc) const {
    const char* name = nullptr;
    if (getErrorName) getErrorName(rc, &name);
    return std::string(call) + ": " + (name ? name : "CUDA error " + std::to_string(rc));
  }
};

template <typename F>
bool bind(void* lib, const char* symbol, F*& out) {
  out = reinterpret_cast<F*>(dlsym(lib, symbol));
  return out != nullptr;
}

// Loads the library; an error text when it or a function is missing.
std::string load(Cuda& c, const std::string& library) {
  c.lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!c.lib) {
    const char* e = dlerror();
    return "cannot load " + library + ": " + (e ? e : "unknown error");
  }
  struct Sym {
    const char* name;
    bool ok;
  };
  for (Sym s : {Sym{"cuInit", bind(c.lib, "cuInit", c.init)},
                Sym{"cuDeviceGetCount", bind(c.lib, "cuDeviceGetCount", c.deviceGetCount)},
                Sym{"cuDeviceGet", bind(c.lib, "cuDeviceGet", c.deviceGet)},
                Sym{"cuCtxCreate_v2", bind(c.lib, "cuCtxCreate_v2", c.ctxCreate)},
                Sym{"cuCtxDestroy_v2", bind(c.lib, "cuCtxDestroy_v2", c.ctxDestroy)},
                Sym{"cuCtxSynchronize", bind(c.lib, "cuCtxSynchronize", c.ctxSynchronize)},
                Sym{"cuModuleLoadData", bind(c.lib, "cuModuleLoadData", c.moduleLoadData)},
                Sym{"cuModuleUnload", bind(c.lib, "cuModuleUnload", c.moduleUnload)},
                Sym{"cuModuleGetFunction", bind(c.lib, "cuModuleGetFunction", c.moduleGetFunction)},
                Sym{"cuMemAlloc_v2", bind(c.lib, "cuMemAlloc_v2", c.memAlloc)},
                Sym{"cuMemFree_v2", bind(c.lib, "cuMemFree_v2", c.memFree)},
                Sym{"cuMemcpyDtoH_v2", bind(c.lib, "cuMemcpyDtoH_v2", c.memcpyDtoH)},
                Sym{"cuLaunchKernel", bind(c.lib, "cuLaunchKernel", c.launchKernel)}}) {
    if (!s.ok) return "cannot load " + library + ": it lacks " + s.name;
  }
  bind(c.lib, "cuGetErrorName", c.getErrorName);
  bind(c.lib, "cuDeviceGetUuid", c.deviceGetUuid);
  return "";
}

struct GpuRun {
  std::string error;  // empty: passed
  int64_t launches = 0;
};

// The load on one device: a context of its own, destroyed whatever happens.
GpuRun burnOne(const Cuda& c, int ordinal, int64_t durationMs) {
  GpuRun out;
  CUdevice dev = 0;
  if (CUresult rc = c.deviceGet(&dev, ordinal); rc != kCudaSuccess)
    return {c.error("cuDeviceGet", rc)};
  CUcontext ctx = nullptr;
  if (CUresult rc = c.ctxCreate(&ctx, 0, dev); rc != kCudaSuccess)
    return {c.error("cuCtxCreate", rc)};
  CUmodule mod = nullptr;
  CUdeviceptr buf = 0;
  auto cleanup = [&] {
    if (buf) c.memFree(buf);
    if (mod) c.moduleUnload(mod);
    c.ctxDestroy(ctx);
  };
  auto fail = [&](const char* call, CUresult rc) {
    cleanup();
    return GpuRun{c.error(call, rc), out.launches};
  };
  if (CUresult rc = c.moduleLoadData(&mod, kPtx); rc != kCudaSuccess)
    return fail("cuModuleLoadData", rc);
  CUfunction fn = nullptr;
  if (CUresult rc = c.moduleGetFunction(&fn, mod, "burn"); rc != kCudaSuccess)
    return fail("cuModuleGetFunction", rc);
  const size_t n = size_t{kBurnInThreads} * kBurnInBlocks;
  if (CUresult rc = c.memAlloc(&buf, n * sizeof(float)); rc != kCudaSuccess)
    return fail("cuMemAlloc", rc);
  uint32_t iters = kBurnInIterations;
  void* params[] = {&buf, &iters};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(durationMs);
  do {
    if (CUresult rc = c.launchKernel(fn, kBurnInBlocks, 1, 1, kBurnInThreads, 1, 1, 0, nullptr,
                                     params, nullptr);
        rc != kCudaSuccess)
      return fail("cuLaunchKernel", rc);
    // One launch at a time: the time bound holds even on a slow GPU, and a fault shows at once.
    if (CUresult rc = c.ctxSynchronize(); rc != kCudaSuccess) return fail("cuCtxSynchronize", rc);
    ++out.launches;
  } while (std::chrono::steady_clock::now() < deadline);
  std::vector<float> got(n);
  if (CUresult rc = c.memcpyDtoH(got.data(), buf, n * sizeof(float)); rc != kCudaSuccess)
    return fail("cuMemcpyDtoH", rc);
  cleanup();
  for (uint32_t t = 0; t < n; ++t) {
    const float want = burnInExpected(t);
    if (std::memcmp(&got[t], &want, sizeof want) != 0) {
      char msg[160];
      std::snprintf(msg, sizeof msg, "wrong result (thread %u computed %.9g, expected %.9g)", t,
                    static_cast<double>(got[t]), static_cast<double>(want));
      out.error = msg;
      return out;
    }
  }
  return out;
}

// NVML's "GPU-0fa4e000-0000-..." as CUDA's 16 bytes; empty when it is not one.
std::vector<unsigned char> uuidBytes(const std::string& uuid) {
  std::vector<unsigned char> out;
  std::string hex;
  for (char ch : uuid.rfind("GPU-", 0) == 0 ? uuid.substr(4) : std::string())
    if (ch != '-') hex += ch;
  if (hex.size() != 32) return {};
  for (size_t i = 0; i < 32; i += 2) {
    char* end = nullptr;
    const std::string byte = hex.substr(i, 2);
    long v = std::strtol(byte.c_str(), &end, 16);
    if (*end != '\0') return {};
    out.push_back(static_cast<unsigned char>(v));
  }
  return out;
}

// The CUDA ordinal of the GPU: the device with its UUID, else (no UUID to compare) its index.
// -1 when CUDA has no device with that UUID.
int cudaOrdinal(const Cuda& c, const BurnInGpu& g, int count) {
  const auto want = uuidBytes(g.uuid);
  if (want.empty() || !c.deviceGetUuid) return g.index;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice dev = 0;
    unsigned char got[16] = {};
    if (c.deviceGet(&dev, ordinal) == kCudaSuccess && c.deviceGetUuid(got, dev) == kCudaSuccess &&
        std::memcmp(got, want.data(), 16) == 0)
      return ordinal;
  }
  return -1;
}

}  // namespace

float burnInExpected(uint32_t thread) {
  float decay;
  const uint32_t decayBits = 0x3F7FF000;  // the PTX's 0f3F7FF000
  std::memcpy(&decay, &decayBits, sizeof decay);
  const float x = static_cast<float>(thread) * 0x1p-10f;
  float acc = 0;
  for (uint32_t i = 0; i < kBurnInIterations; ++i) acc = std::fmaf(acc, decay, x);
  return acc;
}

BurnInResult runBurnIn(const std::vector<BurnInGpu>& gpus, int64_t durationMs,
                       const std::string& library) {
  Cuda c;
  if (std::string err = load(c, library); !err.empty()) return {false, "failed: " + err};
  if (CUresult rc = c.init(0); rc != kCudaSuccess)
    return {false, "failed: " + c.error("cuInit", rc)};
  int count = 0;
  if (CUresult rc = c.deviceGetCount(&count); rc != kCudaSuccess)
    return {false, "failed: " + c.error("cuDeviceGetCount", rc)};
  std::vector<int> ordinals;
  for (const BurnInGpu& g : gpus) {
    const int ordinal = cudaOrdinal(c, g, count);
    if (ordinal < 0 || ordinal >= count)
      return {false, "failed: GPU " + std::to_string(g.index) + ": CUDA has no such device (" +
                         (g.uuid.empty() ? "index " + std::to_string(g.index) : g.uuid) + ", " +
                         std::to_string(count) + " devices)"};
    ordinals.push_back(ordinal);
  }
  // Every GPU at once, a thread (and a context) each: the check takes its duration, not its
  // duration times the GPUs, and the host is loaded as a job using all of it would load it.
  const auto start = std::chrono::steady_clock::now();
  std::vector<GpuRun> runs(gpus.size());
  {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < gpus.size(); ++i)
      threads.emplace_back([&, i] { runs[i] = burnOne(c, ordinals[i], durationMs); });
    for (auto& t : threads) t.join();
  }
  int64_t launches = 0;
  for (size_t i = 0; i < gpus.size(); ++i) {
    launches += runs[i].launches;
    if (!runs[i].error.empty())
      return {false, "failed: GPU " + std::to_string(gpus[i].index) + ": " + runs[i].error};
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double flops =
      2.0 * static_cast<double>(launches) * kBurnInThreads * kBurnInBlocks * kBurnInIterations;
  char summary[96];
  std::snprintf(summary, sizeof summary, "passed (%lld launches, %.1f GFLOP/s)",
                static_cast<long long>(launches), seconds > 0 ? flops / seconds / 1e9 : 0.0);
  return {true, summary};
}

}  // namespace allot::agent
