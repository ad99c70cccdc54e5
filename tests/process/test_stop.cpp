// The three-phase stop against hostile process trees: after stop() returns, nothing of the tree survives.
// "Nothing survives" is proven twice: the liveness FIFO (inherited by every process of the tree) reaches EOF, and no
// live process carries the test's environment token.
#include "test_util.hpp"

#include <agenthost/process/child.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <atomic>
#include <csignal>
#include <fstream>
#include <future>
#include <thread>

using namespace agenthost;
using namespace agenthost::process;
using namespace agenthost::test;

namespace {

struct hostile_case {
  const char* name;
  std::vector<std::string> modes;  // before "ready"
  stop_policy policy;
  stop_phase expected_phase;
};

// Reaper containment through the spawn server (the default) and through a reaper exec'd per agent (the fallback).
enum class variant { reaper_server, reaper_exec, session };

class StopTest : public ::testing::TestWithParam<std::tuple<hostile_case, variant>> {
 protected:
  void TearDown() override { kill_leftovers("AGENTHOST_TEST_TOKEN=" + token); }

  child spawn_ready(std::vector<std::string> modes) {
    if (std::get<1>(GetParam()) == variant::reaper_server) {
      // The first reaper-mode spawn of a process exec's its reaper (and starts the spawn server): make sure the
      // server runs, so that the tree under test is the server's.
      auto warm = child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                                   .args = {"exit", "0"},
                                                   .containment = containment_kind::reaper,
                                                   .reaper_path = AGENTHOST_REAPER});
      if (!warm) throw std::runtime_error("spawn failed: " + warm.error().message);
      bool stopped = false;
      warm->async_stop({}, [&](boost::system::error_code, stop_report) { stopped = true; });
      EXPECT_TRUE(run_until(io, [&] { return stopped; }));
    }
    modes.push_back("ready");
    modes.push_back("never-exit");
    auto c = child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                               .args = modes,
                                               // As if this host ran under agenthost itself: its token and
                                               // the tree's share one entry, which a stop must still match.
                                               .env = {.set = {{"AGENTHOST_TEST_TOKEN", token},
                                                               {"AGENTHOST_TREE_TOKEN", "0123456789abcdef01234567"},
                                                               {"AGENTHOST_LIVENESS_FIFO", fifo.path()}}},
                                               .containment = std::get<1>(GetParam()) == variant::session
                                                                  ? containment_kind::session
                                                                  : containment_kind::reaper,
                                               .reaper_path = AGENTHOST_REAPER,
                                               .reaper_server = std::get<1>(GetParam()) == variant::reaper_server});
    if (!c) throw std::runtime_error("spawn failed: " + c.error().message);
    EXPECT_TRUE(read_until_line(io, *c, "ready"));
    return std::move(*c);
  }

  asio::io_context io;
  std::string token = random_token();
  liveness_fifo fifo;
};

TEST_P(StopTest, NothingSurvives) {
  const auto& hc = std::get<0>(GetParam());
  auto c = spawn_ready(hc.modes);
  std::optional<stop_report> report;
  boost::system::error_code ec;
  c.async_stop(hc.policy, [&](boost::system::error_code e, stop_report r) {
    ec = e;
    report = r;
  });
  ASSERT_TRUE(run_until(io, [&] { return report.has_value(); }, 15s));
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(report->survivors.empty());
  EXPECT_EQ(report->phase, hc.expected_phase);
  EXPECT_TRUE(fifo.wait_eof(1s)) << "a process of the tree still holds the liveness FIFO";
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
  EXPECT_EQ(zombie_children(), 0);
  // Bounded: grace + kill wait + slack.
  EXPECT_LT(report->elapsed, hc.policy.graceful_wait + hc.policy.kill_wait + 1s);
}

