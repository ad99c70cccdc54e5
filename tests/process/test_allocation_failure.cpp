// The stop under memory pressure: a stop tick whose allocation fails (std::bad_alloc from a /proc scan) is tried
// again, so the stop still ends with nothing of the tree left, and the exception never leaves io_context::run().
//
// This test program replaces the global operator new and delete (replace_operator_new.hpp) and aligned_alloc
// (Boost.Asio's handler memory): a test can make one of this thread's next allocations fail.
#include "../common/replace_operator_new.hpp"
#include "test_util.hpp"

#include <agenthost/process/child.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/strand.hpp>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <new>
#include <optional>

namespace {
// This thread's allocations to let through before one fails (then none fails again); -1: none fails.
thread_local int t_fail_after = -1;
// The same for aligned_alloc: Asio allocates its operations (a post, a timer's wait) with it.
thread_local int t_fail_aligned_after = -1;

// Whether the next allocation of a countdown fails (and ends the countdown).
bool fails_now(int& countdown) noexcept {
  if (countdown == 0) {
    countdown = -1;
    return true;
  }
  if (countdown > 0) --countdown;
  return false;
}
}  // namespace

void* test_malloc(std::size_t size) noexcept { return fails_now(t_fail_after) ? nullptr : std::malloc(size); }

extern "C" void* aligned_alloc(std::size_t alignment, std::size_t size) noexcept {
  if (fails_now(t_fail_aligned_after)) return nullptr;
  void* p = nullptr;
  return ::posix_memalign(&p, std::max(alignment, sizeof(void*)), size == 0 ? 1 : size) == 0 ? p : nullptr;
}

using namespace agenthost;
using namespace agenthost::process;
using namespace agenthost::test;

namespace {

// An agent that ignores SIGINT under session containment: the host polls its tree itself, and every stop tick scans
// /proc (and allocates).
class StopUnderMemoryPressure : public ::testing::Test {
 protected:
  void TearDown() override { kill_leftovers("AGENTHOST_TEST_TOKEN=" + token); }

  child spawn_ready() {
    auto c = child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                               .args = {"ignore-sigint", "ready", "never-exit"},
                                               .env = {.set = {{"AGENTHOST_TEST_TOKEN", token},
                                                               {"AGENTHOST_LIVENESS_FIFO", fifo.path()}}},
                                               .containment = containment_kind::session});
    if (!c) throw std::runtime_error("spawn failed: " + c.error().message);
    if (!read_until_line(io, *c, "ready")) throw std::runtime_error("no \"ready\" from the agent");
    return std::move(*c);
  }

  // A child whose tree is gone, stopped once: a stop of it now completes at once ("already gone").
  child spawn_gone() {
    auto c = child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                               .args = {"exit", "0"},
                                               .containment = containment_kind::session});
    if (!c) throw std::runtime_error("spawn failed: " + c.error().message);
    std::optional<stop_report> first;
    c->async_stop({}, [&](boost::system::error_code, stop_report rep) { first = rep; });
    if (!run_until(io, [&] { return first.has_value(); })) throw std::runtime_error("the first stop never completed");
    return std::move(*c);
  }

  // Runs one handler of `io` with the allocation after `n` others of `countdown` failing; true when it failed (the
  // handler allocated that much). A std::bad_alloc that leaves run_one_for() counts in `escaped`.
  bool run_one_failing(int& countdown, int n, std::chrono::milliseconds timeout) {
    countdown = n;
    try {
      io.run_one_for(timeout);
    } catch (const std::bad_alloc&) {
      ++escaped;
    }
    const bool failed = countdown == -1;
    countdown = -1;
    return failed;
  }

  asio::io_context io;
  std::string token = random_token();
  liveness_fifo fifo;
  int escaped = 0;
};

TEST_F(StopUnderMemoryPressure, ATickThatRunsOutOfMemoryIsTriedAgainAndTheStopEnds) {
  auto c = spawn_ready();

  std::optional<stop_report> r;
  c.async_stop(stop_policy{.graceful_wait = std::chrono::milliseconds{100}, .kill_wait = std::chrono::seconds{3}},
                [&](boost::system::error_code, stop_report rep) { r = rep; });
  // Each of the stop's first six ticks finds no memory for one of its allocations: the first, the third, … the
  // eleventh (a different place of the tick each time; under AddressSanitizer, whatever a failure leaks is reported).
  int failed_allocations = 0, ticks = 0;
  for (int i = 0; i < 6 && !r; ++i, ++ticks)
    failed_allocations += run_one_failing(t_fail_after, 2 * i, std::chrono::seconds{1}) ? 1 : 0;
  EXPECT_EQ(failed_allocations, ticks) << "a tick allocated less than the test meant to fail";
  EXPECT_EQ(escaped, 0) << "a stop tick's std::bad_alloc left io_context::run_one_for()";
  ASSERT_TRUE(run_until(io, [&] { return r.has_value(); }, std::chrono::seconds{15}))
      << "the stop never ended: a failed tick left it without a timer";
  EXPECT_EQ(r->phase, stop_phase::kill);
  EXPECT_TRUE(r->survivors.empty());
  EXPECT_TRUE(fifo.wait_eof(std::chrono::seconds{1}));
}

