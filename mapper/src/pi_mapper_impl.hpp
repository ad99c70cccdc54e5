// Internal: the pi mapper's state machine (pi_mapper::impl), shared by pi_mapper.cpp (emission, events, the public
// class), pi_mapper_text.cpp (assistant text, blocks and messages) and pi_mapper_tools.cpp (tools, finish).
#pragma once

#include <agenthost/mapper/pi_mapper.hpp>

#include "mapper_core.hpp"
#include "pi_event.hpp"
#include "text_util.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace agenthost::mapper {
namespace detail {

using json = nlohmann::json;

inline constexpr std::int64_t kMaxContentIndex = 4096;

/// The text of a tool result `{content: [{type: "text", text}…]}` (or of a bare content array).
inline std::string result_text(const json& result) {
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

inline json number_json(double v) {
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

/// The current message's blocks, by content index. Its slots outlive the message: clear() empties their texts but keeps
/// the buffers (up to kMaxKeptBlockBytes each, kMaxKeptBlocks slots), and a slot's flags are reset when the next
/// message grows into it, so the next message's text is appended into a buffer that is already there. Freed and
/// regrown at every message, a block's text was reallocated ~10 times per answer, each time copying it from memory
/// gone cold while the other agents of the thread ran.
class block_list {
 public:
  static constexpr std::size_t kMaxKeptBlocks = 16;
  static constexpr std::size_t kMaxKeptBlockBytes = 64 * 1024;

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  block_state& operator[](std::size_t i) noexcept { return slots_[i]; }
  const block_state& operator[](std::size_t i) const noexcept { return slots_[i]; }
  block_state* begin() noexcept { return slots_.data(); }
  block_state* end() noexcept { return slots_.data() + size_; }
  const block_state* begin() const noexcept { return slots_.data(); }
  const block_state* end() const noexcept { return slots_.data() + size_; }
  block_state& back() noexcept { return slots_[size_ - 1]; }

  /// Grows to `n` blocks (new ones empty, kind other); never shrinks.
  void grow_to(std::size_t n) {
    if (n <= size_) return;
    if (slots_.size() < n) slots_.resize(n);
    for (std::size_t i = size_; i < n; ++i) reset(slots_[i]);
    size_ = n;
  }
  block_state& emplace_back() {
    grow_to(size_ + 1);
    return back();
  }
  /// No blocks; the slots used keep their text buffers unless they grew beyond the limits.
  void clear() noexcept {
    for (std::size_t i = 0; i < size_; ++i) clear_kept(slots_[i].text, kMaxKeptBlockBytes);
    if (slots_.size() > kMaxKeptBlocks) {
      slots_.erase(slots_.begin() + static_cast<std::ptrdiff_t>(kMaxKeptBlocks), slots_.end());
    }
    size_ = 0;
  }

 private:
  static void reset(block_state& b) noexcept {  // its text is empty already (see clear())
    b.kind = block_kind::other;
    b.ended = false;
    b.released = false;
  }
  // [0, size_) are the message's blocks; the rest are kept for the next ones, their texts empty
  std::vector<block_state> slots_;
  std::size_t size_ = 0;
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

}  // namespace detail

struct pi_mapper::impl {
  using json = nlohmann::json;
  using message = transport::message;
  using message_type = transport::message_type;

  explicit impl(pi_mapper_options o) : options(std::move(o)) {
    // The parser need not build the result of a call that close_call would ignore. (impl stays where it is built:
    // pi_mapper holds it by unique_ptr, so `this` outlives the parser's use of it.)
    parser.set_closed_call_check([this](std::string_view id) { return call_closed(id); });
  }
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;

  pi_mapper_options options;

  // Members are laid out by use (as in pi_event_parser): with 100 agents on one thread, each agent's mapper is cold at
  // its next read, and every cache line a text delta touches costs a miss. What every line or read touches comes
  // first, next to the options' flags and the parser's hot fields; what a message's start or end, a tool or the
  // finish needs comes after.
  mapper_stats stats;
  bool finish_called = false;
  bool saw_event = false;
  bool session_emitted = false;
  // the assistant message being streamed
  bool message_open = false;
  bool message_diverged = false;
  // the assistant message that ended last (until the next message_start): a repeat of its message_end / text_end /
  // thinking_end (pi printing it twice) adds nothing.
  bool after_end = false;
  bool replay_active = false;  // see replay_ref
  bool retry_active = false;   // see retry_ref
  detail::block_list blocks;
  // pi's auto-retry of a failed model call: what the consumer saw of the current message (assistant deltas since its
  // start, or the failed attempt's text it repeats); see retry_ref.
  std::string message_visible;
  detail::pi_event_parser parser;
  // messages handed back (pi_mapper::recycle), refilled by emit_text / emit_thought / tool_update
  detail::message_pool pool;

  // session
  std::string session_id;
  std::string cwd;

  // cross-turn replay: the text of the last tool-use turn; while replay_active, replay_pos == 0 means the message
  // has carried no text yet (its first text decides), replay_pos > 0 that a snapshot equal to replay_ref is held.
  std::string replay_ref;
  std::size_t replay_pos = 0;

  // pi's auto-retry, continued: the text of an error-ended message (a retry may follow), and while a retry is filtered
  // (retry_active), that text and how much of it the retry has repeated (nothing emitted for it).
  std::string failed_text;
  std::optional<std::size_t> failed_thoughts_from;  // pending_thoughts of the error-ended message start here
  std::string retry_ref;
  bool retry_armed = false;  // auto_retry_start after an error-ended message with text: the next message repeats it
  std::size_t retry_pos = 0;

  // what a repeat of the last ended message would carry (see after_end): text / thinking / tool call id per content
  // index, and its stopReason
  std::vector<std::pair<detail::block_kind, std::string>> ended_blocks;
  std::string ended_stop_reason;

  // thinking held back (buffered mode)
  std::vector<std::string> pending_thoughts;

  // tool calls
  // by id; looked up by string_view
  std::unordered_map<std::string, detail::tool_state, detail::string_hash, std::equal_to<>> tools;
  std::vector<std::string> tool_order;  // call order, for closing at finish()
  // Ids of calls closed in an earlier turn (pruned from `tools`), the last 1,024 of them as in every mapper: a later
  // event of such a call is ignored. Constant memory however long the run.
  detail::recent_ids closed_ids{detail::kRememberedClosedCalls};

  // run outcome
  detail::last_assistant last;
  detail::usage_total usage;
  bool any_diverged = false;
  bool agent_ended = false;  // agent_end since the last agent_start
  bool finished = false;
  bool settled = false;

  // invalid output
  std::vector<std::string> invalid_lines;

  // ---- emission (pi_mapper.cpp) -------------------------------------------------------------------------------------
  static void emit(std::vector<message>& out, message_type type, json content);
  /// A synthesized session.started unless one was emitted (inline: every text delta asks).
  void ensure_session(std::vector<message>& out) {
    if (!session_emitted) emit_synthesized_session(out);
  }
  void emit_synthesized_session(std::vector<message>& out);
  void emit_text(std::vector<message>& out, std::string_view text);
  void emit_thought(std::vector<message>& out, std::string_view text);
  void status(std::vector<message>& out, std::string_view kind, std::string text, json extra = json::object());

  // ---- assistant text (pi_mapper_text.cpp) --------------------------------------------------------------------------
  void emit_assistant_chunk(std::vector<message>& out, std::string_view chunk, bool snapshot);
  void emit_visible(std::vector<message>& out, std::string_view chunk);
  void retract_failed_attempt(std::vector<message>& out);
  void settle_retry(std::vector<message>& out);
  void flush_replay(std::vector<message>& out);
  void flush_replay_if_holding(std::vector<message>& out);
  void append_text(std::vector<message>& out, std::size_t index, std::string_view chunk, bool snapshot);
  void diverged(std::vector<message>& out, std::size_t index, std::string_view final_text);
  void reconcile_final(std::vector<message>& out, std::size_t index, std::string_view final_text);
  void reconcile_snapshot_text(std::vector<message>& out, std::size_t index, std::string_view snap);

  // ---- blocks and messages (pi_mapper_text.cpp) ---------------------------------------------------------------------
  std::size_t resolve_block(std::int64_t content_index, detail::block_kind kind);
  void begin_message();
  void ensure_message_open();
  void release_thought_block(std::vector<message>& out, detail::block_state& b);
  void collect_thinking(std::vector<message>& out);
  void release_pending_thoughts(std::vector<message>& out);
  void abandon_message(std::vector<message>& out);
  bool repeats_ended_message(const detail::x_event& ev) const;
  bool repeats_ended_message(const detail::x_message& m) const;
  void on_update(const detail::x_event& ev, std::vector<message>& out);
  void apply_snapshot(const detail::x_message& snap, std::vector<message>& out);
  void on_assistant_end(const detail::x_message& m, std::vector<message>& out);

  // ---- tools (pi_mapper_tools.cpp) ----------------------------------------------------------------------------------
  void ensure_call(std::vector<message>& out, std::string_view id, std::string_view name, const json* input,
                   bool synthesized);
  void tool_update(std::vector<message>& out, std::string_view id, std::string_view name, std::string_view output,
                   std::string* owned = nullptr);
  /// `result` is taken: it becomes the message's raw_output.
  void close_call(std::vector<message>& out, std::string_view id, std::string_view name, json result, bool is_error);
  void close_from_message(std::vector<message>& out, const detail::x_message& m);
  void prune_tools();
  /// Whether close_call would ignore a result for `id` (closed in this turn or an earlier one).
  [[nodiscard]] bool call_closed(std::string_view id) const;

  // ---- events (pi_mapper.cpp) ---------------------------------------------------------------------------------------
  void on_session(const detail::x_event& ev, std::vector<message>& out);
  void apply(detail::x_event& ev, std::vector<message>& out);
  void record_invalid(std::string_view line);

  // ---- finish (pi_mapper_tools.cpp) ---------------------------------------------------------------------------------
  json invalid_lines_json() const;
  void add_common(json& c) const;
  std::string invalid_note() const;
  void finish(const run_end& end, std::vector<message>& out);
};

}  // namespace agenthost::mapper
