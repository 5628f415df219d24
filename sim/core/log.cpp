#include "core/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace sim::core {

std::shared_ptr<spdlog::logger> logger(const std::string& module)
{
  if (auto existing = spdlog::get(module))
    return existing;
  auto created = spdlog::stderr_color_mt(module);
  created->set_pattern("[%n] %l: %v");
  created->set_level(spdlog::get_level());
  return created;
}

void set_log_level(const std::string& level)
{
  spdlog::set_level(spdlog::level::from_str(level));
}

} // namespace sim::core
