// The byte-scan fast path of the Claude Code event parser (see claude_event.hpp): the stream lines Claude writes in
// their exact compact form, read with the same rules as the On-Demand path in claude_event.cpp, which decides for
// every line this scan does not handle.
#include "claude_event.hpp"

#include "raw_scan.hpp"

#include <cstring>

namespace agenthost::mapper::detail::claude {

namespace {

// Root keys the On-Demand path reads (besides the ones fast_members handles): a line that has one of them is left to it.
bool read_by_parse_root(std::string_view k) noexcept {
  static constexpr std::string_view keys[] = {
      "type",  "event",     "subtype",        "message",         "tool_use_result", "is_api_error_message",
      "abandoned_blocks",   "model",          "cwd",             "attempt",         "max_retries",
      "retry_delay_ms",     "error_status",   "error",           "is_error",        "result",
      "api_error_status",   "stop_reason",    "terminal_reason", "num_turns",       "total_cost_usd",
      "usage",              "errors"};
  for (auto key : keys)
    if (k.size() == key.size() && k == key) return true;
  return false;
}

}  // namespace

// A string at `p` without escapes (those go to On-Demand): its body, and the position after it; nullptr otherwise.
const char* event_parser::fast_string(const char* p, const char* end, std::string_view& out) {
  if (p == end || *p != '"') return nullptr;
  const char* body_end = nullptr;
  bool escaped = false;
  const char* q = raw::scan_string(p, end, body_end, escaped);
  if (q == nullptr || escaped) return nullptr;
  out = std::string_view(p + 1, static_cast<std::size_t>(body_end - p - 1));
  return q;
}

// A string without escapes, or null (absent: `out` unchanged).
const char* event_parser::fast_opt_string(const char* p, const char* end, std::string_view& out) {
  if (raw::starts_with(p, end, "null")) return p + 4;
  return fast_string(p, end, out);
}

// An object at `p`: `member(key, value position)` reads or skips each value and returns the position after it
// (nullptr: not handled). Keys with escapes are not handled. Returns the position after the closing brace.
const char* event_parser::fast_object(const char* p, const char* end,
                                      const std::function<const char*(std::string_view key, const char* p)>& member) {
  if (p == end || *p != '{') return nullptr;
  ++p;
  if (p != end && *p == '}') return p + 1;
  for (;;) {
    std::string_view key;
    p = fast_string(p, end, key);
    if (p == nullptr || p == end || *p != ':') return nullptr;
    p = member(key, p + 1);
    if (p == nullptr || p == end) return nullptr;
    if (*p == '}') return p + 1;
    if (*p != ',') return nullptr;
    ++p;
  }
}

// Anthropic usage (message_start.message.usage, message_delta.usage): the four counts as canonical integers or null.
const char* event_parser::fast_usage(const char* p, const char* end, x_usage& u) {
  u.present = true;
  return fast_object(p, end, [&](std::string_view key, const char* v) -> const char* {
    std::optional<double>* target = key == "input_tokens"                  ? &u.input
                                    : key == "output_tokens"               ? &u.output
                                    : key == "cache_read_input_tokens"     ? &u.cache_read
                                    : key == "cache_creation_input_tokens" ? &u.cache_write
                                                                           : nullptr;
    if (target == nullptr) return raw::validate_value(v, end, 3);
    if (raw::starts_with(v, end, "null")) return v + 4;
    std::int64_t n = 0;
    const char* q = raw::parse_small_int(v, end, n);
    if (q != nullptr) *target = static_cast<double>(n);
    return q;
  });
}

// The remaining members of the root object, from just after a value: `,"key":value` … `}`. Reads session_id, uuid and
// parent_tool_use_id; checks the grammar of every other value. Returns the position after the closing brace.
const char* event_parser::fast_members(const char* p, const char* end) {
  // Claude Code writes these three first, in this order, on nearly every line: read them without the generic loop
  // (the session id is the same bytes line after line). Any other order falls through to the loop.
  static constexpr char kSession[] = R"(,"session_id":")";
  static constexpr char kParent[] = R"(,"parent_tool_use_id":null)";
  static constexpr char kUuid[] = R"(,"uuid":)";
  if (raw::starts_with(p, end, kSession)) {
    const char* body = p + (sizeof kSession - 1);
    const std::size_t n = last_session_.size();
    if (n != 0 && static_cast<std::size_t>(end - body) > n && body[n] == '"' &&
        raw::equal_bytes(body, last_session_.data(), n)) {
      ev_.session_id = std::string_view(body, n);
      p = body + n + 1;
    } else {
      p = fast_string(body - 1, end, ev_.session_id);
      if (p == nullptr) return nullptr;
      last_session_.assign(ev_.session_id);
    }
    if (raw::consume(p, end, kParent)) {
      ev_.from_subagent = false;
      if (raw::consume(p, end, kUuid)) {
        p = fast_string(p, end, ev_.uuid);
        if (p == nullptr) return nullptr;
      }
    }
  }
  for (;;) {
    if (p == end) return nullptr;
    if (*p == '}') return p + 1;
    if (*p != ',') return nullptr;
    std::string_view key;
    p = fast_string(p + 1, end, key);
    if (p == nullptr || p == end || *p != ':') return nullptr;
    ++p;
    if (key == "session_id") {
      p = fast_string(p, end, ev_.session_id);
    } else if (key == "uuid") {
      p = fast_string(p, end, ev_.uuid);
    } else if (key == "parent_tool_use_id") {
      if (raw::starts_with(p, end, "null")) {
        p += 4;
        ev_.from_subagent = false;
      } else {
        std::string_view parent;
        p = fast_string(p, end, parent);
        ev_.from_subagent = !parent.empty();
      }
    } else if (read_by_parse_root(key)) {
      return nullptr;
    } else {
      p = raw::validate_value(p, end, 1);
    }
    if (p == nullptr) return nullptr;
  }
}

