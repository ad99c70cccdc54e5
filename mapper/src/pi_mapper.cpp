// agenthost/mapper/pi_mapper.cpp — pi JSONL → message contract (phase 2: the state machine).
#include <agenthost/mapper/pi_mapper.hpp>

#include "mapper_core.hpp"
#include "pi_event.hpp"
#include "text_util.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <regex>
#include <string>
#include <unordered_map>
#include <utility>

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

namespace {

constexpr std::int64_t kMaxContentIndex = 4096;

/// The text of a tool result `{content: [{type: "text", text}…]}` (or of a bare content array).
std::string result_text(const json& result) {
  const json* content = &result;
  if (result.is_object()) {
    const auto it = result.find("content");
    if (it == result.end()) return {};
    content = &*it;
  }
  if (content->is_string()) return content->get<std::string>();
  std::string text;
  if (!content->is_array()) return text;
  bool first = true;
  for (const auto& item : *content) {
    if (!item.is_object()) continue;
    const auto type = item.find("type");
    const auto t = item.find("text");
    if (type == item.end() || *type != "text" || t == item.end() || !t->is_string()) continue;
    if (!first) text += '\n';
    text += t->get_ref<const std::string&>();
    first = false;
  }
  return text;
}

json number_json(double v) {
  if (std::isfinite(v) && std::floor(v) == v && std::fabs(v) < 9.0e15) return static_cast<std::int64_t>(v);
  return v;
}

struct usage_total {
  bool any = false;
  double input = 0, output = 0, cache_read = 0, cache_write = 0, total_tokens = 0, reasoning = 0;
  bool has_reasoning = false;
  bool has_cost = false;
  double cost_input = 0, cost_output = 0, cost_cache_read = 0, cost_cache_write = 0, cost_total = 0;

  void add(const x_usage& u) {
    if (!u.present) return;
    any = true;
    input += u.input;
    output += u.output;
    cache_read += u.cache_read;
    cache_write += u.cache_write;
    total_tokens += u.total_tokens;
    if (u.has_reasoning) {
      has_reasoning = true;
      reasoning += u.reasoning;
    }
    if (u.has_cost) {
      has_cost = true;
      cost_input += u.cost_input;
      cost_output += u.cost_output;
      cost_cache_read += u.cost_cache_read;
      cost_cache_write += u.cost_cache_write;
      cost_total += u.cost_total;
    }
  }

  [[nodiscard]] json to_json() const {
    json j = {{"input_tokens", number_json(input)},
              {"output_tokens", number_json(output)},
              {"cache_read_tokens", number_json(cache_read)},
              {"cache_write_tokens", number_json(cache_write)},
              {"total_tokens", number_json(total_tokens)}};
    if (has_reasoning) j["reasoning_tokens"] = number_json(reasoning);
    if (has_cost) {
      j["cost"] = {{"input", cost_input},
                   {"output", cost_output},
                   {"cache_read", cost_cache_read},
                   {"cache_write", cost_cache_write},
                   {"total", cost_total}};
    }
    return j;
  }
};


struct block_state {
  block_kind kind = block_kind::other;
  std::string text;       // text: what pi streamed for this block; thinking: the thinking so far
  bool ended = false;     // *_end seen
  bool released = false;  // thinking: already emitted (stream mode)
};

struct tool_state {
  std::string name;
  std::string last_output;  // last tool.update output (deduplicates identical partial results)
  bool called = false;
  bool closed = false;
};

struct last_assistant {
  bool present = false;
  std::string stop_reason;
  bool has_error_message = false;
  std::string error_message;
  std::string model;
  std::string text;  // the authoritative final text (message_end)
};

}  // namespace

struct pi_mapper::impl {
  explicit impl(pi_mapper_options o) : options(std::move(o)) {}

  pi_mapper_options options;
  pi_event_parser parser;
  mapper_stats stats;

  // session
  bool session_emitted = false;
  std::string session_id;
  std::string cwd;

  // the assistant message being streamed
  bool message_open = false;
  std::vector<block_state> blocks;
  bool message_diverged = false;

  // cross-turn replay: the text of the last tool-use turn; while replay_active, replay_pos == 0 means the message
  // has carried no text yet (its first text decides), replay_pos > 0 that a snapshot equal to replay_ref is held.
  std::string replay_ref;
  bool replay_active = false;
  std::size_t replay_pos = 0;

