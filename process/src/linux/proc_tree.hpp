// Process-tree discovery from /proc (internal; Linux). Used by the reaper helper (where, as a subreaper, a parent-link
// walk is complete) and by the session-containment fallback (where it is best effort).
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace agenthost::process::detail {

struct proc_entry {
  int pid = 0;
  int ppid = 0;
  int pgid = 0;
  int sid = 0;
  char state = '?';              // R, S, D, Z, T, …
  std::uint64_t start_time = 0;  // field 22, clock ticks since boot: with the pid, identifies a process
  int threads = 0;               // field 20 (num_threads)
};

/// Whether `e` still runs something. /proc shows the state of the main thread: a process whose main thread ended
/// (pthread_exit) while others run is listed as a zombie with more than one thread, and it must still be killed.
inline bool is_alive(const proc_entry& e) noexcept { return e.state != 'X' && (e.state != 'Z' || e.threads > 1); }

/// Every process visible in /proc (races with exits are tolerated: vanished entries are skipped). `*complete` (when
/// given) is set false when the scan may have missed processes that exist: /proc could not be listed, or a process's
/// stat could not be opened for want of a resource (EMFILE, ENFILE, ENOMEM) rather than because it exited. Such a
/// scan proves nothing gone.
std::vector<proc_entry> scan_processes(bool* complete = nullptr);

/// Reads /proc/<pid>/stat; false when the process is gone.
bool read_proc_entry(int pid, proc_entry& out);

/// Live (is_alive) processes reachable from `roots` by parent links (roots included; a root whose start_time is
/// non-zero must still have that start time, else its pid was recycled), plus — when session_id > 0 — every process
/// of that session and its descendants. `exclude` (e.g. the caller itself) is never part of the result. One pass
/// over `all`: O(processes), whatever the number of roots.
std::vector<proc_entry> collect_tree(const std::vector<proc_entry>& all, const std::vector<proc_entry>& roots,
                                     int session_id, int exclude);

/// Live (is_alive) members of the tree: descendants of `root` by parent links (root excluded unless
/// `include_root`), plus — when session_id > 0 — every process of that session and the descendants of those.
std::vector<proc_entry> tree_members(const std::vector<proc_entry>& all, int root, bool include_root, int session_id);

/// Live processes among `all` whose environment has the entry NAME of `needle` ("NAME=value") with `value` among its
/// ':'-separated values (an agent started by an agent carries its own tree token and those of the hosts above it in
/// one entry). Catches members that left the session and lost their parent links (double-forked daemons); processes
/// of other users that we may not read, and processes that replaced their environment, are not found.
std::vector<proc_entry> processes_with_env(const std::vector<proc_entry>& all, std::string_view needle);

/// pidfd_open / pidfd_send_signal through syscall(2): glibc 2.36's <sys/pidfd.h> lacks C++ linkage guards.
int pidfd_open(int pid) noexcept;
int pidfd_send_signal(int pidfd, int sig) noexcept;

/// poll(POLLIN) on `fd` for at most `timeout`, retrying on EINTR: true when readable or hung up (for a pidfd: the
/// process has exited). A timeout of 0 only looks.
bool poll_readable(int fd, std::chrono::milliseconds timeout) noexcept;

/// SIGKILL through `pidfd`, then waitid(P_PIDFD, WEXITED) until it is reaped: blocks only as long as the kernel takes
/// to end the process (SIGKILL cannot be caught or blocked). For our own child; ECHILD (the kernel reaped it: the host
/// ignores SIGCHLD) ends the wait too.
void kill_and_reap(int pidfd) noexcept;

/// Signal `e` safely: open a pidfd, re-check that /proc still shows the same process (start time), then signal
/// through the pidfd — so a recycled PID never receives it. Returns false when the process is gone (a zombie too).
bool signal_process(const proc_entry& e, int sig) noexcept;

}  // namespace agenthost::process::detail
