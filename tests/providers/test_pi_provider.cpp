// The provider path through a real child process (the fake agent replaying recorded pi output).
#include "provider_fixture.hpp"

#include <agenthost/providers/pi.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string_view>

using namespace agenthost;
using namespace agenthost::test;
using providers::run_options;
using transport::message;
using transport::message_type;

namespace {

const std::string fixtures = AGENTHOST_FIXTURES_DIR;
const std::string tool_turn = fixtures + "/pi/pi-0.73.1-json-tool-turn.jsonl";

class PiProvider : public provider_run_fixture<providers::pi_options> {
 protected:
  PiProvider() : provider_run_fixture("pi") {}

  process::spawn_options fake(std::vector<std::string> args) {
    return {.executable = AGENTHOST_FAKE_AGENT,
            .args = std::move(args),
            .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}},
            .stdin_mode = process::stdin_kind::null,
            .reaper_path = AGENTHOST_REAPER};
  }

  // Runs to the end; `cancel_when` may emit the cancellation signal from inside on_message.
  result run(providers::spawn_request spawn, run_options opts = {}, cancel_predicate cancel_when = {}) {
    return run_to_end([&](auto on_message, auto done) {
      providers::async_run_agent(io.get_executor(), std::move(spawn), providers::make_pi_mapper({}), opts,
                                 std::move(on_message), std::move(done));
    }, cancel_when);
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
};

TEST_F(PiProvider, NormalRunThroughARealProcess) {
  auto r = run(fake({"replay", tool_turn, "--chunk", "7"}));
  EXPECT_FALSE(r.ec);
  EXPECT_EQ(r.terminal.type, message_type::terminal_completed);
  EXPECT_EQ(r.messages.front().type, message_type::session_started);
  EXPECT_EQ(assistant_text(r), "The command printed `hello`.");
  EXPECT_EQ(r.terminal.content.at("text"), "The command printed `hello`.");
}

TEST_F(PiProvider, OnAgentLineSeesEveryStdoutLineAsPrinted) {
  const auto fixture_lines = read_lines(tool_turn);
  std::vector<std::string> seen;
  run_options opts;
  opts.on_agent_line = [&](std::string_view line) { seen.emplace_back(line); };
  auto r = run(fake({"replay", tool_turn, "--chunk", "5"}), opts);
  EXPECT_EQ(r.terminal.type, message_type::terminal_completed);
  EXPECT_EQ(seen, fixture_lines);
}

TEST_F(PiProvider, RunPiBuildsTheCommandLineAndRunsIt) {
  // A stand-in `pi` executable (a script) that records its arguments and replays a transcript.
  auto o = stand_in("replay " + tool_turn);
  o.model = "fake-model";
  o.no_session = true;
  std::vector<message> got;
  auto terminal = providers::run_pi(o, "-rf /", [&](const message& m) { got.push_back(m); });
  EXPECT_EQ(terminal.type, message_type::terminal_completed);
  EXPECT_EQ(recorded_argv(),
            (std::vector<std::string>{"--mode", "json", "--model", "fake-model", "--no-session", "-p", " -rf /"}));
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

namespace {
std::string fnv1a64_hex(std::string_view bytes) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

// 1 MiB of varied bytes: text, newlines, shell syntax, UTF-8 and a few binary bytes; never ends in whitespace.
std::string large_prompt(std::size_t size = std::size_t{1} << 20) {
  static const char* const pieces[] = {"fix the test ", "\n", "$(touch /tmp/x) ", "`id`", "caf\xC3\xA9 ", "\xF0\x9F\x98\x80",
                                       "--help ", "@file ", "\t", "\x01\x7F", "'\"\\", "\xE3\x80\x80"};
  std::string s;
  std::uint64_t state = 7;
  while (s.size() < size) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    s += pieces[(state >> 33) % std::size(pieces)];
  }
  s.resize(size - 1);
  s += 'Z';
  return s;
}

// Hands every line to the pi mapper and keeps a copy.
class recording_mapper final : public mapper::event_mapper {
 public:
  recording_mapper(std::vector<std::string>& lines) : inner_(providers::make_pi_mapper({})), lines_(lines) {}
  void on_line(std::string_view line, std::vector<message>& out) override {
    lines_.emplace_back(line);
    inner_->on_line(line, out);
  }
  void on_oversize_line(std::string_view head, std::size_t total, std::vector<message>& out) override {
    inner_->on_oversize_line(head, total, out);
  }
  [[nodiscard]] bool agent_finished() const noexcept override { return inner_->agent_finished(); }
  void finish(const mapper::run_end& end, std::vector<message>& out) override { inner_->finish(end, out); }
  [[nodiscard]] const mapper::mapper_stats& stats() const noexcept override { return inner_->stats(); }

 private:
  std::unique_ptr<mapper::event_mapper> inner_;
  std::vector<std::string>& lines_;
};
}  // namespace

