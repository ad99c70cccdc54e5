// Shared helpers for process-level tests: bounded io_context runs, liveness FIFOs, /proc scans for survivors.
#pragma once

#include <agenthost/process/child.hpp>
#include <agenthost/process/spawn_server.hpp>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace agenthost::test {

namespace asio = boost::asio;
using namespace std::chrono_literals;

/// Runs `io` until `done()` or `timeout`; returns done().
inline bool run_until(asio::io_context& io, const std::function<bool()>& done,
                      std::chrono::milliseconds timeout = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (io.stopped()) io.restart();
    io.run_one_for(10ms);
  }
  return true;
}

inline std::string random_token() {
  std::random_device rd;
  std::ostringstream s;
  s << std::hex << rd() << rd();
  return s.str();
}

/// Whether `environ_path` (a /proc/.../environ file) holds the entry `needle`.
inline bool environ_has(const std::string& environ_path, const std::string& needle) {
  std::ifstream env(environ_path, std::ios::binary);
  std::string item;
  while (std::getline(env, item, '\0'))
    if (item == needle) return true;
  return false;
}

/// Live processes whose environment contains `needle` ("NAME=value"). A process whose main thread ended while others
/// run is listed as a zombie with more than one thread: it counts (its environment is read through a live thread).
inline std::vector<int> processes_with_env(const std::string& needle) {
  std::vector<int> pids;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return pids;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == ::getpid()) continue;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    if (close == std::string::npos || close + 2 >= line.size()) continue;
    const std::string dir = "/proc/" + std::to_string(pid);
    if (line[close + 2] == 'Z') {
      std::istringstream rest(line.substr(close + 2));
      std::string field;
      for (int f = 3; f <= 20 && rest >> field; ++f) {
      }
      if (field == "1") continue;  // num_threads (field 20): a true zombie
      std::error_code ec;
      for (const auto& task : std::filesystem::directory_iterator(dir + "/task", ec))
        if (environ_has(task.path().string() + "/environ", needle)) {
          pids.push_back(static_cast<int>(pid));
          break;
        }
      continue;
    }
    if (environ_has(dir + "/environ", needle)) pids.push_back(static_cast<int>(pid));
  }
  ::closedir(d);
  return pids;
}

/// One process as /proc/<pid>/stat has it: its state letter and parent.
struct proc_stat {
  int pid = 0;
  char state = 0;
  long ppid = 0;
};

/// /proc/<pid>/stat's state and parent, or nullopt when there is no such process (gone, or reaped).
inline std::optional<proc_stat> read_proc_stat(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 2));
  proc_stat p{.pid = pid};
  rest >> p.state >> p.ppid;
  return p;
}

/// Every process in /proc (zombies included).
inline std::vector<proc_stat> all_processes() {
  std::vector<proc_stat> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    if (const auto p = read_proc_stat(static_cast<int>(pid))) out.push_back(*p);
  }
  ::closedir(d);
  return out;
}

/// Our own children in state Z.
inline int zombie_children() {
  int n = 0;
  for (const auto& p : all_processes())
    if (p.state == 'Z' && p.ppid == ::getpid()) ++n;
  return n;
}

/// Waits until this process's spawn server is up and ready. The first reaper-mode spawn of a process starts it on a
/// short-lived thread and returns before it runs: a test that counts descriptors calls this after its warm-up spawn,
/// so that the server's (and not the start's passing ones) are in its baseline.
inline void settle_spawn_server() {
  const auto r = process::prestart_spawn_server(AGENTHOST_REAPER);
  ASSERT_TRUE(r) << r.error().message;
}

inline int open_fd_count() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  while (const dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n - 1;  // the directory's own descriptor
}

