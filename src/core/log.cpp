#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace frugal {

void init_logging(const std::string& level) {
  static auto logger = spdlog::stderr_color_mt("frugal");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  spdlog::set_level(spdlog::level::from_str(level));
}

}  // namespace frugal
