// Internal: extraction of one `opencode run --format json` line into a flat event record (phase 1 of opencode_mapper;
// no mapping state). The part lines that make up nearly all of a run go through a strict byte scan in opencode's own
// field order; everything else (and anything the scan does not handle exactly as On-Demand would) through simdjson
// On-Demand from scratch, which decides. Strings are views into the line, the parser's buffers or its arena: valid
// until the next parse() and while the line is. nlohmann::json is built only for a tool's input and metadata.
#pragma once

#include "ondemand_util.hpp"

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <optional>
#include <string>
#include <string_view>

namespace agenthost::mapper::detail::opencode {

enum class event_kind { unknown, step_start, reasoning, text, tool_use, step_finish, error };

// One parsed line: the fields of every event type the mapper reads (what a type does not have stays empty). The plain
// values are a base of their own, reset field by field (reset()) on every line: the fast path parses into the mapper's
// one event in place, with no event built and moved per line.
struct oc_fields {
  event_kind kind = event_kind::unknown;
  bool has_type = false;
  /// A field the mapper reads had the wrong JSON type: the line is invalid unless its type is one the mapper ignores.
  bool wrong_type = false;
  std::string_view session_id;
  // part
  bool has_part = false, has_text = false;
  std::string_view part_id, message_id, text, tool, call_id, reason;
  bool provider_executed = false;  // part.metadata.providerExecuted (a tool the model's provider ran, not opencode)
  // part.state (tool_use)
  std::string_view status, output, error_text, title;
  // part.tokens / part.cost (step_finish)
  bool has_tokens = false;
  long long input_tokens = 0, output_tokens = 0, reasoning_tokens = 0, cache_read = 0, cache_write = 0;
  std::optional<double> cost{};
  // error
  bool has_error = false;
  std::string_view error_name, error_message, response_body;
  std::optional<long long> status_code{};
  std::optional<bool> is_retryable{};

  /// Back to the values above (a field added here is reset here too). Field by field: assigning `oc_fields{}` builds
  /// a temporary with `rep stos` and copies it with `rep movs`, whose start-up cost was a tenth of a short line's.
  void reset() noexcept {
    kind = event_kind::unknown;
    has_type = wrong_type = has_part = has_text = has_tokens = has_error = provider_executed = false;
    clear_views(session_id, part_id, message_id, text, tool, call_id, reason, status, output, error_text, title,
                error_name, error_message, response_body);
    input_tokens = output_tokens = reasoning_tokens = cache_read = cache_write = 0;
    cost.reset();
    status_code.reset();
    is_retryable.reset();
  }
};

struct oc_event : oc_fields {
  // part.state.input / .metadata of a tool_use; null when absent. The fast path refills them in place, line after
  // line, and leaves them as they are on the other events (which do not read them); the On-Demand path resets them.
  nlohmann::json input, metadata;
};

/// One per mapper: the On-Demand parser, its padded buffer and the fast path's buffers are reused line after line.
class event_parser {
 public:
  /// Parses one line. SUCCESS: event() holds it. Anything else: the line is invalid (not one JSON object with a string
  /// `type` and nothing after it, a wrong field type for an event the mapper reads, a part event without its part…).
  simdjson::error_code parse(std::string_view line);
  [[nodiscard]] const oc_event& event() const noexcept { return ev; }

 private:
  simdjson::error_code parse_tokens(od::object& obj);
  simdjson::error_code parse_state(od::object& obj);
  simdjson::error_code parse_part(od::object& obj);
  simdjson::error_code parse_part_metadata(od::value& v);
  simdjson::error_code parse_error(od::object& obj);
  bool parse_fast(std::string_view line);
  bool accept_fast(std::string_view line, const char* p, event_kind kind);

  // One On-Demand parser and one padded buffer for the mapper's lifetime.
  padded_line padded;
  string_arena arena;
  oc_event ev;
  const simdjson::implementation* utf8 = utf8_kernel();  // for validate_utf8 without a dispatch per line
  // The fast path's strings that have escapes, unescaped (the others are views of the line).
  std::string fast_session, fast_part_session, fast_part_id, fast_message_id, fast_text, fast_reason;
  std::string fast_tool, fast_call, fast_status, fast_title;
};

}  // namespace agenthost::mapper::detail::opencode
