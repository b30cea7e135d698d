// Each end decodes a frame whole or refuses it: what a version skew or a hostile agent sends
// never reaches a handler half-read.
#include "protocol/agent_messages.h"

#include <gtest/gtest.h>

namespace allot::protocol {
namespace {

using nlohmann::json;

model::Inventory inventory() {
  model::Inventory inv;
  inv.hostname = "h1";
  inv.cpus = 16;
  inv.memoryMib = 65536;
  inv.gpus = {model::Gpu{0, "GPU-a", 0, "A100", 81920, 0, "550.1", "12.4", "", false}};
  inv.gpuProvider = "simulated";
  inv.simulated = true;
  return inv;
}

std::vector<model::ActualJob> running(std::initializer_list<int64_t> ids) {
  std::vector<model::ActualJob> out;
  for (int64_t id : ids) {
    model::ActualJob a;
    a.id = id;
    a.state = model::ActualState::kRunning;
    out.push_back(a);
  }
  return out;
}

TEST(AgentMessages, HelloAndStatusRoundTrip) {
  auto hello = decodeAgentMessage(json::parse(encode(Hello{inventory(), running({1, 2}), 3})));
  ASSERT_TRUE(hello.ok()) << hello.status().message();
  const auto* h = std::get_if<Hello>(&*hello);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->inventory.hostname, "h1");
  ASSERT_EQ(h->jobs.size(), 2u);
  EXPECT_EQ(h->jobs[1].id, 2);
  EXPECT_EQ(h->refusedDesired, 3);

  auto status = decodeAgentMessage(json::parse(encode(StatusReport{running({5}), 0})));
  ASSERT_TRUE(status.ok()) << status.status().message();
  const auto* s = std::get_if<StatusReport>(&*status);
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->jobs.size(), 1u);
  EXPECT_EQ(s->jobs[0].id, 5);
}

// A newer agent may add fields; an older allotd ignores them rather than refuse its reports.
TEST(AgentMessages, FieldsTheReceiverDoesNotKnowAreIgnored) {
  auto msg = json::parse(encode(StatusReport{running({1}), 0}));
  msg["from_the_future"] = {{"x", 1}};
  msg["jobs"][0]["also_new"] = "y";
  auto decoded = decodeAgentMessage(msg);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_TRUE(std::holds_alternative<StatusReport>(*decoded));
}

// One job entry that does not decode refuses the whole report, naming the entry: allotd must not
// take the jobs the agent did report as all that runs there.
TEST(AgentMessages, AMalformedJobEntryRefusesTheWholeReport) {
  auto msg = json::parse(encode(StatusReport{running({1, 2}), 0}));
  msg["jobs"][1]["id"] = "two";
  auto decoded = decodeAgentMessage(msg);
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("status: job entry 1"), std::string::npos)
      << decoded.status().message();

  auto hello = json::parse(encode(Hello{inventory(), running({1}), 0}));
  hello["inventory"]["cpus"] = "many";
  auto badHello = decodeAgentMessage(hello);
  ASSERT_FALSE(badHello.ok());
  EXPECT_NE(badHello.status().message().find("hello: inventory"), std::string::npos)
      << badHello.status().message();
}

// What an agent (or whoever holds its credential) sends is input: any shape is refused with a
// reason, never thrown out of the decoder.
TEST(AgentMessages, HostileShapesAreRefusedNotThrown) {
  for (const char* text :
       {R"([1,2])", R"("hello")", R"({})", R"({"type":5})", R"({"type":null,"jobs":[]})",
        R"({"type":"hello"})", R"({"type":"hello","jobs":{},"inventory":[]})",
        R"({"type":"status","jobs":[{"id":{}}]})", R"({"type":"status","jobs":[null]})",
        R"({"type":"telemetry"})", R"({"type":"telemetry","gpus":"x"})",
        R"({"type":"task_result"})", R"({"type":"task_output","task":"x"})",
        R"({"type":"desired"})", R"({"type":"no-such-type"})"}) {
    const json msg = json::parse(text);
    bool decoded = true;
    EXPECT_NO_THROW(decoded = decodeAgentMessage(msg).ok()) << text;
    EXPECT_FALSE(decoded) << text;
  }
  EXPECT_EQ(messageType(json::parse(R"({"type":5})")), "");
  EXPECT_EQ(messageType(json::parse(R"([1])")), "");
}

// Found by fuzz/wire_fuzz.cc: a number the parser reads as a fraction went into an integer field
// by a cast, undefined past the field's range. Any such number refuses the message; telemetry's
// real fractions still pass.
TEST(AgentMessages, AFractionPastAnIntegersRangeRefusesTheMessage) {
  auto status = json::parse(encode(StatusReport{running({4}), 0}));
  ASSERT_TRUE(decodeAgentMessage(status).ok());
  for (const char* number : {"1e30", "-1e30", "2147483648.5", "78888888888888888888888888888"}) {
    json bad = status;
    bad["jobs"][0]["id"] = json::parse(number);
    EXPECT_FALSE(decodeAgentMessage(bad).ok()) << number;
    auto hello = json::parse(encode(Hello{inventory(), running({1}), 0}));
    hello["inventory"]["cpus"] = json::parse(number);
    EXPECT_FALSE(decodeAgentMessage(hello).ok()) << number;
    EXPECT_FALSE(model::inventoryFromJson(hello["inventory"]).ok()) << number;
    json desired = json::parse(model::encodeDesired({}, 1000));
    desired["heartbeat_ms"] = json::parse(number);
    EXPECT_FALSE(decodeServerMessage(desired).ok()) << number;
    EXPECT_FALSE(
        model::decodeLogChunk(std::string(R"({"job":)") + number + R"(,"offset":0})" + "\nbytes")
            .ok())
        << number;
  }
  json telemetry = {{"type", "telemetry"},
                    {"host", "h1"},
                    {"at_ms", 1},
                    {"interval_ms", 1000},
                    {"gpus", {{{"index", 0}, {"utilization_pct", 42.5}, {"power_w", 301.25}}}}};
  EXPECT_TRUE(decodeAgentMessage(telemetry).ok());
}

TEST(AgentMessages, TheServersMessageIsTheDesiredStateWhole) {
  model::DesiredJob a;
  a.id = 1;
  a.command = {"sleep", "600"};
  auto msg = json::parse(model::encodeDesired({a}, 2000));
  auto decoded = decodeServerMessage(msg);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  const auto& state = std::get<model::DesiredState>(*decoded);
  ASSERT_EQ(state.jobs.size(), 1u);
  EXPECT_EQ(state.heartbeatMs, 2000);

  msg["jobs"][0]["command"] = 7;
  EXPECT_FALSE(decodeServerMessage(msg).ok());
  EXPECT_FALSE(decodeServerMessage(json::parse(R"({"type":"status","jobs":[]})")).ok());
  EXPECT_FALSE(decodeServerMessage(json::parse(R"({"type":7})")).ok());
}

}  // namespace
}  // namespace allot::protocol
