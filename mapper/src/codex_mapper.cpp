// The Codex mapper: `codex exec --json` thread events → contract messages. See codex_mapper.hpp and
// docs/contract.md ("Codex mapping").
#include <agenthost/mapper/codex_mapper.hpp>

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


// The tool names reported for codex's item types. Codex 0.171.0 runs commands through its `exec_command` tool
// (unified exec) and reports them as `/bin/bash -lc '…'`; older versions call the same tool `shell`. "shell" names
// what the item is (a command line), independent of the tool's current internal name.
constexpr std::string_view kShellTool = "shell";
constexpr std::string_view kPatchTool = "apply_patch";
constexpr std::string_view kWebSearchTool = "web_search";

// One parsed item (fields of all item types; what an item type does not have stays empty).
struct x_item {
  std::string_view id, type, text, message, command, aggregated_output, status, server, tool, query;
  bool has_id = false, has_type = false, has_text = false;
  std::optional<long long> exit_code{};
  json changes, arguments, result, error, action, items;  // null when absent

  /// As a default-constructed item, without rebuilding the JSON members that are already null.
  void reset() noexcept {
    id = type = text = message = command = aggregated_output = status = server = tool = query = {};
    has_id = has_type = has_text = false;
    exit_code.reset();
    for (json* j : {&changes, &arguments, &result, &error, &action, &items})
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

/// The text parts of an MCP result `{content: [{type: "text", text}…]}`, joined with '\n'.
std::string mcp_result_text(const json& result) {
  std::string text;
  if (!result.is_object()) return text;
  const auto it = result.find("content");
  if (it == result.end() || !it->is_array()) return text;
  bool first = true;
  for (const auto& part : *it) {
    if (!part.is_object()) continue;
    const auto t = part.find("text");
    if (t == part.end() || !t->is_string()) continue;
    if (!first) text += '\n';
    first = false;
    text += t->get<std::string>();
  }
  return text;
}

/// "update src/a.cpp\nadd b.txt" for a file_change item's `changes`.
std::string changes_text(const json& changes) {
  std::string text;
  if (!changes.is_array()) return text;
  for (const auto& c : changes) {
    if (!c.is_object()) continue;
    if (!text.empty()) text += '\n';
    text += c.value("kind", std::string("change")) + " " + c.value("path", std::string());
  }
  return text;
}

std::string lower_ascii(std::string_view s) {
  std::string r(s);
  for (auto& c : r)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return r;
}

// "Reconnecting... 1/2 (stream disconnected before completion: …)": codex retries a cut stream itself.
struct reconnect_notice {
  int attempt = 0, max_attempts = 0;
  std::string reason;
};
std::optional<reconnect_notice> parse_reconnect(std::string_view m) {
  constexpr std::string_view head = "Reconnecting... ";
  if (m.substr(0, head.size()) != head) return std::nullopt;
  std::size_t i = head.size();
  auto number = [&](int& out) {
    const std::size_t start = i;
    long long n = 0;
    while (i < m.size() && m[i] >= '0' && m[i] <= '9' && i - start < 9) n = n * 10 + (m[i++] - '0');
    out = static_cast<int>(n);
    return i > start;
  };
  reconnect_notice r;
  if (!number(r.attempt) || i >= m.size() || m[i] != '/') return std::nullopt;
  ++i;
  if (!number(r.max_attempts)) return std::nullopt;
  std::string_view rest = m.substr(i);
  if (rest.size() >= 3 && rest.substr(0, 2) == " (" && rest.back() == ')') rest = rest.substr(2, rest.size() - 3);
  r.reason.assign(rest);
  return r;
}

/// The ids of finished items. Codex numbers its items "item_0", "item_1"… within a run: those are kept as bits (no
/// allocation or hashing per item); any other id goes to a hash set. Memory O(items).
class id_set {
 public:
  /// False when `id` was already there.
  bool insert(std::string_view id) {
    if (const auto n = number(id)) {
      if (*n >= bits_.size()) bits_.resize(std::max<std::size_t>(*n + 1, bits_.size() * 2));
      if (bits_[*n]) return false;
      bits_[*n] = true;
      return true;
    }
    return others_.emplace(id).second;
  }
  [[nodiscard]] bool contains(std::string_view id) const {
    if (const auto n = number(id)) return *n < bits_.size() && bits_[*n];
    return others_.find(id) != others_.end();
  }

 private:
  // "item_<n>" with a canonical n below 2^24, else nullopt.
  static std::optional<std::size_t> number(std::string_view id) noexcept {
    constexpr std::string_view prefix = "item_";
    if (id.size() <= prefix.size() || id.size() > prefix.size() + 7 || id.substr(0, prefix.size()) != prefix)
      return std::nullopt;
    const std::string_view digits = id.substr(prefix.size());
    if (digits.size() > 1 && digits.front() == '0') return std::nullopt;
    std::size_t n = 0;
    for (const char c : digits) {
      if (c < '0' || c > '9') return std::nullopt;
      n = n * 10 + static_cast<std::size_t>(c - '0');
    }
    if (n >= (std::size_t{1} << 24)) return std::nullopt;
    return n;
  }
  std::vector<bool> bits_;
  std::unordered_set<std::string, string_hash, std::equal_to<>> others_;
};

using raw::consume;
using raw::starts_with;

}  // namespace

std::optional<int> codex_http_status(std::string_view m) noexcept {
  auto three_digits = [&](std::size_t i) -> std::optional<int> {
    if (i + 3 > m.size()) return std::nullopt;
    for (std::size_t k = i; k < i + 3; ++k)
      if (m[k] < '0' || m[k] > '9') return std::nullopt;
    if (i + 3 < m.size() && m[i + 3] >= '0' && m[i + 3] <= '9') return std::nullopt;
    const int s = (m[i] - '0') * 100 + (m[i + 1] - '0') * 10 + (m[i + 2] - '0');
    if (s < 100 || s > 599) return std::nullopt;
    return s;
  };
  if (auto s = three_digits(0)) return s;
  // "last status: 429 …", "unexpected status 400 …" (codex's wording for failed requests).
  for (std::size_t pos = m.find("status"); pos != std::string_view::npos; pos = m.find("status", pos + 1)) {
    std::size_t i = pos + 6;
    if (i < m.size() && m[i] == ':') ++i;
    if (i < m.size() && m[i] == ' ') ++i;
    if (auto s = three_digits(i)) return s;
  }
  return std::nullopt;
}

bool codex_error_is_retryable(std::string_view error_message) noexcept {
  try {
    const std::string m = lower_ascii(error_message);
    // Limits the caller has to act on: waiting a moment does not help.
    for (std::string_view no : {"usage limit", "quota", "insufficient", "context window", "context length"})
      if (m.find(no) != std::string::npos) return false;
    if (const auto s = codex_http_status(error_message))
      return *s == 408 || *s == 409 || *s == 429 || *s >= 500;
    for (std::string_view yes : {"high demand", "temporar", "overloaded", "rate limit", "too many requests",
                                 "stream disconnected", "timed out", "timeout", "connection", "network error",
                                 "server error", "internal error", "service unavailable", "try again"})
      if (m.find(yes) != std::string::npos) return true;
  } catch (...) {
    // Allocation failure: no hint rather than a wrong one.
  }
  return false;
}

struct codex_mapper::impl {
  explicit impl(codex_mapper_options o)
      : options(std::move(o)),
        core(core_options{.agent = options.agent,
                          .max_invalid_lines = options.max_invalid_lines,
                          .max_invalid_line_bytes = options.max_invalid_line_bytes,
                          .requested_session_id = options.requested_session_id,
                          .merge_adjacent_text = options.merge_adjacent_text}) {
    // The first call selects the kernel for this CPU; calling it directly afterwards saves a lookup per line.
    [[maybe_unused]] const bool selected = simdjson::validate_utf8("", 0);
    utf8 = simdjson::get_active_implementation();
  }

