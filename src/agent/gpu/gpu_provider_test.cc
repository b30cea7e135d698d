#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "agent/gpu/gpu_provider_factory.h"
#include "agent/gpu/nvml_gpu_provider.h"
#include "agent/gpu/simulated_gpu_provider.h"

namespace allot::agent {
namespace {

std::vector<model::Gpu> discoverSim(const std::string& spec, const std::string& seed = "host-a") {
  auto p = SimulatedGpuProvider::create(spec, seed);
  EXPECT_TRUE(p.ok()) << p.status().toString();
  if (!p.ok()) return {};
  auto gpus = (*p)->discover();
  EXPECT_TRUE(gpus.ok());
  return gpus.ok() ? *gpus : std::vector<model::Gpu>{};
}

// A TOML file in a fresh temporary directory, removed with the test.
class TempToml {
 public:
  explicit TempToml(const std::string& text) {
    char tmpl[] = "/tmp/allot-gpu-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/host.toml";
    std::ofstream(path_) << text;
  }
  ~TempToml() { std::filesystem::remove_all(dir_); }
  const std::string& path() const { return path_; }

 private:
  std::string dir_, path_;
};

// What the provider logs while it lives: the default logger writes here, and is put back after.
class CapturedLog {
 public:
  explicit CapturedLog(std::optional<spdlog::level::level_enum> level = std::nullopt)
      : previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>(
        "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(out_));
    if (level) logger->set_level(*level);
    spdlog::set_default_logger(logger);
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  std::string text() const { return out_.str(); }
  // How many times `what` was logged.
  size_t count(const std::string& what) const {
    const std::string log = text();
    size_t n = 0;
    for (size_t at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
    return n;
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST(SimulatedGpuProvider, ShorthandSpecGivesThatManyGpusOfThatModel) {
  auto gpus = discoverSim("sim:4xA100");
  ASSERT_EQ(gpus.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(gpus[i].index, i);
    EXPECT_EQ(gpus[i].minor, i);
    EXPECT_EQ(gpus[i].model, "A100");  // short, as users type it in --gpu-model
    EXPECT_EQ(gpus[i].memoryMib, 81920);
  }
  EXPECT_EQ(gpus[0].numaNode, 0);
  EXPECT_EQ(gpus[3].numaNode, 1);
}

TEST(SimulatedGpuProvider, MixedSpecLaysOutTermsInOrder) {
  auto gpus = discoverSim("sim:2xA100,2xH200,1xFOO");
  ASSERT_EQ(gpus.size(), 5u);
  EXPECT_EQ(gpus[1].model, "A100");
  EXPECT_EQ(gpus[2].model, "H200");
  EXPECT_EQ(gpus[2].memoryMib, 143771);
  EXPECT_EQ(gpus[4].model, "FOO");
  EXPECT_EQ(gpus[4].memoryMib, 16384);
}

TEST(SimulatedGpuProvider, KnownModelMemory) {
  EXPECT_EQ(SimulatedGpuProvider::defaultMemoryMib("H100"), 81920);
  EXPECT_EQ(SimulatedGpuProvider::defaultMemoryMib("V100"), 32768);
  EXPECT_EQ(SimulatedGpuProvider::defaultMemoryMib("L4"), 23034);
  EXPECT_EQ(SimulatedGpuProvider::defaultMemoryMib("T4"), 15360);
  EXPECT_EQ(SimulatedGpuProvider::defaultMemoryMib("B200"), 16384);
}

TEST(SimulatedGpuProvider, UuidsAreStablePerHostUniqueAcrossHostsAndMarkedSimulated) {
  auto a1 = discoverSim("sim:8xH100", "gpu-01");
  auto a2 = discoverSim("sim:8xH100", "gpu-01");
  auto b = discoverSim("sim:8xH100", "gpu-02");
  std::set<std::string> all;
  for (size_t i = 0; i < a1.size(); ++i) {
    EXPECT_EQ(a1[i].uuid, a2[i].uuid);
    EXPECT_EQ(a1[i].uuid.rfind("GPU-sim-", 0), 0u) << a1[i].uuid;
    all.insert(a1[i].uuid);
    all.insert(b[i].uuid);
  }
  EXPECT_EQ(all.size(), 16u);
}

TEST(SimulatedGpuProvider, LabelsItselfSimulated) {
  auto p = SimulatedGpuProvider::create("sim:1xT4", "h");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE((*p)->simulated());
  EXPECT_EQ((*p)->name(), "simulated");
}

TEST(SimulatedGpuProvider, BadSpecsAreInvalidArgumentNamingTheSpec) {
  for (const std::string spec :
       {"sim:", "sim:4x", "sim:xA100", "sim:0xA100", "sim:4A100", "sim:-1xA100", "sim:4xA100,",
        "sim:4xA 100", "sim:99999xH100", "sim:65xH100", "nvml:4xA100"}) {
    auto p = SimulatedGpuProvider::create(spec, "h");
    ASSERT_FALSE(p.ok()) << spec;
    EXPECT_EQ(p.status().code(), Code::kInvalidArgument) << spec;
    EXPECT_NE(p.status().message().find("'" + spec + "'"), std::string::npos)
        << p.status().message();
  }
}

TEST(SimulatedGpuProvider, TomlFileDescribesEachGpuAndItsTopology) {
  TempToml f(R"(
driver_version = "550.54.15"
cuda_version = "12.4"
[[gpu]]
model = "H100"
count = 2
numa_node = 0
nvlink_group = 0
pcie_switch = 0
[[gpu]]
model = "L4"
numa_node = 1
pcie_switch = 3
[[gpu]]
model = "X1"
memory_mib = 1000
)");
  auto p = SimulatedGpuProvider::create("sim:" + f.path(), "h");
  ASSERT_TRUE(p.ok()) << p.status().toString();
  auto gpus = (*p)->discover();
  ASSERT_TRUE(gpus.ok());
  ASSERT_EQ(gpus->size(), 4u);
  EXPECT_EQ((*gpus)[1].model, "H100");
  EXPECT_EQ((*gpus)[1].numaNode, 0);
  EXPECT_EQ((*gpus)[1].driverVersion, "550.54.15");
  EXPECT_EQ((*gpus)[1].cudaVersion, "12.4");
  EXPECT_EQ((*gpus)[2].model, "L4");
  EXPECT_EQ((*gpus)[2].memoryMib, 23034);
  EXPECT_EQ((*gpus)[2].numaNode, 1);
  EXPECT_EQ((*gpus)[3].memoryMib, 1000);
  EXPECT_EQ((*gpus)[3].numaNode, -1);
  EXPECT_EQ((*p)->driverVersion(), "550.54.15");
  EXPECT_EQ((*gpus)[0].nvlinkDomain, 0);
  EXPECT_EQ((*gpus)[1].nvlinkDomain, 0);
  EXPECT_EQ((*gpus)[1].pcieSwitch, 0);
  EXPECT_EQ((*gpus)[2].nvlinkDomain, -1);
  EXPECT_EQ((*gpus)[2].pcieSwitch, 3);
  EXPECT_EQ((*gpus)[3].nvlinkDomain, -1);  // a file entry without topology has none
  EXPECT_EQ((*gpus)[3].pcieSwitch, -1);
}

std::vector<int> nvlinkDomains(const std::vector<model::Gpu>& gpus) {
  std::vector<int> out;
  for (const auto& g : gpus) out.push_back(g.nvlinkDomain);
  return out;
}
std::vector<int> pcieSwitches(const std::vector<model::Gpu>& gpus) {
  std::vector<int> out;
  for (const auto& g : gpus) out.push_back(g.pcieSwitch);
  return out;
}
std::vector<int> numaNodes(const std::vector<model::Gpu>& gpus) {
  std::vector<int> out;
  for (const auto& g : gpus) out.push_back(g.numaNode);
  return out;
}

TEST(SimulatedGpuProvider, ShorthandSpecHasAnHgxLikeTopology) {
  auto gpus = discoverSim("sim:8xH100");
  EXPECT_EQ(nvlinkDomains(gpus), (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(pcieSwitches(gpus), (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(numaNodes(gpus), (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
}

TEST(SimulatedGpuProvider, ShorthandTermsNeverShareDomainsOrSwitches) {
  // A lone GPU, at the end of a term or as a term of its own, has no NVLink peer.
  auto gpus = discoverSim("sim:2xA100,5xH100,1xL4");
  EXPECT_EQ(nvlinkDomains(gpus), (std::vector<int>{0, 0, 1, 1, 1, 1, -1, -1}));
  EXPECT_EQ(pcieSwitches(gpus), (std::vector<int>{0, 0, 1, 1, 2, 2, -1, -1}));
  auto six = discoverSim("sim:6xA100,2xH100");
  EXPECT_EQ(nvlinkDomains(six), (std::vector<int>{0, 0, 0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(pcieSwitches(six), (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}));
}

TEST(SimulatedGpuProvider, BadTomlFilesNameTheProblem) {
  {
    TempToml f("[[gpu]]\nmodel = \n");
    auto p = SimulatedGpuProvider::create("sim:" + f.path(), "h");
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), Code::kInvalidArgument);
    EXPECT_NE(p.status().message().find("line 2"), std::string::npos) << p.status().message();
  }
  {
    TempToml f("driver_version = \"1\"\n");
    auto p = SimulatedGpuProvider::create("sim:" + f.path(), "h");
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.status().message().find("no [[gpu]]"), std::string::npos) << p.status().message();
  }
  {
    TempToml f("[[gpu]]\nmemory_mib = 5\n");
    auto p = SimulatedGpuProvider::create("sim:" + f.path(), "h");
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.status().message().find("needs model"), std::string::npos) << p.status().message();
  }
  auto missing = SimulatedGpuProvider::create("sim:/nonexistent/host.toml", "h");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/host.toml"), std::string::npos);
}

TEST(SimulatedGpuProvider, IdleGpusSampleZeroUtilisation) {
  auto p = SimulatedGpuProvider::create("sim:2xH100", "host-a");
  ASSERT_TRUE(p.ok());
  auto s = (*p)->sample();
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].utilizationPct, 0.0);
  EXPECT_EQ((*s)[1].memoryUsedMib, 0);
}

TEST(SimulatedGpuProvider, UtilisationIsWhatWorkloadsDeclareFromEnvThenFile) {
  auto p = SimulatedGpuProvider::create("sim:4xH100", "host-a");
  ASSERT_TRUE(p.ok());
  TempToml dir("");  // only for its directory
  const std::string file = std::filesystem::path(dir.path()).parent_path() / "util";
  (*p)->setWorkloads({{{1, 2}, 70, file}});
  auto s = (*p)->sample();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)[0].utilizationPct, 0.0);
  EXPECT_EQ((*s)[1].utilizationPct, 70.0);
  EXPECT_EQ((*s)[2].utilizationPct, 70.0);
  EXPECT_EQ((*s)[1].memoryUsedMib, 81920 * 70 / 100);

  // A number written to the file while running overrides the start value, on the next round.
  std::ofstream(file) << "35\n";
  s = (*p)->sample();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)[1].utilizationPct, 35.0);
  // Something that is not a number leaves the declared value.
  std::ofstream(file) << "busy\n";
  s = (*p)->sample();
  EXPECT_EQ((*s)[1].utilizationPct, 70.0);

  (*p)->setWorkloads({});
  s = (*p)->sample();
  EXPECT_EQ((*s)[1].utilizationPct, 0.0);
}

TEST(SimulatedGpuProvider, FractionsOnASharedGpuAddUpCappedAt100) {
  auto p = SimulatedGpuProvider::create("sim:1xA100", "host-a");
  ASSERT_TRUE(p.ok());
  (*p)->setWorkloads({{{0}, 30, ""}, {{0}, 45, ""}});
  auto s = (*p)->sample();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)[0].utilizationPct, 75.0);
  (*p)->setWorkloads({{{0}, 60, ""}, {{0}, 60, ""}});
  s = (*p)->sample();
  EXPECT_EQ((*s)[0].utilizationPct, 100.0);
}

TEST(ShortGpuModel, StripsVendorAndVariant) {
  EXPECT_EQ(shortGpuModel("NVIDIA H200"), "H200");
  EXPECT_EQ(shortGpuModel("NVIDIA A100-SXM4-80GB"), "A100");
  EXPECT_EQ(shortGpuModel("NVIDIA H100 80GB HBM3"), "H100");
  EXPECT_EQ(shortGpuModel("Tesla V100-PCIE-32GB"), "V100");
  EXPECT_EQ(shortGpuModel("Tesla T4"), "T4");
  EXPECT_EQ(shortGpuModel("NVIDIA L4"), "L4");
  EXPECT_EQ(shortGpuModel("NVIDIA RTX A6000"), "A6000");
  EXPECT_EQ(shortGpuModel("NVIDIA GeForce RTX 4090"), "RTX4090");
}

TEST(NvmlGpuProvider, OpenFailsCleanlyWithoutTheDriver) {
  if (std::filesystem::exists("/dev/nvidiactl"))
    GTEST_SKIP() << "GPU hardware: this machine has a GPU driver, so NVML does not fail here";
  auto p = NvmlGpuProvider::open();
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kUnavailable);
  EXPECT_EQ(p.status().message(), "libnvidia-ml.so.1 not found: is the NVIDIA driver installed?");
}

TEST(NvmlGpuProvider, OpenFailsCleanlyOnALibraryThatIsNotNvml) {
  auto p = NvmlGpuProvider::open("libm.so.6");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kUnavailable);
  EXPECT_NE(p.status().message().find("lacks nvmlInit_v2"), std::string::npos)
      << p.status().message();
}