TEST_F(PiProvider, StdinDataReachesTheAgentCompleteThenEof) {
  const std::string data = large_prompt();
  auto spawn = fake({"stdin-digest", "replay", tool_turn});
  spawn.stdin_mode = process::stdin_kind::pipe;
  std::vector<std::string> lines;
  std::vector<message> got;
  bool done = false;
  message terminal;
  const auto t0 = std::chrono::steady_clock::now();
  providers::async_run_agent(io.get_executor(), std::move(spawn), std::make_unique<recording_mapper>(lines),
                             {.stdin_data = data}, [&](const message& m) { got.push_back(m); },
                             [&](boost::system::error_code, message t) {
                               terminal = std::move(t);
                               done = true;
                             });
  ASSERT_TRUE(run_until(io, [&] { return done; }, 30s));
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  EXPECT_EQ(terminal.type, message_type::terminal_completed);
  ASSERT_FALSE(lines.empty());
  const auto digest = nlohmann::json::parse(lines.front());
  EXPECT_EQ(digest.at("type"), "stdin_digest");
  EXPECT_EQ(digest.at("bytes"), data.size());
  EXPECT_EQ(digest.at("fnv1a64"), fnv1a64_hex(data));
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
  std::cout << "[figure] 1 MiB through stdin_data to the fake agent, run to the end: " << ms.count() << " ms\n";
}

TEST_F(PiProvider, StdinDataNeedsAPipe) {
  auto r = run(fake({"stdin-digest"}), {.stdin_data = std::string("x")});
  EXPECT_EQ(r.terminal.content.at("reason"), "start_failed");
  EXPECT_EQ(r.terminal.content.at("error"), "invalid_options");
  // An agent that never reads its stdin: the run still ends (the write is abandoned with the tree).
  auto spawn = fake({"replay", tool_turn});
  spawn.stdin_mode = process::stdin_kind::pipe;
  auto done = run(std::move(spawn), {.stdin_data = large_prompt(std::size_t{8} << 20)});
  EXPECT_EQ(done.terminal.type, message_type::terminal_completed);
}

TEST_F(PiProvider, ArgumentsTheKernelWouldRefuseFailBeforeSpawning) {
  auto r = run(fake({"stdout", std::string(std::size_t{1} << 20, 'x')}));
  EXPECT_EQ(r.terminal.type, message_type::terminal_failed);
  EXPECT_EQ(r.terminal.content.at("reason"), "start_failed");
  EXPECT_EQ(r.terminal.content.at("error"), "argument_list_too_long");
  const std::string text = r.terminal.content.at("text").get<std::string>();
  EXPECT_NE(text.find("argument 2 is 1048576 bytes"), std::string::npos) << text;
  EXPECT_NE(text.find("MAX_ARG_STRLEN"), std::string::npos) << text;
}

