// Starting an agent's process tree (internal, Linux): everything child::spawn does before there is a child object —
// checks, pipes, the reaper (through the spawn server or exec'd), pidfds. The Asio side (child::impl) only adopts
// the descriptors this returns.
#pragma once

#include <agenthost/process/error.hpp>
#include <agenthost/process/exit_status.hpp>
#include <agenthost/process/options.hpp>

#include "../detail/unique_fd.hpp"

#include <boost/system/result.hpp>

#include <optional>
#include <string>

namespace agenthost::process::detail {

/// A started tree: the host's ends of its pipes and the handle of the process the host waits on.
struct launched_tree {
  containment_kind mode = containment_kind::session;  ///< what was used (reaper falls back to session when allowed)
  int agent_pid = -1;        ///< the agent's pid (under the reaper: its grandchild)
  int direct_pid = -1;       ///< the process the host waits on: the agent (session) or its reaper
  bool direct_is_child = true;  ///< false: a reaper forked by the spawn server (the server reaps it, not us)
  bool auto_reaped = false;  ///< the direct child was gone and reaped by the kernel before its pidfd was opened
  std::string tree_token;    ///< "AGENTHOST_TREE_TOKEN=…", in the agent's environment
  unique_fd direct_pidfd;    ///< pidfd of direct_pid (empty when auto_reaped)
  unique_fd stdout_read, stderr_read;
  unique_fd stdin_write;     ///< a stream socket; empty unless stdin_kind::pipe
  unique_fd control;         ///< the reaper's control socket (SOCK_SEQPACKET); empty in session mode
};

/// Checks `options` (executable on PATH, working directory, reaper, exec limits), creates the pipes and starts the
/// tree. Nothing is left running on failure. `options.log` gets the fallback notices.
boost::system::result<launched_tree, spawn_error> launch_tree(const spawn_options& options);

/// waitid(P_PIDFD, WNOHANG): the status, or nullopt while the process runs. ECHILD (someone else reaped it: a host
/// that ignores SIGCHLD, or calls waitpid(-1)) gives unknown_status; so does a negative `pidfd`.
std::optional<exit_status> try_reap(int pidfd);

}  // namespace agenthost::process::detail
