// agenthost/process/options.hpp — what to spawn and how to stop it, as aggregates with defaults.
//
//   agenthost::process::spawn_options opts{
//       .executable = "pi", .args = {"--mode", "json", "-p", "hello"}, .stdin_mode = stdin_kind::null};
#pragma once

#include <agenthost/process/exit_status.hpp>
#include <agenthost/process/logger.hpp>

#include <chrono>
#include <csignal>
#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace agenthost::process {

/// The agent's environment: start from the host's (or from nothing), then remove, then set. The library adds one
/// entry of its own, AGENTHOST_TREE_TOKEN=<random id> (not a secret): when no reaper tracks the tree (session
/// containment, or a reaper that died), it is how a stop finds processes that lost every link to the agent. When the
/// environment has that variable already (the host itself runs under agenthost), its ids are kept in the same entry,
/// `<ids above>:<random id>`, first in the environment.
struct environment_options {
  /// Start from the host's environment. Default: true.
  bool inherit = true;
  /// When inheriting, keep only these variable names (an allow-list for hosts that must not leak secrets). Default:
  /// empty = keep everything.
  std::vector<std::string> allow{};
  /// Variables removed from the inherited environment. Default: none.
  std::vector<std::string> unset{};
  /// Variables set (overriding inherited ones). Default: none.
  std::map<std::string, std::string> set{};
};

/// What the agent's stdin is.
enum class stdin_kind {
  pipe,  ///< a socket we write to (writes never raise SIGPIPE; a gone reader is errc::stdin_closed)
  null,  ///< /dev/null (e.g. pi, which reads piped stdin to EOF before doing anything)
};

/// How the process tree is contained.
enum class containment_kind {
  /// Use the reaper helper when it can be found, else fall back to `session` (with a warning in the log).
  automatic,
  /// Run the agent under the agenthost-reaper helper: a PR_SET_CHILD_SUBREAPER process that adopts every descendant
  /// (setsid'd and double-forked ones included) and kills the whole tree when asked or when the host dies (even by
  /// SIGKILL). Spawning fails with errc::reaper_not_found when the helper is missing. Should the helper itself die
  /// (SIGKILL, OOM killer), the host tracks the tree as in `session` mode from then on (a warning in the log).
  reaper,
  /// No helper: the agent leads its own session; the tree is found by a /proc walk (session id, parent links).
  /// Daemons that setsid() after their parent exited can escape; stop() reports them as survivors.
  session,
};

struct spawn_options {
  /// Program to run: a path, or a bare name looked up in PATH (the agent's PATH if `env.set` overrides it). Required.
  std::filesystem::path executable{};
  /// Arguments after argv[0]; passed verbatim, never through a shell. Default: none.
  std::vector<std::string> args{};
  /// argv[0]; default: the executable as given.
  std::optional<std::string> argv0{};
  /// Working directory; must exist. Default: empty = the host's current directory.
  std::filesystem::path working_directory{};
  /// Environment. Default: inherit everything.
  environment_options env{};
  /// Default: pipe.
  stdin_kind stdin_mode = stdin_kind::pipe;
  /// Longest stdout line delivered; longer ones become an oversize event (head kept). Default: 64 MiB.
  std::size_t max_line_bytes = std::size_t{64} << 20;
  /// How much of a too-long line's beginning is kept for diagnostics. Default: 4 KiB.
  std::size_t oversize_head_bytes = std::size_t{4} << 10;
  /// Bytes of stdout read per system call, 1 B–1 GiB (otherwise spawning fails with errc::invalid_options). Default:
  /// 256 KiB.
  std::size_t read_chunk_bytes = std::size_t{256} << 10;
  /// Read coalescing for hosts of many agents. Default: 0 = off (stdout is read as soon as it is readable).
  /// When > 0, stdout is not watched by the io_context's reactor: while a read is pending, one poller per execution
  /// context looks at every such pipe once per interval (one poll() for all of them) and reads each ready pipe once.
  /// Trade-off: lines arrive up to one interval later (delay ≈ interval / 2 on average), but the host wakes up once per
  /// interval instead of once per agent write — e.g. 100 agents writing every millisecond: ~100,000 wake-ups/s off,
  /// 1/interval on. Children sharing a context are polled at the shortest interval among them. A read that fills the
  /// whole read chunk is followed at once by the next read, so bulk output is not throttled. stderr is unaffected.
  /// Children whose executor is the io_context's own (no strand), when it runs on one thread, are read by the poller
  /// itself: every ready pipe of a tick in one system call on Linux (io_uring; one read() each where the kernel or a
  /// seccomp profile forbids io_uring, or when the environment sets AGENTHOST_IO_URING=0).
  std::chrono::microseconds read_coalescing{0};
  /// How much of stderr's end is kept (stderr is drained continuously, whatever its volume). Default: 64 KiB.
  std::size_t stderr_tail_bytes = std::size_t{64} << 10;
  /// Default: automatic.
  containment_kind containment = containment_kind::automatic;
  /// Path of the agenthost-reaper helper. Default: empty = $AGENTHOST_REAPER, then the build tree's, then the
  /// installed one (<libexecdir>/agenthost/agenthost-reaper), then next to the running executable.
  std::filesystem::path reaper_path{};
  /// Reaper containment: start the agent's reaper through this process's spawn server — one long-lived
  /// `agenthost-reaper --server` that keeps a per-agent reaper fork()ed ahead of time, instead of the host exec'ing
  /// one (a faster spawn, the same containment: see README "The spawn server"). A spawn that finds no server (the
  /// first one, or the first after the server died) starts the agent and then exec's its reaper, which adopts it, and
  /// starts the server on a short-lived thread of its own (the spawn does not wait for the server's exec); a spawn
  /// whose server is still starting or cannot be used (another reaper_path) starts its agent the same way, and so does
  /// one after the host changed its umask, a resource limit, its credentials, capabilities, seccomp filters, cgroup or
  /// OOM score adjustment since the server started (the server is then replaced, so that agents get the host's current
  /// ones), or from a thread whose capabilities or seccomp filters differ from those of the thread that started the
  /// server. The nice value and CPU affinity are that thread's. false: every spawn
  /// starts its own reaper that way (and the agent inherits everything from the spawning thread). Default: true.
  bool reaper_server = true;
  /// How long destroying a still-running `child` may block while it kills the tree. Default: 2 s.
  std::chrono::milliseconds destroy_timeout{2000};
  /// Logging. Default: none.
  agenthost::logger log{};
};