  codex_mapper_options options;
  mapper_core core;

  // ---- parsing: one On-Demand parser and one padded buffer for the mapper's lifetime --------------------------
  padded_line padded;
  string_arena arena;
  x_event ev;
  const simdjson::implementation* utf8 = nullptr;  // the runtime-selected simdjson kernel, for validate_utf8
  std::string fast_text;     // fast path: the unescaped text / aggregated_output
  std::string fast_command;  // fast path: the unescaped command
  std::string fast_status;   // fast path: the status

  // ---- run state --------------------------------------------------------------------------------------------------
  bool finished = false;         // turn.completed / turn.failed seen since the last turn.started
  bool turn_completed = false;
  bool turn_failed = false;
  std::string failure_message;   // turn.failed error.message
  std::string last_error;        // the last non-retry `error` event (explains a non-zero exit)
  // The agent_message item being reported and the text emitted for it (codex sends it whole; a repeated or extended
  // item adds only what is new).
  std::string message_id;
  std::string message_text;
  std::string final_text;        // the last completed agent message (terminal.completed.text)
  bool text_diverged = false;
  // Ids of completed agent_message / reasoning / error / plan items: a repeated item.completed adds nothing.
  id_set done_items;
  std::vector<std::string> held_thoughts;  // buffered reasoning, released when the turn ends
  std::string last_todo;                   // the last todo list reported, so an unchanged one is not repeated


