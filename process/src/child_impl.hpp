// Internal: child::impl, the Asio glue of a child process tree, shared by its three source files:
//   child.cpp       spawning, the public API, the event sources (stderr, the direct child's exit, the reaper's
//                   control socket) and destruction;
//   child_io.cpp    stdout (plain and read-coalescing), stdin;
//   child_stop.cpp  signals, the tree's members and the three-phase stop.
// Ownership: `child` holds a shared_ptr<impl>; every pending internal operation holds one too, so the impl outlives
// the `child` until the operations were aborted by shutdown(). Every member runs on the child's executor.
#pragma once

#include <agenthost/process/child.hpp>

#include "detail/unique_fd.hpp"
#include "linux/proc_tree.hpp"
#include "posix/read_poller.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace agenthost::process {

namespace detail {

template <class Sig>
using handler_t = boost::asio::any_completion_handler<Sig>;

/// The lines of one read, handed to the consumer as a line_batch. Its storage is kept from read to read (it grows to
/// the most lines one read has delivered).
class line_list {
 public:
  // Field by field, inlined into the framer's loop: a line_view passed whole to an out-of-line vector::push_back went
  // through the stack, and its 16-byte reloads of values just written as two 8-byte stores are store-forwarding stalls
  // (1.5–2 points of a core at a million lines a second in the 100-agent scale benchmark, bench/README.md#scale).
  [[gnu::always_inline]] void push(const line_view& l) {
    if (size_ == lines_.size()) grow();
    line_view& d = lines_[size_++];
    d.text = l.text;
    d.oversize = l.oversize;
    d.total_bytes = l.total_bytes;
  }
  void clear() noexcept { size_ = 0; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] line_batch view() const noexcept { return {lines_.data(), size_}; }

 private:
  [[gnu::noinline]] void grow() { lines_.resize(std::max<std::size_t>(64, lines_.size() * 2)); }

  std::vector<line_view> lines_;
  std::size_t size_ = 0;
};

template <class Sig, class Executor, class... Args>
void post_completion_keep_slot(handler_t<Sig> h, const Executor& fallback, Args... args) {
  // Post to our executor first (never complete inline), then hop to the handler's associated executor.
  boost::asio::post(fallback, [h = std::move(h), fallback, ... args = std::move(args)]() mutable {
    auto ex = boost::asio::get_associated_executor(h, fallback);
    boost::asio::dispatch(ex, [h = std::move(h), ... args = std::move(args)]() mutable {
      std::move(h)(std::move(args)...);
    });
  });
}

// Completes `h` on its associated executor (never inline from the initiating function). The cancellation slot is
// cleared first, except from inside the slot's own handler, where clearing would destroy the running function.
template <class Sig, class Executor, class... Args>
void post_completion(handler_t<Sig> h, const Executor& fallback, Args... args) {
  boost::asio::get_associated_cancellation_slot(h).clear();
  post_completion_keep_slot(std::move(h), fallback, std::move(args)...);
}

}  // namespace detail

struct child::impl : std::enable_shared_from_this<impl> {
  using error_code = boost::system::error_code;
  using clock_type = std::chrono::steady_clock;

