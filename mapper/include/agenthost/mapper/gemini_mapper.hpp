// agenthost/mapper/gemini_mapper.hpp — maps Gemini CLI's `--output-format stream-json` JSONL to the message contract.
//
//   agenthost::mapper::gemini_mapper mapper{{.thinking = agenthost::mapper::thinking_mode::buffered}};
//   std::vector<agenthost::transport::message> out;
//   for (each stdout line) mapper.on_line(line, out);     // assistant deltas, tool.*, status… as they happen
//   mapper.finish(run_end{.status = exit_status}, out);     // exactly one terminal.* (last)
//
// Gemini CLI (`@google/gemini-cli`, checked against 0.61.0) prints one JSON object per line: `init` (session id,
// model), `message` (role user = the prompt echoed, role assistant = one streamed text part, `delta: true`),
// `tool_use`, `tool_result`, `error` (severity warning|error, not final) and `result` (status success|error, stats) as
// its final event. Its stream-json has no event for thoughts: nothing is ever emitted as assistant.thought (the
// `thinking` option is accepted for symmetry with the other mappers).
//
// Pure: no I/O, no clock, no threads. Lines are read with simdjson On-Demand (one parser and one padded buffer reused
// for the mapper's lifetime), except assistant text lines of gemini's exact shape (nearly all lines of a run), which a
// strict byte scan reads (mapper/src/raw_scan.hpp: full UTF-8 validation, every string checked) — it accepts only
// lines On-Demand accepts too and yields the same event, leaving anything unusual to On-Demand. Only the fields the
// mapping needs are read, and nlohmann::json is built only for emitted content (tool parameters, a tool result's raw
// object). Work is O(total input); memory is O(longest line + the text of the current turn + open tool calls + the
// ids of the last 1,024 closed calls), never O(stream bytes).
//
// Validation: a line is an event when it is a single JSON object (nothing but whitespace after it) whose `type` is a
// string and whose required fields are there with their JSON type (`message`: role and content strings; `tool_use`:
// tool_id and tool_name; `tool_result`: tool_id and status; `error`: message; `result`: status; `init`: session_id).
// An optional field of another type (a null `model`, a string token count) is treated as absent. Invalid lines are
// counted, kept (bounded) and reported in `invalid_output_lines`; they never stop the stream. Unknown event types and
// unknown fields are ignored. Details: docs/contract.md, "Gemini CLI mapping".
//
// Thread safety: one instance, one thread at a time.
#pragma once

#include <agenthost/mapper/event_mapper.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agenthost::mapper {

struct gemini_mapper_options {
  /// When assistant.thought is released. Default: buffered. Gemini CLI's stream-json carries no thoughts, so this
  /// changes nothing today; kept so that every mapper takes the same options.
  thinking_mode thinking = thinking_mode::buffered;
  /// How many invalid stdout lines are kept for `invalid_output_lines` (later ones are only counted). Default: 20.
  std::size_t max_invalid_lines = 20;
  /// Bytes kept per invalid line (cut on a UTF-8 boundary, "…" appended when cut). Default: 4096.
  std::size_t max_invalid_line_bytes = 4096;
  /// The session id the caller asked gemini to resume (`--resume ID`); the `init` event is then reported as
  /// session.resumed with `resume: "resumed"` (same id) or `"restarted"` (another id). Default: none.
  std::optional<std::string> requested_session_id{};
  /// Agent name reported in session.* `agent` and in texts. Default: "gemini".
  std::string agent = "gemini";
  /// Append a text delta to an `assistant` message at the end of the output vector instead of adding one (the deltas
  /// of one batch of lines become one message; nothing is held back). Default: false; the provider turns it on.
  bool merge_adjacent_text = false;
};

class gemini_mapper final : public event_mapper {
 public:
  explicit gemini_mapper(gemini_mapper_options options = {});
  ~gemini_mapper() override;
  gemini_mapper(gemini_mapper&&) noexcept;
  gemini_mapper& operator=(gemini_mapper&&) noexcept;
  gemini_mapper(const gemini_mapper&) = delete;
  gemini_mapper& operator=(const gemini_mapper&) = delete;

  void on_line(std::string_view line, std::vector<transport::message>& out) override;
  void on_oversize_line(std::string_view head, std::size_t total_bytes,
                        std::vector<transport::message>& out) override;
  /// True once gemini printed its `result` event (it prints nothing after it).
  [[nodiscard]] bool agent_finished() const noexcept override;
  /// Decides the terminal: cancelled → terminal.cancelled; timeout → failed/timeout; signal → failed/signaled; then
  /// the `result` event: success (and exit 0) → completed; error → failed/agent_error (text = the error message,
  /// http_status, retryable); a non-zero exit without a result → failed/exited; exit 0 without one →
  /// failed/no_terminal_event. Idempotent.
  void finish(const run_end& end, std::vector<transport::message>& out) override;
  [[nodiscard]] const mapper_stats& stats() const noexcept override;
  void recycle(std::vector<transport::message>& used) override;

  /// The session id from gemini's `init` event (empty before it).
  [[nodiscard]] const std::string& session_id() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// The HTTP status of a Gemini CLI API error, from the most to the least direct evidence: a status at the start of
/// the message ("429 Too Many Requests"), the `"code":NNN` of the API's JSON error body that gemini embeds in the
/// message (`[API Error: {"error":{"code":500,…}}]`), and — only when the message carries none — the exit code,
/// which gemini 0.61.0 sets to the error's numeric code, so the kernel keeps it modulo 256: codes 144–255 are read
/// back as 400–511 (none of gemini's own exit codes — 1, 41–55, 130 — falls there; 512–599 cannot be told apart
/// from ordinary codes and are not guessed).
[[nodiscard]] std::optional<int> gemini_http_status(std::string_view error_message, std::optional<int> exit_code) noexcept;

/// Whether a Gemini CLI error is worth retrying by the caller (a hint): HTTP 408, 429 and 5xx, a cut or failed
/// connection ("terminated", "fetch failed", ECONNRESET, ETIMEDOUT, socket hang up…), quota/rate-limit and overload
/// texts. Never for gemini's fatal error types (authentication, input, config, sandbox, turn limit, cancellation,
/// tool execution).
[[nodiscard]] bool gemini_error_is_retryable(std::string_view error_message, std::string_view error_type,
                                             std::optional<int> http_status) noexcept;

}  // namespace agenthost::mapper
