// Internal: the bookkeeping every agent mapper shares, so that each mapper only says what its agent's events mean.
//
// mapper_core keeps the contract's invariants (session first, every tool.call closed exactly once, one terminal,
// invalid lines bounded and reported) and builds the common parts of the terminal (session id, model, usage, exit
// status, stderr, invalid lines, the retryable hint). An agent mapper owns one mapper_core and calls it; it decides
// itself what ends a turn, what a successful run is and what its exit codes mean.
//
// Not thread-safe (one mapper, one thread). No I/O.
#pragma once

#include <algorithm>

#include "message_reuse.hpp"
#include "text_util.hpp"

#include <agenthost/mapper/event_mapper.hpp>
#include <agenthost/transport/message.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace agenthost::mapper::detail {

/// A tool's input as mapper_core::tool_call() takes it: an object's members; null writes nothing (the input is {});
/// anything else is written as {"value": input}.
void write_input(object_writer& input, const nlohmann::json& value);

/// Longest status / error text copied into a message (cut on a UTF-8 boundary).
inline constexpr std::size_t kMaxStatusBytes = 2000;

struct core_options {
  /// Agent name in session.* `agent` and in texts ("claude exited with code 1").
  std::string agent;
  /// How many invalid lines are kept for `invalid_output_lines` (later ones are only counted).
  std::size_t max_invalid_lines = 20;
  /// Bytes kept per invalid line.
  std::size_t max_invalid_line_bytes = 4096;
  /// The session the caller asked to resume: the session message is then session.resumed.
  std::optional<std::string> requested_session_id{};
  /// text(): append to an `assistant` message at the end of the output vector instead of adding one.
  bool merge_adjacent_text = false;
};

/// The core_options of a mapper's options: every agent's options carry these five fields under the same names.
template <class MapperOptions>
core_options core_options_of(const MapperOptions& o) {
  return core_options{.agent = o.agent,
                      .max_invalid_lines = o.max_invalid_lines,
                      .max_invalid_line_bytes = o.max_invalid_line_bytes,
                      .requested_session_id = o.requested_session_id,
                      .merge_adjacent_text = o.merge_adjacent_text};
}

/// Token counts enter clamped to [0, kMaxTokens] and are summed saturating at kMaxTokenSum: an agent's absurd value
/// (1e300, a negative count) must neither overflow (undefined behaviour) nor make a sum negative.
inline constexpr long long kMaxTokens = 9'000'000'000'000'000;        // 9e15: every count below is exact in a double
inline constexpr long long kMaxTokenSum = 1'000'000'000'000'000'000;  // 1e18: five of them still fit in a long long
[[nodiscard]] inline long long tokens_from(double v) noexcept {
  return v > 0 ? (v < static_cast<double>(kMaxTokens) ? static_cast<long long>(v) : kMaxTokens) : 0;  // NaN: 0
}
inline void add_tokens(long long& into, long long v) noexcept {
  into = std::min(into + std::clamp(v, 0LL, kMaxTokens), kMaxTokenSum);
}

/// Token counts summed over every model call of a run (contract `usage`).
struct usage_sum {
  long long input = 0, output = 0, cache_read = 0, cache_write = 0, reasoning = 0;
  std::optional<double> cost_total{};  ///< in the agent's currency (USD), when the agent reports it
  bool any = false;
  [[nodiscard]] nlohmann::json to_json() const;
};

/// What a mapper decided about the end of a run, before the common fields are added.
struct terminal_draft {
  transport::message_type type = transport::message_type::terminal_failed;
  /// terminal.failed `reason` (empty for completed / cancelled).
  std::string reason{};
  /// terminal.failed / cancelled `text`; for completed, the final answer.
  std::string text{};
  /// Agent-specific fields (http_status, retryable, stop_reason, error_message, truncated…); kept as given.
  nlohmann::json content = nlohmann::json::object();
};

