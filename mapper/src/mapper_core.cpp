#include "mapper_core.hpp"

#include "raw_scan.hpp"
#include "text_util.hpp"

#include <agenthost/process/exit_status.hpp>

#include <algorithm>
#include <cassert>

namespace agenthost::mapper {

bool append_to_last_text(std::vector<transport::message>& out, std::string_view text) {
  if (out.empty() || out.back().type != transport::message_type::assistant) return false;
  // An assistant message's content is {"text": …} (message_pool::add_text): a walk over its one member compares the
  // key inline, where the map's find() called memcmp for it (a few percent of a delta line's mapping).
  for (auto& [key, value] : out.back().content.get_ref<nlohmann::json::object_t&>()) {
    if (std::string_view(key) != "text") continue;
    if (!value.is_string()) return false;
    value.get_ref<std::string&>().append(text);
    return true;
  }
  return false;
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

void held_thoughts::release(mapper_core& core, std::vector<transport::message>& out) {
  if (batch_ == 0 || texts_.size() <= batch_) return release_all(core, out);
  releasing_ = texts_.release([&](std::string_view t) { core.thought(out, t); }, batch_);
}

void held_thoughts::release_all(mapper_core& core, std::vector<transport::message>& out) {
  releasing_ = false;
  if (texts_.empty()) return;
  out.reserve(out.size() + texts_.size());  // one allocation for a turn's thoughts, not a doubling series
  texts_.release([&](std::string_view t) { core.thought(out, t); });
}

bool held_thoughts::release_more(mapper_core& core, std::vector<transport::message>& out) {
  if (!releasing_) return false;
  releasing_ = texts_.release([&](std::string_view t) { core.thought(out, t); }, batch_);
  return true;
}

bool mapper_core::begin_line(std::string_view line) noexcept {
  ++stats_.lines;
  stats_.bytes += line.size();
  if (finish_called_) return false;
  return !raw::is_blank(line);
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
  if (session_emitted_) {
    // After a synthesized session (content came first) the real id is still what the caller resumes with.
    if (session_id_.empty()) session_id_.assign(session_id);
    return;
  }
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

void id_slots::reserve(std::size_t count) {
  std::size_t size = 2;
  while (size < 2 * count) size *= 2;
  if (size <= table_.size()) return;
  std::vector<slot> old(size);
  old.swap(table_);
  mask_ = size - 1;
  // The ids are distinct: each entry goes to the first empty position of its probe.
  for (const slot& s : old) {
    if (s.index == kEmpty) continue;
    std::size_t position = s.hash & mask_;
    while (table_[position].index != kEmpty) position = (position + 1) & mask_;
    table_[position] = s;
  }
}

void id_slots::erase(std::size_t hole) noexcept {
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

void id_slots::clear() noexcept { std::fill(table_.begin(), table_.end(), slot{}); }

recent_ids::recent_ids(std::size_t capacity)
    : capacity_(std::clamp<std::size_t>(capacity, 1, id_slots::kEmpty / 4)) {}

bool recent_ids::contains(std::string_view id, std::uint32_t h) const {
  if (slots_.slot_count() == 0) return false;
  return slots_.index_at(probe(id, h)) != id_slots::kEmpty;
}

void recent_ids::insert_absent(std::string_view id, std::uint32_t h) {
  // A load of at most 1/4 (4 × capacity slots, 32 KiB for the mappers' 1,024): each call probes this table three
  // times (the look-up when it opens, then the evicted id and its own when it closes); at a load of 1/2 the Codex
  // mapper ran 7 % slower, at 1/8 no faster.
  if (slots_.slot_count() == 0) slots_.reserve(2 * capacity_);
  assert(!contains(id, h));
  std::uint32_t index = 0;
  if (ring_.size() < capacity_) {
    index = static_cast<std::uint32_t>(ring_.size());
    ring_.emplace_back(id);
    hashes_.push_back(h);
  } else {
    // Full: the oldest id makes room (its string is reused). Its slot is the one holding its index: no string compare.
    index = static_cast<std::uint32_t>(oldest_);
    slots_.erase(slots_.probe(hashes_[index], [&](std::uint32_t i) { return i == index; }));
    ring_[index].assign(id);
    hashes_[index] = h;
    oldest_ = (oldest_ + 1) % capacity_;
  }
  // Absent: the probe ends at an empty position, comparing no id.
  slots_.fill(slots_.probe(h, [](std::uint32_t) { return false; }), h, index);
}

std::uint32_t open_calls::index_of(std::string_view id, std::uint32_t h) const {
  if (count_ == 0) return id_slots::kEmpty;
  return slots_.index_at(slots_.probe(h, [&](std::uint32_t i) { return calls_[i].id == id; }));
}

open_calls::call& open_calls::add(std::string_view id, std::uint32_t h, std::string_view name) {
  slots_.reserve(count_ + 1);
  std::uint32_t index = 0;
  if (free_.empty()) {
    index = static_cast<std::uint32_t>(calls_.size());
    calls_.emplace_back();
    free_.reserve(calls_.capacity());  // remove() and clear() then never allocate
  } else {
    index = free_.back();
    free_.pop_back();
  }
  call& c = calls_[index];
  c.id.assign(id);
  c.name.assign(name);
  c.last_output.clear();
  c.order = next_order_++;
  c.hash = h;
  // Not open (the caller's precondition): the probe ends at an empty position.
  slots_.fill(slots_.probe(h, [](std::uint32_t) { return false; }), h, index);
  ++count_;
  return c;
}

void open_calls::remove(call& c) noexcept {
  const auto index = static_cast<std::uint32_t>(&c - calls_.data());
  slots_.erase(slots_.probe(c.hash, [&](std::uint32_t i) { return i == index; }));
  free_.push_back(index);  // room reserved in add()
  --count_;
}

std::vector<const open_calls::call*> open_calls::in_order() const {
  std::vector<const call*> order;
  order.reserve(count_);
  slots_.for_each_index([&](std::uint32_t i) { order.push_back(&calls_[i]); });
  std::sort(order.begin(), order.end(), [](const call* a, const call* b) { return a->order < b->order; });
  return order;
}

void open_calls::clear() noexcept {
  slots_.clear();
  free_.clear();
  for (std::size_t i = calls_.size(); i-- > 0;) free_.push_back(static_cast<std::uint32_t>(i));
  count_ = 0;
}

bool mapper_core::open_call(std::string_view id, std::uint32_t h, std::string_view name) {
  // The open calls first: a few entries, where the closed ids are every call of the run.
  return open_.find(id, h) == nullptr && open_unless_closed(id, h, name) != nullptr;
}

open_calls::call* mapper_core::open_unless_closed(std::string_view id, std::uint32_t h, std::string_view name) {
  if (closed_ids_.contains(id, h)) return nullptr;
  return &open_.add(id, h, name);
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
  if (!open_call(id, id_slots::hash_of(id), name)) return;
  if (input.is_null()) input = json::object();
  else if (!input.is_object()) input = json{{"value", std::move(input)}};
  object_writer c(start_call(out));
  c.value("input", std::move(input));
  end_call(c, id, name, synthesized);
}

void mapper_core::tool_update(std::vector<message>& out, std::string_view id, std::string_view name,
                              std::string_view output) {
  const std::uint32_t h = id_slots::hash_of(id);
  open_calls::call* call = open_.find(id, h);
  if (call == nullptr) {
    if (closed_ids_.contains(id, h)) return;  // a late update of a closed call
    tool_call(out, id, name, nullptr, true);
    call = open_.find(id, h);
  }
  if (output == call->last_output) return;  // cumulative output: only changes are reported
  call->last_output.assign(output);
  pool_.add_tool_update(out, name.empty() ? std::string_view(call->name) : name, output, id);
}

open_calls::call* mapper_core::close_target(std::vector<message>& out, std::string_view id, std::uint32_t h,
                                           std::string_view name) {
  if (open_calls::call* call = open_.find(id, h)) return call;
  if (closed_ids_.contains(id, h)) return nullptr;  // a repeated result
  tool_call(out, id, name, nullptr, true);           // a result for a call never announced
  return open_.find(id, h);
}

void mapper_core::begin_close(object_writer& c, const open_calls::call& call, std::string_view name,
                              std::string_view text, bool is_error) {
  // Keys in ascending order (object_writer refills in place only then): error < name < output < raw_output <
  // tool_call_id.
  const std::string_view call_name = name.empty() ? std::string_view(call.name) : name;
  if (is_error) {
    c.string("error", text);
    c.string("name", call_name);
  } else {
    c.string("name", call_name);
    c.string("output", text);
  }
}

void mapper_core::end_close(object_writer& c, open_calls::call& call, std::string_view id) {
  c.string("tool_call_id", id);
  c.done();
  const std::uint32_t h = call.hash;
  open_.remove(call);
  closed_ids_.insert_absent(id, h);
}

void mapper_core::tool_close(std::vector<message>& out, std::string_view id, std::string_view name,
                             std::string_view text, bool is_error, json raw) {
  open_calls::call* const call = close_target(out, id, id_slots::hash_of(id), name);
  if (call == nullptr) return;
  object_writer c(start(out, is_error ? message_type::tool_failed : message_type::tool_completed).content);
  begin_close(c, *call, name, text, is_error);
  if (!raw.is_null()) c.value("raw_output", std::move(raw));
  end_close(c, *call, id);
}

bool mapper_core::tool_open(std::string_view id) const {
  return open_.find(id, id_slots::hash_of(id)) != nullptr;
}

std::size_t mapper_core::open_tool_count() const noexcept { return open_.size(); }

std::string_view mapper_core::tool_name(std::string_view id) const {
  const open_calls::call* call = open_.find(id, id_slots::hash_of(id));
  return call == nullptr ? std::string_view{} : std::string_view(call->name);
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
  for (const open_calls::call* call : open_.in_order()) {
    out.push_back(message{message_type::tool_failed, json{{"tool_call_id", call->id},
                                                          {"name", call->name},
                                                          {"error", close_text},
                                                          {"closed_by_finish", true}}});
    closed_ids_.insert(call->id, call->hash);
  }
  open_.clear();

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
