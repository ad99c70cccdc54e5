// The fixture of the read-coalescing tests (test_read_coalescing*.cpp): children on one io_context, read by the
// per-context poller.
#pragma once

#include "test_util.hpp"

#include <agenthost/process/child.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/strand.hpp>

#include <array>
#include <atomic>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

using namespace agenthost;
using namespace agenthost::process;
using namespace agenthost::test;

// A named namespace: the fixture must be one type in every file, or GoogleTest refuses the suite.
namespace agenthost::test::read_coalescing {

struct line_record {
  std::string text;
  bool oversize = false;
  std::size_t total = 0;
  bool operator==(const line_record&) const = default;
};

// Reads one child to EOF, asynchronously; several readers can share an io_context.
struct reader {
  explicit reader(child* ch) : c(ch) {}
  child* c;
  std::vector<line_record> lines;
  std::size_t batches = 0;
  bool eof = false;
  boost::system::error_code error;

  void start() {
    c->async_read_lines([this](boost::system::error_code ec, line_batch b) {
      if (ec) {
        eof = true;
        error = ec;
        return;
      }
      EXPECT_FALSE(b.empty());
      ++batches;
      for (const auto& l : b) lines.push_back({std::string(l.text), l.oversize, l.total_bytes});
      start();
    });
  }
};

class ReadCoalescingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/agenthost-coalesce-XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  void TearDown() override {
    kill_leftovers("AGENTHOST_TEST_TOKEN=" + token);
    EXPECT_EQ(zombie_children(), 0);
    std::filesystem::remove_all(dir);
  }

  spawn_options options(std::vector<std::string> args, std::chrono::microseconds coalescing = 2ms) {
    return {.executable = AGENTHOST_FAKE_AGENT,
            .args = std::move(args),
            .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}},
            .read_coalescing = coalescing,
            .containment = containment_kind::reaper,
            .reaper_path = AGENTHOST_REAPER};
  }

  child spawn(spawn_options o, asio::any_io_executor ex = {}) {
    auto c = child::spawn(ex ? ex : io.get_executor(), std::move(o));
    if (!c) throw std::runtime_error("spawn failed: " + c.error().message);
    return std::move(*c);
  }

  // Writes `text` to `c`'s stdin and runs io until the write completed; true when it did, without error.
  bool write_stdin(child& c, std::string_view text) {
    std::optional<boost::system::error_code> result;
    c.async_write_stdin(asio::buffer(text), [&](boost::system::error_code ec, std::size_t) { result = ec; });
    return run_until(io, [&] { return result.has_value(); }) && !*result;
  }

  // Waits, up to `deadline`, until `c` has output that no read took (stdout_pending); true when it has.
  static bool wait_for_unread_output(child& c, std::chrono::steady_clock::time_point deadline) {
    while (!c.stdout_pending() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
    return c.stdout_pending();
  }

  void stop(child& c) {
    bool done = false;
    c.async_stop(stop_policy::kill_now(), [&](boost::system::error_code ec, stop_report) {
      EXPECT_FALSE(ec);
      done = true;
    });
    EXPECT_TRUE(run_until(io, [&] { return done; }));
  }

  // A transcript with lines of random length (empty to beyond max_line_bytes), CRLF endings, a BOM first and an
  // unterminated last line. Fixed seed: the same bytes every run.
  std::string write_transcript(std::size_t lines, std::size_t max_len) {
    std::mt19937 rng(42);
    std::string data = "\xEF\xBB\xBF";
    for (std::size_t i = 0; i < lines; ++i) {
      const std::size_t len = rng() % 8 == 0 ? rng() % (max_len * 2) : rng() % 200;
      data += "{\"i\":" + std::to_string(i) + ",\"pad\":\"" + std::string(len, static_cast<char>('a' + i % 26)) + "\"}";
      data += rng() % 5 == 0 ? "\r\n" : "\n";
    }
    data += "{\"last\":\"no newline\"}";
    const std::string path = dir + "/transcript.jsonl";
    std::ofstream(path, std::ios::binary) << data;
    return path;
  }

  // Four children, each with a line ready, one read each, started by `start_read(i, handler)`; a long tick makes it all
  // but certain that one tick sees every pipe ready. The first handler to run checks its line and calls
  // `act_on_other(k)` for each of the other three, whose reads must then complete without lines. Returns that first
  // child's index (nullopt when the reads did not all complete); `results` gets every read's outcome.
  template <class StartRead, class ActOnOther>
  std::optional<std::size_t> first_handler_acts_on_the_others(
      std::vector<std::unique_ptr<child>>& children, std::vector<std::optional<boost::system::error_code>>& results,
      StartRead start_read, ActOnOther act_on_other) {
    for (int i = 0; i < 4; ++i)
      children.push_back(std::make_unique<child>(spawn(options({"stdout", "ready", "never-exit"}, 200ms))));
    results.assign(children.size(), std::nullopt);
    // Shared with the handlers: on a failed wait, some may still run after this returns (when the test ends).
    auto first = std::make_shared<std::optional<std::size_t>>();
    for (std::size_t i = 0; i < children.size(); ++i) {
      start_read(i, [&results, &children, act_on_other, first, i](boost::system::error_code ec, line_batch b) {
        results[i] = ec;
        if (*first) {
          EXPECT_TRUE(b.empty()) << "child " << i << ": its read completed with lines after the first handler";
          return;
        }
        *first = i;
        EXPECT_FALSE(ec);
        ASSERT_FALSE(b.empty());
        EXPECT_EQ(b.front().text, "ready");
        for (std::size_t k = 0; k < children.size(); ++k) {
          if (k != i) act_on_other(k);
        }
      });
    }
    if (!run_until(io, [&] {
          return std::all_of(results.begin(), results.end(), [](const auto& r) { return r.has_value(); });
        }, 20s))
      return std::nullopt;
    return *first;
  }

  asio::io_context io;
  std::string token = random_token();
  std::string dir;
};

}  // namespace agenthost::test::read_coalescing
