// Claude Code stream-json → message contract. Phase 1 (claude_event.cpp) extracts a flat record from each line;
// phase 2 (here and claude_mapper_stream.cpp) keeps the state of the current API message and maps. mapper_core keeps
// the contract's invariants. This file: the line events (system, user, result), finish, and the public class.
#include "claude_mapper_impl.hpp"

#include "text_util.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>

namespace agenthost::mapper {

namespace {

bool contains_ci(std::string_view haystack, std::string_view needle) noexcept {
  if (needle.size() > haystack.size()) return false;
  for (std::size_t i = 0; i + needle.size() <= haystack.size(); ++i) {
    std::size_t k = 0;
    while (k < needle.size() &&
           std::tolower(static_cast<unsigned char>(haystack[i + k])) == static_cast<unsigned char>(needle[k]))
      ++k;
    if (k == needle.size()) return true;
  }
  return false;
}

std::optional<int> as_int(const std::optional<double>& d) {
  if (!d || !std::isfinite(*d) || *d < -2147483648.0 || *d > 2147483647.0) return std::nullopt;
  return static_cast<int>(*d);
}

long long as_tokens(const std::optional<double>& d) { return d ? detail::tokens_from(*d) : 0; }

/// The text of a tool_result's content: a string as is; an array's `{type: "text", text}` items joined with '\n'.
std::string tool_result_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string s;
  if (content.is_array()) {
    bool first = true;
    for (const auto& item : content) {
      if (!item.is_object()) continue;
      const auto t = item.find("type");
      const auto text = item.find("text");
      if (t == item.end() || *t != "text" || text == item.end() || !text->is_string()) continue;
      if (!first) s += '\n';
      s += text->get_ref<const std::string&>();
      first = false;
    }
  }
  return s;
}

}  // namespace

bool claude_error_is_retryable(std::optional<int> http_status, std::string_view error_text) noexcept {
  if (http_status) {
    const int s = *http_status;
    if (s == 408 || s == 409 || s == 429 || (s >= 500 && s <= 599)) return true;
  }
  // Without a status: Claude's texts for an overload, a rate limit, or a connection that failed or timed out
  // ("API Error: Connection refused … (ECONNREFUSED)").
  for (std::string_view word : {"overloaded", "rate limit", "rate_limit", "connection", "econnrefused", "econnreset",
                                "etimedout", "timed out", "timeout", "socket hang up", "network"})
    if (contains_ci(error_text, word)) return true;
  return false;
}

bool claude_mapper::impl::repeated_line(std::string_view uuid) {
  if (uuid.empty()) return false;
  // Uuids are random: their first and last 8 bytes make a good, cheap hash (this runs for every line).
  std::size_t h = uuid.size();
  if (uuid.size() >= 8) {
    std::uint64_t a = 0, b = 0;
    std::memcpy(&a, uuid.data(), 8);
    std::memcpy(&b, uuid.data() + uuid.size() - 8, 8);
    h ^= a ^ (b * 0x9E3779B97F4A7C15ULL);
  } else {
    h = std::hash<std::string_view>{}(uuid);
  }
  for (std::size_t i = 0; i < kRecentUuids; ++i)
    if (recent_hashes[i] == h && recent_uuids[i] == uuid) return true;
  recent_hashes[next_uuid] = h;
  recent_uuids[next_uuid].assign(uuid);
  next_uuid = (next_uuid + 1) % recent_uuids.size();
  return false;
}

void claude_mapper::impl::take_usage(const detail::claude::x_usage& u, usage4& into) {
  if (!u.present) return;
  into.any = true;
  if (u.input) into.input = as_tokens(u.input);
  if (u.output) into.output = as_tokens(u.output);
  if (u.cache_read) into.cache_read = as_tokens(u.cache_read);
  if (u.cache_write) into.cache_write = as_tokens(u.cache_write);
}

void claude_mapper::impl::apply(const x_event& ev, std::vector<message>& out) {
  core.saw_event = true;
  if (ev.from_subagent) return;  // a sub-agent's events: its parent's Agent tool call and result stand for it
  if (repeated_line(ev.uuid)) return;
  switch (ev.kind) {
    case line_kind::system: return on_system(ev, out);
    case line_kind::stream_event: return on_api_event(ev, out);
    case line_kind::assistant: return on_frame(ev, out);
    case line_kind::user: return on_user(ev, out);
    case line_kind::result: return on_result(ev, out);
    case line_kind::unknown: return;
  }
}