  // pi's auto-retry of a failed model call: what the consumer saw of the current message (assistant deltas since its
  // start, or the failed attempt's text it repeats), the text of an error-ended message (a retry may follow), and
  // while a retry is filtered, that text and how much of it the retry has repeated (nothing emitted for it).
  std::string message_visible;
  std::string failed_text;
  std::optional<std::size_t> failed_thoughts_from;  // pending_thoughts of the error-ended message start here
  std::string retry_ref;
  bool retry_armed = false;  // auto_retry_start after an error-ended message with text: the next message repeats it
  bool retry_active = false;
  std::size_t retry_pos = 0;

  // the assistant message that ended last (until the next message_start): a repeat of its message_end / text_end /
  // thinking_end (pi printing it twice) adds nothing.
  bool after_end = false;
  std::vector<std::pair<block_kind, std::string>> ended_blocks;  // text / thinking / tool call id per content index
  std::string ended_stop_reason;

  // thinking held back (buffered mode)
  std::vector<std::string> pending_thoughts;

  // tool calls
  std::unordered_map<std::string, tool_state, string_hash, std::equal_to<>> tools;  // lookups by string_view
  std::vector<std::string> tool_order;  // call order, for closing at finish()
  // Ids of calls closed in an earlier turn (pruned from `tools`), the last 1,024 of them as in every mapper: a later
  // event of such a call is ignored. Constant memory however long the run.
  recent_ids closed_ids{kRememberedClosedCalls};

  // run outcome
  last_assistant last;
  usage_total usage;
  bool any_diverged = false;
  bool agent_ended = false;  // agent_end since the last agent_start
  bool finished = false;
  bool settled = false;
  bool saw_event = false;
  bool finish_called = false;

  // invalid output
  std::vector<std::string> invalid_lines;

  // ---- emission ------------------------------------------------------------------------------------------------
  static void emit(std::vector<message>& out, message_type type, json content) {
    out.push_back(message{type, std::move(content)});
  }

  void ensure_session(std::vector<message>& out) {
    if (session_emitted) return;
    session_emitted = true;
    // pi printed no session header (RPC mode, an old or foreign build): report what is known.
    json c = {{"session_id", options.requested_session_id.value_or("")}, {"agent", options.agent},
              {"synthesized", true}};
    if (!last.model.empty()) c["model"] = last.model;
    emit(out, message_type::session_started, std::move(c));
  }

  void emit_text(std::vector<message>& out, std::string_view text) {
    if (text.empty()) return;
    ensure_session(out);
    message_visible.append(text);
    if (options.merge_adjacent_text && append_to_last_text(out, text)) return;
    // Built in place (an initializer list costs extra copies on this per-token path): the message, then its one
    // member, whose key is copied from a static string (no strlen) and whose value is built from the view.
    static const std::string kText = "text";
    message& m = out.emplace_back(message{message_type::assistant, json(json::value_t::object)});
    auto& object = m.content.get_ref<json::object_t&>();
    object.emplace_hint(object.end(), kText, text);
  }

  void emit_thought(std::vector<message>& out, std::string text) {
    if (text.empty()) return;
    ensure_session(out);
    emit(out, message_type::assistant_thought, json{{"text", std::move(text)}});
  }

  void status(std::vector<message>& out, std::string_view kind, std::string text, json extra = json::object()) {
    extra["kind"] = std::string(kind);
    extra["text"] = sanitize_utf8(text, kMaxStatusBytes);
    emit(out, message_type::status, std::move(extra));
  }

  // ---- assistant text --------------------------------------------------------------------------------------------
  /// Text pi streamed for the current message, through the cross-turn replay filter. A replay arrives as text that
  /// was already accumulated: the message's first text (`snapshot`: a cumulative snapshot or a final content, or a
  /// single delta) already holds the previous tool-use turn's whole text followed by more. Text generated in deltas
  /// (a first delta that is only a part of, or exactly, the previous text) is a new message and is emitted whole.
  void emit_assistant_chunk(std::vector<message>& out, std::string_view chunk, bool snapshot) {
    if (chunk.empty()) return;
    if (replay_active) {
      const std::string_view ref = replay_ref;
      if (replay_pos > 0) {  // a snapshot equal to the previous text was held and the message goes on: a replay
        replay_active = false;
        replay_pos = 0;
        emit_visible(out, chunk);
        return;
      }
      replay_active = false;  // the message's first text decides
      if (chunk.size() >= ref.size() && chunk.substr(0, ref.size()) == ref) {
        if (chunk.size() > ref.size()) {  // the previous text at once, and more: drop the replay
          emit_visible(out, chunk.substr(ref.size()));
          return;
        }
        if (snapshot) {  // a snapshot equal to the previous text: a replay only if the message goes on
          replay_active = true;
          replay_pos = ref.size();
          return;
        }
      }
    }
    emit_visible(out, chunk);
  }

