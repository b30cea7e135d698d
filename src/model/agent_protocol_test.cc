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

TEST(AgentProtocol, RejectsMalformed) {
  EXPECT_FALSE(actualJobFromJson(nlohmann::json{{"id", 1}, {"state", "dancing"}}).ok());
  EXPECT_FALSE(desiredJobFromJson(nlohmann::json{{"id", "x"}}).ok());
  EXPECT_FALSE(decodeLogChunk("no header").ok());
}

}  // namespace
}  // namespace allot::model