const stop_policy fast{.graceful_wait = std::chrono::milliseconds{300}, .kill_wait = std::chrono::milliseconds{3000}};
// Cases expected to end in the graceful phase get a generous grace (they exit at once anyway); a loaded CI machine
// must not turn a slow-but-cooperative exit into a kill.
const stop_policy coop{.graceful_wait = std::chrono::milliseconds{5000}, .kill_wait = std::chrono::milliseconds{3000}};
const stop_policy fast_term{.interrupt_bytes = {},
                            .interrupt_signal = SIGTERM,
                            .interrupt_target = signal_target::leader,
                            .graceful_wait = std::chrono::milliseconds{300},
                            .kill_wait = std::chrono::milliseconds{3000}};

INSTANTIATE_TEST_SUITE_P(
    Hostile, StopTest,
    ::testing::Combine(
        ::testing::Values(hostile_case{"cooperative", {}, coop, stop_phase::interrupt},
                          hostile_case{"ignores_sigint", {"ignore-sigint"}, fast, stop_phase::kill},
                          hostile_case{"traps_sigterm", {"trap-sigterm"}, fast_term, stop_phase::kill},
                          hostile_case{"ignores_all", {"ignore-all"}, fast, stop_phase::kill},
                          hostile_case{"setsid_grandchild", {"setsid-child"}, fast, stop_phase::kill},
                          hostile_case{"double_fork_daemon", {"double-fork-daemon"}, fast, stop_phase::kill},
                          hostile_case{"children_in_group", {"ignore-sigint", "spawn-children", "20"}, fast,
                                       stop_phase::kill},
                          hostile_case{"setsid_children", {"spawn-children", "20", "--setsid"}, fast,
                                       stop_phase::kill},
                          // /proc lists a process whose main thread ended as a zombie: it must still be killed,
                          // as the agent itself and as a member the agent left behind.
                          hostile_case{"main_thread_exits", {"ignore-sigint", "main-thread-exits"}, fast,
                                       stop_phase::kill},
                          hostile_case{"orphan_main_thread_exits",
                                       {"ignore-sigint", "leader-exits-early", "main-thread-exits"}, fast,
                                       stop_phase::kill},
                          hostile_case{"closed_stdout", {"ready", "close-stdout"}, coop, stop_phase::interrupt},
                          hostile_case{"never_reads_stdin", {"ready", "never-read-stdin"}, coop, stop_phase::interrupt}),
        ::testing::Values(variant::reaper_server, variant::reaper_exec, variant::session)),
    [](const auto& param_info) {
      const auto v = std::get<1>(param_info.param);
      return std::string(std::get<0>(param_info.param).name) +
             (v == variant::reaper_server ? "_reaper" : v == variant::reaper_exec ? "_reaper_exec" : "_session");
    });

// ---- stop semantics -------------------------------------------------------------------------------------------------

class StopSemantics : public ::testing::Test {
 protected:
  void TearDown() override { kill_leftovers("AGENTHOST_TEST_TOKEN=" + token); }
  child spawn(std::vector<std::string> args, std::chrono::milliseconds destroy_timeout = std::chrono::milliseconds{2000}) {
    auto c = child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                               .args = std::move(args),
                                               .env = {.set = {{"AGENTHOST_TEST_TOKEN", token},
                                                               {"AGENTHOST_LIVENESS_FIFO", fifo.path()}}},
                                               .reaper_path = AGENTHOST_REAPER,
                                               .destroy_timeout = destroy_timeout});
    if (!c) throw std::runtime_error("spawn failed: " + c.error().message);
    return std::move(*c);
  }
  void wait_ready(child& c) { ASSERT_TRUE(read_until_line(io, c, "ready")); }
  asio::io_context io;
  std::string token = random_token();
  liveness_fifo fifo;
};

TEST_F(StopSemantics, CancellationAlreadyFiredDoesNotStopTheCleanup) {
  auto c = spawn({"ignore-sigint", "setsid-child", "ready", "never-exit"});
  wait_ready(c);
  asio::cancellation_signal sig;
  sig.emit(asio::cancellation_type::terminal);  // the caller gave up before the stop even started
  std::optional<stop_report> r;
  c.async_stop(stop_policy{.graceful_wait = std::chrono::milliseconds{100}},
               asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code, stop_report rep) { r = rep; }));
  sig.emit(asio::cancellation_type::terminal);  // and again while it runs
  ASSERT_TRUE(run_until(io, [&] { return r.has_value(); }));
  EXPECT_EQ(r->phase, stop_phase::kill);
  EXPECT_TRUE(r->survivors.empty());
  EXPECT_TRUE(fifo.wait_eof(1s));
}

