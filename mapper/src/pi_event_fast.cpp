// Internal: the fast path of the pi event parser (message_update, tool_execution_update, agent_end and unmapped lines
// read by a strict byte scan; message_start, message_end and turn_end in pi_event_fast_message.cpp); the On-Demand
// path is in pi_event.cpp and pi_event_message.cpp. See pi_event.hpp.
#include "pi_event.hpp"

#include "ondemand_util.hpp"
#include "pi_event_scan.hpp"
#include "raw_scan.hpp"

#include <cstring>
#include <utility>

namespace agenthost::mapper::detail {

using namespace pi_scan;

// ---- fast path ---------------------------------------------------------------------------------------------------
//
// pi prints one message_update per streamed token, so these lines are nearly all of a run's lines. For them the
// On-Demand walk (stage 1 over the whole line, then token by token past `usage` or the snapshots) costs more than
// the mapping itself. parse_fast() handles exactly the lines that begin with `{"type":"message_update"` and are
// strict JSON: it validates the UTF-8 of the whole line (simdjson::validate_utf8), every string (closed, no raw
// control character), the full grammar of every value, including skipped ones (which On-Demand only bracket-counts),
// and that nothing but whitespace follows. It reads the same fields with the same rules as parse_root() and
// parse_update() (key order, later duplicates, the type-dependent snapshot decisions). Whenever it meets anything it
// does not handle exactly as the On-Demand path would (an escaped key, a second `type`, a field that would need the
// snapshot, a `toolCall` whose arguments raw_to_json() does not convert, a non-canonical number, deep nesting, a
// malformed escape…) it returns false and the line
// goes through the On-Demand path from scratch. So it accepts a subset of the lines the On-Demand path accepts, and
// for those yields the same event: the mapper's behaviour is unchanged.
//
// Delta-only lines also repeat the same bytes up to the delta (`{"type":"message_update","usage":{…},
// "assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":`): the scan state at that point is memoized
// with its prefix, and a line that starts with the same bytes resumes there (one memcmp instead of a scan).

const char* pi_event_parser::fast_string(const char* p, const char* end, std::string_view& out, const char* lo) {
  if (p >= end || *p != '"') return nullptr;
  const char* body_end = nullptr;
  bool escaped = false;
  const char* next = raw::scan_string(p, end, body_end, escaped, lo);
  if (next == nullptr) return nullptr;
  const std::string_view body(p + 1, static_cast<std::size_t>(body_end - (p + 1)));
  if (!escaped) {
    out = body;
    return next;
  }
  char* e = lenient_unescape_to(body, scratch_);
  if (e == nullptr) return nullptr;
  out = std::string_view(scratch_, static_cast<std::size_t>(e - scratch_));
  scratch_ = e;
  return next;
}

namespace {

constexpr std::size_t kMaxMemoPrefix = 4096;

}  // namespace

namespace {

/// A string body equals "text" (after unescaping when it has escapes).
bool body_is_text(const char* body, const char* body_end, bool escaped) {
  const std::string_view raw(body, static_cast<std::size_t>(body_end - body));
  if (!escaped) return raw == "text";
  std::string unescaped;
  return lenient_unescape_append(raw, unescaped) && unescaped == "text";
}

}  // namespace

// tool_execution_update (pi's cumulative tool output, one line per update): the fields parse_root reads for it —
// toolCallId, toolName and the text of partialResult/result (tool_result_text's rules, which mirror result_text of the
// converted value) — with every value validated at least as strictly as to_json() would (validate_value). Any other
// member, an escaped key or an unusual value → false (the On-Demand path decides). `p` is after the `type` string.
bool pi_event_parser::parse_fast_tool_update(std::string_view line, const char* p) {
  const char* const end = line.data() + line.size();
  x_event& ev = *ev_;
  const auto read = [&](std::string_view key, const char* v) -> const char* {
    if (key == "toolCallId") return fast_string(v, end, ev.tool_call_id);
    if (key == "toolName") return fast_string(v, end, ev.tool_name);
    if (key == "args") return raw::skip_value(v, end);  // read for tool_execution_start only
    if (key == "partialResult" || key == "result") {
      v = fast_tool_result(v, end);
      ev.has_partial_text = true;
      return v;
    }
    return nullptr;
  };
  return event_members(line, p, event_kind::tool_execution_update, read);
}

// tool_execution_start / tool_execution_end: the fields parse_root() reads for them — toolCallId, toolName, the start's
// `args` and the end's `result` (built with raw_to_json(), which converts exactly as to_json() does or gives up) and
// isError. Any other member (parse_root() reads some for every kind of event) or an unusual value → false.
bool pi_event_parser::parse_fast_tool_execution(std::string_view line, const char* p, event_kind kind) {
  const char* const end = line.data() + line.size();
  x_event& ev = *ev_;
  const bool start = kind == event_kind::tool_execution_start;
  const auto read = [&](std::string_view key, const char* v) -> const char* {
    if (key == "toolCallId") return fast_string(v, end, ev.tool_call_id);
    if (key == "toolName") return fast_string(v, end, ev.tool_name);
    if (key == "args") {
      if (!start) return raw::skip_value(v, end);
      ev.has_args = true;  // before the conversion: a half-converted value is reset with the event
      return raw_to_json(v, end, ev.args);
    }
    if (key == "partialResult" || key == "result") {
      if (start) return raw::skip_value(v, end);
      ev.has_result = true;
      return raw_to_json(v, end, ev.result);
    }
    if (key == "isError") return fast_flag(v, end, ev.is_error);
    return nullptr;
  };
  if (!event_members(line, p, kind, read)) return false;
  if (!start) forget_cumulative_text();  // as parse() does after the On-Demand path: the tool's output is complete
  return true;
}

// The result value at `p` (conversion depth 0): its text into the event's partial_text.
const char* pi_event_parser::fast_tool_result(const char* p, const char* end) {
  ev_->partial_text.clear();
  if (p >= end || *p != '{') return fast_content_text(p, end, 0);
  return fast_object(p, end, [&](std::string_view key, const char* v) {
    return key == "content" ? fast_content_text(v, end, 1) : raw::validate_value(v, end, 1);  // the last `content` wins
  });
}

// A `content` value: a string as is, an array's text items joined with '\n', anything else "" (validated).
const char* pi_event_parser::fast_content_text(const char* p, const char* end, int depth) {
  std::string& text = ev_->partial_text;
  text.clear();
  if (p >= end) return nullptr;
  if (*p == '"') return scan_unescape_append(p, end, text);
  if (*p != '[') return raw::validate_value(p, end, depth);
  bool first = true;
  return fast_array(p, end, [&](const char* item) { return fast_content_item(item, end, depth + 1, first); });
}

namespace {

/// Text items above this size are not memoized (the memo holds the raw and the unescaped text: up to 2 × this).
constexpr std::size_t kMaxMemoText = std::size_t{4} << 20;

/// Whether `raw` (a string body) ends with a \u escape of a high surrogate: its text (U+FFFD for the lone surrogate)
/// then depends on what follows, which may pair with it.
bool ends_with_high_surrogate_escape(std::string_view raw) noexcept {
  if (raw.size() < 6) return false;
  const char* e = raw.data() + raw.size() - 6;
  return e[0] == '\\' && e[1] == 'u' && (e[2] == 'd' || e[2] == 'D') &&
         ((e[3] >= '8' && e[3] <= '9') || (e[3] >= 'a' && e[3] <= 'b') || (e[3] >= 'A' && e[3] <= 'B'));
}

}  // namespace

// The first text item of a partialResult (its string at `p`, `text` empty): scan_unescape_append, except that when the
// body starts with the raw bytes of the last one, their text is taken from the memo and only the rest is scanned and
// unescaped. That is exact: those bytes were checked and unescaped with an earlier line, and they end where a string
// ended (never inside an escape sequence; a trailing high surrogate, which could pair with what follows, is not
// reused). (The caller checked the UTF-8 of the whole line before.)
const char* pi_event_parser::fast_cumulative_text(const char* p, const char* end, std::string& text) {
  const char* const body = p + 1;
  const std::size_t known = text_memo_raw_.size();
  const bool reuse = known > 0 && static_cast<std::size_t>(end - body) > known &&
                     std::memcmp(body, text_memo_raw_.data(), known) == 0 &&
                     !ends_with_high_surrogate_escape(text_memo_raw_);
  if (reuse) text.append(text_memo_text_);
  const char* const next = reuse ? unescape_string_rest(body + known, end, text) : scan_unescape_append(p, end, text);
  if (next == nullptr) return nullptr;
  const auto raw_size = static_cast<std::size_t>(next - 1 - body);
  if (raw_size <= kMaxMemoText) {
    if (reuse) {  // the memo already holds the shared part: add what followed it
      text_memo_raw_.append(body + known, raw_size - known);
      text_memo_text_.append(text, text_memo_text_.size());
    } else {
      text_memo_raw_.assign(body, raw_size);
      text_memo_text_.assign(text);
    }
  } else {
    forget_cumulative_text();
  }
  return next;
}

// One item of a content array: appended when its last `type` is the string "text" and its last `text` a string.
// The text is appended as it is read (one pass) and taken back when the item turns out not to qualify.
const char* pi_event_parser::fast_content_item(const char* p, const char* end, int depth, bool& first) {
  if (p >= end || *p != '{') return raw::validate_value(p, end, depth);
  p = raw::skip_ws(p + 1, end);
  if (p < end && *p == '}') return p + 1;
  std::string& text = ev_->partial_text;
  const std::size_t mark = text.size();  // the text before this item
  const char *type_body = nullptr, *type_end = nullptr;
  bool type_escaped = false, has_text = false;
  std::string_view key;
  p = fast_key(p, end, key);
  for (;;) {
    if (p == nullptr) return nullptr;
    if (key == "type" && p < end && *p == '"') {
      const char* body_end = nullptr;
      bool escaped = false;
      const char* next = raw::scan_string(p, end, body_end, escaped);
      if (next == nullptr || (escaped && !raw::escapes_valid(p + 1, body_end))) return nullptr;
      type_body = p + 1;
      type_end = body_end;
      type_escaped = escaped;
      p = next;
    } else if (key == "text" && p < end && *p == '"') {
      text.resize(mark);  // a later `text` replaces an earlier one
      if (!first) text += '\n';
      p = first ? fast_cumulative_text(p, end, text) : scan_unescape_append(p, end, text);
      has_text = true;
    } else {
      if (key == "type") type_body = nullptr;  // a later non-string value replaces an earlier string
      if (key == "text") {
        text.resize(mark);
        has_text = false;
      }
      p = raw::validate_value(p, end, depth + 1);
    }
    if (p == nullptr) return nullptr;
    bool done = false;
    p = fast_next_member(p, end, key, done);
    if (p == nullptr) return nullptr;
    if (done) break;
  }
  if (has_text && type_body != nullptr && body_is_text(type_body, type_end, type_escaped)) {
    first = false;
  } else {
    text.resize(mark);
  }
  return p;
}

namespace {

constexpr char kTypeKey[] = R"({"type":")";  // an array, as kPrefix in parse_fast()
constexpr std::size_t kTypeAt = sizeof kTypeKey - 1;

/// A line beginning with `{"type":` and a string without escapes: the type's kind, and the position after the string
/// (the fast paths read on from there). nullptr for any other line (the On-Demand path reads it).
[[gnu::always_inline]] inline const char* leading_type(std::string_view line, event_kind& kind) noexcept {
  const char* const begin = line.data();
  const char* const end = begin + line.size();
  if (!raw::starts_with(begin, end, kTypeKey)) return nullptr;
  const char* body_end = nullptr;
  bool escaped = false;
  const char* const type_begin = begin + kTypeAt;
  const char* const p = raw::scan_string(type_begin - 1, end, body_end, escaped);
  if (p == nullptr || escaped) return nullptr;
  kind = classify_event(std::string_view(type_begin, static_cast<std::size_t>(body_end - type_begin)));
  return p;
}

}  // namespace

