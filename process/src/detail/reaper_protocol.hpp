// The wire protocol between the host and the agenthost-reaper helper (internal).
//
// Per agent. Transport: a SOCK_SEQPACKET socketpair; the helper's end is its fd 3. One ASCII message per packet.
//   host -> helper   "signal leader <sig>" | "signal group <sig>" | "signal tree <sig>" | "kill"
//   helper -> host   "started <pid>"           the agent runs (first message)
//                    "started <pid> <reaper>"  the same from a reaper forked by the spawn server; a pidfd of the
//                                              reaper itself rides along (SCM_RIGHTS): the host cannot wait for it
//                                              (it is the server's child) but can poll and signal it race-free
//                    "spawn-failed <errno>"    the agent could not be spawned; the helper exits 127
//                    "exit <wait-status>"      the agent leader exited (raw waitpid status)
//                    "empty"                   no process of the tree is left; the helper exits 0 right after
// EOF on the host's side means the helper is gone. EOF on the helper's side means the host is gone (or gave up):
// the helper kills the whole tree, then exits.
//
// Command line: agenthost-reaper --control-fd 3 -- <executable> <argv0> [args…]
//
// Spawn server (one per host process, started lazily): agenthost-reaper --server --control-fd 3, fd 3 a
// SOCK_SEQPACKET socket to the host. It keeps one per-agent reaper fork()ed ahead of time ("idle"); that reaper reads
// the next request from the server socket itself (a packet goes to exactly one reader), tells the server it was taken
// (a pipe), spawns the agent and speaks the per-agent protocol above on the control socket passed with the request;
// the server then forks the next idle reaper.
//   host -> server   one packet per spawn: the payload (below) + SCM_RIGHTS [control, stdin, stdout, stderr] and, when
//                    the payload is larger than spawn_payload_inline_max, a fifth descriptor: a memfd holding it (the
//                    packet then carries only the magic line).
//   server -> host   nothing on this socket: every answer travels on the request's control socket; a malformed
//                    request is answered "spawn-failed 22" there (when it carries a SOCK_SEQPACKET control socket).
// EOF on the server's socket means the host is gone: the server exits; each per-agent reaper sees EOF on its own
// control socket and kills its tree.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace agenthost::process::detail {
inline constexpr int reaper_control_fd = 3;
inline constexpr const char* reaper_program_name = "agenthost-reaper";

/// First field of every spawn payload (the protocol version).
inline constexpr std::string_view spawn_payload_magic = "agenthost-spawn-1";
/// Payloads up to this size travel inline in the request packet (well below the default SO_SNDBUF limit of a
/// SOCK_SEQPACKET message); larger ones (huge environments) go through a memfd.
inline constexpr std::size_t spawn_payload_inline_max = 60 * 1024;
/// The server refuses payloads larger than this (ARG_MAX-like sanity bound).
inline constexpr std::size_t spawn_payload_max = std::size_t{64} << 20;

/// magic \0 executable \0 cwd \0 <argc> \0 argv… \0 <envc> \0 envp… \0 — NUL-terminated fields, counts in decimal.
inline std::string encode_spawn_payload(const std::string& executable, const std::string& cwd,
                                        const std::vector<std::string>& argv, const std::vector<std::string>& envp) {
  std::string out;
  auto field = [&](std::string_view f) {
    out.append(f);
    out.push_back('\0');
  };
  field(spawn_payload_magic);
  field(executable);
  field(cwd);
  field(std::to_string(argv.size()));
  for (const auto& a : argv) field(a);
  field(std::to_string(envp.size()));
  for (const auto& e : envp) field(e);
  return out;
}

/// Decoded spawn payload: views into the decoded buffer.
struct spawn_payload {
  std::string_view executable;
  std::string_view cwd;
  std::vector<std::string_view> argv;
  std::vector<std::string_view> envp;
};

/// Strict: false on any deviation (wrong magic, bad count, trailing bytes, a relative executable or cwd).
inline bool decode_spawn_payload(std::string_view in, spawn_payload& out) {
  auto next = [&](std::string_view& f) {
    const auto z = in.find('\0');
    if (z == std::string_view::npos) return false;
    f = in.substr(0, z);
    in.remove_prefix(z + 1);
    return true;
  };
  auto count = [&](std::size_t& n) {
    std::string_view f;
    if (!next(f) || f.empty() || f.size() > 7) return false;
    n = 0;
    for (char c : f) {
      if (c < '0' || c > '9') return false;
      n = n * 10 + static_cast<std::size_t>(c - '0');
    }
    return true;
  };
  std::string_view magic;
  if (!next(magic) || magic != spawn_payload_magic) return false;
  if (!next(out.executable) || out.executable.empty() || out.executable[0] != '/') return false;
  if (!next(out.cwd) || (!out.cwd.empty() && out.cwd[0] != '/')) return false;
  std::size_t n = 0;
  if (!count(n) || n == 0) return false;
  out.argv.resize(n);
  for (auto& a : out.argv)
    if (!next(a)) return false;
  if (!count(n)) return false;
  out.envp.resize(n);
  for (auto& e : out.envp)
    if (!next(e)) return false;
  return in.empty();
}

}  // namespace agenthost::process::detail
