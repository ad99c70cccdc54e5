// Internal: extraction of one `codex exec --json` line into a flat event record (phase 1 of codex_mapper; no mapping
// state). The lines that make up nearly all of a run go through a strict byte scan; everything else (and anything the
// scan does not handle exactly as On-Demand would) through simdjson On-Demand from scratch, which decides. Strings are
// views into the line, the parser's buffers or its arena: valid until the next parse() and while the line is.
// nlohmann::json is built only for the members the mapper emits as JSON (changes, arguments, result, error, action,
// items).
#pragma once

#include "ondemand_util.hpp"

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <optional>
#include <string>
#include <string_view>

namespace agenthost::mapper::detail::codex {

// One parsed item (fields of all item types; what an item type does not have stays empty).
struct x_item {
  std::string_view id, type, text, message, command, aggregated_output, status, server, tool, query;
  bool has_id = false, has_type = false, has_text = false;
  std::optional<long long> exit_code{};
  nlohmann::json changes, arguments, result, error, action, items;  // null when absent

  /// As a default-constructed item, without rebuilding the JSON members that are already null.
  void reset() noexcept {
    clear_views(id, type, text, message, command, aggregated_output, status, server, tool, query);
    has_id = has_type = has_text = false;
    exit_code.reset();
    for (nlohmann::json* j : {&changes, &arguments, &result, &error, &action, &items})
      if (!j->is_null()) *j = nullptr;
  }
};

enum class event_kind { unknown, thread_started, turn_started, turn_completed, turn_failed, item_started,
                        item_updated, item_completed, error };

struct x_event {
  event_kind kind = event_kind::unknown;
  bool has_type = false;
  /// A field the mapper reads had the wrong JSON type: the line is invalid unless its type is one the mapper ignores.
  bool wrong_type = false;
  std::string_view thread_id, message, error_message;
  bool has_usage = false, has_item = false, has_error_message = false;
  long long input = 0, cached = 0, cache_write = 0, output = 0, reasoning = 0;
  x_item item;
};

/// One per mapper: the On-Demand parser, its padded buffer and the fast path's buffers are reused line after line.
class event_parser {
 public:
  /// Parses one line. SUCCESS: event() holds it. Anything else: the line is invalid (not one JSON object with a string
  /// `type` and nothing after it, a wrong field type for an event the mapper reads, invalid UTF-8…).
  simdjson::error_code parse(std::string_view line);
  [[nodiscard]] const x_event& event() const noexcept { return ev_; }
  /// When `text` is the fast path's own buffer (an item text that had escapes), swaps that buffer into `into` and
  /// returns true: the caller keeps the text without copying it (the parser refills the swapped-in buffer on a later
  /// line).
  bool take_text(std::string_view text, std::string& into) noexcept;

 private:
  bool parse_fast(std::string_view line);

  padded_line padded_;
  string_arena arena_;
  x_event ev_;
  const simdjson::implementation* utf8_ = utf8_kernel();  // for validate_utf8 without a dispatch per line
  std::string fast_text_;     // fast path: the text / aggregated_output, when it has escapes
  std::string fast_command_;  // fast path: the command, when it has escapes
  std::string fast_status_;   // fast path: the status, when it has escapes
};

}  // namespace agenthost::mapper::detail::codex
