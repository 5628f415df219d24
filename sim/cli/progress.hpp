// Progress of a long command on stderr: redrawn in place on a terminal, a line every 10 s otherwise (a JSON object
// with --log-format json), nothing with --quiet or before `after_s` (a quick run stays silent).
#pragma once

#include <string>

namespace sim::cli {

// 42s, 3m05s, 1h02m
std::string clock(double seconds);
// `done` of `total` as a bar `width` characters wide: [######..................]
std::string bar(double done, double total, int width = 24);

// Seconds a run waits before it shows its progress: SIMTRAIN_PROGRESS_AFTER when set (0: at once), else 3.
double progress_delay_s();

class ProgressLine {
 public:
  explicit ProgressLine(bool quiet = false, double after_s = 0);
  // `text` at `elapsed_s` since the command started; `finished` ends a redrawn line.
  void show(const std::string& text, double elapsed_s, bool finished);

 private:
  bool quiet_;
  double after_s_;
  bool tty_;
  bool shown_ = false;
  bool done_ = false;
  double last_s_ = -1e9;
};

} // namespace sim::cli
