// Internal: the byte-scan fast path of pi's message events — message_start, message_end and turn_end, whose `message`
// (and turn_end's `toolResults`) parse_message() reads with On-Demand. See pi_event.hpp and pi_event_fast.cpp.
#include "pi_event.hpp"

#include "ondemand_util.hpp"
#include "pi_event_readers.hpp"
#include "pi_event_scan.hpp"
#include "raw_scan.hpp"

#include <charconv>
#include <system_error>

namespace agenthost::mapper::detail {

using namespace pi_scan;

// Each turn ends with these lines, and they carry whole messages (the turn's text and thinking again, the tool
// calls, every tool result): with a tool turn every ~100 lines, they were a tenth of the bytes and a fifth of the
// mapper's time, all of it in the On-Demand path (the copy to the padded buffer, stage 1 over the line, then the
// walk). This path reads them with the rules of parse_root() / parse_message() / parse_blocks() / parse_block() /
// parse_usage() / parse_tool_results(), in the same order (a later duplicate replaces or appends as there), and gives
// up — the line goes to the On-Demand path from scratch — on anything it does not read exactly as they do:
//   * a root member other than `message` (and turn_end's `toolResults`), a second one of them, either not an object
//     (array), a toolResults element that is not an object;
//   * a message field parse_message() reads as a string / bool / number that has another JSON type (On-Demand
//     treats it as absent: rare enough to leave there), `usage` or its `cost` not an object;
//   * a number other than an unsigned canonical decimal (≤ 18 integer, ≤ 17 fraction, ≤ 4 exponent digits), a
//     toolCall's `arguments` that raw_to_json() does not convert exactly as to_json() does, a toolResult's `content` or
//     `details` that would be built (a call the mapper has not closed) or that validate_value() does not accept.
// Skipped values get the strict checks of the other fast paths (skip_value(): strings closed, no raw control
// character, brackets matched), stricter than On-Demand's bracket counting: such a path accepts a subset of the
// lines the On-Demand path accepts and yields the same event for them.

namespace {

/// A number of usage / cost as get_number() reads it (a double): an unsigned canonical integer of ≤ 18 digits
/// (converted as get_int64() then static_cast<double>), or one with a fraction of ≤ 17 digits and/or an exponent of
/// ≤ 4 digits (std::from_chars, which rounds correctly, as simdjson's get_double() does; JavaScript prints a cost
/// below 1e-6 as `1.2e-7`). nullptr for anything else — a sign, more digits, a value out of a double's range — the
/// On-Demand path reads those.
const char* fast_number(const char* p, const char* end, double& out) noexcept {
  const auto digits_from = [end](const char* d) noexcept {
    while (d < end && static_cast<unsigned char>(*d - '0') < 10) ++d;
    return d;
  };
  const char* q = digits_from(p);
  const std::ptrdiff_t digits = q - p;
  if (digits == 0 || digits > 18 || (*p == '0' && digits > 1)) return nullptr;
  bool floating = false;
  if (q < end && *q == '.') {
    const char* const fraction = q + 1;
    q = digits_from(fraction);
    if (q == fraction || q - fraction > 17) return nullptr;
    floating = true;
  }
  if (q < end && (*q == 'e' || *q == 'E')) {
    const char* exponent = q + 1;
    if (exponent < end && (*exponent == '+' || *exponent == '-')) ++exponent;
    q = digits_from(exponent);
    if (q == exponent || q - exponent > 4) return nullptr;
    floating = true;
  }
  if (q < end && !raw::is_delimiter(*q)) return nullptr;
  if (floating) {
    double d = 0;
    const auto [ptr, ec] = std::from_chars(p, q, d);  // an exponent's '+' too: from_chars takes it after the 'e'
    if (ec != std::errc{} || ptr != q) return nullptr;
    out = d;
    return q;
  }
  std::int64_t i = 0;
  for (const char* d = p; d < q; ++d) i = i * 10 + (*d - '0');
  out = static_cast<double>(i);
  return q;
}

/// parse_usage(): the token counts and the cost, by name; any other member skipped.
const char* fast_usage(const char* p, const char* end, x_usage& u) {
  if (p >= end || *p != '{') return nullptr;  // On-Demand: absent
  u.present = true;
  return fast_object(p, end, [&](std::string_view key, const char* v) -> const char* {
    if (key == "cost") {
      if (v >= end || *v != '{') return nullptr;  // On-Demand: ignored
      u.has_cost = true;
      return fast_object(v, end, [&](std::string_view cost_key, const char* cv) -> const char* {
        double* const target = pi_readers::cost_field(u, cost_key);
        return target != nullptr ? fast_number(cv, end, *target) : raw::skip_value(cv, end);
      });
    }
    if (key == "reasoning") {
      v = fast_number(v, end, u.reasoning);
      if (v != nullptr) u.has_reasoning = true;
      return v;
    }
    double* const target = pi_readers::token_field(u, key);
    return target != nullptr ? fast_number(v, end, *target) : raw::skip_value(v, end);
  });
}

}  // namespace

bool pi_event_parser::parse_fast_message_event(std::string_view line, const char* p, event_kind kind) {
  const char* const end = line.data() + line.size();
  x_event& ev = *ev_;
  bool seen_message = false, seen_results = false;
  const auto read = [&](std::string_view key, const char* v) -> const char* {
    if (key == "message") {
      if (seen_message) return nullptr;  // parse_message() would add the second one's blocks to the first's
      seen_message = true;
      return fast_message(v, end, ev.message, kind == event_kind::message_start);
    }
    if (key == "toolResults" && kind == event_kind::turn_end) {
      if (seen_results) return nullptr;
      seen_results = true;
      return fast_tool_results(v, end);
    }
    return nullptr;  // any other member: parse_root() reads some of them for every kind of event
  };
  if (!event_members(line, p, kind, read)) return false;
  if (kind == event_kind::turn_end) forget_cumulative_text();  // as parse() does after the On-Demand path
  return true;
}

bool pi_event_parser::result_json_ignored(const x_message& m, bool header_only) const {
  return header_only ||
         (m.role == "toolResult" && !m.tool_call_id.empty() && call_closed_ && call_closed_(m.tool_call_id));
}

// parse_message(v, m, false, header_only).
const char* pi_event_parser::fast_message(const char* p, const char* end, x_message& m, bool header_only) {
  if (p >= end || *p != '{') return nullptr;  // On-Demand: no message
  m.present = true;
  return fast_object(p, end, [&](std::string_view key, const char* v) -> const char* {
    if (key == "content") {
      if (m.role == "user") return raw::skip_value(v, end);  // the prompt: not mapped
      if (m.role == "toolResult") {
        m.has_content = true;
        return result_json_ignored(m, header_only) ? raw::validate_value(v, end, 0) : nullptr;  // else built there
      }
      return fast_blocks(v, end, m);
    }
    if (key == "role") return fast_string(v, end, m.role);
    if (key == "stopReason") return fast_string(v, end, m.stop_reason);
    if (key == "errorMessage") {
      v = fast_string(v, end, m.error_message);
      if (v != nullptr) m.has_error_message = true;
      return v;
    }
    if (key == "model") return fast_string(v, end, m.model);
    if (key == "usage") return fast_usage(v, end, m.usage);
    if (key == "toolCallId") return fast_string(v, end, m.tool_call_id);
    if (key == "toolName") return fast_string(v, end, m.tool_name);
    if (key == "isError") return fast_flag(v, end, m.is_error);
    if (key == "details") {
      if (m.role == "assistant" || m.role == "user") return raw::skip_value(v, end);
      return result_json_ignored(m, header_only) ? raw::validate_value(v, end, 0) : nullptr;  // else built there
    }
    return raw::skip_value(v, end);
  });
}

// parse_blocks(v, m, false): a string is one text block, an array one block per element, anything else ignored.
const char* pi_event_parser::fast_blocks(const char* p, const char* end, x_message& m) {
  if (p >= end) return nullptr;
  if (*p == '"') {
    x_block& b = m.add_block();
    b.kind = block_kind::text;
    m.has_content = true;
    return fast_string(p, end, b.text);
  }
  if (*p != '[') return raw::skip_value(p, end);
  m.has_content = true;
  return fast_array(p, end, [&](const char* element) {
    x_block& b = m.add_block();
    // Not an object: an `other` block.
    return element < end && *element == '{' ? fast_block(element, end, b) : raw::skip_value(element, end);
  });
}

// parse_block(o, b, true).
const char* pi_event_parser::fast_block(const char* p, const char* end, x_block& b) {
  std::string_view text, thinking;
  p = fast_object(p, end, [&](std::string_view key, const char* v) -> const char* {
    if (key == "type") {
      std::string_view t;
      v = fast_string(v, end, t);
      if (v != nullptr) b.kind = pi_readers::classify_block(t);
      return v;
    }
    if (key == "text") return fast_string(v, end, text);
    if (key == "thinking") return fast_string(v, end, thinking);
    if (key == "id") return fast_string(v, end, b.id);
    if (key == "name") return fast_string(v, end, b.name);
    if (key == "arguments") {
      b.has_arguments = true;  // before the conversion: a half-converted value is reset with the block
      return raw_to_json(v, end, b.arguments);
    }
    return raw::skip_value(v, end);
  });
  if (p != nullptr) b.text = b.kind == block_kind::thinking ? thinking : text;
  return p;
}

// parse_tool_results(): one toolResult message per element.
const char* pi_event_parser::fast_tool_results(const char* p, const char* end) {
  x_event& ev = *ev_;
  return fast_array(p, end, [&](const char* element) -> const char* {  // not an array: On-Demand ignores it
    if (element >= end || *element != '{') return nullptr;  // On-Demand: an entry without a message
    if (ev.ntool_results == ev.tool_results.size()) ev.tool_results.emplace_back();
    x_message& m = ev.tool_results[ev.ntool_results++];
    m.reset();
    return fast_message(element, end, m, false);
  });
}

}  // namespace agenthost::mapper::detail