void claude_mapper::impl::on_system(const x_event& ev, std::vector<message>& out) {
  if (ev.subtype == "init") {
    core.session(out, ev.session_id, ev.model, ev.cwd);
  } else if (ev.subtype == "api_retry") {
    const auto attempt = as_int(ev.attempt);
    const auto max = as_int(ev.max_retries);
    const auto delay = as_int(ev.retry_delay_ms);
    const auto status = as_int(ev.error_status);
    json extra = json::object();
    if (attempt) extra["attempt"] = *attempt;
    if (max) extra["max_attempts"] = *max;
    if (delay) extra["delay_ms"] = *delay;
    if (status) extra["error_status"] = *status;
    std::string error = status ? std::to_string(*status) : std::string();
    if (!ev.error.empty()) error += (error.empty() ? "" : " ") + std::string(ev.error);
    extra["error"] = error;
    std::string text = options.agent + " retries the model call";
    if (attempt) text += " (attempt " + std::to_string(*attempt) + (max ? "/" + std::to_string(*max) : "") + ")";
    if (delay) text += " in " + std::to_string(*delay) + " ms";
    if (!error.empty()) text += " after: " + error;
    core.status(out, "retry", text, std::move(extra));
  }
  // status ("requesting"), thinking_tokens (a token estimate before each thinking delta), hooks…: not mapped — they
  // would flood the stream without telling a consumer anything it can act on.
}

void claude_mapper::impl::on_user(const x_event& ev, std::vector<message>& out) {
  std::size_t results = 0;
  for (std::size_t i = 0; i < ev.nblocks; ++i) results += ev.blocks[i].kind == block_kind::tool_result ? 1 : 0;
  for (std::size_t i = 0; i < ev.nblocks; ++i) {
    const x_block& b = ev.blocks[i];
    if (b.kind != block_kind::tool_result || b.id.empty()) continue;
    // The tool's own result object (`tool_use_result`: stdout/stderr/interrupted for Bash…) belongs to the line's
    // single tool result; with several results in one line each keeps its content block as sent.
    json raw = results == 1 && ev.has_tool_use_result ? ev.tool_use_result : b.input;
    core.tool_close(out, b.id, {}, tool_result_text(b.input), b.is_error, std::move(raw));
  }
  // Text parts ("[Request interrupted by user]"…) are Claude's notes to the model, not output: not mapped.
}

void claude_mapper::impl::on_result(const x_event& ev, std::vector<message>& out) {
  finished = true;
  result_info r;
  r.subtype.assign(ev.subtype);
  r.has_text = ev.has_result_text;
  r.text.assign(ev.result_text);
  r.stop_reason.assign(ev.stop_reason);
  r.terminal_reason.assign(ev.terminal_reason);
  r.errors = ev.errors;
  r.is_error = ev.is_error;
  r.api_error_status = as_int(ev.api_error_status);
  r.num_turns = ev.num_turns;
  r.cost = ev.total_cost_usd;
  if (ev.usage.present) {
    r.has_usage = true;
    take_usage(ev.usage, r.usage);
  }
  result = std::move(r);
  core.set_session_id(ev.session_id);
  settle_retry(out);
  end_replay();
  // The run's last word: nothing more will be thought.
  close_message(out);
  release_held(out);
}

void claude_mapper::impl::set_usage() {
  usage4 u;
  std::optional<double> cost;
  if (result && result->has_usage) {
    u = result->usage;  // Claude's own total over the run (it counts cut attempts too)
    cost = result->cost;
  } else {
    u = closed_usage;
    if (message_usage.any) {
      detail::add_tokens(u.input, message_usage.input);
      detail::add_tokens(u.output, message_usage.output);
      detail::add_tokens(u.cache_read, message_usage.cache_read);
      detail::add_tokens(u.cache_write, message_usage.cache_write);
      u.any = true;
    }
    if (result) cost = result->cost;
  }
  if (!u.any && !cost) return;
  core.usage.input = u.input;
  core.usage.output = u.output;
  core.usage.cache_read = u.cache_read;
  core.usage.cache_write = u.cache_write;
  core.usage.cost_total = cost;
  core.usage.any = true;
}

