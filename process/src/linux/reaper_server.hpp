// The per-process spawn server (internal; Linux): one long-lived `agenthost-reaper --server` per host process that
// keeps a per-agent reaper fork()ed ahead of time for the next reaper-mode spawn, instead of the host exec'ing one.
// Protocol: detail/reaper_protocol.hpp.
//
// Lifetime: started right after the first reaper-mode spawn (which starts the agent and its own reaper itself, see
// adopt_spawn.hpp, so the server's start-up is not on that spawn's path), and again after the spawn that found it
// dead (by its pidfd or a failed send); its socket and pidfd stay open until the host process exits — the server
// then reads EOF and exits, and every per-agent reaper reads EOF on its own control socket and kills its tree. A
// fork()ed host starts its own server.
#pragma once

#include "../posix/spawn.hpp"

#include <chrono>
#include <filesystem>

namespace agenthost::process::detail {

/// Sends one spawn request (executable, argv, envp, an absolute working_directory, the agent's stdio descriptors and
/// `request.fd3` = the per-agent control socket) to this process's spawn server running `reaper`. Returns 0 once the
/// request is queued (every answer then arrives on the control socket), else an errno and the caller starts a
/// per-agent reaper itself instead: ESRCH when no server runs (none was started yet, or it died — then it was reaped),
/// EINPROGRESS while the server is still starting (no idle reaper has said "ready" yet), ENOTSUP when the server
/// runs another reaper path. Never starts a server (see start_spawn_server). Thread-safe (one mutex around the check
/// and the send; the send is one SOCK_SEQPACKET packet, bounded by a 5 s send timeout). Never waits for the agent's
/// start.
int send_spawn_request(const std::filesystem::path& reaper, const spawn_request& request);

/// Whether this process's spawn server runs and one of its idle reapers has said "ready" (reads the pending packets),
/// i.e. whether the next request is served rather than started on its own. For tests and benchmarks. Thread-safe.
bool spawn_server_ready();

/// Waits until this process's spawn server says "ready" (reading its packets), at most `timeout`. Returns 0, ESRCH
/// (no server of ours, or it died meanwhile), ETIMEDOUT, or another errno. Thread-safe; does not hold the server's
/// lock while waiting, so spawns meanwhile go on (they start their agents themselves until "ready").
int wait_spawn_server_ready(std::chrono::milliseconds timeout);

/// Starts this process's spawn server running `reaper` unless one runs. Returns 0 or an errno (ENOTSUP: a server of
/// another reaper path runs). Thread-safe: concurrent calls start one server. Blocks for one posix_spawn.
int start_spawn_server(const std::filesystem::path& reaper);

}  // namespace agenthost::process::detail