/// Who receives the phase-1 signal.
enum class signal_target {
  leader,  ///< the agent process only
  group,   ///< the agent's process group (what Ctrl+C in a terminal does)
  tree,    ///< every process of the tree, including tool children in their own sessions
};

/// The three-phase stop, as data: interrupt → graceful wait → kill the whole tree → wait.
struct stop_policy {
  /// Phase 1: bytes written to stdin if it is a pipe and still open (Ctrl+C). Empty = write nothing. Default: "\x03".
  std::string interrupt_bytes = "\x03";
  /// Phase 1: signal sent; 0 = none. Default: SIGINT.
  int interrupt_signal = SIGINT;
  /// Phase 1: who gets the signal. Default: group.
  signal_target interrupt_target = signal_target::group;
  /// Also close stdin in phase 1 (EOF is how some agents notice they should stop). Default: false.
  bool close_stdin = false;
  /// Phase 2: how long the whole tree (not just the leader) gets to exit by itself. Default: 2 s.
  std::chrono::milliseconds graceful_wait{2000};
  /// Phase 3: after SIGKILL to every process of the tree, how long to wait for them to be gone. Default: 5 s.
  std::chrono::milliseconds kill_wait{5000};

  /// The default: "\x03" on stdin + SIGINT to the group.
  static stop_policy ctrl_c() { return {}; }
  /// SIGTERM to the leader, no stdin bytes (agents that clean up their tool children only on SIGTERM, e.g. pi).
  static stop_policy sigterm() {
    return {.interrupt_bytes = {}, .interrupt_signal = SIGTERM, .interrupt_target = signal_target::leader};
  }
  /// Straight to phase 3.
  static stop_policy kill_now() {
    return {.interrupt_bytes = {}, .interrupt_signal = 0, .graceful_wait = std::chrono::milliseconds{0}};
  }
};

/// The phase a stop ended in.
enum class stop_phase {
  already_gone,  ///< the tree was gone before the stop started
  interrupt,     ///< the tree exited during the graceful wait
  kill,          ///< the tree had to be killed
};

/// What a stop did. `survivors` is expected to be empty; when it is not, the stop completed with
/// errc::stop_incomplete and lists what is still alive. (Without a reaper, a stop whose /proc scans failed — the host
/// out of file descriptors — cannot prove the tree gone: errc::stop_incomplete, with the members it knew of that
/// still exist, possibly none.)
struct stop_report {
  stop_phase phase = stop_phase::already_gone;
  /// From the start of the stop to the tree being gone (or to giving up).
  std::chrono::nanoseconds elapsed{};
  /// From the start of the stop to the leader's exit (zero if it was already gone).
  std::chrono::nanoseconds leader_exit_after{};
  /// The leader's exit status, when known.
  std::optional<exit_status> leader_status{};
  /// PIDs of processes of the tree still alive when the stop gave up.
  std::vector<int> survivors{};
};

}  // namespace agenthost::process