bool event_parser::parse_fast(std::string_view line) {
  static constexpr char kDelta[] = R"({"type":"stream_event","event":{"type":"content_block_delta","index":)";
  static constexpr char kSystem[] = R"({"type":"system","subtype":)";
  static constexpr char kBlockStop[] = R"({"type":"stream_event","event":{"type":"content_block_stop","index":)";
  static constexpr char kMessageStop[] = R"({"type":"stream_event","event":{"type":"message_stop"})";
  static constexpr char kBlockStart[] =
      R"({"type":"stream_event","event":{"type":"content_block_start","index":)";
  static constexpr char kMessageDelta[] = R"({"type":"stream_event","event":{"type":"message_delta","delta":)";
  static constexpr char kMessageStart[] =
      R"({"type":"stream_event","event":{"type":"message_start","message":)";
  const char* p = line.data();
  const char* const end = p + line.size();
  if (raw::starts_with(p, end, kDelta)) {  // the most frequent line first
    std::int64_t index = 0;
    p = raw::parse_small_int(p + (sizeof kDelta - 1), end, index);
    static constexpr char kDeltaType[] = R"(,"delta":{"type":")";
    if (p == nullptr || !raw::consume(p, end, kDeltaType)) return false;
    static constexpr char kText[] = R"(text_delta","text":)";
    static constexpr char kThinking[] = R"(thinking_delta","thinking":)";
    static constexpr char kInput[] = R"(input_json_delta","partial_json":)";
    static constexpr char kSignature[] = R"(signature_delta","signature":)";
    if (raw::consume(p, end, kText)) {
      ev_.delta = delta_kind::text;
    } else if (raw::consume(p, end, kThinking)) {
      ev_.delta = delta_kind::thinking;
    } else if (raw::consume(p, end, kInput)) {
      ev_.delta = delta_kind::input_json;
    } else if (raw::consume(p, end, kSignature)) {
      ev_.delta = delta_kind::signature;  // read (and checked) like a text, not used
    } else {
      return false;
    }
    // The delta text: escapes are common (newlines, quotes), so they are handled here.
    if (p == end || *p != '"') return false;
    const char* body_end = nullptr;
    bool escaped = false;
    const char* q = raw::scan_string(p, end, body_end, escaped);
    if (q == nullptr) return false;
    if (escaped) {
      std::string text;
      if (!raw::escapes_valid(p + 1, body_end) ||
          !lenient_unescape_append(std::string_view(p + 1, static_cast<std::size_t>(body_end - p - 1)), text))
        return false;
      ev_.delta_text = arena_.keep(std::move(text));
    } else {
      ev_.delta_text = std::string_view(p + 1, static_cast<std::size_t>(body_end - p - 1));
    }
    if (ev_.delta == delta_kind::signature) ev_.delta_text = {};  // as On-Demand, which does not read it
    p = q;
    if (!raw::consume(p, end, "}}")) return false;
    p = fast_members(p, end);
    ev_.kind = line_kind::stream_event;
    ev_.api = api_kind::content_block_delta;
    ev_.index = static_cast<double>(index);
  } else if (raw::starts_with(p, end, kBlockStart)) {
    ev_.cold_dirty = true;  // sets fields reset() only clears after such lines
    std::int64_t index = 0;
    p = raw::parse_small_int(p + (sizeof kBlockStart - 1), end, index);
    static constexpr char kBlock[] = R"(,"content_block":)";
    if (p == nullptr || !raw::consume(p, end, kBlock)) return false;
    x_block& b = ev_.content_block;
    p = fast_object(p, end, [&](std::string_view key, const char* v) -> const char* {
      if (key == "type") {
        std::string_view t;
        const char* q = fast_string(v, end, t);
        b.kind = classify_block(t);
        return q;
      }
      if (key == "text" || key == "thinking") return fast_opt_string(v, end, b.text);
      if (key == "id" || key == "tool_use_id") return fast_opt_string(v, end, b.id);
      if (key == "name") return fast_opt_string(v, end, b.name);
      if (key == "input" || key == "content") {
        if (!raw::starts_with(v, end, "{}")) return nullptr;  // only the empty input a tool_use starts with
        b.input = nlohmann::json::object();
        b.has_input = true;
        return v + 2;
      }
      if (key == "is_error") return nullptr;
      return raw::validate_value(v, end, 3);
    });
    if (p == nullptr || p == end || *p != '}') return false;
    p = fast_members(p + 1, end);
    ev_.kind = line_kind::stream_event;
    ev_.api = api_kind::content_block_start;
    ev_.index = static_cast<double>(index);
  } else if (raw::starts_with(p, end, kMessageDelta)) {
    ev_.cold_dirty = true;
    p = fast_object(p + (sizeof kMessageDelta - 1), end, [&](std::string_view key, const char* v) -> const char* {
      if (key == "stop_reason") return fast_opt_string(v, end, ev_.stop_reason);
      if (key == "type" || key == "text" || key == "thinking" || key == "partial_json") return nullptr;
      return raw::validate_value(v, end, 3);
    });
    static constexpr char kUsage[] = R"(,"usage":)";
    if (p == nullptr || !raw::consume(p, end, kUsage)) return false;
    p = fast_usage(p, end, ev_.usage);
    if (p == nullptr || p == end || *p != '}') return false;
    p = fast_members(p + 1, end);
    ev_.kind = line_kind::stream_event;
    ev_.api = api_kind::message_delta;
  } else if (raw::starts_with(p, end, kMessageStart)) {
    ev_.cold_dirty = true;
    p = fast_object(p + (sizeof kMessageStart - 1), end, [&](std::string_view key, const char* v) -> const char* {
      if (key == "id") return fast_opt_string(v, end, ev_.api_message_id);
      if (key == "model") return fast_opt_string(v, end, ev_.api_model);
      if (key == "usage") return fast_usage(v, end, ev_.usage);
      return raw::validate_value(v, end, 3);
    });
    if (p == nullptr || p == end || *p != '}') return false;
    p = fast_members(p + 1, end);
    ev_.kind = line_kind::stream_event;
    ev_.api = api_kind::message_start;
  } else if (raw::starts_with(p, end, kBlockStop)) {
    std::int64_t index = 0;
    p = raw::parse_small_int(p + (sizeof kBlockStop - 1), end, index);
    if (p == nullptr || p == end || *p != '}') return false;
    p = fast_members(p + 1, end);
    ev_.kind = line_kind::stream_event;
    ev_.api = api_kind::content_block_stop;
    ev_.index = static_cast<double>(index);
  } else if (raw::starts_with(p, end, kMessageStop)) {
    // An `abandoned_blocks` member makes fast_members give up: such a line goes to On-Demand.
    p = fast_members(p + (sizeof kMessageStop - 1), end);
    ev_.kind = line_kind::stream_event;
    ev_.api = api_kind::message_stop;
  } else if (raw::starts_with(p, end, kSystem)) {
    std::string_view subtype;
    p = fast_string(p + (sizeof kSystem - 1), end, subtype);
    if (p == nullptr || subtype == "init" || subtype == "api_retry") return false;  // lines with fields to read
    ev_.subtype = subtype;
    p = fast_members(p, end);
    ev_.kind = line_kind::system;
  } else {
    return false;
  }
  if (p == nullptr || raw::skip_ws(p, end) != end) return false;
  if (!valid_utf8(*utf8_, line.data(), line.size())) return false;
  ev_.has_type = true;
  return true;
}

}  // namespace agenthost::mapper::detail::claude
