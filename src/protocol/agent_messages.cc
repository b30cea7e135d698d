#include "protocol/agent_messages.h"

#include <utility>

#include "common/bounded_json.h"

namespace allot::protocol {

namespace {

Result<std::vector<model::ActualJob>> readJobs(const nlohmann::json& msg) {
  std::vector<model::ActualJob> out;
  auto it = msg.find("jobs");
  if (it == msg.end() || !it->is_array())
    return Status::InvalidArgument("message without jobs array");
  for (size_t i = 0; i < it->size(); ++i) {
    auto a = model::actualJobFromJson((*it)[i]);
    if (!a.ok())
      return Status::InvalidArgument("job entry " + std::to_string(i) + ": " +
                                     a.status().message());
    out.push_back(std::move(*a));
  }
  return out;
}

// One alternative from its codec's Result, or the refusal naming the message's type.
template <typename Variant, typename T>
Result<Variant> wrap(const std::string& type, Result<T> decoded) {
  if (!decoded.ok()) return Status::InvalidArgument(type + ": " + decoded.status().message());
  return Variant{std::move(*decoded)};
}

Result<Hello> decodeHello(const nlohmann::json& msg) {
  auto jobs = readJobs(msg);
  if (!jobs.ok()) return jobs.status();
  const auto inv = msg.find("inventory");
  auto inventory = model::inventoryFromJson(inv != msg.end() ? *inv : nlohmann::json::object());
  if (!inventory.ok()) return Status::InvalidArgument("inventory: " + inventory.status().message());
  return Hello{std::move(*inventory), std::move(*jobs), model::refusedDesiredOf(msg)};
}

Result<StatusReport> decodeStatus(const nlohmann::json& msg) {
  auto jobs = readJobs(msg);
  if (!jobs.ok()) return jobs.status();
  return StatusReport{std::move(*jobs), model::refusedDesiredOf(msg)};
}

}  // namespace

std::string messageType(const nlohmann::json& msg) {
  if (!msg.is_object()) return "";
  const auto it = msg.find("type");
  return it != msg.end() && it->is_string() ? it->get<std::string>() : "";
}

Result<AgentMessage> decodeAgentMessage(const nlohmann::json& msg) {
  if (!msg.is_object()) return Status::InvalidArgument("not a JSON object");
  const std::string type = messageType(msg);
  if (!fractionsWithinIntRange(msg))
    return Status::InvalidArgument(type + ": a number is out of range (a fraction past 2^31)");
  if (type == "hello") return wrap<AgentMessage>(type, decodeHello(msg));
  if (type == "status") return wrap<AgentMessage>(type, decodeStatus(msg));
  if (type == "telemetry") return wrap<AgentMessage>(type, model::telemetryFromJson(msg));
  if (type == "task_output") return wrap<AgentMessage>(type, model::taskOutputFromJson(msg));
  if (type == "task_result") return wrap<AgentMessage>(type, model::taskResultFromJson(msg));
  return Status::InvalidArgument("unknown message type '" + type + "'");
}

Result<ServerMessage> decodeServerMessage(const nlohmann::json& msg) {
  if (!msg.is_object()) return Status::InvalidArgument("not a JSON object");
  const std::string type = messageType(msg);
  if (type == "desired") {
    // Its refusals name the desired state already ("desired state: job entry 1: ...").
    auto state = model::decodeDesired(msg);
    if (!state.ok()) return state.status();
    return ServerMessage{std::move(*state)};
  }
  return Status::InvalidArgument("unknown message type '" + type + "'");
}

std::string encode(const Hello& hello) {
  return model::encodeHello(hello.inventory, hello.jobs, hello.refusedDesired);
}

std::string encode(const StatusReport& status) {
  return model::encodeStatus(status.jobs, status.refusedDesired);
}

}  // namespace allot::protocol