// The fake library answers through the same dlopen/dlsym path the real one does.
class FakeNvml : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* knob : {"FAKE_NVML_GPUS", "FAKE_NVML_INIT_FAIL", "FAKE_NVML_NVLINK",
                             "FAKE_NVML_NO_REMOTE_TYPE", "FAKE_NVML_PCIE_SWITCH_SIZE",
                             "FAKE_NVML_TOPOLOGY_FAIL", "FAKE_NVML_UTIL", "FAKE_NVML_NO_ECC"}) {
      unsetenv(knob);
    }
  }
  // The fake's GPUs, with the knobs set as given.
  std::vector<model::Gpu> discover(const std::vector<std::pair<const char*, const char*>>& knobs,
                                   const std::string& lib = ALLOT_FAKE_NVML_PATH) {
    for (const auto& [k, v] : knobs) setenv(k, v, 1);
    auto p = NvmlGpuProvider::open(lib);
    EXPECT_TRUE(p.ok()) << p.status().toString();
    if (!p.ok()) return {};
    auto gpus = (*p)->discover();
    EXPECT_TRUE(gpus.ok()) << gpus.status().toString();
    return gpus.ok() ? *gpus : std::vector<model::Gpu>{};
  }
  const std::string lib_ = ALLOT_FAKE_NVML_PATH;
};

