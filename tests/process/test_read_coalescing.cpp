// spawn_options::read_coalescing: stdout read by the per-context poller instead of the reactor. Everything a consumer
// sees must be what the normal path gives — bytes, lines, EOF, cancellation, destruction — only later.
#include "read_coalescing_fixture.hpp"

using namespace agenthost::test::read_coalescing;

namespace {

TEST_F(ReadCoalescingTest, SameLinesAsTheNormalPathWhateverTheChunking) {
  constexpr std::size_t kMax = 3000;
  const std::string file = write_transcript(3000, kMax);
  // Each chunking twice, with and without coalescing, all on one io_context at once.
  const std::vector<std::vector<std::string>> chunkings = {
      {}, {"--chunk", "1", "--chunk-delay-us", "0"}, {"--chunk", "7"}, {"--chunk", "331", "--chunk-delay-us", "50"},
      {"--chunk", "4093"}, {"--chunk", "65537"}, {"--chunk", "300000"}};
  std::vector<std::unique_ptr<child>> children;
  std::vector<std::unique_ptr<reader>> readers;
  for (const auto& chunking : chunkings) {
    for (auto coalescing : {std::chrono::microseconds{0}, std::chrono::microseconds{1500}}) {
      std::vector<std::string> args = {"replay", file, "--stream"};
      if (!chunking.empty()) args.insert(args.end(), chunking.begin(), chunking.end());
      if (chunking.size() == 2) args.insert(args.end(), {"--chunk-delay-us", "0"});
      auto o = options(args, coalescing);
      o.max_line_bytes = kMax;
      o.oversize_head_bytes = 100;
      o.read_chunk_bytes = 64 << 10;
      children.push_back(std::make_unique<child>(spawn(o)));
      readers.push_back(std::make_unique<reader>(children.back().get()));
      readers.back()->start();
    }
  }
  ASSERT_TRUE(run_until(io, [&] {
    return std::all_of(readers.begin(), readers.end(), [](const auto& r) { return r->eof; });
  }, 120s));
  const auto& reference = readers[0]->lines;
  ASSERT_EQ(reference.size(), 3001u);
  EXPECT_EQ(reference.back().text, "{\"last\":\"no newline\"}");
  EXPECT_TRUE(std::any_of(reference.begin(), reference.end(), [](const auto& l) { return l.oversize; }));
  EXPECT_EQ(reference.front().text.substr(0, 6), "{\"i\":0");  // the BOM is gone
  for (std::size_t i = 0; i < readers.size(); ++i) {
    EXPECT_EQ(readers[i]->error, asio::error::eof) << i;
    const auto& got = readers[i]->lines;
    EXPECT_EQ(got.size(), reference.size()) << "chunking " << i / 2 << (i % 2 ? " coalesced" : " normal");
    for (std::size_t k = 0; k < std::min(got.size(), reference.size()); ++k) {
      if (got[k] == reference[k]) continue;
      ADD_FAILURE() << "chunking " << i / 2 << (i % 2 ? " coalesced" : " normal") << ": line " << k << " differs: '"
                    << got[k].text.substr(0, 80) << "' (" << got[k].oversize << ", " << got[k].total << ") vs '"
                    << reference[k].text.substr(0, 80) << "' (" << reference[k].oversize << ", " << reference[k].total
                    << ")";
      break;
    }
  }
  for (auto& c : children) stop(*c);
}

TEST_F(ReadCoalescingTest, OversizeLineThenNormalLines) {
  auto o = options({"line", "3000000", "stdout", "after", "line", "100", "exit", "0"});
  o.max_line_bytes = 1 << 20;
  auto c = spawn(o);
  reader r{&c};
  r.start();
  ASSERT_TRUE(run_until(io, [&] { return r.eof; }));
  ASSERT_EQ(r.lines.size(), 3u);
  EXPECT_TRUE(r.lines[0].oversize);
  EXPECT_EQ(r.lines[0].total, 3000000u);
  EXPECT_EQ(r.lines[0].text.size(), o.oversize_head_bytes);
  EXPECT_EQ(r.lines[1].text, "after");
  EXPECT_FALSE(r.lines[2].oversize);
  EXPECT_EQ(r.lines[2].text.size(), 100u);
  stop(c);
}

TEST_F(ReadCoalescingTest, UnterminatedLastLineThenEofThenExit) {
  auto c = spawn(options({"stdout", "one", "no-trailing-newline", "--text", "tail", "exit", "4"}));
  reader r{&c};
  r.start();
  ASSERT_TRUE(run_until(io, [&] { return r.eof; }));
  EXPECT_EQ(r.error, asio::error::eof);
  ASSERT_EQ(r.lines.size(), 2u);
  EXPECT_EQ(r.lines[0].text, "one");
  EXPECT_EQ(r.lines[1].text, "tail");
  // Another read after EOF: EOF again, at once.
  std::optional<boost::system::error_code> again;
  c.async_read_lines([&](boost::system::error_code ec, line_batch b) {
    EXPECT_TRUE(b.empty());
    again = ec;
  });
  ASSERT_TRUE(run_until(io, [&] { return again.has_value(); }));
  EXPECT_EQ(*again, asio::error::eof);
  std::optional<exit_status> st;
  c.async_wait([&](boost::system::error_code, exit_status s) { st = s; });
  ASSERT_TRUE(run_until(io, [&] { return st.has_value(); }));
  ASSERT_NE(st->as_exited(), nullptr);
  EXPECT_EQ(st->as_exited()->code, 4);
  stop(c);
}

TEST_F(ReadCoalescingTest, OneReadAtATime) {
  auto c = spawn(options({"never-exit"}));
  std::optional<boost::system::error_code> first, second;
  c.async_read_lines([&](boost::system::error_code ec, line_batch) { first = ec; });
  c.async_read_lines([&](boost::system::error_code ec, line_batch) { second = ec; });
  ASSERT_TRUE(run_until(io, [&] { return second.has_value(); }));
  EXPECT_EQ(*second, agenthost::errc::operation_in_progress);
  EXPECT_FALSE(first.has_value());
  stop(c);  // kills the tree: the pending read ends with EOF
  ASSERT_TRUE(run_until(io, [&] { return first.has_value(); }));
  EXPECT_EQ(*first, asio::error::eof);
}

// A read is in progress until its handler ran, not only until its lines were read: they are views into the child's
// buffer, which the next read clears. The first read's handler waits on a second io_context (not run yet); a read
// started meanwhile is refused, and the first handler still gets its own line. Plain reads too.
TEST_F(ReadCoalescingTest, AReadWhoseHandlerHasNotRunYetIsStillInProgress) {
  for (const auto coalescing : {0us, 2000us}) {
    auto c = spawn(options({"ready", "read-stdin"}, coalescing));
    asio::io_context handler_io;
    std::vector<std::string> first;
    std::optional<boost::system::error_code> first_ec;
    const auto read_first = [&](std::string_view want) {
      first.clear();
      first_ec.reset();
      c.async_read_lines(asio::bind_executor(handler_io, [&](boost::system::error_code ec, line_batch b) {
        first_ec = ec;
        for (const auto& l : b) first.emplace_back(l.text);
      }));
      // Until the read took the agent's line out of the pipe and queued the handler on handler_io: nothing in the
      // pipe, and yet output pending.
      const auto taken = [&] { return unread_pipe_bytes(c.pid()) == 0 && c.stdout_pending(); };
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      while (!taken() && std::chrono::steady_clock::now() < deadline) {
        if (io.stopped()) io.restart();
        io.run_for(1ms);
      }
      ASSERT_TRUE(taken()) << coalescing.count() << ": the read never took " << want;
      io.restart();
      io.poll();  // a plain read's completion hops through io (a post) before it reaches handler_io
    };
    read_first("ready");
    handler_io.run();
    EXPECT_EQ(first, std::vector<std::string>{"ready"});
    ASSERT_TRUE(write_stdin(c, "x\n"));
    read_first("the echo of x");
    std::optional<boost::system::error_code> second;
    std::vector<std::string> second_lines;
    c.async_read_lines([&](boost::system::error_code ec, line_batch b) {
      second = ec;
      for (const auto& l : b) second_lines.emplace_back(l.text);
    });
    // On the old code the second read took this line, into the buffer that the first handler's lines view.
    ASSERT_TRUE(write_stdin(c, "y\n"));
    ASSERT_TRUE(run_until(io, [&] { return second.has_value(); }));
    EXPECT_EQ(*second, agenthost::errc::operation_in_progress) << coalescing.count();
    EXPECT_TRUE(second_lines.empty());
    EXPECT_FALSE(first_ec.has_value());
    handler_io.restart();
    handler_io.run();
    ASSERT_TRUE(first_ec.has_value());
    EXPECT_FALSE(*first_ec);
    EXPECT_EQ(first, std::vector<std::string>{"stdin: x"}) << coalescing.count();
    // Now the next read may start: it gets the agent's next line.
    second.reset();
    c.async_read_lines([&](boost::system::error_code ec, line_batch b) {
      second = ec;
      for (const auto& l : b) second_lines.emplace_back(l.text);
    });
    ASSERT_TRUE(run_until(io, [&] { return second.has_value(); }));
    EXPECT_FALSE(*second);
    EXPECT_EQ(second_lines, std::vector<std::string>{"stdin: y"}) << coalescing.count();
    stop(c);
  }
}

// stdout_pending(), which a watchdog asks before it calls an agent silent: false while the agent waits; true once its
// line is in the pipe and no read took it; false again when a read handed it over, and at the end. Plain reads too.
TEST_F(ReadCoalescingTest, StdoutPendingSeesALineNoReadHandedOver) {
  for (const auto coalescing : {0us, 2000us}) {
    auto c = spawn(options({"ready", "read-stdin"}, coalescing));
    std::vector<std::string> got;
    boost::system::error_code read_ec;
    const auto read_once = [&] {
      got.clear();
      bool done = false;
      c.async_read_lines([&](boost::system::error_code ec, line_batch b) {
        read_ec = ec;
        for (const auto& l : b) got.emplace_back(l.text);
        done = true;
      });
      EXPECT_TRUE(run_until(io, [&] { return done; }));
    };
    read_once();
    EXPECT_EQ(got, std::vector<std::string>{"ready"});
    EXPECT_FALSE(c.stdout_pending()) << coalescing.count();  // the agent waits for its stdin
    ASSERT_TRUE(write_stdin(c, "x\n"));
    // The echo comes when the agent runs; with no read pending it stays in the pipe.
    EXPECT_TRUE(wait_for_unread_output(c, std::chrono::steady_clock::now() + 10s)) << coalescing.count();
    read_once();
    EXPECT_EQ(got, std::vector<std::string>{"stdin: x"});
    EXPECT_FALSE(c.stdout_pending()) << coalescing.count();
    c.close_stdin();  // the agent's steps end: it exits
    read_once();
    EXPECT_EQ(read_ec, asio::error::eof);
    EXPECT_FALSE(c.stdout_pending()) << coalescing.count();
    stop(c);
  }
}

TEST_F(ReadCoalescingTest, CancellingAPendingReadLosesNoData) {
  // Declared before the child: on a failed assertion a read bound to them may still be pending when the test ends, and
  // the child's destructor completes it (a signal must outlive the operations bound to it).
  asio::cancellation_signal old_sig, new_sig;
  auto c = spawn(options({"read-stdin"}));
  for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                    asio::cancellation_type::total}) {
    asio::cancellation_signal sig;
    std::optional<boost::system::error_code> ec;
    c.async_read_lines(asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code e, line_batch b) {
      EXPECT_TRUE(b.empty());
      ec = e;
    }));
    io.poll();
    EXPECT_FALSE(ec.has_value());
    sig.emit(type);
    ASSERT_TRUE(run_until(io, [&] { return ec.has_value(); }));
    EXPECT_EQ(*ec, asio::error::operation_aborted);
  }
  // A read under a new slot; emitting the old signal of an earlier read again must not cancel it. Nothing is written
  // to the child before the old read is aborted: its answer could otherwise complete that read first (seen under
  // ThreadSanitizer on a loaded machine).
  std::optional<boost::system::error_code> stale;
  c.async_read_lines(asio::bind_cancellation_slot(old_sig.slot(), [&](boost::system::error_code e, line_batch) {
    stale = e;
  }));
  io.poll();
  old_sig.emit(asio::cancellation_type::terminal);
  ASSERT_TRUE(run_until(io, [&] { return stale.has_value(); }));
  EXPECT_EQ(*stale, asio::error::operation_aborted);
  std::vector<std::string> got;
  c.async_read_lines(asio::bind_cancellation_slot(new_sig.slot(), [&](boost::system::error_code e, line_batch b) {
    EXPECT_FALSE(e);
    for (const auto& l : b) got.emplace_back(l.text);
  }));
  old_sig.emit(asio::cancellation_type::terminal);  // the old read is finished: nothing happens
  // The stream goes on: a line written now arrives whole, to the read under the new slot.
  bool written = false;
  c.async_write_stdin(asio::buffer(std::string("hello\n")), [&](boost::system::error_code e, std::size_t) {
    EXPECT_FALSE(e);
    written = true;
  });
  ASSERT_TRUE(run_until(io, [&] { return written && !got.empty(); }));
  EXPECT_EQ(got, std::vector<std::string>{"stdin: hello"});
  EXPECT_TRUE(c.running());
  stop(c);
}