  /// now + d, saturated: a caller's "forever" (milliseconds::max()) must not overflow the clock's nanoseconds into a
  /// deadline in the past; a negative d is none.
  static clock_type::time_point deadline_after(std::chrono::milliseconds d) noexcept {
    const auto now = clock_type::now();
    if (d.count() <= 0) return now;
    const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::time_point::max() - now);
    return d >= room ? clock_type::time_point::max() : now + d;
  }

  struct waiter {
    std::uint64_t id = 0;
    detail::handler_t<void(error_code, exit_status)> handler;
  };
  std::uint64_t next_waiter_id = 1;
  struct pending_write {
    std::uint64_t id = 0;  // tells which write a cancellation-slot handler is for
    std::string data;
    detail::handler_t<void(error_code, std::size_t)> handler;
  };

  executor_type ex;
  spawn_options opts;
  containment_kind mode = containment_kind::session;
  int agent_pid = -1;
  int direct_pid = -1;       // the reaper, or the agent in session mode
  detail::unique_fd direct_pidfd;    // pins direct_pid: no PID-reuse race for signals and waits
  bool direct_is_child = true;  // false: a reaper forked by the spawn server (the server reaps it, not us)
  boost::asio::posix::stream_descriptor pidfd_watch;  // a dup of direct_pidfd, for readiness
  boost::asio::posix::stream_descriptor out;
  boost::asio::posix::stream_descriptor err;
  boost::asio::local::stream_protocol::socket in;     // a socket, not a pipe: send() uses MSG_NOSIGNAL, so no SIGPIPE
  boost::asio::posix::stream_descriptor control;      // reaper mode: SOCK_SEQPACKET
  boost::asio::steady_timer stop_timer;
  // The direct child exited but a tracer still holds it (not reapable yet): the watch looks again after this timer,
  // at growing intervals, instead of re-arming on a pidfd that stays readable (a busy loop for as long as the tracer
  // holds on).
  boost::asio::steady_timer reap_retry_timer;
  std::chrono::milliseconds reap_retry_delay{1};

  // stdout
  line_framer framer;
  detail::line_list batch;
  bool out_eof = false;
  bool reading = false;
  // The pending plain read was cancelled. Its async_read_some may have completed already (its completion queued, with
  // bytes but no whole line): the completion must then end the read instead of starting the next async_read_some.
  bool read_cancelled = false;
  // stdout with read coalescing (opts.read_coalescing > 0): the pipe is never given to the reactor — Asio registers a
  // descriptor edge-triggered at assign(), and every agent write would wake us (see posix/read_poller.hpp).
  detail::unique_fd out_fd;
  std::shared_ptr<detail::poll_source> coalesced;
  detail::read_poller* poller = nullptr;
  detail::handler_t<void(error_code, line_batch)> pending_read;
  std::uint64_t read_id = 0;  // tells a stale cancellation-slot handler from the current read's
  bool out_full = false;      // the last read filled the whole chunk: more is probably waiting
  // A batched read is between batched_prepare and batched_complete: the poller owns the framer's prepared span.
  bool batched_in_flight = false;
  std::size_t batched_space = 0;  // the span's size (a read that fills it means more is waiting)
  // Lines a batched read brought after its read was cancelled (by another child's handler of the same tick): the
  // next read_lines delivers them at once.
  bool held_lines = false;
  // The handler of a read whose lines are on their way to it, from complete_read until the function that calls it runs
  // (see deliver_read); empty otherwise. Until then the read is in progress (its lines are views into `batch`, which
  // the next read clears), and stdout_pending() counts them.
  detail::handler_t<void(error_code, line_batch)> delivering;
  std::uint64_t deliveries_called = 0;  // tells deliver_read whether the handler ran (and threw) or was never called
  // stderr
  std::vector<char> err_buf;
  std::string err_tail;
  std::uint64_t err_total = 0;
  // lifecycle
  std::optional<exit_status> leader_status;
  clock_type::time_point leader_exit_time{};
  bool direct_reaped = false;
  bool reaper_said_empty = false;
  // Reaper mode: the reaper died without reporting an empty tree (SIGKILL, OOM killer, crash). Its orphans went to
  // init or the nearest subreaper: from then on the host tracks the tree itself, as in session mode, from the agent
  // (pinned by its start time) and the members seen before.
  bool reaper_lost = false;
  std::uint64_t agent_start_time = 0;  // reaper mode: agent_pid's start time at spawn (0: unknown)
  // The stop's interrupt may not have reached the reaper: sending it failed, or a command was left unread at its exit.
  bool reaper_missed_command = false;
  bool host_had_kill_wait = false;  // this stop's kill phase ran (for a whole kill_wait) with the host sweeping
  bool tree_gone = false;
  bool shut_down = false;
  std::list<waiter> waiters;
  // stdin
  std::deque<pending_write> writes;  // the front one is being written
  std::uint64_t next_write_id = 1;
  bool stdin_open = false;
  // stop
  bool stopping = false;
  stop_policy policy;
  clock_type::time_point stop_start{};
  clock_type::time_point stop_deadline{};  // the end of the stop's current phase
  stop_phase phase = stop_phase::already_gone;
  std::vector<detail::handler_t<void(error_code, stop_report)>> stop_handlers;
  // pid -> start time of every member seen (not the agent) that may still run: the roots of the later sweeps.
  std::unordered_map<int, std::uint64_t> known_members;
  bool scan_complete = true;  // the last scan_members saw every process (see detail::scan_processes)
  std::string tree_token;  // "AGENTHOST_TREE_TOKEN=<random>" in the agent's env: finds members that lost every link

  explicit impl(executor_type e, spawn_options o)
      : ex(std::move(e)),
        opts(std::move(o)),
        pidfd_watch(ex),
        out(ex),
        err(ex),
        in(ex),
        control(ex),
        stop_timer(ex),
        reap_retry_timer(ex),
        framer(opts.max_line_bytes, opts.oversize_head_bytes) {}

  void log(log_level l, const std::string& m) const { opts.log.log(l, m); }

  // ---- event sources --------------------------------------------------------------------------------------------

  void start_background();
  void drain_stderr();
  void append_stderr(std::string_view s);
  std::string stderr_tail() const;
  void watch_direct_child();
  // The watch woke up but the direct child could not be reaped: re-arm it while the child runs (a spurious wake-up),
  // else look again after reap_retry_timer.
  void rewatch_direct_child();
  // The direct child's status once it exited. A reaper forked by the spawn server is not our child: waitid() would
  // report ECHILD at once, so its pidfd's readability says whether it exited (status unknown_status; its "exit" and
  // "empty" messages carry what matters).
  std::optional<exit_status> reap_direct();
  // `from_watch`: called by the pidfd watch, which a spurious wake-up re-arms (not when called from a scan).
  void on_direct_child_exit(bool from_watch = true);
  // Session mode, the leader exited but is not reaped yet: scan (and so record) every member of its session.
  void record_session_before_reap() noexcept;
  // The reaper is gone. Normally it said "exit" and "empty" first — those are still queued on the control socket when
  // its exit wakes us first: read them now. If it died (crash, SIGKILL) we cannot know the tree is gone; the stop's
  // kill phase sweeps from the host side.
  void on_reaper_gone(exit_status status);
  void read_control();
  void on_control_readable();
  // Handles every queued message; false once the socket reached EOF (the reaper closes it only by exiting).
  bool drain_control();
  void handle_control_message(std::string_view msg);
  void set_leader_status(exit_status s);
  void set_tree_gone();

  // ---- stdout -------------------------------------------------------------------------------------------------

  // Takes the stdout pipe (spawn); grows it first (both modes).
  void adopt_stdout(detail::unique_fd fd);
  void read_lines(detail::handler_t<void(error_code, line_batch)> h);
  // Plain reads: the next async_read_some of the read whose handler is in pending_read; continue_read retries it from
  // a post when its operation finds no memory (a read in progress must not lose its handler).
  void read_more();
  void continue_read();
  // Ends or continues the read in pending_read with `n` bytes read, or `ec` (both modes).
  void on_stdout(error_code ec, std::size_t n);
  // pending_read, which is left empty.
  detail::handler_t<void(error_code, line_batch)> take_pending_read() noexcept {
    detail::handler_t<void(error_code, line_batch)> h;
    h.swap(pending_read);
    return h;
  }
  // Completes a read with lines of `batch` (views into this object). The completion holds this object until the
  // handler has run, and a child destroyed before that (by a handler that ran first) gives operation_aborted and no
  // lines, as destroying a child with a read pending does. `post`: never inline (from an initiating function);
  // otherwise inline when the handler's executor is the one running — only from our own completions on the child's
  // executor, where the handler may start the next read at once: that read only arms the poller or posts, so the
  // stack does not grow.
  void complete_read(detail::handler_t<void(error_code, line_batch)> h, bool post);
  // Calls `delivering` with the batch (see complete_read), or schedules that call.
  void deliver_read(bool post);
  bool stdout_pending() noexcept;

  // ---- stdout, coalescing mode --------------------------------------------------------------------------------

  void read_lines_coalesced(detail::handler_t<void(error_code, line_batch)> h);
  // Runs inside the cancellation slot's handler (on the child's executor, like every call into the child).
  void cancel_coalesced(std::uint64_t id);
  void on_coalesced_ready();
  // Arms the poller for the pending read from one of our completions (retried from a post when it finds no memory).
  void rearm();
  // One read() per tick; a short read means the pipe is empty (no second read just to see EAGAIN). A read that fills
  // the chunk without completing a line (a long line) is followed by more: up to 16 now, then after a post.
  // `first`: the outcome of a read the poller already did into the span batched_prepare gave (bytes, 0 or -errno).
  static constexpr long kNotRead = LONG_MIN;
  void read_coalesced(bool from_initiation, long first = kNotRead);
  static void warm_read_state(const void* self) noexcept;
  // `n` bytes were read into a prepared span of `space_size`: frames them into `batch`, notes whether it was full.
  void frame_read(std::size_t n, std::size_t space_size);
  // The poller's batched read (poll_source::prepare_read / complete_read), on this child's executor.
  static std::span<char> batched_prepare(void* self);
  static void batched_complete(void* self, long result);

  // ---- stdin --------------------------------------------------------------------------------------------------

  void write_stdin(boost::asio::const_buffer data, detail::handler_t<void(error_code, std::size_t)> h);
  void write_next();
  // A write's cancellation: the one being written is cancelled on the socket (bytes already sent stay sent); a queued
  // one leaves the queue without touching the write in flight.
  void cancel_write(std::uint64_t id);
  void close_stdin() noexcept;

  // ---- signals and tree ---------------------------------------------------------------------------------------

  // Whether the host itself finds and kills the tree's processes: session mode, or a reaper that died.
  [[nodiscard]] bool host_tracks_tree() const noexcept {
    return mode == containment_kind::session || reaper_lost;
  }
  // The live processes of the tree. Reaper mode: everything below the reaper (complete, the reaper adopts orphans).
  // Session mode (best effort): the agent, its session, every member seen before (they keep being found after they
  // were reparented) and their descendants; the environment-token scan (reads every process's environ, so it is
  // costlier) runs when `thorough` or when the cheap scan finds nothing — it is what catches daemons that left the
  // session and lost their parent links. A lost reaper: the same, from the pinned agent.
  std::vector<detail::proc_entry> scan_members(bool thorough = false);
  // Drops the known members that are gone (given `all`, a scan of every process): an agent signalled at every turn
  // for days would otherwise keep every tool process it ever ran as a root of each sweep.
  void forget_departed_members(const std::vector<detail::proc_entry>& all);
  error_code send_signal(int sig, signal_target target) noexcept;
  error_code send_signal_or_throw(int sig, signal_target target);
  // host_tracks_tree(): SIGKILL everything we can find; true when nothing is left.
  bool session_kill_sweep(bool thorough = false);
  bool session_tree_gone(bool thorough = false);
  // session_tree_gone(true), false when it throws.
  bool tree_known_gone() noexcept;
  // Session mode: reaps the leader if it exited (its status recorded); true once it is reaped.
  bool reap_leader();

  // ---- the three-phase stop -------------------------------------------------------------------------------------

  void stop(stop_policy p, detail::handler_t<void(error_code, stop_report)> h);
  // stop()'s first step: the interrupt and the graceful wait's timer, or the completion when the tree is gone.
  void start_stop(stop_policy p);
  // How long the timer waits before the next tick of the phase that ends at stop_deadline.
  std::chrono::milliseconds stop_tick() const;
  // Starts a phase of `phase_length` (stop_deadline) and waits for its first tick.
  void arm_stop_timer(std::chrono::milliseconds phase_length);
  void wait_stop_timer();
  // The timer's handler: on_stop_tick(), tried again 10 ms later when it throws std::bad_alloc (from a scan or the
  // completion's post), so that running out of memory does not leave a stop without a timer, i.e. never finished.
  void run_stop_tick();
  void on_stop_tick();
  // The reaper is unresponsive or gone: kill what we can find below it ourselves.
  void host_side_kill_sweep();
  // Completes every stop handler with the report (one post; on an exception they are all still in stop_handlers).
  // `unverified`: the last scan missed processes (scan_complete false), so even no survivors is stop_incomplete.
  void finish_stop(std::vector<int> survivors, bool unverified = false);
  // A finished stop's handlers, each with its report, completed in order from `next` by complete_stop_handlers().
  struct finished_stop {
    std::vector<detail::handler_t<void(error_code, stop_report)>> handlers;
    std::vector<stop_report> reports;  // reports[i] for handlers[i]
    error_code ec;
    std::size_t next = 0;
  };
  static void complete_stop_handlers(const std::shared_ptr<finished_stop>& done, const executor_type& fallback);

  // ---- destruction --------------------------------------------------------------------------------------------

  // Bounded synchronous kill of the tree, then close everything (pending operations complete with
  // operation_aborted).
  void shutdown() noexcept;
};

}  // namespace agenthost::process
