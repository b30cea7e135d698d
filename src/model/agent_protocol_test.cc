#include "model/agent_protocol.h"

#include <gtest/gtest.h>

namespace allot::model {
namespace {

TEST(AgentProtocol, LogChunkCarriesBinaryBytes) {
  LogChunk c{7, 100, std::string("a\0b\xff\n", 5)};
  auto back = decodeLogChunk(encodeLogChunk(c));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->job, 7);
  EXPECT_EQ(back->offset, 100);
  EXPECT_EQ(back->data, c.data);
}

TEST(AgentProtocol, ActualJobRoundTrip) {
  ActualJob a;
  a.id = 3;
  a.state = ActualState::kExited;
  a.signal = 15;
  auto back = actualJobFromJson(toJson(a));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->state, ActualState::kExited);
  EXPECT_EQ(back->signal, 15);
  EXPECT_FALSE(back->exitCode.has_value());
}

TEST(AgentProtocol, ReportedInventoryKeepsTheAdminsGpuSettings) {
  Host h;
  h.dedicatedTo = "ml";
  h.gpus = {Gpu{0, "GPU-a", 0, "A100", 81920, 0, "535.104", "12.2", "", false},
            Gpu{1, "GPU-b", 1, "A100", 81920, 0, "535.104", "12.2", "", false}};
  h.gpus[0].dedicatedTo = "vision";
  h.gpus[1].shared = true;
  // The agent reports the same GPUs in another order plus a new one, and tries to set a
  // dedication itself.
  Inventory inv;
  inv.cpus = 32;
  inv.gpus = {Gpu{0, "GPU-b", 1, "A100", 81920, 0, "550.1", "12.4", "", false},
              Gpu{1, "GPU-a", 0, "A100", 81920, 0, "550.1", "12.4", "", false},
              Gpu{2, "GPU-c", 2, "A100", 81920, 0, "550.1", "12.4", "", false}};
  inv.gpus[2].dedicatedTo = "agent-says";
  inv.gpus[2].shared = true;
  applyInventory(h, inv);
  ASSERT_EQ(h.gpus.size(), 3u);
  EXPECT_EQ(h.gpus[0].uuid, "GPU-b");
  EXPECT_TRUE(h.gpus[0].shared);
  EXPECT_EQ(h.gpus[0].dedicatedTo, "");
  EXPECT_EQ(h.gpus[1].dedicatedTo, "vision");
  EXPECT_FALSE(h.gpus[1].shared);
  EXPECT_EQ(h.gpus[1].driverVersion, "550.1");  // hardware facts do come from the agent
  EXPECT_EQ(h.gpus[2].dedicatedTo, "");
  EXPECT_FALSE(h.gpus[2].shared);
  EXPECT_EQ(h.dedicatedTo, "ml");
  EXPECT_EQ(h.cpus, 32);
}

TEST(AgentProtocol, RejectsMalformed) {
  EXPECT_FALSE(actualJobFromJson(nlohmann::json{{"id", 1}, {"state", "dancing"}}).ok());
  EXPECT_FALSE(desiredJobFromJson(nlohmann::json{{"id", "x"}}).ok());
  EXPECT_FALSE(decodeLogChunk("no header").ok());
}

}  // namespace
}  // namespace allot::model
