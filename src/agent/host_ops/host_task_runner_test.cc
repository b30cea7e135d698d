#include "agent/host_ops/host_task_runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/gpu/simulated_gpu_provider.h"
#include "agent/test_dirs.h"

namespace allot::agent {
namespace {
namespace fs = std::filesystem;

class HostTaskRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testdirs::perTestDir("task-test");
    fs::create_directories(root_ / "work/jobs/3");
    std::ofstream(root_ / "work/jobs/3/output.log") << "old";
    auto p = SimulatedGpuProvider::create("sim:2xH100", "task-test");
    ASSERT_TRUE(p.ok());
    gpus_ = std::move(*p);
  }
  void TearDown() override { fs::remove_all(root_); }

  // A script hook that prints `text` and exits with `status`.
  model::HookSpec script(const std::string& body, int64_t timeoutMs = 10'000) {
    fs::path path = root_ / "hook.sh";
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(path, fs::perms::owner_all);
    model::HookSpec h;
    h.id = 1;
    h.kind = "script";
    h.path = path.string();
    h.timeoutMs = timeoutMs;
    return h;
  }
  HostTaskContext context() {
    HostTaskContext c;
    c.wipe.workDir = (root_ / "work").string();
    c.wipe.scratchDir = (root_ / "work/scratch").string();
    c.wipe.currentHookRun = 5;
    c.wipe.gpus = gpus_.get();
    c.wipe.strayMarker = "ALLOT_TASK_TEST=" + std::to_string(::getpid());
    c.hook.runDir = (root_ / "work/hooks/5").string();
    c.health.gpus = gpus_.get();
    c.health.diskPath = root_.string();
    c.outputFile = (root_ / "work/hooks/5/output.log").string();
    return c;
  }

  fs::path root_;
  std::unique_ptr<SimulatedGpuProvider> gpus_;
};

TEST_F(HostTaskRunnerTest, RunsWipeThenHookThenHealthAndStreamsAllOutput) {
  model::HostTask task;
  task.id = 5;
  task.purpose = "handover to ml";
  task.wipe = model::WipeStep{};
  task.hook = script("echo hook says hi");
  task.health = model::HealthStep{};
  task.health->gpuCount = 2;
  auto r = runHostTask(task, context());
  ASSERT_TRUE(r.ok) << r.failedStep << ": " << r.reason << "\n" << r.output;
  EXPECT_TRUE(r.failedStep.empty());
  ASSERT_TRUE(r.hook);
  EXPECT_TRUE(r.hook->ok);
  ASSERT_TRUE(r.health);
  EXPECT_EQ(r.health->gpuCount, 2);
  EXPECT_FALSE(fs::exists(root_ / "work/jobs/3"));
  const auto wipe = r.output.find("removed 1 job directories");
  const auto hook = r.output.find("hook says hi");
  const auto health = r.output.find("health: ok");
  ASSERT_NE(wipe, std::string::npos) << r.output;
  ASSERT_NE(hook, std::string::npos) << r.output;
  ASSERT_NE(health, std::string::npos) << r.output;
  EXPECT_LT(wipe, hook);
  EXPECT_LT(hook, health);
  EXPECT_EQ(testdirs::fileText(root_ / "work/hooks/5/output.log"), r.output);
}

TEST_F(HostTaskRunnerTest, StopsAtTheFirstFailingStep) {
  model::HostTask task;
  task.id = 5;
  task.wipe = model::WipeStep{};
  task.hook = script("echo breaking; exit 3");
  task.health = model::HealthStep{};
  auto r = runHostTask(task, context());
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failedStep, "hook");
  EXPECT_EQ(r.reason, "exited with status 3");
  EXPECT_FALSE(r.health);  // never ran
  EXPECT_NE(r.output.find("breaking"), std::string::npos);
  EXPECT_EQ(r.output.find("health"), std::string::npos) << r.output;
}

TEST_F(HostTaskRunnerTest, AFailedWipeRunsNothingAfterIt) {
  model::HostTask task;
  task.id = 5;
  task.wipe = model::WipeStep{};
  task.hook = script("echo should not run");
  auto ctx = context();
  ctx.wipe.liveJobs = {8};
  auto r = runHostTask(task, ctx);
  EXPECT_EQ(r.failedStep, "wipe");
  EXPECT_NE(r.reason.find("jobs still run on this host (8)"), std::string::npos) << r.reason;
  EXPECT_FALSE(r.hook);
  EXPECT_EQ(r.output.find("should not run"), std::string::npos);
}

TEST_F(HostTaskRunnerTest, UnhealthyHostFailsAtHealthWithTheFirstProblem) {
  model::HostTask task;
  task.id = 5;
  task.health = model::HealthStep{};
  task.health->gpuCount = 8;
  task.health->gpuModels = {"A100"};
  auto r = runHostTask(task, context());
  EXPECT_EQ(r.failedStep, "health");
  EXPECT_EQ(r.reason, "expected 8 GPUs, found 2 (and 1 more)");
  ASSERT_TRUE(r.health);
  EXPECT_EQ(r.health->problems.size(), 2u);
}

TEST_F(HostTaskRunnerTest, OutputIsCappedToItsLast256KiB) {
  model::HostTask task;
  task.id = 5;
  // 400 KiB of output, then a last line that must survive.
  task.hook = script("head -c 409600 /dev/zero | tr '\\\\0' x; echo; echo the end");
  auto r = runHostTask(task, context());
  ASSERT_TRUE(r.ok) << r.reason;
  EXPECT_LE(r.output.size(), kMaxHookOutput + 100);
  EXPECT_NE(r.output.find("earlier bytes not kept"), std::string::npos);
  EXPECT_NE(r.output.find("the end"), std::string::npos);
  // The streamed file has all of it.
  EXPECT_GT(fs::file_size(root_ / "work/hooks/5/output.log"), 409600u);
}

}  // namespace
}  // namespace allot::agent
