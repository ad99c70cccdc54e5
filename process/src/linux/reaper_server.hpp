// The per-process spawn server (internal; Linux): one long-lived `agenthost-reaper --server` per host process that
// keeps a per-agent reaper fork()ed ahead of time for the next reaper-mode spawn, instead of the host exec'ing one.
// Protocol: detail/reaper_protocol.hpp.
//
// Lifetime: started in the background by the first reaper-mode spawn (which starts the agent and its own reaper itself,
// see adopt_spawn.hpp, so the server's start-up is not on that spawn's path), and again by the spawn that found it
// dead (by its pidfd or a failed send); its socket and pidfd stay open until the host process exits — the server
// then reads EOF and exits, and every per-agent reaper reads EOF on its own control socket and kills its tree. A
// fork()ed host starts its own server.
#pragma once

#include "../posix/spawn.hpp"

#include <chrono>
#include <filesystem>
#include <string>

namespace agenthost::process::detail {

/// Sends one spawn request (executable, argv, envp, an absolute working_directory, the agent's stdio descriptors and
/// `request.fd3` = the per-agent control socket) to this process's spawn server running `reaper`. Returns 0 once the
/// request is queued (every answer then arrives on the control socket), else an errno and the caller starts a
/// per-agent reaper itself instead: ESRCH when no server runs (none was started yet, or it died — then it was reaped),
/// EINPROGRESS while the server is still starting (no idle reaper has said "ready" yet), ENOTSUP when the server
/// runs another reaper path. Never starts a server (see start_spawn_server). Thread-safe (one mutex around the check
/// and the send; the send is one SOCK_SEQPACKET packet, bounded by a 5 s send timeout). Never waits for the agent's
/// start. What a child inherits is compared with what the server inherited (inherited_state.hpp): when the host changed
/// (umask, a resource limit, ids, groups, cgroup, OOM score adjustment) the server is replaced — killed now, or once
/// the requests of other threads queued on it were taken — and ESRCH is returned; when only the calling thread
/// differs from the one that started the server (capabilities, seccomp, no_new_privs, fs ids),
/// spawn_server_thread_differs. `why`, when given, then says which attribute.
int send_spawn_request(const std::filesystem::path& reaper, const spawn_request& request, std::string* why = nullptr);

/// send_spawn_request(): the calling thread differs from the server in what a child inherits from it; this spawn
/// must start its own reaper, the server stays.
inline constexpr int spawn_server_thread_differs = -1;

/// Whether this process's spawn server runs and one of its idle reapers has said "ready" (reads the pending packets),
/// i.e. whether the next request is served rather than started on its own. For tests and benchmarks. Thread-safe.
bool spawn_server_ready();

/// Waits until this process's spawn server says "ready" (reading its packets), at most `timeout`. Returns 0, ESRCH
/// (no server of ours, or it died meanwhile), ETIMEDOUT, or another errno. Thread-safe; does not hold the server's
/// lock while waiting, so spawns meanwhile go on (they start their agents themselves until "ready").
int wait_spawn_server_ready(std::chrono::milliseconds timeout);

/// Starts this process's spawn server running `reaper` unless one runs. Returns 0 or an errno (ENOTSUP: a server of
/// another reaper path runs). Thread-safe: concurrent calls start one server. Blocks for one posix_spawn (two when a
/// background start is under way: it waits for that one first).
int start_spawn_server(const std::filesystem::path& reaper);

/// Starts this process's spawn server running `reaper` on a short-lived detached thread, unless one runs or is being
/// started; returns at once. Why: the server's posix_spawn blocks its caller until the server's exec, and a spawn that
/// did it inline returned that much later — on a VM where an exec goes through the hypervisor, the first agent's first
/// line came ×1.55–1.62 the bare spawn's time instead of ×1.2. Meanwhile send_spawn_request answers EINPROGRESS (ENOTSUP
/// for another reaper path), so spawns start their agents themselves. When no thread can be created, it starts the
/// server on the calling thread. The thread blocks every signal. A failure is kept for take_background_start_error()
/// (the thread has no logger it may call). The first call registers an atexit handler that waits (at most 5 s) for a
/// start under way, so that no pre-exec child with the host's command line and environment outlives the host's
/// exit(). Thread-safe.
void start_spawn_server_in_background(const std::filesystem::path& reaper);

/// Kills and reaps the replaced servers whose queued requests were all taken (send_spawn_request does it too; this is
/// for after a spawn, so that a host that stops spawning does not keep one — and its cgroup — until it exits).
/// Thread-safe; cheap when there is none.
void sweep_retired_spawn_servers();
/// The errno of the last background start that failed, once (0 when none did since the last call). Thread-safe.
int take_background_start_error();

}  // namespace agenthost::process::detail
