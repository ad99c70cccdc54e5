// agenthost/mapper/codex_mapper.hpp — maps `codex exec --json` JSONL (thread events; checked against 0.171.0) to the
// message contract.
//
//   agenthost::mapper::codex_mapper mapper{{.thinking = agenthost::mapper::thinking_mode::buffered}};
//   std::vector<agenthost::transport::message> out;
//   for (each stdout line) mapper.on_line(line, out);     // assistant text, tool.*, status… as they happen
//   mapper.finish(run_end{.status = exit_status}, out);     // exactly one terminal.* (last)
//
// Codex prints whole items, no token deltas: each completed `agent_message` item becomes one `assistant` message
// (its whole text), each `reasoning` item one `assistant.thought`, each `command_execution` / `file_change` /
// `mcp_tool_call` / `web_search` item one tool call with its result. Details and the terminal decision order are in
// docs/contract.md ("Codex mapping").
//
// Pure: no I/O, no clock, no threads. Every line is read with simdjson On-Demand (one parser and one padded buffer
// reused for the mapper's lifetime); nlohmann::json is built only for emitted content (tool input/output). Work is
// O(total input); memory is O(longest line + the text of the current agent message + held thinking + open tool calls
// + the ids of finished items), never O(stream bytes).
//
// Thread safety: one instance is used by one thread at a time (no shared state between instances).
#pragma once

#include <agenthost/mapper/event_mapper.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agenthost::mapper {

struct codex_mapper_options {
  /// When assistant.thought is released: buffered (default; when the turn ends) or stream (per reasoning item).
  thinking_mode thinking = thinking_mode::buffered;
  /// How many invalid stdout lines are kept for `invalid_output_lines` (later ones are only counted). Default: 20.
  std::size_t max_invalid_lines = 20;
  /// Bytes kept per invalid line (cut on a UTF-8 boundary, "…" appended when cut). Default: 4096.
  std::size_t max_invalid_line_bytes = 4096;
  /// The session (thread) id the caller asked codex to resume; the `thread.started` event is then reported as
  /// session.resumed with `resume: "resumed"` (same id) or `"restarted"`. Default: none.
  std::optional<std::string> requested_session_id{};
  /// Agent name reported in session.* `agent` and in terminal texts. Default: "codex".
  std::string agent = "codex";
  /// Append a text delta to an `assistant` message at the end of the output vector instead of adding one (the deltas
  /// of one batch of lines become one message; nothing is held back). Default: false; the provider turns it on.
  bool merge_adjacent_text = false;
  /// How many buffered thoughts one call appends when the turn ends; take_more() appends the rest, the same number
  /// at a time (a caller that does not ask gets them, first, from its next call of on_line(), on_oversize_line() or
  /// finish()). 0: all at once. Default: 0; the provider sets 8, the number of messages of a type a mapper keeps for
  /// reuse (recycle), so that a turn of thousands of thoughts is handed on in slices the next slice refills.
  std::size_t thought_release_batch = 0;
};

class codex_mapper final : public event_mapper {
 public:
  explicit codex_mapper(codex_mapper_options options = {});
  ~codex_mapper() override;
  codex_mapper(codex_mapper&&) noexcept;
  codex_mapper& operator=(codex_mapper&&) noexcept;
  codex_mapper(const codex_mapper&) = delete;
  codex_mapper& operator=(const codex_mapper&) = delete;

  void on_line(std::string_view line, std::vector<transport::message>& out) override;
  void on_oversize_line(std::string_view head, std::size_t total_bytes,
                        std::vector<transport::message>& out) override;
  /// True after `turn.completed` or `turn.failed` (codex exec runs one turn); false again at a new `turn.started`.
  [[nodiscard]] bool agent_finished() const noexcept override;
  /// Decides the terminal: cancelled → terminal.cancelled; timeout → failed/timeout; signal → failed/signaled; then
  /// `turn.failed` → failed/agent_error (whatever the exit code: codex exits 1 after it); a non-zero exit →
  /// failed/exited; `turn.completed` → completed (text = the last agent message); otherwise
  /// failed/no_terminal_event. Idempotent: a second call appends nothing.
  void finish(const run_end& end, std::vector<transport::message>& out) override;
  [[nodiscard]] const mapper_stats& stats() const noexcept override;
  void recycle(std::vector<transport::message>& used) override;
  /// The next thought_release_batch thoughts of a release cut short; false when none is under way.
  bool take_more(std::vector<transport::message>& out) override;

  /// The thread id from `thread.started` (empty before it).
  [[nodiscard]] const std::string& session_id() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// The HTTP status a codex error message names: a leading "429 …", or "status 429" / "status: 429" inside
/// ("exceeded retry limit, last status: 429 Too Many Requests", "unexpected status 400 Bad Request: …").
std::optional<int> codex_http_status(std::string_view error_message) noexcept;

/// The retry hint for a codex turn failure: 408, 409, 429 and 5xx statuses, and messages codex uses for transient
/// trouble (its canned "high demand … temporary errors" text that replaces 5xx bodies, stream disconnects, timeouts,
/// overload, connection errors). Usage or quota limits and other 4xx are not retryable.
bool codex_error_is_retryable(std::string_view error_message) noexcept;

}  // namespace agenthost::mapper
