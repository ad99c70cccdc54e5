// agenthost/process/spawn_server.hpp — start the per-process spawn server ahead of the first agent.
//
// Without this call, the first reaper-mode spawn of a host process starts the agent and exec's its own
// agenthost-reaper after it (a little slower than a steady spawn: the host waits for both execs, and the server starts
// on a short-lived thread beside the agent); every later spawn takes a reaper the server forked ahead of time. A host that knows it
// will run agents (an IDE at start-up, a service at boot) calls prestart_spawn_server() once, early, so that its
// first agent starts as fast as the others (a spawn from another thread while the server is still starting does not
// wait for it):
//
//   if (auto r = agenthost::process::prestart_spawn_server(); !r) log(r.error().message);  // spawns still work
//
// Calling it is never required and never changes containment: see spawn_options::reaper_server.
#pragma once

#include <agenthost/process/error.hpp>

#include <boost/system/result.hpp>

#include <filesystem>

namespace agenthost::process {

/// Starts this process's spawn server (`agenthost-reaper --server`) running the reaper at `reaper_path` (empty: found
/// as spawn_options::reaper_path is) unless one runs already, and returns once it takes requests: its exec, one fork
/// and its idle reaper's set-up (about 1 ms on an idle machine; at most 5 s), so that the very next spawn is served.
/// Errors: errc::reaper_not_found (no helper at that path), errc::spawn_failed (the server could not be started, one
/// of another reaper path runs, or it did not become ready). After an error, spawns still work: each starts its own
/// reaper. Thread-safe (spawns from other threads meanwhile do not wait for it); idempotent (a second call finds the
/// server running). A server that dies later is restarted by the next spawn, as usual.
boost::system::result<void, spawn_error> prestart_spawn_server(const std::filesystem::path& reaper_path = {});

}  // namespace agenthost::process
