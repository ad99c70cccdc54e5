// The Asio glue of a child process tree. Ownership: `child` holds a shared_ptr<impl>; every pending internal
// operation holds one too, so the impl outlives the `child` until the operations were aborted by shutdown().
#include <agenthost/process/child.hpp>

#include "detail/reaper_protocol.hpp"
#include "detail/unique_fd.hpp"
#include "linux/launch.hpp"
#include "linux/pipe_size.hpp"
#include "linux/proc_tree.hpp"
#include "posix/read_poller.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <list>
#include <unordered_map>

namespace agenthost::process {

namespace asio = boost::asio;
using boost::system::error_code;
using clock_type = std::chrono::steady_clock;
using detail::poll_readable;
using detail::try_reap;
using detail::unique_fd;

namespace {

template <class Sig>
using handler_t = asio::any_completion_handler<Sig>;

template <class Sig, class Executor, class... Args>
void post_completion_keep_slot(handler_t<Sig> h, const Executor& fallback, Args... args) {
  // Post to our executor first (never complete inline), then hop to the handler's associated executor.
  asio::post(fallback, [h = std::move(h), fallback, ... args = std::move(args)]() mutable {
    auto ex = asio::get_associated_executor(h, fallback);
    asio::dispatch(ex, [h = std::move(h), ... args = std::move(args)]() mutable { std::move(h)(std::move(args)...); });
  });
}

// Completes `h` on its associated executor (never inline from the initiating function). The cancellation slot is
// cleared first, except from inside the slot's own handler, where clearing would destroy the running function.
template <class Sig, class Executor, class... Args>
void post_completion(handler_t<Sig> h, const Executor& fallback, Args... args) {
  asio::get_associated_cancellation_slot(h).clear();
  post_completion_keep_slot(std::move(h), fallback, std::move(args)...);
}

// Completes `h` now, on its associated executor (inline when that is the one running). Only for code that already
// runs on the child's executor outside any initiating function — one of our own completions — where a post would
// only add a scheduler round trip. The handler may start the next read right away: that read only arms the poller or
// posts, so the stack does not grow.
template <class Sig, class Executor, class... Args>
void dispatch_completion(handler_t<Sig> h, const Executor& fallback, Args... args) {
  asio::get_associated_cancellation_slot(h).clear();
  auto ex = asio::get_associated_executor(h, fallback);
  asio::dispatch(ex, [h = std::move(h), ... args = std::move(args)]() mutable { std::move(h)(std::move(args)...); });
}

}  // namespace

struct child::impl : std::enable_shared_from_this<impl> {
  struct waiter {
    std::uint64_t id = 0;
    handler_t<void(error_code, exit_status)> handler;
  };
  std::uint64_t next_waiter_id = 1;
  struct pending_write {
    std::string data;
    handler_t<void(error_code, std::size_t)> handler;
  };

  executor_type ex;
  spawn_options opts;
  containment_kind mode = containment_kind::session;
  int agent_pid = -1;
  int direct_pid = -1;       // the reaper, or the agent in session mode
  unique_fd direct_pidfd;    // pins direct_pid: no PID-reuse race for signals and waits
  bool direct_is_child = true;  // false: a reaper forked by the spawn server (the server reaps it, not us)
  asio::posix::stream_descriptor pidfd_watch;  // a dup of direct_pidfd, for readiness
  asio::posix::stream_descriptor out;
  asio::posix::stream_descriptor err;
  asio::local::stream_protocol::socket in;     // a socket, not a pipe: send() uses MSG_NOSIGNAL, so no SIGPIPE
  asio::posix::stream_descriptor control;      // reaper mode: SOCK_SEQPACKET
  asio::steady_timer stop_timer;

