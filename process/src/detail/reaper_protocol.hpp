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
//
// Parsing is strict and pure (parse_reaper_message, parse_reaper_command; fuzzed by tests/fuzz/fuzz_reaper_protocol):
// the exact keyword, one space, a decimal number of plain digits within its range, nothing else. Anything else is
// `unknown` — logged by the host, ignored by the helper. format_* produce the canonical text; for every accepted
// packet, format(parse(p)) == p.
#pragma once

#include <charconv>
#include <string>
#include <string_view>

namespace agenthost::process::detail {
inline constexpr int reaper_control_fd = 3;
inline constexpr const char* reaper_program_name = "agenthost-reaper";

/// Helper -> host.
enum class reaper_message_kind { started, spawn_failed, exit, empty, unknown };
struct reaper_message {
  reaper_message_kind kind = reaper_message_kind::unknown;
  /// started: the agent's pid (> 0); spawn_failed: an errno (> 0); exit: a raw wait status (0..0xffff); else 0.
  int value = 0;
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
  if (parse_reaper_number(packet, "started ", 1, 0x7fffffff, v)) return {k::started, v};
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
    case reaper_message_kind::started: return "started " + std::to_string(m.value);
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
}  // namespace agenthost::process::detail