TEST_F(FakeNvml, DiscoversGpusWithShortModelsAndRealMinors) {
  auto p = NvmlGpuProvider::open(lib_);
  ASSERT_TRUE(p.ok()) << p.status().toString();
  EXPECT_FALSE((*p)->simulated());
  EXPECT_EQ((*p)->name(), "nvml");
  EXPECT_EQ((*p)->driverVersion(), "550.54.15");
  auto gpus = (*p)->discover();
  ASSERT_TRUE(gpus.ok()) << gpus.status().toString();
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[1].index, 1);
  EXPECT_EQ((*gpus)[1].minor, 5);
  EXPECT_EQ((*gpus)[1].uuid, "GPU-0fa4e000-0000-0000-0000-000000000001");
  EXPECT_EQ((*gpus)[1].model, "H200");
  EXPECT_EQ((*gpus)[1].memoryMib, 143771);
  EXPECT_EQ((*gpus)[1].numaNode, -1);  // no such PCI device in sysfs here
  EXPECT_EQ((*gpus)[1].driverVersion, "550.54.15");
  EXPECT_EQ((*gpus)[1].cudaVersion, "12.4");
}

TEST_F(FakeNvml, NvlinkPairsAreDomainsOfTwo) {
  auto gpus = discover({{"FAKE_NVML_GPUS", "4"}, {"FAKE_NVML_NVLINK", "pairs"}});
  EXPECT_EQ(nvlinkDomains(gpus), (std::vector<int>{0, 0, 1, 1}));
}