// The reaper ignores a signal number it does not know: the host must not report that as delivered.
TEST_F(StopSemantics, ASignalNumberThatIsNoSignalIsRefused) {
  auto c = spawn({"ready", "never-exit"});
  wait_ready(c);
  for (const int sig : {-1, 65, 99})
    for (const auto target : {signal_target::leader, signal_target::group, signal_target::tree})
      EXPECT_EQ(c.send_signal(sig, target), std::errc::invalid_argument) << sig;
  EXPECT_FALSE(c.send_signal(0, signal_target::leader));
  std::optional<stop_report> r;
  c.async_stop(stop_policy::kill_now(), [&](boost::system::error_code, stop_report rep) { r = rep; });
  ASSERT_TRUE(run_until(io, [&] { return r.has_value(); }));
  EXPECT_TRUE(r->survivors.empty());
  EXPECT_TRUE(fifo.wait_eof(1s));
}

// milliseconds::max() as "wait as long as it takes": the deadline saturates instead of overflowing into the past (which
// skipped the graceful phase: an agent that ends on its interrupt was killed).
TEST_F(StopSemantics, AnEndlessGracefulWaitIsNotSkipped) {
  auto c = spawn({"ready", "never-exit"}, std::chrono::milliseconds::max());
  wait_ready(c);
  std::optional<stop_report> r;
  constexpr auto forever = std::chrono::milliseconds::max();
  c.async_stop(stop_policy{.graceful_wait = forever, .kill_wait = forever},
               [&](boost::system::error_code, stop_report rep) { r = rep; });
  ASSERT_TRUE(run_until(io, [&] { return r.has_value(); }));
  EXPECT_EQ(r->phase, stop_phase::interrupt);
  EXPECT_TRUE(r->survivors.empty());
  EXPECT_TRUE(fifo.wait_eof(1s));
}

// The child destroyed while its stop waits: the stop completes with operation_aborted (as every pending operation), not
// with a success the destructor's bounded kill cannot vouch for; the tree is gone all the same.
TEST_F(StopSemantics, DestroyingTheChildAbortsItsPendingStop) {
  std::optional<child> c(spawn({"ignore-sigint", "ready", "never-exit"}));
  wait_ready(*c);
  std::optional<boost::system::error_code> ec;
  c->async_stop(stop_policy{.graceful_wait = std::chrono::seconds{30}},
                [&](boost::system::error_code e, stop_report) { ec = e; });
  c.reset();
  ASSERT_TRUE(run_until(io, [&] { return ec.has_value(); }));
  EXPECT_EQ(*ec, asio::error::operation_aborted);
  EXPECT_TRUE(fifo.wait_eof(1s));
}

TEST_F(StopSemantics, SecondStopJoinsTheFirst) {
  auto c = spawn({"ignore-sigint", "ready", "never-exit"});
  wait_ready(c);
  std::optional<stop_report> a, b;
  c.async_stop(stop_policy{.graceful_wait = std::chrono::milliseconds{200}},
               [&](boost::system::error_code, stop_report r) { a = r; });
  c.async_stop(stop_policy::kill_now(), [&](boost::system::error_code, stop_report r) { b = r; });
  ASSERT_TRUE(run_until(io, [&] { return a && b; }));
  EXPECT_EQ(a->phase, stop_phase::kill);
  EXPECT_EQ(b->phase, a->phase);
  EXPECT_EQ(b->elapsed, a->elapsed);
  EXPECT_GE(a->elapsed, std::chrono::milliseconds{200});  // the first policy won
  // A stop after the end reports that the tree is already gone.
  std::optional<stop_report> later;
  c.async_stop({}, [&](boost::system::error_code, stop_report r) { later = r; });
  ASSERT_TRUE(run_until(io, [&] { return later.has_value(); }));
  EXPECT_EQ(later->phase, stop_phase::already_gone);
}

