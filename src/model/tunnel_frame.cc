#include "model/tunnel_frame.h"

#include <nlohmann/json.hpp>

#include "common/bounded_json.h"

namespace allot::model {

namespace {

void putU32(std::string& out, uint32_t v) {
  out.push_back(static_cast<char>(v >> 24));
  out.push_back(static_cast<char>(v >> 16));
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v));
}

uint32_t getU32(std::string_view in) {
  auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(in[i])); };
  return b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3);
}

std::string header(TunnelOp op, uint32_t stream, size_t payloadSize) {
  std::string out;
  out.reserve(kTunnelHeader + payloadSize);
  out.push_back(static_cast<char>(kTunnelMagic));
  out.push_back(static_cast<char>(op));
  putU32(out, stream);
  return out;
}

}  // namespace

bool isTunnelFrame(std::string_view message) {
  return !message.empty() && static_cast<uint8_t>(message[0]) == kTunnelMagic;
}

std::string encodeTunnelFrame(const TunnelFrame& frame) {
  std::string out = header(frame.op, frame.stream, frame.payload.size());
  out += frame.payload;
  return out;
}

Result<TunnelFrame> decodeTunnelFrame(std::string_view message) {
  if (message.size() < kTunnelHeader)
    return Status::InvalidArgument("tunnel frame of " + std::to_string(message.size()) +
                                   " bytes is shorter than its 6-byte header");
  if (!isTunnelFrame(message)) return Status::InvalidArgument("not a tunnel frame");
  const auto op = static_cast<uint8_t>(message[1]);
  if (op < static_cast<uint8_t>(TunnelOp::kOpen) || op > static_cast<uint8_t>(TunnelOp::kReset))
    return Status::InvalidArgument("unknown tunnel op " + std::to_string(op));
  TunnelFrame f;
  f.op = static_cast<TunnelOp>(op);
  f.stream = getU32(message.substr(2, 4));
  std::string_view payload = message.substr(kTunnelHeader);
  const size_t max = f.op == TunnelOp::kData ? kMaxTunnelData : kMaxTunnelControlPayload;
  if (payload.size() > max)
    return Status::TooLarge("tunnel frame payload of " + std::to_string(payload.size()) +
                            " bytes exceeds " + std::to_string(max));
  if (f.op == TunnelOp::kWindow && payload.size() != 4)
    return Status::InvalidArgument("WINDOW frame needs a 4-byte credit");
  f.payload = std::string(payload);
  return f;
}

std::string tunnelOpenFrame(uint32_t stream, const TunnelOpen& open) {
  return tunnelSimpleFrame(
      TunnelOp::kOpen, stream,
      nlohmann::json{{"session", open.session}, {"target", open.target}}.dump());
}

std::string tunnelDataFrame(uint32_t stream, std::string_view bytes) {
  return tunnelSimpleFrame(TunnelOp::kData, stream, bytes);
}

std::string tunnelWindowFrame(uint32_t stream, uint32_t credit) {
  std::string out = header(TunnelOp::kWindow, stream, 4);
  putU32(out, credit);
  return out;
}

std::string tunnelSimpleFrame(TunnelOp op, uint32_t stream, std::string_view reason) {
  std::string out = header(op, stream, reason.size());
  out.append(reason);
  return out;
}

Result<TunnelOpen> tunnelOpenFromPayload(std::string_view payload) {
  auto j = parseBoundedJson(payload);
  if (!j.is_object()) return Status::InvalidArgument("OPEN payload is not a JSON object");
  auto s = j.find("session");
  auto t = j.find("target");
  if (s == j.end() || !s->is_number_integer())
    return Status::InvalidArgument("OPEN payload needs an integer session", "session");
  if (t == j.end() || !t->is_string())
    return Status::InvalidArgument("OPEN payload needs a string target", "target");
  return TunnelOpen{s->get<int64_t>(), t->get<std::string>()};
}

uint32_t tunnelWindowCredit(const TunnelFrame& frame) {
  return frame.payload.size() == 4 ? getU32(frame.payload) : 0;
}

}  // namespace allot::model
