// The process layer's edges: a cancellation that arrives after the operation's I/O already completed, a cancelled
// write queued behind another, pending writes of a destroyed child, signals to a tree that is gone, and spawn options
// that cannot work.
#include "test_util.hpp"

#include "../../process/src/linux/adopt_spawn.hpp"
#include "../../process/src/linux/proc_tree.hpp"

#include <agenthost/process/child.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <sys/mman.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

using namespace agenthost;
using namespace agenthost::process;
using namespace agenthost::test;

namespace {

class Cancellation : public ::testing::Test {
 protected:
  void TearDown() override {
    kill_leftovers("AGENTHOST_TEST_TOKEN=" + token);
    EXPECT_EQ(zombie_children(), 0);
  }

  child spawn(std::vector<std::string> args) {
    auto c = child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                              .args = std::move(args),
                                              .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}},
                                              .containment = containment_kind::reaper,
                                              .reaper_path = AGENTHOST_REAPER});
    if (!c) throw std::runtime_error("spawn failed: " + c.error().message);
    return std::move(*c);
  }

  void stop(child& c) {
    bool done = false;
    c.async_stop(stop_policy::kill_now(), [&](boost::system::error_code ec, stop_report) {
      EXPECT_FALSE(ec) << ec.message();
      done = true;
    });
    EXPECT_TRUE(run_until(io, [&] { return done; }));
  }

  asio::io_context io;
  std::string token = random_token();
  // Far more than a socket buffer holds: the write stays in flight while the agent does not read.
  const std::string big = std::string(std::size_t{8} << 20, 'x');
};

// The agent wrote a partial line before the read started: the read's first async_read_some completes at once (its
// completion queued), so a cancellation emitted right after the initiation finds nothing to cancel on the
// descriptor. The read must still end with operation_aborted — not start another read that waits for more output —
// and the partial line must come with the next read.
TEST_F(Cancellation, AReadCancelledAfterItsBytesWereReadEnds) {
  auto c = spawn({"no-trailing-newline", "--text", "abc", "stderr", "ready", "never-exit"});
  ASSERT_TRUE(run_until(io, [&] { return c.stderr_tail().find("ready") != std::string::npos; }));
  asio::cancellation_signal sig;
  std::optional<boost::system::error_code> first;
  c.async_read_lines(asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code ec, line_batch b) {
    first = ec;
    EXPECT_TRUE(b.empty());
  }));
  sig.emit(asio::cancellation_type::terminal);
  ASSERT_TRUE(run_until(io, [&] { return first.has_value(); }, 5s)) << "the cancelled read never completed";
  EXPECT_EQ(*first, asio::error::operation_aborted);
  EXPECT_TRUE(c.running());
  // Nothing was lost: the agent's end of stdout closes with the kill, and "abc" arrives as the unterminated last line.
  stop(c);
  std::vector<std::string> rest;
  bool eof = false;
  std::function<void()> next = [&] {
    c.async_read_lines([&](boost::system::error_code ec, line_batch b) {
      for (const auto& l : b) rest.emplace_back(l.text);
      if (ec) {
        eof = true;
        return;
      }
      next();
    });
  };
  next();
  ASSERT_TRUE(run_until(io, [&] { return eof; }));
  EXPECT_EQ(rest, std::vector<std::string>{"abc"});
}

TEST_F(Cancellation, CancellingAQueuedWriteLeavesTheWriteInFlightAlone) {
  auto c = spawn({"never-read-stdin"});
  std::optional<boost::system::error_code> first_ec, second_ec;
  std::size_t first_n = 0;
  c.async_write_stdin(asio::buffer(big), [&](boost::system::error_code ec, std::size_t n) {
    first_ec = ec;
    first_n = n;
  });
  asio::cancellation_signal sig;
  c.async_write_stdin(asio::buffer(std::string("queued\n")),
                      asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code ec, std::size_t n) {
                        second_ec = ec;
                        EXPECT_EQ(n, 0u);
                      }));
  io.poll();
  sig.emit(asio::cancellation_type::terminal);
  ASSERT_TRUE(run_until(io, [&] { return second_ec.has_value(); }, 5s)) << "the queued write was not cancelled";
  EXPECT_EQ(*second_ec, asio::error::operation_aborted);
  io.poll();
  EXPECT_FALSE(first_ec.has_value()) << "cancelling the queued write ended the one in flight: "
                                     << first_ec.value_or(boost::system::error_code{}).message();
  // The write in flight ends when the agent is gone.
  stop(c);
  ASSERT_TRUE(run_until(io, [&] { return first_ec.has_value(); }));
  EXPECT_EQ(*first_ec, agenthost::errc::stdin_closed);
  EXPECT_LT(first_n, big.size());
}