  /// Assistant text, through the auto-retry filter: a retried message's text that repeats what the failed attempt
  /// already streamed is not emitted again, only what extends it; a retry that diverges voids the earlier partial
  /// text with a warning (`retracted_text`), then its text is emitted from its start.
  void emit_visible(std::vector<message>& out, std::string_view chunk) {
    if (chunk.empty()) return;
    if (retry_active) {
      const std::string_view rest = std::string_view(retry_ref).substr(retry_pos);
      const std::size_t n = common_prefix(chunk, rest);
      if (n == chunk.size()) {  // repeats the failed attempt's text: already streamed
        retry_pos += n;
        return;
      }
      retry_active = false;
      if (n == rest.size()) {  // the retry repeated all of it and goes on: only the new part
        emit_text(out, chunk.substr(n));
        return;
      }
      std::string whole = retry_ref.substr(0, retry_pos);
      whole.append(chunk);
      retract_failed_attempt(out);
      emit_text(out, whole);
      return;
    }
    emit_text(out, chunk);
  }

  void retract_failed_attempt(std::vector<message>& out) {
    any_diverged = true;
    status(out, "warning",
           "pi retried a failed model call and the retry's text differs from the partial text already streamed: "
           "that partial text is void, the assistant text after this status replaces it (terminal.completed `text` "
           "is authoritative)",
           json{{"code", "retry_diverged"}, {"retracted_text", retry_ref}});
    message_visible.clear();
  }

  /// The retried message ended (not with an error): if it repeated only a part of the failed attempt's text (or
  /// none), the rest of what was streamed is void — say so, then emit the retry's text.
  void settle_retry(std::vector<message>& out) {
    if (retry_active) {
      retry_active = false;
      if (retry_pos < retry_ref.size()) {
        retract_failed_attempt(out);
        emit_text(out, std::string_view(retry_ref).substr(0, retry_pos));
      }
    }
    retry_ref.clear();
    retry_pos = 0;
  }

  /// End of the current message while text is still held: it was equal to the previous text — a new message, not a
  /// replay with something added. Emit it.
  void flush_replay(std::vector<message>& out) {
    if (replay_active && replay_pos > 0) emit_visible(out, std::string_view(replay_ref).substr(0, replay_pos));
    replay_active = false;
    replay_pos = 0;
  }

  /// A text block ended, or a non-text block started, while text was held: the message is not a replay.
  void flush_replay_if_holding(std::vector<message>& out) {
    if (replay_active && replay_pos > 0) flush_replay(out);
  }

  void append_text(std::vector<message>& out, std::size_t index, std::string_view chunk, bool snapshot) {
    if (chunk.empty()) return;
    blocks[index].text.append(chunk);
    emit_assistant_chunk(out, chunk, snapshot);
  }

  void diverged(std::vector<message>& out, std::size_t index, std::string_view final_text) {
    message_diverged = true;
    any_diverged = true;
    status(out, "warning",
           "pi's final text for this message differs from the streamed text; the final text is authoritative "
           "(terminal.completed `text`)",
           json{{"code", "text_diverged"}, {"content_index", index}, {"final_text", std::string(final_text)}});
  }

  /// `final_text` is authoritative for the block: emit what is missing, or report a divergence.
  void reconcile_final(std::vector<message>& out, std::size_t index, std::string_view final_text) {
    block_state& b = blocks[index];
    if (b.text.size() == final_text.size() && b.text == final_text) return;
    if (final_text.size() > b.text.size() && final_text.compare(0, b.text.size(), b.text) == 0) {
      append_text(out, index, final_text.substr(b.text.size()), true);
      return;
    }
    diverged(out, index, final_text);
    blocks[index].text.assign(final_text);
  }