/// Texts held back in order (buffered thinking) in one buffer: holding one allocates nothing once the buffer has
/// grown to a turn's thinking. Memory: the held texts.
///
/// A release may be done in parts (release(f, max)): the texts not yet released stay, in order, for the next release.
/// Texts pushed during a partial release come after the ones still held.
class held_texts {
 public:
  void push(std::string_view text) {
    buffer_.append(text);
    ends_.push_back(buffer_.size());
  }
  /// No text held (none pushed, or all released).
  [[nodiscard]] bool empty() const noexcept { return next_ == ends_.size(); }
  /// How many texts are held.
  [[nodiscard]] std::size_t size() const noexcept { return ends_.size() - next_; }
  /// Calls `f(std::string_view)` for each held text in order, then holds nothing (a buffer past 1 MiB is given back).
  template <class F>
  void release(F&& f) {
    release(std::forward<F>(f), ends_.size());
  }
  /// Calls `f(std::string_view)` for the first `max` held texts in order (all of them when there are fewer); true when
  /// texts are still held after it.
  template <class F>
  bool release(F&& f, std::size_t max) {
    std::size_t begin = next_ == 0 ? 0 : ends_[next_ - 1];
    for (std::size_t n = 0; n < max && next_ < ends_.size(); ++n) {
      const std::size_t end = ends_[next_++];
      f(std::string_view(buffer_).substr(begin, end - begin));
      begin = end;
    }
    if (next_ < ends_.size()) return true;
    next_ = 0;
    ends_.clear();
    buffer_.clear();
    if (buffer_.capacity() > (std::size_t{1} << 20)) {
      std::string().swap(buffer_);
      std::vector<std::size_t>().swap(ends_);
    }
    return false;
  }

 private:
  std::string buffer_;
  std::vector<std::size_t> ends_;  // end offset in buffer_ of each text pushed
  std::size_t next_ = 0;           // the first text not released yet (ends_ index)
};

class mapper_core;

/// Buffered thinking and its release at a turn's end as assistant.thought messages: all at once, or `batch` at a time
/// (event_mapper::take_more appends the rest), so that a turn of thousands of thoughts is handed on in bounded
/// slices whose messages the consumer can hand back for reuse.
class held_thoughts {
 public:
  /// `batch`: how many thoughts one release appends (0: all).
  explicit held_thoughts(std::size_t batch) noexcept : batch_(batch) {}
  void hold(std::string_view text) { texts_.push(text); }
  /// The turn ended: appends the held thoughts, or the first `batch` of them.
  void release(mapper_core& core, std::vector<transport::message>& out);
  /// Appends every thought still held (the run's end).
  void release_all(mapper_core& core, std::vector<transport::message>& out);
  /// Appends the rest of a release cut short, nothing otherwise: before a mapper maps its next line, so that what
  /// take_more() was not asked for comes first. (Inline: a check per line.)
  void release_rest(mapper_core& core, std::vector<transport::message>& out) {
    if (releasing_) release_all(core, out);
  }
  /// take_more: the next `batch` of a release under way; false (nothing appended) when none is.
  bool release_more(mapper_core& core, std::vector<transport::message>& out);

 private:
  held_texts texts_;
  std::size_t batch_;
  bool releasing_ = false;
};

/// How many closed calls a mapper remembers. An agent repeats a call's events close to the call (Claude's full
/// frame after its stream, a retried stream, pi's turn_end results), never thousands of calls later; a bound keeps a
/// run of any length at constant memory and the lookups in cache (a run-sized table cost a third of the Codex
/// mapper's time on 1 M events).
inline constexpr std::size_t kRememberedClosedCalls = 1024;

/// Open addressing (linear probing, backward-shift deletion) from an id's 32-bit hash to an index the owner gives it:
/// the table under recent_ids and open_calls. The owner keeps the ids; a probe compares one only when the hashes
/// match. Not thread-safe.
class id_slots {
 public:
  static constexpr std::uint32_t kEmpty = UINT32_MAX;
  static std::uint32_t hash_of(std::string_view id) noexcept { return static_cast<std::uint32_t>(string_hash{}(id)); }

  /// Room for `count` entries at a load of at most 1/2 (a power of two ≥ 2 × count slots); entries are kept.
  void reserve(std::size_t count);
  [[nodiscard]] std::size_t slot_count() const noexcept { return table_.size(); }
  /// The position holding the index `is_id(index)` accepts (hash `h`), or the empty position where probing for it
  /// ended. The table must have slots (reserve).
  template <class IsId>
  [[nodiscard]] std::size_t probe(std::uint32_t h, IsId&& is_id) const {
    for (std::size_t position = h & mask_;; position = (position + 1) & mask_) {
      const slot& s = table_[position];
      if (s.index == kEmpty || (s.hash == h && is_id(s.index))) return position;
    }
  }
  /// The index at `position` (kEmpty when it is empty).
  [[nodiscard]] std::uint32_t index_at(std::size_t position) const noexcept { return table_[position].index; }
  /// Fills the empty `position` (from probe) with `index`.
  void fill(std::size_t position, std::uint32_t h, std::uint32_t index) noexcept { table_[position] = {h, index}; }
  /// Calls `f(index)` for every entry, in no particular order.
  template <class F>
  void for_each_index(F&& f) const {
    for (const slot& s : table_)
      if (s.index != kEmpty) f(s.index);
  }
  /// Empties `position`; the positions of other entries may change.
  void erase(std::size_t position) noexcept;
  void clear() noexcept;

