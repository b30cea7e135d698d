#include "agent/host_ops/health_check.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/gpu/nvml_gpu_provider.h"
#include "agent/gpu/simulated_gpu_provider.h"

namespace allot::agent {
namespace {

bool hasProblem(const model::HealthReport& r, const std::string& text) {
  for (const auto& p : r.problems)
    if (p.find(text) != std::string::npos) return true;
  return false;
}
std::string problems(const model::HealthReport& r) {
  std::string out;
  for (const auto& p : r.problems) out += p + "\n";
  return out;
}

std::unique_ptr<SimulatedGpuProvider> sim(const std::string& spec) {
  auto p = SimulatedGpuProvider::create(spec, "health-test");
  EXPECT_TRUE(p.ok()) << p.status().message();
  return std::move(*p);
}

HealthCheckOptions options(GpuProvider* gpus) {
  HealthCheckOptions o;
  o.gpus = gpus;
  o.diskPath = std::filesystem::temp_directory_path().string();
  o.cudaLibrary = ALLOT_FAKE_CUDA_PATH;
  return o;
}

// The same with the burn-in on, `ms` per GPU.
HealthCheckOptions burnInOptions(GpuProvider* gpus, int64_t ms) {
  HealthCheckOptions o = options(gpus);
  o.step.burnIn = true;
  o.step.burnInMs = ms;
  return o;
}

TEST(HealthCheck, AHostAsCommissionedIsHealthy) {
  auto gpus = sim("sim:2xH100");
  auto o = options(gpus.get());
  o.step.gpuCount = 2;
  o.step.gpuModels = {"H100", "H100"};
  o.step.minFreeDiskMib = 1;
  auto r = runHealthCheck(o);
  EXPECT_TRUE(r.problems.empty()) << problems(r);
  EXPECT_EQ(r.gpuCount, 2);
  EXPECT_EQ(r.gpuModels, (std::vector<std::string>{"H100", "H100"}));
  EXPECT_GT(r.freeDiskMib, 0);
}

TEST(HealthCheck, MissingGpuAndWrongModelAreProblems) {
  auto gpus = sim("sim:1xA100,6xH100");
  auto o = options(gpus.get());
  o.step.gpuCount = 8;
  o.step.gpuModels = std::vector<std::string>(8, "H100");
  auto r = runHealthCheck(o);
  EXPECT_TRUE(hasProblem(r, "expected 8 GPUs, found 7")) << problems(r);
  EXPECT_TRUE(hasProblem(r, "GPU 0 is 'A100' but was commissioned as 'H100'")) << problems(r);
  EXPECT_EQ(r.problems.size(), 2u) << problems(r);
}

TEST(HealthCheck, OldDriverIsAProblem) {
  auto file = std::filesystem::temp_directory_path() /
              ("allot-health-" + std::to_string(::getpid()) + ".toml");
  std::ofstream(file) << "driver_version = \"535.54.03\"\ncuda_version = \"12.2\"\n"
                         "[[gpu]]\nmodel = \"H100\"\n";
  auto gpus = sim("sim:" + file.string());
  std::filesystem::remove(file);
  auto o = options(gpus.get());
  o.step.minDriver = "550.0";
  auto r = runHealthCheck(o);
  EXPECT_TRUE(hasProblem(r, "driver 535.54.03 is older than the required 550.0")) << problems(r);
  EXPECT_EQ(r.driverVersion, "535.54.03");
  EXPECT_EQ(r.cudaVersion, "12.2");
  o.step.minDriver = "535.54.3";
  EXPECT_TRUE(runHealthCheck(o).problems.empty());
}

TEST(HealthCheck, TooLittleDiskIsAProblem) {
  auto gpus = sim("sim:1xH100");
  auto o = options(gpus.get());
  o.step.minFreeDiskMib = int64_t{1} << 40;  // a mebibyte short of an exbibyte
  auto r = runHealthCheck(o);
  EXPECT_TRUE(hasProblem(r, "MiB free on " + o.diskPath + ", need 1099511627776 MiB"))
      << problems(r);
}

TEST(HealthCheck, SimulatedGpusSkipTheBurnIn) {
  auto gpus = sim("sim:1xH100");
  auto o = options(gpus.get());
  o.step.burnIn = true;
  auto r = runHealthCheck(o);
  EXPECT_EQ(r.burnIn, "skipped: simulated GPUs");
  EXPECT_TRUE(r.problems.empty()) << problems(r);
}

// Through the fake NVML (two H200s, driver 550.54.15) and fake libcuda.
class NvmlHealthCheck : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* knob : {"FAKE_NVML_ECC_UNCORRECTED", "FAKE_NVML_XID", "FAKE_CUDA_WRONG_DEVICE",
                             "FAKE_CUDA_REVERSED", "FAKE_CUDA_PTX_FAIL"})
      unsetenv(knob);
  }
  std::unique_ptr<NvmlGpuProvider> open() {
    auto p = NvmlGpuProvider::open(ALLOT_FAKE_NVML_PATH);
    EXPECT_TRUE(p.ok()) << p.status().message();
    return std::move(*p);
  }
};

