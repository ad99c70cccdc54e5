#include "codex_event.hpp"

#include "ondemand_fields.hpp"
#include "raw_scan.hpp"
#include "text_util.hpp"

#include <cstdint>

namespace agenthost::mapper::detail::codex {

using json = nlohmann::json;
using simdjson::error_code;
using raw::consume;
using raw::starts_with;

namespace {

event_kind kind_of(std::string_view t) noexcept {
  if (t == "item.completed") return event_kind::item_completed;
  if (t == "item.started") return event_kind::item_started;
  if (t == "item.updated") return event_kind::item_updated;
  if (t == "thread.started") return event_kind::thread_started;
  if (t == "turn.started") return event_kind::turn_started;
  if (t == "turn.completed") return event_kind::turn_completed;
  if (t == "turn.failed") return event_kind::turn_failed;
  if (t == "error") return event_kind::error;
  return event_kind::unknown;
}

error_code read_json(od::value& v, json& out, string_arena& arena) { return to_json(v, out, arena); }

error_code parse_item(od::object obj, x_item& it, string_arena& arena, bool& wrong_type) {
  return for_fields(obj, wrong_type, [&](std::string_view key, od::value& v) -> error_code {
    if (key == "id") return read_string(v, it.id, arena, &it.has_id);
    if (key == "type") return read_string(v, it.type, arena, &it.has_type);
    if (key == "text") return read_string(v, it.text, arena, &it.has_text);
    if (key == "message") return read_string(v, it.message, arena);
    if (key == "command") return read_string(v, it.command, arena);
    if (key == "aggregated_output") return read_string(v, it.aggregated_output, arena);
    if (key == "status") return read_string(v, it.status, arena);
    if (key == "server") return read_string(v, it.server, arena);
    if (key == "tool") return read_string(v, it.tool, arena);
    if (key == "query") return read_string(v, it.query, arena);
    if (key == "exit_code") return read_int(v, it.exit_code);
    if (key == "changes") return read_json(v, it.changes, arena);
    if (key == "arguments") return read_json(v, it.arguments, arena);
    if (key == "result") return read_json(v, it.result, arena);
    if (key == "error") return read_json(v, it.error, arena);
    if (key == "action") return read_json(v, it.action, arena);
    if (key == "items") return read_json(v, it.items, arena);
    return simdjson::SUCCESS;
  });
}

error_code parse_usage(od::object obj, x_event& ev) {
  ev.has_usage = true;
  return for_fields(obj, ev.wrong_type, [&](std::string_view key, od::value& v) -> error_code {
    if (key == "input_tokens") return read_count(v, ev.input);
    if (key == "cached_input_tokens") return read_count(v, ev.cached);
    if (key == "cache_write_input_tokens") return read_count(v, ev.cache_write);
    if (key == "output_tokens") return read_count(v, ev.output);
    if (key == "reasoning_output_tokens") return read_count(v, ev.reasoning);
    return simdjson::SUCCESS;
  });
}

error_code parse_error_object(od::object obj, x_event& ev, string_arena& arena) {
  return for_fields(obj, ev.wrong_type, [&](std::string_view key, od::value& v) -> error_code {
    if (key == "message") return read_string(v, ev.error_message, arena, &ev.has_error_message);
    return simdjson::SUCCESS;
  });
}

}  // namespace

bool event_parser::take_text(std::string_view text, std::string& into) noexcept {
  if (text.data() != fast_text_.data()) return false;
  std::swap(into, fast_text_);
  return true;
}

// Fast path for the lines that make up nearly all of a run, exactly as codex prints them (serde's field order):
//   {"type":"item.completed","item":{"id":"…","type":"agent_message"|"reasoning","text":"…"}}
//   {"type":"item.started"|"item.updated"|"item.completed","item":{"id":"…","type":"command_execution",
//    "command":"…","aggregated_output":"…","exit_code":null|<int>,"status":"…"}}
// It checks the UTF-8 of the whole line, every string (closed, no raw control character, valid escapes), the
// integer, and that nothing but whitespace follows, and unescapes the strings in the same pass — no stage 1 over
// the line, no second copy. Anything else (another key order, an escaped id, more fields…) returns false and the
// line takes the On-Demand path, which accepts a superset of these lines and yields the same event for them.
bool event_parser::parse_fast(std::string_view line) {
  const char* p = line.data();
  const char* const end = p + line.size();
  if (!consume(p, end, R"({"type":"item.)")) return false;
  event_kind kind = event_kind::unknown;
  if (consume(p, end, "completed")) kind = event_kind::item_completed;
  else if (consume(p, end, "started")) kind = event_kind::item_started;
  else if (consume(p, end, "updated")) kind = event_kind::item_updated;
  else return false;
  if (!consume(p, end, R"(","item":{"id":)")) return false;
  if (p == end || *p != '"') return false;
  const char* id_end = nullptr;
  bool escaped = false;
  const char* const id_begin = p + 1;
  p = raw::scan_string(p, end, id_end, escaped);
  if (p == nullptr || escaped || !consume(p, end, R"(,"type":")")) return false;
  // A string member `,"key":"…"` (or `"key":` first): a view of the line, or of `buffer` when it had escapes.
  auto member = [&](const auto& key_colon, std::string_view& out, std::string& buffer) {
    if (!consume(p, end, key_colon)) return false;
    if (p == end || *p != '"') return false;
    p = scan_string_view(p, end, out, buffer, line.data());
    return p != nullptr;
  };
  // Filled in place: on failure the On-Demand path starts from a fresh event anyway.
  x_item& item = ev_.item;
  item.reset();
  if (starts_with(p, end, R"(agent_message",)") || starts_with(p, end, R"(reasoning",)")) {
    if (kind != event_kind::item_completed) return false;
    item.type = *p == 'a' ? std::string_view("agent_message") : std::string_view("reasoning");
    p += item.type.size() + 2;
    if (!member(R"("text":)", item.text, fast_text_)) return false;
    item.has_text = true;
  } else if (starts_with(p, end, R"(command_execution",)")) {
    item.type = "command_execution";
    p += item.type.size() + 2;
    if (!member(R"("command":)", item.command, fast_command_) ||
        !member(R"(,"aggregated_output":)", item.aggregated_output, fast_text_))
      return false;
    if (!consume(p, end, R"(,"exit_code":)")) return false;
    if (!consume(p, end, "null")) {
      std::int64_t code = 0;
      p = raw::parse_small_int(p, end, code);
      if (p == nullptr || code < INT32_MIN || code > INT32_MAX) return false;
      item.exit_code = code;
    }
    if (!member(R"(,"status":)", item.status, fast_status_)) return false;
  } else {
    return false;
  }
  if (end - p < 2 || p[0] != '}' || p[1] != '}' || raw::skip_ws(p + 2, end) != end) return false;
  if (!valid_utf8(*utf8_, line.data(), line.size())) return false;  // On-Demand rejects it, with the same result
  item.id = std::string_view(id_begin, static_cast<std::size_t>(id_end - id_begin));
  item.has_id = item.has_type = true;
  ev_.kind = kind;
  ev_.has_type = ev_.has_item = true;
  ev_.wrong_type = ev_.has_usage = ev_.has_error_message = false;
  clear_views(ev_.thread_id, ev_.message, ev_.error_message);
  return true;
}

// Fills `ev_`; an error means the line is invalid.
error_code event_parser::parse(std::string_view line) {
  if (parse_fast(line)) return simdjson::SUCCESS;
  ev_ = x_event{};
  if (!arena_.empty()) arena_.clear();
  od::document doc;
  if (auto e = padded_.iterate(line, doc)) return e;
  od::object root;
  if (auto e = doc.get_object().get(root)) return e;
  bool item_wrong_type = false;
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
      if (auto te = read_string(v, t, arena_, &ev_.has_type)) return te;
      ev_.kind = kind_of(t);
    } else if (key == "thread_id") {
      e = read_string(v, ev_.thread_id, arena_);
    } else if (key == "message") {
      e = read_string(v, ev_.message, arena_);
    } else if (key == "usage") {
      e = read_object(v, [&](od::object o) { return parse_usage(o, ev_); });
    } else if (key == "error") {
      e = read_object(v, [&](od::object o) { return parse_error_object(o, ev_, arena_); });
    } else if (key == "item") {
      od::json_type t{};
      if (auto te = v.type().get(t)) return te;
      if (t != od::json_type::object) {
        item_wrong_type = t != od::json_type::null;
        continue;
      }
      od::object o;
      if (auto oe = v.get_object().get(o)) return oe;
      e = parse_item(o, ev_.item, arena_, ev_.wrong_type);
      ev_.has_item = true;
    }
    if (auto f = note(e, ev_.wrong_type)) return f;
  }
  if (!ev_.has_type) return simdjson::NO_SUCH_FIELD;
  if (auto e = check_end(doc)) return e;
  // Event types the mapper ignores are not checked further (their fields may mean something else).
  if (ev_.kind == event_kind::unknown) return simdjson::SUCCESS;
  if (ev_.wrong_type) return simdjson::INCORRECT_TYPE;
  const bool item_event = ev_.kind == event_kind::item_started || ev_.kind == event_kind::item_updated ||
                          ev_.kind == event_kind::item_completed;
  // An item event needs an item with an id and a type; thread.started its id.
  if (item_event && (item_wrong_type || !ev_.has_item || !ev_.item.has_id || !ev_.item.has_type))
    return simdjson::INCORRECT_TYPE;
  if (ev_.kind == event_kind::thread_started && ev_.thread_id.empty()) return simdjson::INCORRECT_TYPE;
  return simdjson::SUCCESS;
}

}  // namespace agenthost::mapper::detail::codex
