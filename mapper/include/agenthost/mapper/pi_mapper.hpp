// agenthost/mapper/pi_mapper.hpp — maps pi's `--mode json -p` JSONL (both wire formats) to the message contract.
//
//   agenthost::mapper::pi_mapper mapper{{.thinking = agenthost::mapper::thinking_mode::buffered}};
//   std::vector<agenthost::transport::message> out;
//   for (each stdout line) mapper.on_line(line, out);     // assistant deltas, tool.*, status… as they happen
//   mapper.finish(run_end{.status = exit_status}, out);     // exactly one terminal.* (last)
//
// Pure: no I/O, no clock, no threads. message_update, tool_execution_update and unmapped event types are read by a
// strict byte scan (raw_scan.hpp); other lines, and any line the scan finds unusual, by simdjson On-Demand (one parser
// and one padded buffer reused for the mapper's lifetime) — the same accepted set and events either way. Only the
// fields the mapping needs are read, the bulky cumulative
// `message` / `partial` snapshots of pi ≤ 0.83 are skipped whenever the event carries a `delta`, and nlohmann::json
// is built only for content that is emitted (tool input/output). Work is O(total input); memory is O(longest line +
// text of the current and previous assistant message + buffered thinking + open tool calls + the ids of the last
// 1,024 closed calls), never O(stream bytes).
//
// Validation choice: a line is an event when it is a single JSON object (nothing but whitespace after it) whose
// `type` is a string, and every field the mapper reads has the expected JSON type. simdjson validates the UTF-8 and
// the string/structure framing of the whole line; the grammar of values the mapper skips (for instance the snapshot
// of a message_update that carries a delta) is not checked. Anything else is an invalid line: it is counted, kept
// (bounded) and reported in `invalid_output_lines`, and never stops the stream. Details in docs/contract.md.
#pragma once

#include <agenthost/mapper/event_mapper.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agenthost::mapper {

struct pi_mapper_options {
  /// When assistant.thought is released: buffered (default; at the end of the final turn) or stream (per block).
  thinking_mode thinking = thinking_mode::buffered;
  /// How many invalid stdout lines are kept for `invalid_output_lines` (later ones are only counted).
  std::size_t max_invalid_lines = 20;
  /// Bytes kept per invalid line (cut on a UTF-8 boundary, "…" appended when cut).
  std::size_t max_invalid_line_bytes = 4096;
  /// The session id the caller asked pi to resume; the header is then reported as session.resumed with
  /// `resume: "resumed"` (same id) or `"restarted"` (pi started a new session).
  std::optional<std::string> requested_session_id{};
  /// Agent name reported in session.* `agent`.
  std::string agent = "pi";
  /// When an assistant message that follows a tool-use turn starts by replaying that turn's text, emit only the
  /// new part. A replay is text that arrives already accumulated: the message's first text (a snapshot, a final
  /// content or a single delta) holds the previous turn's whole text and more. Text generated in deltas — even when
  /// it repeats the previous text — and a message that merely begins like the previous one are emitted whole.
  bool dedupe_replayed_text = true;
  /// Append a text delta to the `assistant` message at the end of the output vector, when there is one, instead of
  /// adding another message: the deltas of one batch of lines become one message (same concatenated text; fewer
  /// messages to build and hand on). Only the caller's vector is looked at, so deltas are never held back. Default:
  /// false (one message per delta); the providers turn it on, since they map a whole read at a time.
  bool merge_adjacent_text = false;
};

class pi_mapper final : public event_mapper {
 public:
  explicit pi_mapper(pi_mapper_options options = {});
  ~pi_mapper() override;
  pi_mapper(pi_mapper&&) noexcept;
  pi_mapper& operator=(pi_mapper&&) noexcept;
  pi_mapper(const pi_mapper&) = delete;
  pi_mapper& operator=(const pi_mapper&) = delete;

  void on_line(std::string_view line, std::vector<transport::message>& out) override;
  void on_oversize_line(std::string_view head, std::size_t total_bytes,
                        std::vector<transport::message>& out) override;
  /// True after `agent_settled`, or after an `agent_end` without `willRetry: true`; false again when an
  /// `auto_retry_start`, a compaction or a new `agent_start` follows.
  [[nodiscard]] bool agent_finished() const noexcept override;
  /// Decides the terminal: cancelled → terminal.cancelled; timeout → failed/timeout; signal → failed/signaled;
  /// non-zero exit → failed/exited; otherwise the last assistant stopReason once pi finished (stop → completed,
  /// length → completed + `truncated`, error/aborted → failed/agent_error), and failed/no_terminal_event when pi
  /// never finished. Exit code 0 alone never means success.
  void finish(const run_end& end, std::vector<transport::message>& out) override;
  [[nodiscard]] const mapper_stats& stats() const noexcept override;
  void recycle(std::vector<transport::message>& used) override;

  /// The session id from pi's header (empty before it).
  [[nodiscard]] const std::string& session_id() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// pi's own retryable-error rule (agent-session `_isRetryableError`): overloaded, rate limit, too many requests,
/// 429, 500, 502, 503, 504, service unavailable, server/internal error, connection errors, fetch failed, terminated…
[[nodiscard]] bool pi_error_is_retryable(std::string_view error_message);

/// The HTTP status at the start of an error message ("400 fake bad request" → 400), when there is one (100–599).
[[nodiscard]] std::optional<int> leading_http_status(std::string_view error_message) noexcept;

}  // namespace agenthost::mapper
