// The OpenCode mapper: `opencode run --format json` events → contract messages. See opencode_mapper.hpp and
// docs/contract.md ("OpenCode mapping").
#include <agenthost/mapper/opencode_mapper.hpp>

#include "mapper_core.hpp"
#include "ondemand_fields.hpp"
#include "ondemand_util.hpp"
#include "raw_scan.hpp"
#include "text_util.hpp"

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <cstdint>
#include <cstring>
#include <unordered_set>

namespace agenthost::mapper {

using transport::message;
using transport::message_type;
using json = nlohmann::json;
using simdjson::error_code;
using namespace detail;

namespace {

// The response body of an HTTP error is kept for diagnosis, bounded.
constexpr std::size_t kMaxBodyBytes = 4096;

enum class event_kind { unknown, step_start, reasoning, text, tool_use, step_finish, error };

event_kind kind_of(std::string_view t) noexcept {
  if (t == "text") return event_kind::text;
  if (t == "reasoning") return event_kind::reasoning;
  if (t == "tool_use") return event_kind::tool_use;
  if (t == "step_start") return event_kind::step_start;
  if (t == "step_finish") return event_kind::step_finish;
  if (t == "error") return event_kind::error;
  return event_kind::unknown;
}

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
    has_type = wrong_type = has_part = has_text = has_tokens = has_error = false;
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
  json input, metadata;
};

/// True when the reason of a step_finish ends the run, as opencode's own loop decides (session/prompt.ts: it goes on
/// while the message's finish is missing, `tool-calls` or `unknown`): `stop` normally, `length` / `content-filter`
/// when the model was cut off. `unknown` is what the AI SDK reports for a finish reason it cannot map (an
/// OpenAI-compatible server's missing or odd `finish_reason`, Anthropic's `pause_turn`): opencode calls the model again.
bool final_reason(std::string_view reason) noexcept {
  return !reason.empty() && reason != "tool-calls" && reason != "unknown";
}

}  // namespace

struct opencode_mapper::impl {
  explicit impl(opencode_mapper_options o)
      : options(std::move(o)),
        core(core_options_of(options)) {}

  opencode_mapper_options options;
  mapper_core core;

  // ---- parsing: one On-Demand parser and one padded buffer for the mapper's lifetime --------------------------
  padded_line padded;
  string_arena arena;
  oc_event ev;

  // ---- fast path: reused buffers for the unescaped strings -------------------------------------------------------
  const simdjson::implementation* utf8 = utf8_kernel();  // for validate_utf8 without a dispatch per line
  // The fast path's strings that have escapes, unescaped (the others are views of the line).
  std::string fast_session, fast_part_session, fast_part_id, fast_message_id, fast_text, fast_reason;
  std::string fast_tool, fast_call, fast_status, fast_title;

  // ---- run state --------------------------------------------------------------------------------------------------
  bool finished = false;        // a final step_finish or an error since the last step_start
  bool step_completed = false;  // the last step ended with a final step_finish
  std::string stop_reason;      // its reason
  bool failed = false;          // an `error` event
  std::string error_name, error_message, response_body;
  std::optional<long long> http_status{};
  std::optional<bool> is_retryable{};
  std::string step_text;        // the texts of the current step (terminal.completed.text of the last one)
  // Ids of the parts of the current message (step) already mapped: opencode prints a part once, but a repeated line
  // must add nothing (no text twice, no usage counted twice). Only the current message's parts are kept (a part
  // belongs to one message, and opencode prints a message's parts before the next message's), so memory is
  // O(parts of one step), not O(run) — and the set stays small, which keeps this lookup cheap.
  std::string seen_message;
  // The first kFewParts ids in `few_parts` (strings reused from message to message, searched linearly: a step has a
  // handful of parts), any more in `seen_parts`.
  static constexpr std::size_t kFewParts = 32;
  std::vector<std::string> few_parts;
  std::size_t few_count = 0;
  std::unordered_set<std::string, string_hash, std::equal_to<>> seen_parts;
  held_thoughts thoughts{options.thought_release_batch};  // buffered reasoning, released when the final step ends


  error_code parse_tokens(od::object& obj) {
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

  error_code parse_state(od::object& obj) {
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

  error_code parse_part(od::object& obj) {
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
      return simdjson::SUCCESS;
    });
  }

