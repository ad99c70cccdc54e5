#include "mapper_core.hpp"

#include "text_util.hpp"

#include <agenthost/process/exit_status.hpp>

#include <algorithm>

namespace agenthost::mapper {

bool append_to_last_text(std::vector<transport::message>& out, std::string_view text) {
  if (out.empty() || out.back().type != transport::message_type::assistant) return false;
  auto& object = out.back().content.get_ref<nlohmann::json::object_t&>();
  const auto it = object.find("text");
  if (it == object.end() || !it->second.is_string()) return false;
  it->second.get_ref<std::string&>().append(text);
  return true;
}

}  // namespace agenthost::mapper

namespace agenthost::mapper::detail {

using nlohmann::json;
using transport::message;
using transport::message_type;

void write_input(object_writer& input, const json& value) {
  if (value.is_object()) {
    for (const auto& [key, member] : value.get_ref<const json::object_t&>()) input.copy(key, member);
  } else if (!value.is_null()) {
    input.copy("value", value);
  }
}

json usage_sum::to_json() const {
  json u = {{"input_tokens", input},
            {"output_tokens", output},
            {"cache_read_tokens", cache_read},
            {"cache_write_tokens", cache_write},
            {"total_tokens", input + output + cache_read + cache_write}};
  if (reasoning > 0) u["reasoning_tokens"] = reasoning;
  if (cost_total) u["cost"] = {{"total", *cost_total}};
  return u;
}

mapper_core::mapper_core(core_options options) : options_(std::move(options)) {}

bool mapper_core::begin_line(std::string_view line) noexcept {
  ++stats_.lines;
  stats_.bytes += line.size();
  if (finish_called_) return false;
  return line.find_first_not_of(" \t\r\n") != std::string_view::npos;
}

void mapper_core::oversize_line(std::string_view head, std::size_t total_bytes) {
  ++stats_.lines;
  stats_.bytes += total_bytes;
  if (finish_called_) return;
  std::string note = "[line of " + std::to_string(total_bytes) + " bytes dropped; it began with] ";
  note.append(head.substr(0, options_.max_invalid_line_bytes));
  record_invalid(note);
}

void mapper_core::record_invalid(std::string_view line) {
  ++stats_.invalid_lines;
  if (invalid_lines_.size() < options_.max_invalid_lines)
    invalid_lines_.push_back(sanitize_utf8(line, options_.max_invalid_line_bytes));
}

std::string mapper_core::invalid_note() const {
  if (stats_.invalid_lines == 0) return {};
  return "; " + options_.agent + " printed " + std::to_string(stats_.invalid_lines) +
         " line(s) of non-JSON or invalid output";
}

json mapper_core::invalid_lines_json() const {
  json a = json::array();
  for (const auto& l : invalid_lines_) a.push_back(l);
  return a;
}

void mapper_core::session(std::vector<message>& out, std::string_view session_id, std::string_view model_name,
                          std::string_view cwd) {
  if (!model_name.empty()) model.assign(model_name);
  if (session_emitted_) return;
  session_emitted_ = true;
  session_id_.assign(session_id);
  json c = {{"session_id", session_id_}, {"agent", options_.agent}};
  if (!model_name.empty()) c["model"] = std::string(model_name);
  if (!cwd.empty()) c["cwd"] = std::string(cwd);
  message_type type = message_type::session_started;
  if (options_.requested_session_id) {
    const std::string& requested = *options_.requested_session_id;
    type = message_type::session_resumed;
    c["requested_session_id"] = requested;
    c["resume"] = !requested.empty() && session_id_ == requested ? "resumed" : "restarted";
  }
  out.push_back(message{type, std::move(c)});
}

void mapper_core::ensure_session(std::vector<message>& out) {
  if (session_emitted_) return;
  session_emitted_ = true;
  if (session_id_.empty() && options_.requested_session_id) session_id_ = *options_.requested_session_id;
  json c = {{"session_id", session_id_}, {"agent", options_.agent}, {"synthesized", true}};
  if (!model.empty()) c["model"] = model;
  out.push_back(message{message_type::session_started, std::move(c)});
}

void mapper_core::set_session_id(std::string_view id) {
  if (!id.empty()) session_id_.assign(id);
}

void mapper_core::text(std::vector<message>& out, std::string_view delta) {
  if (delta.empty()) return;
  ensure_session(out);
  if (options_.merge_adjacent_text && append_to_last_text(out, delta)) return;
  pool_.add_text(out, message_type::assistant, delta);
}

void mapper_core::thought(std::vector<message>& out, std::string_view text) {
  if (text.empty()) return;
  ensure_session(out);
  pool_.add_text(out, message_type::assistant_thought, text);
}

void mapper_core::status(std::vector<message>& out, std::string_view kind, std::string_view text, json extra) {
  if (!extra.is_object()) extra = json::object();
  extra["kind"] = std::string(kind);
  extra["text"] = sanitize_utf8(text, kMaxStatusBytes);
  out.push_back(message{message_type::status, std::move(extra)});
}

recent_ids::recent_ids(std::size_t capacity) : capacity_(std::clamp<std::size_t>(capacity, 1, kEmpty / 4)) {}

std::size_t recent_ids::probe(std::string_view id, std::uint32_t h) const noexcept {
  std::size_t position = h & mask_;
  for (;;) {
    const slot& s = table_[position];
    if (s.index == kEmpty || (s.hash == h && ring_[s.index] == id)) return position;
    position = (position + 1) & mask_;
  }
}

bool recent_ids::contains(std::string_view id) const {
  if (table_.empty()) return false;
  return table_[probe(id, hash_of(id))].index != kEmpty;
}

void recent_ids::erase_slot(std::size_t hole) noexcept {
  // Backward shift: every later entry of the run that may live in the hole (its home is not after the hole) moves
  // into it, so that probing never stops early at a gap.
  for (std::size_t next = (hole + 1) & mask_; table_[next].index != kEmpty; next = (next + 1) & mask_) {
    const std::size_t home = table_[next].hash & mask_;
    if (((next - home) & mask_) >= ((next - hole) & mask_)) {
      table_[hole] = table_[next];
      hole = next;
    }
  }
  table_[hole] = slot{};
}

void recent_ids::insert(std::string_view id) {
  if (table_.empty()) {
    std::size_t size = 2;
    while (size < 2 * capacity_) size *= 2;
    table_.resize(size);
    mask_ = size - 1;
  }
  const std::uint32_t h = hash_of(id);
  std::size_t position = probe(id, h);
  if (table_[position].index != kEmpty) return;  // present
  std::uint32_t index = 0;
  if (ring_.size() < capacity_) {
    index = static_cast<std::uint32_t>(ring_.size());
    ring_.emplace_back(id);
    hashes_.push_back(h);
  } else {
    // Full: the oldest id makes room (its string is reused), and the probe is redone (the shift may move entries).
    index = static_cast<std::uint32_t>(oldest_);
    erase_slot(probe(ring_[index], hashes_[index]));
    ring_[index].assign(id);
    hashes_[index] = h;
    oldest_ = (oldest_ + 1) % capacity_;
    position = probe(id, h);
  }
  table_[position] = slot{h, index};
}

bool mapper_core::open_call(std::string_view id, std::string_view name) {
  // The table of open calls first: it holds a few entries, the closed ids every call of the run.
  if (open_tools_.find(id) != open_tools_.end() || closed_ids_.contains(id)) return false;
  if (spare_tool_.empty()) {
    open_tools_.emplace(std::string(id), tool_state{std::string(name), {}});
  } else {
    spare_tool_.key().assign(id);
    spare_tool_.mapped().name.assign(name);
    spare_tool_.mapped().last_output.clear();
    open_tools_.insert(std::move(spare_tool_));
  }
  tool_order_.emplace_back(id);
  return true;
}

json& mapper_core::start_call(std::vector<message>& out) {
  ensure_session(out);
  return start(out, message_type::tool_call).content;
}

void mapper_core::end_call(object_writer& c, std::string_view id, std::string_view name, bool synthesized) {
  c.string("name", name);
  if (synthesized) c.boolean("synthesized", true);
  c.string("tool_call_id", id);
  c.done();
}

void mapper_core::tool_call(std::vector<message>& out, std::string_view id, std::string_view name, json input,
                            bool synthesized) {
  if (!open_call(id, name)) return;
  if (input.is_null()) input = json::object();
  else if (!input.is_object()) input = json{{"value", std::move(input)}};
  object_writer c(start_call(out));
  c.value("input", std::move(input));
  end_call(c, id, name, synthesized);
}

void mapper_core::tool_update(std::vector<message>& out, std::string_view id, std::string_view name,
                              std::string_view output) {
  auto it = open_tools_.find(id);
  if (it == open_tools_.end()) {
    if (closed_ids_.contains(id)) return;  // a late update of a closed call
    tool_call(out, id, name, nullptr, true);
    it = open_tools_.find(id);
  }
  tool_state& t = it->second;
  if (output == t.last_output) return;  // cumulative output: only changes are reported
  t.last_output.assign(output);
  pool_.add_tool_update(out, name.empty() ? std::string_view(t.name) : name, output, id);
}

mapper_core::open_tools_map::iterator mapper_core::close_target(std::vector<message>& out, std::string_view id,
                                                                std::string_view name) {
  auto it = open_tools_.find(id);
  if (it != open_tools_.end()) return it;
  if (closed_ids_.contains(id)) return open_tools_.end();  // a repeated result
  tool_call(out, id, name, nullptr, true);                   // a result for a call never announced
  return open_tools_.find(id);
}

void mapper_core::begin_close(object_writer& c, open_tools_map::iterator call, std::string_view name,
                              std::string_view text, bool is_error) {
  // Keys in order: error|output < name < raw_output < tool_call_id.
  c.string(is_error ? "error" : "output", text);
  c.string("name", name.empty() ? std::string_view(call->second.name) : name);
}

void mapper_core::end_close(object_writer& c, open_tools_map::iterator call, std::string_view id) {
  c.string("tool_call_id", id);
  c.done();
  spare_tool_ = open_tools_.extract(call);
  tool_order_.erase(std::remove(tool_order_.begin(), tool_order_.end(), id), tool_order_.end());
  closed_ids_.insert(id);
}

void mapper_core::tool_close(std::vector<message>& out, std::string_view id, std::string_view name,
                             std::string_view text, bool is_error, json raw) {
  const auto call = close_target(out, id, name);
  if (call == open_tools_.end()) return;
  object_writer c(start(out, is_error ? message_type::tool_failed : message_type::tool_completed).content);
  begin_close(c, call, name, text, is_error);
  if (!raw.is_null()) c.value("raw_output", std::move(raw));
  end_close(c, call, id);
}

bool mapper_core::tool_open(std::string_view id) const { return open_tools_.find(id) != open_tools_.end(); }

std::size_t mapper_core::open_tool_count() const noexcept { return open_tools_.size(); }

std::string_view mapper_core::tool_name(std::string_view id) const {
  auto it = open_tools_.find(id);
  return it == open_tools_.end() ? std::string_view{} : std::string_view(it->second.name);
}

bool mapper_core::begin_finish() noexcept {
  if (finish_called_) return false;
  finish_called_ = true;
  return true;
}

std::optional<terminal_draft> mapper_core::common_end(const run_end& end, bool agent_finished) const {
  if (end.cancelled) return terminal_draft{.type = message_type::terminal_cancelled,
                                           .text = "the run was cancelled by the caller"};
  if (end.timeout)
    return terminal_draft{.reason = std::string(transport::failure_reason::timeout),
                          .text = options_.agent + " did not finish in time (" + *end.timeout + " timeout)",
                          .content = {{"timeout", *end.timeout}}};
  const bool forced_after_finish = end.stopped_after_finish && agent_finished;
  if (!forced_after_finish && end.status && end.status->as_signaled() != nullptr) {
    const int sig = end.status->as_signaled()->signal;
    return terminal_draft{.reason = std::string(transport::failure_reason::signaled),
                          .text = options_.agent + " was killed by signal " + std::to_string(sig) + " (" +
                                  process::signal_name(sig) + ")",
                          .content = {{"signal", sig}, {"signal_name", process::signal_name(sig)}}};
  }
  return std::nullopt;
}

terminal_draft mapper_core::exited_draft(const run_end& end, int code, std::string_view detail) const {
  std::string text = options_.agent + " exited with code " + std::to_string(code);
  if (!detail.empty()) text += "; " + std::string(detail);
  const std::string tail = sanitize_utf8(end.stderr_tail);
  if (const auto line = last_line(tail); !line.empty()) text += "; stderr: " + std::string(line);
  return terminal_draft{.reason = std::string(transport::failure_reason::exited),
                        .text = std::move(text),
                        .content = {{"exit_code", code}}};
}

terminal_draft mapper_core::no_terminal_draft(const run_end& end, std::string_view final_event) const {
  std::string text = saw_event ? options_.agent + "'s output ended before its final event (" +
                                     std::string(final_event) + ")"
                               : options_.agent + " printed no JSON event";
  text += invalid_note();
  const std::string tail = sanitize_utf8(end.stderr_tail);
  if (const auto line = last_line(tail); !line.empty()) text += "; stderr: " + std::string(line);
  return terminal_draft{.reason = std::string(transport::failure_reason::no_terminal_event), .text = std::move(text)};
}

void mapper_core::emit_terminal(std::vector<message>& out, terminal_draft d, const run_end& end) {
  const std::string close_text = d.type == message_type::terminal_cancelled ? "the run was cancelled"
                                 : d.type == message_type::terminal_completed
                                     ? options_.agent + " finished without reporting this tool call's result"
                                     : "the run ended before the tool call completed (" + d.reason + ")";
  for (const auto& id : tool_order_) {
    auto it = open_tools_.find(id);
    if (it == open_tools_.end()) continue;
    out.push_back(message{message_type::tool_failed, json{{"tool_call_id", id},
                                                          {"name", it->second.name},
                                                          {"error", close_text},
                                                          {"closed_by_finish", true}}});
    closed_ids_.insert(id);
  }
  open_tools_.clear();
  tool_order_.clear();

  json c = d.content.is_object() ? std::move(d.content) : json::object();
  if (!session_id_.empty()) c["session_id"] = session_id_;
  if (!model.empty() && !c.contains("model")) c["model"] = model;
  if (usage.any) c["usage"] = usage.to_json();
  if (stats_.invalid_lines > 0) {
    c["invalid_output_lines"] = invalid_lines_json();
    c["invalid_output_line_count"] = stats_.invalid_lines;
  }
  if (end.status && !end.status->is_unknown()) c["exit_status"] = end.status->to_string();
  if (d.type == message_type::terminal_completed) {
    c["text"] = std::move(d.text);
  } else if (d.type == message_type::terminal_cancelled) {
    c["text"] = std::move(d.text);
  } else {
    const std::string reason = d.reason.empty() ? std::string(transport::failure_reason::protocol) : d.reason;
    c["text"] = sanitize_utf8(d.text, kMaxStatusBytes);
    c["reason"] = reason;
    c["stderr"] = sanitize_utf8(end.stderr_tail);
    c["invalid_output_lines"] = invalid_lines_json();
    if (!c.contains("retryable")) {
      // A hint only: a kill, a timeout or output cut short after the agent started working are usually transient;
      // a non-zero exit before any event (bad arguments, no model) and protocol errors are not.
      c["retryable"] = reason == transport::failure_reason::timeout || reason == transport::failure_reason::signaled ||
                       ((reason == transport::failure_reason::exited ||
                         reason == transport::failure_reason::no_terminal_event) &&
                        saw_event);
    }
  }
  out.push_back(message{d.type, std::move(c)});
}

}  // namespace agenthost::mapper::detail
