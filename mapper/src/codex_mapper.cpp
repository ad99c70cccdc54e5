// The Codex mapper: `codex exec --json` thread events → contract messages. See codex_mapper.hpp and
// docs/contract.md ("Codex mapping").
#include <agenthost/mapper/codex_mapper.hpp>

#include "codex_event.hpp"
#include "mapper_core.hpp"
#include "text_util.hpp"

#include <nlohmann/json.hpp>

#include <unordered_set>

namespace agenthost::mapper {

using transport::message;
using transport::message_type;
using json = nlohmann::json;
using simdjson::error_code;
using namespace detail;
using codex::event_kind;
using codex::x_item;

namespace {

// The tool names reported for codex's item types. Codex 0.171.0 runs commands through its `exec_command` tool
// (unified exec) and reports them as `/bin/bash -lc '…'`; older versions call the same tool `shell`. "shell" names
// what the item is (a command line), independent of the tool's current internal name.
constexpr std::string_view kShellTool = "shell";
constexpr std::string_view kPatchTool = "apply_patch";
constexpr std::string_view kWebSearchTool = "web_search";

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

/// `o[key]` when it is a string, else `fallback` — json::value() throws on a value of another type, and a line this
/// mapper already emitted from must not become invalid half-way.
std::string string_member(const json& o, const char* key, std::string fallback = {}) {
  const auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::move(fallback);
}

/// "update src/a.cpp\nadd b.txt" for a file_change item's `changes`. A kind is "add" / "delete" / "update", or (the
/// app-server protocol's spelling) an object whose `type` is.
std::string changes_text(const json& changes) {
  std::string text;
  if (!changes.is_array()) return text;
  for (const auto& c : changes) {
    if (!c.is_object()) continue;
    if (!text.empty()) text += '\n';
    const auto k = c.find("kind");
    std::string kind = k != c.end() && k->is_object() ? string_member(*k, "type") : string_member(c, "kind");
    text += (kind.empty() ? std::string("change") : kind) + " " + string_member(c, "path");
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
        core(core_options_of(options)) {}

  codex_mapper_options options;
  mapper_core core;
  codex::event_parser parser;  // phase 1: the line's event (codex_event.hpp)
  const codex::x_event& ev = parser.event();

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
  held_thoughts thoughts{options.thought_release_batch};  // buffered reasoning, released when the turn ends
  std::string last_todo;                   // the last todo list reported, so an unchanged one is not repeated


  // ---- mapping ----------------------------------------------------------------------------------------------------

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
          detail::add_tokens(u.input, ev.input - ev.cached - ev.cache_write);
          detail::add_tokens(u.cache_read, ev.cached);
          detail::add_tokens(u.cache_write, ev.cache_write);
          detail::add_tokens(u.output, ev.output);  // reasoning_output_tokens are part of output_tokens
          detail::add_tokens(u.reasoning, ev.reasoning);
          u.any = true;
        }
        turn_completed = true;
        finished = true;
        thoughts.release(core, out);
        break;
      case event_kind::turn_failed:
        if (turn_failed && finished) break;
        turn_failed = true;
        finished = true;
        failure_message.assign(ev.has_error_message ? ev.error_message : std::string_view{});
        thoughts.release(core, out);
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
      if (options.thinking == thinking_mode::stream) core.thought(out, it.text);
      else if (!it.text.empty()) thoughts.hold(it.text);
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
    const std::string_view text = it.text;
    if (completed && message_id.empty()) {
      // The usual case: the whole message at once, nothing of it emitted before (one look at the finished ids:
      // marked first, so that the same message again adds nothing).
      if (!done_items.insert(it.id)) return;
      core.text(out, text);
      // Keep the text as the final one without copying it again when it is the parser's own buffer.
      if (!parser.take_text(text, final_text)) final_text.assign(text);
      return;
    }
    if (done_items.contains(it.id)) return;  // the same message again
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
    // Messages written in place (object_writer): these are most of a run's messages. An item seen first as
    // item.completed still carries its command: the call is announced with its real input. A call already open (or
    // closed) is not announced again.
    auto input = [&](object_writer& w) { w.string("command", it.command); };
    if (!completed) {
      const bool opened = core.tool_call_with(out, it.id, kShellTool, input);
      // A call just opened has no output yet: an empty one adds nothing (and needs no lookup).
      if (!opened || !it.aggregated_output.empty()) core.tool_update(out, it.id, kShellTool, it.aggregated_output);
      return;
    }
    const bool failed = it.status == "failed" || it.status == "declined" || (it.exit_code && *it.exit_code != 0);
    std::string failure;
    std::string_view text = it.aggregated_output;
    if (failed && text.empty()) {
      failure = it.status == "declined" ? "the command was declined"
                : it.exit_code          ? "the command exited with code " + std::to_string(*it.exit_code)
                                        : "the command failed";
      text = failure;
    }
    // The rest of the item; its aggregated_output is the message's output (not repeated: it can be large).
    core.tool_call_and_close_with(out, it.id, kShellTool, input, text, failed, [&](object_writer& raw) {
      raw.string("command", it.command);
      if (it.exit_code) raw.integer("exit_code", *it.exit_code);
      else raw.null("exit_code");
      raw.string("status", it.status);
    });
  }

  void on_todo(std::vector<message>& out) {
    const json& items = ev.item.items;
    std::string text;
    std::size_t done = 0, total = 0;
    if (items.is_array()) {
      for (const auto& i : items) {
        if (!i.is_object()) continue;
        const auto c = i.find("completed");
        const bool completed = c != i.end() && c->is_boolean() && c->get<bool>();
        ++total;
        if (completed) ++done;
        if (!text.empty()) text += '\n';
        text += completed ? "[x] " : "[ ] ";
        text += string_member(i, "text");
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
    thoughts.release_all(core, out);
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

void codex_mapper::recycle(std::vector<message>& used) { impl_->core.recycle(used); }

void codex_mapper::on_line(std::string_view line, std::vector<message>& out) {
  impl& m = *impl_;
  m.thoughts.release_rest(m.core, out);
  if (!m.core.begin_line(line)) return;  // after finish(), or a blank line
  try {
    if (m.parser.parse(line) != simdjson::SUCCESS) {
      m.core.record_invalid(line);
      return;
    }
    m.apply(out);
  } catch (const std::exception&) {
    // Only allocation failures (or a bug) get here: keep the stream alive and report the line.
    m.core.record_invalid(line);
  }
}

void codex_mapper::on_oversize_line(std::string_view head, std::size_t total_bytes, std::vector<message>& out) {
  impl_->thoughts.release_rest(impl_->core, out);
  impl_->core.oversize_line(head, total_bytes);
}

bool codex_mapper::take_more(std::vector<message>& out) { return impl_->thoughts.release_more(impl_->core, out); }

bool codex_mapper::agent_finished() const noexcept { return impl_->finished; }

void codex_mapper::finish(const run_end& end, std::vector<message>& out) { impl_->finish(end, out); }

const mapper_stats& codex_mapper::stats() const noexcept { return impl_->core.stats(); }

const std::string& codex_mapper::session_id() const noexcept { return impl_->core.session_id(); }

}  // namespace agenthost::mapper
