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
  bool self = false; // argv[0] is the running binary: a fork of this process may run it (InProcess)
};

// Runs the running binary's own command line (its arguments after argv[0]) in this process, as `main` would: its exit
// status. Given one, a pool forks for a command of its own binary instead of starting it afresh, which saves the
// dynamic linking and static set-up of SimGrid's libraries (70 ms a child on this project's machines, more than many
// simulations take). Each child is still a process of its own: one SimGrid engine each, as SimGrid needs.
using InProcess = std::function<int(const std::vector<std::string>& args)>;

class ProcessPool {
 public:
  explicit ProcessPool(int parallel, InProcess in_process = {})
      : parallel_(parallel < 1 ? 1 : parallel), in_process_(std::move(in_process))
  {}

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
  bool fork_in_process(int id, const Command& command);

  int parallel_;
  InProcess in_process_;
  std::map<pid_t, int> running_;
  std::function<bool()> stop_;
  bool stopped_ = false;
};

// Runs the commands, at most `parallel` at a time; their exit statuses in order (-1: could not start).
std::vector<int> run_commands(const std::vector<Command>& commands, int parallel, const InProcess& in_process = {});

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