TEST_F(Cancellation, CancellingTheWriteInFlightStartsTheNextOne) {
  auto c = spawn({"never-read-stdin"});
  asio::cancellation_signal sig;
  std::optional<boost::system::error_code> first_ec, second_ec;
  c.async_write_stdin(asio::buffer(big),
                      asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code ec, std::size_t) {
                        first_ec = ec;
                      }));
  c.async_write_stdin(asio::buffer(big), [&](boost::system::error_code ec, std::size_t) { second_ec = ec; });
  io.poll();
  sig.emit(asio::cancellation_type::terminal);
  ASSERT_TRUE(run_until(io, [&] { return first_ec.has_value(); }, 5s));
  EXPECT_EQ(*first_ec, asio::error::operation_aborted);
  io.poll();
  EXPECT_FALSE(second_ec.has_value());  // in flight now, blocked like the first
  stop(c);
  ASSERT_TRUE(run_until(io, [&] { return second_ec.has_value(); }));
  EXPECT_EQ(*second_ec, agenthost::errc::stdin_closed);
}

TEST_F(Cancellation, DestroyingTheChildAbortsItsPendingWrites) {
  std::optional<boost::system::error_code> first_ec, second_ec;
  {
    auto c = spawn({"never-read-stdin"});
    c.async_write_stdin(asio::buffer(big), [&](boost::system::error_code ec, std::size_t) { first_ec = ec; });
    c.async_write_stdin(asio::buffer(big), [&](boost::system::error_code ec, std::size_t) { second_ec = ec; });
    io.poll();
  }
  ASSERT_TRUE(run_until(io, [&] { return first_ec.has_value() && second_ec.has_value(); }));
  EXPECT_EQ(*first_ec, asio::error::operation_aborted) << first_ec->message();
  EXPECT_EQ(*second_ec, asio::error::operation_aborted) << second_ec->message();
}

TEST(Destruction, ADestroyTimeoutOfZeroLeavesNoZombie) {
  asio::io_context io;
  for (const auto mode : {containment_kind::session, containment_kind::reaper}) {
    auto c = child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                              .args = {"ready", "never-exit"},
                                              .containment = mode,
                                              .reaper_path = AGENTHOST_REAPER,
                                              .destroy_timeout = std::chrono::milliseconds{0}});
    ASSERT_TRUE(c) << c.error().message;
    std::optional<child> running(std::move(*c));
    ASSERT_TRUE(read_until_line(io, *running, "ready"));
    running.reset();
    EXPECT_EQ(zombie_children(), 0) << (mode == containment_kind::session ? "session" : "reaper");
  }
}

// Session containment has no "tree empty" message: a signal to the group or the tree of an agent that exited with
// nothing left must still say not_running, as the reaper mode and the leader target do.
TEST(SendSignal, ATreeThatIsGoneIsNotRunningForEveryTarget) {
  asio::io_context io;
  auto c = child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                            .args = {"stdout", "bye", "exit", "0"},
                                            .containment = containment_kind::session});
  ASSERT_TRUE(c) << c.error().message;
  bool exited = false, eof = false;
  c->async_wait([&](boost::system::error_code ec, exit_status) { exited = !ec; });
  std::function<void()> next = [&] {
    c->async_read_lines([&](boost::system::error_code ec, line_batch) {
      if (ec) eof = true;
      else next();
    });
  };
  next();
  ASSERT_TRUE(run_until(io, [&] { return exited && eof; }));
  EXPECT_EQ(c->send_signal(SIGTERM, signal_target::group), agenthost::errc::not_running);
  EXPECT_EQ(c->send_signal(SIGTERM, signal_target::tree), agenthost::errc::not_running);
  EXPECT_EQ(c->send_signal(SIGTERM, signal_target::leader), agenthost::errc::not_running);
}

// Once the leader is reaped its group id may be recycled by an unrelated process: a signal to the group then reaches
// the members of the tree still in it (found by a scan), not whatever group now has that id.
TEST(SendSignal, TheGroupWithoutItsLeaderIsSignalledThroughItsMembers) {
  for (const auto mode : {containment_kind::session, containment_kind::reaper}) {
    asio::io_context io;
    liveness_fifo fifo;
    const std::string token = random_token();
    auto c = child::spawn(io.get_executor(),
                          {.executable = AGENTHOST_FAKE_AGENT,
                           .args = {"leader-exits-early", "ready", "never-exit"},
                           .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}, {"AGENTHOST_LIVENESS_FIFO", fifo.path()}}},
                           .containment = mode,
                           .reaper_path = AGENTHOST_REAPER});
    ASSERT_TRUE(c) << c.error().message;
    bool exited = false;
    c->async_wait([&](boost::system::error_code ec, exit_status) { exited = !ec; });
    ASSERT_TRUE(read_until_line(io, *c, "ready"));
    ASSERT_TRUE(run_until(io, [&] { return exited; }));
    EXPECT_FALSE(fifo.wait_eof(std::chrono::milliseconds{0})) << "the leader's child runs";
    EXPECT_EQ(c->send_signal(SIGTERM, signal_target::group), boost::system::error_code{});
    EXPECT_TRUE(fifo.wait_eof(std::chrono::seconds{5})) << "the group's member survived SIGTERM";
    bool stopped = false;
    c->async_stop(stop_policy::kill_now(), [&](boost::system::error_code, stop_report) { stopped = true; });
    EXPECT_TRUE(run_until(io, [&] { return stopped; }));
    EXPECT_EQ(c->send_signal(SIGTERM, signal_target::group), agenthost::errc::not_running);
    kill_leftovers("AGENTHOST_TEST_TOKEN=" + token);
  }
}

