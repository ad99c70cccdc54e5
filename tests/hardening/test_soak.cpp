// Soak: many spawn → stream → cancel cycles, 8 runs at a time, cancelled at random points (before the start, after
// the k-th message, after a random delay, never), agents that cooperate or ignore the stop signal and keep a tool
// child in its own session. Afterwards: no descriptor more than before, no zombie, no surviving process, RSS stable.
//
// The default suite runs a short variant (Soak.ShortCycles, 100 cycles). The full run (Soak.FullCycles, 1,000 cycles)
// is skipped unless AGENTHOST_SOAK=1. AGENTHOST_SOAK_CYCLES=N overrides the count, AGENTHOST_SOAK_SEED the seed.
// Two threads run the io_context; every run has its own strand (the library's objects need serialized use).
#include "hardening_util.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <condition_variable>
#include <mutex>
#include <thread>

using namespace agenthost;
using namespace agenthost::test;
using transport::message;
using transport::message_type;

namespace {

const std::string fixtures = AGENTHOST_FIXTURES_DIR;
const std::string tool_turn = fixtures + "/pi/pi-0.73.1-json-tool-turn.jsonl";

struct soak_figures {
  std::size_t cycles = 0, completed = 0, cancelled = 0, failed = 0, contract_violations = 0, wrong_ec = 0;
  int fds_after = 0, zombies = 0, survivors = 0;
  long rss_warm_kib = 0, rss_end_kib = 0, hwm_kib = 0;
  std::vector<long> rss_samples_kib;  // after each quarter of the cycles (runs in flight)
  double seconds = 0;
};

enum class cancel_point { before_start, after_messages, after_delay, never };

class Soak : public ::testing::Test {
 protected:
  void TearDown() override { kill_leftovers("AGENTHOST_TEST_TOKEN=" + token); }

