// Claude Code stream-json → message contract. Phase 1 (claude_event.cpp) extracts a flat record from each line;
// phase 2 (here) keeps the state of the current API message and maps. mapper_core keeps the contract's invariants.
#include <agenthost/mapper/claude_mapper.hpp>

#include "claude_event.hpp"
#include "mapper_core.hpp"
#include "text_util.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>

namespace agenthost::mapper {

using detail::claude::api_kind;
using detail::claude::block_kind;
using detail::claude::delta_kind;
using detail::claude::line_kind;
using detail::claude::x_block;
using detail::claude::x_event;
using nlohmann::json;
using transport::message;
using transport::message_type;

namespace {

// A content block index above this is not believed (a hostile line must not make the mapper allocate gigabytes).
constexpr double kMaxBlockIndex = 4096;
// How many recent line uuids are remembered to drop a repeated line (bounded: O(1) memory).
constexpr std::size_t kRecentUuids = 16;

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

long long as_tokens(const std::optional<double>& d) {
  return d && std::isfinite(*d) && *d >= 0 && *d < 9e18 ? static_cast<long long>(*d) : 0;
}

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

struct claude_mapper::impl {
  explicit impl(claude_mapper_options o)
      : options(std::move(o)),
        core(detail::core_options{.agent = options.agent,
                                  .max_invalid_lines = options.max_invalid_lines,
                                  .max_invalid_line_bytes = options.max_invalid_line_bytes,
                                  .requested_session_id = options.requested_session_id,
                                  .merge_adjacent_text = options.merge_adjacent_text}) {}

  // One content block of the current API message, by index.
  struct block_state {
    block_kind kind = block_kind::other;
    bool started = false;
    bool framed = false;  // its full `assistant` frame arrived
    bool diverged = false;
    bool thought_done = false;  // thinking: completed (held or released, or dropped)
    std::string text;           // text: what was emitted for it; thinking: the thinking so far
    std::size_t received = 0;   // text: bytes received as deltas
    std::string tool_id, tool_name, partial_json;
  };

  struct held_thought {
    std::string text;
  };

  struct usage4 {
    long long input = 0, output = 0, cache_read = 0, cache_write = 0;
    bool any = false;
  };

  struct result_info {
    std::string subtype, text, stop_reason, terminal_reason, errors;
    bool has_text = false;
    std::optional<bool> is_error;
    std::optional<int> api_error_status;
    std::optional<double> num_turns, cost;
    bool has_usage = false;
    usage4 usage;
  };

  claude_mapper_options options;
  detail::mapper_core core;
  detail::claude::event_parser parser;

  std::string msg_id;  // the current API message
  bool msg_streamed = false;
  std::vector<block_state> blocks;
  int open_block = -1;
  std::string stop_reason;  // of the current API message

  std::vector<held_thought> held;  // buffered thinking, in order

  // Text streamed by an API message that Claude abandoned (a cut stream it retries): the retry's text that repeats it
  // is not emitted again.
  std::string replay;
  std::size_t replay_pos = 0;

  usage4 closed_usage, message_usage;
  std::optional<result_info> result;
  std::string last_api_error;  // the text of Claude's last synthetic API-error message
  bool text_diverged = false;
  bool finished = false;

  // Hashes of the most recent line uuids (a full compare only on a hash match: this runs for every line).
  std::array<std::size_t, kRecentUuids> recent_hashes{};
  std::array<std::string, kRecentUuids> recent_uuids;
  std::size_t next_uuid = 0;

  // ---- helpers ------------------------------------------------------------------------------------------------------
  block_state* block_at(const std::optional<double>& index, bool create) {
    if (!index || !(*index >= 0) || *index > kMaxBlockIndex) return nullptr;
    const auto i = static_cast<std::size_t>(*index);
    if (i >= blocks.size()) {
      if (!create) return nullptr;
      blocks.resize(i + 1);
    }
    return &blocks[i];
  }

