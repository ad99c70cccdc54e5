// The OpenCode mapper: `opencode run --format json` events → contract messages. See opencode_mapper.hpp and
// docs/contract.md ("OpenCode mapping").
#include <agenthost/mapper/opencode_mapper.hpp>

#include "mapper_core.hpp"
#include "opencode_event.hpp"
#include "text_util.hpp"

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <unordered_set>

namespace agenthost::mapper {

using transport::message;
using transport::message_type;
using json = nlohmann::json;
using simdjson::error_code;
using namespace detail;
using namespace detail::opencode;

namespace {

// The response body of an HTTP error is kept for diagnosis, bounded.
constexpr std::size_t kMaxBodyBytes = 4096;

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

  event_parser parser;
  const oc_event& ev = parser.event();  // the line being mapped

  // ---- run state --------------------------------------------------------------------------------------------------
  bool finished = false;        // a final step_finish or an error since the last step_start
  bool step_completed = false;  // the last step ended with a final step_finish
  std::string stop_reason;      // its reason
  // The message (step) in which opencode itself ran a tool — one the provider did not run, that was not interrupted.
  // opencode calls the model again after such a step whatever its finish reason (session/prompt.ts: the loop ends
  // only when the last assistant message has no such tool part): a server that answers `stop` with tool calls (some
  // OpenAI-compatible ones do) does not end the run.
  bool step_ran_tool = false;
  std::string tool_message;
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
  // The recent call ids, and the parts that used one first (a part has one call id). Some OpenAI-compatible
  // servers number their tool calls per response (`call_0` in every step): the same call id in another part is
  // another call, not the first one printed again. Bounded as the core's memory of closed calls is (past it, the core
  // takes a reused id for a new call anyway); both sets are filled together, so they forget together. No allocation
  // once warm (recent_ids reuses its strings; a map of strings broke Recycle.ASteadyRunOfToolCallsAllocatesNothing).
  recent_ids call_ids{kRememberedClosedCalls}, first_parts{kRememberedClosedCalls};


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
        // The tools of an attempt cut short stay in its message, which a retried attempt continues.
        if (ev.message_id.empty() || ev.message_id != tool_message) step_ran_tool = false;
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
    const std::string_view id = tool_call_id();
    const std::string_view name = ev.tool.empty() ? std::string_view("tool") : ev.tool;
    if (!ev.provider_executed && !interrupted()) {
      step_ran_tool = true;
      tool_message.assign(ev.message_id);
    }
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

  /// The call id of the current tool part: the model's, or this part's id when an earlier part used that call id (the
  /// model reused it). A part without a call id uses its part id.
  std::string_view tool_call_id() {
    if (ev.call_id.empty()) return ev.part_id;
    if (ev.part_id.empty()) return ev.call_id;
    const std::uint32_t h = id_slots::hash_of(ev.call_id);
    if (!call_ids.contains(ev.call_id, h)) {
      call_ids.insert_absent(ev.call_id, h);
      first_parts.insert(ev.part_id);
      return ev.call_id;
    }
    return first_parts.contains(ev.part_id) ? ev.call_id : ev.part_id;
  }

  /// A tool part opencode counts as interrupted (its `Ba` in session/prompt.ts): failed, with
  /// state.metadata.interrupted true — the user stopped it; it does not make opencode call the model again.
  [[nodiscard]] bool interrupted() const {
    if (ev.status != "error" || !ev.metadata.is_object()) return false;
    const auto it = ev.metadata.find("interrupted");
    return it != ev.metadata.end() && it->is_boolean() && it->get<bool>();
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
    // opencode ran a tool in this step: it calls the model again whatever the reason (where a message id is missing,
    // the step_finish is taken to belong to the step the tool ran in).
    if (step_ran_tool && (ev.message_id.empty() || tool_message.empty() || ev.message_id == tool_message)) return;
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