TEST_F(FakeNvml, NvlinkPeerThatNvmlDoesNotShowJoinsNothing) {
  // GPU 2's partner is GPU 3, which this agent does not see (say, a container given three).
  auto gpus = discover({{"FAKE_NVML_GPUS", "3"}, {"FAKE_NVML_NVLINK", "pairs"}});
  EXPECT_EQ(nvlinkDomains(gpus), (std::vector<int>{0, 0, -1}));
}

TEST_F(FakeNvml, NvswitchMachineIsOneDomain) {
  auto gpus = discover({{"FAKE_NVML_GPUS", "8"}, {"FAKE_NVML_NVLINK", "nvswitch"}});
  EXPECT_EQ(nvlinkDomains(gpus), (std::vector<int>(8, 0)));
}

TEST_F(FakeNvml, NvswitchMachineIsOneDomainWhenNvmlCannotTellSwitchesFromGpus) {
  auto gpus = discover({{"FAKE_NVML_GPUS", "8"},
                        {"FAKE_NVML_NVLINK", "nvswitch"},
                        {"FAKE_NVML_NO_REMOTE_TYPE", "1"}});
  EXPECT_EQ(nvlinkDomains(gpus), (std::vector<int>(8, 0)));
  // Pairs still pair: their far ends are our own GPUs, found by PCI address.
  auto pairs = discover({{"FAKE_NVML_GPUS", "4"}, {"FAKE_NVML_NVLINK", "pairs"}});
  EXPECT_EQ(nvlinkDomains(pairs), (std::vector<int>{0, 0, 1, 1}));
}

