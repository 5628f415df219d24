// Named loggers, one per module, writing to stderr. Results never go through logs; they go to reports.
#pragma once

#include <memory>
#include <spdlog/spdlog.h>
#include <string>

namespace sim::core {

std::shared_ptr<spdlog::logger> logger(const std::string& module);

// Applies to every logger, present and future: "trace", "debug", "info", "warn", "error", "off".
void set_log_level(const std::string& level);

} // namespace sim::core
