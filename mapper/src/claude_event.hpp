// Internal: extraction of one Claude Code stream-json line into a flat event record (phase 1 of claude_mapper; no
// mapping state). Only the fields the mapping needs are read with simdjson On-Demand (one parser and one padded
// buffer reused for the parser's lifetime); everything else is skipped. Strings are views into the parser's buffers
// (or its arena) and stay valid until the next parse(). nlohmann::json is built only for tool input/output.
//
// Stream lines — `content_block_delta` (one per token), `content_block_start`/`_stop`, `message_start`/`_delta`/`_stop`
// — and the system lines Claude prints beside them (`thinking_tokens`, `status`), in the exact compact form Claude
// writes, first go through a strict byte scan (claude_event_fast.cpp, on raw_scan.hpp: UTF-8 validation of the whole
// line, every string closed and free of raw control characters, the grammar of every skipped value, nothing after the
// object). The scan reads the same fields with the same rules; any
// line it does not handle exactly as the On-Demand path would (another shape, an escaped key, a repeated or unusual
// root key, a non-canonical number…) goes through simdjson On-Demand from scratch, which decides. So the accepted set
// and the events are the same either way.
//
// Field rule: a field the mapper reads that is `null` counts as absent (Claude writes `stop_reason: null`,
// `api_error_status: null`, `parent_tool_use_id: null`…); any other unexpected JSON type makes the line invalid.
#pragma once

#include "ondemand_util.hpp"

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace agenthost::mapper::detail::claude {

enum class line_kind : std::uint8_t {
  unknown,       // a valid event of a type the mapper does not map (ignored)
  system,        // system/<subtype>
  stream_event,  // a raw Anthropic API streaming event (`event`)
  assistant,     // a full assistant frame (`message`)
  user,          // a user message: tool results, interruption notes
  result,        // the final event
};

enum class api_kind : std::uint8_t {
  unknown,
  message_start,
  content_block_start,
  content_block_delta,
  content_block_stop,
  message_delta,
  message_stop,
};

enum class delta_kind : std::uint8_t { unknown, text, thinking, input_json, signature };

enum class block_kind : std::uint8_t { other, text, thinking, tool_use, tool_result };
/// The kind of a content block from its `type` (both parsing paths).
block_kind classify_block(std::string_view t) noexcept;

/// Anthropic usage numbers (message_start.message.usage, message_delta.usage, result.usage).
struct x_usage {
  bool present = false;
  std::optional<double> input, output, cache_read, cache_write;
};

/// The last content-block position the mapper follows in an assistant message (a hostile index or content array must
/// not make it allocate gigabytes). Past it, a message's blocks are kept only if they are text or tool results, which
/// are read wherever they stand.
inline constexpr std::size_t kMaxBlockPosition = 4096;
/// How many block slots a parser keeps between lines (a message has a few; one with more gives its slots back).
inline constexpr std::size_t kKeptBlocks = 64;

/// One content block of a message (assistant frame, user message, content_block_start).
struct x_block {
  block_kind kind = block_kind::other;
  std::string_view text;      // text: text; thinking: thinking
  std::string_view id;        // tool_use: id; tool_result: tool_use_id
  std::string_view name;      // tool_use
  bool has_input = false;     // tool_use: `input` (converted)
  nlohmann::json input;       // tool_use input; tool_result content (as sent)
  bool is_error = false;      // tool_result
};

struct x_event {
  line_kind kind = line_kind::unknown;
  bool has_type = false;
  std::string_view subtype;     // system, result
  std::string_view session_id;
  std::string_view uuid;
  bool from_subagent = false;   // parent_tool_use_id is a string (a sub-agent's event)

  // system/init
  std::string_view model, cwd;
  // system/api_retry
  std::optional<double> attempt, max_retries, retry_delay_ms, error_status;
  std::string_view error;

  // stream_event
  api_kind api = api_kind::unknown;
  std::optional<double> index;
  delta_kind delta = delta_kind::unknown;
  std::string_view delta_text;  // text / thinking / partial_json
  std::string_view api_message_id;  // message_start: message.id
  std::string_view api_model;       // message_start: message.model
  std::string_view stop_reason;     // message_delta: delta.stop_reason; result: stop_reason
  x_block content_block;            // content_block_start
  x_usage usage;                    // message_start / message_delta / result
  bool abandoned = false;           // message_stop with abandoned_blocks
  std::optional<double> abandoned_from;
  std::string_view abandoned_message_id;

  // assistant / user
  bool has_message = false;
  std::string_view message_id;
  std::string_view message_model;
  std::vector<x_block> blocks;  // reused between lines (the first kKeptBlocks); `nblocks` are valid
  std::size_t nblocks = 0;
  bool is_api_error_message = false;
  bool has_tool_use_result = false;
  nlohmann::json tool_use_result;

  // result
  std::optional<bool> is_error;
  bool has_result_text = false;
  std::string_view result_text;
  std::optional<double> api_error_status;
  std::string_view terminal_reason;
  std::optional<double> num_turns;
  std::optional<double> total_cost_usd;
  std::string errors;  // `errors` strings joined with "; "

  /// Set when the On-Demand path read the line: everything may have been set. The fast path sets only kind, has_type,
  /// subtype, session_id, uuid, from_subagent, api, index, delta and delta_text, so reset() clears the rest only after
  /// an On-Demand line (reset is per-token work).
  bool cold_dirty = true;

  void reset();
};

class event_parser {
 public:
  /// `fast_path` = false: every line through On-Demand (for the tests that check both paths give the same events).
  explicit event_parser(bool fast_path = true);
  /// Parses one line. SUCCESS: event() holds it. Anything else: the line is invalid (not one JSON object with a string
  /// `type` and nothing after it, a wrong field type, invalid UTF-8, too deep a value…).
  simdjson::error_code parse(std::string_view line);
  [[nodiscard]] const x_event& event() const noexcept { return ev_; }
  /// Whether the last line was read by the byte-scan fast path (for tests).
  [[nodiscard]] bool took_fast_path() const noexcept { return took_fast_; }

 private:
  bool parse_fast(std::string_view line);
  const char* fast_members(const char* p, const char* end);
  const char* fast_string(const char* p, const char* end, std::string_view& out);
  const char* fast_opt_string(const char* p, const char* end, std::string_view& out);
  const char* fast_usage(const char* p, const char* end, x_usage& u);
  const char* fast_object(const char* p, const char* end,
                          const std::function<const char*(std::string_view key, const char* p)>& member);
  simdjson::error_code parse_root(od::object root);
  // parse_root failed with `e`: success (an ignored line of kind unknown) when `line` is valid JSON of an unknown
  // `type`, else `e`.
  simdjson::error_code unknown_kind_or(simdjson::error_code e, std::string_view line);
  simdjson::error_code parse_api_event(od::value v);
  simdjson::error_code parse_delta(od::value v);
  simdjson::error_code parse_message(od::value v);
  simdjson::error_code parse_block(od::value v, x_block& b);
  simdjson::error_code parse_usage(od::value v, x_usage& u);
  simdjson::error_code parse_abandoned(od::value v);
  simdjson::error_code parse_errors(od::value v);

  bool fast_path_ = true;
  bool took_fast_ = false;
  const simdjson::implementation* utf8_ = utf8_kernel();  // for validate_utf8 without a dispatch per line
  // The session id of the last line whose members the fast path read (a string body without escapes or control
  // characters): the same bytes followed by a quote need no new scan.
  std::string last_session_;
  padded_line padded_;
  string_arena arena_;
  x_event ev_;
};

}  // namespace agenthost::mapper::detail::claude