  // One run on its own strand; calls `done` on that strand with the terminal.
  void start_one(asio::io_context& io, std::mt19937& rng, const std::function<void(const std::vector<std::string>&,
                                                                                   bool, const message&)>& done) {
    struct state {
      asio::cancellation_signal sig;
      std::vector<message> messages;
      cancel_point point = cancel_point::never;
      std::size_t after = 0;
      std::optional<asio::steady_timer> timer;
      bool finished = false;
    };
    auto strand = asio::make_strand(io);
    auto st = std::make_shared<state>();
    st->point = static_cast<cancel_point>(rng() % 4);
    st->after = rng() % 40;
    const auto delay = std::chrono::milliseconds(rng() % 60);
    const bool hostile = rng() % 3 == 0;  // ignores SIGTERM and keeps a tool child in its own session
    const bool ends_by_itself = rng() % 2 == 0;
    std::vector<std::string> args;
    if (hostile) args = {"ignore-sigterm", "setsid-child"};
    args.insert(args.end(), {"replay", tool_turn, "--delay-ms", std::to_string(rng() % 3)});
    if (!ends_by_itself) args.emplace_back("never-exit");
    providers::run_options opts{.linger_after_finish = std::chrono::milliseconds(50),
                                .drain_after_exit = std::chrono::milliseconds(50),
                                .stop = rng() % 2 == 0 ? process::stop_policy::sigterm() : process::stop_policy::ctrl_c()};
    opts.stop.graceful_wait = std::chrono::milliseconds(100);
    process::spawn_options spawn{.executable = AGENTHOST_FAKE_AGENT,
                                 .args = std::move(args),
                                 .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}},
                                 .stdin_mode = process::stdin_kind::null,
                                 .reaper_path = AGENTHOST_REAPER};
    asio::post(strand, [strand, st, spawn = std::move(spawn), opts, delay, done]() mutable {
      providers::async_run_agent(
          strand, std::move(spawn), providers::make_pi_mapper({}), opts,
          [st](const message& m) {
            st->messages.push_back(m);
            if (st->point == cancel_point::after_messages && st->messages.size() == st->after)
              st->sig.emit(asio::cancellation_type::terminal);
          },
          asio::bind_cancellation_slot(st->sig.slot(), [st, done](boost::system::error_code ec, message t) {
            st->finished = true;
            if (st->timer) st->timer->cancel();
            done(transport::check_run(st->messages), ec == asio::error::operation_aborted, t);
          }));
      if (st->point == cancel_point::before_start) st->sig.emit(asio::cancellation_type::terminal);
      if (st->point == cancel_point::after_delay) {
        st->timer.emplace(strand, delay);
        st->timer->async_wait([st](boost::system::error_code ec) {
          if (!ec && !st->finished) st->sig.emit(asio::cancellation_type::terminal);
        });
      }
    });
  }

  soak_figures soak(std::size_t cycles, std::size_t concurrency, unsigned seed) {
    soak_figures f;
    asio::io_context io;
    auto work = asio::make_work_guard(io);
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i) threads.emplace_back([&] { io.run(); });

    std::mutex mu;  // guards everything below, and rng
    std::condition_variable cv;
    std::size_t started = 0, ended = 0;
    std::mt19937 rng(seed);
    std::function<void(const std::vector<std::string>&, bool, const message&)> on_done;
    auto launch = [&] {  // with mu held
      ++started;
      start_one(io, rng, on_done);
    };
    on_done = [&](const std::vector<std::string>& violations, bool aborted, const message& t) {
      std::lock_guard lock(mu);
      ++ended;
      if (!violations.empty()) {
        ++f.contract_violations;
        ADD_FAILURE() << "contract: " << violations.front();
      }
      if (t.type == message_type::terminal_completed) ++f.completed;
      else if (t.type == message_type::terminal_cancelled) ++f.cancelled;
      else ++f.failed;
      if (aborted != (t.type == message_type::terminal_cancelled)) ++f.wrong_ec;
      if (started < cycles) launch();
      cv.notify_all();
    };
    auto wait_ended = [&](std::size_t n) {
      std::unique_lock lock(mu);
      return cv.wait_for(lock, std::chrono::seconds(120 + cycles), [&] { return ended >= n; });
    };

    const auto t0 = std::chrono::steady_clock::now();
    {
      std::lock_guard lock(mu);
      for (std::size_t i = 0; i < std::min(concurrency, cycles); ++i) launch();
    }
    // After a warm-up (allocator arenas of both threads, Asio's reactor) the RSS baseline; the end is compared to it.
    EXPECT_TRUE(wait_ended(std::min<std::size_t>(cycles, 2 * concurrency)));
    ::malloc_trim(0);
    f.rss_warm_kib = proc_status_kib("VmRSS");
    bool all = true;
    for (int quarter = 1; quarter <= 4 && all; ++quarter) {  // RSS after each quarter: it must not trend upwards
      all = wait_ended(cycles * static_cast<std::size_t>(quarter) / 4);
      ::malloc_trim(0);
      f.rss_samples_kib.push_back(proc_status_kib("VmRSS"));
    }
    EXPECT_TRUE(all) << "the soak did not finish: " << ended << "/" << cycles;
    f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    work.reset();
    if (!all) io.stop();
    for (auto& t : threads) t.join();
    f.cycles = ended;
    return f;
  }

  void run_soak(std::size_t cycles) {
    if (const char* n = std::getenv("AGENTHOST_SOAK_CYCLES"); n != nullptr && *n != '\0') cycles = std::stoul(n);
    unsigned seed = std::random_device{}();
    if (const char* s = std::getenv("AGENTHOST_SOAK_SEED"); s != nullptr && *s != '\0') seed = static_cast<unsigned>(std::stoul(s));
    {
      // The first reaper-mode spawn starts the process's spawn server, whose socket and pidfd stay open for the
      // process's lifetime: start it before the baseline.
      asio::io_context io;
      auto warm = process::child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                                            .args = {"exit", "0"},
                                                            .containment = process::containment_kind::reaper,
                                                            .reaper_path = AGENTHOST_REAPER});
      ASSERT_TRUE(warm);
      bool stopped = false;
      warm->async_stop({}, [&](boost::system::error_code, process::stop_report) { stopped = true; });
      ASSERT_TRUE(run_until(io, [&] { return stopped; }));
    }
    settle_spawn_server();  // that spawn started it on a thread of its own
    const int fds_initial = open_fd_count();
    auto f = soak(cycles, 8, seed);  // its io_context and threads are gone when it returns
    ::malloc_trim(0);
    f.rss_end_kib = proc_status_kib("VmRSS");
    f.hwm_kib = proc_status_kib("VmHWM");
    f.fds_after = open_fd_count();
    f.zombies = zombie_children();
    f.survivors = static_cast<int>(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).size());
    std::ostringstream o;
    o << "soak cycles=" << f.cycles << " concurrency=8 seed=" << seed << " seconds=" << f.seconds
      << " cycles_per_s=" << (f.seconds > 0 ? static_cast<double>(f.cycles) / f.seconds : 0.0)
      << " completed=" << f.completed << " cancelled=" << f.cancelled << " failed=" << f.failed
      << " fds_initial=" << fds_initial << " fds_after=" << f.fds_after << " zombies=" << f.zombies
      << " survivors=" << f.survivors << " rss_after_warmup_kib=" << f.rss_warm_kib << " rss_end_kib=" << f.rss_end_kib
      << " rss_growth_kib=" << (f.rss_end_kib - f.rss_warm_kib) << " vmhwm_kib=" << f.hwm_kib << " rss_quarters_kib=";
    for (long q : f.rss_samples_kib) o << q << ",";
    o
      << (under_sanitizer ? " [sanitizer build]" : "");
    report_figure(o.str());
    EXPECT_EQ(f.cycles, cycles);
    EXPECT_EQ(f.contract_violations, 0u);
    EXPECT_EQ(f.wrong_ec, 0u) << "operation_aborted iff terminal.cancelled";
    EXPECT_EQ(f.fds_after, fds_initial) << "descriptors leaked";
    EXPECT_EQ(f.zombies, 0);
    EXPECT_EQ(f.survivors, 0);
    // Stable RSS: what is left after the last cycle may not grow with the number of cycles. The bound is generous
    // for heap fragmentation across 2 threads; a leak of one run's state per cycle (≥ 40 KiB: mapper, buffers,
    // messages) would exceed it at 1,000 cycles. Not under AddressSanitizer, whose quarantine keeps up to 256 MiB of
    // freed blocks resident (LeakSanitizer checks leaks there); ThreadSanitizer builds get a looser bound.
#if defined(__SANITIZE_ADDRESS__)
    constexpr bool asan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    constexpr bool asan = true;
#else
    constexpr bool asan = false;
#endif
#else
    constexpr bool asan = false;
#endif
    if (!asan) {
      const long allowed_kib = under_sanitizer ? 64 * 1024 : 8 * 1024;
      EXPECT_LE(f.rss_end_kib - f.rss_warm_kib, allowed_kib) << "RSS grew over the soak";
      if (f.rss_samples_kib.size() == 4) {
        EXPECT_LE(f.rss_samples_kib[3] - f.rss_samples_kib[0], allowed_kib) << "RSS trends upwards across the quarters";
      }
    }
    EXPECT_GT(f.cancelled, 0u);
    EXPECT_GT(f.completed, 0u);
  }

  std::string token = random_token();
};

TEST_F(Soak, ShortCycles) { run_soak(100); }

TEST_F(Soak, FullCycles) {
  const char* on = std::getenv("AGENTHOST_SOAK");
  if (on == nullptr || std::string(on) != "1") GTEST_SKIP() << "set AGENTHOST_SOAK=1 for the 1,000-cycle soak";
  run_soak(1000);
}

}  // namespace
