// A dead child that a tracer holds (a debugger, strace, LeakSanitizer's check at a reaper's exit) cannot be reaped by
// its parent until the tracer lets go: its pidfd is readable, yet waitid() finds nothing. The child object's
// destructor must not leave it a zombie for the host's lifetime, and its exit watch must not spin meanwhile.
#include "test_util.hpp"

#include <agenthost/process/child.hpp>

#include <sys/ptrace.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <utility>

using namespace agenthost;
using namespace agenthost::process;
using namespace agenthost::test;

namespace {

// A process of ours that PTRACE_SEIZEs `target` and holds it until release(): a tracee that dies is then reported to
// the tracer, not to its parent, until the tracer exits (which hands the dead tracee back to its parent).
class tracer {
 public:
  explicit tracer(int target) {
    int ready[2], go[2];
    if (::pipe2(ready, O_CLOEXEC) != 0 || ::pipe2(go, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {  // async-signal-safe calls only: the test process has threads
      ::close(ready[0]);
      ::close(go[1]);  // else release() closing the test's copy would not end the read below
      int err = ::ptrace(PTRACE_SEIZE, target, nullptr, nullptr) == 0 ? 0 : errno;
      (void)!::write(ready[1], &err, sizeof err);
      char c;
      (void)!::read(go[0], &c, 1);  // until release(), or the test process's end closes it
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(go[0]);
    release_fd_ = go[1];
    if (pid_ > 0 && ::read(ready[0], &error_, sizeof error_) != sizeof error_) error_ = EIO;
    ::close(ready[0]);
  }
  tracer(const tracer&) = delete;
  tracer& operator=(const tracer&) = delete;
  ~tracer() { release(); }

  /// errno of PTRACE_SEIZE (0: the target is held).
  [[nodiscard]] int error() const { return pid_ > 0 ? error_ : ECHILD; }

  /// Lets the tracee go (the tracer exits) and reaps the tracer.
  void release() {
    if (release_fd_ >= 0) ::close(std::exchange(release_fd_, -1));
    if (pid_ > 0) ::waitpid(std::exchange(pid_, -1), nullptr, 0);
  }

 private:
  int pid_ = -1;
  int release_fd_ = -1;
  int error_ = 0;
};

// The process the host waits on: the agent itself in session mode, its reaper (the agent's parent) in reaper mode.
int direct_child_of(const child& c, containment_kind mode) {
  if (mode == containment_kind::session) return c.pid();
  const auto agent = read_proc_stat(c.pid());
  return agent ? static_cast<int>(agent->ppid) : -1;
}

class TracedChild : public ::testing::TestWithParam<containment_kind> {
 protected:
  child spawn_never_exiting(std::chrono::milliseconds destroy_timeout = std::chrono::milliseconds{2000}) {
    // No spawn server: the reaper is then the host's own child, whose reaping is what is tested.
    auto c = child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                              .args = {"ready", "never-exit"},
                                              .containment = GetParam(),
                                              .reaper_path = AGENTHOST_REAPER,
                                              .reaper_server = false,
                                              .destroy_timeout = destroy_timeout});
    EXPECT_TRUE(c) << c.error().message;
    if (!c) throw std::runtime_error(c.error().message);
    EXPECT_TRUE(read_until_line(io, *c, "ready"));
    return std::move(*c);
  }

  asio::io_context io;
};

}  // namespace

// Destroyed while a tracer holds its direct child: the destructor kills the tree and waits its bound, but the dead
// child cannot be reaped yet. Once the tracer lets go, the child is reaped (by the library's late reaper) instead of
// staying our zombie.
TEST_P(TracedChild, ADestroyedChildHeldByATracerIsReapedOnceTheTracerLetsGo) {
  std::optional<child> c(spawn_never_exiting(std::chrono::milliseconds{0}));
  const int direct = direct_child_of(*c, GetParam());
  ASSERT_GT(direct, 0);
  tracer holder(direct);
  if (holder.error() == EPERM) GTEST_SKIP() << "ptrace is not allowed here";
  ASSERT_EQ(holder.error(), 0) << std::strerror(holder.error());
  c.reset();
  // The destructor gave up: the child is dead, and ours to reap, but held.
  const auto held = read_proc_stat(direct);
  ASSERT_TRUE(held.has_value()) << "reaped although the tracer holds it: the scenario did not happen";
  EXPECT_EQ(held->state, 'Z');
  EXPECT_EQ(held->ppid, ::getpid());
  holder.release();
  EXPECT_TRUE(run_until(io, [&] { return !read_proc_stat(direct).has_value(); }, 10s))
      << "the dead child stayed our zombie after the tracer let go";
  EXPECT_EQ(zombie_children(), 0);
}

// The exit watch of a child whose dead direct child a tracer holds: the wait completes once the tracer lets go, and
// meanwhile the io_context does not spin on the pidfd (readable, but nothing to reap).
TEST_P(TracedChild, AnExitHeldByATracerIsWaitedForWithoutSpinning) {
  auto c = spawn_never_exiting();
  const int direct = direct_child_of(c, GetParam());
  ASSERT_GT(direct, 0);
  tracer holder(direct);
  if (holder.error() == EPERM) GTEST_SKIP() << "ptrace is not allowed here";
  ASSERT_EQ(holder.error(), 0) << std::strerror(holder.error());
  std::optional<boost::system::error_code> waited;
  c.async_wait([&](boost::system::error_code ec, exit_status) { waited = ec; });
  ASSERT_EQ(::kill(direct, SIGKILL), 0);
  ASSERT_TRUE(run_until(io, [&] {
    const auto s = read_proc_stat(direct);
    return s && s->state == 'Z';
  }, 10s));
  // Held: 300 ms of the io_context's time. A watch re-armed on the readable pidfd would use all of it.
  rusage before{}, after{};
  ::getrusage(RUSAGE_THREAD, &before);
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < 300ms) {
    if (io.stopped()) io.restart();
    io.run_one_for(10ms);
  }
  ::getrusage(RUSAGE_THREAD, &after);
  const auto cpu_us = [](const rusage& u) {
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000L + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
  };
  const long used = cpu_us(after) - cpu_us(before);
  EXPECT_LT(used, 150000) << "the io_context spun while the tracer held the child: " << used << " µs of CPU in 300 ms";
  holder.release();
  ASSERT_TRUE(run_until(io, [&] { return !read_proc_stat(direct).has_value(); }, 10s)) << "never reaped";
  if (GetParam() == containment_kind::session) {
    ASSERT_TRUE(run_until(io, [&] { return waited.has_value(); }, 10s));
    EXPECT_FALSE(*waited) << waited->message();
  }
  EXPECT_EQ(zombie_children(), 0);
}

INSTANTIATE_TEST_SUITE_P(Containment, TracedChild,
                         ::testing::Values(containment_kind::session, containment_kind::reaper),
                         [](const auto& param_info) {
                           return std::string(param_info.param == containment_kind::session ? "session" : "reaper");
                         });
