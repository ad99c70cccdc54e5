// agenthost/mapper/event_mapper.hpp — the interface every agent mapper implements.
//
// A mapper is a sans-I/O state machine: the provider feeds it the agent's stdout lines, one at a time, and tells it
// how the run ended; it appends contract messages (agenthost/transport/message.hpp) to an output vector. It never
// reads, writes, sleeps or spawns. All invariants of the contract (one terminal, last; every tool.call closed;
// session first) are the mapper's job, so that providers stay glue.
//
// Thread safety: a mapper instance is used by one thread at a time. Cost: O(total input), no per-line DOM.
#pragma once

#include <agenthost/process/exit_status.hpp>
#include <agenthost/transport/message.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agenthost::mapper {

/// When assistant.thought messages are released.
enum class thinking_mode {
  /// Held until the agent's final turn ends (a turn that ends to run tools does not release it), then released in
  /// order — including the thinking of earlier tool-use turns (nothing is dropped). finish() releases whatever is
  /// still held.
  buffered,
  /// Released as soon as each thinking block completes.
  stream,
};

/// How the agent's run ended, as the provider saw it. Exactly one of the flags/fields describes the cause.
struct run_end {
  /// The agent leader's exit status (also after a cancellation or timeout, once the stop ended it); nullopt when it is
  /// not known. A cancellation or a timeout decides the terminal whatever the status says.
  std::optional<process::exit_status> status{};
  /// The caller cancelled: the terminal is terminal.cancelled, whatever the agent printed before.
  bool cancelled = false;
  /// A watchdog fired: "first_event", "idle" or "deadline"; the terminal is terminal.failed (reason "timeout").
  std::optional<std::string> timeout{};
  /// The last bytes the agent wrote to stderr (bounded by the process layer); copied into terminal.failed.
  std::string stderr_tail{};
  /// The provider stopped the agent itself because it had not exited within the grace after agent_finished()
  /// (pi can hang after its last event). The exit status (SIGTERM, 143…) then says nothing about the run: the
  /// mapper decides from the events as if the agent had exited 0, and marks the terminal `stopped_after_finish`.
  bool stopped_after_finish = false;
};

/// If the last message of `out` is an `assistant` message, appends `text` to it and returns true; otherwise false.
/// For mappers that merge the text deltas of one batch of lines (an option of each mapper).
bool append_to_last_text(std::vector<transport::message>& out, std::string_view text);

/// Counters a mapper keeps; useful for diagnostics and benchmarks.
struct mapper_stats {
  std::size_t lines = 0;          ///< lines fed
  std::size_t bytes = 0;          ///< bytes fed (without newlines)
  std::size_t invalid_lines = 0;  ///< lines that were not valid events (also kept, bounded, for invalid_output_lines)
};

class event_mapper {
 public:
  virtual ~event_mapper() = default;

  /// Feed one stdout line (no trailing '\n' or '\r'). Appends zero or more messages to `out`. Never throws on bad
  /// input: malformed lines are recorded (bounded) and reported in terminal.failed `invalid_output_lines`.
  virtual void on_line(std::string_view line, std::vector<transport::message>& out) = 0;

  /// The process layer dropped a line longer than the maximum; `head` is its beginning, `total_bytes` its length.
  virtual void on_oversize_line(std::string_view head, std::size_t total_bytes, std::vector<transport::message>& out) = 0;

  /// True once the agent has printed what the mapper considers its final event (the provider then gives the process
  /// a short grace to exit before stopping it). The terminal message itself is only emitted by finish().
  [[nodiscard]] virtual bool agent_finished() const noexcept = 0;

  /// The run is over: closes open tool calls, flushes buffered thinking and appends exactly one terminal.* message.
  /// Idempotent: a second call appends nothing.
  virtual void finish(const run_end& end, std::vector<transport::message>& out) = 0;

  [[nodiscard]] virtual const mapper_stats& stats() const noexcept = 0;

  /// Hands back messages the caller has consumed (delivered, copied, rendered) and empties `used`; call it instead of
  /// `used.clear()`. The mapper may keep a few of them (a handful per message type) and fill their members in place
  /// for the messages it appends later, so that a steady stream of events allocates nothing per message. Bounded: one
  /// that holds more than 32 KiB is freed within 64 calls of recycle() (sooner when more messages of its type come
  /// back), and a refill keeps no string buffer above 32 KiB. Purely an optimization: clearing the vector yourself is
  /// equally correct, and the messages a mapper appends are the same either way. Any messages may be passed, also
  /// ones the caller modified.
  virtual void recycle(std::vector<transport::message>& used) { used.clear(); }

  /// Appends messages the mapper has ready but held back to bound what one call appends (the Codex and OpenCode
  /// mappers' `thought_release_batch`: a turn's buffered thoughts, a slice at a time). False, appending nothing, when
  /// none are held back. Call it after on_line() / on_oversize_line() until it returns false, handing each slice on
  /// (and back through recycle()) in between. Optional: a caller that never calls it loses nothing and gets the same
  /// messages in the same order, since the next on_line(), on_oversize_line() or finish() appends what is held back
  /// before anything else.
  virtual bool take_more(std::vector<transport::message>& /*out*/) { return false; }
};

}  // namespace agenthost::mapper
