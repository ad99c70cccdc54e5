#include "proc_tree.hpp"

#include "../detail/unique_fd.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <unordered_map>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace agenthost::process::detail {
namespace {

// A directory stream closed however its walk ends (the walks allocate: a std::bad_alloc must not leak it).
struct dir_closer {
  void operator()(DIR* d) const noexcept { ::closedir(d); }
};
using unique_dir = std::unique_ptr<DIR, dir_closer>;

}  // namespace

bool read_proc_entry(int pid, proc_entry& out) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  unique_fd fd{::open(path, O_RDONLY | O_CLOEXEC)};
  if (!fd) return false;
  char buf[1024];
  ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
  //  priority nice num_threads itrealvalue starttime …" — comm may contain spaces and parentheses: use the last ')'.
  const char* close = std::strrchr(buf, ')');
  if (close == nullptr || close[1] != ' ' || close[2] == '\0') return false;
  const char* p = close + 2;
  out.pid = pid;
  out.state = *p;
  p += 1;
  char* end = nullptr;
  long fields[18] = {};
  for (long& f : fields) {  // fields 4 … 21
    f = std::strtol(p, &end, 10);
    if (end == p) return false;
    p = end;
  }
  out.ppid = static_cast<int>(fields[0]);
  out.pgid = static_cast<int>(fields[1]);
  out.sid = static_cast<int>(fields[2]);
  out.threads = static_cast<int>(fields[16]);
  out.start_time = static_cast<std::uint64_t>(std::strtoull(p, &end, 10));  // field 22 (field 23 is vsize)
  return end != p;
}

std::vector<proc_entry> scan_processes(bool* complete) {
  std::vector<proc_entry> result;
  const auto missed = [&] {
    if (complete != nullptr) *complete = false;
  };
  if (complete != nullptr) *complete = true;
  const unique_dir dir{::opendir("/proc")};
  if (!dir) {
    missed();
    return result;
  }
  while (const dirent* d = ::readdir(dir.get())) {
    if (d->d_name[0] < '1' || d->d_name[0] > '9') continue;
    char* end = nullptr;
    const long pid = std::strtol(d->d_name, &end, 10);
    if (*end != '\0') continue;
    proc_entry e;
    errno = 0;
    if (read_proc_entry(static_cast<int>(pid), e)) {
      result.push_back(e);
    } else if (errno == EMFILE || errno == ENFILE || errno == ENOMEM) {
      missed();
    }
  }
  return result;
}

std::vector<proc_entry> collect_tree(const std::vector<proc_entry>& all, const std::vector<proc_entry>& roots,
                                     int session_id, int exclude) {
  std::unordered_map<int, std::size_t> index;
  std::unordered_multimap<int, std::size_t> children;  // ppid -> index
  index.reserve(all.size());
  children.reserve(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    index.emplace(all[i].pid, i);
    children.emplace(all[i].ppid, i);
  }
  std::vector<char> in(all.size(), 0);
  std::vector<std::size_t> stack;
  auto add = [&](std::size_t i) {
    if (in[i] || all[i].pid == exclude) return;
    in[i] = 1;
    stack.push_back(i);
  };
  for (const auto& r : roots) {
    auto it = index.find(r.pid);
    if (it == index.end()) continue;
    if (r.start_time != 0 && all[it->second].start_time != r.start_time) continue;  // recycled pid
    add(it->second);
  }
  if (session_id > 0)
    for (std::size_t i = 0; i < all.size(); ++i)
      if (all[i].sid == session_id) add(i);
  while (!stack.empty()) {
    const int parent = all[stack.back()].pid;
    stack.pop_back();
    auto [b, e] = children.equal_range(parent);
    for (auto it = b; it != e; ++it) add(it->second);
  }
  std::vector<proc_entry> members;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (in[i] && is_alive(all[i])) members.push_back(all[i]);
  return members;
}

std::vector<proc_entry> tree_members(const std::vector<proc_entry>& all, int root, bool include_root, int session_id) {
  proc_entry r;
  r.pid = root;
  auto members = collect_tree(all, {r}, session_id, -1);
  if (!include_root) std::erase_if(members, [root](const proc_entry& e) { return e.pid == root; });
  return members;
}

