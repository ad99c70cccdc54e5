// The wire protocol between the host and the agenthost-reaper helper (internal).
//
// Transport: a SOCK_SEQPACKET socketpair; the helper's end is its fd 3. One ASCII message per packet.
//   host -> helper   "signal leader <sig>" | "signal group <sig>" | "signal tree <sig>" | "kill"
//   helper -> host   "started <pid>"           the agent runs (first message)
//                    "spawn-failed <errno>"    the agent could not be spawned; the helper exits 127
//                    "exit <wait-status>"      the agent leader exited (raw waitpid status)
//                    "empty"                   no process of the tree is left; the helper exits 0 right after
// EOF on the host's side means the helper is gone. EOF on the helper's side means the host is gone (or gave up):
// the helper kills the whole tree, then exits.
//
// Command line: agenthost-reaper --control-fd 3 -- <executable> <argv0> [args…]
#pragma once

namespace agenthost::process::detail {
inline constexpr int reaper_control_fd = 3;
inline constexpr const char* reaper_program_name = "agenthost-reaper";
}  // namespace agenthost::process::detail
