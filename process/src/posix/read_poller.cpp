#include "read_poller.hpp"

#include <boost/asio/execution/context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/strand.hpp>

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <new>

namespace agenthost::process::detail {

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

read_poller::read_poller(asio::execution_context& ctx) : asio::execution_context::service(ctx) {}

read_poller::~read_poller() = default;

read_poller& read_poller::of(const asio::any_io_executor& ex) {
  return asio::use_service<read_poller>(asio::query(ex, asio::execution::context));
}

void read_poller::shutdown() {
  // The context is going away: its handlers are destroyed without running. Drop the sources (they only hold weak
  // references to their children) so nothing is kept alive past the context.
  std::lock_guard lock(mutex_);
  shut_down_ = true;
  for (const auto& a : armed_) a->armed = false;
  armed_.clear();
}

void read_poller::arm(const std::shared_ptr<poll_source>& s) {
  std::lock_guard lock(mutex_);
  if (shut_down_) return;
  const bool added = !s->armed;
  if (added) {
    armed_.push_back(s);
    s->armed = true;
  }
  try {
    if (!ticking_) {
      start_timer_locked(clock_type::now() + s->interval);
      ticking_ = true;
      tick_interval_ = s->interval;
    } else if (s->interval < tick_interval_ && clock_type::now() + s->interval < deadline_) {
      // A child with a shorter interval than the running tick: bring the tick forward. (With an interval no shorter,
      // the running tick is due within it already: no clock read on this path, which every read of every child takes.)
      start_timer_locked(clock_type::now() + s->interval);
      tick_interval_ = s->interval;
    }
  } catch (...) {
    // No memory for the timer's wait (std::bad_alloc): no tick is pending now (bringing it forward cancelled the one
    // that was), so the next arm starts one; this source is not left armed for it, and the caller's read fails.
    ticking_ = false;
    if (added) {
      armed_.pop_back();
      s->armed = false;
    }
    throw;
  }
}

void read_poller::restart_ticks() {
  std::lock_guard lock(mutex_);
  if (ticking_ || shut_down_ || armed_.empty()) return;
  start_timer_locked(clock_type::now() + tick_interval_);
  ticking_ = true;
}

void read_poller::disarm(const poll_source* s) {
  std::lock_guard lock(mutex_);
  std::erase_if(armed_, [s](const auto& a) {
    if (a.get() != s) return false;
    a->armed = false;
    return true;
  });
  // The tick stops by itself when it finds nothing armed.
}

void read_poller::start_timer_locked(clock_type::time_point when) {
  if (!timer_) {
    // The tick runs on the context's own executor (not on the first child's strand, when children have strands); the
    // children are served on their own executors anyway.
    const auto& ex = armed_.back()->executor;
    if (const auto* s = ex.target<asio::strand<asio::io_context::executor_type>>()) {
      timer_.emplace(s->get_inner_executor());
    } else {
      timer_.emplace(ex);
    }
  }
  deadline_ = when;
  timer_->expires_at(when);
  timer_->async_wait([this](boost::system::error_code ec) {
    if (ec == asio::error::operation_aborted) return;  // re-armed earlier, or shut down
    on_tick();
  });
}

void read_poller::on_tick() {
  std::vector<std::shared_ptr<poll_source>> ready;
  bool rescheduled = true;
  {
    std::lock_guard lock(mutex_);
    if (shut_down_) return;
    if (armed_.empty()) {
      ticking_ = false;
      return;
    }
    // poll() under the mutex: disarm() (which a child calls before closing its fd) then cannot race with it. The
    // timeout is 0, so the mutex is held for one system call. Both vectors are allocated before the armed set changes:
    // a tick that finds no memory leaves it as it was, for the next tick.
    std::vector<pollfd> fds;
    int n = 0;
    try {
      fds.resize(armed_.size());
      ready.reserve(armed_.size());
      for (std::size_t i = 0; i < armed_.size(); ++i) fds[i] = {armed_[i]->fd, POLLIN, 0};
      do n = ::poll(fds.data(), fds.size(), 0);
      while (n < 0 && errno == EINTR);
    } catch (const std::bad_alloc&) {
      n = 0;
    }
    if (n > 0) {
      // Ready sources leave the armed set: one arm, one on_ready. Hang-ups and errors count as ready (the read
      // reports them, as in the normal path).
      std::size_t keep = 0;
      for (std::size_t i = 0; i < armed_.size(); ++i) {
        if (fds[i].revents != 0) {
          armed_[i]->armed = false;
          ready.push_back(std::move(armed_[i]));
        } else {
          armed_[keep++] = std::move(armed_[i]);
        }
      }
      armed_.resize(keep);
    }
    // Fixed rate while anything stays armed; a source armed again by on_ready below joins this schedule.
    std::chrono::nanoseconds interval = armed_.empty() ? ready.front()->interval : armed_.front()->interval;
    for (const auto& a : armed_) interval = std::min(interval, a->interval);
    for (const auto& r : ready) interval = std::min(interval, r->interval);
    const auto now = clock_type::now();
    tick_interval_ = interval;
    try {
      start_timer_locked(std::max(deadline_ + interval, now));
    } catch (const std::bad_alloc&) {
      ticking_ = false;  // tried again once the ready ones are served (they may start it again by arming)
      rescheduled = false;
    }
  }
  // Outside the mutex: on_ready arms again (and may complete a user handler that spawns, destroys or reads).
  // The children this thread runs (the one-thread io_context case) are read here, all in one batch: every
  // prepare_read before the batch, no user code in between, so every pipe is still open and every buffer alive
  // when it is read. The others are dispatched to their executors and read there, as before.
  std::size_t others = 0;
  for (auto& r : ready) {
    if (r->prepare_read != nullptr && runs_in_this_thread(r->executor)) {
      std::shared_ptr<void> owner = r->owner.lock();
      if (!owner) continue;  // destroyed since it armed: nothing waits
      const std::span<char> space = r->prepare_read(owner.get());
      if (space.empty()) continue;  // cancelled since it armed
      batch_.add(r->fd, space);
      batched_.push_back({std::move(r), std::move(owner)});
    } else {
      ready[others++] = std::move(r);
    }
  }
  ready.resize(others);
  if (!batched_.empty()) {
    // Cleared however this ends (a user handler may throw out of run()): no owner is kept to a later tick.
    struct clear_on_exit {
      std::vector<batched>& v;
      ~clear_on_exit() { v.clear(); }
    } guard{batched_};
    batch_.run();
    const std::span<const long> results = batch_.results();
    std::size_t i = 0;
    try {
      for (; i < batched_.size(); ++i) {
        if (i + 1 < batched_.size() && batched_[i + 1].source->warm != nullptr)
          batched_[i + 1].source->warm(batched_[i + 1].source->warm_arg);
        batched_[i].source->complete_read(batched_[i].owner.get(), results[i]);
      }
    } catch (...) {
      // A user handler threw out of a completion; it leaves run() as from any handler. The children after it had their
      // bytes read already: their completions are queued on their executors, to run when run() is called again, as
      // any handler left in the queue would. (Dropped, their reads would never complete and those bytes be lost.)
      for (std::size_t j = i + 1; j < batched_.size(); ++j)
        boost::asio::post(batched_[j].source->executor, [s = batched_[j].source, o = batched_[j].owner, n = results[j]] {
          s->complete_read(o.get(), n);
        });
      post_on_ready(ready, 0);
      throw;
    }
    // The owners are released by the guard only now: a completion may have destroyed their children.
  }
  for (std::size_t i = 0; i < ready.size(); ++i) {
    if (i + 1 < ready.size() && ready[i + 1]->warm != nullptr) ready[i + 1]->warm(ready[i + 1]->warm_arg);
    auto& r = ready[i];
    try {
      run_here_or_dispatch(r->executor, [r] { r->on_ready(); });
    } catch (...) {
      post_on_ready(ready, i + 1);  // as above: the rest are not left armed-off and never read
      throw;
    }
  }
  // The next tick could not be scheduled above (no memory) and no on_ready armed since: the sources still armed wait
  // for one. Should this find no memory either, the exception leaves run(), and the next arm() starts the ticks.
  if (!rescheduled) restart_ticks();
}

void read_poller::post_on_ready(const std::vector<std::shared_ptr<poll_source>>& ready, std::size_t from) {
  for (std::size_t j = from; j < ready.size(); ++j)
    boost::asio::post(ready[j]->executor, [r = ready[j]] { r->on_ready(); });
}

}  // namespace agenthost::process::detail