TEST_F(StopUnderMemoryPressure, AStopWhoseCompletionCannotBePostedCompletesOnTheNextTry) {
  // Every handler the io_context runs finds no memory for its first Asio operation, three times: the stop's timer
  // waits and the post of its completion fail in turn (Asio recycles an operation's memory, so a wait that reuses
  // its predecessor's does not allocate). Whatever failed, the stop must still complete its handler, once.
  auto c = spawn_ready();

  int completions = 0;
  std::optional<stop_report> r;
  c.async_stop(stop_policy{.graceful_wait = std::chrono::milliseconds{30}, .kill_wait = std::chrono::seconds{3}},
                [&](boost::system::error_code, stop_report rep) {
                  ++completions;
                  r = rep;
                });
  int failed_allocations = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  while (!r && failed_allocations < 3 && std::chrono::steady_clock::now() < deadline)
    failed_allocations += run_one_failing(t_fail_aligned_after, 0, std::chrono::milliseconds{100}) ? 1 : 0;
  EXPECT_GT(failed_allocations, 0) << "no Asio operation was allocated: the test did not test anything";
  EXPECT_EQ(escaped, 0) << "a std::bad_alloc of the stop left io_context::run_one_for()";
  ASSERT_TRUE(run_until(io, [&] { return r.has_value(); }, std::chrono::seconds{10}))
      << "the stop's handler was never called: a failed post lost it";
  EXPECT_TRUE(r->survivors.empty());
  EXPECT_TRUE(fifo.wait_eof(std::chrono::seconds{1}));
  io.restart();
  io.poll();
  EXPECT_EQ(completions, 1);
}