// A line that is not a message_update: `{"type":` and a string, then by that type the fast path of tool updates,
// agent_end or messages (message_start, message_end, turn_end), the ignored-line check below, or false (the On-Demand
// path reads the other mapped events).
bool pi_event_parser::parse_fast_other(std::string_view line) {
  event_kind kind = event_kind::unknown;
  const char* const p = leading_type(line, kind);
  if (p == nullptr) return false;
  switch (kind) {
    case event_kind::unknown:
      return parse_fast_ignored(line, p);
    case event_kind::tool_execution_update:
      return parse_fast_tool_update(line, p);
    case event_kind::tool_execution_start:
    case event_kind::tool_execution_end:
      return parse_fast_tool_execution(line, p, kind);
    case event_kind::agent_end:
      return parse_fast_agent_end(line, p);
    case event_kind::message_start:
    case event_kind::message_end:
    case event_kind::turn_end:
      return parse_fast_message_event(line, p, kind);
    default:
      return false;  // an event whose fields the On-Demand path reads
  }
}

// A line whose `type` (its first member, ending before `p`) names an event the mapper does not map.
bool pi_event_parser::parse_fast_ignored(std::string_view line, const char* p) {
  if (!unmapped_rest_valid(line, p)) return false;
  ev_->kind = event_kind::unknown;
  ev_->has_type = true;
  ev_->type_members = 1;
  return true;
}