TEST_F(ReadCoalescingTest, DestroyingWithAPendingReadAbortsIt) {
  auto c = std::make_unique<child>(spawn(options({"stdout", "ready", "never-exit"})));
  bool ready = false;
  c->async_read_lines([&](boost::system::error_code, line_batch b) { ready = !b.empty(); });
  ASSERT_TRUE(run_until(io, [&] { return ready; }));
  std::optional<boost::system::error_code> ec;
  c->async_read_lines([&](boost::system::error_code e, line_batch b) {
    EXPECT_TRUE(b.empty());
    ec = e;
  });
  io.poll();
  c.reset();  // kills the tree synchronously
  ASSERT_TRUE(run_until(io, [&] { return ec.has_value(); }));
  EXPECT_EQ(*ec, asio::error::operation_aborted);
  // Nothing is left to do: the poller stopped ticking, the context runs out of work.
  io.restart();
  io.run_for(5s);
  EXPECT_TRUE(io.stopped());
}

// An executor that keeps what is submitted to it until the test runs it: a handler bound to it completes exactly when
// the test says, whatever the io_context runs meanwhile.
class parked_executor {
 public:
  parked_executor(asio::io_context& ctx, std::vector<std::function<void()>>& parked) : ctx_(&ctx), parked_(&parked) {}
  asio::execution_context& query(asio::execution::context_t) const noexcept { return *ctx_; }
  static constexpr asio::execution::blocking_t::never_t query(asio::execution::blocking_t) noexcept { return {}; }
  template <class F>
  void execute(F f) const {
    auto kept = std::make_shared<F>(std::move(f));
    parked_->push_back([kept] { (*kept)(); });
  }
  bool operator==(const parked_executor& o) const noexcept { return parked_ == o.parked_; }
  bool operator!=(const parked_executor& o) const noexcept { return parked_ != o.parked_; }

