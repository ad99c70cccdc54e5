// Shared helpers for process-level tests: bounded io_context runs, liveness FIFOs, /proc scans for survivors.
#pragma once

#include <agenthost/process/child.hpp>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
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

/// Live processes (not zombies) whose environment contains `needle` ("NAME=value").
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
    if (close == std::string::npos || close + 2 >= line.size() || line[close + 2] == 'Z') continue;
    std::ifstream env("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    std::string item;
    while (std::getline(env, item, '\0')) {
      if (item == needle) {
        pids.push_back(static_cast<int>(pid));
        break;
      }
    }
  }
  ::closedir(d);
  return pids;
}

/// Our own children in state Z.
inline int zombie_children() {
  int n = 0;
  DIR* d = ::opendir("/proc");
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state = 0;
    long ppid = 0;
    rest >> state >> ppid;
    if (state == 'Z' && ppid == ::getpid()) ++n;
  }
  ::closedir(d);
  return n;
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

/// Kills (SIGKILL) whatever still carries the token, so one failing test cannot poison the next.
inline void kill_leftovers(const std::string& needle) {
  for (int pid : processes_with_env(needle)) ::kill(pid, SIGKILL);
}

}  // namespace agenthost::test
