// What a child inherits from the host that the spawn server cannot pass along (internal; Linux).
//
// An agent started through the spawn server is a grandchild of the server, which was started once, earlier: it
// inherits the server's umask, resource limits, credentials, capabilities, seccomp filters, cgroup and OOM score
// adjustment as they were then, not the host's at the spawn. A host that changed any of them since (a umask or
// RLIMIT_NOFILE set after prestart_spawn_server(), a seccomp filter added, the host moved to another cgroup) would
// otherwise see its agents escape the change. So the host records this snapshot when it starts the server and
// compares it at each request.
//
// Two parts. Process-wide attributes (resource limits, umask, real/effective/saved ids, supplementary groups, cgroup,
// OOM score adjustment): a difference means the host changed, and the server is replaced. Per-thread ones
// (capability sets, no_new_privs, seccomp, the fs ids — a host's threads may legitimately differ in them): a
// difference means only that this spawning thread differs from the one that started the server, so this spawn starts
// its own reaper and the server stays. Scheduling (nice value, CPU affinity, policy) is left out: threads commonly
// differ there, and the server path would then never be used from most of them.
#pragma once

#include <string>
#include <string_view>

namespace agenthost::process::detail {

struct inherited_snapshot {
  /// "name=value\n" entries; empty when something could not be read (then nothing is concluded from it).
  std::string process_wide;
  std::string per_thread;
};

/// The calling thread's snapshot: every resource limit; from /proc/thread-self/status the `Umask`, `Uid`, `Gid`
/// (real, effective, saved; the fs id goes to the per-thread part), `Groups`, `NoNewPrivs`, `Seccomp*` and `Cap*`
/// lines; /proc/self/cgroup; /proc/self/oom_score_adj. ~30 µs (three small /proc reads). Kernels before 4.7 have no
/// `Umask` line: the umask is then not compared. Thread-safe; may throw std::bad_alloc.
inherited_snapshot inherited_state();

/// The name of the first entry in which two parts differ ("umask", "RLIMIT_NOFILE", "cgroup", …), or empty when they
/// are equal or either is empty (unknown). For the log line that says why the server was not used.
std::string first_difference(std::string_view a, std::string_view b);

}  // namespace agenthost::process::detail
