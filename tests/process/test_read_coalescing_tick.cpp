// Read coalescing: what one handler of a tick does to the other children that tick found ready (destroys them,
// cancels their reads, throws).
#include "read_coalescing_fixture.hpp"

using namespace agenthost::test::read_coalescing;

namespace {

TEST_F(ReadCoalescingTest, AHandlerThatDestroysTheOtherReadyChildrenOfItsTick) {
  // Four children, each with a line ready; a long tick makes it all but certain that one tick sees every pipe ready.
  // The first handler to run destroys the other three: the poller still holds their sources for this tick (it looks
  // ahead at the next one, see poll_source::warm) and must neither touch the destroyed children nor complete their
  // reads with data. Under ASan a read of a destroyed child fails here.
  std::vector<std::unique_ptr<child>> children;
  std::vector<std::optional<boost::system::error_code>> results;
  const auto first = first_handler_acts_on_the_others(
      children, results, [&](std::size_t i, auto handler) { children[i]->async_read_lines(std::move(handler)); },
      [&](std::size_t k) { children[k].reset(); });  // kills the tree synchronously
  ASSERT_TRUE(first.has_value());
  for (std::size_t k = 0; k < results.size(); ++k) {
    if (k != *first) {
      EXPECT_EQ(*results[k], asio::error::operation_aborted) << k;
    }
  }
  stop(*children[*first]);
}

TEST_F(ReadCoalescingTest, AHandlerThatCancelsTheOtherReadsOfItsTickLosesNoLine) {
  // As above, but the first handler cancels the other three reads. With the children on the tick's own thread the
  // poller reads every ready pipe of the tick in one batch before the first handler runs: what it read for a read
  // cancelled since must come with that child's next read, not be dropped with the aborted one.
  std::array<asio::cancellation_signal, 4> sigs;  // before the children: they must outlive the reads bound to them
  std::vector<std::unique_ptr<child>> children;
  std::vector<std::optional<boost::system::error_code>> results;
  const auto first = first_handler_acts_on_the_others(
      children, results,
      [&](std::size_t i, auto handler) {
        children[i]->async_read_lines(asio::bind_cancellation_slot(sigs[i].slot(), std::move(handler)));
      },
      [&](std::size_t k) { sigs[k].emit(asio::cancellation_type::terminal); });
  ASSERT_TRUE(first.has_value());
  for (std::size_t k = 0; k < children.size(); ++k) {
    if (k == *first) continue;
    EXPECT_EQ(*results[k], asio::error::operation_aborted) << k;
    // The next read gets the line: from the pipe, or (read by the tick's batch) from the child.
    std::vector<std::string> got;
    children[k]->async_read_lines([&](boost::system::error_code ec, line_batch b) {
      EXPECT_FALSE(ec) << k;
      for (const auto& l : b) got.emplace_back(l.text);
      if (got.empty()) got.emplace_back("<nothing>");
    });
    ASSERT_TRUE(run_until(io, [&] { return !got.empty(); }, 20s)) << k;
    EXPECT_EQ(got, std::vector<std::string>{"ready"}) << k;
  }
  for (auto& c : children) stop(*c);
}

// A read handler that throws leaves run() (as from any handler), and the other reads of its tick still complete when
// run() is called again: the poller had read their bytes already, so dropping their completions lost those lines.
TEST_F(ReadCoalescingTest, AHandlerThatThrowsStrandsNoOtherReadOfItsTick) {
  std::vector<std::unique_ptr<child>> children;
  for (int i = 0; i < 4; ++i)
    children.push_back(std::make_unique<child>(spawn(options({"stdout", "ready", "never-exit"}, 200ms))));
  // Every line is in its pipe before any read starts: the first tick sees them all.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (auto& c : children) wait_for_unread_output(*c, deadline);
  std::vector<std::vector<std::string>> got(children.size());
  bool threw = false;
  for (std::size_t i = 0; i < children.size(); ++i) {
    children[i]->async_read_lines([&, i](boost::system::error_code ec, line_batch b) {
      EXPECT_FALSE(ec) << i;
      for (const auto& l : b) got[i].emplace_back(l.text);
      if (!threw) {
        threw = true;
        throw std::runtime_error("the consumer failed");
      }
    });
  }
  int caught = 0;
  const auto all_read = [&] { return std::all_of(got.begin(), got.end(), [](const auto& g) { return !g.empty(); }); };
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (!all_read() && std::chrono::steady_clock::now() < until) {
    try {
      if (io.stopped()) io.restart();
      io.run_for(50ms);
    } catch (const std::runtime_error&) {
      ++caught;
    }
  }
  EXPECT_EQ(caught, 1);
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], std::vector<std::string>{"ready"}) << i;
  for (auto& c : children) stop(*c);
}

}  // namespace
