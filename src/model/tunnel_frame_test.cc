#include "model/tunnel_frame.h"

#include <gtest/gtest.h>

#include "model/agent_protocol.h"

namespace allot::model {
namespace {

TEST(TunnelFrame, RoundTripsEveryOp) {
  for (uint8_t op = 1; op <= 7; ++op) {
    TunnelFrame f;
    f.op = static_cast<TunnelOp>(op);
    f.stream = 0xA1B2C3D4;
    f.payload = f.op == TunnelOp::kWindow ? std::string("\x00\x04\x00\x00", 4) : "payload";
    std::string wire = encodeTunnelFrame(f);
    EXPECT_EQ(wire[0], '\x01');
    EXPECT_EQ(static_cast<uint8_t>(wire[1]), op);
    EXPECT_EQ(wire.substr(2, 4), std::string("\xA1\xB2\xC3\xD4", 4));  // big-endian
    auto back = decodeTunnelFrame(wire);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->op, f.op);
    EXPECT_EQ(back->stream, f.stream);
    EXPECT_EQ(back->payload, f.payload);
  }
}

TEST(TunnelFrame, OpenWindowAndDataHelpers) {
  auto open = decodeTunnelFrame(tunnelOpenFrame(7, {42, "jupyter"}));
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(open->op, TunnelOp::kOpen);
  auto o = tunnelOpenFromPayload(open->payload);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->session, 42);
  EXPECT_EQ(o->target, "jupyter");
  EXPECT_FALSE(tunnelOpenFromPayload(R"({"session":"x","target":"ssh"})").ok());
  EXPECT_FALSE(tunnelOpenFromPayload("not json").ok());

  auto w = decodeTunnelFrame(tunnelWindowFrame(3, 262144));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(tunnelWindowCredit(*w), 262144u);

  std::string bytes(kMaxTunnelData, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 31);
  auto d = decodeTunnelFrame(tunnelDataFrame(9, bytes));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->payload, bytes);
}

TEST(TunnelFrame, RejectsShortFrames) {
  for (size_t n = 0; n < kTunnelHeader; ++n) {
    EXPECT_FALSE(decodeTunnelFrame(std::string("\x01\x04\x00\x00\x00\x01", n)).ok()) << n;
  }
  EXPECT_TRUE(decodeTunnelFrame(std::string("\x01\x04\x00\x00\x00\x01", 6)).ok());
}

TEST(TunnelFrame, RejectsOversizePayloads) {
  auto data = decodeTunnelFrame(tunnelDataFrame(1, std::string(kMaxTunnelData + 1, 'x')));
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), Code::kTooLarge);
  EXPECT_FALSE(decodeTunnelFrame(tunnelSimpleFrame(TunnelOp::kReset, 1,
                                                   std::string(kMaxTunnelControlPayload + 1, 'r')))
                   .ok());
  EXPECT_FALSE(decodeTunnelFrame(tunnelSimpleFrame(TunnelOp::kWindow, 1, "abc")).ok());
}

TEST(TunnelFrame, RejectsUnknownOps) {
  EXPECT_FALSE(decodeTunnelFrame(std::string("\x01\x00\x00\x00\x00\x01", 6)).ok());
  EXPECT_FALSE(decodeTunnelFrame(std::string("\x01\x08\x00\x00\x00\x01", 6)).ok());
  EXPECT_FALSE(decodeTunnelFrame(std::string("\x01\xff\x00\x00\x00\x01", 6)).ok());
}

TEST(TunnelFrame, LogChunksAreNeverTunnelFrames) {
  std::string chunk = encodeLogChunk({12, 0, "\x01\x04 output"});
  EXPECT_EQ(chunk[0], '{');
  EXPECT_FALSE(isTunnelFrame(chunk));
  EXPECT_FALSE(decodeTunnelFrame(chunk).ok());
  EXPECT_FALSE(isTunnelFrame(""));
  EXPECT_TRUE(isTunnelFrame(tunnelDataFrame(1, "x")));
}

}  // namespace
}  // namespace allot::model