// agent_end closes every run and carries the whole session's messages (`messages`): the longest line of a run, by far
// on a long one. parse_root() reads only flags from it, so it is checked here as an unmapped line is (UTF-8, then
// `messages` with skip_value()), instead of being copied to the padded buffer and indexed by simdjson — whose index,
// four bytes per byte of the line, is allocated for it at the first such line of each mapper. What pi writes there is
// `messages` and the flags; any other member goes to the On-Demand path, which reads it as parse_root() does.
bool pi_event_parser::parse_fast_agent_end(std::string_view line, const char* p) {
  const char* const end = line.data() + line.size();
  x_event& ev = *ev_;
  const auto read = [&](std::string_view key, const char* v) -> const char* {
    if (key == "willRetry") return fast_flag(v, end, ev.will_retry);
    if (key == "aborted") return fast_flag(v, end, ev.aborted);
    if (key == "success") return fast_flag(v, end, ev.success);
    if (key == "isError") return fast_flag(v, end, ev.is_error);
    return key == "messages" ? raw::skip_value(v, end) : nullptr;
  };
  if (!event_members(line, p, event_kind::agent_end, read)) return false;
  forget_cumulative_text();  // as parse() does after the On-Demand path: no tool output grows after the run's end
  return true;
}

bool pi_event_parser::skip_unmapped(std::string_view line) const noexcept {
  // A type beginning with 'm' goes to parse() at once: message_update, pi's per-token event, costs one byte test here
  // (message_start and message_end are mapped too; an unmapped type with an 'm' is only checked later, by parse()).
  if (line.size() <= kTypeAt || line[kTypeAt] == 'm') return false;
  event_kind kind = event_kind::unknown;
  const char* const p = leading_type(line, kind);
  return p != nullptr && kind == event_kind::unknown && unmapped_rest_valid(line, p);
}