 private:
  asio::io_context* ctx_;
  std::vector<std::function<void()>>* parked_;
};

// A read's completion carries views into the child. A child destroyed after its read completed but before the
// handler ran (a handler that ran first destroyed it) must give that handler operation_aborted and no lines, never
// views into a destroyed child: in both read modes.
TEST_F(ReadCoalescingTest, ACompletionQueuedWhenTheChildIsDestroyedIsAborted) {
  for (const auto coalescing : {std::chrono::microseconds(0), std::chrono::microseconds(2ms)}) {
    SCOPED_TRACE(coalescing.count() == 0 ? "plain reads" : "coalesced reads");
    auto c = std::make_unique<child>(spawn(options({"stdout", "ready", "never-exit"}, coalescing)));
    std::vector<std::function<void()>> parked;
    std::optional<boost::system::error_code> ec;
    std::size_t lines = 0;
    const auto handler = [&](boost::system::error_code e, line_batch b) {
      ec = e;
      lines = b.size();
    };
    c->async_read_lines(asio::bind_executor(parked_executor(io, parked), handler));
    ASSERT_TRUE(run_until(io, [&] { return !parked.empty(); }, 20s)) << "the read did not complete";
    c.reset();  // kills the tree synchronously, while the completion waits
    for (auto& f : std::exchange(parked, {})) f();
    ASSERT_TRUE(ec.has_value());
    EXPECT_EQ(*ec, asio::error::operation_aborted);
    EXPECT_EQ(lines, 0u);
    io.restart();
    io.run_for(2s);
    EXPECT_TRUE(io.stopped()) << "work left behind";
    io.restart();
  }
}