TEST_F(StopSemantics, LeaderExitOnInterruptStillKillsTheRestOfTheTree) {
  // The leader dies on SIGINT at once, its setsid'd child ignores everything: phase 3 must still run.
  auto c = spawn({"setsid-child", "ready", "never-exit"});
  wait_ready(c);
  std::optional<stop_report> r;
  c.async_stop(stop_policy{.graceful_wait = std::chrono::milliseconds{200}},
               [&](boost::system::error_code, stop_report rep) { r = rep; });
  ASSERT_TRUE(run_until(io, [&] { return r.has_value(); }));
  EXPECT_EQ(r->phase, stop_phase::kill);
  ASSERT_TRUE(r->leader_status.has_value());
  ASSERT_NE(r->leader_status->as_signaled(), nullptr);
  EXPECT_EQ(r->leader_status->as_signaled()->signal, SIGINT);
  EXPECT_LT(r->leader_exit_after, std::chrono::milliseconds{200});
  EXPECT_TRUE(fifo.wait_eof(1s));
}

TEST_F(StopSemantics, DestroyingARunningChildKillsTheTreeWithinItsBound) {
  {
    auto c = spawn({"ignore-all", "setsid-child", "double-fork-daemon", "ready", "never-exit"},
                   std::chrono::milliseconds{1000});
    wait_ready(c);
    bool aborted = false;
    c.async_wait([&](boost::system::error_code ec, exit_status) { aborted = ec == asio::error::operation_aborted; });
    const auto t0 = std::chrono::steady_clock::now();
    {
      auto moved = std::move(c);
    }  // destroyed here
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds{1500});
    io.run_for(std::chrono::milliseconds{50});
    EXPECT_TRUE(aborted);
  }
  EXPECT_TRUE(fifo.wait_eof(1s));
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
  EXPECT_EQ(zombie_children(), 0);
}

TEST_F(StopSemantics, SigchldDispositionIsNeverTouched) {
  struct sigaction before {};
  ::sigaction(SIGCHLD, nullptr, &before);
  {
    auto c = spawn({"stdout", "x", "exit", "0"});
    std::optional<exit_status> st;
    c.async_wait([&](boost::system::error_code, exit_status s) { st = s; });
    ASSERT_TRUE(run_until(io, [&] { return st.has_value(); }));
    std::optional<stop_report> r;
    c.async_stop({}, [&](boost::system::error_code, stop_report rep) { r = rep; });
    ASSERT_TRUE(run_until(io, [&] { return r.has_value(); }));
  }
  struct sigaction after {};
  ::sigaction(SIGCHLD, nullptr, &after);
  EXPECT_EQ(before.sa_handler, after.sa_handler);
  EXPECT_EQ(before.sa_flags, after.sa_flags);
}

TEST_F(StopSemantics, TwoHundredCyclesLeakNothing) {
  int fds = 0;
  for (int i = 0; i < 201; ++i) {
    // The first cycle also creates the io_context's own descriptors (epoll, eventfd, timerfd) and starts the spawn
    // server: baseline after it, once that server is up.
    if (i == 1) {
      settle_spawn_server();
      fds = open_fd_count();
    }
    auto c = child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                               .args = {"stdout", "hi", "never-exit"},
                                               .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}},
                                               .reaper_path = AGENTHOST_REAPER});
    ASSERT_TRUE(c);
    std::optional<stop_report> r;
    c->async_stop(i % 2 ? stop_policy::kill_now() : stop_policy{}, [&](boost::system::error_code ec, stop_report rep) {
      EXPECT_FALSE(ec);
      r = rep;
    });
    ASSERT_TRUE(run_until(io, [&] { return r.has_value(); }));
  }
  io.poll();
  EXPECT_EQ(open_fd_count(), fds);
  EXPECT_EQ(zombie_children(), 0);
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
}

