// child: spawning, the public API, the event sources and destruction (see child_impl.hpp).
#include "child_impl.hpp"

#include "detail/reaper_protocol.hpp"
#include "linux/late_reaper.hpp"
#include "linux/launch.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

namespace agenthost::process {

namespace asio = boost::asio;
using boost::system::error_code;
using clock_type = std::chrono::steady_clock;
using detail::poll_readable;
using detail::post_completion;
using detail::post_completion_keep_slot;
using detail::try_reap;

void child::impl::start_background() {
  drain_stderr();
  if (pidfd_watch.is_open()) watch_direct_child();
  if (mode == containment_kind::reaper) read_control();
}

void child::impl::drain_stderr() {
  err_buf.resize(64 * 1024);
  err.async_read_some(asio::buffer(err_buf), [self = shared_from_this()](error_code ec, std::size_t n) {
    if (n > 0) self->append_stderr(std::string_view(self->err_buf.data(), n));
    if (!ec) self->drain_stderr();
  });
}

void child::impl::append_stderr(std::string_view s) {
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

std::string child::impl::stderr_tail() const {
  const std::size_t cap = opts.stderr_tail_bytes;
  return err_tail.size() > cap ? err_tail.substr(err_tail.size() - cap) : err_tail;
}

void child::impl::watch_direct_child() {
  pidfd_watch.async_wait(asio::posix::descriptor_base::wait_read, [self = shared_from_this()](error_code ec) {
    if (ec) return;
    self->on_direct_child_exit();
  });
}

void child::impl::rewatch_direct_child() {
  if (!poll_readable(direct_pidfd.get(), std::chrono::milliseconds{0})) {
    watch_direct_child();
    return;
  }
  reap_retry_timer.expires_after(reap_retry_delay);
  reap_retry_delay = std::min(reap_retry_delay * 2, std::chrono::milliseconds{100});
  reap_retry_timer.async_wait([self = shared_from_this()](error_code ec) {
    if (ec) return;
    self->on_direct_child_exit();
  });
}

std::optional<exit_status> child::impl::reap_direct() {
  if (!direct_is_child && !poll_readable(direct_pidfd.get(), std::chrono::milliseconds{0})) return std::nullopt;
  return try_reap(direct_pidfd.get());
}

void child::impl::record_session_before_reap() noexcept {
  try {
    // The session only (no environment-token scan: this runs at every exit, stop or not).
    const auto all = detail::scan_processes();
    for (const auto& m : detail::collect_tree(all, {{.pid = agent_pid}}, agent_pid, ::getpid()))
      if (m.pid != agent_pid) known_members.insert_or_assign(m.pid, m.start_time);
  } catch (...) {  // std::bad_alloc: the members stay unrecorded, the sweeps then rely on the token
  }
}

void child::impl::on_direct_child_exit(bool from_watch) {
  if (direct_reaped || shut_down) return;
  // Until the leader is reaped its pid reserves the session's id: record the session's members while it is safe to
  // look them up by it (later sweeps find them by pid and start time, and through them the session).
  if (mode == containment_kind::session) record_session_before_reap();
  auto status = reap_direct();
  if (!status) {  // a spurious wake-up, or a tracer holds the dead child
    if (from_watch) rewatch_direct_child();
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

void child::impl::on_reaper_gone(exit_status status) {
  direct_reaped = true;
  // Lost until its "empty" says otherwise: set before anything that may throw, so that no path leaves the tree
  // untracked.
  reaper_lost = true;
  drain_control();
  if (!leader_status) set_leader_status(unknown_status{});
  // unknown_status: the host ignores SIGCHLD (or reaps with waitpid(-1)), so the kernel or the host reaped it.
  if (reaper_said_empty && (status.success() || status.is_unknown())) {
    reaper_lost = false;
    set_tree_gone();
  } else {
    log(log_level::warn, "agenthost-reaper exited unexpectedly: " + status.to_string() +
                             "; the host tracks the agent's tree itself from now on");
    if (stopping) {
      // The stop's interrupt never reached a reaper that died before reading it: send it from here. (Not when it
      // may have: a second SIGINT is "quit now" to many agents.)
      if (phase == stop_phase::interrupt && policy.interrupt_signal != 0 && reaper_missed_command)
        (void)send_signal(policy.interrupt_signal, policy.interrupt_target);
      stop_timer.cancel();  // the stop sweeps from the host side
    }
  }
}

void child::impl::read_control() {
  control.async_wait(asio::posix::descriptor_base::wait_read, [self = shared_from_this()](error_code ec) {
    if (ec) return;
    self->on_control_readable();
  });
}

void child::impl::on_control_readable() {
  if (shut_down) return;  // a completion queued before the destruction: the destructor did the rest
  if (drain_control()) return read_control();
  // EOF: the reaper exited. Normally its pidfd tells us (on_direct_child_exit); without one (it was reaped by the
  // kernel because the host ignores SIGCHLD) this is the only signal.
  // (Not twice: once handled, the tree is gone or the reaper lost. direct_reaped alone says nothing: a reaper the
  // kernel reaped before spawn() could open its pidfd counts as reaped from the start, and this EOF is its only news.)
  if (!pidfd_watch.is_open() && !tree_gone && !reaper_lost) on_reaper_gone(unknown_status{});
}

bool child::impl::drain_control() {
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
    if (n < 0 && errno == ECONNRESET) {
      reaper_missed_command = true;
      continue;
    }
    error_code ignored;
    control.close(ignored);
    return false;
  }
}

void child::impl::handle_control_message(std::string_view msg) {
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

void child::impl::set_leader_status(exit_status s) {
  if (leader_status) return;
  leader_status = s;
  leader_exit_time = clock_type::now();
  stdin_open = stdin_open && !shut_down;
  auto list = std::move(waiters);
  waiters.clear();
  for (auto& w : list) post_completion(std::move(w.handler), ex, error_code{}, s);
}

void child::impl::set_tree_gone() {
  if (tree_gone) return;
  tree_gone = true;
  if (stopping) stop_timer.cancel();
}

void child::impl::shutdown() noexcept {
  if (shut_down) return;
  shut_down = true;
  const auto deadline = deadline_after(opts.destroy_timeout);
  auto left = [&] {
    return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()),
                    std::chrono::milliseconds{0});
  };
  // Pending waits end with operation_aborted, even when the reaper's last messages (read below) bring the status.
  auto aborted_waiters = std::move(waiters);
  waiters.clear();
  try {
    if (mode == containment_kind::reaper) {
      if (!direct_reaped) {
        if (control.is_open()) (void)::send(control.native_handle(), "kill", 4, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (!poll_readable(direct_pidfd.get(), left())) {
          host_side_kill_sweep();
          detail::pidfd_send_signal(direct_pidfd.get(), SIGKILL);
        }
        // Dead is not yet reapable while a tracer holds it (see late_reaper.hpp): that is waited for too.
        detail::wait_reapable(direct_pidfd.get(), std::chrono::milliseconds{500});
        if (reap_direct()) {
          direct_reaped = true;
          // Its "empty" says the tree went with it. Without one it died (maybe before our "kill", unnoticed yet).
          drain_control();
          if (!reaper_said_empty) reaper_lost = true;
        }
      }
      // A reaper that died without its "empty" (before, or just now by our SIGKILL) left its tree to us.
      while (reaper_lost && !tree_gone && !session_kill_sweep() && left().count() > 0) ::poll(nullptr, 0, 5);
    } else if (!tree_gone) {
      while (!session_kill_sweep() && left().count() > 0) {
        poll_readable(direct_pidfd.get(), std::chrono::milliseconds{5});
        reap_leader();
      }
      // Out of time with the leader SIGKILLed but not reaped (a destroy_timeout of a few ms, or none): it dies at
      // once, and only we can reap it — not waiting for it now would leave a zombie for the host's lifetime.
      if (!direct_reaped && detail::wait_reapable(direct_pidfd.get(), std::chrono::milliseconds{500})) reap_leader();
    }
  } catch (...) {
    // scan_members allocates; nothing here may escape a destructor.
  }
  tree_gone = tree_gone || direct_reaped;
  if (direct_reaped) {
    direct_pidfd.reset();  // pending handlers may keep the impl alive a little longer: not the fd
  } else if (direct_is_child) {
    // Killed but still running after the bound (stuck in the kernel), or dead and held by a tracer: reaped when it
    // can be, by the late reaper, instead of staying a zombie for the host's lifetime.
    detail::reap_later(std::move(direct_pidfd));
  }
  error_code ignored;
  stop_timer.cancel();
  reap_retry_timer.cancel();
  if (coalesced) {
    poller->disarm(coalesced.get());  // before the close: the poller must not poll a closed (or reused) fd
    out_fd.reset();
    if (reading && pending_read) on_stdout(error_code(asio::error::operation_aborted), 0);
  }
  out.close(ignored);
  err.close(ignored);
  in.close(ignored);
  control.close(ignored);
  pidfd_watch.close(ignored);
  stdin_open = false;
  for (auto& w : aborted_waiters)
    post_completion(std::move(w.handler), ex, error_code(asio::error::operation_aborted),
                    leader_status.value_or(exit_status{}));
}

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
  if (im->mode == containment_kind::reaper) {
    detail::proc_entry agent;
    if (detail::read_proc_entry(im->agent_pid, agent)) im->agent_start_time = agent.start_time;
  }
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
bool child::stdout_pending() const noexcept { return impl_ && impl_->stdout_pending(); }
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
