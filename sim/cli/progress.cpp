#include "cli/progress.hpp"

#include "core/diagnostics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <iostream>
#include <unistd.h>

namespace sim::cli {

std::string clock(double seconds)
{
  const long s = std::lround(seconds);
  if (s < 60)
    return fmt::format("{}s", s);
  if (s < 3600)
    return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}h{:02d}m", s / 3600, s % 3600 / 60);
}

std::string bar(double done, double total, int width)
{
  const int filled = total > 0 ? std::clamp(static_cast<int>(width * done / total), 0, width) : 0;
  return "[" + std::string(static_cast<std::size_t>(filled), '#') +
         std::string(static_cast<std::size_t>(width - filled), '.') + "]";
}

double progress_delay_s()
{
  if (const char* text = std::getenv("SIMTRAIN_PROGRESS_AFTER")) {
    char* end = nullptr;
    const double v = std::strtod(text, &end);
    if (end != text && v >= 0)
      return v;
  }
  return 3.0;
}

ProgressLine::ProgressLine(bool quiet, double after_s)
    : quiet_(quiet), after_s_(after_s),
      tty_(isatty(STDERR_FILENO) != 0 && core::diagnostic_format() == core::DiagnosticFormat::TEXT)
{}

void ProgressLine::show(const std::string& text, double elapsed_s, bool finished)
{
  if (quiet_ || done_ || elapsed_s < after_s_)
    return;
  if (!tty_ && !finished && elapsed_s - last_s_ < 10.0)
    return;
  if (finished && !shown_ && !tty_) // a line-by-line log that showed nothing needs no last line either
    return;
  done_ = finished;
  shown_ = true;
  last_s_ = elapsed_s;
  if (tty_)
    std::cerr << "\r\033[K" << text << (finished ? "\n" : "") << std::flush;
  else
    core::diagnose("progress", text, text);
}

} // namespace sim::cli