// ---- the reaper dies ------------------------------------------------------------------------------------------------

// The reaper dies by SIGKILL (an admin, the OOM killer) under a hostile tree: its orphans went to init (or the spawn
// server), out of any parent link to it. The host tracks the tree itself from then on — from the agent, pinned by its
// start time, and the environment token — and neither a stop nor the destructor leaves anything behind.
class ReaperDeath : public ::testing::TestWithParam<bool> {  // through the spawn server (else a reaper exec'd per agent)
 protected:
  void TearDown() override { kill_leftovers("AGENTHOST_TEST_TOKEN=" + token); }

  child spawn_ready(std::vector<std::string> args = {"ignore-all", "setsid-child", "double-fork-daemon", "ready",
                                                     "never-exit"}) {
    if (GetParam()) settle_spawn_server();
    auto c = child::spawn(io.get_executor(),
                          {.executable = AGENTHOST_FAKE_AGENT,
                           .args = std::move(args),
                           .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}, {"AGENTHOST_LIVENESS_FIFO", fifo.path()}}},
                           .containment = containment_kind::reaper,
                           .reaper_path = AGENTHOST_REAPER,
                           .reaper_server = GetParam()});
    if (!c) throw std::runtime_error("spawn failed: " + c.error().message);
    EXPECT_TRUE(read_until_line(io, *c, "ready"));
    return std::move(*c);
  }

  // SIGKILLs the agent's reaper (its parent) and waits until it is gone.
  void kill_reaper(const child& c) {
    int reaper = 0;
    for (const auto& p : all_processes())
      if (p.pid == c.pid()) reaper = static_cast<int>(p.ppid);
    ASSERT_GT(reaper, 1);
    if (GetParam()) {  // forked by the spawn server, not exec'd by us
      for (const auto& p : all_processes()) {
        if (p.pid == reaper) {
          ASSERT_NE(p.ppid, ::getpid()) << "the tree did not go through the spawn server";
        }
      }
    }
    std::ifstream cmdline("/proc/" + std::to_string(reaper) + "/cmdline");
    std::string argv0;
    std::getline(cmdline, argv0, '\0');
    ASSERT_NE(argv0.find("agenthost-reaper"), std::string::npos) << argv0;
    ASSERT_EQ(::kill(reaper, SIGKILL), 0);
    // Until it is reaped (by us, or by the spawn server) it still shows in /proc as a zombie.
    ASSERT_TRUE(run_until(io, [&] {
      for (const auto& p : all_processes())
        if (p.pid == reaper && p.state != 'Z') return false;
      return true;
    }));
  }

  asio::io_context io;
  std::string token = random_token();
  liveness_fifo fifo;
};

TEST_P(ReaperDeath, TheStopKillsTheTreeItLeft) {
  auto c = spawn_ready();
  ASSERT_NO_FATAL_FAILURE(kill_reaper(c));
  std::optional<stop_report> report;
  boost::system::error_code ec;
  const stop_policy policy{.graceful_wait = std::chrono::milliseconds{300}, .kill_wait = std::chrono::milliseconds{3000}};
  c.async_stop(policy, [&](boost::system::error_code e, stop_report r) {
    ec = e;
    report = r;
  });
  ASSERT_TRUE(run_until(io, [&] { return report.has_value(); }, 15s));
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(report->survivors.empty());
  EXPECT_EQ(report->phase, stop_phase::kill);
  EXPECT_TRUE(fifo.wait_eof(1s)) << "a process of the tree still holds the liveness FIFO";
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
  EXPECT_LT(report->elapsed, policy.graceful_wait + policy.kill_wait);  // no kill-phase timeout: the tree was found
  EXPECT_EQ(c.send_signal(SIGTERM, signal_target::tree), make_error_code(errc::not_running));
}

TEST_P(ReaperDeath, TheDestructorKillsTheTreeItLeft) {
  {
    auto c = spawn_ready();
    ASSERT_NO_FATAL_FAILURE(kill_reaper(c));
    io.poll();  // the host may or may not have seen the death yet: either way the destructor must clean up
  }
  EXPECT_TRUE(fifo.wait_eof(1s)) << "a process of the tree still holds the liveness FIFO";
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
  EXPECT_EQ(zombie_children(), 0);
}

