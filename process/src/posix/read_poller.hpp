// The read-coalescing poller (internal): one per execution context, shared by every child spawned with
// spawn_options::read_coalescing > 0.
//
// Why: Asio registers a descriptor edge-triggered in epoll when it is assigned, so every write of every agent wakes
// the io_context thread — with 100 agents writing each millisecond that is ~100,000 wake-ups per second, whether or
// not a read is pending. A coalescing child keeps its stdout out of the reactor altogether; this poller ticks at the
// coalescing interval, only while at least one such child has a read pending, does one poll() over those pipes and
// hands each ready one to its child (on the child's executor), which read()s it once. A tick then costs one timer
// wake-up, one poll() and one read() per agent with output, whatever the number of writes in between — and when the
// children run on the tick's own thread (one io_context thread, no strands), the poller reads their pipes itself, all
// of them in one system call (linux/read_batch.hpp: io_uring, else one read() each).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "../linux/read_batch.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace agenthost::process::detail {

// True when `ex` is an io_context executor (not a strand) and this thread runs that io_context.
template <class Executor>
bool runs_in_this_thread(const Executor& ex) {
  const auto* io = ex.template target<boost::asio::io_context::executor_type>();
  return io != nullptr && io->running_in_this_thread();
}

// Runs `f` now when runs_in_this_thread(ex); otherwise dispatches it. asio::dispatch would also run it inline then,
// but through a type-erased executor (any_io_executor, any_completion_executor) it first wraps `f` in an allocated
// executor_function: twice per read of every agent.
template <class Executor, class F>
void run_here_or_dispatch(const Executor& ex, F&& f) {
  if (runs_in_this_thread(ex)) {
    std::forward<F>(f)();
    return;
  }
  boost::asio::dispatch(ex, std::forward<F>(f));
}

/// One pipe served by the poller. Owned by its child; the poller holds it only while it is armed.
struct poll_source {
  int fd = -1;
  /// The child's executor: on_ready runs there.
  boost::asio::any_io_executor executor;
  /// How often the pipe is looked at while armed.
  std::chrono::nanoseconds interval{};
  /// Runs on `executor` once after arm() when the pipe is readable, hung up or in error. It must check that its
  /// owner still waits (an arm may be overtaken by a disarm) and arm again if it wants more.
  std::function<void()> on_ready;
  /// Optional: called with `warm_arg` for the next ready source of a tick just before the current one's on_ready runs,
  /// to prefetch what on_ready touches first (with 100 agents on one thread each child's read state is cold; issued
  /// one child ahead, those cache misses overlap with useful work instead of stalling it). It must only prefetch, and
  /// from addresses alone: the owner may have been destroyed by the current source's handler.
  void (*warm)(const void* warm_arg) noexcept = nullptr;
  const void* warm_arg = nullptr;
  /// Optional, the batched read: when `prepare_read` and `complete_read` are set and the tick runs on a thread that
  /// runs `executor` (an io_context executor, not a strand), the poller reads the pipe itself, with the tick's other
  /// ready pipes in one system call, instead of dispatching on_ready. `owner` is locked from prepare_read to
  /// complete_read: a completion runs user handlers, which may destroy any child.
  std::weak_ptr<void> owner;
  /// Where to read (no system call, no user code), or an empty span when the owner no longer waits (nothing is read).
  std::span<char> (*prepare_read)(void* owner) = nullptr;
  /// read()'s outcome for a non-empty prepare_read: bytes read, 0 at EOF or -errno. Called even when the owner's read
  /// was cancelled since (by an earlier completion of the same tick): the bytes are out of the pipe, and must be kept.
  void (*complete_read)(void* owner, long result) = nullptr;
  /// In the poller's armed set (guarded by the poller's mutex): arm() is O(1), not a search of every armed pipe.
  bool armed = false;
};

/// Thread safety: arm() and disarm() may be called from any thread (a mutex guards the armed set and the timer);
/// on_ready runs on the source's executor, never under the mutex, so it may arm or disarm.
class read_poller final : public boost::asio::execution_context::service {
 public:
  static inline boost::asio::execution_context::id id;

  explicit read_poller(boost::asio::execution_context& ctx);
  ~read_poller() override;

  /// The poller of `ex`'s execution context (created on first use).
  static read_poller& of(const boost::asio::any_io_executor& ex);

  /// Look at `s->fd` at the next tick (starting the ticks if they were stopped). Idempotent.
  void arm(const std::shared_ptr<poll_source>& s);
  /// Forget `s` if it is armed; after this returns, the poller no longer polls its fd (the caller may close it).
  /// A dispatch to on_ready already under way is not recalled: on_ready must check its owner's state.
  void disarm(const poll_source* s);

 private:
  void shutdown() override;
  void start_timer_locked(std::chrono::steady_clock::time_point when);
  void on_tick();
  // Starts the ticks if they are stopped while sources are armed (a tick whose timer found no memory).
  void restart_ticks();
  // After a user handler threw out of the tick: on_ready of ready[from..] is posted, not lost.
  static void post_on_ready(const std::vector<std::shared_ptr<poll_source>>& ready, std::size_t from);

  std::mutex mutex_;
  std::vector<std::shared_ptr<poll_source>> armed_;
  std::optional<boost::asio::steady_timer> timer_;
  std::chrono::steady_clock::time_point deadline_{};
  std::chrono::nanoseconds tick_interval_{};  // the interval the running tick was scheduled with
  // The tick's batched reads (used by on_tick only, which never runs twice at once: one timer).
  struct batched {
    std::shared_ptr<poll_source> source;
    std::shared_ptr<void> owner;
  };
  read_batch batch_;
  std::vector<batched> batched_;
  bool ticking_ = false;
  bool shut_down_ = false;
};

}  // namespace agenthost::process::detail
