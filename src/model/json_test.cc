#include "model/json.h"

#include <gtest/gtest.h>

namespace allot::model {
namespace {

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

TEST(ModelJson, AListedJobCarriesABoundedCommandAndEnvironment) {
  Job small;
  small.command = {"python", "train.py"};
  small.env = {{"SEED", "1"}};
  json listed = toListedJson(small, 4096);
  EXPECT_EQ(listed, toJson(small));
  EXPECT_FALSE(listed.contains("spec_truncated"));
  Job big = small;
  big.env["BLOB"] = std::string(200'000, 'x');
  big.command = {"sh", "-c", std::string(10'000, 'y')};
  listed = toListedJson(big, 4096);
  EXPECT_TRUE(listed.value("spec_truncated", false));
  EXPECT_TRUE(listed["env"].empty());
  EXPECT_LE(listed["command"].dump().size(), 4200u);
  EXPECT_EQ(listed["command"][0], "sh");
  const std::string last = listed["command"].back().get<std::string>();
  EXPECT_EQ(last.substr(last.size() - 4), "y...");
  // The whole job is still there for GET /jobs/{id}.
  EXPECT_EQ(toJson(big)["env"]["BLOB"].get<std::string>().size(), 200'000u);
}

// A stored document the model cannot read is corruption, reported as a Result: nothing thrown
// crosses from the model into the store.

}  // namespace
}  // namespace allot::model
