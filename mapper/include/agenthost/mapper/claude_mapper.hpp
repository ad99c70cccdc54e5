// agenthost/mapper/claude_mapper.hpp — maps Claude Code's `-p --output-format stream-json --verbose
// --include-partial-messages` JSONL to the message contract.
//
//   agenthost::mapper::claude_mapper mapper{{.thinking = agenthost::mapper::thinking_mode::buffered}};
//   std::vector<agenthost::transport::message> out;
//   for (each stdout line) mapper.on_line(line, out);     // assistant deltas, tool.*, status… as they happen
//   mapper.finish(run_end{.status = exit_status}, out);     // exactly one terminal.* (last)
//
// Pure: no I/O, no clock, no threads. Stream and system lines in Claude's exact compact form are read by a strict byte
// scan; other lines, and any line the scan finds unusual, by simdjson On-Demand (one parser and one padded buffer
// reused for the mapper's lifetime) — the same accepted set and events either way. Only the fields the mapping needs
// are read, and nlohmann::json is built only for emitted content (tool input/output). Work is O(total input); memory is O(longest line + the current API message's
// blocks + held thinking + open tool calls + the ids of the last 1,024 closed calls), never O(stream bytes).
//
// Claude relays every streamed content block twice — as raw API `stream_event` deltas and then as a full `assistant`
// frame with the same message id — and the mapper emits each once: the deltas as they come, and from the frame only
// what the deltas missed (a `status` warning `text_diverged` when the frame contradicts them; the streamed text
// stands). Events of sub-agents (non-null `parent_tool_use_id`) are ignored: the main agent's Agent/Task tool call
// and its result stand for them. Details and the terminal decision: docs/contract.md, "Claude Code mapping".
//
// Validation: a line is an event when it is one JSON object (only whitespace after it) with a string `type`, and
// every field the mapper reads has the expected JSON type or is null (null = absent). Anything else is an invalid line:
// counted, kept (bounded), reported in `invalid_output_lines`, never fatal. Unknown event types are ignored.
//
// Thread safety: one mapper, one thread at a time.
#pragma once

#include <agenthost/mapper/event_mapper.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agenthost::mapper {

struct claude_mapper_options {
  /// When assistant.thought is released: buffered (default; when the final API message ends, or at the end of the run)
  /// or stream (when each thinking block's full frame arrives).
  thinking_mode thinking = thinking_mode::buffered;
  /// How many invalid stdout lines are kept for `invalid_output_lines` (later ones are only counted). Default: 20.
  std::size_t max_invalid_lines = 20;
  /// Bytes kept per invalid line (cut on a UTF-8 boundary, "…" appended when cut). Default: 4096.
  std::size_t max_invalid_line_bytes = 4096;
  /// The session id the caller asked Claude to resume (`--resume`); the init event is then reported as
  /// session.resumed with `resume: "resumed"` (same id) or `"restarted"` (Claude started another session).
  /// Default: none (session.started).
  std::optional<std::string> requested_session_id{};
  /// Agent name reported in session.* `agent` and in texts. Default: "claude".
  std::string agent = "claude";
  /// Append a text delta to an `assistant` message at the end of the output vector instead of adding one (the deltas
  /// of one batch of lines become one message; nothing is held back). Default: false; the provider turns it on.
  bool merge_adjacent_text = false;
};

class claude_mapper final : public event_mapper {
 public:
  explicit claude_mapper(claude_mapper_options options = {});
  ~claude_mapper() override;
  claude_mapper(claude_mapper&&) noexcept;
  claude_mapper& operator=(claude_mapper&&) noexcept;
  claude_mapper(const claude_mapper&) = delete;
  claude_mapper& operator=(const claude_mapper&) = delete;

  void on_line(std::string_view line, std::vector<transport::message>& out) override;
  void on_oversize_line(std::string_view head, std::size_t total_bytes,
                        std::vector<transport::message>& out) override;
  /// True once Claude printed its `result` line (its final event in `-p` mode).
  [[nodiscard]] bool agent_finished() const noexcept override;
  /// Decides the terminal: cancelled → terminal.cancelled (whatever Claude printed: after SIGINT it prints an
  /// `error_during_execution` result, or nothing, and exits 0); timeout → failed/timeout; signal → failed/signaled;
  /// then Claude's `result`: success without is_error → completed; is_error with api_error_status → failed/agent_error
  /// with http_status and retryable; other errors → failed/agent_error. Without a result: non-zero exit →
  /// failed/exited, exit 0 → failed/no_terminal_event. Exit code 0 alone never means success. Idempotent.
  void finish(const run_end& end, std::vector<transport::message>& out) override;
  [[nodiscard]] const mapper_stats& stats() const noexcept override;
  void recycle(std::vector<transport::message>& used) override;

  /// The session id Claude reported (empty before its init event).
  [[nodiscard]] const std::string& session_id() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Whether a failed Claude model call is worth retrying by the caller: HTTP 408, 409, 429, 5xx (529 = overloaded), or
/// an error text that names an overload, a rate limit, or a failed / timed-out connection ("API Error: Connection
/// refused … (ECONNREFUSED)"). Other 4xx, and other errors, are not.
[[nodiscard]] bool claude_error_is_retryable(std::optional<int> http_status, std::string_view error_text) noexcept;

}  // namespace agenthost::mapper
