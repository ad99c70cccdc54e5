// Internal: extraction of one pi JSONL line into a flat event record (phase 1 of pi_mapper; no state changes).
//
// Only the fields the mapping needs are read with simdjson On-Demand; everything else is skipped. Strings are views
// into the parser's buffers (or the arena) and stay valid until the next parse().
#pragma once

#include "ondemand_util.hpp"

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace agenthost::mapper::detail {

enum class event_kind : std::uint8_t {
  unknown,  // a valid event of a type the mapper does not map (ignored)
  session,
  agent_start,
  agent_end,
  agent_settled,
  turn_start,
  turn_end,
  message_start,
  message_update,
  message_end,
  tool_execution_start,
  tool_execution_update,
  tool_execution_end,
  auto_retry_start,
  auto_retry_end,
  compaction_start,  // auto_compaction_start (≤ 0.7x) and compaction_start (1.x)
  compaction_end,    // auto_compaction_end and compaction_end
  extension_error,
};

enum class update_kind : std::uint8_t {
  unknown,
  text_start,
  text_delta,
  text_end,
  thinking_start,
  thinking_delta,
  thinking_end,
  toolcall_start,
  toolcall_delta,
  toolcall_end,
};

enum class block_kind : std::uint8_t { other, text, thinking, tool_call };

/// A line's `type` / an update's `assistantMessageEvent.type` (unknown for anything else).
event_kind classify_event(std::string_view type) noexcept;
update_kind classify_update(std::string_view type) noexcept;

/// One content block of a message.
struct x_block {
  block_kind kind = block_kind::other;
  std::string_view text;  // text of a text block, thinking of a thinking block
  std::string_view id;    // toolCall
  std::string_view name;  // toolCall
  bool has_arguments = false;
  nlohmann::json arguments;  // toolCall (only when requested)
};

struct x_usage {
  bool present = false;
  double input = 0, output = 0, cache_read = 0, cache_write = 0, total_tokens = 0, reasoning = 0;
  bool has_reasoning = false;
  bool has_cost = false;
  double cost_input = 0, cost_output = 0, cost_cache_read = 0, cost_cache_write = 0, cost_total = 0;
};

/// A pi message (assistant, toolResult, user, custom).
struct x_message {
  bool present = false;
  std::string_view role;
  std::string_view stop_reason;
  bool has_error_message = false;
  std::string_view error_message;
  std::string_view model;
  std::string_view tool_call_id;
  std::string_view tool_name;
  bool is_error = false;
  bool has_content = false;           // a content array/string was present
  std::vector<x_block> blocks;        // capacity reused; size is nblocks
  std::size_t nblocks = 0;
  bool has_content_json = false;      // toolResult: content as JSON (for raw_output)
  nlohmann::json content_json;
  bool has_details = false;
  nlohmann::json details;
  x_usage usage;

  void reset();
  x_block& add_block();
};

struct x_event {
  event_kind kind = event_kind::unknown;
  bool has_type = false;

  // message_update
  bool has_update = false;
  update_kind update = update_kind::unknown;
  std::int64_t content_index = -1;
  bool has_delta = false;
  std::string_view delta;
  bool has_content = false;  // text_end / thinking_end `content`
  std::string_view content;
  std::string_view update_id, update_tool_name;  // toolcall_start (≥ 0.84)
  bool has_tool_call = false;                    // toolcall_end `toolCall`
  x_block tool_call;
  bool has_snapshot = false;  // cumulative snapshot, read only when no delta/content is present
  x_message snapshot;

  // message_start / message_end / turn_end
  x_message message;
  std::vector<x_message> tool_results;  // turn_end; size is ntool_results
  std::size_t ntool_results = 0;

  // session
  std::string_view session_id, cwd;

  // tool_execution_*
  std::string_view tool_call_id, tool_name;
  bool has_args = false;
  nlohmann::json args;
  bool has_result = false;  // `result` (end) or `partialResult` (update)
  nlohmann::json result;
  // tool_execution_update (its `type` read first, once): the text of partialResult, read without building `result`
  // (see tool_result_text). When set, it is the last result the line carried. Capacity is reused across lines.
  bool has_partial_text = false;
  std::string partial_text;
  bool is_error = false;

  // agent_end / agent_settled / auto_retry_* / compaction_* / extension_error
  int will_retry = -1;  // -1 absent, 0 false, 1 true
  int aborted = -1;
  int success = -1;
  bool has_attempt = false, has_max_attempts = false, has_delay = false;
  double attempt = 0, max_attempts = 0, delay_ms = 0;
  std::string_view error_message, final_error, reason, error;

  /// Only the message_update fields may be set (lets reset() skip the rest on the hot path).
  bool only_update_fields = false;
  /// How many `type` members the line had (a second one reclassifies the event).
  int type_members = 0;

  void reset();
  [[nodiscard]] bool needs_snapshot() const noexcept;
};

/// Parses lines into x_event with one reused On-Demand parser and padded buffer.
class pi_event_parser {
 public:
  /// Parse `line`. On success `event()` describes it; on failure the line is not a valid event.
  simdjson::error_code parse(std::string_view line);
  /// True when `line` is a valid event whose `type`, its first member, names an event the mapper does not map (a
  /// status or progress event of a newer pi, …): such a line is only checked, and event() is left as it was. False
  /// says nothing: parse() the line (it may still be one, e.g. with `type` not first). Each line checked here costs
  /// what the check costs, without parse()'s per-line setup: on a stream of unmapped lines that setup was a third.
  [[nodiscard]] bool skip_unmapped(std::string_view line) const noexcept;
  /// Tells the parser which tool calls the mapper has closed: the toolResult of such a call (in turn_end, or a
  /// toolResult message_end) is then checked as to_json would read it, but its `content` and `details` are not built
  /// (the mapper ignores a closed call's result). Without it every result is built.
  void set_closed_call_check(std::function<bool(std::string_view tool_call_id)> closed) {
    call_closed_ = std::move(closed);
  }
  /// The last parse()'s event. It lives in a record shared by every pi_event_parser of the calling thread (see ev_):
  /// valid until the next parse() of any of them on this thread, so read it right after parse(), on the same thread.
  [[nodiscard]] const x_event& event() const noexcept { return *ev_; }
  [[nodiscard]] x_event& event() noexcept { return *ev_; }
  /// Whether the last parse() read its line with a byte-scan fast path (else On-Demand did): for tests.
  [[nodiscard]] bool took_fast_path() const noexcept { return took_fast_; }
  /// Bytes held for lines: the padded buffer and both parsers' capacity (for tests of the release after a huge line).
  [[nodiscard]] std::size_t bytes_held() const noexcept {
    return capacity_ + parser_.capacity() + deferred_parser_.capacity();
  }

 private:
  // Fast path for message_update lines (pi's per-token event): a strict byte-level scan that either produces the
  // exact event the On-Demand path would produce, or gives up (false) and leaves the line to it. See parse_fast().
  bool parse_fast(std::string_view line);
  bool parse_fast_other(std::string_view line);  // any other `type`; the next two: `p` after that `type` string
  bool parse_fast_ignored(std::string_view line, const char* p);
  bool parse_fast_agent_end(std::string_view line, const char* p);
  // message_start / message_end / turn_end (pi_event_fast_message.cpp).
  bool parse_fast_message_event(std::string_view line, const char* p, event_kind kind);
  const char* fast_message(const char* p, const char* end, x_message& m, bool header_only);
  const char* fast_blocks(const char* p, const char* end, x_message& m);
  const char* fast_block(const char* p, const char* end, x_block& b);
  const char* fast_tool_results(const char* p, const char* end);
  /// Whether a toolResult's content and details are checked, not built (message_start, a closed call): both paths.
  [[nodiscard]] bool result_json_ignored(const x_message& m, bool header_only) const;
  template <class Read>
  bool event_members(std::string_view line, const char* p, event_kind kind, Read&& read);
  [[nodiscard]] bool unmapped_rest_valid(std::string_view line, const char* p) const noexcept;
  bool parse_fast_tool_update(std::string_view line, const char* p);
  bool parse_fast_tool_execution(std::string_view line, const char* p, event_kind kind);
  const char* fast_tool_result(const char* p, const char* end);
  const char* fast_content_text(const char* p, const char* end, int depth);
  const char* fast_content_item(const char* p, const char* end, int depth, bool& first);
  const char* fast_update_members(const char* p, const char* end, std::string_view key, const char* line_begin,
                                  bool record_cut);
  /// `lo`: the line's start (see raw::scan_string), or nullptr.
  const char* fast_string(const char* p, const char* end, std::string_view& out, const char* lo = nullptr);
  const char* fast_cumulative_text(const char* p, const char* end, std::string& text);
  void forget_cumulative_text() noexcept;
  /// `lo`: the line's start when [p, p + n) is a part of it (see raw::is_ascii), else nullptr.
  /// Inline: often a short ASCII span (the rest of a line after a memoized prefix), where a call cost as much as the
  /// check.
  [[nodiscard]] bool valid_utf8(const char* p, std::size_t n, const char* lo = nullptr) const noexcept {
    return detail::valid_utf8(*utf8_, p, n, lo);
  }

  simdjson::error_code parse_ondemand(std::size_t size);
  simdjson::error_code parse_root(od::object root);
  simdjson::error_code parse_update(od::value v);
  /// `header_only` (message_start, whose role and model only are mapped): a toolResult's content and details are
  /// checked as to_json would read them, not built.
  simdjson::error_code parse_message(od::value v, x_message& m, bool snapshot_only, bool header_only = false);
  simdjson::error_code parse_blocks(od::value v, x_message& m, bool snapshot_only);
  simdjson::error_code parse_block(od::object o, x_block& b, bool with_arguments);
  simdjson::error_code parse_usage(od::value v, x_usage& u);
  simdjson::error_code parse_tool_results(od::value v);
  simdjson::error_code parse_deferred(std::string_view raw, x_message& m, bool snapshot_only, bool header_only);

  // Members are laid out by use: a host with 100 agents on one thread finds each agent's parser gone cold at its next
  // read, and every cache line that a message_update line touches costs a miss. The fields every line reads or
  // writes come first (four lines of the parser's seven), the On-Demand path's and tool_execution_update's after.

  // The event record is per thread, not per parser: it is scratch (filled by one parse(), read by the mapper right
  // after it), and a host with 100 agents on one thread would otherwise touch 100 cold copies of it, one per line of
  // each (reset() and the parse write several of its cache lines). Set at each parse(), so that a parser used from
  // another thread than the last one uses that thread's record.
  static x_event& thread_event();
  x_event* ev_ = &thread_event();
  // Fast path: unescaped strings are written to buffer_ (unused by that path otherwise) from scratch_ on.
  char* scratch_ = nullptr;
  bool took_fast_ = false;
  const simdjson::implementation* utf8_ = utf8_kernel();  // for validate_utf8 without a dispatch per line
  std::unique_ptr<char[]> buffer_;
  std::size_t capacity_ = 0;
  // Keys are not ordered in JSON: an object met before the field that says whether it is needed (a `partial`
  // before `delta`, a `message` before `type`) is remembered as raw JSON and parsed afterwards if needed, with a
  // second parser (pi itself always writes `type` and `delta` first, so this is the unusual path).
  std::string_view deferred_partial_;
  std::string_view deferred_message_;
  // Fast path memo: the longest prefix of the last fully scanned message_update line that ends at its `delta` value,
  // with the update fields read before that point. A line with the same prefix resumes the scan there (the state of
  // the scan is a function of the bytes before it, which were validated with that line).
  struct cut_point {
    std::size_t offset = 0;
    update_kind update = update_kind::unknown;
    std::int64_t content_index = -1;
  };
  cut_point cut_{};
  cut_point memo_{};
  // This line's assistantMessageEvent.partial as skip_value() accepted it (empty: none): a `message` with the same
  // bytes is the same valid value (see parse_fast).
  std::string_view skipped_partial_;
  std::string memo_prefix_;
  string_arena arena_;

  // Fast path memo of tool_execution_update: the last first text item of a partialResult, as its raw body (the bytes
  // between its quotes) and its unescaped text. partialResult is cumulative, so the next update's text usually starts
  // with the same bytes: only what follows them is scanned and unescaped (see fast_cumulative_text).
  std::string text_memo_raw_;
  std::string text_memo_text_;

  od::parser parser_;
  od::parser deferred_parser_;
  bool partial_text_allowed_ = true;  // off while re-reading a line whose `type` changed after a partialResult
  std::function<bool(std::string_view)> call_closed_;
};

}  // namespace agenthost::mapper::detail