 private:
  struct slot {
    std::uint32_t hash = 0;
    std::uint32_t index = kEmpty;
  };
  std::vector<slot> table_;
  std::size_t mask_ = 0;
};

/// A set of the last `capacity` ids inserted: inserting into a full set forgets the oldest id. Memory grows with the
/// ids inserted, up to `capacity` of them, plus a table of 4 × capacity 8-byte slots.
///
/// id_slots over a ring of the ids: a full set replaces the oldest id without allocating. (A node-based
/// std::unordered_set of views was 18 % of the Codex mapper's time.) The `h` overloads take id_slots::hash_of(id),
/// for a caller that looks the same id up in several tables.
class recent_ids {
 public:
  explicit recent_ids(std::size_t capacity);
  [[nodiscard]] bool contains(std::string_view id) const { return contains(id, id_slots::hash_of(id)); }
  [[nodiscard]] bool contains(std::string_view id, std::uint32_t h) const;
  /// Inserts `id` unless it is present.
  void insert(std::string_view id) { insert(id, id_slots::hash_of(id)); }
  void insert(std::string_view id, std::uint32_t h) {
    if (!contains(id, h)) insert_absent(id, h);
  }
  /// Inserts `id`, which the caller knows is not present (an id that was open until now: open and closed ids are
  /// disjoint), without looking for it first.
  void insert_absent(std::string_view id, std::uint32_t h);

 private:
  [[nodiscard]] std::size_t probe(std::string_view id, std::uint32_t h) const {
    return slots_.probe(h, [&](std::uint32_t index) { return ring_[index] == id; });
  }

  std::size_t capacity_;
  std::vector<std::string> ring_;      // grows to capacity_, then reused oldest-first
  std::vector<std::uint32_t> hashes_;  // of ring_'s ids
  std::size_t oldest_ = 0;             // next ring slot to overwrite once ring_ is full
  id_slots slots_;                     // sized at the first insert
};

/// The open tool calls of a run: id → name and last output, kept in call order. One probe finds, adds or removes a
/// call however many are open; a removed call's strings are reused by the next one, so a steady run of calls
/// allocates nothing. (An unordered_map plus a vector for the order cost a lookup per step and a linear erase.)
class open_calls {
 public:
  struct call {
    std::string id;
    std::string name;
    std::string last_output;  ///< the last cumulative output reported (tool.update)
    std::uint64_t order = 0;  ///< when the call was added
    std::uint32_t hash = 0;   ///< id_slots::hash_of(id)
  };
  /// The open call `id` (h = id_slots::hash_of(id)), or nullptr. Valid until the next add().
  [[nodiscard]] call* find(std::string_view id, std::uint32_t h) {
    const std::uint32_t index = index_of(id, h);
    return index == id_slots::kEmpty ? nullptr : &calls_[index];
  }
  [[nodiscard]] const call* find(std::string_view id, std::uint32_t h) const {
    const std::uint32_t index = index_of(id, h);
    return index == id_slots::kEmpty ? nullptr : &calls_[index];
  }
  /// Adds `id`, which must not be open, with an empty last_output. Valid until the next add().
  call& add(std::string_view id, std::uint32_t h, std::string_view name);
  /// Removes `c` (from find or add).
  void remove(call& c) noexcept;
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  /// The open calls in the order they were added (valid until the next add or remove).
  [[nodiscard]] std::vector<const call*> in_order() const;
  void clear() noexcept;

 private:
  [[nodiscard]] std::uint32_t index_of(std::string_view id, std::uint32_t h) const;

  std::vector<call> calls_;           // open calls and free entries, stable indexes
  std::vector<std::uint32_t> free_;   // indexes of calls_ not in use
  std::size_t count_ = 0;
  std::uint64_t next_order_ = 0;
  id_slots slots_;
};

class mapper_core {
 public:
  explicit mapper_core(core_options options);

