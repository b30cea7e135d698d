#include "common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace allot {

void setupLogging(const std::string& processName, const std::string& level, bool json) {
  auto logger = spdlog::stderr_color_mt(processName);
  if (json) {
    logger->set_pattern(R"({"ts":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","proc":"%n","msg":"%v"})",
                        spdlog::pattern_time_type::utc);
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ %n: %v", spdlog::pattern_time_type::utc);
  }
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

}  // namespace allot
