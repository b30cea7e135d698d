#pragma once
// The agent protocol's text frames as types: each frame one end receives decodes whole into one
// alternative of a variant, or is refused with the reason, so a handler never works from a
// half-read message (a job missing from a half-read list would be stopped, or lost).
//   agent -> allotd: AgentMessage (hello, status, telemetry, task_output, task_result)
//   allotd -> agent: ServerMessage (desired)
// The fields' codecs are model/agent_protocol.h's; docs/agent.md describes the wire format.
// Fields a message does not know are ignored, so either end may be the newer one
// (docs/agent.md, "Version skew with allotd").

#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "common/status.h"
#include "model/agent_protocol.h"

namespace allot::protocol {

// The first message of a connection: what the host has and what runs on it.
struct Hello {
  model::Inventory inventory;
  std::vector<model::ActualJob> jobs;
  int64_t refusedDesired = 0;  // desired states this agent refused since it started
};

// What runs on the host now; sent on every change and each heartbeat.
struct StatusReport {
  std::vector<model::ActualJob> jobs;
  int64_t refusedDesired = 0;
};

using AgentMessage =
    std::variant<Hello, StatusReport, model::Telemetry, model::TaskOutput, model::HostTaskResult>;
using ServerMessage = std::variant<model::DesiredState>;

// The message's "type" ("" when it has none, or one that is not a string).
std::string messageType(const nlohmann::json& msg);

// Whole or refused: the refusal names the type and what in it did not decode.
Result<AgentMessage> decodeAgentMessage(const nlohmann::json& msg);
Result<ServerMessage> decodeServerMessage(const nlohmann::json& msg);

std::string encode(const Hello& hello);
std::string encode(const StatusReport& status);

}  // namespace allot::protocol