/// A FIFO the fake agent opens (AGENTHOST_LIVENESS_FIFO) and every process of its tree inherits. EOF on our read end
/// (after the agent opened it — wait for its "ready" line first) means the whole tree is gone.
class liveness_fifo {
 public:
  liveness_fifo() {
    char tmpl[] = "/tmp/agenthost-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    path_ = dir_ + "/live";
    ::mkfifo(path_.c_str(), 0600);
    fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  }
  ~liveness_fifo() {
    ::close(fd_);
    std::filesystem::remove_all(dir_);
  }
  const std::string& path() const { return path_; }
  /// True when every writer closed within `timeout`.
  bool wait_eof(std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      char buf[64];
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n == 0) return true;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(left.count()));
    }
  }

 private:
  std::string dir_, path_;
  int fd_ = -1;
};

/// Reads stdout until a line equal to `want` (true) or EOF / timeout (false).
inline bool read_until_line(asio::io_context& io, process::child& c, std::string_view want,
                            std::chrono::milliseconds timeout = 20s) {
  bool found = false, eof = false;
  std::function<void()> next = [&] {
    c.async_read_lines([&](boost::system::error_code ec, process::line_batch b) {
      if (ec) {
        eof = true;
        return;
      }
      for (const auto& l : b) found = found || l.text == want;
      if (!found) next();
    });
  };
  next();
  return run_until(io, [&] { return found || eof; }, timeout) && found;
}

/// Reads `c` until its stdout ends (or a read fails), passing each read's lines to `on_batch`; runs `io` for up to
/// `timeout` and returns whether the end came.
inline bool read_to_end(asio::io_context& io, process::child& c,
                        const std::function<void(process::line_batch)>& on_batch,
                        std::chrono::milliseconds timeout = 20s) {
  bool ended = false;
  std::function<void()> next = [&] {
    c.async_read_lines([&](boost::system::error_code ec, process::line_batch b) {
      if (ec) {
        ended = true;
        return;
      }
      on_batch(b);
      next();
    });
  };
  next();
  return run_until(io, [&] { return ended; }, timeout);
}

/// This test binary re-executed as a test host that runs only the test `gtest_filter` (posix_spawn: no fork of this
/// process; its stdout to /dev/null), with AGENTHOST_HOST_DEATH_FIFO=`fifo`, AGENTHOST_HOST_DEATH_TOKEN=`token` and
/// AGENTHOST_HOST_DEATH_READY_FD=10, a pipe it writes to once its agent trees run. `pid` is 0 when it could not be
/// started; `ready` is what it wrote within 20 s (empty: nothing).
struct test_host {
  pid_t pid = 0;
  std::string ready;
};
inline test_host spawn_test_host(const std::string& gtest_filter, const std::string& fifo, const std::string& token) {
  test_host h;
  int ready_pipe[2];
  if (::pipe2(ready_pipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2 failed";
    return h;
  }
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  std::vector<std::string> args = {self, "--gtest_filter=" + gtest_filter, "--gtest_also_run_disabled_tests"};
  std::vector<std::string> env = {"AGENTHOST_HOST_DEATH_FIFO=" + fifo, "AGENTHOST_HOST_DEATH_TOKEN=" + token,
                                  "AGENTHOST_HOST_DEATH_READY_FD=10"};
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, ready_pipe[1], 10);  // clears close-on-exec on the copy
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  if (::posix_spawn(&h.pid, self.c_str(), &fa, nullptr, argv.data(), envp.data()) != 0) {
    ADD_FAILURE() << "posix_spawn of the test host failed";
    h.pid = 0;
  }
  posix_spawn_file_actions_destroy(&fa);
  ::close(ready_pipe[1]);
  char buf[32] = {};
  pollfd p{ready_pipe[0], POLLIN, 0};
  if (h.pid > 0 && ::poll(&p, 1, 20000) == 1) {
    const ssize_t n = ::read(ready_pipe[0], buf, sizeof buf - 1);
    if (n > 0) h.ready.assign(buf, static_cast<std::size_t>(n));
  }
  ::close(ready_pipe[0]);
  return h;
}