detail::terminal_draft claude_mapper::impl::from_result(const run_end& end) const {
  const result_info& r = *result;
  json c = json::object();
  if (!r.stop_reason.empty()) c["stop_reason"] = r.stop_reason;
  if (!r.terminal_reason.empty()) c["terminal_reason"] = r.terminal_reason;
  if (const auto turns = as_int(r.num_turns)) c["num_turns"] = *turns;
  if (end.stopped_after_finish) c["stopped_after_finish"] = true;
  const bool is_error = r.is_error.value_or(r.subtype != "success");
  if (!is_error && r.subtype == "success") {
    if (r.stop_reason == "max_tokens") c["truncated"] = true;
    if (text_diverged) c["text_diverged"] = true;
    return detail::terminal_draft{.type = message_type::terminal_completed, .text = r.text, .content = std::move(c)};
  }
  // A failure Claude reported: a model call that failed after its own retries (subtype "success", is_error, with
  // api_error_status), an abort (error_during_execution), a limit (error_max_turns…).
  std::string text = r.has_text && !r.text.empty() ? r.text
                     : !r.errors.empty()           ? r.errors
                     : !last_api_error.empty()     ? last_api_error
                                                   : options.agent + " reported an error";
  if (r.subtype != "success" && !r.subtype.empty() && text.find(r.subtype) == std::string::npos)
    text = r.subtype + ": " + text;
  c["result_subtype"] = r.subtype;
  c["error_message"] = text;
  if (r.api_error_status) c["http_status"] = *r.api_error_status;
  // Only a failed model call is a retry candidate: an abort or a limit repeats itself.
  const bool model_call_failed = r.api_error_status.has_value() || r.terminal_reason == "api_error";
  c["retryable"] = model_call_failed && claude_error_is_retryable(r.api_error_status, text);
  return detail::terminal_draft{.reason = std::string(transport::failure_reason::agent_error),
                                .text = std::move(text),
                                .content = std::move(c)};
}

void claude_mapper::impl::finish(const run_end& end, std::vector<message>& out) {
  if (!core.begin_finish()) return;
  settle_retry(out);
  close_message(out);
  release_held(out);
  set_usage();
  detail::terminal_draft draft;
  if (auto common = core.common_end(end, finished)) {
    draft = std::move(*common);
  } else if (result) {
    draft = from_result(end);
  } else {
    const auto* exited = end.status ? end.status->as_exited() : nullptr;
    if (exited != nullptr && exited->code != 0 && !end.stopped_after_finish) {
      draft = core.exited_draft(end, exited->code, last_api_error);
    } else {
      draft = core.no_terminal_draft(end, "result");
    }
  }
  core.emit_terminal(out, std::move(draft), end);
}

claude_mapper::claude_mapper(claude_mapper_options options) : impl_(std::make_unique<impl>(std::move(options))) {}
claude_mapper::~claude_mapper() = default;
claude_mapper::claude_mapper(claude_mapper&&) noexcept = default;
claude_mapper& claude_mapper::operator=(claude_mapper&&) noexcept = default;

void claude_mapper::recycle(std::vector<message>& used) { impl_->core.recycle(used); }

void claude_mapper::on_line(std::string_view line, std::vector<message>& out) {
  impl& m = *impl_;
  if (!m.core.begin_line(line)) return;
  try {
    if (m.parser.parse(line) != simdjson::SUCCESS) {
      m.core.record_invalid(line);
      return;
    }
    m.apply(m.parser.event(), out);
  } catch (const std::exception&) {
    // Only allocation failures (or a bug) get here: keep the stream alive and report the line.
    m.core.record_invalid(line);
  }
}

void claude_mapper::on_oversize_line(std::string_view head, std::size_t total_bytes, std::vector<message>& /*out*/) {
  impl_->core.oversize_line(head, total_bytes);
}

bool claude_mapper::agent_finished() const noexcept { return impl_->finished; }

void claude_mapper::finish(const run_end& end, std::vector<message>& out) { impl_->finish(end, out); }

const mapper_stats& claude_mapper::stats() const noexcept { return impl_->core.stats(); }

const std::string& claude_mapper::session_id() const noexcept { return impl_->core.session_id(); }

}  // namespace agenthost::mapper
