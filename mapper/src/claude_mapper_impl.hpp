// Internal: the Claude Code mapper's state (claude_mapper::impl), shared by claude_mapper.cpp (the line events, the
// result, finish and the public class) and claude_mapper_stream.cpp (one API message as it streams: content blocks,
// text deltas, the replay of an abandoned attempt, the full `assistant` frames).
#pragma once

#include <agenthost/mapper/claude_mapper.hpp>

#include "claude_event.hpp"
#include "mapper_core.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agenthost::mapper {

using detail::claude::api_kind;
using detail::claude::block_kind;
using detail::claude::delta_kind;
using detail::claude::line_kind;
using detail::claude::x_block;
using detail::claude::x_event;
using nlohmann::json;
using transport::message;
using transport::message_type;

struct claude_mapper::impl {
  // A content block index above this is not believed (a hostile line must not make the mapper allocate gigabytes).
  static constexpr double kMaxBlockIndex = static_cast<double>(detail::claude::kMaxBlockPosition);
  // How many recent line uuids are remembered to drop a repeated line (bounded: O(1) memory).
  static constexpr std::size_t kRecentUuids = 16;

  explicit impl(claude_mapper_options o)
      : options(std::move(o)),
        core(detail::core_options_of(options)) {}

  // One content block of the current API message, by index.
  struct block_state {
    block_kind kind = block_kind::other;
    bool started = false;
    bool framed = false;  // its full `assistant` frame arrived
    bool diverged = false;
    bool thought_done = false;  // thinking: completed (held or released, or dropped)
    std::string text;           // text: what was emitted for it; thinking: the thinking so far
    std::size_t received = 0;   // text: bytes received as deltas
    std::string tool_id, tool_name, partial_json;
  };

  struct held_thought {
    std::string text;
  };

  struct usage4 {
    long long input = 0, output = 0, cache_read = 0, cache_write = 0;
    bool any = false;
  };

  struct result_info {
    std::string subtype, text, stop_reason, terminal_reason, errors;
    bool has_text = false;
    std::optional<bool> is_error;
    std::optional<int> api_error_status;
    std::optional<double> num_turns, cost;
    bool has_usage = false;
    usage4 usage;
  };

  claude_mapper_options options;
  detail::mapper_core core;
  detail::claude::event_parser parser;

  std::string msg_id;  // the current API message
  bool msg_streamed = false;
  std::vector<block_state> blocks;
  int open_block = -1;
  std::string stop_reason;  // of the current API message

  std::vector<held_thought> held;  // buffered thinking, in order

  // Text streamed by an API message that Claude abandoned (a cut stream it retries): the retry's text that repeats it
  // is not emitted again.
  std::string replay;
  std::size_t replay_pos = 0;
  bool replay_in_retry = false;  // a message started after the replay was armed: the retry

  usage4 closed_usage, message_usage;
  std::optional<result_info> result;
  std::string last_api_error;  // the text of Claude's last synthetic API-error message
  bool text_diverged = false;
  bool finished = false;

  // Hashes of the most recent line uuids (a full compare only on a hash match: this runs for every line).
  std::array<std::size_t, kRecentUuids> recent_hashes{};
  std::array<std::string, kRecentUuids> recent_uuids;
  std::size_t next_uuid = 0;

  // ---- helpers ------------------------------------------------------------------------------------------------------
  block_state* block_at(const std::optional<double>& index, bool create);
  bool repeated_line(std::string_view uuid);
  void release_held(std::vector<message>& out);
  // A thinking block is complete: released now (stream) or held until the final message ends (buffered).
  void complete_thought(block_state& b, std::vector<message>& out);
  // Completes what the current message left open (thinking without a frame) — unless it was abandoned from `from`.
  void close_message(std::vector<message>& out, std::size_t abandoned_from = std::string::npos);
  void fold_message_usage();
  static void take_usage(const detail::claude::x_usage& u, usage4& into);
  void emit_tool_call(block_state& b, std::vector<message>& out, const json* input);
  // Streamed text of a block: emitted as it comes, except the part that replays an abandoned attempt's text.
  void text_delta(block_state& b, std::string_view d, std::vector<message>& out);
  void end_replay();
  // The retry's text differs from (or ends before) the abandoned attempt's: that earlier text is void. Say so, then
  // emit the retry's text from its start.
  void replay_diverged(block_state& b, std::vector<message>& out);
  // The warning that the abandoned attempt's text is void; ends the replay.
  void retract_replay(std::vector<message>& out);
  // The retry ended (its message stopped, another began, the result came, the stream ended) before it repeated all
  // of the abandoned text: that text is void, and what the retry held back of it is its own text.
  void settle_retry(std::vector<message>& out);
  void frame_text(block_state& b, std::size_t index, std::string_view f, std::vector<message>& out);

  // ---- events -------------------------------------------------------------------------------------------------------
  void apply(const x_event& ev, std::vector<message>& out);
  void on_system(const x_event& ev, std::vector<message>& out);
  void on_api_event(const x_event& ev, std::vector<message>& out);
  void on_frame(const x_event& ev, std::vector<message>& out);
  void on_user(const x_event& ev, std::vector<message>& out);
  void on_result(const x_event& ev, std::vector<message>& out);

  // ---- finish -------------------------------------------------------------------------------------------------------
  void set_usage();
  detail::terminal_draft from_result(const run_end& end) const;
  void finish(const run_end& end, std::vector<message>& out);
};

}  // namespace agenthost::mapper
