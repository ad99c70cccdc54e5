// Fuzz target: the reaper helper's control protocol (process/src/detail/reaper_protocol.hpp) — the host's parser of
// the helper's packets (`started <pid>`, `started <pid> <reaper>`, `spawn-failed <errno>`, `exit <wait-status>`, `empty`) and the helper's
// parser of the host's commands (`signal leader|group|tree <sig>`, `kill`).
//
// Input: byte 0 selects what the rest is: even = one packet, both parsers run on it; odd = (kind, 4-byte value)
// pairs that are formatted and parsed back. Properties:
//   - parsing is total (any bytes, no crash, no UB) and agrees with an independent reference parser written here;
//   - accepted packets are canonical: format(parse(p)) == p; values within their ranges (pid > 0, errno > 0,
//     wait status 0..0xffff, signal 0..64);
//   - format then parse is the identity for every in-range value, and `unknown` for every out-of-range one;
//   - a packet is never accepted by both parsers (the two directions cannot be confused);
//   - what the host's 128-byte receive buffer would cut (a packet longer than 127 bytes) is never accepted.
#include "fuzz_util.hpp"

#include "detail/reaper_protocol.hpp"

#include <cstring>
#include <optional>

namespace {

using namespace agenthost::process::detail;
using agenthost::fuzz::printable;

// The reference: prefix, then 1–10 plain digits without a leading zero (unless "0"), accumulated in 64 bits.
std::optional<long long> ref_number(std::string_view p, std::string_view prefix) {
  if (p.size() <= prefix.size() || p.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const std::string_view d = p.substr(prefix.size());
  if (d.size() > 10 || (d.size() > 1 && d[0] == '0')) return std::nullopt;
  long long v = 0;
  for (const char c : d) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

reaper_message ref_message(std::string_view p) {
  using k = reaper_message_kind;
  if (auto v = ref_number(p, "started "); v && *v >= 1 && *v <= 0x7fffffff) return {k::started, static_cast<int>(*v), 0};
  if (p.starts_with("started ")) {  // "started <pid> <reaper>" (a reaper forked by the spawn server)
    const std::string_view rest = p.substr(8);
    const auto space = rest.find(' ');
    if (space != std::string_view::npos) {
      auto a = ref_number(std::string("x") + std::string(rest.substr(0, space)), "x");
      auto b = ref_number(std::string("x") + std::string(rest.substr(space + 1)), "x");
      if (a && b && *a >= 1 && *a <= 0x7fffffff && *b >= 1 && *b <= 0x7fffffff)
        return {k::started, static_cast<int>(*a), static_cast<int>(*b)};
    }
  }
  if (auto v = ref_number(p, "spawn-failed "); v && *v >= 1 && *v <= 0x7fffffff)
    return {k::spawn_failed, static_cast<int>(*v)};
  if (auto v = ref_number(p, "exit "); v && *v >= 0 && *v <= 0xffff) return {k::exit, static_cast<int>(*v)};
  if (p == "empty") return {k::empty, 0};
  return {};
}

reaper_command ref_command(std::string_view p) {
  using k = reaper_command_kind;
  if (p == "kill") return {k::kill, 0};
  for (const auto& [prefix, kind] : {std::pair{"signal leader ", k::signal_leader}, std::pair{"signal group ", k::signal_group},
                                     std::pair{"signal tree ", k::signal_tree}}) {
    if (auto v = ref_number(p, prefix); v && *v >= 0 && *v <= 64) return {kind, static_cast<int>(*v)};
  }
  return {};
}

std::string describe(std::string_view p) { return "packet \"" + printable(p) + "\""; }

void check_packet(std::string_view p) {
  const auto m = parse_reaper_message(p);
  const auto c = parse_reaper_command(p);
  AGENTHOST_FUZZ_CHECK(m == ref_message(p), "message parser differs from the reference: " + describe(p));
  AGENTHOST_FUZZ_CHECK(c == ref_command(p), "command parser differs from the reference: " + describe(p));
  if (m.kind != reaper_message_kind::unknown) {
    AGENTHOST_FUZZ_CHECK(format_reaper_message(m) == p, "accepted a non-canonical message: " + describe(p));
    AGENTHOST_FUZZ_CHECK(p.size() <= 127, "accepted a packet the 128-byte buffer would cut: " + describe(p));
    switch (m.kind) {
      case reaper_message_kind::started: AGENTHOST_FUZZ_CHECK(m.value > 0 && m.reaper >= 0, describe(p)); break;
      case reaper_message_kind::spawn_failed: AGENTHOST_FUZZ_CHECK(m.value > 0, describe(p)); break;
      case reaper_message_kind::exit: AGENTHOST_FUZZ_CHECK(m.value >= 0 && m.value <= 0xffff, describe(p)); break;
      default: AGENTHOST_FUZZ_CHECK(m.value == 0, describe(p)); break;
    }
  } else {
    AGENTHOST_FUZZ_CHECK(m.value == 0 && m.reaper == 0, "unknown message with a value: " + describe(p));
  }
  if (m.kind != reaper_message_kind::started) AGENTHOST_FUZZ_CHECK(m.reaper == 0, "a reaper pid outside started");
  if (c.kind != reaper_command_kind::unknown) {
    AGENTHOST_FUZZ_CHECK(format_reaper_command(c) == p, "accepted a non-canonical command: " + describe(p));
    AGENTHOST_FUZZ_CHECK(c.signal >= 0 && c.signal <= 64, "signal out of range: " + describe(p));
  } else {
    AGENTHOST_FUZZ_CHECK(c.signal == 0, "unknown command with a signal: " + describe(p));
  }
  AGENTHOST_FUZZ_CHECK(m.kind == reaper_message_kind::unknown || c.kind == reaper_command_kind::unknown,
                       "accepted by both directions: " + describe(p));
}

void check_round_trips(agenthost::fuzz::byte_reader& in) {
  while (in.remaining() >= 5) {
    const std::uint8_t kind = in.byte();
    std::uint32_t raw = 0;
    const auto b = in.take(4);
    std::memcpy(&raw, b.data(), 4);
    const int value = static_cast<int>(raw);
    if ((kind & 1) == 0) {
      const auto k = static_cast<reaper_message_kind>((kind >> 1) % 5);
      // Bit 4 of the kind byte: a started message from a server-forked reaper (the value doubles as its pid).
      const int reaper = k == reaper_message_kind::started && (kind & 0x10) != 0 ? value : 0;
      const reaper_message m{k, value, reaper};
      const std::string text = format_reaper_message(m);
      const auto back = parse_reaper_message(text);
      bool in_range = false;
      switch (k) {
        case reaper_message_kind::started:
        case reaper_message_kind::spawn_failed: in_range = value > 0; break;
        case reaper_message_kind::exit: in_range = value >= 0 && value <= 0xffff; break;
        case reaper_message_kind::empty: in_range = true; break;
        case reaper_message_kind::unknown: in_range = false; break;
      }
      if (k == reaper_message_kind::empty) {
        AGENTHOST_FUZZ_CHECK(back == (reaper_message{k, 0, 0}), "\"empty\" does not round-trip");
      } else if (in_range) {
        AGENTHOST_FUZZ_CHECK(back == m, "message does not round-trip: " + describe(text));
      } else {
        AGENTHOST_FUZZ_CHECK(back.kind == reaper_message_kind::unknown, "out-of-range value accepted: " + describe(text));
      }
      check_packet(text);
    } else {
      const auto k = static_cast<reaper_command_kind>((kind >> 1) % 5);
      const reaper_command c{k, value};
      const std::string text = format_reaper_command(c);
      const auto back = parse_reaper_command(text);
      if (k == reaper_command_kind::kill) {
        AGENTHOST_FUZZ_CHECK(back == (reaper_command{k, 0}), "\"kill\" does not round-trip");
      } else if (k == reaper_command_kind::unknown) {
        AGENTHOST_FUZZ_CHECK(back.kind == reaper_command_kind::unknown, "the unknown command formatted to a command");
      } else if (value >= 0 && value <= 64) {
        AGENTHOST_FUZZ_CHECK(back == c, "command does not round-trip: " + describe(text));
      } else {
        AGENTHOST_FUZZ_CHECK(back.kind == reaper_command_kind::unknown, "out-of-range signal accepted: " + describe(text));
      }
      check_packet(text);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  agenthost::fuzz::byte_reader in(data, size);
  const std::uint8_t mode = in.byte();
  if ((mode & 1) == 0) {
    check_packet(in.rest());
  } else {
    check_round_trips(in);
  }
  return 0;
}
