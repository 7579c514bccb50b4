// Logging through spdlog (host code only; never in .cu files).
#pragma once

#include <spdlog/spdlog.h>

namespace frugal {
// Sets the level from a name ("trace".."off"); logs go to stderr.
void init_logging(const std::string& level);
}  // namespace frugal

#define FRUGAL_LOG_DEBUG(...) SPDLOG_DEBUG(__VA_ARGS__)
#define FRUGAL_LOG_INFO(...) SPDLOG_INFO(__VA_ARGS__)
#define FRUGAL_LOG_WARN(...) SPDLOG_WARN(__VA_ARGS__)
#define FRUGAL_LOG_ERROR(...) SPDLOG_ERROR(__VA_ARGS__)
