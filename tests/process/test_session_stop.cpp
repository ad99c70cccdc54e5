// The stop without a reaper (session containment): the host sees the tree through /proc alone — the session, the
// parent links, the environment token — and must neither miss a member nor take a scan it could not make for an
// empty tree.
#include "test_util.hpp"

#include <agenthost/process/child.hpp>

#include <sys/resource.h>

#include <optional>

using namespace agenthost;
using namespace agenthost::process;
using namespace agenthost::test;

namespace {

// Session containment: the agent exits, leaving in its session a child that has neither a parent link to it nor the
// library's tree token (a fresh environment). Only the session finds it — and once the leader is reaped, the session's
// id is only used while a member recorded before the reap still holds it. The stop must still kill that child.
TEST(SessionStop, AMemberWithoutTokenOrParentLinkIsFoundThroughTheSession) {
  asio::io_context io;
  liveness_fifo fifo;
  const std::string token = random_token();
  const std::string script = "exec 9>'" + fifo.path() + "'; env -i AGENTHOST_TEST_TOKEN=" + token +
                             " /bin/sleep 600 & echo ready";
  auto c = child::spawn(io.get_executor(), {.executable = "/bin/sh",
                                            .args = {"-c", script},
                                            .containment = containment_kind::session});
  ASSERT_TRUE(c) << c.error().message;
  std::optional<exit_status> st;
  c->async_wait([&](boost::system::error_code, exit_status s) { st = s; });
  struct leftovers_guard {
    std::string needle;
    ~leftovers_guard() { kill_leftovers(needle); }
  } guard{"AGENTHOST_TEST_TOKEN=" + token};
  ASSERT_TRUE(read_until_line(io, *c, "ready"));
  ASSERT_TRUE(run_until(io, [&] { return st.has_value(); }));
  // The shell may exit before its background child has exec'd `env` (which sets the token): wait until it has.
  ASSERT_TRUE(run_until(io, [&] { return processes_with_env("AGENTHOST_TEST_TOKEN=" + token).size() == 1; }))
      << "the orphan runs";
  std::optional<stop_report> report;
  c->async_stop(stop_policy{.graceful_wait = std::chrono::milliseconds{100}},
                [&](boost::system::error_code, stop_report r) { report = r; });
  ASSERT_TRUE(run_until(io, [&] { return report.has_value(); }, 15s));
  EXPECT_EQ(report->phase, stop_phase::kill);
  EXPECT_TRUE(report->survivors.empty());
  EXPECT_TRUE(fifo.wait_eof(1s)) << "the session's member survived";
}

// Without a reaper a stop sees the tree through /proc. A host out of file descriptors cannot list /proc: a scan that
// found nothing then proves nothing, and the stop must not report a tree gone whose setsid'd member still runs.
TEST(SessionStop, AScanThatCouldNotReadProcProvesNothingGone) {
  asio::io_context io;
  liveness_fifo fifo;
  const std::string token = random_token();
  struct leftovers_guard {
    std::string needle;
    ~leftovers_guard() { kill_leftovers(needle); }
  } guard{"AGENTHOST_TEST_TOKEN=" + token};
  const stop_policy quick{.graceful_wait = std::chrono::milliseconds{50}, .kill_wait = std::chrono::milliseconds{200}};
  const auto spawn_tree = [&](bool live) {
    spawn_options o{.executable = AGENTHOST_FAKE_AGENT,
                    .args = {"setsid-child", "ready", "never-exit"},
                    .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}},
                    .containment = containment_kind::session};
    if (live) o.env.set["AGENTHOST_LIVENESS_FIFO"] = fifo.path();
    auto spawned = child::spawn(io.get_executor(), o);
    if (!spawned) throw std::runtime_error("spawn failed: " + spawned.error().message);
    std::optional<child> ch(std::move(*spawned));
    if (!read_until_line(io, *ch, "ready")) throw std::runtime_error("no ready line");
    return ch;
  };
  // A whole stop, and the error code the one under test ends with, while descriptors are there: the sanitizers check a
  // polymorphic type the first time they see it through a pipe, which the exhausted table below would refuse (UBSan
  // then reports an "invalid vptr" that is not).
  {
    auto warm = spawn_tree(false);
    std::optional<boost::system::error_code> warm_ec;
    warm->async_stop(quick, [&](boost::system::error_code ec, stop_report) { warm_ec = ec; });
    ASSERT_TRUE(run_until(io, [&] { return warm_ec.has_value(); }, 15s));
    ASSERT_FALSE(*warm_ec) << warm_ec->message();
    const boost::system::error_code incomplete = errc::stop_incomplete;
    ASSERT_TRUE(incomplete.failed()) << incomplete.message();
  }
  auto c = spawn_tree(true);
  // No descriptor left: every fd below the lowest free one is in use, so the limit at that number forbids any new one.
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  const int lowest_free = ::dup(0);
  ASSERT_GE(lowest_free, 0);
  ::close(lowest_free);
  rlimit none = saved;
  none.rlim_cur = static_cast<rlim_t>(lowest_free);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &none), 0);
  std::optional<std::pair<boost::system::error_code, stop_report>> stopped;
  c->async_stop(quick, [&](boost::system::error_code ec, stop_report r) { stopped.emplace(ec, std::move(r)); });
  const bool ended = run_until(io, [&] { return stopped.has_value(); }, 15s);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_TRUE(ended);
  EXPECT_EQ(stopped->first, errc::stop_incomplete) << "a failed scan was taken for an empty tree";
  // With descriptors again, the destructor finds and kills what the stop could not see.
  c.reset();
  EXPECT_TRUE(fifo.wait_eof(5s)) << "the setsid'd member survived the destructor";
}

}  // namespace
