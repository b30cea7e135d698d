#include "common/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <string_view>

#include "common/hex.h"
#include "common/utf8.h"

namespace allot {
namespace {

// The message, escaped so that one record stays one line and, in JSON, one valid string: much of
// what allotd logs was written by others (an agent's report, a user name typed at a login), and a
// newline or a quote in it would otherwise forge records of its own.
class EscapedMessage : public spdlog::custom_flag_formatter {
 public:
  explicit EscapedMessage(bool json) : json_(json) {}

  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    for (char ch : msg.payload) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == '\t' && !json_) {  // a tab forges nothing in a line of text
        dest.push_back(ch);
        continue;
      }
      const char* named = nullptr;
      if (c == '\n') named = "\\n";
      if (c == '\r') named = "\\r";
      if (c == '\t') named = "\\t";
      if (json_ && c == '"') named = "\\\"";
      if (json_ && c == '\\') named = "\\\\";
      if (named) {
        dest.append(named, named + std::char_traits<char>::length(named));
      } else if (c < 0x20 || c == 0x7f) {
        // JSON spells a control character \u00XX; text \xXX, as the CLI shows one.
        const std::string_view prefix = json_ ? "\\u00" : "\\x";
        dest.append(prefix.data(), prefix.data() + prefix.size());
        appendHexByte(dest, c);
      } else {
        dest.push_back(ch);
      }
    }
  }

  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<EscapedMessage>(json_);
  }

 private:
  bool json_;
};

}  // namespace

std::unique_ptr<spdlog::formatter> logFormatter(bool json) {
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  formatter->add_flag<EscapedMessage>('*', json);
  formatter->set_pattern(
      json ? R"({"ts":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","proc":"%n","msg":"%*"})"
           : "%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ %n: %*");
  return formatter;
}

bool ThrottledWarnings::due() {
  const auto now = std::chrono::steady_clock::now();
  if (logged_ && now - last_ < std::chrono::seconds(10)) {
    ++held_;
    return false;
  }
  logged_ = true;
  last_ = now;
  return true;
}

void ThrottledWarnings::emit(std::string text) {
  if (text.size() > 512) text = cutUtf8(text, 512) + "...";
  if (held_ > 0) text += " (and " + std::to_string(held_) + " more not logged before it)";
  held_ = 0;
  spdlog::warn("{}{}", prefix_, text);
}

void setupLogging(const std::string& processName, const std::string& level, bool json) {
  auto logger = spdlog::stderr_color_mt(processName);
  logger->set_formatter(logFormatter(json));
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

}  // namespace allot
