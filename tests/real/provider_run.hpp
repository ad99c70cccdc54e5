// Shared by the real-CLI suites that drive an agent through its provider (tests/real/test_real_codex.cpp,
// test_real_opencode.cpp): one run to its end, optionally cancelled through its completion token, with the normalized
// messages and, from the same run, the raw lines the agent printed; the checks every such run must pass; the fixture
// recording and the one-line summary; the fixture frame that runs a scenario through the provider.
#pragma once

#include "real_cli_util.hpp"

#include <agenthost/transport/contract_checker.hpp>
#include <agenthost/transport/message.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace agenthost::test::real {

/// One run through a provider: the normalized messages and, from the same run, what the agent printed.
struct provider_run {
  std::string agent;  // "codex", "opencode" (for dump())
  boost::system::error_code ec;
  std::vector<transport::message> messages;
  transport::message terminal;
  std::vector<std::string> lines;  // the agent's stdout lines, as printed
  std::vector<json> events;        // those that are JSON objects
  std::chrono::milliseconds elapsed{};  // the whole run: the agent's start-up included
  /// From the cancellation to the run's completion (what a stop costs, whatever the agent's start-up took on a loaded
  /// machine); nullopt when the run was not cancelled.
  std::optional<std::chrono::milliseconds> stop_elapsed;

  [[nodiscard]] std::vector<const json*> raw_of_type(const std::string& type) const {
    std::vector<const json*> out;
    for (const auto& e : events)
      if (e.value("type", "") == type) out.push_back(&e);
    return out;
  }
  [[nodiscard]] std::vector<transport::message> of_type(transport::message_type t) const {
    std::vector<transport::message> out;
    for (const auto& m : messages)
      if (m.type == t) out.push_back(m);
    return out;
  }
  [[nodiscard]] std::vector<std::string> texts(transport::message_type t) const {
    std::vector<std::string> out;
    for (const auto& m : of_type(t)) out.push_back(m.content.at("text").get<std::string>());
    return out;
  }
  [[nodiscard]] std::string assistant_text() const { return joined(texts(transport::message_type::assistant)); }
  [[nodiscard]] std::string dump() const {
    std::string s = "  " + agent + " printed:\n";
    for (const auto& l : lines) s += "    " + l + "\n";
    s += "  messages:\n";
    for (const auto& m : messages) s += "    " + m.to_json_line() + "\n";
    return s;
  }
};

/// Where a provider run is recorded and how it is named (fixtures/<agent>/recorded/<agent>-<version>-<name>.jsonl).
struct provider_run_record {
  std::string agent;
  std::string version;
  std::string scenario;
  std::string name;  // what the run is recorded as: the scenario, or the test's own name for it
  std::vector<std::pair<std::string, std::string>> replacements;  // machine paths → stable ones
};