  bool repeated_line(std::string_view uuid) {
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

  void release_held(std::vector<message>& out) {
    for (auto& h : held) core.thought(out, std::move(h.text));
    held.clear();
  }

  // A thinking block is complete: released now (stream) or held until the final message ends (buffered).
  void complete_thought(block_state& b, std::vector<message>& out) {
    if (b.thought_done) return;
    b.thought_done = true;
    if (b.text.empty()) return;
    if (options.thinking == thinking_mode::stream) {
      core.thought(out, b.text);
    } else {
      held.push_back(held_thought{b.text});
    }
  }

  // Completes what the current message left open (thinking without a frame) — unless it was abandoned from `from`.
  void close_message(std::vector<message>& out, std::size_t abandoned_from = std::string::npos) {
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      block_state& b = blocks[i];
      if (b.kind == block_kind::thinking && !b.framed && !b.thought_done) {
        if (i >= abandoned_from) {
          b.thought_done = true;  // a cut attempt's reasoning: the retry thinks again
        } else {
          complete_thought(b, out);
        }
      }
      if (b.kind == block_kind::tool_use && !b.tool_id.empty() && i < abandoned_from) emit_tool_call(b, out, nullptr);
    }
  }

  void fold_message_usage() {
    if (!message_usage.any) return;
    closed_usage.input += message_usage.input;
    closed_usage.output += message_usage.output;
    closed_usage.cache_read += message_usage.cache_read;
    closed_usage.cache_write += message_usage.cache_write;
    closed_usage.any = true;
    message_usage = {};
  }

  static void take_usage(const detail::claude::x_usage& u, usage4& into) {
    if (!u.present) return;
    into.any = true;
    if (u.input) into.input = as_tokens(u.input);
    if (u.output) into.output = as_tokens(u.output);
    if (u.cache_read) into.cache_read = as_tokens(u.cache_read);
    if (u.cache_write) into.cache_write = as_tokens(u.cache_write);
  }

  void emit_tool_call(block_state& b, std::vector<message>& out, const json* input) {
    if (b.tool_id.empty() || core.tool_open(b.tool_id)) return;
    json in = json::object();
    if (input != nullptr) {
      in = *input;
    } else if (!b.partial_json.empty()) {
      in = json::parse(b.partial_json, nullptr, false);
      if (in.is_discarded()) in = json{{"partial_json", b.partial_json}};  // cut mid-input: keep what came
    }
    core.tool_call(out, b.tool_id, b.tool_name, std::move(in));
  }

  // Streamed text of a block: emitted as it comes, except the part that replays an abandoned attempt's text.
  void text_delta(block_state& b, std::string_view d, std::vector<message>& out) {
    const std::size_t before = b.received;
    b.received += d.size();
    if (b.received <= b.text.size()) return;  // the frame already gave this part
    if (before < b.text.size()) d.remove_prefix(b.text.size() - before);
    if (!replay.empty()) {
      const std::string_view rest = std::string_view(replay).substr(replay_pos);
      if (rest.substr(0, d.size()) == d) {  // still repeating the abandoned text: already emitted
        replay_pos += d.size();
        b.text.append(d);
        if (replay_pos == replay.size()) end_replay();
        return;
      }
      if (d.substr(0, rest.size()) == rest) {  // repeats the rest, then goes on
        b.text.append(rest);
        d.remove_prefix(rest.size());
        end_replay();
      } else {
        replay_diverged(b, out);
      }
    }
    b.text.append(d);
    core.text(out, d);
  }

  void end_replay() {
    replay.clear();
    replay_pos = 0;
  }

  // The retry's text differs from (or ends before) the abandoned attempt's: that earlier text is void. Say so, then
  // emit the retry's text from its start.
  void replay_diverged(block_state& b, std::vector<message>& out) {
    core.status(out, "warning", "the retried model call's text differs from the abandoned attempt's text, which is void",
                {{"code", "retry_diverged"}, {"retracted_text", replay}});
    text_diverged = true;
    end_replay();
    core.text(out, b.text);
  }

