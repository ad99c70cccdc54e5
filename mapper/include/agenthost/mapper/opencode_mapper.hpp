// agenthost/mapper/opencode_mapper.hpp — maps `opencode run --format json` JSONL (checked against opencode-ai 1.18.33)
// to the message contract.
//
//   agenthost::mapper::opencode_mapper mapper{{.thinking = agenthost::mapper::thinking_mode::buffered}};
//   std::vector<agenthost::transport::message> out;
//   for (each stdout line) mapper.on_line(line, out);     // assistant text, tool.*, thoughts… as they happen
//   mapper.finish(run_end{.status = exit_status}, out);     // exactly one terminal.* (last)
//
// OpenCode prints whole message parts, no deltas: each `text` part becomes one `assistant` message (its whole text),
// each `reasoning` part one `assistant.thought`, each `tool_use` part (printed once the tool finished) a tool.call
// followed by its tool.completed / tool.failed. It prints no init and no final event: the session comes from the first
// `sessionID`, and the run is over after a `step_finish` whose reason is given and is neither `tool-calls` nor
// `unknown`, of a step in which opencode ran no tool (opencode calls the model again after those), or an `error`.
// Details and the terminal decision order are in docs/contract.md ("OpenCode mapping").
//
// Pure: no I/O, no clock, no threads. Every line is read with simdjson On-Demand (one parser and one padded buffer
// reused for the mapper's lifetime); nlohmann::json is built only for emitted content (tool input, metadata). Work is
// O(total input); memory is O(longest line + the text of the current step + held thinking + the ids of the current
// step's parts + the ids of the tool calls), never O(stream bytes). A line repeated within its step adds nothing.
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

struct opencode_mapper_options {
  /// When assistant.thought is released: buffered (default; when the final step ends) or stream (per reasoning part).
  thinking_mode thinking = thinking_mode::buffered;
  /// How many invalid stdout lines are kept for `invalid_output_lines` (later ones are only counted). Default: 20.
  std::size_t max_invalid_lines = 20;
  /// Bytes kept per invalid line (cut on a UTF-8 boundary, "…" appended when cut). Default: 4096.
  std::size_t max_invalid_line_bytes = 4096;
  /// The session the caller asked opencode to continue (`--session`); the session message is then session.resumed.
  /// Default: none.
  std::optional<std::string> requested_session_id{};
  /// Agent name reported in session.* `agent` and in terminal texts. Default: "opencode".
  std::string agent = "opencode";
  /// Append a text part to an `assistant` message at the end of the output vector instead of adding one (the texts
  /// of one batch of lines become one message; nothing is held back). Default: false; the provider turns it on.
  bool merge_adjacent_text = false;
  /// How many buffered thoughts one call appends when the final step ends; take_more() appends the rest, the same number
  /// at a time (a caller that does not ask gets them, first, from its next call of on_line(), on_oversize_line() or
  /// finish()). 0: all at once. Default: 0; the provider sets 8, the number of messages of a type a mapper keeps for
  /// reuse (recycle), so that a final step of thousands of thoughts is handed on in slices the next slice refills.
  std::size_t thought_release_batch = 0;
};

class opencode_mapper final : public event_mapper {
 public:
  explicit opencode_mapper(opencode_mapper_options options = {});
  ~opencode_mapper() override;
  opencode_mapper(opencode_mapper&&) noexcept;
  opencode_mapper& operator=(opencode_mapper&&) noexcept;
  opencode_mapper(const opencode_mapper&) = delete;
  opencode_mapper& operator=(const opencode_mapper&) = delete;

  void on_line(std::string_view line, std::vector<transport::message>& out) override;
  void on_oversize_line(std::string_view head, std::size_t total_bytes,
                        std::vector<transport::message>& out) override;
  /// True after a `step_finish` with a final reason (normally `stop`; not `tool-calls`, `unknown` or none) of a step
  /// that ran no tool of opencode's (one the provider ran or the user interrupted does not count), or after an `error`;
  /// false again at a new `step_start`.
  [[nodiscard]] bool agent_finished() const noexcept override;
  /// Decides the terminal: cancelled → terminal.cancelled; timeout → failed/timeout; signal → failed/signaled; then
  /// an `error` event → failed/agent_error (http_status, retryable; whatever the exit code: opencode exits 1 after
  /// it); a non-zero exit → failed/exited; a final `step_finish` → completed (text = the texts of the last step);
  /// otherwise failed/no_terminal_event. Idempotent: a second call appends nothing.
  void finish(const run_end& end, std::vector<transport::message>& out) override;
  [[nodiscard]] const mapper_stats& stats() const noexcept override;
  void recycle(std::vector<transport::message>& used) override;
  /// The next thought_release_batch thoughts of a release cut short; false when none is under way.
  bool take_more(std::vector<transport::message>& out) override;

  /// The session id from the first event that carried one (empty before it).
  [[nodiscard]] const std::string& session_id() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace agenthost::mapper
