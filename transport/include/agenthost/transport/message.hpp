// agenthost/transport/message.hpp — the shared message contract every agent is normalized into.
//
// A message is `{type, content}`; on the wire (the CLI's output, logs) one JSON object per line:
//   {"type":"assistant","content":{"text":"Hello"}}
// The types and their content fields are specified in docs/contract.md — the public interface IDEs and services
// code against. Invariants of a run (enforced by the mappers, checked by `contract_checker`):
//   * exactly one terminal.* message, and it is the last;
//   * every tool.call is closed by exactly one tool.completed / tool.failed before the terminal;
//   * session.* comes before any assistant/tool message.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace agenthost::transport {

/// Every message type of the contract. The JSON spelling is given by to_string().
enum class message_type {
  session_started,     ///< "session.started"
  session_resumed,     ///< "session.resumed"
  assistant,           ///< "assistant": text delta
  assistant_thought,   ///< "assistant.thought": thinking text
  tool_call,           ///< "tool.call"
  tool_update,         ///< "tool.update"
  tool_completed,      ///< "tool.completed"
  tool_failed,         ///< "tool.failed"
  status,              ///< "status": retry, compaction, rate_limit, warning, usage… never terminal
  terminal_completed,  ///< "terminal.completed"
  terminal_failed,     ///< "terminal.failed"
  terminal_cancelled,  ///< "terminal.cancelled"
};

/// "session.started", "assistant.thought", "terminal.failed", …
[[nodiscard]] std::string_view to_string(message_type type) noexcept;
/// Inverse of to_string(); nullopt for anything else.
[[nodiscard]] std::optional<message_type> message_type_from_string(std::string_view name) noexcept;
/// True for terminal.completed / terminal.failed / terminal.cancelled.
[[nodiscard]] constexpr bool is_terminal(message_type type) noexcept {
  return type == message_type::terminal_completed || type == message_type::terminal_failed ||
         type == message_type::terminal_cancelled;
}

/// Deepest nesting from_json_line() accepts: far deeper than any message a mapper produces (they cap what they copy
/// from an agent's JSON at 256 levels).
inline constexpr int max_json_depth = 512;

/// Parses `text` without exceptions; the result is discarded (is_discarded()) when `text` is not JSON or is nested
/// deeper than `max_depth`. nlohmann parses iteratively, but dumping, copying and comparing a value recurse as deep as
/// it is nested: JSON from outside must be bounded before it becomes a value.
[[nodiscard]] nlohmann::json parse_json_within_depth(std::string_view text, int max_depth = max_json_depth);

/// One normalized message. `content` is a JSON object (a null one is treated as {}).
struct message {
  message_type type = message_type::status;
  nlohmann::json content = nlohmann::json::object();

  [[nodiscard]] bool is_terminal() const noexcept { return transport::is_terminal(type); }
  /// {"type": "...", "content": {...}} as a JSON value (a null content becomes {}). Strings are copied as they are:
  /// dump it with nlohmann::json::error_handler_t::replace, or use to_json_line(), if they may hold invalid UTF-8
  /// (nlohmann's default dump() throws on it). nlohmann sorts keys, so its dump() puts "content" before "type".
  [[nodiscard]] nlohmann::json to_json() const;
  /// One line of JSON, no trailing newline: "type" first, then "content" (a null content is written as {}). Invalid
  /// UTF-8 in strings is replaced by U+FFFD, never thrown.
  [[nodiscard]] std::string to_json_line() const;
  /// Parse one line produced by to_json_line(); nullopt when it is not a contract message — also for JSON nested
  /// deeper than max_json_depth (writing such a value back would recurse that deep).
  [[nodiscard]] static std::optional<message> from_json_line(std::string_view line);

  friend bool operator==(const message&, const message&) = default;
};

/// Reasons used in terminal.failed `reason` (more may be added; consumers must accept unknown ones).
namespace failure_reason {
inline constexpr std::string_view start_failed = "start_failed";
inline constexpr std::string_view agent_error = "agent_error";
inline constexpr std::string_view exited = "exited";
inline constexpr std::string_view signaled = "signaled";
inline constexpr std::string_view no_terminal_event = "no_terminal_event";
inline constexpr std::string_view timeout = "timeout";
inline constexpr std::string_view protocol = "protocol";
}  // namespace failure_reason

}  // namespace agenthost::transport