  // stdout
  line_framer framer;
  std::vector<line_view> batch;
  bool out_eof = false;
  bool reading = false;
  // stdout with read coalescing (opts.read_coalescing > 0): the pipe is never given to the reactor — Asio registers a
  // descriptor edge-triggered at assign(), and every agent write would wake us (see posix/read_poller.hpp).
  unique_fd out_fd;
  std::shared_ptr<detail::poll_source> coalesced;
  detail::read_poller* poller = nullptr;
  handler_t<void(error_code, line_batch)> pending_read;
  std::uint64_t read_id = 0;  // tells a stale cancellation-slot handler from the current read's
  bool out_full = false;      // the last read filled the whole chunk: more is probably waiting
  // stderr
  std::vector<char> err_buf;
  std::string err_tail;
  std::uint64_t err_total = 0;
  // lifecycle
  std::optional<exit_status> leader_status;
  clock_type::time_point leader_exit_time{};
  bool direct_reaped = false;
  bool reaper_said_empty = false;
  bool tree_gone = false;
  bool shut_down = false;
  std::list<waiter> waiters;
  // stdin
  std::deque<pending_write> writes;
  bool stdin_open = false;
  // stop
  bool stopping = false;
  stop_policy policy;
  clock_type::time_point stop_start{};
  stop_phase phase = stop_phase::already_gone;
  std::vector<handler_t<void(error_code, stop_report)>> stop_handlers;
  std::unordered_map<int, std::uint64_t> known_members;  // session mode: pid -> start time of every member seen
  std::string tree_token;                         // session mode: "AGENTHOST_TREE_TOKEN=<random>" in the agent's env

  explicit impl(executor_type e, spawn_options o)
      : ex(std::move(e)),
        opts(std::move(o)),
        pidfd_watch(ex),
        out(ex),
        err(ex),
        in(ex),
        control(ex),
        stop_timer(ex),
        framer(opts.max_line_bytes, opts.oversize_head_bytes) {}

  void log(log_level l, const std::string& m) const { opts.log.log(l, m); }

  // ---- event sources --------------------------------------------------------------------------------------------

  void start_background() {
    drain_stderr();
    if (pidfd_watch.is_open()) watch_direct_child();
    if (mode == containment_kind::reaper) read_control();
  }

  void drain_stderr() {
    err_buf.resize(64 * 1024);
    err.async_read_some(asio::buffer(err_buf), [self = shared_from_this()](error_code ec, std::size_t n) {
      if (n > 0) self->append_stderr(std::string_view(self->err_buf.data(), n));
      if (!ec) self->drain_stderr();
    });
  }

  void append_stderr(std::string_view s) {
    err_total += s.size();
    const std::size_t cap = opts.stderr_tail_bytes;
    if (s.size() >= cap) {
      err_tail.assign(s.substr(s.size() - cap));
      return;
    }
    err_tail.append(s);
    // Trim in batches so a flood of small writes costs amortized O(1) per byte.
    if (err_tail.size() > 2 * cap) err_tail.erase(0, err_tail.size() - cap);
  }

  std::string stderr_tail() const {
    const std::size_t cap = opts.stderr_tail_bytes;
    return err_tail.size() > cap ? err_tail.substr(err_tail.size() - cap) : err_tail;
  }

  void watch_direct_child() {
    pidfd_watch.async_wait(asio::posix::descriptor_base::wait_read, [self = shared_from_this()](error_code ec) {
      if (ec) return;
      self->on_direct_child_exit();
    });
  }

  // The direct child's status once it exited. A reaper forked by the spawn server is not our child: waitid() would
  // report ECHILD at once, so its pidfd's readability says whether it exited (status unknown_status; its "exit" and
  // "empty" messages carry what matters).
  std::optional<exit_status> reap_direct() {
    if (!direct_is_child && !poll_readable(direct_pidfd.get(), std::chrono::milliseconds{0})) return std::nullopt;
    return try_reap(direct_pidfd.get());
  }

  void on_direct_child_exit() {
    if (direct_reaped || shut_down) return;
    auto status = reap_direct();
    if (!status) {  // spurious wakeup
      watch_direct_child();
      return;
    }
    direct_reaped = true;
    if (mode == containment_kind::session) {
      set_leader_status(*status);
      if (stopping) stop_timer.cancel();  // re-check the tree now
    } else {
      on_reaper_gone(*status);
    }
  }

  // The reaper is gone. Normally it said "exit" and "empty" first — those are still queued on the control socket when
  // its exit wakes us first: read them now. If it died (crash, SIGKILL) we cannot know the tree is gone; the stop's
  // kill phase sweeps from the host side.
  void on_reaper_gone(exit_status status) {
    direct_reaped = true;
    drain_control();
    if (!leader_status) set_leader_status(unknown_status{});
    // unknown_status: the host ignores SIGCHLD (or reaps with waitpid(-1)), so the kernel or the host reaped it.
    if (reaper_said_empty && (status.success() || status.is_unknown())) {
      set_tree_gone();
    } else {
      log(log_level::warn, "agenthost-reaper exited unexpectedly: " + status.to_string());
      if (stopping) stop_timer.cancel();  // the stop sweeps from the host side
    }
  }

