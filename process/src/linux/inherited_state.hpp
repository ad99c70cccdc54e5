// What a child inherits from the host process that the spawn server cannot pass along (internal; Linux).
//
// An agent started through the spawn server is a grandchild of the server, which was started once, earlier: it
// inherits the server's umask, resource limits, credentials, capabilities, seccomp filters, cgroup and OOM score
// adjustment as they were then, not the host's at the spawn. A host that changed any of them since (a umask or
// RLIMIT_NOFILE set after prestart_spawn_server(), a seccomp filter added, the host moved to another cgroup) would
// otherwise see its agents escape the change. So the host records this snapshot when it starts the server and
// compares it at each request; on a difference the server is replaced and that spawn starts its own reaper.
//
// Per-thread scheduling (nice value, CPU affinity, policy) is left out on purpose: threads of one host may differ,
// and a snapshot of one thread would then restart the server at every spawn from another.
#pragma once

#include <string>
#include <string_view>

namespace agenthost::process::detail {

/// The process-wide attributes a child inherits (see above), as one comparable string: every resource limit, and the
/// `Umask`, `Uid`, `Gid`, `Groups`, `NoNewPrivs`, `Seccomp*` and `Cap*` lines of the calling thread's
/// /proc/<pid>/task/<tid>/status, /proc/self/cgroup and /proc/self/oom_score_adj. What cannot be read is left out
/// (the same on both sides of a comparison). Costs three small /proc reads (~10–20 µs). Thread-safe; may throw
/// std::bad_alloc.
std::string inherited_state();

/// The name of the first attribute in which two snapshots differ ("umask", "RLIMIT_NOFILE", "cgroup", …), or empty
/// when they are equal. For the log line that says why the server was replaced.
std::string first_difference(std::string_view a, std::string_view b);

}  // namespace agenthost::process::detail