  void frame_text(block_state& b, std::size_t index, std::string_view f, std::vector<message>& out) {
    if (!replay.empty() && msg_streamed) {
      // The retry's block is complete: if it still only repeated part of the abandoned text, that text is void.
      if (f.size() > b.text.size() && f.substr(0, b.text.size()) == b.text) {
        text_delta(b, f.substr(b.text.size()), out);
        b.received = b.text.size();
      }
      if (!replay.empty()) replay_diverged(b, out);
      return;
    }
    if (b.diverged) return;
    if (f.size() >= b.text.size() && f.substr(0, b.text.size()) == b.text) {
      // Emit what the deltas missed (nothing in the usual case).
      const std::string_view missing = f.substr(b.text.size());
      if (!missing.empty()) {
        b.text.append(missing);
        core.text(out, missing);
      }
      return;
    }
    b.diverged = true;
    text_diverged = true;
    core.status(out, "warning", "the final text of a content block differs from the streamed text; the streamed text stands",
                {{"code", "text_diverged"}, {"content_index", index}, {"final_text", std::string(f)}});
  }

  // ---- events -------------------------------------------------------------------------------------------------------
  void apply(const x_event& ev, std::vector<message>& out) {
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

  void on_system(const x_event& ev, std::vector<message>& out) {
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

  void on_api_event(const x_event& ev, std::vector<message>& out) {
    switch (ev.api) {
      case api_kind::message_start: {
        if (!ev.api_message_id.empty() && ev.api_message_id == msg_id) return;  // a repeated message_start
        fold_message_usage();
        msg_id.assign(ev.api_message_id);
        msg_streamed = true;
        blocks.clear();
        open_block = -1;
        stop_reason.clear();
        if (!ev.api_model.empty()) core.model.assign(ev.api_model);
        take_usage(ev.usage, message_usage);
        return;
      }
      case api_kind::content_block_start: {
        block_state* b = block_at(ev.index, true);
        if (b == nullptr || b->started) return;
        b->started = true;
        b->kind = ev.content_block.kind;
        if (b->kind == block_kind::tool_use) {
          b->tool_id.assign(ev.content_block.id);
          b->tool_name.assign(ev.content_block.name);
        }
        open_block = static_cast<int>(*ev.index);
        return;
      }
      case api_kind::content_block_delta: {
        block_state* b = block_at(ev.index, true);
        if (b == nullptr) return;
        switch (ev.delta) {
          case delta_kind::text:
            if (b->kind == block_kind::other) b->kind = block_kind::text;
            if (b->kind == block_kind::text) text_delta(*b, ev.delta_text, out);
            return;
          case delta_kind::thinking:
            if (b->kind == block_kind::other) b->kind = block_kind::thinking;
            if (b->kind == block_kind::thinking && !b->framed) b->text.append(ev.delta_text);
            return;
          case delta_kind::input_json:
            if (b->kind == block_kind::tool_use) b->partial_json.append(ev.delta_text);
            return;
          case delta_kind::signature:
          case delta_kind::unknown:
            return;
        }
        return;
      }
      case api_kind::content_block_stop: {
        block_state* b = block_at(ev.index, false);
        if (b == nullptr) return;
        if (open_block == static_cast<int>(*ev.index)) open_block = -1;
        // The frame normally came first; without one the streamed input is complete now.
        if (b->kind == block_kind::tool_use) emit_tool_call(*b, out, nullptr);
        return;
      }
      case api_kind::message_delta:
        if (!ev.stop_reason.empty()) stop_reason.assign(ev.stop_reason);
        take_usage(ev.usage, message_usage);
        return;
      case api_kind::message_stop: {
        if (ev.abandoned) {
          const std::size_t from =
              ev.abandoned_from && *ev.abandoned_from >= 0 && *ev.abandoned_from <= kMaxBlockIndex
                  ? static_cast<std::size_t>(*ev.abandoned_from)
                  : 0;
          // Text that was streamed but never confirmed by a frame is void if Claude retries the call: remember it so
          // that the retry's repetition of it is not emitted twice.
          std::string abandoned_text;
          for (std::size_t i = from; i < blocks.size(); ++i)
            if (blocks[i].kind == block_kind::text && !blocks[i].framed) abandoned_text += blocks[i].text;
          if (!abandoned_text.empty()) {
            replay = replay.substr(0, replay_pos) + abandoned_text;
          }
          close_message(out, from);
        } else {
          close_message(out);
          // Buffered thinking is released when a message ends for another reason than to run tools.
          if (!stop_reason.empty() && stop_reason != "tool_use") release_held(out);
        }
        return;
      }
      case api_kind::unknown:
        return;
    }
  }

  void on_frame(const x_event& ev, std::vector<message>& out) {
    if (ev.is_api_error_message) {
      // Claude's own report of a failed model call (model "<synthetic>"): the result carries it as the error text.
      for (std::size_t i = 0; i < ev.nblocks; ++i)
        if (ev.blocks[i].kind == block_kind::text) last_api_error.assign(ev.blocks[i].text);
      return;
    }
    if (!ev.has_message) return;
    if (ev.message_id != msg_id) {
      // A message that was not streamed (no message_start with its id): its blocks are new.
      fold_message_usage();
      msg_id.assign(ev.message_id);
      msg_streamed = false;
      blocks.clear();
      open_block = -1;
      stop_reason.clear();
    }
    if (!ev.message_model.empty() && ev.message_model != "<synthetic>") core.model.assign(ev.message_model);
    for (std::size_t j = 0; j < ev.nblocks; ++j) {
      const x_block& fb = ev.blocks[j];
      // Claude 2.x: one frame per block, content index 0, sent while that block is open (before content_block_stop).
      // A frame with several blocks holds the message so far (index = position).
      std::size_t index = j;
      if (ev.nblocks == 1) {
        if (open_block >= 0) {
          index = static_cast<std::size_t>(open_block);
        } else {
          index = blocks.size();
          for (std::size_t i = blocks.size(); i-- > 0;) {
            if (blocks[i].started && !blocks[i].framed && blocks[i].kind == fb.kind) {
              index = i;
              break;
            }
          }
        }
      }
      if (index >= blocks.size()) {
        if (index > static_cast<std::size_t>(kMaxBlockIndex)) continue;
        blocks.resize(index + 1);
      }
      block_state& b = blocks[index];
      if (!b.started) {
        b.started = true;
        b.kind = fb.kind;
      }
      if (b.kind != fb.kind) continue;  // does not match what was streamed at that index: not ours to guess
      const bool first_frame = !b.framed;
      b.framed = true;
      switch (fb.kind) {
        case block_kind::text:
          frame_text(b, index, fb.text, out);
          break;
        case block_kind::thinking:
          if (first_frame && !b.thought_done) {
            if (!fb.text.empty()) b.text.assign(fb.text);  // the frame's thinking is complete
            complete_thought(b, out);
          }
          break;
        case block_kind::tool_use:
          if (b.tool_id.empty()) {
            b.tool_id.assign(fb.id);
            b.tool_name.assign(fb.name);
          }
          emit_tool_call(b, out, fb.has_input ? &fb.input : nullptr);
          break;
        case block_kind::tool_result:
        case block_kind::other:
          break;
      }
    }
  }

  void on_user(const x_event& ev, std::vector<message>& out) {
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

  void on_result(const x_event& ev, std::vector<message>& out) {
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
    end_replay();
    // The run's last word: nothing more will be thought.
    close_message(out);
    release_held(out);
  }

  // ---- finish -------------------------------------------------------------------------------------------------------
  void set_usage() {
    usage4 u;
    std::optional<double> cost;
    if (result && result->has_usage) {
      u = result->usage;  // Claude's own total over the run (it counts cut attempts too)
      cost = result->cost;
    } else {
      u = closed_usage;
      if (message_usage.any) {
        u.input += message_usage.input;
        u.output += message_usage.output;
        u.cache_read += message_usage.cache_read;
        u.cache_write += message_usage.cache_write;
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

  detail::terminal_draft from_result(const run_end& end) const {
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

  void finish(const run_end& end, std::vector<message>& out) {
    if (!core.begin_finish()) return;
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
};

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