TEST_F(FakeNvml, WithoutNvlinkGpusHaveNoDomain) {
  auto gpus = discover({{"FAKE_NVML_GPUS", "4"}});
  EXPECT_EQ(nvlinkDomains(gpus), (std::vector<int>(4, -1)));
}

TEST_F(FakeNvml, NvlinkErrorsLeaveDomainsUnknownAndInventoryWhole) {
  auto gpus = discover({{"FAKE_NVML_GPUS", "4"},
                        {"FAKE_NVML_NVLINK", "error"},
                        {"FAKE_NVML_PCIE_SWITCH_SIZE", "2"}});
  ASSERT_EQ(gpus.size(), 4u);
  EXPECT_EQ(nvlinkDomains(gpus), (std::vector<int>(4, -1)));
  EXPECT_EQ(pcieSwitches(gpus), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(gpus[3].model, "H200");
}

TEST_F(FakeNvml, PcieSwitchesGroupGpusBelowOneSwitchButNotAcrossHostBridges) {
  // Within each four: SINGLE for 0-1, MULTIPLE for 0-2; between the fours: HOSTBRIDGE.
  auto gpus = discover({{"FAKE_NVML_GPUS", "8"}, {"FAKE_NVML_PCIE_SWITCH_SIZE", "4"}});
  EXPECT_EQ(pcieSwitches(gpus), (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  auto alone = discover({{"FAKE_NVML_GPUS", "4"}, {"FAKE_NVML_PCIE_SWITCH_SIZE", "1"}});
  EXPECT_EQ(pcieSwitches(alone), (std::vector<int>(4, -1)));
}

TEST_F(FakeNvml, PcieTopologyErrorLeavesSwitchesUnknown) {
  auto gpus = discover({{"FAKE_NVML_GPUS", "4"},
                        {"FAKE_NVML_PCIE_SWITCH_SIZE", "2"},
                        {"FAKE_NVML_TOPOLOGY_FAIL", "1"},
                        {"FAKE_NVML_NVLINK", "pairs"}});
  EXPECT_EQ(pcieSwitches(gpus), (std::vector<int>(4, -1)));
  EXPECT_EQ(nvlinkDomains(gpus), (std::vector<int>{0, 0, 1, 1}));
}

TEST_F(FakeNvml, MissingTopologyFunctionsLeaveItUnknownAndSayWhyOnce) {
  CapturedLog log(spdlog::level::debug);

  setenv("FAKE_NVML_GPUS", "4", 1);
  setenv("FAKE_NVML_NVLINK", "pairs", 1);  // ignored: the library lacks the functions
  setenv("FAKE_NVML_PCIE_SWITCH_SIZE", "2", 1);
  auto p = NvmlGpuProvider::open(ALLOT_FAKE_NVML_NO_TOPOLOGY_PATH);
  ASSERT_TRUE(p.ok()) << p.status().toString();
  for (int round = 0; round < 2; ++round) {
    auto gpus = (*p)->discover();
    ASSERT_TRUE(gpus.ok()) << gpus.status().toString();
    ASSERT_EQ(gpus->size(), 4u);
    EXPECT_EQ(nvlinkDomains(*gpus), (std::vector<int>(4, -1)));
    EXPECT_EQ(pcieSwitches(*gpus), (std::vector<int>(4, -1)));
    EXPECT_EQ((*gpus)[2].uuid, "GPU-0fa4e000-0000-0000-0000-000000000002");
  }
  EXPECT_EQ(log.count("NVML lacks nvmlDeviceGetNvLinkState"), 1u) << log.text();
  EXPECT_EQ(log.count("NVML lacks nvmlDeviceGetTopologyCommonAncestor"), 1u) << log.text();
  EXPECT_NE(log.text().find("[debug]"), std::string::npos) << log.text();
}

TEST_F(FakeNvml, SampleReadsEveryGpuThroughTheSession) {
  setenv("FAKE_NVML_GPUS", "3", 1);
  auto p = NvmlGpuProvider::open(lib_);
  ASSERT_TRUE(p.ok()) << p.status().toString();
  auto samples = (*p)->sample();
  ASSERT_TRUE(samples.ok()) << samples.status().toString();
  ASSERT_EQ(samples->size(), 3u);
  const auto& s = (*samples)[2];
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.utilizationPct, 25.0);
  EXPECT_EQ(s.memoryUsedMib, 3 * 1024);
  EXPECT_EQ(s.temperatureC, 42.0);
  EXPECT_DOUBLE_EQ(*s.powerW, 250.5);  // NVML's milliwatts, in watts
  EXPECT_EQ(s.smClockMhz, 1980);
  EXPECT_EQ(s.eccCorrected, 2);
  EXPECT_EQ(s.eccUncorrected, 0);
  EXPECT_EQ(s.pids, std::vector<int>{1002});

  // Readings follow the device from one round to the next.
  setenv("FAKE_NVML_UTIL", "70", 1);
  samples = (*p)->sample();
  ASSERT_TRUE(samples.ok());
  EXPECT_EQ((*samples)[0].utilizationPct, 70.0);
}

TEST_F(FakeNvml, EccNotSupportedLeavesEccAbsentNotZero) {
  setenv("FAKE_NVML_NO_ECC", "1", 1);
  auto p = NvmlGpuProvider::open(lib_);
  ASSERT_TRUE(p.ok());
  auto samples = (*p)->sample();
  ASSERT_TRUE(samples.ok());
  ASSERT_EQ(samples->size(), 2u);
  EXPECT_FALSE((*samples)[1].eccCorrected.has_value());
  EXPECT_FALSE((*samples)[1].eccUncorrected.has_value());
  EXPECT_EQ((*samples)[1].utilizationPct, 15.0);
}

TEST_F(FakeNvml, MissingSamplingSymbolsLeaveThoseReadingsAbsentLoggedOnce) {
  CapturedLog log;
  auto p = NvmlGpuProvider::open(ALLOT_FAKE_NVML_NO_SAMPLING_PATH);
  ASSERT_TRUE(p.ok()) << p.status().toString();
  for (int round = 0; round < 3; ++round) {
    auto samples = (*p)->sample();
    ASSERT_TRUE(samples.ok()) << samples.status().toString();
    ASSERT_EQ(samples->size(), 2u);
    const auto& s = (*samples)[1];
    EXPECT_EQ(s.memoryUsedMib, 2 * 1024);  // nvmlDeviceGetMemoryInfo is always there
    EXPECT_FALSE(s.utilizationPct || s.temperatureC || s.powerW || s.smClockMhz || s.eccCorrected ||
                 s.eccUncorrected);
    EXPECT_TRUE(s.pids.empty());
  }
  EXPECT_EQ(log.count("NVML lacks nvmlDeviceGetUtilizationRates"), 1u) << log.text();
  EXPECT_EQ(log.count("NVML lacks nvmlDeviceGetTotalEccErrors"), 1u) << log.text();
  EXPECT_EQ(log.count("NVML lacks nvmlDeviceGetComputeRunningProcesses"), 1u) << log.text();
}

TEST_F(FakeNvml, InitFailureCarriesNvmlErrorString) {
  setenv("FAKE_NVML_INIT_FAIL", "1", 1);
  auto p = NvmlGpuProvider::open(lib_);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "failed to initialise NVML: Driver Not Loaded");
}

TEST(GpuProviderFactory, AutoFallsBackToSimulatedWithANote) {
  std::string note;
  auto p = makeGpuProvider("auto", "h", &note, "libnvidia-ml-missing.so.1");
  ASSERT_TRUE(p.ok()) << p.status().toString();
  EXPECT_TRUE((*p)->simulated());
  auto gpus = (*p)->discover();
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ(gpus->size(), 8u);
  EXPECT_EQ((*gpus)[0].model, "H100");
  EXPECT_EQ(note,
            "NVML unavailable (libnvidia-ml-missing.so.1 not found: is the NVIDIA driver "
            "installed?); using a SIMULATED 8xH100 host");
}

TEST_F(FakeNvml, AutoPrefersNvmlWhenItHasGpus) {
  std::string note = "stale";
  auto p = makeGpuProvider("auto", "h", &note, lib_);
  ASSERT_TRUE(p.ok()) << p.status().toString();
  EXPECT_EQ((*p)->name(), "nvml");
  EXPECT_EQ(note, "");
}

TEST_F(FakeNvml, AutoFallsBackWhenNvmlHasNoGpus) {
  setenv("FAKE_NVML_GPUS", "0", 1);
  std::string note;
  auto p = makeGpuProvider("auto", "h", &note, lib_);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE((*p)->simulated());
  EXPECT_EQ(note, "NVML reports no GPUs; using a SIMULATED 8xH100 host");
}

TEST(GpuProviderFactory, NvmlSpecDoesNotFallBack) {
  std::string note;
  auto p = makeGpuProvider("nvml", "h", &note, "libnvidia-ml-missing.so.1");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kUnavailable);
}

TEST(GpuProviderFactory, SimSpecAndUnknownSpec) {
  auto p = makeGpuProvider("sim:2xL4", "h", nullptr);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->discover()->size(), 2u);
  auto bad = makeGpuProvider("gpus-please", "h", nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'gpus-please'"), std::string::npos);
  auto badSim = makeGpuProvider("sim:4x", "h", nullptr);
  ASSERT_FALSE(badSim.ok());
  EXPECT_EQ(badSim.status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace allot::agent
