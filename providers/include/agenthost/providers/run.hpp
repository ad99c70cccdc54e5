// agenthost/providers/run.hpp — one agent run: process + mapper + watchdogs, for any agent.
//
// async_run_agent() is the provider core every agent provider builds on: it spawns the command, feeds stdout lines to
// the agent's mapper, hands each contract message to `on_message` as it is produced, enforces the watchdogs, and
// always ends with exactly one terminal.* message after the whole process tree is gone. A provider only builds the
// command line and picks a mapper and a stop policy (see pi.hpp).
//
// Single attempt: nothing here retries. A start failure is a terminal.failed message (reason start_failed, `error` the
// agenthost::errc name — executable_not_found, argument_list_too_long… — or invalid_options), never an exception. Failures carry what happened (exit status, stderr tail, invalid lines, retryable hint) so the caller's
// own retry policy can decide.
#pragma once

#include <agenthost/mapper/event_mapper.hpp>
#include <agenthost/process/options.hpp>
#include <agenthost/transport/message.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agenthost::providers {

/// Called with every message of the run, in order, on the run's executor. The reference is valid during the call.
/// If it throws, the run stops the process tree first and then rethrows the exception unchanged (out of the
/// io_context's run()).
using message_handler = std::function<void(const transport::message&)>;

/// Watchdogs and shutdown timing of one run.
struct run_options {
  /// No stdout line within this time after the spawn → terminal.failed (timeout "first_event"). Default: none.
  std::optional<std::chrono::milliseconds> first_event_timeout{};
  /// No stdout line for this long, before the agent's final event → terminal.failed (timeout "idle"); once that event
  /// came, silence is expected and linger_after_finish bounds the wait. A line the agent wrote in time but the host
  /// had not read yet (its thread was busy) counts: this and first_event_timeout then wait again. Default: none.
  std::optional<std::chrono::milliseconds> idle_timeout{};
  /// Whole run longer than this → terminal.failed (timeout "deadline"); if the agent printed its final event before,
  /// the tree is stopped then and the run counts as what the agent reported, as after the linger. Default: none.
  std::optional<std::chrono::milliseconds> deadline{};
  /// After the agent printed its final event, how long its process may linger before it is stopped (the run still
  /// counts as what the agent reported). Default: 3 s.
  std::chrono::milliseconds linger_after_finish{3000};
  /// After the leader exited, how long to wait for stdout EOF (a descendant may hold stdout open) before stopping the
  /// tree; also, after a stop (cancellation, timeout, linger), how long stdout is still read for EOF. Default: 500 ms.
  std::chrono::milliseconds drain_after_exit{500};
  /// After stdout closed (EOF) before the agent's final event, how long the leader may keep running before the tree is
  /// stopped (terminal.failed, timeout "exit_after_eof"): an agent without stdout can no longer report anything.
  /// Default: 5 s.
  std::chrono::milliseconds exit_after_eof{5000};
  /// How the tree is stopped on cancellation, timeout or linger. Default: \x03 + SIGINT, 2 s, kill, 5 s.
  process::stop_policy stop{};
  /// Written to the agent's stdin right after the spawn, then stdin is closed (the agent reads these bytes, then EOF):
  /// for agents that take their input on stdin, e.g. a pi prompt too long for argv. Needs spawn_options::stdin_mode =
  /// pipe (else start_failed). An agent that exits or closes stdin before reading it all is not an error of the run
  /// by itself: its own output and exit tell. Default: nullopt = nothing written, stdin left as spawned.
  std::optional<std::string> stdin_data{};
  /// Called with every stdout line of the agent as it printed it (without the newline), before the mapper sees it,
  /// on the run's executor: for logging, recording transcripts, debugging a mapper. An oversize line is passed as its
  /// head (the part the process layer kept). The view is valid during the call. If it throws, the run stops the tree
  /// and rethrows, as for on_message. Default: none.
  std::function<void(std::string_view line)> on_agent_line{};
};

/// A command line to spawn, or why none could be built (reported as terminal.failed, reason start_failed).
using spawn_request = boost::system::result<process::spawn_options, std::string>;

/// An agent's command as a provider builds it: the arguments after argv[0], and what goes to the agent's stdin (then
/// EOF) — the prompt, when it is too long for an argument; nullopt = stdin is /dev/null.
struct agent_command {
  std::vector<std::string> args;
  std::optional<std::string> stdin_text;
};

/// What async_run_agent needs for one run of an agent, as the providers' make_<agent>_run() build it: the spawn
/// request and the run options (the provider's options.run, plus whatever the command needs, such as stdin_data).
struct agent_run_request {
  spawn_request spawn;
  run_options run;
};

namespace detail {
void async_run_agent_impl(boost::asio::any_io_executor ex, spawn_request spawn,
                          std::unique_ptr<mapper::event_mapper> mapper, run_options options, message_handler on_message,
                          boost::asio::any_completion_handler<void(boost::system::error_code, transport::message)> h);
}

/// Run one agent to its end.
/// Handler: void(boost::system::error_code ec, transport::message terminal). `terminal` is the terminal.* message that
///   was also the last one passed to on_message. ec is asio::error::operation_aborted when the run was cancelled
///   (terminal is then terminal.cancelled); otherwise success, whatever the outcome — failures are messages.
/// Per-operation cancellation: terminal, partial, total — all mean "the caller cancels": the tree is stopped with
///   options.stop (the stop itself cannot be cancelled and always runs to the end), then terminal.cancelled. The
///   agent's output is mapped until its stdout closes, also during the stop: what an interrupted agent prints last
///   (Claude Code's `result`: usage, cost) still reaches on_message and the terminal.
/// Delivery: each message reaches on_message right after the agent's line that produced it, on the run's executor;
///   an `assistant` text waits for the next line of the same read, whose delta is appended to it (one message per run
///   of deltas in a read), or for the end of the read.
/// Lifetimes: everything is copied or moved in; `on_message` (may be empty: only the terminal is wanted) is called
///   until the handler runs. A cancellation emitted before the run started spawns nothing.
/// Thread safety: the run's internal handlers and on_message run on `ex` and are not synchronized with each other —
///   when several threads run `ex`'s context (a thread_pool, an io_context run by many threads), pass a strand
///   (boost::asio::make_strand), as for process::child. The completion handler's associated executor has work
///   until the handler ran.
template <class CompletionToken = boost::asio::deferred_t>
auto async_run_agent(boost::asio::any_io_executor ex, spawn_request spawn,
                     std::unique_ptr<mapper::event_mapper> mapper, run_options options, message_handler on_message,
                     CompletionToken&& token = {}) {
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, transport::message)>(
      [](auto handler, boost::asio::any_io_executor e, spawn_request s, std::unique_ptr<mapper::event_mapper> m,
         run_options o, message_handler cb) {
        detail::async_run_agent_impl(std::move(e), std::move(s), std::move(m), std::move(o), std::move(cb),
                                     std::move(handler));
      },
      token, std::move(ex), std::move(spawn), std::move(mapper), std::move(options), std::move(on_message));
}

/// Blocking helper: runs async_run_agent on a private io_context and returns the terminal message.
transport::message run_agent(spawn_request spawn, std::unique_ptr<mapper::event_mapper> mapper,
                             run_options options, const message_handler& on_message);

/// The terminal.failed message for a run that could not start (reason start_failed).
transport::message start_failed_message(const std::string& text, const std::string& code_name);

}  // namespace agenthost::providers