  // ---- lines ---------------------------------------------------------------------------------------------------------
  /// Counts the line; false when it carries nothing to map (finish() was called, or only whitespace).
  bool begin_line(std::string_view line) noexcept;
  /// Counts an oversize line and records its head as invalid.
  void oversize_line(std::string_view head, std::size_t total_bytes);
  void record_invalid(std::string_view line);
  /// "; claude printed 3 line(s) of non-JSON or invalid output" (empty when there were none).
  [[nodiscard]] std::string invalid_note() const;
  [[nodiscard]] nlohmann::json invalid_lines_json() const;
  [[nodiscard]] const mapper_stats& stats() const noexcept { return stats_; }
  /// Set by the mapper when a line was a valid event (for the retryable hint and "printed no JSON event").
  bool saw_event = false;

  // ---- session -------------------------------------------------------------------------------------------------------
  /// The agent's session header: session.started, or session.resumed when a session was requested. Ignored when a
  /// session message was already emitted. `model` and `cwd` may be empty.
  void session(std::vector<transport::message>& out, std::string_view session_id, std::string_view model,
               std::string_view cwd);
  /// A synthesized session.started (the agent printed none before content): the requested id or "".
  void ensure_session(std::vector<transport::message>& out);
  /// Records the session id without emitting (an id learned after the session message, e.g. from the final event).
  void set_session_id(std::string_view id);
  [[nodiscard]] const std::string& session_id() const noexcept { return session_id_; }
  [[nodiscard]] bool session_emitted() const noexcept { return session_emitted_; }
  /// The model the agent reported last (terminal `model`).
  std::string model;
  usage_sum usage;

  // ---- messages ------------------------------------------------------------------------------------------------------
  /// message_pool::start: a recycled message when there is one. The content messages the core builds start here.
  transport::message& start(std::vector<transport::message>& out, transport::message_type type) {
    return pool_.start(out, type);
  }
  /// event_mapper::recycle.
  void recycle(std::vector<transport::message>& used) noexcept { pool_.recycle(used); }

  // ---- content -------------------------------------------------------------------------------------------------------
  void text(std::vector<transport::message>& out, std::string_view delta);
  void thought(std::vector<transport::message>& out, std::string_view text);
  /// status {kind, text, ...extra}; text cut at kMaxStatusBytes.
  void status(std::vector<transport::message>& out, std::string_view kind, std::string_view text,
              nlohmann::json extra = nlohmann::json::object());

  // ---- tools ---------------------------------------------------------------------------------------------------------
  /// tool.call once per id (a repeat, or an id already closed, is ignored). A non-object input is wrapped as
  /// {"value": input}; null becomes {}.
  void tool_call(std::vector<transport::message>& out, std::string_view id, std::string_view name,
                 nlohmann::json input, bool synthesized = false);
  /// tool.call whose input `fill_input(object_writer&)` writes in place (keys in ascending order). False when the
  /// call was ignored (already open, or closed).
  template <class FillInput>
  bool tool_call_with(std::vector<transport::message>& out, std::string_view id, std::string_view name,
                      FillInput&& fill_input) {
    if (!open_call(id, id_slots::hash_of(id), name)) return false;
    announce_with(out, id, name, fill_input);
    return true;
  }
  /// tool.update with the cumulative output; unchanged output is not repeated. An unknown id gets a synthesized call.
  void tool_update(std::vector<transport::message>& out, std::string_view id, std::string_view name,
                   std::string_view output);
  /// tool.completed (output) or tool.failed (error); a second close of the same id is ignored; an unknown id gets a
  /// synthesized call first. `raw` (when not null) is kept as raw_output. An empty name uses the call's name.
  void tool_close(std::vector<transport::message>& out, std::string_view id, std::string_view name,
                  std::string_view text, bool is_error, nlohmann::json raw = nullptr);
  /// tool_close whose raw_output `fill_raw(object_writer&)` writes in place (keys in ascending order).
  template <class FillRaw>
  void tool_close_with(std::vector<transport::message>& out, std::string_view id, std::string_view name,
                       std::string_view text, bool is_error, FillRaw&& fill_raw) {
    open_calls::call* const call = close_target(out, id, id_slots::hash_of(id), name);
    if (call != nullptr) close_with(out, *call, id, name, text, is_error, fill_raw);
  }
  /// tool_call_with then tool_close_with, for an event that carries a call and its result at once (Codex's
  /// item.completed, OpenCode's completed tool part): the same messages, with one lookup of the id instead of two.
  template <class FillInput, class FillRaw>
  void tool_call_and_close_with(std::vector<transport::message>& out, std::string_view id, std::string_view name,
                                FillInput&& fill_input, std::string_view text, bool is_error, FillRaw&& fill_raw) {
    const std::uint32_t h = id_slots::hash_of(id);
    open_calls::call* call = open_.find(id, h);
    if (call == nullptr) {
      call = open_unless_closed(id, h, name);
      if (call == nullptr) return;  // a repeated result
      announce_with(out, id, name, fill_input);
    }
    close_with(out, *call, id, name, text, is_error, fill_raw);
  }
  [[nodiscard]] bool tool_open(std::string_view id) const;
  [[nodiscard]] std::size_t open_tool_count() const noexcept;
  /// The name a known call was announced with (empty when unknown).
  [[nodiscard]] std::string_view tool_name(std::string_view id) const;

