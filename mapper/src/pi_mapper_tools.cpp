// The pi mapper's state machine, continued: tool calls and the end of the run. See pi_mapper_impl.hpp.
#include "pi_mapper_impl.hpp"

namespace agenthost::mapper {

using transport::message;
using transport::message_type;
using json = nlohmann::json;
using namespace detail;

// ---- tools -------------------------------------------------------------------------------------------------------

void pi_mapper::impl::ensure_call(std::vector<message>& out, std::string_view id, std::string_view name,
                                  const json* input, bool synthesized) {
  if (closed_ids.contains(id)) return;  // closed in an earlier turn
  tool_state& t = tools[std::string(id)];
  if (t.called) return;
  t.called = true;
  t.name.assign(name);
  json in = json::object();
  if (input != nullptr && !input->is_null()) in = input->is_object() ? *input : json{{"value", *input}};
  json c = {{"tool_call_id", std::string(id)}, {"name", std::string(name)}, {"input", std::move(in)}};
  if (synthesized) c["synthesized"] = true;
  ensure_session(out);
  emit(out, message_type::tool_call, std::move(c));
  tool_order.emplace_back(id);
}

/// `owned`, when given, holds `output` and may be taken (swapped with the previous output: no copy).
void pi_mapper::impl::tool_update(std::vector<message>& out, std::string_view id, std::string_view name,
                                  std::string_view output, std::string* owned) {
  if (closed_ids.contains(id)) return;
  auto it = tools.find(id);
  if (it == tools.end() || !it->second.called) {
    ensure_call(out, id, name, nullptr, true);
    it = tools.find(id);
  }
  tool_state& t = it->second;
  if (t.closed) return;
  if (output == t.last_output) return;  // partialResult is cumulative: only changes are reported
  // A recycled message: no allocation while the output fits its buffer.
  pool.add_tool_update(out, name.empty() ? std::string_view(t.name) : name, output, id);
  if (owned != nullptr) {
    t.last_output.swap(*owned);
  } else {
    t.last_output.assign(output);
  }
}

bool pi_mapper::impl::call_closed(std::string_view id) const {
  if (closed_ids.contains(id)) return true;
  const auto it = tools.find(id);
  return it != tools.end() && it->second.closed;
}

void pi_mapper::impl::close_call(std::vector<message>& out, std::string_view id, std::string_view name, json result,
                                 bool is_error) {
  if (call_closed(id)) return;  // a repeated result (tool_execution_end, message_end, turn_end), or of an earlier turn
  auto it = tools.find(id);
  if (it == tools.end() || !it->second.called) {
    ensure_call(out, id, name, nullptr, true);  // a result before its call
    it = tools.find(id);
  }
  tool_state& t = it->second;
  t.closed = true;
  t.last_output.clear();
  t.last_output.shrink_to_fit();
  // Member by member, moving the text and the result in (an initializer list copies every value, the output twice).
  json c = json::object();
  c["tool_call_id"] = std::string(id);
  c["name"] = name.empty() ? t.name : std::string(name);
  c[is_error ? "error" : "output"] = result_text(result);
  c["raw_output"] = std::move(result);
  emit(out, is_error ? message_type::tool_failed : message_type::tool_completed, std::move(c));
}

void pi_mapper::impl::close_from_message(std::vector<message>& out, const x_message& m) {
  json result = json::object();
  if (m.has_content_json) {
    result["content"] = m.content_json;
  } else {
    json content = json::array();
    for (std::size_t i = 0; i < m.nblocks; ++i) {
      if (m.blocks[i].kind == block_kind::text)
        content.push_back({{"type", "text"}, {"text", std::string(m.blocks[i].text)}});
    }
    result["content"] = std::move(content);
  }
  if (m.has_details) result["details"] = m.details;
  close_call(out, m.tool_call_id, m.tool_name, std::move(result), m.is_error);
}

/// Drop the state of closed calls, keeping only their ids (later events of a closed call are ignored).
void pi_mapper::impl::prune_tools() {
  std::vector<std::string> open;
  for (auto& id : tool_order) {
    auto it = tools.find(id);
    if (it == tools.end()) continue;
    if (it->second.closed) {
      tools.erase(it);
      closed_ids.insert(id);
    } else {
      open.push_back(std::move(id));
    }
  }
  tool_order = std::move(open);
}

// ---- finish ------------------------------------------------------------------------------------------------------

json pi_mapper::impl::invalid_lines_json() const {
  json a = json::array();
  for (const auto& l : invalid_lines) a.push_back(l);
  return a;
}

void pi_mapper::impl::add_common(json& c) const {
  if (!session_id.empty()) c["session_id"] = session_id;
  if (!last.model.empty()) c["model"] = last.model;
  if (usage.any) c["usage"] = usage.to_json();
  if (stats.invalid_lines > 0) {
    c["invalid_output_lines"] = invalid_lines_json();
    c["invalid_output_line_count"] = stats.invalid_lines;
  }
}

std::string pi_mapper::impl::invalid_note() const {
  if (stats.invalid_lines == 0) return {};
  return "; pi printed " + std::to_string(stats.invalid_lines) + " line(s) of non-JSON or invalid output";
}

void pi_mapper::impl::finish(const run_end& end, std::vector<message>& out) {
  if (finish_called) return;
  finish_called = true;

  // Nothing is lost: the open message's held text and thinking, then all buffered thinking.
  abandon_message(out);
  release_pending_thoughts(out);

  // Decide the terminal.
  message_type type = message_type::terminal_failed;
  json c = json::object();
  std::string reason;
  std::string text;
  const std::string stderr_tail = sanitize_utf8(end.stderr_tail);
  const bool forced_after_finish = end.stopped_after_finish && finished;

  if (end.cancelled) {
    type = message_type::terminal_cancelled;
    text = "the run was cancelled by the caller";
  } else if (end.timeout) {
    reason = transport::failure_reason::timeout;
    text = "pi did not finish in time (" + *end.timeout + " timeout)";
    c["timeout"] = *end.timeout;
  } else if (!forced_after_finish && end.status && end.status->as_signaled() != nullptr) {
    const int sig = end.status->as_signaled()->signal;
    reason = transport::failure_reason::signaled;
    text = "pi was killed by signal " + std::to_string(sig) + " (" + process::signal_name(sig) + ")";
    c["signal"] = sig;
    c["signal_name"] = process::signal_name(sig);
  } else if (!forced_after_finish && end.status && end.status->as_exited() != nullptr &&
             end.status->as_exited()->code != 0) {
    const int code = end.status->as_exited()->code;
    reason = transport::failure_reason::exited;
    text = "pi exited with code " + std::to_string(code);
    c["exit_code"] = code;
    if (last.present && last.has_error_message && !last.error_message.empty()) {
      text += "; last error: " + last.error_message;
    }
    const std::string_view tail = last_line(stderr_tail);
    if (!tail.empty()) text += "; stderr: " + std::string(tail);
  } else if (!finished) {
    reason = transport::failure_reason::no_terminal_event;
    if (!saw_event) {
      text = "pi printed no JSON event";
    } else {
      text = "pi's output ended before its final event (agent_end / agent_settled)";
      if (last.present && last.has_error_message && !last.error_message.empty()) {
        text += "; last error: " + last.error_message;
      }
    }
    text += invalid_note();
    const std::string_view tail = last_line(stderr_tail);
    if (!tail.empty()) text += "; stderr: " + std::string(tail);
  } else if (!last.present) {
    reason = transport::failure_reason::protocol;
    text = "pi finished without an assistant message" + invalid_note();
  } else if (last.stop_reason == "stop" || last.stop_reason == "length") {
    type = message_type::terminal_completed;
  } else if (last.stop_reason == "error" || last.stop_reason == "aborted") {
    reason = transport::failure_reason::agent_error;
    text = last.error_message.empty() ? "pi's model call ended with stopReason " + last.stop_reason
                                      : last.error_message;
    if (const auto http = leading_http_status(last.error_message)) c["http_status"] = *http;
    c["retryable"] = last.stop_reason == "error" && pi_error_is_retryable(last.error_message);
    if (last.has_error_message) c["error_message"] = last.error_message;
  } else {
    reason = transport::failure_reason::protocol;
    text = "pi finished with an unsupported stopReason \"" + last.stop_reason + "\"";
  }

  // Close calls that never got a result.
  const std::string close_text = type == message_type::terminal_cancelled ? "the run was cancelled"
                                 : type == message_type::terminal_completed
                                     ? "pi finished without reporting this tool call's result"
                                     : "the run ended before the tool call completed (" + reason + ")";
  for (const auto& id : tool_order) {
    auto it = tools.find(id);
    if (it == tools.end() || !it->second.called || it->second.closed) continue;
    it->second.closed = true;
    emit(out, message_type::tool_failed,
         json{{"tool_call_id", id}, {"name", it->second.name}, {"error", close_text}, {"closed_by_finish", true}});
  }

  if (last.present && !last.stop_reason.empty()) c["stop_reason"] = last.stop_reason;
  add_common(c);
  if (forced_after_finish) c["stopped_after_finish"] = true;
  if (end.status && !end.status->is_unknown()) c["exit_status"] = end.status->to_string();

  if (type == message_type::terminal_completed) {
    c["text"] = last.text;
    if (last.stop_reason == "length") c["truncated"] = true;
    if (any_diverged) c["text_diverged"] = true;
  } else if (type == message_type::terminal_cancelled) {
    c["text"] = text;
  } else {
    c["text"] = sanitize_utf8(text, kMaxStatusBytes);
    c["reason"] = reason;
    c["stderr"] = stderr_tail;
    c["invalid_output_lines"] = invalid_lines_json();
    if (!c.contains("retryable")) {
      // A hint only: a crash, a kill, a timeout or output cut short after pi started working are usually
      // transient; a non-zero exit before any event (bad arguments, no model) and protocol errors are not.
      c["retryable"] = reason == transport::failure_reason::timeout ||
                       reason == transport::failure_reason::signaled ||
                       ((reason == transport::failure_reason::exited ||
                         reason == transport::failure_reason::no_terminal_event) && saw_event);
    }
  }
  emit(out, type, std::move(c));
}

}  // namespace agenthost::mapper