TEST_F(ReadCoalescingTest, ManyChildrenOneContextAndAConsumerThatDoesNotRead) {
  // 16 children on one context; one of them (`idle`) is not read until the others are done. It writes 20 MB, far more
  // than its pipe holds: as long as nobody reads it, it cannot exit — the poller never reads a pipe without a pending
  // read.
  std::vector<std::unique_ptr<child>> children;
  std::vector<std::unique_ptr<reader>> readers;
  for (int i = 0; i < 16; ++i) {
    children.push_back(std::make_unique<child>(
        spawn(options({"flood-lines", std::to_string(2000 + i * 100), "--size", "100", "exit", "0"},
                      std::chrono::microseconds{1000 + 500 * (i % 3)}))));
    readers.push_back(std::make_unique<reader>(children.back().get()));
    readers.back()->start();
  }
  auto idle = spawn(options({"flood-lines", "20000", "--size", "1000", "exit", "0"}, 5ms));
  std::optional<exit_status> idle_status;
  idle.async_wait([&](boost::system::error_code, exit_status s) { idle_status = s; });
  ASSERT_TRUE(run_until(io, [&] {
    return std::all_of(readers.begin(), readers.end(), [](const auto& r) { return r->eof; });
  }, 60s));
  for (int i = 0; i < 16; ++i) {
    ASSERT_EQ(readers[i]->lines.size(), static_cast<std::size_t>(2000 + i * 100)) << i;
    for (const auto& l : readers[i]->lines) ASSERT_EQ(l.total, 100u);
  }
  EXPECT_FALSE(idle_status.has_value()) << "the unread agent wrote 20 MB: its pipe was read without a pending read";
  reader r{&idle};
  r.start();
  ASSERT_TRUE(run_until(io, [&] { return r.eof && idle_status.has_value(); }, 60s));
  EXPECT_EQ(r.lines.size(), 20000u);
  EXPECT_TRUE(idle_status->success());
  for (auto& c : children) stop(*c);
  stop(idle);
}