TEST_P(ReaperDeath, SignalsReachTheTreeItLeft) {
  auto c = spawn_ready();
  ASSERT_NO_FATAL_FAILURE(kill_reaper(c));
  // SIGKILL to the tree through the host-side sweep: every process of it dies.
  boost::system::error_code ec;
  ASSERT_TRUE(run_until(io, [&] {
    ec = c.send_signal(SIGKILL, signal_target::tree);
    return fifo.wait_eof(std::chrono::milliseconds{10});
  })) << ec.message();
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
  EXPECT_EQ(c.send_signal(SIGKILL, signal_target::leader), make_error_code(errc::not_running));
}

// The reaper dies just before a stop, which the host has not seen yet: the interrupt goes to a dead socket. Once the
// host sees the death it sends the interrupt itself, so a cooperative agent still ends in the graceful phase.
TEST_P(ReaperDeath, AnInterruptTheDeadReaperMissedIsSentByTheHost) {
  auto c = spawn_ready({"ready", "never-exit"});
  int reaper = 0;
  for (const auto& p : all_processes())
    if (p.pid == c.pid()) reaper = static_cast<int>(p.ppid);
  ASSERT_GT(reaper, 1);
  // Waited for through a pidfd of our own, without running the io_context: the child must not learn of it yet.
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, reaper, 0));
  ASSERT_GE(pidfd, 0);
  ASSERT_EQ(::kill(reaper, SIGKILL), 0);
  pollfd p{pidfd, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 10000), 1);
  ::close(pidfd);
  std::optional<stop_report> report;
  c.async_stop(stop_policy{.graceful_wait = std::chrono::milliseconds{5000}},
               [&](boost::system::error_code, stop_report r) { report = r; });
  ASSERT_TRUE(run_until(io, [&] { return report.has_value(); }, 15s));
  EXPECT_EQ(report->phase, stop_phase::interrupt);
  EXPECT_TRUE(report->survivors.empty());
  EXPECT_TRUE(fifo.wait_eof(1s));
}

// The reaper forwarded the stop's interrupt and died afterwards: the host must not send it again (a second SIGINT is
// "quit now" to many agents).
TEST_P(ReaperDeath, AnInterruptTheReaperForwardedIsNotSentTwice) {
  auto c = spawn_ready({"trap", "INT", "ready", "never-exit"});
  std::optional<stop_report> report;
  c.async_stop(stop_policy{.graceful_wait = std::chrono::milliseconds{1000}},
               [&](boost::system::error_code, stop_report r) { report = r; });
  ASSERT_TRUE(run_until(io, [&] { return c.stderr_tail().find("got SIGINT") != std::string::npos; }));
  ASSERT_NO_FATAL_FAILURE(kill_reaper(c));
  ASSERT_TRUE(run_until(io, [&] { return report.has_value(); }, 15s));
  EXPECT_EQ(report->phase, stop_phase::kill);
  EXPECT_TRUE(report->survivors.empty());
  const std::string err = c.stderr_tail();
  std::size_t count = 0;
  for (auto at = err.find("got SIGINT"); at != std::string::npos; at = err.find("got SIGINT", at + 1)) ++count;
  EXPECT_EQ(count, 1u) << err;
  EXPECT_TRUE(fifo.wait_eof(1s));
}

INSTANTIATE_TEST_SUITE_P(Reaper, ReaperDeath, ::testing::Bool(),
                         [](const auto& param_info) { return param_info.param ? "server" : "exec"; });

