// The run core (providers/run.hpp) at its edges, with the pi mapper: a cancellation before the run started, no
// on_message, a completion handler on another io_context, start failures whose text is not UTF-8, a consumer slower
// than the idle timeout.
#include "test_util.hpp"

#include <agenthost/mapper/pi_mapper.hpp>
#include <agenthost/providers/run.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

using namespace agenthost;
using namespace agenthost::test;
using transport::message;
using transport::message_type;

namespace {

process::spawn_options fake_pi(std::vector<std::string> args) {
  return {.executable = AGENTHOST_FAKE_AGENT,
          .args = std::move(args),
          .stdin_mode = process::stdin_kind::null,
          .containment = process::containment_kind::reaper,
          .reaper_path = AGENTHOST_REAPER};
}

std::string answer_file() { return std::string(AGENTHOST_FIXTURES_DIR) + "/pi/recorded/pi-0.73.1-answer.jsonl"; }

// The run is cancelled in the caller's frame, before its posted start ran: it ends cancelled without spawning —
// here the executable does not exist, so a spawn would have made it terminal.failed (start_failed).
TEST(RunCore, ACancellationBeforeTheStartSpawnsNothing) {
  asio::io_context io;
  asio::cancellation_signal sig;
  std::vector<message> seen;
  std::optional<std::pair<boost::system::error_code, message>> done;
  providers::async_run_agent(
      io.get_executor(), process::spawn_options{.executable = "/nonexistent/agenthost-agent"},
      std::make_unique<mapper::pi_mapper>(), {}, [&](const message& m) { seen.push_back(m); },
      asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code ec, message t) {
        done.emplace(ec, std::move(t));
      }));
  sig.emit(asio::cancellation_type::terminal);
  ASSERT_TRUE(run_until(io, [&] { return done.has_value(); }));
  EXPECT_EQ(done->first, asio::error::operation_aborted);
  EXPECT_EQ(done->second.type, message_type::terminal_cancelled) << done->second.to_json_line();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen.back(), done->second);
}

TEST(RunCore, AnEmptyOnMessageIsAllowed) {
  const auto terminal = providers::run_agent(fake_pi({"replay", answer_file()}), std::make_unique<mapper::pi_mapper>(),
                                             {}, providers::message_handler{});
  EXPECT_EQ(terminal.type, message_type::terminal_completed) << terminal.to_json_line();
}

// The completion handler is bound to a second io_context that nothing else keeps busy: its run() must not return
// before the handler ran there.
TEST(RunCore, TheHandlersExecutorHasWorkUntilTheHandlerRan) {
  asio::io_context io, other;
  std::optional<message> terminal;
  std::thread::id ran_on;
  providers::async_run_agent(io.get_executor(), fake_pi({"replay", answer_file()}),
                             std::make_unique<mapper::pi_mapper>(), {}, [](const message&) {},
                             asio::bind_executor(other, [&](boost::system::error_code, message t) {
                               terminal = std::move(t);
                               ran_on = std::this_thread::get_id();
                             }));
  std::thread runner([&] { io.run(); });
  other.run();  // returns at once without the work the run keeps on `other`
  const bool ran_before_return = terminal.has_value();
  runner.join();
  EXPECT_TRUE(ran_before_return) << "other.run() returned before the completion handler ran";
  ASSERT_TRUE(terminal.has_value());
  EXPECT_EQ(terminal->type, message_type::terminal_completed);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

// Contract text is UTF-8: a start failure that names a path which is not (a Latin-1 directory name) says so with
// U+FFFD, and its message can be written with nlohmann's default (throwing) dump.
TEST(RunCore, AStartFailureNamingANonUtf8PathIsValidUtf8) {
  const auto terminal = providers::run_agent(process::spawn_options{.executable = "/nonexistent/\xe9t\xe9/pi"},
                                             std::make_unique<mapper::pi_mapper>(), {}, [](const message&) {});
  ASSERT_EQ(terminal.type, message_type::terminal_failed);
  std::string dumped;
  ASSERT_NO_THROW(dumped = terminal.content.dump());
  EXPECT_NE(terminal.content.at("text").get<std::string>().find("/nonexistent/\xEF\xBF\xBDt\xEF\xBF\xBD/pi"),
            std::string::npos)
      << dumped;
}

// A consumer that keeps the thread longer than the idle timeout while the agent goes on: the agent's next lines wait
// in the pipe, or in a read's posted delivery, when the timer's handler runs. That is a busy host, not a silent agent:
// the run goes on and completes (it ended with timeout "idle"), with plain and with coalesced reads.
TEST(RunCore, ASlowConsumerIsNotASilentAgent) {
  for (const auto coalescing : {std::chrono::microseconds(0), std::chrono::microseconds(4000)}) {
    char tmpl[] = "/tmp/agenthost-run-XXXXXX";
    const std::string dir = ::mkdtemp(tmpl);
    const std::string go = dir + "/go", printed = dir + "/printed", script = dir + "/agent";
    ASSERT_EQ(::mkfifo(go.c_str(), 0600), 0);
    ASSERT_EQ(::mkfifo(printed.c_str(), 0600), 0);
    // The session header; then, once released, the rest of the run; then it says so and stays (the linger stops it).
    std::ofstream(script) << "#!/bin/sh\nhead -n 1 " << answer_file() << "\nread x < " << go << "\ntail -n +2 "
                          << answer_file() << "\necho printed > " << printed << "\nexec sleep 60\n";
    std::filesystem::permissions(script, std::filesystem::perms::owner_all);
    auto spawn = fake_pi({});
    spawn.executable = script;
    spawn.read_coalescing = coalescing;
    const auto idle = std::chrono::milliseconds(100);
    bool was_busy = false;
    const auto terminal = providers::run_agent(
        std::move(spawn), std::make_unique<mapper::pi_mapper>(),
        {.idle_timeout = idle, .linger_after_finish = std::chrono::milliseconds(100)}, [&](const message& m) {
          if (m.type != message_type::session_started) return;
          const auto since = std::chrono::steady_clock::now();  // the idle timer was armed before this handler
          std::ofstream(go) << "go\n";                         // the agent prints the rest of its run ...
          std::string said;
          std::getline(std::ifstream(printed), said);  // ... which is in the pipe once it said so
          EXPECT_EQ(said, "printed");
          // Busy past the idle timeout (what is under test, not a synchronization).
          while (std::chrono::steady_clock::now() - since < 3 * idle) std::this_thread::sleep_for(idle);
          was_busy = true;
        });
    EXPECT_TRUE(was_busy);
    EXPECT_EQ(terminal.type, message_type::terminal_completed)
        << coalescing.count() << " us coalescing: " << terminal.to_json_line();
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