  // Fast path for the lines that make up nearly all of a run, exactly as codex prints them (serde's field order):
  //   {"type":"item.completed","item":{"id":"…","type":"agent_message"|"reasoning","text":"…"}}
  //   {"type":"item.started"|"item.updated"|"item.completed","item":{"id":"…","type":"command_execution",
  //    "command":"…","aggregated_output":"…","exit_code":null|<int>,"status":"…"}}
  // It checks the UTF-8 of the whole line, every string (closed, no raw control character, valid escapes), the
  // integer, and that nothing but whitespace follows, and unescapes the strings in the same pass — no stage 1 over
  // the line, no second copy. Anything else (another key order, an escaped id, more fields…) returns false and the
  // line takes the On-Demand path, which accepts a superset of these lines and yields the same event for them.
  bool parse_fast(std::string_view line) {
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
    // A string member `,"key":"…"` (or `"key":` first), unescaped into `out`.
    auto member = [&](const auto& key_colon, std::string& out) {
      if (!consume(p, end, key_colon)) return false;
      if (p == end || *p != '"') return false;
      out.clear();
      p = scan_unescape_append(p, end, out);
      return p != nullptr;
    };
    // Filled in place: on failure the On-Demand path starts from a fresh event anyway.
    x_item& item = ev.item;
    item.reset();
    if (starts_with(p, end, R"(agent_message",)") || starts_with(p, end, R"(reasoning",)")) {
      if (kind != event_kind::item_completed) return false;
      item.type = *p == 'a' ? std::string_view("agent_message") : std::string_view("reasoning");
      p += item.type.size() + 2;
      if (!member(R"("text":)", fast_text)) return false;
      item.text = fast_text;
      item.has_text = true;
    } else if (starts_with(p, end, R"(command_execution",)")) {
      item.type = "command_execution";
      p += item.type.size() + 2;
      if (!member(R"("command":)", fast_command) || !member(R"(,"aggregated_output":)", fast_text)) return false;
      if (!consume(p, end, R"(,"exit_code":)")) return false;
      if (!consume(p, end, "null")) {
        std::int64_t code = 0;
        p = raw::parse_small_int(p, end, code);
        if (p == nullptr || code < INT32_MIN || code > INT32_MAX) return false;
        item.exit_code = code;
      }
      if (!member(R"(,"status":)", fast_status)) return false;
      item.command = fast_command;
      item.aggregated_output = fast_text;
      item.status = fast_status;
    } else {
      return false;
    }
    if (end - p < 2 || p[0] != '}' || p[1] != '}' || raw::skip_ws(p + 2, end) != end) return false;
    if (!utf8->validate_utf8(line.data(), line.size())) return false;  // On-Demand rejects it, with the same result
    item.id = std::string_view(id_begin, static_cast<std::size_t>(id_end - id_begin));
    item.has_id = item.has_type = true;
    ev.kind = kind;
    ev.has_type = ev.has_item = true;
    ev.wrong_type = ev.has_usage = ev.has_error_message = false;
    ev.thread_id = ev.message = ev.error_message = {};
    return true;
  }