  /// A cumulative snapshot of the block (≤ 0.83 without delta): emit only the new suffix.
  void reconcile_snapshot_text(std::vector<message>& out, std::size_t index, std::string_view snap) {
    block_state& b = blocks[index];
    if (snap.size() >= b.text.size() && snap.compare(0, b.text.size(), b.text) == 0) {
      append_text(out, index, snap.substr(b.text.size()), true);
    } else if (b.text.size() > snap.size() && std::string_view(b.text).substr(0, snap.size()) == snap) {
      // an older snapshot: nothing new
    } else {
      diverged(out, index, snap);
      blocks[index].text.assign(snap);
    }
  }

  // ---- blocks and messages ---------------------------------------------------------------------------------------
  /// Index of the block for `content_index`, or (no usable index) of the last open block of that kind / a new one.
  std::size_t resolve_block(std::int64_t content_index, block_kind kind) {
    if (content_index >= 0 && content_index < kMaxContentIndex) {
      const auto i = static_cast<std::size_t>(content_index);
      if (blocks.size() <= i) blocks.resize(i + 1);
      if (blocks[i].kind == block_kind::other) blocks[i].kind = kind;
      return i;
    }
    for (std::size_t j = blocks.size(); j-- > 0;) {
      if (blocks[j].kind == kind && !blocks[j].ended) return j;
    }
    blocks.emplace_back();
    blocks.back().kind = kind;
    return blocks.size() - 1;
  }

  void begin_message() {
    message_open = true;
    blocks.clear();
    message_diverged = false;
    replay_active = options.dedupe_replayed_text && !replay_ref.empty();
    replay_pos = 0;
    retry_active = retry_armed;
    retry_armed = false;
    retry_pos = 0;
    if (retry_active) {
      message_visible = retry_ref;
    } else {
      message_visible.clear();
      retry_ref.clear();
    }
  }

  void ensure_message_open() {
    if (!message_open) begin_message();
  }

  void release_thought_block(std::vector<message>& out, block_state& b) {
    if (b.released) return;
    b.released = true;
    emit_thought(out, std::move(b.text));
    b.text.clear();
  }

  /// Move the current message's thinking to its destination (stream: emitted now; buffered: pending).
  void collect_thinking(std::vector<message>& out) {
    for (auto& b : blocks) {
      if (b.kind != block_kind::thinking) continue;
      if (options.thinking == thinking_mode::stream) {
        release_thought_block(out, b);
      } else if (!b.released && !b.text.empty()) {
        pending_thoughts.push_back(std::move(b.text));
        b.text.clear();
        b.released = true;
      }
    }
  }

  void release_pending_thoughts(std::vector<message>& out) {
    for (auto& t : pending_thoughts) emit_thought(out, std::move(t));
    pending_thoughts.clear();
  }

  /// The assistant message ended without message_end (a new message_start, or finish()).
  void abandon_message(std::vector<message>& out) {
    if (!message_open) return;
    flush_replay(out);
    settle_retry(out);
    collect_thinking(out);
    message_open = false;
    blocks.clear();
  }

  /// After a message ended (no message_start since): a text_end / thinking_end that repeats its block, or any
  /// tool-call update (the call is already known), belongs to the ended message — pi printed it again.
  bool repeats_ended_message(const x_event& ev) const {
    if (!after_end || message_open) return false;
    switch (ev.update) {
      case update_kind::text_end:
      case update_kind::thinking_end: {
        if (!ev.has_content || ev.content_index < 0 ||
            static_cast<std::size_t>(ev.content_index) >= ended_blocks.size())
          return false;
        const auto& b = ended_blocks[static_cast<std::size_t>(ev.content_index)];
        const block_kind kind = ev.update == update_kind::text_end ? block_kind::text : block_kind::thinking;
        return b.first == kind && b.second == ev.content;
      }
      case update_kind::toolcall_start:
      case update_kind::toolcall_delta:
        return true;
      default:
        return false;
    }
  }

  bool repeats_ended_message(const x_message& m) const {
    if (!after_end || !m.has_content || m.stop_reason != ended_stop_reason || m.nblocks != ended_blocks.size())
      return false;
    for (std::size_t i = 0; i < m.nblocks; ++i) {
      const x_block& b = m.blocks[i];
      if (b.kind != ended_blocks[i].first) return false;
      if ((b.kind == block_kind::tool_call ? b.id : b.text) != ended_blocks[i].second) return false;
    }
    return true;
  }

