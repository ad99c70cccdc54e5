// The provider path through a real child process (the fake agent replaying recorded pi output).
#include "test_util.hpp"

#include <agenthost/providers/pi.hpp>
#include <agenthost/transport/contract_checker.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <fstream>

using namespace agenthost;
using namespace agenthost::test;
using providers::run_options;
using transport::message;
using transport::message_type;

namespace {

const std::string fixtures = AGENTHOST_FIXTURES_DIR;
const std::string tool_turn = fixtures + "/pi/pi-0.73.1-json-tool-turn.jsonl";

class PiProvider : public ::testing::Test {
 protected:
  void TearDown() override {
    kill_leftovers("AGENTHOST_TEST_TOKEN=" + token);
    std::filesystem::remove_all(dir);
  }

  process::spawn_options fake(std::vector<std::string> args) {
    return {.executable = AGENTHOST_FAKE_AGENT,
            .args = std::move(args),
            .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}},
            .stdin_mode = process::stdin_kind::null,
            .reaper_path = AGENTHOST_REAPER};
  }

  struct result {
    boost::system::error_code ec;
    std::vector<message> messages;
    message terminal;
  };

  // Runs to the end; `cancel_when` may emit the cancellation signal from inside on_message.
  result run(providers::spawn_request spawn, run_options opts = {},
             std::function<bool(const message&)> cancel_when = {}) {
    result r;
    bool done = false;
    asio::cancellation_signal sig;
    providers::async_run_agent(
        io.get_executor(), std::move(spawn), providers::make_pi_mapper({}), opts,
        [&](const message& m) {
          r.messages.push_back(m);
          if (cancel_when && cancel_when(m)) sig.emit(asio::cancellation_type::terminal);
        },
        asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code ec, message t) {
          r.ec = ec;
          r.terminal = std::move(t);
          done = true;
        }));
    EXPECT_TRUE(run_until(io, [&] { return done; }, 30s));
    EXPECT_EQ(transport::check_run(r.messages), std::vector<std::string>{});
    EXPECT_FALSE(r.messages.empty());
    if (!r.messages.empty()) {
      EXPECT_EQ(r.messages.back(), r.terminal);
    }
    EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty()) << "the run left processes behind";
    return r;
  }

  static std::string assistant_text(const result& r) {
    std::string s;
    for (const auto& m : r.messages)
      if (m.type == message_type::assistant) s += m.content.at("text").get<std::string>();
    return s;
  }

  // The first `n` lines of a fixture, as a file.
  std::string head_of(const std::string& file, std::size_t n) {
    std::ifstream in(file);
    const std::string path = dir + "/head.jsonl";
    std::ofstream out(path);
    std::string line;
    for (std::size_t i = 0; i < n && std::getline(in, line); ++i) out << line << "\n";
    return path;
  }

  asio::io_context io;
  std::string token = random_token();
  std::string dir = [] {
    char t[] = "/tmp/agenthost-provider-XXXXXX";
    return std::string(::mkdtemp(t));
  }();
};

TEST_F(PiProvider, NormalRunThroughARealProcess) {
  auto r = run(fake({"replay", tool_turn, "--chunk", "7"}));
  EXPECT_FALSE(r.ec);
  EXPECT_EQ(r.terminal.type, message_type::terminal_completed);
  EXPECT_EQ(r.messages.front().type, message_type::session_started);
  EXPECT_EQ(assistant_text(r), "The command printed `hello`.");
  EXPECT_EQ(r.terminal.content.at("text"), "The command printed `hello`.");
}

TEST_F(PiProvider, RunPiBuildsTheCommandLineAndRunsIt) {
  // A stand-in `pi` executable (a script) that records its arguments and replays a transcript.
  const std::string pi = dir + "/pi";
  {
    std::ofstream s(pi);
    s << "#!/bin/sh\nprintf '%s\\n' \"$@\" > " << dir << "/argv\nexec " << AGENTHOST_FAKE_AGENT << " replay " << tool_turn
      << "\n";
  }
  std::filesystem::permissions(pi, std::filesystem::perms::owner_all);
  providers::pi_options o{.executable = pi, .model = "fake-model", .no_session = true,
                          .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}}, .reaper_path = AGENTHOST_REAPER};
  std::vector<message> got;
  auto terminal = providers::run_pi(o, "-rf /", [&](const message& m) { got.push_back(m); });
  EXPECT_EQ(terminal.type, message_type::terminal_completed);
  std::ifstream argv_file(dir + "/argv");
  std::vector<std::string> argv;
  for (std::string l; std::getline(argv_file, l);) argv.push_back(l);
  EXPECT_EQ(argv, (std::vector<std::string>{"--mode", "json", "--model", "fake-model", "--no-session", "-p", " -rf /"}));
}

TEST_F(PiProvider, StartFailuresAreTerminalMessagesNotExceptions) {
  auto missing = fake({});
  missing.executable = dir + "/no-such-pi";
  auto m = run(missing);
  EXPECT_FALSE(m.ec);
  EXPECT_EQ(m.messages.size(), 1u);
  EXPECT_EQ(m.terminal.type, message_type::terminal_failed);
  EXPECT_EQ(m.terminal.content.at("reason"), "start_failed");
  EXPECT_NE(m.terminal.content.at("text").get<std::string>().find("no-such-pi"), std::string::npos);
  auto invalid = run(providers::pi_spawn_options({.thinking_level = "extreme"}, "x"));
  EXPECT_EQ(invalid.terminal.content.at("reason"), "start_failed");
  EXPECT_NE(invalid.terminal.content.at("text").get<std::string>().find("extreme"), std::string::npos);
}