// The members after `type` (ending before `p`) of a line whose type the mapper does not map, and the line's end:
// parse_root skips everything after `type`, so only the line's validity matters (strict here, a subset of what the
// On-Demand path accepts). A short ASCII line without backslashes or control characters — the usual status or
// progress event — is checked with a quote bitmap (raw::quote_bitmap: one pass over its bytes, then each string is a
// bit scan); any other line member by member with scan_string().
bool pi_event_parser::unmapped_rest_valid(std::string_view line, const char* p) const noexcept {
  const char* const begin = line.data();
  const char* const end = begin + line.size();
#if defined(__SSE2__)
  raw::quote_bitmap quotes;
  if (line.back() == '}' && quotes.build(begin, line.size())) {
    // A plain line: valid UTF-8, and with no byte below 0x20 the only whitespace is ' '. Its last byte is a '}', not
    // ' ', '"' or a scalar's: every scan below stops at it at the latest, so only a container skipped by skip_value()
    // can reach the end.
    const char* const last = end - 1;
    const auto after_string = [&](const char* open) noexcept -> const char* {  // `open` is at a quote
      const std::size_t close = quotes.next_quote(static_cast<std::size_t>(open + 1 - begin));
      return close < line.size() ? begin + close + 1 : nullptr;
    };
    for (;;) {
      while (*p == ' ') ++p;
      if (*p != ',') break;
      ++p;
      while (*p == ' ') ++p;
      if (*p != '"') return false;
      const char* key_end = after_string(p);
      if (key_end == nullptr) return false;
      if (key_end - p == 6 && std::memcmp(p + 1, "type", 4) == 0) return false;  // a second `type` reclassifies
      p = key_end;
      while (*p == ' ') ++p;
      if (*p != ':') return false;
      ++p;
      while (*p == ' ') ++p;
      p = *p == '"' ? after_string(p) : raw::skip_value(p, end);
      if (p == nullptr || p == end) return false;
    }
    return p == last;  // else not the object's end, or something after it
  }
#endif
  if (!valid_utf8(begin, line.size())) return false;
  return fast_members(p, end, [end](std::string_view key, const char* v) noexcept -> const char* {
    return key == "type" ? nullptr : raw::skip_value(v, end);  // a second `type` reclassifies the event
  });
}

