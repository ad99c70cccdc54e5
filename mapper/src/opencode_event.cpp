// The OpenCode line parser: see opencode_event.hpp.
#include "opencode_event.hpp"

#include "ondemand_fields.hpp"
#include "raw_scan.hpp"
#include "text_util.hpp"

#include <cstdint>

namespace agenthost::mapper::detail::opencode {

using simdjson::error_code;

namespace {

event_kind kind_of(std::string_view t) noexcept {
  if (t == "text") return event_kind::text;
  if (t == "reasoning") return event_kind::reasoning;
  if (t == "tool_use") return event_kind::tool_use;
  if (t == "step_start") return event_kind::step_start;
  if (t == "step_finish") return event_kind::step_finish;
  if (t == "error") return event_kind::error;
  return event_kind::unknown;
}

}  // namespace

error_code event_parser::parse_tokens(od::object& obj) {
  ev.has_tokens = true;
  return for_fields(obj, ev.wrong_type, [&](std::string_view key, od::value& v) -> error_code {
    if (key == "input") return read_count(v, ev.input_tokens);
    if (key == "output") return read_count(v, ev.output_tokens);
    if (key == "reasoning") return read_count(v, ev.reasoning_tokens);
    if (key == "cache")
      return read_object(v, [&](od::object c) {
        return for_fields(c, ev.wrong_type, [&](std::string_view k, od::value& cv) -> error_code {
          if (k == "read") return read_count(cv, ev.cache_read);
          if (k == "write") return read_count(cv, ev.cache_write);
          return simdjson::SUCCESS;
        });
      });
    return simdjson::SUCCESS;
  });
}

error_code event_parser::parse_state(od::object& obj) {
  return for_fields(obj, ev.wrong_type, [&](std::string_view key, od::value& v) -> error_code {
    if (key == "status") return read_string(v, ev.status, arena);
    if (key == "input") return to_json(v, ev.input, arena);
    if (key == "output") return read_string(v, ev.output, arena);
    if (key == "error") return read_string(v, ev.error_text, arena);
    if (key == "title") return read_string(v, ev.title, arena);
    if (key == "metadata") return to_json(v, ev.metadata, arena);
    return simdjson::SUCCESS;
  });
}

error_code event_parser::parse_part(od::object& obj) {
  ev.has_part = true;
  return for_fields(obj, ev.wrong_type, [&](std::string_view key, od::value& v) -> error_code {
    if (key == "id") return read_string(v, ev.part_id, arena);
    if (key == "messageID") return read_string(v, ev.message_id, arena);
    if (key == "text") return read_string(v, ev.text, arena, &ev.has_text);
    if (key == "tool") return read_string(v, ev.tool, arena);
    if (key == "callID") return read_string(v, ev.call_id, arena);
    if (key == "reason") return read_string(v, ev.reason, arena);
    if (key == "sessionID" && ev.session_id.empty()) return read_string(v, ev.session_id, arena);
    if (key == "state") return read_object(v, [&](od::object o) { return parse_state(o); });
    if (key == "tokens") return read_object(v, [&](od::object o) { return parse_tokens(o); });
    if (key == "cost") return read_double(v, ev.cost);
    if (key == "metadata") return parse_part_metadata(v);
    return simdjson::SUCCESS;
  });
}

// part.metadata: the provider's own metadata of the part, where opencode also marks a tool the provider ran
// (`providerExecuted`). Only that flag is read; opencode treats a metadata that is not an object, or a flag that is
// not `true`, as absent, and so does this (the line is not invalid for it).
error_code event_parser::parse_part_metadata(od::value& v) {
  od::json_type t{};
  if (auto e = v.type().get(t)) return e;
  if (t != od::json_type::object) return simdjson::SUCCESS;
  od::object obj;
  if (auto e = v.get_object().get(obj)) return e;
  bool other_type = false;  // a flag that is not a boolean is no flag, not a wrong type
  return for_fields(obj, other_type, [&](std::string_view key, od::value& fv) -> error_code {
    if (key != "providerExecuted") return simdjson::SUCCESS;
    std::optional<bool> flag;
    const error_code e = read_bool(fv, flag);
    ev.provider_executed = flag.value_or(false);
    return e;
  });
}

error_code event_parser::parse_error(od::object& obj) {
  ev.has_error = true;
  return for_fields(obj, ev.wrong_type, [&](std::string_view key, od::value& v) -> error_code {
    if (key == "name") return read_string(v, ev.error_name, arena);
    if (key == "message") return read_string(v, ev.error_message, arena);  // an error without `data`
    if (key == "data")
      return read_object(v, [&](od::object d) {
        return for_fields(d, ev.wrong_type, [&](std::string_view k, od::value& dv) -> error_code {
          if (k == "message") return read_string(dv, ev.error_message, arena);
          if (k == "statusCode") return read_int(dv, ev.status_code);
          if (k == "isRetryable") return read_bool(dv, ev.is_retryable);
          if (k == "responseBody") return read_string(dv, ev.response_body, arena);
          return simdjson::SUCCESS;
        });
      });
    return simdjson::SUCCESS;
  });
}

// Fast path for the part lines that make up most of a run, exactly as opencode 1.18 prints them (its field order):
//   {"type":"step_start","timestamp":N,"sessionID":"…","part":{"id":"…","messageID":"…","sessionID":"…",
//    "type":"step-start"}}
//   {"type":"text"|"reasoning","timestamp":N,"sessionID":"…","part":{"id":"…","messageID":"…","sessionID":"…",
//    "type":"text"|"reasoning","text":"…","time":{"start":N,"end":N}}}
//   {"type":"step_finish","timestamp":N,"sessionID":"…","part":{"id":"…","reason":"…","messageID":"…",
//    "sessionID":"…","type":"step-finish","tokens":{"total":N,"input":N,"output":N,"reasoning":N,
//    "cache":{"write":N,"read":N}},"cost":N}}
//   {"type":"tool_use","timestamp":N,"sessionID":"…","part":{"type":"tool","tool":"…","callID":"…",
//    "state":{"status":"…","input":V,"output":"…","metadata":V,"title":"…","time":{"start":N,"end":N}},
//    "id":"…","sessionID":"…","messageID":"…"}}            (V: what raw_to_json converts)
// Every string is checked (closed, no raw control character, valid escapes) and unescaped in one pass (one without
// escapes is not copied: a view of the line), every number is a canonical integer, the UTF-8 of the whole line is
// validated and nothing but whitespace may follow: no stage 1. Anything else (another order, an escaped key, a
// fractional cost, an empty session id, more fields…) returns false and the line takes the On-Demand path, which
// accepts a superset of these lines and yields the same event for them (tests:
// OpencodeMapper.FastPathAndOnDemandPathAgree).
bool event_parser::parse_fast(std::string_view line) {
  const char* p = line.data();
  const char* const end = p + line.size();
  const auto literal = [&](const auto& s) { return raw::consume(p, end, s); };
  // A string: a view of the line, or of `buffer` when it has escapes (valid until the next line).
  const auto string = [&](std::string_view& out, std::string& buffer) {
    if (p == end || *p != '"') return false;
    p = scan_string_view(p, end, out, buffer);
    return p != nullptr;
  };
  // An integer read_int() takes (within ±9·10^15).
  const auto integer = [&](long long& out) {
    std::int64_t v = 0;
    const char* q = raw::parse_small_int(p, end, v);
    if (q == nullptr || v < -9'000'000'000'000'000 || v > 9'000'000'000'000'000) return false;
    out = v;
    p = q;
    return true;
  };
  // An integer the mapper does not read (timestamps, the token total): checked, not converted. On-Demand never
  // reads these, so accepting only canonical integers keeps the fast path the stricter one.
  const auto skipped_integer = [&] { return (p = raw::skip_small_int(p, end)) != nullptr; };
  // The line is read straight into the event; if the fast path gives up, the On-Demand path starts it afresh.
  ev.reset();
  oc_event& e = ev;
  std::string_view part_session;  // checked, not kept (the event's session id wins)
  if (!literal(R"({"type":")")) return false;
  event_kind kind = event_kind::unknown;
  if (literal(R"(text",)")) kind = event_kind::text;
  else if (literal(R"(reasoning",)")) kind = event_kind::reasoning;
  else if (literal(R"(step_start",)")) kind = event_kind::step_start;
  else if (literal(R"(step_finish",)")) kind = event_kind::step_finish;
  else if (literal(R"(tool_use",)")) kind = event_kind::tool_use;
  else return false;
  // The event's session id wins over the part's; an empty one would let the part's count: On-Demand decides.
  if (!literal(R"("timestamp":)") || !skipped_integer() || !literal(R"(,"sessionID":)") ||
      !string(e.session_id, fast_session) || e.session_id.empty() || !literal(R"(,"part":{)"))
    return false;
  if (kind == event_kind::tool_use) {
    if (!literal(R"("type":"tool","tool":)") || !string(e.tool, fast_tool) || !literal(R"(,"callID":)") ||
        !string(e.call_id, fast_call) || !literal(R"(,"state":{"status":)") || !string(e.status, fast_status) ||
        !literal(R"(,"input":)") || (p = raw_to_json(p, end, e.input)) == nullptr ||
        !literal(R"(,"output":)") || !string(e.output, fast_text) || !literal(R"(,"metadata":)") ||
        (p = raw_to_json(p, end, e.metadata)) == nullptr || !literal(R"(,"title":)") ||
        !string(e.title, fast_title) || !literal(R"(,"time":{"start":)") || !skipped_integer() ||
        !literal(R"(,"end":)") || !skipped_integer() || !literal(R"(}},"id":)") ||
        !string(e.part_id, fast_part_id) || !literal(R"(,"sessionID":)") ||
        !string(part_session, fast_part_session) || !literal(R"(,"messageID":)") ||
        !string(e.message_id, fast_message_id) || !literal("}"))
      return false;
    if (e.call_id.empty() && e.part_id.empty()) return false;  // invalid: On-Demand says so
    return accept_fast(line, p, kind);
  }
  if (!literal(R"("id":)") || !string(e.part_id, fast_part_id)) return false;
  if (kind == event_kind::step_finish && (!literal(R"(,"reason":)") || !string(e.reason, fast_reason))) return false;
  if (!literal(R"(,"messageID":)") || !string(e.message_id, fast_message_id) || !literal(R"(,"sessionID":)") ||
      !string(part_session, fast_part_session) || !literal(R"(,"type":")"))
    return false;
  switch (kind) {
    case event_kind::step_start:
      if (!literal(R"(step-start"})")) return false;
      break;
    case event_kind::text:
    case event_kind::reasoning:
      if (!literal(kind == event_kind::text ? std::string_view(R"(text",)") : std::string_view(R"(reasoning",)")) ||
          !literal(R"("text":)") || !string(e.text, fast_text) || !literal(R"(,"time":{"start":)") ||
          !skipped_integer() || !literal(R"(,"end":)") || !skipped_integer() || !literal("}}"))
        return false;
      e.has_text = true;
      break;
    default: {  // step_finish
      long long cost = 0;
      if (!literal(R"(step-finish","tokens":{"total":)") || !skipped_integer() || !literal(R"(,"input":)") ||
          !integer(e.input_tokens) || !literal(R"(,"output":)") || !integer(e.output_tokens) ||
          !literal(R"(,"reasoning":)") || !integer(e.reasoning_tokens) || !literal(R"(,"cache":{"write":)") ||
          !integer(e.cache_write) || !literal(R"(,"read":)") || !integer(e.cache_read) ||
          !literal(R"(}},"cost":)") || !integer(cost) || !literal("}"))
        return false;
      e.has_tokens = true;
      e.cost = static_cast<double>(cost);
      break;
    }
  }
  return accept_fast(line, p, kind);
}

// The end of a fast-path line at `p` (the part's closing brace read): the event's brace, then only whitespace, and
// valid UTF-8 throughout; then the event (read in place) is complete.
bool event_parser::accept_fast(std::string_view line, const char* p, event_kind kind) {
  const char* const end = line.data() + line.size();
  if (p == end || *p != '}' || raw::skip_ws(p + 1, end) != end) return false;
  if (!valid_utf8(*utf8, line.data(), line.size())) return false;  // On-Demand rejects it, with the same result
  ev.kind = kind;
  ev.has_type = ev.has_part = true;
  return true;
}

// Fills `ev`; an error means the line is invalid.
error_code event_parser::parse(std::string_view line) {
  if (parse_fast(line)) return simdjson::SUCCESS;
  ev = oc_event{};
  if (!arena.empty()) arena.clear();
  od::document doc;
  if (auto e = padded.iterate(line, doc)) return e;
  od::object root;
  if (auto e = doc.get_object().get(root)) return e;
  bool part_wrong_type = false;
  for (auto field_result : root) {
    od::field field;
    if (auto e = std::move(field_result).get(field)) return e;
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return e;
    od::value v = field.value();
    error_code e = simdjson::SUCCESS;
    if (key == "type") {
      std::string_view t;
      // A `type` that is not a string makes the line invalid whatever else it holds.
      if (auto te = read_string(v, t, arena, &ev.has_type)) return te;
      ev.kind = kind_of(t);
    } else if (key == "sessionID") {
      std::string_view sid;
      e = read_string(v, sid, arena);
      if (!sid.empty()) ev.session_id = sid;  // the event's own id wins over the part's
    } else if (key == "part") {
      od::json_type t{};
      if (auto te = v.type().get(t)) return te;
      if (t != od::json_type::object) {
        part_wrong_type = t != od::json_type::null;
        continue;
      }
      od::object o;
      if (auto oe = v.get_object().get(o)) return oe;
      e = parse_part(o);
    } else if (key == "error") {
      e = read_object(v, [&](od::object o) { return parse_error(o); });
    }
    if (auto f = note(e, ev.wrong_type)) return f;
  }
  if (!ev.has_type) return simdjson::NO_SUCH_FIELD;
  if (auto e = check_end(doc)) return e;
  // Event types the mapper ignores are not checked further (their fields may mean something else).
  if (ev.kind == event_kind::unknown) return simdjson::SUCCESS;
  if (ev.wrong_type || part_wrong_type) return simdjson::INCORRECT_TYPE;
  // Every event but `error` is about a part; text and reasoning need their text, a tool its call id or part id.
  if (ev.kind != event_kind::error && !ev.has_part) return simdjson::INCORRECT_TYPE;
  if ((ev.kind == event_kind::text || ev.kind == event_kind::reasoning) && !ev.has_text)
    return simdjson::INCORRECT_TYPE;
  if (ev.kind == event_kind::tool_use && ev.call_id.empty() && ev.part_id.empty()) return simdjson::INCORRECT_TYPE;
  if (ev.kind == event_kind::error && !ev.has_error) return simdjson::INCORRECT_TYPE;
  return simdjson::SUCCESS;
}

}  // namespace agenthost::mapper::detail::opencode
