#include "model/json.h"

#include <gtest/gtest.h>

namespace allot::model {
namespace {

TEST(ModelJson, JobRoundTripsThroughStoreDoc) {
  Job j;
  j.id = 42;
  j.name = "train";
  j.team = "vision";
  j.command = {"python3", "train.py"};
  j.env = {{"A", "1"}};
  j.gpus = 2;
  j.state = JobState::kRunning;
  j.host = "gpu-07";
  j.gpuIndices = {0, 1};
  j.exitCode = 3;
  j.submittedAt = 1000;
  Job back = jobFromStoreDoc(toStoreDoc(j));
  EXPECT_EQ(back.id, 42);
  EXPECT_EQ(back.command, j.command);
  EXPECT_EQ(back.env, j.env);
  EXPECT_EQ(back.state, JobState::kRunning);
  EXPECT_EQ(back.gpuIndices, j.gpuIndices);
  EXPECT_EQ(back.exitCode, 3);
  EXPECT_FALSE(back.signal.has_value());
  EXPECT_EQ(back.submittedAt, 1000);
}

TEST(ModelJson, ApiJobHasTheDocumentedFields) {
  Job j;
  j.id = 1;
  j.state = JobState::kQueued;
  j.reason = "waiting for 2 free GPUs";
  auto out = toJson(j);
  for (const char* k : {"id", "name", "state", "reason", "host", "gpus", "exit_code"}) {
    EXPECT_TRUE(out.contains(k)) << k;
  }
  EXPECT_EQ(out["state"], "queued");
  EXPECT_TRUE(out["host"].is_null());
}

TEST(ModelJson, HostRoundTrip) {
  Host h;
  h.name = "h1";
  h.simulated = true;
  h.gpus.push_back(Gpu{0, "GPU-1", 0, "A100", 81920, 0, "", ""});
  Host back = hostFromStoreDoc(toStoreDoc(h));
  EXPECT_EQ(back.name, "h1");
  EXPECT_TRUE(back.simulated);
  ASSERT_EQ(back.gpus.size(), 1u);
  EXPECT_EQ(back.gpus[0].model, "A100");
}

TEST(ModelJson, GpuTopologyRoundTripsAndIsUnknownWhenAbsent) {
  Gpu g;
  g.index = 3;
  g.numaNode = 1;
  g.nvlinkDomain = 0;
  g.pcieSwitch = 2;
  json out = toJson(g);
  EXPECT_EQ(out["nvlink_domain"], 0);
  EXPECT_EQ(out["pcie_switch"], 2);
  Gpu back = gpuFromJson(out);
  EXPECT_EQ(back.nvlinkDomain, 0);
  EXPECT_EQ(back.pcieSwitch, 2);
  EXPECT_EQ(back.numaNode, 1);

  // What an older agent or store wrote: no topology keys at all.
  out.erase("nvlink_domain");
  out.erase("pcie_switch");
  Gpu old = gpuFromJson(out);
  EXPECT_EQ(old.nvlinkDomain, -1);
  EXPECT_EQ(old.pcieSwitch, -1);
  EXPECT_EQ(old.index, 3);
}

}  // namespace
}  // namespace allot::model
