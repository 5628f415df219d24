// Child processes, a few at a time: simtrain runs one simulation per process (SimGrid allows one engine per
// process), so validations, sweeps and comparisons run simtrain itself side by side.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace sim::core {

// A command line and where its output goes.
struct Command {
  std::vector<std::string> argv; // argv[0]: the program's path
  std::filesystem::path stdout_file;
  std::filesystem::path stderr_file;
};

class ProcessPool {
 public:
  explicit ProcessPool(int parallel) : parallel_(parallel < 1 ? 1 : parallel) {}

  bool has_room() const { return static_cast<int>(running_.size()) < parallel_; }
  bool busy() const { return !running_.empty(); }
  // Starts `command` as job `id`; false when it could not start.
  bool start(int id, const Command& command);
  // Waits for a job to end: its id and exit status (128 + signal when killed); nothing when none is running.
  std::optional<std::pair<int, int>> wait_any();
  // Sends SIGTERM to every job running (wait_any still reaps them).
  void terminate_all() const;
  // Where a signal interrupts wait_any and `stop` says so, the jobs running are sent SIGTERM (once).
  void stop_on_signal(std::function<bool()> stop) { stop_ = std::move(stop); }

 private:
  int parallel_;
  std::map<pid_t, int> running_;
  std::function<bool()> stop_;
  bool stopped_ = false;
};

// Runs the commands, at most `parallel` at a time; their exit statuses in order (-1: could not start).
std::vector<int> run_commands(const std::vector<Command>& commands, int parallel);

// The running simtrain binary.
std::filesystem::path self_path();

// A folder for child outputs: `keep` when given (created), else a fresh temporary one removed at the end.
class WorkDir {
 public:
  explicit WorkDir(const std::filesystem::path& keep, const std::string& prefix);
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  ~WorkDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  bool temporary_ = false;
};

std::string read_text(const std::filesystem::path& path);
std::string first_line(const std::string& text);
// A file name for a run: anything but letters, digits, '.', '-' and '_' replaced by '_'.
std::string file_stem(const std::string& name);

} // namespace sim::core