TEST_F(PiProvider, RunPiSendsALongPromptThroughStdin) {
  // A stand-in `pi`: records its arguments and the digest of its stdin, then replays a transcript.
  const std::string pi = dir + "/pi";
  {
    std::ofstream s(pi);
    s << "#!/bin/sh\nprintf '%s\\0' \"$@\" > '" << dir << "/argv'\n'" << AGENTHOST_FAKE_AGENT << "' stdin-digest > '" << dir
      << "/digest'\nexec '" << AGENTHOST_FAKE_AGENT << "' replay '" << tool_turn << "'\n";
  }
  std::filesystem::permissions(pi, std::filesystem::perms::owner_all);
  const std::string body = large_prompt();
  auto o = options(pi);
  o.no_session = true;
  auto terminal = providers::run_pi(o, body + "\n\n", [](const message&) {});
  EXPECT_EQ(terminal.type, message_type::terminal_completed);
  std::ifstream digest_file(dir + "/digest");
  std::string line;
  std::getline(digest_file, line);
  const auto digest = nlohmann::json::parse(line);
  EXPECT_EQ(digest.at("bytes"), body.size());
  EXPECT_EQ(digest.at("fnv1a64"), fnv1a64_hex(body));
  std::ifstream argv_file(dir + "/argv", std::ios::binary);
  const std::string argv{std::istreambuf_iterator<char>(argv_file), std::istreambuf_iterator<char>()};
  EXPECT_EQ(argv, std::string("--mode\0json\0--no-session\0-p\0\n\n\0", 31))
      << "the trailing newlines, which pi's trim() would drop from stdin, follow as the argument";
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
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
  for (const auto& l : read_lines(tool_turn)) {
    ++n;
    if (l.find("\"tool_execution_start\"") != std::string::npos) break;
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

// Once the agent printed its final event the run counts as what it reported: an idle timeout shorter than the linger
// does not turn the silence that follows into a failure, and a deadline still bounds the run without failing it.
TEST_F(PiProvider, WatchdogsDoNotTurnAFinishedRunIntoAFailure) {
  run_options idle{.idle_timeout = std::chrono::milliseconds(100),
                   .linger_after_finish = std::chrono::milliseconds(1000)};
  auto a = run(fake({"replay", tool_turn, "never-exit"}), idle);
  EXPECT_EQ(a.terminal.type, message_type::terminal_completed) << a.terminal.to_json_line();

  run_options deadline{.deadline = std::chrono::milliseconds(1500), .linger_after_finish = std::chrono::seconds(60)};
  const auto t0 = std::chrono::steady_clock::now();
  auto b = run(fake({"replay", tool_turn, "never-exit"}), deadline);
  EXPECT_EQ(b.terminal.type, message_type::terminal_completed) << b.terminal.to_json_line();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 30s) << "ended by the linger, not by the deadline";
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
}

// pi goes on after its final event when it retries the model call (agent_end, then auto_retry_start, here 250 ms
// apart): the linger started by the first agent_end is called off, and the last agent_end starts one of its own. (The
// first linger used to fire mid-retry, 800 ms later, find the agent busy and never come back: a hung agent then ran
// forever, here until the deadline.)
TEST_F(PiProvider, EachFinalEventStartsALingerAfterTheAgentWentOn) {
  const std::string retries = fixtures + "/pi/pi-0.73.1-json-503-auto-retry.jsonl";
  run_options o{.deadline = std::chrono::seconds(30), .linger_after_finish = std::chrono::milliseconds(800)};
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run(fake({"replay", retries, "--delay-ms", "250", "never-exit"}), o);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.terminal.type, message_type::terminal_failed) << r.terminal.to_json_line();
  EXPECT_FALSE(r.terminal.content.contains("timeout")) << r.terminal.to_json_line();
  EXPECT_LT(took, 20s) << "ended by the deadline, not by a linger";
  std::size_t retries_seen = 0;
  for (const auto& m : r.messages)
    if (m.type == message_type::status && m.content.value("kind", "") == "retry") ++retries_seen;
  EXPECT_EQ(retries_seen, 4u) << "three retries and their end, all delivered before the linger";
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
}

// Something outside the tree holds the agent's stdout (here the test, through /proc/PID/fd/1): the run ends after the
// drain wait and then releases the executor, instead of keeping a read pending until the pipe closes (which would
// keep run_agent's io_context::run() from returning).
TEST_F(PiProvider, AStdoutHeldOutsideTheTreeDoesNotKeepTheRunAlive) {
  int held = -1;
  run_options o{.drain_after_exit = std::chrono::milliseconds(100)};
  o.on_agent_line = [&held](std::string_view line) {
    int pid = 0;
    if (held >= 0 || std::sscanf(std::string(line).c_str(), "pid: %d", &pid) != 1) return;
    held = ::open(("/proc/" + std::to_string(pid) + "/fd/1").c_str(), O_WRONLY | O_CLOEXEC);
    ::kill(pid, SIGKILL);
  };
  std::optional<message> terminal;
  providers::async_run_agent(io.get_executor(), fake({"print-pid", "never-exit"}), providers::make_pi_mapper({}), o,
                             [](const message&) {},
                             [&terminal](boost::system::error_code, message t) { terminal = std::move(t); });
  io.run_for(20s);
  const bool released = io.stopped();
  if (held >= 0) ::close(held);
  ASSERT_GE(held, 0) << "the agent's stdout could not be opened through /proc";
  ASSERT_TRUE(terminal.has_value());
  EXPECT_EQ(terminal->type, message_type::terminal_failed) << terminal->to_json_line();
  EXPECT_TRUE(released) << "work was still pending after the terminal";
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
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
