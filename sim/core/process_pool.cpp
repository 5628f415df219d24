#include "core/process_pool.hpp"

#include "core/input_error.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <iostream>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ; // NOLINT: POSIX

namespace sim::core {
namespace fs = std::filesystem;

bool ProcessPool::start(int id, const Command& c)
{
  if (c.self && in_process_)
    return fork_in_process(id, c);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, c.stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&files, STDERR_FILENO, c.stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv;
  for (const auto& a : c.argv)
    argv.push_back(const_cast<char*>(a.c_str())); // NOLINT: posix_spawn's signature
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &files, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  if (rc != 0)
    return false;
  running_[pid] = id;
  return true;
}

bool ProcessPool::fork_in_process(int id, const Command& c)
{
  // What this process has buffered is its own: written out before the child gets a copy of the buffers.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0)
    return false;
  if (pid > 0) {
    running_[pid] = id;
    return true;
  }
  // The child: its output where the command's goes, the signals' default actions (an exec would have reset the
  // parent's handlers), the command line run as `main` runs it, and out without the parent's exit handlers.
  const int out = open(c.stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = open(c.stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out < 0 || err < 0 || dup2(out, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0)
    _exit(127);
  close(out);
  close(err);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  int status = 3;
  try {
    status = in_process_(std::vector<std::string>(c.argv.begin() + 1, c.argv.end()));
  } catch (...) { // NOLINT(bugprone-empty-catch): an internal error, its status 3
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  _exit(status);
}

std::optional<std::pair<int, int>> ProcessPool::wait_any()
{
  while (!running_.empty()) {
    int raw = 0;
    const pid_t done = waitpid(-1, &raw, 0);
    if (done < 0) {
      if (errno != EINTR)
        return std::nullopt;
      if (!stopped_ && stop_ && stop_()) {
        stopped_ = true;
        terminate_all();
      }
      continue;
    }
    const auto it = running_.find(done);
    if (it == running_.end())
      continue;
    const int id = it->second;
    running_.erase(it);
    return std::make_pair(id, WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw));
  }
  return std::nullopt;
}

void ProcessPool::terminate_all() const
{
  for (const auto& [pid, id] : running_)
    kill(pid, SIGTERM);
}

std::vector<int> run_commands(const std::vector<Command>& commands, int parallel, const InProcess& in_process)
{
  std::vector<int> status(commands.size(), -1);
  ProcessPool pool(parallel, in_process);
  std::size_t next = 0;
  while (next < commands.size() || pool.busy()) {
    while (pool.has_room() && next < commands.size()) {
      pool.start(static_cast<int>(next), commands[next]);
      ++next;
    }
    if (const auto done = pool.wait_any())
      status[static_cast<std::size_t>(done->first)] = done->second;
    else if (next >= commands.size())
      break;
  }
  return status;
}

fs::path self_path()
{
  return fs::read_symlink("/proc/self/exe");
}

WorkDir::WorkDir(const fs::path& keep, const std::string& prefix)
{
  if (!keep.empty()) {
    fs::create_directories(keep);
    path_ = keep;
    return;
  }
  std::string pattern = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (!mkdtemp(pattern.data()))
    throw core::InputError(core::Location{pattern, "", ""}, "cannot create a temporary folder", "", "a writable /tmp");
  path_ = pattern;
  temporary_ = true;
}

WorkDir::~WorkDir()
{
  std::error_code ec;
  if (temporary_)
    fs::remove_all(path_, ec);
}

std::string read_text(const fs::path& path)
{
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string first_line(const std::string& text)
{
  const auto end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

std::string file_stem(const std::string& name)
{
  std::string s = name;
  for (char& ch : s)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_'))
      ch = '_';
  return s;
}

} // namespace sim::core