  void on_update(const x_event& ev, std::vector<message>& out) {
    if (repeats_ended_message(ev)) return;
    if (ev.update == update_kind::toolcall_end && after_end && !message_open) {
      if (ev.has_tool_call) {  // the ended message's call again (ignored), or a call not seen yet
        const x_block& tc = ev.tool_call;
        ensure_call(out, tc.id, tc.name, tc.has_arguments ? &tc.arguments : nullptr, false);
      }
      return;
    }
    if (ev.update == update_kind::text_delta || ev.update == update_kind::thinking_delta) after_end = false;
    ensure_message_open();
    switch (ev.update) {
      case update_kind::text_start:
        resolve_block(ev.content_index, block_kind::text);
        break;
      case update_kind::thinking_start:
        flush_replay_if_holding(out);
        resolve_block(ev.content_index, block_kind::thinking);
        break;
      case update_kind::toolcall_start:
      case update_kind::toolcall_delta:
        flush_replay_if_holding(out);
        resolve_block(ev.content_index, block_kind::tool_call);
        break;
      case update_kind::text_delta: {
        if (ev.has_delta) {
          append_text(out, resolve_block(ev.content_index, block_kind::text), ev.delta, false);
        } else if (ev.has_snapshot) {
          apply_snapshot(ev.snapshot, out);
        }
        break;
      }
      case update_kind::text_end: {
        const std::size_t i = resolve_block(ev.content_index, block_kind::text);
        if (ev.has_content) {
          reconcile_final(out, i, ev.content);
        } else if (ev.has_snapshot) {
          apply_snapshot(ev.snapshot, out);
        }
        blocks[i].ended = true;
        flush_replay_if_holding(out);
        break;
      }
      case update_kind::thinking_delta: {
        if (ev.has_delta) {
          blocks[resolve_block(ev.content_index, block_kind::thinking)].text.append(ev.delta);
        } else if (ev.has_snapshot) {
          apply_snapshot(ev.snapshot, out);
        }
        break;
      }
      case update_kind::thinking_end: {
        const std::size_t i = resolve_block(ev.content_index, block_kind::thinking);
        if (ev.has_content) {
          blocks[i].text.assign(ev.content);
        } else if (ev.has_snapshot) {
          apply_snapshot(ev.snapshot, out);
        }
        blocks[i].ended = true;
        if (options.thinking == thinking_mode::stream) release_thought_block(out, blocks[i]);
        break;
      }
      case update_kind::toolcall_end: {
        const std::size_t i = resolve_block(ev.content_index, block_kind::tool_call);
        blocks[i].ended = true;
        if (ev.has_tool_call) {
          const x_block& tc = ev.tool_call;
          ensure_call(out, tc.id, tc.name, tc.has_arguments ? &tc.arguments : nullptr, false);
        }
        break;
      }
      case update_kind::unknown:
        break;
    }
  }

  void apply_snapshot(const x_message& snap, std::vector<message>& out) {
    const std::size_t n = snap.nblocks < static_cast<std::size_t>(kMaxContentIndex)
                              ? snap.nblocks
                              : static_cast<std::size_t>(kMaxContentIndex);
    for (std::size_t i = 0; i < n; ++i) {
      const x_block& sb = snap.blocks[i];
      if (sb.kind == block_kind::text) {
        const std::size_t bi = resolve_block(static_cast<std::int64_t>(i), block_kind::text);
        if (blocks[bi].kind == block_kind::text) reconcile_snapshot_text(out, bi, sb.text);
      } else if (sb.kind == block_kind::thinking) {
        const std::size_t bi = resolve_block(static_cast<std::int64_t>(i), block_kind::thinking);
        block_state& b = blocks[bi];
        if (b.kind == block_kind::thinking && !b.released) {
          const bool older = b.text.size() > sb.text.size() && std::string_view(b.text).substr(0, sb.text.size()) == sb.text;
          if (!older) b.text.assign(sb.text);
        }
      }
    }
  }