/// Bytes waiting in the pipe that is process `pid`'s stdout, as this process (its reader) sees them: the descriptor of
/// this process on the same pipe, then FIONREAD. -1 when there is none (no such process, stdout not a pipe, or no
/// descriptor of ours on it). For tests that must know that a read took a line out of the pipe.
inline int unread_pipe_bytes(int pid) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto theirs = fs::read_symlink("/proc/" + std::to_string(pid) + "/fd/1", ec);
  if (ec || theirs.string().rfind("pipe:", 0) != 0) return -1;
  for (const auto& e : fs::directory_iterator("/proc/self/fd", ec)) {
    std::error_code link_ec;
    if (fs::read_symlink(e.path(), link_ec) != theirs || link_ec) continue;
    const int fd = std::atoi(e.path().filename().c_str());
    int n = 0;
    // Our write end of the same pipe (if we kept one) would answer too, with the same count.
    if (::ioctl(fd, FIONREAD, &n) == 0) return n;
  }
  return -1;
}

/// How a program run by run_program ended, and what it printed on stdout.
struct program_result {
  int exit_code = -1;  // its exit code, or 128 + the signal that ended it
  std::string out;
};

/// Runs `argv` (argv[0] is the program's path; no shell, no PATH search) with exactly the environment `env`, stdin
/// opened from `stdin_file`, stdout a pipe read to its end, stderr /dev/null. `started(pid)` runs once it is spawned,
/// before its output is read; `on_output(out, pid)` after each read. A program silent for `silence_limit` is
/// SIGKILLed and the test fails, so a CLI that hangs cannot hang the test.
inline program_result run_program(std::vector<std::string> argv, std::vector<std::string> env,
                                  const std::string& stdin_file = "/dev/null",
                                  std::chrono::milliseconds silence_limit = std::chrono::seconds(30),
                                  const std::function<void(pid_t)>& started = {},
                                  const std::function<void(const std::string&, pid_t)>& on_output = {}) {
  program_result r;
  std::vector<char*> args, envp;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2 failed";
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, stdin_file.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  if (spawned != 0) {
    ADD_FAILURE() << "posix_spawn of " << argv[0] << " failed: " << std::strerror(spawned);
    ::close(out[0]);
    return r;
  }
  if (started) started(pid);
  char buf[65536];
  for (;;) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(silence_limit.count())) <= 0) {
      ADD_FAILURE() << argv[0] << " printed nothing for " << silence_limit.count() << " ms: killed";
      ::kill(pid, SIGKILL);
      break;
    }
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    r.out.append(buf, static_cast<std::size_t>(n));
    if (on_output) on_output(r.out, pid);
  }
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

/// Inside a test host started by spawn_test_host: its liveness FIFO, token and ready fd (nullopt in any other process).
struct test_host_setup {
  std::string fifo, token;
  int ready_fd = -1;
};
inline std::optional<test_host_setup> test_host_setup_from_env() {
  const char* fifo = std::getenv("AGENTHOST_HOST_DEATH_FIFO");
  const char* token = std::getenv("AGENTHOST_HOST_DEATH_TOKEN");
  const char* ready_fd = std::getenv("AGENTHOST_HOST_DEATH_READY_FD");
  if (fifo == nullptr || token == nullptr || ready_fd == nullptr) return std::nullopt;
  return test_host_setup{.fifo = fifo, .token = token, .ready_fd = std::atoi(ready_fd)};
}

/// The agent tree a test host starts (reaper containment): the fake agent ignoring every signal, with a setsid child
/// and a double-forked daemon, all carrying the token and the liveness FIFO; "ready" once the tree is in place.
inline process::spawn_options host_death_tree(const test_host_setup& h) {
  return {.executable = AGENTHOST_FAKE_AGENT,
          .args = {"ignore-all", "setsid-child", "double-fork-daemon", "ready", "never-exit"},
          .env = {.set = {{"AGENTHOST_TEST_TOKEN", h.token}, {"AGENTHOST_LIVENESS_FIFO", h.fifo}}},
          .containment = process::containment_kind::reaper,
          .reaper_path = AGENTHOST_REAPER};
}

/// Kills (SIGKILL) whatever still carries the token, so one failing test cannot poison the next.
inline void kill_leftovers(const std::string& needle) {
  for (int pid : processes_with_env(needle)) ::kill(pid, SIGKILL);
}

}  // namespace agenthost::test
