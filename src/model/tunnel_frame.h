#pragma once
// Tunnel frames: byte streams multiplexed over the agent's WebSocket (docs/design/sessions.md,
// section 3.1). Each frame is one WebSocket binary message:
//
//   byte 0     0x01 (tunnel; a log chunk starts with '{', so the two never mix)
//   byte 1     op (TunnelOp)
//   bytes 2-5  stream id, u32 big-endian (chosen by allotd, the only side that opens)
//   bytes 6..  payload: OPEN {"session":N,"target":"jupyter"|"ssh"|...} (JSON); DATA raw bytes
//              (at most kMaxTunnelData); WINDOW u32 big-endian credit; OPEN_FAIL/RESET a short
//              reason; OPEN_OK and CLOSE nothing.
//
// Flow control: each side may send DATA on a stream only within the credit the peer granted,
// kTunnelWindow at the start, topped up by WINDOW frames as the peer consumes. Pure codec; no I/O.

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace allot::model {

inline constexpr uint8_t kTunnelMagic = 0x01;
inline constexpr size_t kTunnelHeader = 6;
inline constexpr size_t kMaxTunnelData = 64 * 1024;
inline constexpr uint32_t kTunnelWindow = 256 * 1024;
// Reasons and OPEN payloads are short; this bounds what a peer can make the other side keep.
inline constexpr size_t kMaxTunnelControlPayload = 4096;

enum class TunnelOp : uint8_t {
  kOpen = 1,
  kOpenOk = 2,
  kOpenFail = 3,
  kData = 4,
  kWindow = 5,
  kClose = 6,  // half-close: the sender writes no more
  kReset = 7,  // the stream is gone, both ways
};

struct TunnelFrame {
  TunnelOp op = TunnelOp::kData;
  uint32_t stream = 0;
  std::string payload;  // as on the wire (see the accessors below for OPEN and WINDOW)
};

// The OPEN payload: which session's target the agent should connect the stream to.
struct TunnelOpen {
  int64_t session = 0;
  std::string target;
};

// True when a binary WebSocket message is a tunnel frame rather than a log chunk.
bool isTunnelFrame(std::string_view message);

std::string encodeTunnelFrame(const TunnelFrame& frame);
// Rejects short frames, a wrong first byte, unknown ops, oversize payloads and a WINDOW whose
// payload is not 4 bytes.
Result<TunnelFrame> decodeTunnelFrame(std::string_view message);

// Convenience encoders for each op.
std::string tunnelOpenFrame(uint32_t stream, const TunnelOpen& open);
std::string tunnelDataFrame(uint32_t stream, std::string_view bytes);
std::string tunnelWindowFrame(uint32_t stream, uint32_t credit);
std::string tunnelSimpleFrame(TunnelOp op, uint32_t stream, std::string_view reason = {});

Result<TunnelOpen> tunnelOpenFromPayload(std::string_view payload);
// The credit of a decoded WINDOW frame (its payload is checked by decodeTunnelFrame).
uint32_t tunnelWindowCredit(const TunnelFrame& frame);

}  // namespace allot::model