  // Fills `ev`; an error means the line is invalid.
  error_code parse(std::string_view line) {
    if (parse_fast(line)) return simdjson::SUCCESS;
    ev = x_event{};
    if (!arena.empty()) arena.clear();
    od::document doc;
    if (auto e = padded.iterate(line, doc)) return e;
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
        if (auto te = read_string(v, t, arena, &ev.has_type)) return te;
        ev.kind = kind_of(t);
      } else if (key == "thread_id") {
        e = read_string(v, ev.thread_id, arena);
      } else if (key == "message") {
        e = read_string(v, ev.message, arena);
      } else if (key == "usage") {
        e = read_object(v, [&](od::object o) { return parse_usage(o, ev); });
      } else if (key == "error") {
        e = read_object(v, [&](od::object o) { return parse_error_object(o, ev, arena); });
      } else if (key == "item") {
        od::json_type t{};
        if (auto te = v.type().get(t)) return te;
        if (t != od::json_type::object) {
          item_wrong_type = t != od::json_type::null;
          continue;
        }
        od::object o;
        if (auto oe = v.get_object().get(o)) return oe;
        e = parse_item(o, ev.item, arena, ev.wrong_type);
        ev.has_item = true;
      }
      if (auto f = note(e, ev.wrong_type)) return f;
    }
    if (!ev.has_type) return simdjson::NO_SUCH_FIELD;
    if (auto e = check_end(doc)) return e;
    // Event types the mapper ignores are not checked further (their fields may mean something else).
    if (ev.kind == event_kind::unknown) return simdjson::SUCCESS;
    if (ev.wrong_type) return simdjson::INCORRECT_TYPE;
    const bool item_event = ev.kind == event_kind::item_started || ev.kind == event_kind::item_updated ||
                            ev.kind == event_kind::item_completed;
    // An item event needs an item with an id and a type; thread.started its id.
    if (item_event && (item_wrong_type || !ev.has_item || !ev.item.has_id || !ev.item.has_type))
      return simdjson::INCORRECT_TYPE;
    if (ev.kind == event_kind::thread_started && ev.thread_id.empty()) return simdjson::INCORRECT_TYPE;
    return simdjson::SUCCESS;
  }

  // ---- mapping ----------------------------------------------------------------------------------------------------

  void release_thoughts(std::vector<message>& out) {
    for (auto& t : held_thoughts) core.thought(out, std::move(t));
    held_thoughts.clear();
  }

  void apply(std::vector<message>& out) {
    core.saw_event = true;
    switch (ev.kind) {
      case event_kind::thread_started:
        core.session(out, ev.thread_id, {}, {});
        break;
      case event_kind::turn_started:
        // A new turn (codex exec runs one; a future multi-turn exec would start again here).
        finished = false;
        turn_completed = turn_failed = false;
        core.ensure_session(out);
        break;
      case event_kind::turn_completed:
        if (turn_completed && finished) break;  // the same event again: usage must not count twice
        if (ev.has_usage) {
          // OpenAI's input_tokens include the cached (and cache-write) tokens; the contract counts them apart.
          usage_sum& u = core.usage;
          u.input += std::max(0LL, ev.input - ev.cached - ev.cache_write);
          u.cache_read += ev.cached;
          u.cache_write += ev.cache_write;
          u.output += ev.output;  // reasoning_output_tokens are part of output_tokens
          u.reasoning += ev.reasoning;
          u.any = true;
        }
        turn_completed = true;
        finished = true;
        release_thoughts(out);
        break;
      case event_kind::turn_failed:
        if (turn_failed && finished) break;
        turn_failed = true;
        finished = true;
        failure_message.assign(ev.has_error_message ? ev.error_message : std::string_view{});
        release_thoughts(out);
        break;
      case event_kind::error:
        on_error_event(out);
        break;
      case event_kind::item_started:
      case event_kind::item_updated:
      case event_kind::item_completed:
        on_item(out);
        break;
      case event_kind::unknown:
        break;  // item.plan.delta, request_user_input, future events: nothing to map
    }
  }

  void on_error_event(std::vector<message>& out) {
    const std::string_view m = ev.message;
    if (auto r = parse_reconnect(m)) {
      core.status(out, "retry", m,
                  json{{"attempt", r->attempt}, {"max_attempts", r->max_attempts},
                       {"error", sanitize_utf8(r->reason, kMaxStatusBytes)}});
      return;
    }
    last_error = sanitize_utf8(m, kMaxStatusBytes);
    json extra = {{"code", "agent_error"}};
    if (const auto s = codex_http_status(m)) extra["http_status"] = *s;
    core.status(out, "warning", m.empty() ? std::string_view("codex reported an error") : m, std::move(extra));
  }

  void on_item(std::vector<message>& out) {
    const x_item& it = ev.item;
    const bool completed = ev.kind == event_kind::item_completed;
    const std::string_view type = it.type;
    if (type == "agent_message") {
      on_agent_message(out, completed);
    } else if (type == "reasoning") {
      if (!completed || !it.has_text) return;  // reasoning arrives whole; a partial one waits for its completion
      if (!done_items.insert(it.id)) return;
      if (options.thinking == thinking_mode::stream) core.thought(out, std::string(it.text));
      else if (!it.text.empty()) held_thoughts.emplace_back(it.text);
    } else if (type == "command_execution") {
      on_command(out, completed);
    } else if (type == "file_change") {
      core.tool_call(out, it.id, kPatchTool, json{{"changes", it.changes.is_null() ? json::array() : it.changes}});
      if (!completed) return;
      const bool failed = it.status == "failed";
      std::string text = changes_text(it.changes);
      if (failed && text.empty()) text = "the patch failed";
      core.tool_close(out, it.id, kPatchTool, std::move(text), failed,
                      json{{"changes", it.changes}, {"status", std::string(it.status)}});
    } else if (type == "mcp_tool_call") {
      const std::string name = "mcp__" + std::string(it.server) + "__" + std::string(it.tool);
      core.tool_call(out, it.id, name, it.arguments);
      if (!completed) return;
      const bool failed = it.status == "failed" || !it.error.is_null();
      std::string text = mcp_result_text(it.result);
      if (failed) {
        if (it.error.is_object() && it.error.contains("message") && it.error["message"].is_string())
          text = it.error["message"].get<std::string>();
        if (text.empty()) text = "the MCP tool call failed";
      }
      core.tool_close(out, it.id, name, std::move(text), failed,
                      json{{"result", it.result}, {"error", it.error}, {"status", std::string(it.status)}});
    } else if (type == "web_search") {
      json input = {{"query", std::string(it.query)}};
      if (!it.action.is_null()) input["action"] = it.action;
      core.tool_call(out, it.id, kWebSearchTool, std::move(input));
      // Codex reports the search, not its results: the output is empty, raw_output keeps what there is.
      if (completed)
        core.tool_close(out, it.id, kWebSearchTool, {}, false,
                        json{{"query", std::string(it.query)}, {"action", it.action}});
    } else if (type == "todo_list") {
      on_todo(out);
    } else if (type == "error") {
      // A non-fatal notice (e.g. "Model metadata for `x` not found…"); a failure comes as turn.failed.
      if (ev.kind == event_kind::item_updated) return;
      if (!done_items.insert(it.id)) return;
      core.status(out, "warning", it.message.empty() ? std::string_view("codex reported a warning") : it.message,
                  json{{"code", "agent_warning"}});
    } else if (type == "plan") {
      if (!completed || !done_items.insert(it.id)) return;
      core.status(out, "plan", it.text);
    }
    // Other item types (collab_tool_call, future ones) are not mapped.
  }

  void on_agent_message(std::vector<message>& out, bool completed) {
    const x_item& it = ev.item;
    if (!it.has_text) return;  // nothing to say; a later event may carry the text
    if (done_items.contains(it.id)) return;  // the same message again
    const std::string_view text = it.text;
    if (completed && message_id.empty()) {
      // The usual case: the whole message at once, nothing of it emitted before.
      core.text(out, text);
      done_items.insert(it.id);
      if (text.data() == fast_text.data()) {
        // Keep the text as the final one without copying it again; fast_text reuses the old buffer.
        std::swap(final_text, fast_text);
      } else {
        final_text.assign(text);
      }
      return;
    }
    if (it.id != message_id) {
      message_id.assign(it.id);
      message_text.clear();
    }
    if (text.size() >= message_text.size() && text.substr(0, message_text.size()) == message_text) {
      core.text(out, text.substr(message_text.size()));
    } else {
      // Codex changed a text it had already reported (a later version streaming partial items): say so instead of
      // drifting silently; terminal.completed.text carries the final one.
      text_diverged = true;
      core.status(out, "warning", "codex replaced the text of an agent message it had already reported",
                  json{{"code", "text_diverged"}, {"final_text", sanitize_utf8(text)}});
    }
    message_text.assign(text);
    if (completed) {
      done_items.insert(it.id);
      final_text.assign(text);
      message_id.clear();
      message_text.clear();
    }
  }

  void on_command(std::vector<message>& out, bool completed) {
    const x_item& it = ev.item;
    // An item seen first as item.completed still carries its command: the call is announced with its real input.
    if (!core.tool_open(it.id)) {
      json input(json::value_t::object);
      put(input.get_ref<json::object_t&>(), "command", std::string(it.command));
      core.tool_call(out, it.id, kShellTool, std::move(input));
    }
    if (!completed) {
      core.tool_update(out, it.id, kShellTool, it.aggregated_output);
      return;
    }
    const bool failed = it.status == "failed" || it.status == "declined" || (it.exit_code && *it.exit_code != 0);
    std::string text(it.aggregated_output);
    if (failed && text.empty()) {
      text = it.status == "declined" ? "the command was declined"
             : it.exit_code          ? "the command exited with code " + std::to_string(*it.exit_code)
                                     : "the command failed";
    }
    // The rest of the item; its aggregated_output is the message's output (not repeated: it can be large).
    json raw(json::value_t::object);
    auto& r = raw.get_ref<json::object_t&>();
    put(r, "command", std::string(it.command));
    put(r, "exit_code", it.exit_code ? json(*it.exit_code) : json(nullptr));
    put(r, "status", std::string(it.status));
    core.tool_close(out, it.id, kShellTool, std::move(text), failed, std::move(raw));
  }

  void on_todo(std::vector<message>& out) {
    const json& items = ev.item.items;
    std::string text;
    std::size_t done = 0, total = 0;
    if (items.is_array()) {
      for (const auto& i : items) {
        if (!i.is_object()) continue;
        const bool completed = i.value("completed", false);
        ++total;
        if (completed) ++done;
        if (!text.empty()) text += '\n';
        text += completed ? "[x] " : "[ ] ";
        text += i.value("text", std::string());
      }
    }
    std::string key = items.dump();
    if (key == last_todo) return;  // item.updated repeats the list when nothing changed
    last_todo = std::move(key);
    core.status(out, "todo_list", text.empty() ? std::string("todo list (empty)") : text,
                json{{"items", items.is_array() ? items : json::array()}, {"completed", done}, {"total", total}});
  }

  void finish(const run_end& end, std::vector<message>& out) {
    if (!core.begin_finish()) return;
    // Held thinking is part of what the agent did, whatever the outcome.
    release_thoughts(out);
    if (auto common = core.common_end(end, finished)) {
      core.emit_terminal(out, std::move(*common), end);
      return;
    }
    // The provider stopped a codex that had already finished (it can linger): the exit status says nothing.
    const bool forced = end.stopped_after_finish && finished;
    const auto* exited = end.status ? end.status->as_exited() : nullptr;
    const int code = exited != nullptr ? exited->code : 0;
    terminal_draft d;
    if (turn_failed) {
      // Codex exits 1 after a failed turn; the turn's error is the better explanation.
      const std::string& m = failure_message;
      d = terminal_draft{.reason = std::string(transport::failure_reason::agent_error),
                         .text = m.empty() ? options.agent + " reported a failed turn" : m};
      d.content["error_message"] = sanitize_utf8(m, kMaxStatusBytes);
      if (const auto s = codex_http_status(m)) d.content["http_status"] = *s;
      d.content["retryable"] = codex_error_is_retryable(m);
      if (!forced && code != 0) d.content["exit_code"] = code;
    } else if (!forced && code != 0) {
      d = core.exited_draft(end, code, last_error);
    } else if (turn_completed) {
      d = terminal_draft{.type = message_type::terminal_completed, .text = final_text};
      if (text_diverged) d.content["text_diverged"] = true;
    } else {
      d = core.no_terminal_draft(end, "turn.completed or turn.failed");
      if (!last_error.empty()) d.text += "; last error: " + last_error;
    }
    if (forced) d.content["stopped_after_finish"] = true;
    core.emit_terminal(out, std::move(d), end);
  }
};

codex_mapper::codex_mapper(codex_mapper_options options) : impl_(std::make_unique<impl>(std::move(options))) {}
codex_mapper::~codex_mapper() = default;
codex_mapper::codex_mapper(codex_mapper&&) noexcept = default;
codex_mapper& codex_mapper::operator=(codex_mapper&&) noexcept = default;

void codex_mapper::on_line(std::string_view line, std::vector<message>& out) {
  impl& m = *impl_;
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

void codex_mapper::on_oversize_line(std::string_view head, std::size_t total_bytes, std::vector<message>& /*out*/) {
  impl_->core.oversize_line(head, total_bytes);
}

bool codex_mapper::agent_finished() const noexcept { return impl_->finished; }

void codex_mapper::finish(const run_end& end, std::vector<message>& out) { impl_->finish(end, out); }

const mapper_stats& codex_mapper::stats() const noexcept { return impl_->core.stats(); }

const std::string& codex_mapper::session_id() const noexcept { return impl_->core.session_id(); }

}  // namespace agenthost::mapper
