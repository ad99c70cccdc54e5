// Reaping what a destructor could not: see late_reaper.hpp.
#include "late_reaper.hpp"

#include "launch.hpp"
#include "proc_tree.hpp"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace agenthost::process::detail {

bool wait_reapable(int pidfd, std::chrono::milliseconds bound) noexcept {
  if (pidfd < 0) return true;
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + bound;
  for (;;) {
    const auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()),
                               std::chrono::milliseconds{0});
    if (!poll_readable(pidfd, left)) return false;  // still running
    siginfo_t info{};
    if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      return true;
    }
    if (info.si_pid != 0) return true;
    // Exited (readable) yet not waitable: a tracer holds it. Nothing to poll on: the pidfd stays readable.
    if (clock::now() >= deadline) return false;
    ::poll(nullptr, 0, 1);
  }
}

namespace {

struct late_reaper {
  std::mutex m;
  std::condition_variable more;
  std::vector<int> pidfds;  // owned; each our child's
  bool thread_running = false;
  pid_t owner = 0;  // getpid() of the process this state (and its thread) belongs to
};

// Never destroyed: the thread may still run while static objects are destroyed at exit. A fork()ed copy of the host
// gets a new one: the copied mutex may be held by a thread that the fork did not copy.
std::atomic<late_reaper*> current{nullptr};

late_reaper* state_of_this_process() {
  const pid_t self = ::getpid();
  late_reaper* s = current.load();
  while (s == nullptr || s->owner != self) {
    auto* fresh = new late_reaper;  // may throw std::bad_alloc
    fresh->owner = self;
    if (current.compare_exchange_strong(s, fresh)) return fresh;
    delete fresh;  // another thread of this process installed one: `s` is it now
  }
  return s;
}

void reap_when_possible(late_reaper& s) noexcept {
  std::unique_lock lock(s.m);
  auto pause = std::chrono::milliseconds{1};
  for (;;) {
    std::erase_if(s.pidfds, [](int fd) {
      if (!try_reap(fd)) return false;  // running, or held by a tracer
      ::close(fd);
      return true;
    });
    if (s.pidfds.empty()) {
      s.more.wait(lock, [&] { return !s.pidfds.empty(); });
      pause = std::chrono::milliseconds{1};
      continue;
    }
    // Neither the exit of a child nor a tracer's release can be waited for on all of them at once: look again later.
    s.more.wait_for(lock, pause);
    pause = std::min(pause * 2, std::chrono::milliseconds{1000});
  }
}

}  // namespace

void reap_later(unique_fd pidfd) noexcept {
  if (!pidfd) return;
  if (try_reap(pidfd.get())) return;  // reapable by now after all
  try {
    late_reaper* s = state_of_this_process();
    std::lock_guard lock(s->m);
    s->pidfds.push_back(pidfd.get());
    pidfd.release();
    if (!s->thread_running) {
      // Every signal blocked in the thread (it inherits the mask it is created with): a signal to the host goes to
      // one of the host's own threads, as it would without this one.
      sigset_t all, before;
      ::sigfillset(&all);
      ::pthread_sigmask(SIG_SETMASK, &all, &before);
      try {
        std::thread([s] { reap_when_possible(*s); }).detach();
        s->thread_running = true;
      } catch (...) {
        // No thread to be had now: the pidfd waits in the list, and the next hand-over tries again.
      }
      ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
    }
    s->more.notify_one();
  } catch (...) {
    // No memory for the state or the list: the pidfd closes with `pidfd`, as before there was a late reaper.
  }
}

}  // namespace agenthost::process::detail