TEST_F(ReadCoalescingTest, BulkOutputIsNotThrottledByTheTick) {
  // 130 MB with a 50 ms tick: were every read to wait for a tick, this would take > 25 s (130 MB / 256 KiB reads).
  // A 30 MB line first: many full reads without a line in between (delivered whole: below max_line_bytes).
  auto c = spawn(options({"line", "30000000", "flood-lines", "100000", "--size", "1000", "exit", "0"}, 50ms));
  reader r{&c};
  r.start();
  ASSERT_TRUE(run_until(io, [&] { return r.eof; }, 20s));
  ASSERT_EQ(r.lines.size(), 100001u);
  EXPECT_FALSE(r.lines[0].oversize);
  EXPECT_EQ(r.lines[0].total, 30000000u);
  EXPECT_EQ(r.lines[0].text, std::string(30000000, 'x'));
  stop(c);
}

TEST_F(ReadCoalescingTest, ChildrenOnStrandsOfAMultiThreadedContext) {
  // The thread-safety rules are those of any child: each child serialized by its strand; the poller is shared.
  constexpr int kChildren = 6;
  std::vector<std::unique_ptr<child>> children;
  std::vector<std::unique_ptr<reader>> readers;
  std::atomic<int> done{0};
  std::vector<std::size_t> counts(kChildren);
  std::vector<std::function<void()>> next(kChildren);
  for (int i = 0; i < kChildren; ++i) {
    auto strand = asio::make_strand(io);
    children.push_back(std::make_unique<child>(
        spawn(options({"flood-lines", "5000", "--size", "200", "exit", "0"}, 1ms), strand)));
    next[i] = [&, i] {
      children[i]->async_read_lines(asio::bind_executor(
          children[i]->get_executor(), [&, i](boost::system::error_code ec, line_batch b) {
            if (ec) {
              ++done;
              return;
            }
            counts[i] += b.size();
            next[i]();
          }));
    };
    asio::post(children[i]->get_executor(), next[i]);
  }
  std::thread t1([&] { io.run(); }), t2([&] { io.run(); });
  t1.join();
  t2.join();
  EXPECT_EQ(done.load(), kChildren);
  for (int i = 0; i < kChildren; ++i) EXPECT_EQ(counts[i], 5000u) << i;
  io.restart();
  for (auto& c : children) stop(*c);
}

TEST_F(ReadCoalescingTest, NoDescriptorIsLeaked) {
  {
    auto warm = spawn(options({"stdout", "x"}));  // first use creates the context's services (and their fds)
    reader r{&warm};
    r.start();
    ASSERT_TRUE(run_until(io, [&] { return r.eof; }));
    stop(warm);
  }
  settle_spawn_server();
  const int before = open_fd_count();
  {
    std::vector<std::unique_ptr<child>> children;
    std::vector<std::unique_ptr<reader>> readers;
    for (int i = 0; i < 8; ++i) {
      children.push_back(std::make_unique<child>(spawn(options({"stdout", "a", "stdout", "b"}))));
      readers.push_back(std::make_unique<reader>(children.back().get()));
      readers.back()->start();
    }
    auto pending = spawn(options({"never-exit"}));
    bool aborted = false;
    pending.async_read_lines([&](boost::system::error_code ec, line_batch) { aborted = ec == asio::error::eof; });
    ASSERT_TRUE(run_until(io, [&] {
      return std::all_of(readers.begin(), readers.end(), [](const auto& r) { return r->eof; });
    }));
    for (auto& c : children) stop(*c);
    stop(pending);
    ASSERT_TRUE(run_until(io, [&] { return aborted; }));
  }
  io.run_for(10ms);
  EXPECT_EQ(open_fd_count(), before);
}

}  // namespace