namespace {

// Whether the environment file at `path` holds the exact entry `needle`; `buf` is scratch space. Environments are
// small: a larger one is scanned up to the buffer's size.
bool environ_has(const char* path, std::string_view needle, std::vector<char>& buf) {
  unique_fd fd{::open(path, O_RDONLY | O_CLOEXEC)};
  if (!fd) return false;
  std::size_t have = 0;
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf.data() + have, buf.size() - have);
    if (n <= 0) break;
    have += static_cast<std::size_t>(n);
    if (have == buf.size()) break;
  }
  const auto eq = needle.find('=');
  const std::string_view prefix = needle.substr(0, eq + 1), value = needle.substr(eq + 1);
  std::string_view env(buf.data(), have);
  while (!env.empty()) {
    const auto end = env.find('\0');
    std::string_view entry = env.substr(0, end);
    if (entry.substr(0, prefix.size()) == prefix) {
      entry.remove_prefix(prefix.size());
      for (;;) {  // one of its ':'-separated values
        const auto colon = entry.find(':');
        if (entry.substr(0, colon) == value) return true;
        if (colon == std::string_view::npos) break;
        entry.remove_prefix(colon + 1);
      }
    }
    if (end == std::string_view::npos) break;
    env.remove_prefix(end + 1);
  }
  return false;
}

// The environment of a process whose main thread ended is no longer readable through /proc/<pid> (that thread has no
// memory map any more): read it through the threads that still run.
bool threads_environ_has(int pid, std::string_view needle, std::vector<char>& buf) {
  char path[96];
  std::snprintf(path, sizeof path, "/proc/%d/task", pid);
  const unique_dir dir{::opendir(path)};
  if (!dir) return false;
  while (const dirent* d = ::readdir(dir.get())) {
    if (d->d_name[0] < '1' || d->d_name[0] > '9') continue;
    std::snprintf(path, sizeof path, "/proc/%d/task/%.20s/environ", pid, d->d_name);
    if (environ_has(path, needle, buf)) return true;
  }
  return false;
}

}  // namespace

std::vector<proc_entry> processes_with_env(const std::vector<proc_entry>& all, std::string_view needle) {
  std::vector<proc_entry> found;
  std::vector<char> buf(64 * 1024);
  for (const auto& e : all) {
    if (!is_alive(e) || e.pid == ::getpid()) continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/environ", e.pid);
    if (e.state == 'Z' ? threads_environ_has(e.pid, needle, buf) : environ_has(path, needle, buf)) found.push_back(e);
  }
  return found;
}

int pidfd_open(int pid) noexcept { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

int pidfd_send_signal(int pidfd, int sig) noexcept {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

bool poll_readable(int fd, std::chrono::milliseconds timeout) noexcept {
  using clock_type = std::chrono::steady_clock;
  pollfd p{fd, POLLIN, 0};
  // poll() takes an int of milliseconds (~24.8 days): a longer wait (a caller's "forever") is that long, and the sum
  // below cannot overflow.
  timeout = std::min(timeout, std::chrono::milliseconds{std::numeric_limits<int>::max()});
  const auto deadline = clock_type::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    const int n = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

void kill_and_reap(int pidfd) noexcept {
  pidfd_send_signal(pidfd, SIGKILL);
  siginfo_t info{};
  while (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED) != 0 && errno == EINTR) {
  }
}

bool signal_process(const proc_entry& e, int sig) noexcept {
  unique_fd pidfd{pidfd_open(e.pid)};
  if (!pidfd) {
    if (errno == ESRCH) return false;
    // No pidfd support (seccomp, old kernel): plain kill after the identity check below is the best we can do.
    proc_entry now;
    if (!read_proc_entry(e.pid, now) || now.start_time != e.start_time || !is_alive(now)) return false;
    return ::kill(e.pid, sig) == 0;
  }
  // A recycled pid has another start time; a zombie (its parent has not reaped it yet) accepts signals but is gone.
  proc_entry now;
  if (!read_proc_entry(e.pid, now) || now.start_time != e.start_time || !is_alive(now)) return false;
  return pidfd_send_signal(pidfd.get(), sig) == 0;
}

}  // namespace agenthost::process::detail