  void on_assistant_end(const x_message& m, std::vector<message>& out) {
    ensure_message_open();
    if (!m.model.empty()) last.model.assign(m.model);
    std::string final_text;
    if (m.has_content) {
      const std::size_t n = m.nblocks < static_cast<std::size_t>(kMaxContentIndex)
                                ? m.nblocks
                                : static_cast<std::size_t>(kMaxContentIndex);
      for (std::size_t i = 0; i < n; ++i) {
        const x_block& fb = m.blocks[i];
        if (fb.kind == block_kind::text) {
          const std::size_t bi = resolve_block(static_cast<std::int64_t>(i), block_kind::text);
          if (blocks[bi].kind == block_kind::text) reconcile_final(out, bi, fb.text);
          final_text.append(fb.text);
        } else if (fb.kind == block_kind::thinking) {
          const std::size_t bi = resolve_block(static_cast<std::int64_t>(i), block_kind::thinking);
          if (blocks[bi].kind == block_kind::thinking && !blocks[bi].released) blocks[bi].text.assign(fb.text);
        } else if (fb.kind == block_kind::tool_call) {
          ensure_call(out, fb.id, fb.name, fb.has_arguments ? &fb.arguments : nullptr, false);
        }
      }
      // Text that was streamed but is absent from the final message.
      for (std::size_t j = 0; j < blocks.size(); ++j) {
        if (blocks[j].kind != block_kind::text || blocks[j].text.empty()) continue;
        if (j >= n || m.blocks[j].kind != block_kind::text) {
          diverged(out, j, "");
          blocks[j].text.clear();
        }
      }
    } else {
      for (const auto& b : blocks) {
        if (b.kind == block_kind::text) final_text.append(b.text);
      }
    }
    const std::size_t thoughts_before = pending_thoughts.size();
    flush_replay(out);
    const bool failed = m.stop_reason == "error";
    if (failed) {
      // pi may retry this model call (auto_retry_start): remember what the consumer saw of it.
      failed_text = std::move(message_visible);
      retry_active = false;
      retry_ref.clear();
    } else {
      settle_retry(out);
      failed_text.clear();
    }
    message_visible.clear();
    collect_thinking(out);

    last.present = true;
    last.stop_reason.assign(m.stop_reason);
    last.has_error_message = m.has_error_message;
    last.error_message.assign(m.error_message);
    usage.add(m.usage);

    // What a repeat of this message_end would carry (see repeats_ended_message).
    after_end = true;
    ended_stop_reason.assign(m.stop_reason);
    ended_blocks.clear();
    if (m.has_content) {
      for (std::size_t i = 0; i < m.nblocks; ++i) {
        const x_block& b = m.blocks[i];
        ended_blocks.emplace_back(b.kind, b.kind == block_kind::tool_call ? b.id : b.text);
      }
    }

    failed_thoughts_from.reset();
    if (m.stop_reason == "toolUse") {
      if (!final_text.empty()) replay_ref = final_text;
    } else if (failed) {
      // Buffered thinking of a failed call is held until we know whether pi retries it (auto_retry_start drops it)
      // or not (released at the end of the run, or with the next final message).
      failed_thoughts_from = thoughts_before;
    } else {
      replay_ref.clear();
      if (options.thinking == thinking_mode::buffered) release_pending_thoughts(out);
    }
    last.text = std::move(final_text);
    message_open = false;
    blocks.clear();
  }