TEST_F(NvmlHealthCheck, UncorrectableEccErrorsAreAProblem) {
  setenv("FAKE_NVML_ECC_UNCORRECTED", "1:2", 1);
  auto gpus = open();
  auto r = runHealthCheck(options(gpus.get()));
  EXPECT_TRUE(hasProblem(r, "GPU 1: 2 uncorrectable ECC errors")) << problems(r);
  EXPECT_EQ(r.problems.size(), 1u) << problems(r);
  EXPECT_EQ(r.driverVersion, "550.54.15");
  EXPECT_EQ(r.cudaVersion, "12.4");
}

TEST_F(NvmlHealthCheck, CriticalXidsFromTheDriverAreProblems) {
  setenv("FAKE_NVML_XID", "1:79,0:48", 1);
  auto gpus = open();
  ASSERT_TRUE(gpus->discover().ok());  // registers the GPUs for events
  auto events = gpus->drainXidEvents();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].gpuIndex, 1);
  EXPECT_EQ(events[0].xid, 79);
  EXPECT_TRUE(gpus->drainXidEvents().empty());  // each is delivered once
  auto o = options(gpus.get());
  o.xidEvents = events;
  auto r = runHealthCheck(o);
  EXPECT_TRUE(hasProblem(r, "GPU 1: XID 79 (fallen off the bus)")) << problems(r);
  EXPECT_TRUE(hasProblem(r, "GPU 0: XID 48 (double-bit ECC error)")) << problems(r);
}

TEST_F(NvmlHealthCheck, BurnInPassesWhenEveryGpuComputesRight) {
  auto gpus = open();
  auto o = burnInOptions(gpus.get(), 200);
  auto r = runHealthCheck(o);
  EXPECT_TRUE(r.problems.empty()) << problems(r);
  EXPECT_EQ(r.burnIn.rfind("passed (", 0), 0u) << r.burnIn;
  EXPECT_NE(r.burnIn.find(" launches, "), std::string::npos) << r.burnIn;
}

TEST_F(NvmlHealthCheck, BurnInFailsOnAWrongResult) {
  setenv("FAKE_CUDA_WRONG_DEVICE", "1", 1);
  auto gpus = open();
  auto o = burnInOptions(gpus.get(), 50);
  auto r = runHealthCheck(o);
  EXPECT_EQ(r.burnIn.rfind("failed: GPU 1: wrong result (thread 77", 0), 0u) << r.burnIn;
  EXPECT_TRUE(hasProblem(r, "burn-in failed: GPU 1: wrong result")) << problems(r);
}

TEST_F(NvmlHealthCheck, BurnInFindsEachGpuByUuidWhateverCudasOrder) {
  // CUDA numbers the devices the other way round; its device 0 is NVML's GPU 1, and is bad.
  setenv("FAKE_CUDA_REVERSED", "1", 1);
  setenv("FAKE_CUDA_WRONG_DEVICE", "0", 1);
  auto gpus = open();
  auto o = burnInOptions(gpus.get(), 50);
  auto r = runHealthCheck(o);
  EXPECT_EQ(r.burnIn.rfind("failed: GPU 1: wrong result", 0), 0u) << r.burnIn;
  unsetenv("FAKE_CUDA_REVERSED");
}

TEST_F(NvmlHealthCheck, BurnInNamesTheCudaErrorAndAMissingLibrary) {
  setenv("FAKE_CUDA_PTX_FAIL", "1", 1);
  auto gpus = open();
  auto o = burnInOptions(gpus.get(), 50);
  auto r = runHealthCheck(o);
  EXPECT_EQ(r.burnIn, "failed: GPU 0: cuModuleLoadData: CUDA_ERROR_INVALID_PTX");
  o.cudaLibrary = "/nonexistent/libcuda.so.1";
  r = runHealthCheck(o);
  EXPECT_TRUE(hasProblem(r, "burn-in failed: cannot load /nonexistent/libcuda.so.1: "))
      << problems(r);
}

// On a machine with a GPU and its driver, the embedded PTX must load, run and compute exactly what
// the CPU does; skipped elsewhere (no libcuda.so.1), as on the build machines.
TEST(BurnInOnRealGpu, PassesOnAHealthyGpu) {
  void* lib = dlopen(kDefaultCudaLibrary, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr)
    GTEST_SKIP() << "GPU hardware: no " << kDefaultCudaLibrary << " here (no NVIDIA driver)";
  dlclose(lib);
  auto r = runBurnIn({BurnInGpu{0, ""}}, 500);
  EXPECT_TRUE(r.ok) << r.summary;
  EXPECT_EQ(r.summary.rfind("passed (", 0), 0u) << r.summary;
}

}  // namespace
}  // namespace allot::agent
