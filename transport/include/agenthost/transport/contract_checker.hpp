// agenthost/transport/contract_checker.hpp — validates a run's message sequence against the contract
// (docs/contract.md): field presence and JSON types per message type, and the run invariants:
//   * exactly one terminal.* message, and it is the last;
//   * every tool.call is closed by exactly one tool.completed / tool.failed before the terminal, and tool.update /
//     tool.completed / tool.failed only refer to a call that is open;
//   * at most one session.* message, and it comes before any assistant / assistant.thought / tool.* message.
// Meant for tests, fuzzing and debug assertions in providers; cost O(messages), memory O(open tool calls + ids seen).
#pragma once

#include <agenthost/transport/message.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace agenthost::transport {

class contract_checker {
 public:
  /// Check one message (in run order). Violations are recorded, never thrown.
  void observe(const message& msg);
  /// The run is over: records a violation when no terminal was seen. Returns violations().
  const std::vector<std::string>& finish();

  /// Human-readable violations, each prefixed with the index of the offending message ("#3 tool.completed: …").
  [[nodiscard]] const std::vector<std::string>& violations() const noexcept { return violations_; }
  [[nodiscard]] bool ok() const noexcept { return violations_.empty(); }
  [[nodiscard]] bool terminal_seen() const noexcept { return terminal_seen_; }

 private:
  void violation(const message& msg, std::string what);

  enum class call_state : unsigned char { open, closed };
  std::vector<std::string> violations_;
  std::unordered_map<std::string, call_state> calls_;
  std::size_t open_calls_ = 0;
  std::size_t index_ = 0;
  bool terminal_seen_ = false;
  bool session_seen_ = false;
  bool content_seen_ = false;  // an assistant / thought / tool message was seen
  bool finished_ = false;
};

/// Check a complete run; empty result = valid.
[[nodiscard]] std::vector<std::string> check_run(std::span<const message> messages);

}  // namespace agenthost::transport