  // ---- tools -------------------------------------------------------------------------------------------------------
  void ensure_call(std::vector<message>& out, std::string_view id, std::string_view name, const json* input,
                   bool synthesized) {
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
  void tool_update(std::vector<message>& out, std::string_view id, std::string_view name, std::string_view output,
                   std::string* owned = nullptr) {
    if (closed_ids.contains(id)) return;
    auto it = tools.find(id);
    if (it == tools.end() || !it->second.called) {
      ensure_call(out, id, name, nullptr, true);
      it = tools.find(id);
    }
    tool_state& t = it->second;
    if (t.closed) return;
    if (output == t.last_output) return;  // partialResult is cumulative: only changes are reported
    // Built in place, members in key order (an initializer list would copy the output twice more).
    static const std::string kName = "name", kOutput = "output", kToolCallId = "tool_call_id";
    message& m = out.emplace_back(message{message_type::tool_update, json(json::value_t::object)});
    auto& object = m.content.get_ref<json::object_t&>();
    object.emplace_hint(object.end(), kName, name.empty() ? std::string_view(t.name) : name);
    object.emplace_hint(object.end(), kOutput, output);
    object.emplace_hint(object.end(), kToolCallId, id);
    if (owned != nullptr) {
      t.last_output.swap(*owned);
    } else {
      t.last_output.assign(output);
    }
  }

  void close_call(std::vector<message>& out, std::string_view id, std::string_view name, const json& result,
                  bool is_error) {
    if (closed_ids.contains(id)) return;  // closed in an earlier turn: a repeated result
    auto it = tools.find(id);
    if (it != tools.end() && it->second.closed) return;
    if (it == tools.end() || !it->second.called) {
      ensure_call(out, id, name, nullptr, true);  // a result before its call
      it = tools.find(id);
    }
    tool_state& t = it->second;
    t.closed = true;
    t.last_output.clear();
    t.last_output.shrink_to_fit();
    const std::string tool_name = name.empty() ? t.name : std::string(name);
    std::string text = result_text(result);
    if (is_error) {
      emit(out, message_type::tool_failed,
           json{{"tool_call_id", std::string(id)}, {"name", tool_name}, {"error", std::move(text)},
                {"raw_output", result}});
    } else {
      emit(out, message_type::tool_completed,
           json{{"tool_call_id", std::string(id)}, {"name", tool_name}, {"output", std::move(text)},
                {"raw_output", result}});
    }
  }

  void close_from_message(std::vector<message>& out, const x_message& m) {
    json result = json::object();
    if (m.has_content_json) {
      result["content"] = m.content_json;
    } else {
      json content = json::array();
      for (std::size_t i = 0; i < m.nblocks; ++i) {
        if (m.blocks[i].kind == block_kind::text) content.push_back({{"type", "text"}, {"text", std::string(m.blocks[i].text)}});
      }
      result["content"] = std::move(content);
    }
    if (m.has_details) result["details"] = m.details;
    close_call(out, m.tool_call_id, m.tool_name, result, m.is_error);
  }

  /// Drop the state of closed calls, keeping only their ids (later events of a closed call are ignored).
  void prune_tools() {
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

  // ---- events ------------------------------------------------------------------------------------------------------
  void on_session(const x_event& ev, std::vector<message>& out) {
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

  void apply(x_event& ev, std::vector<message>& out) {
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
        close_call(out, ev.tool_call_id, ev.tool_name, ev.has_result ? ev.result : json::object(), ev.is_error);
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
          extra["error"] = std::string(ev.error_message);
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
          extra["error"] = std::string(ev.error_message);
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

  void record_invalid(std::string_view line) {
    ++stats.invalid_lines;
    if (invalid_lines.size() < options.max_invalid_lines) {
      invalid_lines.push_back(sanitize_utf8(line, options.max_invalid_line_bytes));
    }
  }

  // ---- finish ------------------------------------------------------------------------------------------------------
  json invalid_lines_json() const {
    json a = json::array();
    for (const auto& l : invalid_lines) a.push_back(l);
    return a;
  }

  void add_common(json& c) const {
    if (!session_id.empty()) c["session_id"] = session_id;
    if (!last.model.empty()) c["model"] = last.model;
    if (usage.any) c["usage"] = usage.to_json();
    if (stats.invalid_lines > 0) {
      c["invalid_output_lines"] = invalid_lines_json();
      c["invalid_output_line_count"] = stats.invalid_lines;
    }
  }

  std::string invalid_note() const {
    if (stats.invalid_lines == 0) return {};
    return "; pi printed " + std::to_string(stats.invalid_lines) + " line(s) of non-JSON or invalid output";
  }

  void finish(const run_end& end, std::vector<message>& out) {
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
};

pi_mapper::pi_mapper(pi_mapper_options options) : impl_(std::make_unique<impl>(std::move(options))) {}
pi_mapper::~pi_mapper() = default;
pi_mapper::pi_mapper(pi_mapper&&) noexcept = default;
pi_mapper& pi_mapper::operator=(pi_mapper&&) noexcept = default;

void pi_mapper::on_line(std::string_view line, std::vector<message>& out) {
  impl& m = *impl_;
  ++m.stats.lines;
  m.stats.bytes += line.size();
  if (m.finish_called) return;
  // Blank lines carry nothing (and are not errors).
  if (line.find_first_not_of(" \t\r\n") == std::string_view::npos) return;
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