// Members of assistantMessageEvent (parse_update's rules); `p` is at the value of member `key`.
const char* pi_event_parser::fast_update_members(const char* p, const char* end, std::string_view key,
                                                 const char* line_begin, bool record_cut) {
  x_event& ev = *ev_;
  for (;;) {
    if (key == "type") {
      std::string_view t;
      p = fast_string(p, end, t);
      if (p != nullptr) ev.update = classify_update(t);
    } else if (key == "contentIndex") {
      std::int64_t i = -1;
      p = raw::parse_small_int(p, end, i);
      if (p != nullptr) ev.content_index = i;
    } else if (key == "delta") {
      if (record_cut && cut_.offset == 0 && !ev.has_delta && !ev.has_content && ev.update_id.empty() &&
          ev.update_tool_name.empty() && !ev.has_tool_call && !ev.has_snapshot) {
        cut_ = {static_cast<std::size_t>(p - line_begin), ev.update, ev.content_index};
      }
      p = fast_string(p, end, ev.delta, line_begin);
      ev.has_delta = true;
    } else if (key == "content") {
      p = fast_string(p, end, ev.content);
      ev.has_content = true;
    } else if (key == "id") {
      p = fast_string(p, end, ev.update_id);
    } else if (key == "toolName") {
      p = fast_string(p, end, ev.update_tool_name);
    } else if (key == "toolCall") {
      if (p >= end || *p != '{') return nullptr;  // On-Demand: ignored
      p = fast_block(p, end, ev.tool_call);        // parse_block(), its arguments by raw_to_json()
      ev.has_tool_call = true;
    } else if (key == "partial") {
      if (ev.update == update_kind::unknown || ev.needs_snapshot()) return nullptr;  // deferred / parsed there
      const char* value = p;
      p = raw::skip_value(p, end);
      if (p != nullptr) skipped_partial_ = {value, static_cast<std::size_t>(p - value)};
    } else {
      p = raw::skip_value(p, end);
    }
    if (p == nullptr) return nullptr;
    bool done = false;
    p = fast_next_member(p, end, key, done);
    if (p == nullptr || done) return p;
  }
}