  void read_control() {
    control.async_wait(asio::posix::descriptor_base::wait_read, [self = shared_from_this()](error_code ec) {
      if (ec) return;
      self->on_control_readable();
    });
  }

  void on_control_readable() {
    if (drain_control()) return read_control();
    // EOF: the reaper exited. Normally its pidfd tells us (on_direct_child_exit); without one (it was reaped by the
    // kernel because the host ignores SIGCHLD) this is the only signal.
    if (!pidfd_watch.is_open()) on_reaper_gone(unknown_status{});
  }

  // Handles every queued message; false once the socket reached EOF (the reaper closes it only by exiting).
  bool drain_control() {
    if (!control.is_open()) return false;
    for (;;) {
      char buf[128];
      const ssize_t n = ::recv(control.native_handle(), buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        handle_control_message(std::string_view(buf, static_cast<std::size_t>(n)));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
      // The reaper exited with our last command ("kill") still unread: the kernel reports ECONNRESET once, and the
      // messages it sent before exiting ("exit", "empty") are still queued behind the error.
      if (n < 0 && errno == ECONNRESET) continue;
      error_code ignored;
      control.close(ignored);
      return false;
    }
  }

  void handle_control_message(std::string_view msg) {
    const auto m = detail::parse_reaper_message(msg);
    if (m.kind == detail::reaper_message_kind::exit) {
      set_leader_status(exit_status::from_wait_status(m.value));
    } else if (m.kind == detail::reaper_message_kind::empty) {
      // The reaper exits right after; the tree counts as gone once it is reaped too (no zombie of ours is left).
      reaper_said_empty = true;
    } else {
      log(log_level::warn, "unexpected message from agenthost-reaper: " + std::string(msg));
    }
  }

  void set_leader_status(exit_status s) {
    if (leader_status) return;
    leader_status = s;
    leader_exit_time = clock_type::now();
    stdin_open = stdin_open && !shut_down;
    auto list = std::move(waiters);
    waiters.clear();
    for (auto& w : list) post_completion(std::move(w.handler), ex, error_code{}, s);
  }

  void set_tree_gone() {
    if (tree_gone) return;
    tree_gone = true;
    if (stopping) stop_timer.cancel();
  }

  // ---- stdout -------------------------------------------------------------------------------------------------

  // Takes the stdout pipe (spawn); grows it first (both modes).
  void adopt_stdout(unique_fd fd) {
    detail::grow_pipe(fd.get(), opts.read_chunk_bytes);
    error_code ec;
    if (opts.read_coalescing.count() <= 0) {
      out.assign(fd.release(), ec);
      out.non_blocking(true, ec);
      return;
    }
    (void)::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
    out_fd = std::move(fd);
    poller = &detail::read_poller::of(ex);
    coalesced = std::make_shared<detail::poll_source>(
        detail::poll_source{.fd = out_fd.get(),
                            .executor = ex,
                            .interval = opts.read_coalescing,
                            .on_ready = [w = weak_from_this()] {
                              if (auto self = w.lock()) self->on_coalesced_ready();
                            }});
  }

  void read_lines(handler_t<void(error_code, line_batch)> h) {
    if (reading) return post_completion(std::move(h), ex, make_error_code(errc::operation_in_progress), line_batch{});
    batch.clear();
    if (out_eof || shut_down)
      return post_completion(std::move(h), ex, error_code(asio::error::eof), line_batch{});
    reading = true;
    if (coalesced) return read_lines_coalesced(std::move(h));
    auto slot = asio::get_associated_cancellation_slot(h);
    if (slot.is_connected()) {
      slot.assign([w = weak_from_this()](asio::cancellation_type) {
        if (auto self = w.lock()) {
          error_code ignored;
          self->out.cancel(ignored);
        }
      });
    }
    read_more(std::move(h));
  }

  void read_more(handler_t<void(error_code, line_batch)> h) {
    auto space = framer.prepare(opts.read_chunk_bytes);
    out.async_read_some(asio::buffer(space.data(), space.size()),
                        [self = shared_from_this(), h = std::move(h)](error_code ec, std::size_t n) mutable {
                          self->on_stdout(ec, n, std::move(h));
                        });
  }

  void on_stdout(error_code ec, std::size_t n, handler_t<void(error_code, line_batch)> h) {
    framer.commit(n, [this](const line_view& l) { batch.push_back(l); });
    if (ec == asio::error::operation_aborted || (ec && shut_down)) {
      reading = false;
      if (!batch.empty()) return post_completion(std::move(h), ex, error_code{}, line_batch(batch));
      return post_completion(std::move(h), ex, error_code(asio::error::operation_aborted), line_batch{});
    }
    if (ec) {  // EOF (or an error, treated as EOF: nothing more can come)
      if (ec != asio::error::eof) log(log_level::warn, "reading the agent's stdout failed: " + ec.message());
      out_eof = true;
      framer.finish([this](const line_view& l) { batch.push_back(l); });
      reading = false;
      if (!batch.empty()) return post_completion(std::move(h), ex, error_code{}, line_batch(batch));
      return post_completion(std::move(h), ex, error_code(asio::error::eof), line_batch{});
    }
    if (batch.empty()) return read_more(std::move(h));
    reading = false;
    post_completion(std::move(h), ex, error_code{}, line_batch(batch));
  }

  // ---- stdout, coalescing mode --------------------------------------------------------------------------------

  void read_lines_coalesced(handler_t<void(error_code, line_batch)> h) {
    const std::uint64_t id = ++read_id;
    auto slot = asio::get_associated_cancellation_slot(h);
    if (slot.is_connected()) {
      slot.assign([w = weak_from_this(), id](asio::cancellation_type) {
        if (auto self = w.lock()) self->cancel_coalesced(id);
      });
    }
    pending_read.swap(h);  // not operator=: Boost 1.81's move assignment wraps the handler in itself (endless recursion)
    // Bulk output is not throttled by the tick: after a read that filled the chunk, read again at once.
    if (out_full) return read_coalesced(true);
    poller->arm(coalesced);
  }

  // Runs inside the cancellation slot's handler (on the child's executor, like every call into the child).
  void cancel_coalesced(std::uint64_t id) {
    if (!reading || id != read_id || !pending_read) return;
    poller->disarm(coalesced.get());
    reading = false;
    // The batch is empty (a read completes as soon as it has a line); a partial line stays in the framer: no data is
    // lost. The slot is kept: clearing it here would destroy the function that is running.
    post_completion_keep_slot(std::move(pending_read), ex, error_code(asio::error::operation_aborted), line_batch{});
  }

  void on_coalesced_ready() {
    if (!reading || !pending_read || shut_down) return;  // cancelled or destroyed since the tick saw the pipe
    read_coalesced(false);
  }

  // One read() per tick; a short read means the pipe is empty (no second read just to see EAGAIN). A read that fills
  // the chunk without completing a line (a long line) is followed by more: up to 16 now, then after a post.
  void read_coalesced(bool from_initiation) {
    for (int reads = 0; reads < 16;) {
      auto space = framer.prepare(opts.read_chunk_bytes);
      const ssize_t n = ::read(out_fd.get(), space.data(), space.size());
      if (n > 0) {
        ++reads;
        framer.commit(static_cast<std::size_t>(n), [this](const line_view& l) { batch.push_back(l); });
        out_full = static_cast<std::size_t>(n) == space.size();
        if (!batch.empty() || !out_full) break;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      out_full = false;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;  // nothing after all: wait for the next tick
      // EOF, or an error: exactly the normal path's handling (on_stdout posts).
      const error_code ec = n == 0 ? error_code(asio::error::eof) : error_code(errno, boost::system::system_category());
      return on_stdout(ec, 0, std::move(pending_read));
    }
    if (batch.empty()) {
      if (!out_full) return poller->arm(coalesced);
      // A very long line: go on after the other handlers had their turn, without waiting for a tick.
      return asio::post(ex, [w = weak_from_this()] {
        if (auto self = w.lock()) self->on_coalesced_ready();
      });
    }
    reading = false;
    if (from_initiation) return post_completion(std::move(pending_read), ex, error_code{}, line_batch(batch));
    dispatch_completion(std::move(pending_read), ex, error_code{}, line_batch(batch));
  }

  // ---- stdin --------------------------------------------------------------------------------------------------

  void write_stdin(asio::const_buffer data, handler_t<void(error_code, std::size_t)> h) {
    if (opts.stdin_mode != stdin_kind::pipe)
      return post_completion(std::move(h), ex, make_error_code(errc::stdin_not_piped), std::size_t{0});
    if (!stdin_open) return post_completion(std::move(h), ex, make_error_code(errc::stdin_closed), std::size_t{0});
    auto slot = asio::get_associated_cancellation_slot(h);
    if (slot.is_connected()) {
      slot.assign([w = weak_from_this()](asio::cancellation_type) {
        if (auto self = w.lock()) {
          error_code ignored;
          self->in.cancel(ignored);
        }
      });
    }
    writes.push_back({std::string(static_cast<const char*>(data.data()), data.size()), std::move(h)});
    if (writes.size() == 1) write_next();
  }

  void write_next() {
    if (writes.empty()) return;
    asio::async_write(in, asio::buffer(writes.front().data), [self = shared_from_this()](error_code ec, std::size_t n) {
      auto w = std::move(self->writes.front());
      self->writes.pop_front();
      if (ec == asio::error::broken_pipe || ec == asio::error::connection_reset || ec == asio::error::bad_descriptor ||
          (ec && !self->stdin_open)) {
        ec = make_error_code(errc::stdin_closed);
      }
      post_completion(std::move(w.handler), self->ex, ec, n);
      if (ec == errc::stdin_closed) {
        // Everything queued behind fails the same way.
        auto rest = std::move(self->writes);
        self->writes.clear();
        for (auto& r : rest) post_completion(std::move(r.handler), self->ex, ec, std::size_t{0});
        return;
      }
      self->write_next();
    });
  }

  void close_stdin() noexcept {
    if (!stdin_open) return;
    stdin_open = false;
    error_code ignored;
    in.shutdown(asio::socket_base::shutdown_send, ignored);
    in.close(ignored);  // pending writes complete with operation_aborted → stdin_closed
  }

  // ---- signals and tree ---------------------------------------------------------------------------------------

  // The live processes of the tree. Reaper mode: everything below the reaper (complete, the reaper adopts orphans).
  // Session mode (best effort): the agent, its session, every member seen before (they keep being found after they
  // were reparented) and their descendants; the environment-token scan (reads every process's environ, so it is
  // costlier) runs when `thorough` or when the cheap scan finds nothing — it is what catches daemons that left the
  // session and lost their parent links.
  std::vector<detail::proc_entry> scan_members(bool thorough = false) {
    const auto all = detail::scan_processes();
    if (mode == containment_kind::reaper) return detail::tree_members(all, direct_pid, false, 0);
    std::vector<detail::proc_entry> roots;
    roots.reserve(known_members.size() + 1);
    for (const auto& [pid, start] : known_members) roots.push_back({.pid = pid, .start_time = start});
    if (!direct_reaped) roots.push_back({.pid = agent_pid});
    auto now = detail::collect_tree(all, roots, agent_pid, ::getpid());
    if (thorough || now.empty()) {
      const auto tagged = detail::processes_with_env(all, tree_token);
      if (!tagged.empty()) {
        roots.insert(roots.end(), tagged.begin(), tagged.end());
        now = detail::collect_tree(all, roots, agent_pid, ::getpid());
      }
    }
    for (const auto& m : now)
      if (m.pid != agent_pid) known_members.emplace(m.pid, m.start_time);
    return now;
  }

  error_code send_signal(int sig, signal_target target) noexcept {
    if (tree_gone || (mode == containment_kind::session && direct_reaped && target == signal_target::leader))
      return make_error_code(errc::not_running);
    if (mode == containment_kind::reaper) {
      if (!control.is_open()) return make_error_code(errc::not_running);
      const char* what = target == signal_target::leader ? "leader" : target == signal_target::group ? "group" : "tree";
      const std::string msg = std::string("signal ") + what + " " + std::to_string(sig);
      if (::send(control.native_handle(), msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
        return {errno, boost::system::system_category()};
      return {};
    }
    switch (target) {
      case signal_target::leader:
        if (detail::pidfd_send_signal(direct_pidfd.get(), sig) != 0) return {errno, boost::system::system_category()};
        return {};
      case signal_target::group:
        // The agent leads its own session and group; the group id is not recycled while the group has members.
        if (::kill(-agent_pid, sig) != 0 && errno != ESRCH) return {errno, boost::system::system_category()};
        if (!direct_reaped) detail::pidfd_send_signal(direct_pidfd.get(), 0);
        return {};
      case signal_target::tree:
        if (!direct_reaped) detail::pidfd_send_signal(direct_pidfd.get(), sig);
        for (const auto& m : scan_members(true))
          if (m.pid != agent_pid) detail::signal_process(m, sig);
        return {};
    }
    return {};
  }

  // Session mode: SIGKILL everything we can find; true when nothing is left.
  bool session_kill_sweep(bool thorough = false) {
    if (!direct_reaped) detail::pidfd_send_signal(direct_pidfd.get(), SIGKILL);
    auto members = scan_members(thorough);
    for (const auto& m : members)
      if (m.pid != agent_pid) detail::signal_process(m, SIGKILL);
    return members.empty() && direct_reaped;
  }

  bool session_tree_gone(bool thorough = false) {
    if (!direct_reaped) {
      if (auto st = try_reap(direct_pidfd.get())) {
        direct_reaped = true;
        set_leader_status(*st);
      }
    }
    // Scan even while the leader lives: members found now stay known after they are reparented.
    const bool members_left = !scan_members(thorough).empty();
    return direct_reaped && !members_left;
  }

  // ---- the three-phase stop -------------------------------------------------------------------------------------

  void stop(stop_policy p, handler_t<void(error_code, stop_report)> h) {
    stop_handlers.push_back(std::move(h));
    if (stopping) return;  // joins the running stop
    stopping = true;
    policy = std::move(p);
    stop_start = clock_type::now();
    if (tree_gone || (mode == containment_kind::session && session_tree_gone(true))) {
      tree_gone = true;
      phase = stop_phase::already_gone;
      return finish_stop({});
    }
    phase = stop_phase::interrupt;
    if (!policy.interrupt_bytes.empty() && stdin_open && opts.stdin_mode == stdin_kind::pipe) {
      // Best effort and never blocking: a full or closed stdin must not delay the stop.
      (void)::send(in.native_handle(), policy.interrupt_bytes.data(), policy.interrupt_bytes.size(),
                   MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (policy.close_stdin) close_stdin();
    if (policy.interrupt_signal != 0) (void)send_signal(policy.interrupt_signal, policy.interrupt_target);
    arm_stop_timer(policy.graceful_wait);
  }

  std::chrono::milliseconds stop_tick(clock_type::time_point deadline) const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    if (mode == containment_kind::reaper) return std::max(left, std::chrono::milliseconds{0});
    // Session mode has no "tree empty" event: poll /proc.
    return std::clamp(left, std::chrono::milliseconds{0}, std::chrono::milliseconds{10});
  }

  void arm_stop_timer(std::chrono::milliseconds phase_length) {
    const auto deadline = clock_type::now() + phase_length;
    wait_stop_timer(deadline);
  }

  void wait_stop_timer(clock_type::time_point deadline) {
    stop_timer.expires_after(stop_tick(deadline));
    stop_timer.async_wait([self = shared_from_this(), deadline](error_code) { self->on_stop_tick(deadline); });
  }

  void on_stop_tick(clock_type::time_point deadline) {
    if (mode == containment_kind::session && !tree_gone && session_tree_gone()) tree_gone = true;
    if (tree_gone) return finish_stop({});
    if (mode == containment_kind::session && phase == stop_phase::kill) session_kill_sweep();
    if (clock_type::now() < deadline) return wait_stop_timer(deadline);
    if (phase == stop_phase::interrupt) {
      phase = stop_phase::kill;
      if (mode == containment_kind::reaper) {
        if (control.is_open()) {
          (void)::send(control.native_handle(), "kill", 4, MSG_NOSIGNAL | MSG_DONTWAIT);
        } else {
          host_side_kill_sweep();
        }
      } else {
        session_kill_sweep(true);
      }
      return arm_stop_timer(policy.kill_wait);
    }
    // Kill phase timed out: sweep once more ourselves and report what is left.
    host_side_kill_sweep();
    auto survivors = scan_members(true);
    std::vector<int> pids;
    for (const auto& s : survivors) pids.push_back(s.pid);
    if (!direct_reaped && mode == containment_kind::session) pids.push_back(agent_pid);
    if (pids.empty() && (mode == containment_kind::session || direct_reaped)) {
      tree_gone = true;
      return finish_stop({});
    }
    finish_stop(std::move(pids));
  }

  // The reaper is unresponsive or gone: kill what we can find below it ourselves.
  void host_side_kill_sweep() {
    if (mode == containment_kind::session) {
      session_kill_sweep();
      return;
    }
    for (const auto& m : scan_members()) detail::signal_process(m, SIGKILL);
  }

  void finish_stop(std::vector<int> survivors) {
    stop_timer.cancel();
    stop_report r;
    r.phase = phase;
    r.elapsed = clock_type::now() - stop_start;
    if (leader_status && leader_exit_time > stop_start) r.leader_exit_after = leader_exit_time - stop_start;
    r.leader_status = leader_status;
    r.survivors = std::move(survivors);
    const error_code ec = r.survivors.empty() ? error_code{} : make_error_code(errc::stop_incomplete);
    if (!r.survivors.empty())
      log(log_level::error, "stop incomplete: " + std::to_string(r.survivors.size()) + " process(es) survived");
    auto handlers = std::move(stop_handlers);
    stop_handlers.clear();
    for (auto& h : handlers) post_completion(std::move(h), ex, ec, r);
    // A later stop reports "already gone" (or tries again if something survived).
    stopping = false;
  }

  // ---- destruction --------------------------------------------------------------------------------------------

  // Bounded synchronous kill of the tree, then close everything (pending operations complete with
  // operation_aborted).
  void shutdown() noexcept {
    if (shut_down) return;
    shut_down = true;
    const auto deadline = clock_type::now() + opts.destroy_timeout;
    auto left = [&] {
      return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()),
                      std::chrono::milliseconds{0});
    };
    try {
      if (mode == containment_kind::reaper) {
        if (!direct_reaped) {
          if (control.is_open()) (void)::send(control.native_handle(), "kill", 4, MSG_NOSIGNAL | MSG_DONTWAIT);
          if (!poll_readable(direct_pidfd.get(), left())) {
            host_side_kill_sweep();
            detail::pidfd_send_signal(direct_pidfd.get(), SIGKILL);
            poll_readable(direct_pidfd.get(), std::chrono::milliseconds{500});
          }
          if (reap_direct()) direct_reaped = true;
        }
      } else if (!tree_gone) {
        while (!session_kill_sweep() && left().count() > 0) {
          poll_readable(direct_pidfd.get(), std::chrono::milliseconds{5});
          if (!direct_reaped) {
            if (auto st = try_reap(direct_pidfd.get())) {
              direct_reaped = true;
              set_leader_status(*st);
            }
          }
        }
      }
    } catch (...) {
      // scan_members allocates; nothing here may escape a destructor.
    }
    tree_gone = tree_gone || direct_reaped;
    if (direct_reaped) direct_pidfd.reset();  // pending handlers may keep the impl alive a little longer: not the fd
    error_code ignored;
    stop_timer.cancel();
    if (coalesced) {
      poller->disarm(coalesced.get());  // before the close: the poller must not poll a closed (or reused) fd
      out_fd.reset();
      if (reading && pending_read) on_stdout(error_code(asio::error::operation_aborted), 0, std::move(pending_read));
    }
    out.close(ignored);
    err.close(ignored);
    in.close(ignored);
    control.close(ignored);
    pidfd_watch.close(ignored);
    stdin_open = false;
    for (auto& w : waiters) post_completion(std::move(w.handler), ex, error_code(asio::error::operation_aborted),
                                            leader_status.value_or(exit_status{}));
    waiters.clear();
  }
};

// ---- spawning ----------------------------------------------------------------------------------------------------

boost::system::result<child, spawn_error> child::spawn(executor_type executor, spawn_options options) {
  auto tree = detail::launch_tree(options);
  if (!tree) return tree.error();
  auto im = std::make_shared<impl>(std::move(executor), std::move(options));
  im->mode = tree->mode;
  im->agent_pid = tree->agent_pid;
  im->tree_token = std::move(tree->tree_token);
  im->direct_pid = tree->direct_pid;
  im->direct_is_child = tree->direct_is_child;
  error_code ec;
  if (tree->direct_pidfd) im->pidfd_watch.assign(::fcntl(tree->direct_pidfd.get(), F_DUPFD_CLOEXEC, 0), ec);
  im->direct_pidfd = std::move(tree->direct_pidfd);
  im->direct_reaped = tree->auto_reaped;
  im->adopt_stdout(std::move(tree->stdout_read));
  im->err.assign(tree->stderr_read.release(), ec);
  if (tree->stdin_write) {
    im->in.assign(asio::local::stream_protocol(), tree->stdin_write.release(), ec);
    im->stdin_open = true;
  }
  if (tree->control) im->control.assign(tree->control.release(), ec);
  im->err.non_blocking(true, ec);
  im->log(log_level::debug, "spawned " + im->opts.executable.string() + " as pid " + std::to_string(im->agent_pid) +
                                (im->mode == containment_kind::reaper
                                     ? (im->direct_is_child ? " under agenthost-reaper"
                                                            : " under agenthost-reaper (spawn server)")
                                     : " (session mode)"));
  // Internal operations start on the child's executor: spawn() may run on any thread (e.g. outside the strand that
  // serializes the child), and nothing of the child may then run concurrently with the caller.
  asio::post(im->ex, [im, auto_reaped = tree->auto_reaped] {
    if (im->shut_down) return;
    im->start_background();
    if (auto_reaped && im->mode == containment_kind::session) im->set_leader_status(unknown_status{});
  });
  return child{std::move(im)};
}

// ---- child ---------------------------------------------------------------------------------------------------------

child::child(std::shared_ptr<impl> p) noexcept : impl_(std::move(p)) {}
child::child(child&&) noexcept = default;
child& child::operator=(child&& o) noexcept {
  if (this != &o) {
    if (impl_) impl_->shutdown();
    impl_ = std::move(o.impl_);
  }
  return *this;
}
child::~child() {
  if (impl_) impl_->shutdown();
}

child::executor_type child::get_executor() const noexcept { return impl_->ex; }
int child::pid() const noexcept { return impl_->agent_pid; }
containment_kind child::containment() const noexcept { return impl_->mode; }
std::string child::stderr_tail() const { return impl_->stderr_tail(); }
std::uint64_t child::stderr_bytes() const noexcept { return impl_->err_total; }
bool child::running() const noexcept { return !impl_->leader_status.has_value(); }
void child::close_stdin() noexcept { impl_->close_stdin(); }
boost::system::error_code child::send_signal(int signal, signal_target target) noexcept {
  return impl_->send_signal(signal, target);
}

void child::read_lines_impl(asio::any_completion_handler<void(error_code, line_batch)> h) {
  impl_->read_lines(std::move(h));
}
void child::write_stdin_impl(asio::const_buffer data, asio::any_completion_handler<void(error_code, std::size_t)> h) {
  impl_->write_stdin(data, std::move(h));
}
void child::wait_impl(asio::any_completion_handler<void(error_code, exit_status)> h) {
  if (impl_->leader_status) return post_completion(std::move(h), impl_->ex, error_code{}, *impl_->leader_status);
  const std::uint64_t id = impl_->next_waiter_id++;
  auto slot = asio::get_associated_cancellation_slot(h);
  impl_->waiters.push_back(impl::waiter{id, std::move(h)});
  if (slot.is_connected()) {
    slot.assign([w = impl_->weak_from_this(), id](asio::cancellation_type) {
      auto self = w.lock();
      if (!self) return;
      auto it = std::find_if(self->waiters.begin(), self->waiters.end(), [id](const auto& x) { return x.id == id; });
      if (it == self->waiters.end()) return;
      auto h2 = std::move(it->handler);
      self->waiters.erase(it);
      post_completion_keep_slot(std::move(h2), self->ex, error_code(asio::error::operation_aborted), exit_status{});
    });
  }
}
void child::stop_impl(stop_policy policy, asio::any_completion_handler<void(error_code, stop_report)> h) {
  // Cleanup cannot be cancelled: detach the caller's cancellation slot from the stop.
  asio::get_associated_cancellation_slot(h).clear();
  impl_->stop(std::move(policy), std::move(h));
}

}  // namespace agenthost::process