TEST_F(StopUnderMemoryPressure, AStopThatCannotPostItsCompletionThrowsAndALaterStopStillCompletes) {
  auto c = spawn_gone();

  // The tree is gone: a stop completes at once, through Asio operations (the handler's wrapper, a post) that find no
  // memory, the first, the second, …: async_stop either throws (and its handler is not called) or completes it. Either
  // way a later stop completes instead of joining one that would never end.
  int failures = 0;
  for (int k = 0; k < 20; ++k) {
    bool threw = false, called = false;
    t_fail_aligned_after = k;
    try {
      c.async_stop({}, [&](boost::system::error_code, stop_report) { called = true; });
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    const bool failed = t_fail_aligned_after == -1;
    t_fail_aligned_after = -1;
    if (!failed) break;  // async_stop makes fewer than k + 1 such allocations
    ++failures;
    run_until(io, [&] { return called; }, std::chrono::milliseconds{200});
    EXPECT_NE(threw, called) << "allocation " << k << ": async_stop must either throw or complete";
    std::optional<stop_report> later;
    c.async_stop({}, [&](boost::system::error_code, stop_report rep) { later = rep; });
    ASSERT_TRUE(run_until(io, [&] { return later.has_value(); }, std::chrono::seconds{5}))
        << "allocation " << k << ": a later stop never completed";
    EXPECT_EQ(later->phase, stop_phase::already_gone);
  }
  EXPECT_GE(failures, 2) << "async_stop allocated too little for the test to test anything";
}

// The stop's handler is bound to a strand: its completion hops there, and that hop allocates. A hop that finds no
// memory must not lose the handler (it was moved into the hop's function, destroyed with it): the handler is called
// once, later, or async_stop threw and it is never called.
TEST_F(StopUnderMemoryPressure, AStopHandlerWhoseHopFindsNoMemoryIsStillCalledOnce) {
  auto c = spawn_gone();

  auto strand = asio::make_strand(io);
  int failures = 0;
  for (int k = 0; k < 20; ++k) {
    bool threw = false;
    int calls = 0;
    t_fail_aligned_after = k;  // the k-th of this thread's Asio allocations from here on fails
    try {
      c.async_stop({}, asio::bind_executor(strand, [&](boost::system::error_code, stop_report) { ++calls; }));
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds{300};
    while (calls == 0 && !threw && std::chrono::steady_clock::now() < deadline) {
      try {
        if (io.stopped()) io.restart();
        io.run_one_for(std::chrono::milliseconds{10});
      } catch (const std::bad_alloc&) {
        ++escaped;
      }
    }
    const bool failed = t_fail_aligned_after == -1;
    t_fail_aligned_after = -1;
    if (!failed) break;  // the stop made fewer than k + 1 such allocations
    ++failures;
    io.restart();
    io.poll();  // a second call would come now
    EXPECT_EQ(calls + (threw ? 1 : 0), 1) << "allocation " << k << ": the handler must be called once, or async_stop "
                                          << "throw (called " << calls << (threw ? ", threw)" : ")");
  }
  EXPECT_GE(failures, 3) << "the stop allocated too little for the test to test anything";
  EXPECT_EQ(escaped, 0) << "a std::bad_alloc of the stop's completion left io_context::run_one_for()";
}


// Reads under memory pressure: a read whose handler is bound to a strand, with one of the k-th Asio allocations from
// its initiation on failing (the read's operation, the post or dispatch of its completion, the strand's hop). Each
// time the handler is called once, or async_read_lines throws and it is never called; a std::bad_alloc never leaves
// run(); and whatever failed, every line the agent wrote reaches a handler, once and in order. Plain and coalesced.
class ReadUnderMemoryPressure : public ::testing::TestWithParam<int> {
 protected:
  void TearDown() override { kill_leftovers("AGENTHOST_TEST_TOKEN=" + token); }
  asio::io_context io;
  std::string token = random_token();
};

TEST_P(ReadUnderMemoryPressure, EveryReadCompletesOnceOrThrowsAndNoLineIsLost) {
  const int coalescing_us = GetParam();
  auto spawned = child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                                  .args = {"ready", "read-stdin"},
                                                  .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}},
                                                  .read_coalescing = std::chrono::microseconds{coalescing_us},
                                                  .containment = containment_kind::session});
  ASSERT_TRUE(spawned) << spawned.error().message;
  child& c = *spawned;
  auto strand = asio::make_strand(io);
  std::vector<std::string> got;
  int calls = 0, escaped = 0;
  const auto handler = [&] {
    return asio::bind_executor(strand, [&](boost::system::error_code ec, line_batch b) {
      ++calls;
      EXPECT_FALSE(ec) << ec.message();
      for (const auto& l : b) got.emplace_back(l.text);
    });
  };
  const auto run_a_while = [&](const std::function<bool()>& done, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      try {
        if (io.stopped()) io.restart();
        io.run_one_for(std::chrono::milliseconds{10});
      } catch (const std::bad_alloc&) {
        ++escaped;
      }
    }
    return done();
  };
  std::vector<std::string> want = {"ready"};
  int failures = 0;
  for (int k = 0; k < 20; ++k) {
    // The agent's next line waits in the pipe before the read starts.
    const std::string text = "line " + std::to_string(k);
    bool written = false;
    c.async_write_stdin(asio::buffer(text + "\n"), [&](boost::system::error_code, std::size_t) { written = true; });
    ASSERT_TRUE(run_a_while([&] { return written; }, std::chrono::seconds{5}));
    want.push_back("stdin: " + text);
    ASSERT_TRUE(run_a_while([&] { return c.stdout_pending(); }, std::chrono::seconds{5}));
    const int calls_before = calls;
    bool threw = false;
    t_fail_aligned_after = k;
    try {
      c.async_read_lines(handler());
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    run_a_while([&] { return threw || calls > calls_before; }, std::chrono::milliseconds{300});
    const bool failed = t_fail_aligned_after == -1;
    t_fail_aligned_after = -1;
    io.restart();
    io.poll();  // a second call would come now
    EXPECT_EQ(calls - calls_before + (threw ? 1 : 0), 1)
        << "allocation " << k << ": the handler must be called once, or async_read_lines throw (called "
        << calls - calls_before << (threw ? ", threw)" : ")");
    if (failed) ++failures;
  }
  EXPECT_GE(failures, 3) << "the reads allocated too little for the test to test anything";
  EXPECT_EQ(escaped, 0) << "a read's std::bad_alloc left io_context::run_one_for()";
  // The rest: every line written, whatever failed on its way.
  c.close_stdin();
  ASSERT_TRUE(read_to_end(io, c, [&](line_batch b) {
    for (const auto& l : b) got.emplace_back(l.text);
  }));
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(PlainAndCoalesced, ReadUnderMemoryPressure, ::testing::Values(0, 2000));

}  // namespace