TEST_F(PiProvider, NonZeroExitCarriesStderrAndExitCode) {
  auto r = run(fake({"replay", head_of(tool_turn, 3), "stderr", "Error: something broke", "exit", "3"}));
  EXPECT_EQ(r.terminal.type, message_type::terminal_failed);
  EXPECT_EQ(r.terminal.content.at("reason"), "exited");
  EXPECT_EQ(r.terminal.content.at("exit_code"), 3);
  EXPECT_NE(r.terminal.content.at("stderr").get<std::string>().find("something broke"), std::string::npos);
}

TEST_F(PiProvider, ExitZeroWithoutTerminalEventIsAFailure) {
  auto r = run(fake({"replay", head_of(tool_turn, 5)}));
  EXPECT_EQ(r.terminal.type, message_type::terminal_failed);
  EXPECT_EQ(r.terminal.content.at("reason"), "no_terminal_event");
}

TEST_F(PiProvider, CancellationBeforeStart) {
  result r;
  bool done = false;
  asio::cancellation_signal sig;
  providers::async_run_agent(io.get_executor(), fake({"replay", tool_turn, "never-exit"}),
                             providers::make_pi_mapper({}), {}, [&](const message& m) { r.messages.push_back(m); },
                             asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code ec, message t) {
                               r.ec = ec;
                               r.terminal = t;
                               done = true;
                             }));
  sig.emit(asio::cancellation_type::terminal);
  ASSERT_TRUE(run_until(io, [&] { return done; }));
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  EXPECT_EQ(r.terminal.type, message_type::terminal_cancelled);
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
}

TEST_F(PiProvider, CancellationMidStream) {
  run_options o;
  o.stop = process::stop_policy::sigterm();
  auto r = run(fake({"replay", tool_turn, "--delay-ms", "20", "never-exit"}), o,
               [](const message& m) { return m.type == message_type::session_started; });
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  EXPECT_EQ(r.terminal.type, message_type::terminal_cancelled);
}

TEST_F(PiProvider, CancellationDuringAToolClosesTheCall) {
  // Transcript up to the tool's start, then the "agent" hangs with a tool child that ignores SIGTERM.
  std::size_t n = 0;
  {
    std::ifstream in(tool_turn);
    for (std::string l; std::getline(in, l);) {
      ++n;
      if (l.find("\"tool_execution_start\"") != std::string::npos) break;
    }
  }
  run_options o;
  o.stop = process::stop_policy::sigterm();
  o.stop.graceful_wait = std::chrono::milliseconds(300);
  auto r = run(fake({"replay", head_of(tool_turn, n), "ignore-sigterm", "setsid-child", "never-exit"}), o,
               [](const message& m) { return m.type == message_type::tool_call; });
  EXPECT_EQ(r.terminal.type, message_type::terminal_cancelled);
  bool failed_call = false;
  for (const auto& m : r.messages) failed_call = failed_call || m.type == message_type::tool_failed;
  EXPECT_TRUE(failed_call) << "the open tool call must be closed as failed";
}

TEST_F(PiProvider, Watchdogs) {
  run_options first{.first_event_timeout = std::chrono::milliseconds(200)};
  auto a = run(fake({"never-exit"}), first);
  EXPECT_EQ(a.terminal.content.at("reason"), "timeout");
  EXPECT_EQ(a.terminal.content.at("timeout"), "first_event");

  run_options idle{.idle_timeout = std::chrono::milliseconds(200)};
  auto b = run(fake({"replay", head_of(tool_turn, 3), "never-exit"}), idle);
  EXPECT_EQ(b.terminal.content.at("timeout"), "idle");

  run_options deadline{.deadline = std::chrono::milliseconds(300)};
  auto c = run(fake({"replay", tool_turn, "--delay-ms", "100"}), deadline);
  EXPECT_EQ(c.terminal.content.at("timeout"), "deadline");
}

TEST_F(PiProvider, LingeringProcessIsStoppedAndTheRunStillCompletes) {
  run_options o{.linger_after_finish = std::chrono::milliseconds(100)};
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run(fake({"replay", tool_turn, "ignore-sigint", "never-exit"}), o);
  EXPECT_EQ(r.terminal.type, message_type::terminal_completed);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
}

TEST_F(PiProvider, ExceptionFromTheConsumerStopsTheTreeThenPropagatesUnchanged) {
  struct consumer_error : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  providers::async_run_agent(io.get_executor(), fake({"replay", tool_turn, "never-exit"}),
                             providers::make_pi_mapper({}), {},
                             [](const message& m) {
                               if (m.type == message_type::tool_call) throw consumer_error("consumer gave up");
                             },
                             [](boost::system::error_code, message) { FAIL() << "no completion after a throw"; });
  bool caught = false;
  try {
    io.run_for(20s);
  } catch (const consumer_error& e) {
    caught = std::string(e.what()) == "consumer gave up";
  }
  EXPECT_TRUE(caught);
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
}

}  // namespace
