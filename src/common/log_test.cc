// Log records stay one line each, and valid JSON with --log-json, whatever a message holds: much
// of it comes from others (an agent's report, a name typed at a login).

#include "common/log.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

namespace allot {
namespace {

std::string formatted(bool json, std::string_view message) {
  spdlog::details::log_msg msg("allotd", spdlog::level::warn, message);
  spdlog::memory_buf_t out;
  logFormatter(json)->format(msg, out);
  return std::string(out.data(), out.size());
}

// Attack: a hostile agent's message type, or a user name, carrying a forged record.
constexpr std::string_view kForged =
    "agent gpu-1: message refused: x\",\"level\":\"error\",\"msg\":\"host joined\n"
    "2026-01-01T00:00:00.000Z info allotd: admin logged in\x1b[2K\\";

TEST(LogTest, AJsonRecordIsOneObjectHoldingTheMessageAsSent) {
  const std::string line = formatted(true, kForged);
  ASSERT_EQ(line.find('\n'), line.size() - 1) << line;
  const auto record = nlohmann::json::parse(line);
  EXPECT_EQ(record["msg"], std::string(kForged));
  EXPECT_EQ(record["level"], "warning");
  EXPECT_EQ(record.size(), 4u) << "no field added by the message";
}

TEST(LogTest, ATextRecordIsOneLineWithControlCharactersShown) {
  const std::string line = formatted(false, kForged);
  ASSERT_EQ(line.find('\n'), line.size() - 1) << line;
  EXPECT_EQ(line.find('\x1b'), std::string::npos);
  EXPECT_NE(line.find("host joined\\n2026-01-01"), std::string::npos) << line;
  EXPECT_NE(line.find("logged in\\x1b[2K\\"), std::string::npos) << line;
}

// Attack: a flood of refusals (an agent's bad frames, a client over the connection limits) with
// huge texts. One warning is written, cut to 512 bytes; those right after it are held back.
TEST(LogTest, ThrottledWarningsWriteOneCutWarningAndHoldBackTheRest) {
  std::ostringstream written;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(written);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
  ThrottledWarnings refusals("agent gpu-1: ");
  for (int i = 0; i < 1000; ++i) refusals.warn("refused: {}", std::string(1 << 20, 'x'));
  spdlog::set_default_logger(previous);
  const std::string out = written.str();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one line";
  EXPECT_NE(out.find("agent gpu-1: refused: xxx"), std::string::npos);
  EXPECT_LT(out.size(), 700u);
}

}  // namespace
}  // namespace allot