bool pi_event_parser::parse_fast(std::string_view line) {
  static constexpr char kPrefix[] = R"({"type":"message_update")";  // arrays: starts_with compares with inline loads
  constexpr std::size_t kPrefixSize = sizeof kPrefix - 1;
  const char* const begin = line.data();
  const char* const end = begin + line.size();
  x_event& ev = *ev_;
  scratch_ = buffer_.get();
  cut_ = {};
  skipped_partial_ = {};

  // The memoized prefix starts with kPrefix: a line of another type (tool_execution_update, …) is told apart by that
  // short compare instead of a call comparing the whole memoized prefix.
  const bool update = raw::starts_with(begin, end, kPrefix);
  const bool resume = update && memo_prefix_.size() >= kPrefixSize && line.size() > memo_prefix_.size() &&
                      std::memcmp(begin + kPrefixSize, memo_prefix_.data() + kPrefixSize,
                                  memo_prefix_.size() - kPrefixSize) == 0;
  const char* p = nullptr;
  if (resume) {
    // Same bytes as the memoized prefix (valid UTF-8 ending before an ASCII quote): validate only the rest.
    if (!valid_utf8(begin + memo_prefix_.size(), line.size() - memo_prefix_.size(), begin)) return false;
    ev.has_update = true;
    ev.update = memo_.update;
    ev.content_index = memo_.content_index;
    p = fast_update_members(begin + memo_prefix_.size(), end, "delta", begin, false);
  } else if (update) {
    if (!valid_utf8(begin, line.size())) return false;
    p = begin + kPrefixSize;
  } else {
    return parse_fast_other(line);
  }
  if (p == nullptr) return false;
  ev.kind = event_kind::message_update;
  ev.has_type = true;
  ev.type_members = 1;
  bool seen_update = resume;

  // Root members after `type` (parse_root's hot branch).
  const auto read = [&](std::string_view key, const char* v) -> const char* {
    if (key == "assistantMessageEvent") {
      if (seen_update || v >= end || *v != '{') return nullptr;  // a second one, or not an object
      seen_update = true;
      ev.has_update = true;
      v = raw::skip_ws(v + 1, end);
      if (v < end && *v == '}') return v + 1;
      std::string_view first;
      v = fast_key(v, end, first);
      return v == nullptr ? nullptr : fast_update_members(v, end, first, begin, !resume);
    }
    if (key == "message") {
      // Before the update: deferred by the On-Demand path; after it: read there only when the update needs it.
      if (!ev.has_update || ev.needs_snapshot()) return nullptr;
      // pi ≤ 0.83 writes the cumulative message twice, as the update's `partial` and as `message`, with the same
      // bytes: an object or array with the bytes of one skip_value() accepted ends where that one did, so a memcmp
      // stands in for the second scan (half the work on such a line).
      const std::string_view seen = skipped_partial_;
      if (!seen.empty() && (seen.front() == '{' || seen.front() == '[') &&
          static_cast<std::size_t>(end - v) >= seen.size() && std::memcmp(v, seen.data(), seen.size()) == 0)
        return v + seen.size();
      return raw::skip_value(v, end);
    }
    if (key == "type") return nullptr;  // a second `type` reclassifies the event
    return raw::skip_value(v, end);
  };
  if (!fast_members(p, end, read)) return false;

  if (cut_.offset != 0 && cut_.offset <= kMaxMemoPrefix) {
    memo_prefix_.assign(begin, cut_.offset);
    memo_ = cut_;
  }
  return true;
}

}  // namespace agenthost::mapper::detail
