// agenthost/process/child.hpp — one agent process tree: spawn, stream, write, stop.
//
//   asio::io_context io;
//   auto c = agenthost::process::child::spawn(io.get_executor(), {.executable = "my-agent", .args = {"--json"}});
//   if (!c) { std::cerr << c.error().message; return; }
//   c->async_read_lines([&](error_code ec, agenthost::process::line_batch lines) { ... });
//   c->async_stop(agenthost::process::stop_policy::ctrl_c(), [](error_code, stop_report r) { ... });
//
// Spawning never goes through a shell and never fork()s the host: it uses posix_spawn (see src/posix/spawn.cpp for
// why not Boost.Process 1.81's launcher). By default the agent runs under the agenthost-reaper helper, a subreaper
// that owns the agent's whole process tree: nothing the agent starts can outlive a stop, nor the host's death. That
// helper is forked ahead of time by a per-process spawn server (an `agenthost-reaper --server` that the first such
// spawn, whose own helper is exec'd, starts on a short-lived thread) rather than exec'd per agent, unless
// spawn_options::reaper_server is false.
//
// Thread safety: a `child` is not thread-safe. All its functions, and the io_context threads that run its
// operations, must be serialized — use it from one thread, or give it a strand as executor. Different `child`
// objects are independent — also with spawn_options::read_coalescing, where the children of one execution context
// share a poller (internally synchronized; each child's reads still run on that child's executor).
//
// Lifetime: the object may be destroyed while operations are pending; they then complete with
// asio::error::operation_aborted. Destroying a running child kills its tree synchronously, bounded by
// spawn_options::destroy_timeout — it never blocks without limit. A process of ours that could not be reaped within
// that bound (killed but still in the kernel, or dead and held by a tracer such as a debugger or strace) is reaped
// later by one background thread per host process, started on first need: no zombie stays for the host's lifetime.
#pragma once

#include <agenthost/process/error.hpp>
#include <agenthost/process/exit_status.hpp>
#include <agenthost/process/line_framer.hpp>
#include <agenthost/process/options.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace agenthost::process {

/// The lines of one read: views into the child's buffer, valid until the next async_read_lines() call or the child's
/// destruction. Never empty unless the read completed with an error.
using line_batch = std::span<const line_view>;

class child {
 public:
  using executor_type = boost::asio::any_io_executor;

  /// Spawn `options.executable`. Errors name the path: errc::executable_not_found, executable_not_executable,
  /// working_directory_not_found, reaper_not_found, spawn_failed. Never throws for OS failures (std::bad_alloc
  /// aside); on failure no process, zombie or descriptor is left behind. May be called from any thread, also from
  /// several at once: the child's internal operations start on `executor`. Blocks until the agent runs (in reaper
  /// mode: until its reaper reported, at most 10 s).
  static boost::system::result<child, spawn_error> spawn(executor_type executor, spawn_options options);

  child(child&&) noexcept;
  child& operator=(child&&) noexcept;
  child(const child&) = delete;
  child& operator=(const child&) = delete;
  /// Kills the tree synchronously if it still runs (bounded by destroy_timeout; what cannot be reaped by then is reaped
  /// later, see "Lifetime" above); pending operations are aborted.
  ~child();

  [[nodiscard]] executor_type get_executor() const noexcept;
  /// The agent's PID (not the reaper helper's).
  [[nodiscard]] int pid() const noexcept;
  /// The containment actually in use (automatic resolves to reaper or session).
  [[nodiscard]] containment_kind containment() const noexcept;
  /// The last bytes the agent wrote to stderr (bounded by spawn_options::stderr_tail_bytes).
  [[nodiscard]] std::string stderr_tail() const;
  /// Total bytes the agent wrote to stderr.
  [[nodiscard]] std::uint64_t stderr_bytes() const noexcept;
  /// True until the leader's exit was observed.
  [[nodiscard]] bool running() const noexcept;
  /// True when the agent wrote a line that no read has handed over yet: a read's lines on their way to its handler
  /// (posted), lines held for the next read, or bytes waiting in the pipe (a zero-timeout poll(2); they may be only
  /// part of a line). A partial line already read does not count. For watchdogs: an agent whose output only waits
  /// for a busy thread is not silent. False once stdout reached its end. At most one system call; same thread-safety
  /// as every other function.
  [[nodiscard]] bool stdout_pending() const noexcept;

