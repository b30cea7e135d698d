#pragma once
// Logging: spdlog with one default logger per process. Structured fields go in as key=value
// pairs in the message so that logs stay greppable. Never log a token or password.

#include <spdlog/formatter.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace allot {

// The records' layout: "<time> <level> <process>: <message>", or with json one object per line.
// Either way the message is escaped so that a record is one line (and valid JSON): control
// characters, and in JSON quotes and backslashes, never reach the log as they are.
std::unique_ptr<spdlog::formatter> logFormatter(bool json);

// level: trace|debug|info|warn|error; json=true writes one JSON object per line.
void setupLogging(const std::string& processName, const std::string& level, bool json = false);

// Warnings about what others send or do (an agent's refused messages, a client over the
// connection limits): at most one each 10 s, each cut to 512 bytes and prefixed, saying how many
// were held back before it. Whoever causes them must not fill the log, and the disk, with them.
class ThrottledWarnings {
 public:
  explicit ThrottledWarnings(std::string prefix) : prefix_(std::move(prefix)) {}

  template <typename... Args>
  void warn(fmt::format_string<Args...> format, Args&&... args) {
    if (!due()) return;
    emit(fmt::format(format, std::forward<Args>(args)...));
  }

 private:
  bool due();  // counts the warning as held back when it is not
  void emit(std::string text);

  std::string prefix_;
  bool logged_ = false;
  std::chrono::steady_clock::time_point last_;
  uint64_t held_ = 0;
};

}  // namespace allot