// A process's identity is its pid and its start time, field 22 of /proc/<pid>/stat. Field 23 (the virtual memory
// size, which changes with every mapping) once stood in for it: a busy agent then looked like a recycled pid.
TEST(ProcTree, TheStartTimeIsField22AndDoesNotChangeWithTheMemoryMap) {
  auto field = [](int n) {
    std::ifstream in("/proc/self/stat");
    std::string line;
    std::getline(in, line);
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::string f;
    for (int i = 3; i <= n; ++i) rest >> f;
    return f;
  };
  process::detail::proc_entry before;
  ASSERT_TRUE(process::detail::read_proc_entry(::getpid(), before));
  EXPECT_EQ(std::to_string(before.start_time), field(22));
  EXPECT_EQ(std::to_string(before.threads), field(20));
  EXPECT_EQ(std::to_string(before.ppid), field(4));
  EXPECT_EQ(std::to_string(before.sid), field(6));
  const std::size_t size = std::size_t{64} << 20;
  void* map = ::mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  process::detail::proc_entry after;
  ASSERT_TRUE(process::detail::read_proc_entry(::getpid(), after));
  ::munmap(map, size);
  EXPECT_EQ(after.start_time, before.start_time);
}

TEST(SpawnOptions, AReadChunkOutsideOneByteToOneGibIsInvalidOptions) {
  asio::io_context io;
  for (const std::size_t chunk : {std::size_t{0}, (std::size_t{1} << 30) + 1}) {
    auto c = child::spawn(io.get_executor(),
                          {.executable = AGENTHOST_FAKE_AGENT, .args = {"exit", "0"}, .read_chunk_bytes = chunk});
    ASSERT_FALSE(c) << chunk;
    EXPECT_EQ(c.error().code, agenthost::errc::invalid_options);
    EXPECT_NE(c.error().message.find("read_chunk_bytes"), std::string::npos) << c.error().message;
  }
  EXPECT_STREQ(agenthost::errc_name(agenthost::errc::invalid_options), "invalid_options");
  EXPECT_EQ(zombie_children(), 0);
}

// Without close_range (Linux < 5.9) the reaper is exec'd first, in the agent's working directory: a relative
// reaper_path must not be resolved there.
TEST(SpawnOptions, ARelativeReaperPathIsTheHostsNotTheWorkingDirectorys) {
  const auto reaper = std::filesystem::relative(AGENTHOST_REAPER);
  ASSERT_TRUE(reaper.is_relative()) << reaper;
  const auto elsewhere = std::filesystem::temp_directory_path();
  ASSERT_FALSE(std::filesystem::exists(elsewhere / reaper)) << elsewhere / reaper;
  asio::io_context io;
  for (const bool reaper_first : {true, false}) {
    process::detail::disable_adopt_spawn_for_testing(reaper_first);
    auto c = child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                              .args = {"print-cwd"},
                                              .working_directory = elsewhere,
                                              .containment = containment_kind::reaper,
                                              .reaper_path = reaper,
                                              .reaper_server = false});
    process::detail::disable_adopt_spawn_for_testing(false);
    ASSERT_TRUE(c) << "reaper_first=" << reaper_first << ": " << c.error().message;
    std::optional<std::string> cwd;
    c->async_read_lines([&](boost::system::error_code ec, line_batch b) {
      cwd = !ec && !b.empty() ? std::string(b[0].text) : ec.message();
    });
    ASSERT_TRUE(run_until(io, [&] { return cwd.has_value(); }));
    EXPECT_EQ(std::filesystem::path(*cwd), std::filesystem::canonical(elsewhere)) << "reaper_first=" << reaper_first;
    bool stopped = false;
    c->async_stop(stop_policy::kill_now(), [&](boost::system::error_code, stop_report) { stopped = true; });
    ASSERT_TRUE(run_until(io, [&] { return stopped; }));
  }
  EXPECT_EQ(zombie_children(), 0);
}

}  // namespace