  // ---- terminal ------------------------------------------------------------------------------------------------------
  [[nodiscard]] bool finish_called() const noexcept { return finish_called_; }
  /// Marks finish() as called; false when it already was (finish is idempotent).
  bool begin_finish() noexcept;
  /// The causes every agent reads the same way: the caller cancelled → cancelled; a watchdog → failed/timeout; a
  /// signal (unless the provider stopped an agent that had already finished) → failed/signaled. nullopt: the mapper
  /// decides from the agent's events and exit code.
  [[nodiscard]] std::optional<terminal_draft> common_end(const run_end& end, bool agent_finished) const;
  /// failed/exited for a non-zero exit code `code`, with the last stderr line in the text.
  [[nodiscard]] terminal_draft exited_draft(const run_end& end, int code, std::string_view detail = {}) const;
  /// failed/no_terminal_event ("claude printed no JSON event" / "…'s output ended before its final event (what)").
  [[nodiscard]] terminal_draft no_terminal_draft(const run_end& end, std::string_view final_event) const;
  /// Closes the open tool calls (tool.failed, closed_by_finish), adds the common fields (session_id, model, usage,
  /// invalid lines, exit_status; for failed: stderr, invalid_output_lines, the default retryable hint) and appends the
  /// terminal. Agent-specific fields (stop_reason, stopped_after_finish, truncated…) go in draft.content.
  void emit_terminal(std::vector<transport::message>& out, terminal_draft draft, const run_end& end);

  [[nodiscard]] const core_options& options() const noexcept { return options_; }

 private:
  // The pieces of tool_call / tool_close around the part the caller fills. `h` is id_slots::hash_of(id), computed
  // once per call of the public functions.
  bool open_call(std::string_view id, std::uint32_t h, std::string_view name);
  // Adds `id`, which is not open, unless it was closed already (nullptr then): the rule open_call and
  // tool_call_and_close_with share.
  open_calls::call* open_unless_closed(std::string_view id, std::uint32_t h, std::string_view name);
  nlohmann::json& start_call(std::vector<transport::message>& out);
  static void end_call(object_writer& c, std::string_view id, std::string_view name, bool synthesized);
  // The tool.call of a call just opened, its input written by fill_input.
  template <class FillInput>
  void announce_with(std::vector<transport::message>& out, std::string_view id, std::string_view name,
                     FillInput& fill_input) {
    object_writer c(start_call(out));
    object_writer input = c.object("input");
    fill_input(input);
    input.done();
    end_call(c, id, name, false);
  }
  // The tool.completed / tool.failed that closes the open `call`, its raw_output written by fill_raw.
  template <class FillRaw>
  void close_with(std::vector<transport::message>& out, open_calls::call& call, std::string_view id,
                  std::string_view name, std::string_view text, bool is_error, FillRaw& fill_raw) {
    object_writer c(start(out, is_error ? transport::message_type::tool_failed
                                        : transport::message_type::tool_completed).content);
    begin_close(c, call, name, text, is_error);
    object_writer raw = c.object("raw_output");
    fill_raw(raw);
    raw.done();
    end_close(c, call, id);
  }
  // The open call to close (announced now when it never was), or nullptr when it was closed already.
  open_calls::call* close_target(std::vector<transport::message>& out, std::string_view id, std::uint32_t h,
                                 std::string_view name);
  static void begin_close(object_writer& c, const open_calls::call& call, std::string_view name,
                          std::string_view text, bool is_error);
  void end_close(object_writer& c, open_calls::call& call, std::string_view id);

  message_pool pool_;
  core_options options_;
  mapper_stats stats_;
  std::vector<std::string> invalid_lines_;
  std::string session_id_;
  bool session_emitted_ = false;
  bool finish_called_ = false;
  open_calls open_;
  // Ids of the most recently closed calls: a repeated result or update of such a call is ignored. Looked up only
  // when an id is not open: a call and its result cost one lookup here (at the call) and one insert.
  recent_ids closed_ids_{kRememberedClosedCalls};
};

}  // namespace agenthost::mapper::detail
