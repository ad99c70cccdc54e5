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
//           or: agenthost-reaper --control-fd 3 --adopt <pid>   <pid> is already its child (the host's launch child
//               started it, then exec'd the reaper): no "started" is sent, the host knows the pid
//
// Spawn server (one per host process, started lazily): agenthost-reaper --server --control-fd 3, fd 3 a
// SOCK_SEQPACKET socket to the host. It keeps one per-agent reaper fork()ed ahead of time ("idle"); that reaper reads
// the next request from the server socket itself (a packet goes to exactly one reader), tells the server it was taken
// (a pipe), spawns the agent and speaks the per-agent protocol above on the control socket passed with the request;
// the server then forks the next idle reaper.
//   host -> server   one packet per spawn: the payload (below) + SCM_RIGHTS [control, stdin, stdout, stderr] and, when
//                    the payload is larger than spawn_payload_inline_max, a fifth descriptor: a memfd holding it (the
//                    packet then carries only the magic line).
//   server -> host   "ready" from each idle reaper once it waits for a request (until the first one, the host
//                    starts agents itself; it reads them before each request). Every answer to a request travels on
//                    the request's control socket; a malformed request is answered "spawn-failed 22" there (when it
//                    carries a SOCK_SEQPACKET control socket).
// EOF on the server's socket means the host is gone: the server exits; each per-agent reaper sees EOF on its own
// control socket and kills its tree.
// Parsing is strict and pure (parse_reaper_message, parse_reaper_command; fuzzed by tests/fuzz/fuzz_reaper_protocol):
// the exact keyword, one space, a decimal number of plain digits within its range, nothing else. Anything else is
// `unknown` — logged by the host, ignored by the helper. format_* produce the canonical text; for every accepted
// packet, format(parse(p)) == p.
#pragma once

#include <charconv>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace agenthost::process::detail {
inline constexpr int reaper_control_fd = 3;
inline constexpr const char* reaper_program_name = "agenthost-reaper";

/// Helper -> host.
enum class reaper_message_kind { started, spawn_failed, exit, empty, unknown };
struct reaper_message {
  reaper_message_kind kind = reaper_message_kind::unknown;
  /// started: the agent's pid (> 0); spawn_failed: an errno (> 0); exit: a raw wait status (0..0xffff); else 0.
  int value = 0;
  /// started from a reaper forked by the spawn server: that reaper's pid (> 0); else 0.
  int reaper = 0;
  friend bool operator==(const reaper_message&, const reaper_message&) = default;
};

/// Host -> helper.
enum class reaper_command_kind { signal_leader, signal_group, signal_tree, kill, unknown };
struct reaper_command {
  reaper_command_kind kind = reaper_command_kind::unknown;
  /// signal_*: the signal number (0..64); else 0.
  int signal = 0;
  friend bool operator==(const reaper_command&, const reaper_command&) = default;
};

/// `text` = prefix + decimal digits (no sign, no leading zero unless "0") with min <= value <= max.
inline bool parse_reaper_number(std::string_view text, std::string_view prefix, int min, int max, int& out) {
  if (text.size() <= prefix.size() || text.substr(0, prefix.size()) != prefix) return false;
  const std::string_view digits = text.substr(prefix.size());
  if (digits.size() > 1 && digits[0] == '0') return false;
  for (const char c : digits)
    if (c < '0' || c > '9') return false;
  int v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc{} || end != digits.data() + digits.size() || v < min || v > max) return false;
  out = v;
  return true;
}

inline reaper_message parse_reaper_message(std::string_view packet) {
  using k = reaper_message_kind;
  int v = 0;
  if (packet.starts_with("started ")) {
    const std::string_view rest = packet.substr(8);
    const auto space = rest.find(' ');
    if (space == std::string_view::npos) {
      if (parse_reaper_number(rest, "", 1, 0x7fffffff, v)) return {k::started, v, 0};
      return {};
    }
    int r = 0;
    if (parse_reaper_number(rest.substr(0, space), "", 1, 0x7fffffff, v) &&
        parse_reaper_number(rest.substr(space + 1), "", 1, 0x7fffffff, r))
      return {k::started, v, r};
    return {};
  }
  if (parse_reaper_number(packet, "spawn-failed ", 1, 0x7fffffff, v)) return {k::spawn_failed, v};
  if (parse_reaper_number(packet, "exit ", 0, 0xffff, v)) return {k::exit, v};
  if (packet == "empty") return {k::empty, 0};
  return {};
}

inline reaper_command parse_reaper_command(std::string_view packet) {
  using k = reaper_command_kind;
  int sig = 0;
  if (packet == "kill") return {k::kill, 0};
  if (parse_reaper_number(packet, "signal leader ", 0, 64, sig)) return {k::signal_leader, sig};
  if (parse_reaper_number(packet, "signal group ", 0, 64, sig)) return {k::signal_group, sig};
  if (parse_reaper_number(packet, "signal tree ", 0, 64, sig)) return {k::signal_tree, sig};
  return {};
}

/// The canonical packet ("" for unknown).
inline std::string format_reaper_message(const reaper_message& m) {
  switch (m.kind) {
    case reaper_message_kind::started:
      return "started " + std::to_string(m.value) + (m.reaper != 0 ? " " + std::to_string(m.reaper) : std::string{});
    case reaper_message_kind::spawn_failed: return "spawn-failed " + std::to_string(m.value);
    case reaper_message_kind::exit: return "exit " + std::to_string(m.value);
    case reaper_message_kind::empty: return "empty";
    case reaper_message_kind::unknown: break;
  }
  return {};
}

inline std::string format_reaper_command(const reaper_command& c) {
  switch (c.kind) {
    case reaper_command_kind::signal_leader: return "signal leader " + std::to_string(c.signal);
    case reaper_command_kind::signal_group: return "signal group " + std::to_string(c.signal);
    case reaper_command_kind::signal_tree: return "signal tree " + std::to_string(c.signal);
    case reaper_command_kind::kill: return "kill";
    case reaper_command_kind::unknown: break;
  }
  return {};
}

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