  error_code parse_error(od::object& obj) {
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
  bool parse_fast(std::string_view line) {
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
  bool accept_fast(std::string_view line, const char* p, event_kind kind) {
    const char* const end = line.data() + line.size();
    if (p == end || *p != '}' || raw::skip_ws(p + 1, end) != end) return false;
    if (!valid_utf8(*utf8, line.data(), line.size())) return false;  // On-Demand rejects it, with the same result
    ev.kind = kind;
    ev.has_type = ev.has_part = true;
    return true;
  }

  // Fills `ev`; an error means the line is invalid.
  error_code parse(std::string_view line) {
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

  // ---- mapping ----------------------------------------------------------------------------------------------------

  /// False when the part was mapped already (a repeated line); parts without an id are always new.
  bool first_time(std::string_view part_id) {
    if (part_id.empty()) return true;
    if (!same_key(ev.message_id, seen_message)) {
      seen_message.assign(ev.message_id);
      few_count = 0;
      if (!seen_parts.empty()) seen_parts.clear();
    }
    for (std::size_t i = 0; i < few_count; ++i)
      if (same_key(few_parts[i], part_id)) return false;
    if (few_count < kFewParts) {
      if (few_count == few_parts.size()) few_parts.emplace_back();
      few_parts[few_count++].assign(part_id);
      return true;
    }
    return seen_parts.emplace(part_id).second;
  }

  void apply(std::vector<message>& out) {
    core.saw_event = true;
    // No init event: the first session id seen is the session (a real one, not synthesized).
    if (!ev.session_id.empty()) core.session(out, ev.session_id, {}, {});  // after a synthesized one: records the id
    else core.ensure_session(out);
    switch (ev.kind) {
      case event_kind::step_start:
        if (!first_time(ev.part_id)) break;
        // A new model request. After a cut stream opencode starts the same step again without a step_finish: the
        // run is not over, and the text of the new attempt is the step's text.
        finished = false;
        step_completed = false;
        step_text.clear();
        break;
      case event_kind::reasoning:
        if (!first_time(ev.part_id)) break;
        if (options.thinking == thinking_mode::stream) core.thought(out, ev.text);
        else if (!ev.text.empty()) thoughts.hold(ev.text);
        break;
      case event_kind::text:
        if (!first_time(ev.part_id)) break;
        core.text(out, ev.text);
        step_text.append(ev.text);
        break;
      case event_kind::tool_use:
        on_tool(out);
        break;
      case event_kind::step_finish:
        on_step_finish(out);
        break;
      case event_kind::error:
        on_error(out);
        break;
      case event_kind::unknown:
        break;  // future event types: nothing to map
    }
  }

  void on_tool(std::vector<message>& out) {
    // The model's call id names the call; the part id stands in if opencode ever leaves it out.
    const std::string_view id = ev.call_id.empty() ? ev.part_id : ev.call_id;
    const std::string_view name = ev.tool.empty() ? std::string_view("tool") : ev.tool;
    // Copied into the messages in place (object_writer): the event's values are refilled by a later line.
    auto input = [&](object_writer& w) { write_input(w, ev.input); };
    // opencode prints a tool part only once it is completed or failed; another status leaves the call open (closed
    // by a later line, or by finish()).
    if (ev.status != "completed" && ev.status != "error") {
      core.tool_call_with(out, id, name, input);
      return;
    }
    const bool is_error = ev.status == "error";
    std::string_view text = is_error ? ev.error_text : ev.output;
    if (is_error && text.empty()) text = "the tool failed";
    core.tool_call_and_close_with(out, id, name, input, text, is_error, [&](object_writer& raw) {
      raw.copy("metadata", ev.metadata);
      if (is_error && !ev.output.empty()) raw.string("output", ev.output);
      raw.string("status", ev.status);
      if (!ev.title.empty()) raw.string("title", ev.title);
    });
  }

  void on_step_finish(std::vector<message>& out) {
    if (!first_time(ev.part_id)) return;  // the same step again: usage must not count twice
    if (ev.has_tokens) {
      usage_sum& u = core.usage;
      detail::add_tokens(u.input, ev.input_tokens);
      detail::add_tokens(u.output, ev.output_tokens);
      detail::add_tokens(u.reasoning, ev.reasoning_tokens);
      detail::add_tokens(u.cache_read, ev.cache_read);
      detail::add_tokens(u.cache_write, ev.cache_write);
      u.any = true;
    }
    if (ev.cost) u_cost(*ev.cost);
    if (!final_reason(ev.reason)) return;  // the tools ran; another step follows
    finished = true;
    step_completed = true;
    stop_reason.assign(ev.reason);
    thoughts.release(core, out);
  }

  void u_cost(double c) {
    core.usage.cost_total = core.usage.cost_total.value_or(0.0) + c;
    core.usage.any = true;
  }

  void on_error(std::vector<message>& out) {
    if (failed && finished) return;  // the same error again
    failed = true;
    finished = true;
    error_name.assign(ev.error_name);
    error_message = sanitize_utf8(ev.error_message, kMaxStatusBytes);
    response_body = sanitize_utf8(ev.response_body, kMaxBodyBytes);
    http_status = ev.status_code;
    is_retryable = ev.is_retryable;
    thoughts.release(core, out);
  }

  /// opencode's own flag when it sent one; otherwise the statuses opencode retries itself (429, 5xx).
  [[nodiscard]] bool retryable() const noexcept {
    if (is_retryable) return *is_retryable;
    if (http_status) return *http_status == 408 || *http_status == 429 || *http_status >= 500;
    return false;
  }

  void finish(const run_end& end, std::vector<message>& out) {
    if (!core.begin_finish()) return;
    // Held thinking is part of what the agent did, whatever the outcome.
    thoughts.release_all(core, out);
    if (auto common = core.common_end(end, finished)) {
      core.emit_terminal(out, std::move(*common), end);
      return;
    }
    // The provider stopped an opencode that had already finished (it can linger): the exit status says nothing.
    const bool forced = end.stopped_after_finish && finished;
    const auto* exited = end.status ? end.status->as_exited() : nullptr;
    const int code = exited != nullptr ? exited->code : 0;
    terminal_draft d;
    if (failed) {
      // opencode exits 1 after an error event; the event is the better explanation.
      std::string text = error_message.empty() ? options.agent + " reported an error" : error_message;
      if (!error_name.empty()) text = error_name + ": " + text;
      d = terminal_draft{.reason = std::string(transport::failure_reason::agent_error), .text = std::move(text)};
      d.content["error_message"] = error_message;
      if (!error_name.empty()) d.content["error_name"] = error_name;
      if (http_status) d.content["http_status"] = *http_status;
      if (!response_body.empty()) d.content["response_body"] = response_body;
      d.content["retryable"] = retryable();
      if (!forced && code != 0) d.content["exit_code"] = code;
    } else if (!forced && code != 0) {
      d = core.exited_draft(end, code);
    } else if (step_completed) {
      d = terminal_draft{.type = message_type::terminal_completed, .text = step_text};
      d.content["stop_reason"] = stop_reason;
    } else {
      d = core.no_terminal_draft(end, "step_finish with reason stop, or error");
    }
    if (forced) d.content["stopped_after_finish"] = true;
    core.emit_terminal(out, std::move(d), end);
  }
};

opencode_mapper::opencode_mapper(opencode_mapper_options options)
    : impl_(std::make_unique<impl>(std::move(options))) {}
opencode_mapper::~opencode_mapper() = default;
opencode_mapper::opencode_mapper(opencode_mapper&&) noexcept = default;
opencode_mapper& opencode_mapper::operator=(opencode_mapper&&) noexcept = default;

void opencode_mapper::recycle(std::vector<message>& used) { impl_->core.recycle(used); }

void opencode_mapper::on_line(std::string_view line, std::vector<message>& out) {
  impl& m = *impl_;
  m.thoughts.release_rest(m.core, out);
  if (!m.core.begin_line(line)) return;  // after finish(), or a blank line
  try {
    if (m.parse(line) != simdjson::SUCCESS) {
      m.core.record_invalid(line);
      return;
    }
    m.apply(out);
  } catch (const std::exception&) {
    // Only allocation failures (or a bug) get here: keep the stream alive and report the line.
    m.core.record_invalid(line);
  }
}

void opencode_mapper::on_oversize_line(std::string_view head, std::size_t total_bytes,
                                       std::vector<message>& out) {
  impl_->thoughts.release_rest(impl_->core, out);
  impl_->core.oversize_line(head, total_bytes);
}

bool opencode_mapper::take_more(std::vector<message>& out) { return impl_->thoughts.release_more(impl_->core, out); }

bool opencode_mapper::agent_finished() const noexcept { return impl_->finished; }

void opencode_mapper::finish(const run_end& end, std::vector<message>& out) { impl_->finish(end, out); }

const mapper_stats& opencode_mapper::stats() const noexcept { return impl_->core.stats(); }

const std::string& opencode_mapper::session_id() const noexcept { return impl_->core.session_id(); }

}  // namespace agenthost::mapper
