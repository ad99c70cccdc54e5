// agenthost/mapper/pi_mapper.cpp — pi JSONL → message contract (phase 2: the state machine): the public class,
// emission and the event dispatch. The assistant text and message blocks are in pi_mapper_text.cpp, tools and the
// run's end in pi_mapper_tools.cpp; the state is declared in pi_mapper_impl.hpp.
#include "pi_mapper_impl.hpp"
#include "raw_scan.hpp"

#include <regex>

namespace agenthost::mapper {

using transport::message;
using transport::message_type;
using json = nlohmann::json;
using namespace detail;

bool pi_error_is_retryable(std::string_view error_message) {
  // pi's AgentSession._isRetryableError pattern (0.7x); context overflow is handled by pi's compaction instead.
  static const std::regex pattern(
      "overloaded|rate.?limit|too many requests|429|500|502|503|504|service.?unavailable|server error|"
      "internal error|connection.?error|connection.?refused|other side closed|fetch failed|upstream.?connect|"
      "reset before headers|terminated|retry delay",
      std::regex::ECMAScript | std::regex::icase | std::regex::optimize);
  return std::regex_search(error_message.begin(), error_message.end(), pattern);
}

std::optional<int> leading_http_status(std::string_view m) noexcept {
  if (m.size() < 3) return std::nullopt;
  for (std::size_t i = 0; i < 3; ++i) {
    if (m[i] < '0' || m[i] > '9') return std::nullopt;
  }
  if (m.size() > 3 && m[3] >= '0' && m[3] <= '9') return std::nullopt;
  const int status = (m[0] - '0') * 100 + (m[1] - '0') * 10 + (m[2] - '0');
  if (status < 100 || status > 599) return std::nullopt;
  return status;
}

// ---- emission ------------------------------------------------------------------------------------------------

void pi_mapper::impl::emit(std::vector<message>& out, message_type type, json content) {
  out.push_back(message{type, std::move(content)});
}

void pi_mapper::impl::emit_synthesized_session(std::vector<message>& out) {
  session_emitted = true;
  // pi printed no session header (RPC mode, an old or foreign build): report what is known.
  json c = {{"session_id", options.requested_session_id.value_or("")}, {"agent", options.agent},
            {"synthesized", true}};
  if (!last.model.empty()) c["model"] = last.model;
  emit(out, message_type::session_started, std::move(c));
}

void pi_mapper::impl::emit_text(std::vector<message>& out, std::string_view text) {
  if (text.empty()) return;
  ensure_session(out);
  message_visible.append(text);
  if (options.merge_adjacent_text && append_to_last_text(out, text)) return;
  pool.add_text(out, message_type::assistant, text);  // a recycled message: no allocation on this per-token path
}

void pi_mapper::impl::emit_thought(std::vector<message>& out, std::string_view text) {
  if (text.empty()) return;
  ensure_session(out);
  pool.add_text(out, message_type::assistant_thought, text);
}

void pi_mapper::impl::status(std::vector<message>& out, std::string_view kind, std::string text, json extra) {
  extra["kind"] = std::string(kind);
  extra["text"] = sanitize_utf8(text, kMaxStatusBytes);
  emit(out, message_type::status, std::move(extra));
}

// ---- events ------------------------------------------------------------------------------------------------------

void pi_mapper::impl::on_session(const x_event& ev, std::vector<message>& out) {
  if (session_emitted) return;  // a second header (or one after content): ignored
  session_emitted = true;
  session_id.assign(ev.session_id);
  cwd.assign(ev.cwd);
  json c = {{"session_id", session_id}, {"agent", options.agent}};
  if (!cwd.empty()) c["cwd"] = cwd;
  message_type type = message_type::session_started;
  if (options.requested_session_id) {
    const std::string& requested = *options.requested_session_id;
    const bool same = !requested.empty() && session_id.compare(0, requested.size(), requested) == 0;
    type = message_type::session_resumed;
    c["requested_session_id"] = requested;
    c["resume"] = same ? "resumed" : "restarted";
  }
  emit(out, type, std::move(c));
}

void pi_mapper::impl::apply(x_event& ev, std::vector<message>& out) {
  saw_event = true;
  switch (ev.kind) {
    case event_kind::session:
      on_session(ev, out);
      break;
    case event_kind::agent_start:
      finished = false;
      agent_ended = false;
      break;
    case event_kind::turn_start:
      break;
    case event_kind::message_start:
      if (ev.message.role == "assistant") {
        abandon_message(out);
        after_end = false;
        begin_message();
        if (!ev.message.model.empty()) last.model.assign(ev.message.model);
      }
      break;
    case event_kind::message_update:
      if (ev.has_update) on_update(ev, out);
      break;
    case event_kind::message_end:
      if (ev.message.role == "assistant") {
        if (repeats_ended_message(ev.message)) {  // pi printed the ended message's message_end again
          message_open = false;
          blocks.clear();
          break;
        }
        on_assistant_end(ev.message, out);
      } else if (ev.message.role == "toolResult") {
        close_from_message(out, ev.message);
      }
      break;
    case event_kind::turn_end:
      if (message_open && ev.message.role == "assistant") on_assistant_end(ev.message, out);  // no message_end
      for (std::size_t i = 0; i < ev.ntool_results; ++i) {
        if (ev.tool_results[i].present) close_from_message(out, ev.tool_results[i]);
      }
      prune_tools();
      break;
    case event_kind::tool_execution_start:
      ensure_call(out, ev.tool_call_id, ev.tool_name, ev.has_args ? &ev.args : nullptr, false);
      break;
    case event_kind::tool_execution_update:
      if (ev.has_partial_text) {
        tool_update(out, ev.tool_call_id, ev.tool_name, ev.partial_text, &ev.partial_text);
      } else {
        tool_update(out, ev.tool_call_id, ev.tool_name, result_text(ev.has_result ? ev.result : json::object()));
      }
      break;
    case event_kind::tool_execution_end:
      // The parser's result is not needed after this line: moved, not copied.
      close_call(out, ev.tool_call_id, ev.tool_name, ev.has_result ? std::move(ev.result) : json::object(),
                 ev.is_error);
      break;
    case event_kind::agent_end:
      agent_ended = true;
      finished = ev.will_retry != 1;
      break;
    case event_kind::agent_settled:
      finished = true;
      settled = true;
      break;
    case event_kind::auto_retry_start: {
      finished = false;
      // pi retries the failed model call: its retried message repeats the failed attempt's text (filtered), and
      // the failed attempt's buffered thinking is dropped (the retry thinks again).
      if (!failed_text.empty()) {
        retry_ref = std::move(failed_text);
        failed_text.clear();
        retry_armed = true;
      }
      if (failed_thoughts_from && *failed_thoughts_from <= pending_thoughts.size()) {
        pending_thoughts.resize(*failed_thoughts_from);
      }
      failed_thoughts_from.reset();
      json extra = json::object();
      std::string text = "pi retries the model call";
      if (ev.has_attempt) {
        extra["attempt"] = number_json(ev.attempt);
        text += " (attempt " + number_json(ev.attempt).dump();
        if (ev.has_max_attempts) text += "/" + number_json(ev.max_attempts).dump();
        text += ")";
      }
      if (ev.has_max_attempts) extra["max_attempts"] = number_json(ev.max_attempts);
      if (ev.has_delay) {
        extra["delay_ms"] = number_json(ev.delay_ms);
        text += " in " + number_json(ev.delay_ms).dump() + " ms";
      }
      if (!ev.error_message.empty()) {
        extra["error"] = sanitize_utf8(ev.error_message, kMaxStatusBytes);
        text += " after: " + std::string(ev.error_message);
      }
      status(out, "retry", std::move(text), std::move(extra));
      break;
    }
    case event_kind::auto_retry_end: {
      json extra = json::object();
      if (ev.success >= 0) extra["success"] = ev.success == 1;
      if (ev.has_attempt) extra["attempt"] = number_json(ev.attempt);
      if (!ev.final_error.empty()) extra["final_error"] = std::string(ev.final_error);
      std::string text = ev.success == 1 ? "pi's retry succeeded" : "pi gave up retrying";
      if (ev.has_attempt) text += " after attempt " + number_json(ev.attempt).dump();
      if (!ev.final_error.empty()) text += ": " + std::string(ev.final_error);
      extra["retry_end"] = true;
      status(out, "retry", std::move(text), std::move(extra));
      break;
    }
    case event_kind::compaction_start: {
      finished = false;
      json extra = json::object();
      std::string text = "pi compacts the conversation";
      if (!ev.reason.empty()) {
        extra["reason"] = std::string(ev.reason);
        text += " (" + std::string(ev.reason) + ")";
      }
      extra["phase"] = "start";
      status(out, "compaction", std::move(text), std::move(extra));
      break;
    }
    case event_kind::compaction_end: {
      json extra = {{"phase", "end"}};
      std::string text = "pi finished compacting";
      if (!ev.reason.empty()) extra["reason"] = std::string(ev.reason);
      if (ev.aborted >= 0) extra["aborted"] = ev.aborted == 1;
      if (ev.will_retry >= 0) extra["will_retry"] = ev.will_retry == 1;
      if (!ev.error_message.empty()) {
        extra["error"] = sanitize_utf8(ev.error_message, kMaxStatusBytes);
        text += ": " + std::string(ev.error_message);
      }
      if (ev.will_retry == 1) text += "; it retries the turn";
      status(out, "compaction", std::move(text), std::move(extra));
      finished = agent_ended && ev.will_retry != 1;
      break;
    }
    case event_kind::extension_error:
      status(out, "warning", "pi extension error: " + std::string(ev.error),
             json{{"code", "extension_error"}});
      break;
    case event_kind::unknown:
      break;
  }
}

void pi_mapper::impl::record_invalid(std::string_view line) {
  ++stats.invalid_lines;
  if (invalid_lines.size() < options.max_invalid_lines) {
    invalid_lines.push_back(sanitize_utf8(line, options.max_invalid_line_bytes));
  }
}

pi_mapper::pi_mapper(pi_mapper_options options) : impl_(std::make_unique<impl>(std::move(options))) {}
pi_mapper::~pi_mapper() = default;
pi_mapper::pi_mapper(pi_mapper&&) noexcept = default;
pi_mapper& pi_mapper::operator=(pi_mapper&&) noexcept = default;

void pi_mapper::recycle(std::vector<message>& used) { impl_->pool.recycle(used); }

void pi_mapper::on_line(std::string_view line, std::vector<message>& out) {
  impl& m = *impl_;
  ++m.stats.lines;
  m.stats.bytes += line.size();
  if (m.finish_called) return;
  // Blank lines carry nothing (and are not errors).
  if (detail::raw::is_blank(line)) return;
  if (m.parser.skip_unmapped(line)) {  // apply() would do only this for it
    m.saw_event = true;
    return;
  }
  try {
    if (m.parser.parse(line) != simdjson::SUCCESS) {
      m.record_invalid(line);
      return;
    }
    m.apply(m.parser.event(), out);
  } catch (const std::exception&) {
    // Only allocation failures (or a bug) get here: keep the stream alive and report the line.
    m.record_invalid(line);
  }
}

void pi_mapper::on_oversize_line(std::string_view head, std::size_t total_bytes, std::vector<message>& /*out*/) {
  impl& m = *impl_;
  ++m.stats.lines;
  m.stats.bytes += total_bytes;
  if (m.finish_called) return;
  std::string note = "[line of " + std::to_string(total_bytes) + " bytes dropped; it began with] ";
  note.append(head.substr(0, m.options.max_invalid_line_bytes));
  m.record_invalid(note);
}

bool pi_mapper::agent_finished() const noexcept { return impl_->finished; }

void pi_mapper::finish(const run_end& end, std::vector<message>& out) { impl_->finish(end, out); }

const mapper_stats& pi_mapper::stats() const noexcept { return impl_->stats; }

const std::string& pi_mapper::session_id() const noexcept { return impl_->session_id; }

}  // namespace agenthost::mapper