  /// Read the next lines of stdout.
  /// Handler: void(boost::system::error_code ec, line_batch lines). ec == asio::error::eof once stdout is closed and
  ///   every line was delivered (an unterminated last line comes first, as a line). Lines too long for
  ///   max_line_bytes arrive with `oversize = true` and their head.
  /// Backpressure: stdout is read only while a read is pending, so a slow consumer makes the agent block on a full
  ///   pipe instead of growing our memory (bounded by max_line_bytes + read_chunk_bytes).
  /// With spawn_options::read_coalescing > 0 the same holds; the read completes at the poller's next tick that finds
  ///   output (up to one interval later), not as soon as the agent writes.
  /// Per-operation cancellation: terminal, partial, total — the read completes with operation_aborted; no data is
  ///   lost (the next read continues where this one stopped). The process is not affected.
  /// One read at a time (errc::operation_in_progress otherwise): a read is in progress until its handler has been
  ///   called, also when its lines wait for a handler bound to another executor.
  /// Memory: a std::bad_alloc from the initiation means the read never started (its handler is not called, the next
  ///   read may start, and no line is lost); one inside the read's completion is retried, not a lost handler.
  template <class CompletionToken = boost::asio::deferred_t>
  auto async_read_lines(CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, line_batch)>(
        [this](auto handler) { read_lines_impl(std::move(handler)); }, token);
  }

  /// Write `data` to the agent's stdin. The bytes are copied: `data` need not outlive the call.
  /// Handler: void(boost::system::error_code ec, std::size_t bytes_written). errc::stdin_closed when stdin was closed
  ///   or the agent is gone (EPIPE) — never SIGPIPE; errc::stdin_not_piped when spawned with stdin_kind::null.
  /// Writes are queued in order. Per-operation cancellation: terminal, partial, total — the write completes with
  ///   operation_aborted; bytes already sent stay sent.
  template <class CompletionToken = boost::asio::deferred_t>
  auto async_write_stdin(boost::asio::const_buffer data, CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, boost::asio::const_buffer d) { write_stdin_impl(d, std::move(handler)); }, token, data);
  }

  /// Close stdin: the agent reads EOF. Idempotent.
  void close_stdin() noexcept;

  /// Wait for the agent leader to exit. Independent of stdout: a descendant may keep stdout open after the leader
  /// exited (and the leader may close stdout long before it exits).
  /// Handler: void(boost::system::error_code ec, exit_status status).
  /// Per-operation cancellation: terminal, partial, total — completes with operation_aborted; the process is not
  ///   affected. Several waits may be pending at once.
  template <class CompletionToken = boost::asio::deferred_t>
  auto async_wait(CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, exit_status)>(
        [this](auto handler) { wait_impl(std::move(handler)); }, token);
  }

  /// The three-phase stop of the whole tree: policy.interrupt_* → wait policy.graceful_wait for the *tree* to be gone
  /// → SIGKILL every process of the tree → wait policy.kill_wait. Always runs to the end. Should the reaper helper
  /// die during the kill phase, the host kills the tree itself with one more kill_wait (graceful + 2 × kill_wait).
  /// Handler: void(boost::system::error_code ec, stop_report report). ec is errc::stop_incomplete when processes
  ///   survived (listed in the report) or could not be checked for (see stop_report), otherwise success — also when
  ///   the tree was already gone.
  /// Per-operation cancellation: not supported, on purpose — cleanup cannot be cancelled. A stop requested from a
  ///   handler whose caller was already cancelled still runs to the end. A second stop joins the first: its handler
  ///   gets the same report (the first policy wins).
  template <class CompletionToken = boost::asio::deferred_t>
  auto async_stop(stop_policy policy, CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, stop_report)>(
        [this](auto handler, stop_policy p) { stop_impl(std::move(p), std::move(handler)); }, token,
        std::move(policy));
  }

  /// Send `signal` now (to the leader, its group, or the whole tree). Returns errc::not_running when the tree is gone,
  /// std::errc::invalid_argument for a number that is no signal (0 only checks that the target exists).
  boost::system::error_code send_signal(int signal, signal_target target = signal_target::leader) noexcept;

  struct impl;

 private:
  explicit child(std::shared_ptr<impl> p) noexcept;
  void read_lines_impl(boost::asio::any_completion_handler<void(boost::system::error_code, line_batch)> h);
  void write_stdin_impl(boost::asio::const_buffer data,
                        boost::asio::any_completion_handler<void(boost::system::error_code, std::size_t)> h);
  void wait_impl(boost::asio::any_completion_handler<void(boost::system::error_code, exit_status)> h);
  void stop_impl(stop_policy policy, boost::asio::any_completion_handler<void(boost::system::error_code, stop_report)> h);

  std::shared_ptr<impl> impl_;
};

}  // namespace agenthost::process
