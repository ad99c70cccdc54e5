// The per-process spawn server (internal; Linux): one long-lived `agenthost-reaper --server` per host process that
// keeps a per-agent reaper fork()ed ahead of time for the next reaper-mode spawn, instead of the host exec'ing one.
// Protocol: detail/reaper_protocol.hpp.
//
// Lifetime: started by the first request, restarted when it died (found by its pidfd or a failed send); its socket
// and pidfd stay open until the host process exits — the server then reads EOF and exits, and every per-agent reaper
// reads EOF on its own control socket and kills its tree. A fork()ed host starts its own server.
#pragma once

#include "../posix/spawn.hpp"

#include <filesystem>

namespace agenthost::process::detail {

/// Sends one spawn request (executable, argv, envp, an absolute working_directory, the agent's stdio descriptors and
/// `request.fd3` = the per-agent control socket) to this process's spawn server running `reaper`, starting or
/// restarting the server first. Returns 0 once the request is queued (every answer then arrives on the control
/// socket), else an errno: the caller falls back to exec'ing a per-agent reaper. ENOTSUP: a server of another reaper
/// path runs. Thread-safe (one mutex around start and send; the send is one SOCK_SEQPACKET packet, bounded by a 5 s
/// send timeout). Never blocks on the agent's start.
int send_spawn_request(const std::filesystem::path& reaper, const spawn_request& request);

}  // namespace agenthost::process::detail