/// Runs one agent through its provider to its end on `io`. `start(on_agent_line, on_message, token)` starts the run
/// (the provider's async_run_X with the tap as run_options::on_agent_line). `cancel_when` is asked after every message
/// and every 10 ms: once it says yes, the run is cancelled through the token's cancellation slot. Then checks what
/// every run must hold (it ended within 90 s, the contract, the terminal last, no process with `run_mark` left),
/// records the raw lines when AGENTHOST_RECORD_FIXTURES=1 and prints a summary line.
template <class Start>
provider_run run_through_provider(asio::io_context& io, const provider_run_record& record, const std::string& run_mark,
                                  Start&& start, const std::function<bool(const provider_run&)>& cancel_when = {}) {
  provider_run r;
  r.agent = record.agent;
  auto on_agent_line = [&r](std::string_view line) {
    r.lines.emplace_back(line);
    auto j = parse_line(r.lines.back());
    if (j.is_object()) r.events.push_back(std::move(j));
  };
  bool done = false;
  asio::cancellation_signal sig;
  const auto t0 = std::chrono::steady_clock::now();
  stop_clock stop_watch;
  start(std::function<void(std::string_view)>(on_agent_line),
        [&](const transport::message& m) { r.messages.push_back(m); },
        asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code ec, transport::message t) {
          r.ec = ec;
          r.terminal = std::move(t);
          done = true;
        }));
  const bool finished = run_until(io, [&] {
    if (!done && !stop_watch.marked() && cancel_when && cancel_when(r)) {
      stop_watch.mark();
      sig.emit(asio::cancellation_type::terminal);
    }
    return done;
  }, std::chrono::seconds(90));
  const auto ended = std::chrono::steady_clock::now();
  r.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(ended - t0);
  r.stop_elapsed = stop_watch.until(ended);
  EXPECT_TRUE(finished) << "the run did not end within 90 s\n" << r.dump();
  EXPECT_EQ(transport::check_run(r.messages), std::vector<std::string>{}) << r.dump();
  if (!r.messages.empty()) {
    EXPECT_EQ(r.messages.back(), r.terminal);
  }
  EXPECT_EQ(processes_with_env(run_mark), std::vector<int>{}) << "the run left processes behind";
  record_fixture(record.agent, record.agent + "-" + record.version + "-" + record.name + ".jsonl", r.lines,
                 record.replacements);
  std::cout << "[ real " << record.agent << " ] " << record.scenario << ": " << r.lines.size() << " lines from "
            << record.agent << ", " << r.messages.size() << " messages, " << transport::to_string(r.terminal.type)
            << ", " << r.elapsed.count() << " ms"
            << (r.stop_elapsed ? ", stopped in " + std::to_string(r.stop_elapsed->count()) + " ms" : std::string())
            << "\n";
  return r;
}

/// The normalized stream of an agent that prints whole blocks (no deltas): one assistant message per scripted text
/// block, nothing doubled or lost, and one thought per thinking block.
inline void expect_whole_blocks(const provider_run& r, const script& s) {
  EXPECT_EQ(r.texts(transport::message_type::assistant), s.texts) << r.dump();
  EXPECT_EQ(r.assistant_text(), s.text());
  EXPECT_EQ(r.texts(transport::message_type::assistant_thought), s.thoughts) << r.dump();
}

/// A run that completed with the script's last text block: no error, terminal.completed (else nothing more is
/// checked) of the session `session_of(r)`, exit code 0, no invalid lines.
inline void expect_completed_as_scripted(const provider_run& r, const script& s,
                                         std::string (*session_of)(const provider_run&)) {
  EXPECT_FALSE(r.ec);
  ASSERT_EQ(r.terminal.type, transport::message_type::terminal_completed) << r.dump();
  EXPECT_EQ(r.terminal.content.at("text"), s.texts.empty() ? std::string() : s.texts.back());
  EXPECT_EQ(r.terminal.content.value("session_id", ""), session_of(r));
  EXPECT_FALSE(r.terminal.content.contains("invalid_output_lines")) << r.dump();
  EXPECT_EQ(r.terminal.content.value("exit_status", ""), "exited with code 0");
}

/// real_cli_test for a suite that drives `cli` through its provider: run_provider() is run_through_provider with the
/// CLI's name and version in the recording.
class provider_cli_test : public real_cli_test {
 protected:
  explicit provider_cli_test(const npm_cli& installed) : real_cli_test(installed.name), cli(installed) {}

  /// Runs `o` with `prompt` through `async_run` — the provider's async_run_X as a callable (executor, options, prompt,
  /// on_message, token) — with the tap as o.run.on_agent_line. Recorded as `record_as` (default: the scenario).
  template <class Options, class AsyncRun>
  provider_run run_provider(const std::string& scenario, Options o, const std::string& prompt,
                            const std::function<bool(const provider_run&)>& cancel_when,
                            const std::string& record_as, AsyncRun async_run) {
    return run_through_provider(
        io,
        {.agent = cli.name,
         .version = cli.version(),
         .scenario = scenario,
         .name = record_as.empty() ? scenario : record_as,
         .replacements = stable_paths()},
        run_mark(),
        [&](std::function<void(std::string_view)> on_agent_line, auto on_message, auto token) {
          o.run.on_agent_line = std::move(on_agent_line);
          async_run(io.get_executor(), o, prompt, std::move(on_message), std::move(token));
        },
        cancel_when);
  }

  const npm_cli& cli;
};

}  // namespace agenthost::test::real