// The host process dies by SIGKILL mid-run: the reaper sees its control socket close and kills the tree.
TEST(HostDeath, SigkilledHostLeavesNoSurvivor) {
  liveness_fifo fifo;
  const std::string token = random_token();
  // The test host is this test binary re-executed in "host" mode (posix_spawn: no fork of this process).
  const auto host = spawn_test_host("HostDeath.DISABLED_ChildHost", fifo.path(), token);
  ASSERT_GT(host.pid, 0);
  ASSERT_EQ(host.ready.size(), 1u) << "the test host did not get its agent tree running";
  ASSERT_FALSE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
  ::kill(host.pid, SIGKILL);
  int st = 0;
  ::waitpid(host.pid, &st, 0);
  // Within 1 s of the host's death: the liveness FIFO reached EOF and no live process carries the token (the reaper
  // itself carries it too, and exits right after the tree).
  const auto deadline = std::chrono::steady_clock::now() + 1s;
  EXPECT_TRUE(fifo.wait_eof(1s)) << "the agent tree survived its host";
  while (!processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
  kill_leftovers("AGENTHOST_TEST_TOKEN=" + token);
}

// Runs only inside the re-executed test host above.
TEST(HostDeath, DISABLED_ChildHost) {
  const auto setup = test_host_setup_from_env();
  if (!setup) GTEST_SKIP() << "only run by HostDeath";
  asio::io_context io;
  auto c = child::spawn(io.get_executor(), host_death_tree(*setup));
  ASSERT_TRUE(c);
  // "ready" comes after the whole tree is in place (the double fork's intermediate already reaped).
  ASSERT_TRUE(read_until_line(io, *c, "ready"));
  ASSERT_EQ(::write(setup->ready_fd, "r", 1), 1);
  for (;;) ::pause();  // SIGKILLed here
}

// Several threads spawn and stop while others run the same io_context: no hang (Boost.Process 1.81's fork-based
// launcher deadlocks here), no zombie, no descriptor leak.
TEST(SpawnStress, ConcurrentSpawnsWhileIoThreadsRun) {
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  {
    // Create the io_context's own descriptors (epoll, eventfd, timerfd) before taking the baseline.
    asio::steady_timer t(io, std::chrono::milliseconds(1));
    t.wait();
    auto warm = child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT, .args = {"exit", "0"},
                                                 .reaper_path = AGENTHOST_REAPER});
    ASSERT_TRUE(warm);
    std::optional<stop_report> r;
    warm->async_stop({}, [&](boost::system::error_code, stop_report rep) { r = rep; });
    ASSERT_TRUE(run_until(io, [&] { return r.has_value(); }));
  }
  settle_spawn_server();
  const int fds = open_fd_count();
  const std::string token = random_token();
  std::vector<std::thread> io_threads;
  for (int i = 0; i < 2; ++i) io_threads.emplace_back([&] { io.run(); });
  std::atomic<int> spawned{0}, failures{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  std::vector<std::thread> spawners;
  for (int t = 0; t < 3; ++t) {
    spawners.emplace_back([&] {
      while (std::chrono::steady_clock::now() < deadline) {
        // Each child gets its own strand-free executor use: all its operations are started from this thread and
        // completed on io threads, so serialize through a promise.
        auto strand = asio::make_strand(io);
        auto c = child::spawn(strand, {.executable = AGENTHOST_FAKE_AGENT,
                                       .args = {"stdout", "x", "exit", "0"},
                                       .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}},
                                       .reaper_path = AGENTHOST_REAPER});
        if (!c) {
          ++failures;
          continue;
        }
        std::promise<void> done;
        asio::post(strand, [&] {
          c->async_stop(stop_policy::kill_now(), [&](boost::system::error_code, stop_report) { done.set_value(); });
        });
        if (done.get_future().wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
          ++failures;
          std::abort();  // a hang: fail loudly rather than block the suite
        }
        std::promise<void> destroyed;
        asio::post(strand, [&] {
          auto gone = std::move(*c);
          destroyed.set_value();
        });
        destroyed.get_future().wait();
        ++spawned;
      }
    });
  }
  for (auto& t : spawners) t.join();
  work.reset();
  io.stop();
  for (auto& t : io_threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(spawned.load(), 10);
  EXPECT_EQ(zombie_children(), 0);
  EXPECT_EQ(open_fd_count(), fds);
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
}

}  // namespace
