// The real Claude Code CLI stopped midway: cancellation through the completion token (mid-stream, during a tool: the
// tool process is killed too), and the CLI signalled directly (SIGINT, SIGTERM) to observe what Claude itself does.
// Shared setup and checks: real_claude.hpp; what the suites cover: test_real_claude.cpp.
#include "real_claude.hpp"

using namespace agenthost;
using namespace agenthost::test;
using namespace agenthost::test::real;
using namespace agenthost::test::real::claude_suite;

namespace {

// What Claude prints last after SIGINT: one result, subtype error_during_execution, is_error, the abort reason.
// Sometimes (~20 % of the runs on a loaded 2-core machine, never on an idle one) Claude exits 0 after SIGINT without
// printing the interruption's lines and result — the silent exit of SigintBetweenToolUseAndToolStartExits0WithoutAResult,
// hit when the signal lands while Claude is between states: returns false then, and says so.
bool interrupted_result(const cli_result& r, const std::string& terminal_reason) {
  const auto results = r.of_type("result");
  EXPECT_LE(results.size(), 1u) << r.dump();
  if (results.empty()) {
    std::cout << "[ real claude ] NOTE: claude exited (" << r.status_text() << ") after SIGINT without a result line ("
              << r.lines.size() << " lines)\n";
    return false;
  }
  const json& res = *results.back();
  EXPECT_EQ(&res, &r.events.back()) << "the result is the last line";
  EXPECT_EQ(res.value("subtype", ""), "error_during_execution");
  EXPECT_EQ(res.value("is_error", false), true);
  EXPECT_EQ(res.value("terminal_reason", ""), terminal_reason);
  const auto errors = res.value("errors", json::array());
  EXPECT_EQ(errors.size(), 1u) << res.dump();
  if (!errors.empty()) {
    EXPECT_EQ(errors.at(0).get<std::string>().rfind("[ede_diagnostic] result_type=user", 0), 0u) << res.dump();
  }
  return true;
}

// Whether claude's interruption report closed `call_id`: its user lines are the call's rejected tool result, then
// "[Request interrupted by user for tool use]". Claude can print them and exit 0 before its result line (seen under
// load), so a missing result does not mean a missing report: the call is then closed by the rejection, not the finish.
bool rejected_in_report(const cli_result& r, const std::string& call_id) {
  const auto users = r.of_type("user");
  bool rejected = false;
  for (const json* user : users) {
    const auto& part = user->at("message").at("content").at(0);
    if (part.value("type", "") == "tool_result") {
      EXPECT_EQ(part.value("tool_use_id", ""), call_id) << r.dump();
      rejected = true;
    } else {
      EXPECT_EQ(part.value("text", ""), "[Request interrupted by user for tool use]") << r.dump();
    }
  }
  if (!users.empty() && r.of_type("result").empty()) {
    std::cout << "[ real claude ] NOTE: claude printed its interruption report (" << users.size()
              << " user line(s)) but no result before exiting\n";
  }
  return rejected;
}

// Cancellation through the completion token while the model streams (40 s): the provider's stop ("\x03" + SIGINT to
// the group, 2 s, tree kill) ends the run with terminal.cancelled and operation_aborted, well before the stream would;
// what claude prints when interrupted is still mapped.
TEST_F(RealClaude, CancellationMidStream) {
  const auto s = scripted("slow");
  auto r = run("slow", [](const claude_run& now) { return !now.text().empty(); }, "slow-cancelled");
  ASSERT_TRUE(r.cancel_sent) << "no text was streamed\n" << r.dump();
  expect_session(r, "slow", work);
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  ASSERT_EQ(r.terminal.type, message_type::terminal_cancelled) << r.dump();
  EXPECT_EQ(r.terminal.content.at("session_id"), r.messages.front().content.at("session_id"));
  const std::string got = r.text();
  EXPECT_FALSE(got.empty());
  EXPECT_LT(got.size(), s.text().size());
  EXPECT_EQ(s.text().substr(0, got.size()), got) << "what was streamed before the stop is a prefix of the script";
  // The raw lines: the same deltas, each once.
  expect_run_frame(r.raw, "slow", work);
  EXPECT_EQ(joined(deltas(r.raw, "text_delta", "text")).substr(0, got.size()), got);
  // The run reads claude's output to its end, also during the stop: what claude prints when interrupted (its
  // `result`, with the cost of the turn) is mapped into the cancelled terminal — when claude prints it.
  if (interrupted_result(r.raw, "aborted_streaming")) {
    ASSERT_TRUE(r.terminal.content.contains("usage")) << r.dump();
    EXPECT_TRUE(r.terminal.content.at("usage").contains("cost")) << r.dump();
  }
  EXPECT_LT(stopped_in(r.stop_elapsed), kStopBound) << "the stream takes 40 s; the stop must not wait for it";
}

// Claude Code's Bash refuses a command that starts with a long sleep (the scenario `long-tool`, `sleep 30`): the tool
// result is an error telling the model to use Monitor or run_in_background, and the run goes on to the next turn.
TEST_F(RealClaude, StandaloneSleep30IsBlockedByClaudesBash) {
  auto r = run("long-tool");
  expect_session(r, "long-tool", work);
  const message* failed =
      expect_one_tool_call(r, "call_mock_sleep_1", json{{"command", "sleep 30"}}, message_type::tool_failed);
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->content.at("error").get<std::string>().rfind("<tool_use_error>Blocked: standalone sleep 30.", 0),
            0u)
      << failed->content.dump();
  EXPECT_EQ(r.text(), "Sleeping.The sleep finished.");
  ASSERT_EQ(r.terminal.type, message_type::terminal_completed) << r.dump();
  EXPECT_EQ(r.terminal.content.at("text"), "The sleep finished.");

  expect_run_frame(r.raw, "long-tool", work);
  const auto users = r.raw.of_type("user");
  ASSERT_EQ(users.size(), 1u) << r.raw.dump();
  const auto& result = users[0]->at("message").at("content").at(0);
  EXPECT_EQ(result.at("tool_use_id"), "call_mock_sleep_1");
  EXPECT_EQ(result.value("is_error", false), true);
  EXPECT_EQ(process_named(run_mark(), "sleep"), std::nullopt);
  EXPECT_EQ(result_event(r.raw).value("result", ""), "The sleep finished.");
  EXPECT_EQ(r.raw.exit_code(), 0);
}

// Cancellation through the completion token during a running tool (`echo sleeping; sleep 30`, which Claude's Bash
// accepts): terminal.cancelled, the call closed by claude's own report, and the tool's sleep dies with the tree.
TEST_F(RealClaude, CancellationDuringAToolKillsTheToolProcess) {
  std::optional<int> sleep_pid;
  auto r = run("long-tool-echo", [&](const claude_run& now) {
    return sleep_runs(!now.of(message_type::tool_call).empty(), run_mark(), sleep_pid);
  }, "long-tool-echo-cancelled");
  ASSERT_TRUE(sleep_pid.has_value()) << "the tool's sleep never ran\n" << r.dump();
  expect_session(r, "long-tool-echo", work);
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  ASSERT_EQ(r.terminal.type, message_type::terminal_cancelled) << r.dump();
  EXPECT_EQ(r.text(), "Sleeping.");
  const message* closed = expect_one_tool_call(r, "call_mock_sleep_2", json{{"command", "echo sleeping; sleep 30"}},
                                               message_type::tool_failed);
  ASSERT_NE(closed, nullptr);
  const bool has_result = interrupted_result(r.raw, "aborted_tools");
  // Closed by claude itself: interrupted, it reports the call as rejected (and mostly prints its `result` after), which
  // the run still reads and maps during the stop. Otherwise the end of the run closes the call.
  const bool rejected = rejected_in_report(r.raw, "call_mock_sleep_2");
  EXPECT_TRUE(rejected || !has_result) << "a result without the report\n" << r.dump();
  EXPECT_EQ(closed->content.value("closed_by_finish", false), !rejected) << closed->content.dump();
  if (rejected) {
    EXPECT_EQ(closed->content.value("error", "").rfind("The user doesn't want to proceed with this tool use.", 0), 0u)
        << closed->content.dump();
  }
  if (has_result) {  // the cost of the turn reaches the cancelled terminal
    ASSERT_TRUE(r.terminal.content.contains("usage")) << r.dump();
    EXPECT_TRUE(r.terminal.content.at("usage").contains("cost")) << r.dump();
  }
  EXPECT_EQ(process_named(run_mark(), "sleep"), std::nullopt) << "the tool's sleep survived";
  EXPECT_FALSE(alive(*sleep_pid)) << "the tool's sleep survived";
  EXPECT_EQ(frame_texts(r.raw, "text", "text"), std::vector<std::string>{"Sleeping."});
  EXPECT_LT(stopped_in(r.stop_elapsed), kStopBound) << "the tool sleeps 30 s; the stop must not wait for it";
}

// Probe: SIGINT to the CLI alone (not its process group) during the tool, sent by the test, so that the run ends by
// itself and what Claude prints afterwards is seen. Claude stops its running tool itself, reports the call as
// rejected by the user, prints an error_during_execution result and exits 0: not a caller's cancel, so the terminal
// is failed/agent_error (aborted_tools). Why the provider's stop can rely on SIGINT.
TEST_F(RealClaude, SigintToTheCliAloneDuringATool) {
  std::optional<int> sleep_pid;
  auto r = run_signalled_during_tool(SIGINT, "long-tool-echo-sigint-cli-only", sleep_pid);
  ASSERT_TRUE(sleep_pid.has_value()) << "the tool's sleep never ran\n" << r.dump();
  EXPECT_FALSE(alive(*sleep_pid)) << "the tool's sleep survived";
  EXPECT_EQ(r.raw.exit_code(), 0) << r.dump();
  EXPECT_LT(stopped_in(r.stop_elapsed), kStopBound);
  ASSERT_EQ(r.terminal.type, message_type::terminal_failed) << r.dump();
  if (interrupted_result(r.raw, "aborted_tools")) {
    EXPECT_EQ(r.terminal.content.at("reason"), "agent_error");
    EXPECT_EQ(r.terminal.content.at("terminal_reason"), "aborted_tools");
    EXPECT_EQ(r.terminal.content.at("retryable"), false);
    const message* failed = expect_one_tool_call(r, "call_mock_sleep_2", json{{"command", "echo sleeping; sleep 30"}},
                                                 message_type::tool_failed);
    ASSERT_NE(failed, nullptr);
    EXPECT_EQ(failed->content.at("raw_output"), "User rejected tool use");
    EXPECT_EQ(failed->content.at("error").get<std::string>().rfind("The user doesn't want to proceed", 0), 0u);
    const auto users = r.raw.of_type("user");
    ASSERT_EQ(users.size(), 2u) << r.raw.dump();
    EXPECT_EQ(users[1]->at("message").at("content").at(0).value("text", ""),
              "[Request interrupted by user for tool use]");
  } else {
    EXPECT_EQ(r.terminal.content.at("reason"), "no_terminal_event");
  }
}

// Probe: SIGINT to the group right after the tool_use frame, before the tool runs: Claude 2.1.332 exits 0 at once,
// without closing the API message (no message_delta / message_stop), without a tool result and without a result line
// — the same silent exit that, on a loaded machine, also hits a SIGINT while the tool's process is just starting
// (sometimes after printing its interruption report's user lines, never its result).
// Without a caller's cancel that is failed/no_terminal_event (exit 0 without a result is never success). On a slow
// host the signal can land after the tool started: then claude's interruption report is checked instead.
TEST_F(RealClaude, SigintBetweenToolUseAndToolStartExits0WithoutAResult) {
  bool sent = false;
  auto r = run("long-tool-echo", {}, "long-tool-echo-sigint-before-tool", [&](claude_run&, const json& e) {
    if (sent || e.value("type", "") != "assistant") return;
    const auto& content = e.at("message").at("content");
    if (content.empty() || content.at(0).value("type", "") != "tool_use") return;
    sent = true;
    const auto pid = claude_pid(run_mark());
    EXPECT_TRUE(pid.has_value());
    if (pid) ::killpg(::getpgid(*pid), SIGINT);
  });
  ASSERT_TRUE(sent) << r.dump();
  EXPECT_EQ(r.raw.exit_code(), 0) << r.dump();
  EXPECT_EQ(process_named(run_mark(), "sleep"), std::nullopt);
  const auto results = r.raw.of_type("result");
  std::cout << "[ real claude ] SIGINT between tool_use and tool start: " << r.raw.status_text() << ", "
            << results.size() << " result line(s), last event: "
            << (r.raw.events.empty() ? "" : r.raw.events.back().dump().substr(0, 160)) << "\n";
  ASSERT_EQ(r.terminal.type, message_type::terminal_failed);
  const message* closed = expect_one_tool_call(r, "call_mock_sleep_2", json{{"command", "echo sleeping; sleep 30"}},
                                               message_type::tool_failed);
  ASSERT_NE(closed, nullptr);
  if (!results.empty()) {
    // The signal is sent from the test's line callback: when the host is slow (sanitizers, load) it lands once the
    // tool has started, and claude reports the interruption instead — mapped like SigintToTheCliAloneDuringATool.
    std::cout << "[ real claude ] NOTE: the SIGINT landed after the tool started (a slow host); the silent exit was "
                 "not hit this time\n";
    EXPECT_TRUE(interrupted_result(r.raw, "aborted_tools"));
    EXPECT_EQ(r.terminal.content.at("reason"), "agent_error");
    EXPECT_EQ(closed->content.value("closed_by_finish", false), false);
    return;
  }
  EXPECT_EQ(r.terminal.content.at("reason"), "no_terminal_event");
  // Seen once in CI (a loaded machine): the signal landed as claude began its interruption report — it printed the
  // report's user lines and exited 0 before the result. Still no result, so the same terminal.
  const bool rejected = rejected_in_report(r.raw, "call_mock_sleep_2");
  EXPECT_EQ(closed->content.value("closed_by_finish", false), !rejected) << closed->content.dump();
  if (rejected) {
    EXPECT_EQ(closed->content.value("error", "").rfind("The user doesn't want to proceed", 0), 0u)
        << closed->content.dump();
  }
}

// Probe: SIGTERM (the stop policy pi needs) to the CLI during the tool: Claude kills its tool (SIGKILL: "Exit code
// 137") and reports it as a failed tool result, and exits 143 without a result line: failed/exited. Why the provider
// does not stop Claude with SIGTERM.
TEST_F(RealClaude, SigtermDuringAToolExits143WithoutAResult) {
  std::optional<int> sleep_pid;
  auto r = run_signalled_during_tool(SIGTERM, "long-tool-echo-sigterm", sleep_pid);
  ASSERT_TRUE(sleep_pid.has_value()) << "the tool's sleep never ran\n" << r.dump();
  EXPECT_FALSE(alive(*sleep_pid)) << "the tool's sleep survived";
  EXPECT_EQ(r.raw.exit_code(), 143) << r.dump();
  EXPECT_TRUE(r.raw.of_type("result").empty()) << r.dump();
  ASSERT_EQ(r.terminal.type, message_type::terminal_failed) << r.dump();
  EXPECT_EQ(r.terminal.content.at("reason"), "exited");
  EXPECT_EQ(r.terminal.content.at("exit_code"), 143);
  const auto users = r.raw.of_type("user");
  EXPECT_LE(users.size(), 1u) << r.dump();
  const message* failed = expect_one_tool_call(r, "call_mock_sleep_2", json{{"command", "echo sleeping; sleep 30"}},
                                               message_type::tool_failed);
  ASSERT_NE(failed, nullptr);
  if (!users.empty()) {  // printed unless claude was killed before (as with SIGINT, seen under load)
    const auto& raw_failed = users[0]->at("message").at("content").at(0);
    EXPECT_EQ(raw_failed.at("tool_use_id"), "call_mock_sleep_2");
    EXPECT_EQ(raw_failed.value("is_error", false), true);
    EXPECT_EQ(raw_failed.at("content"), "Exit code 137\nsleeping");
    EXPECT_EQ(failed->content.at("error"), "Exit code 137\nsleeping");
  } else {
    std::cout << "[ real claude ] NOTE: no tool result line after SIGTERM\n";
    EXPECT_EQ(failed->content.value("closed_by_finish", false), true);
  }
}

#ifdef AGENTHOST_CLI
// `agenthost run --agent claude` interrupted by SIGINT once the first text delta is out: terminal.cancelled, exit code
// 130, nothing left.
TEST_F(RealClaude, CliSigintCancelsTheRunAndExits130) {
  const auto o = options("slow");
  expect_agenthost_run_interrupted("claude", o.executable.string(), {"--model", "slow", "--cwd", work}, o.env,
                                   "{\"type\":\"assistant\",", dir, run_mark());
}
#endif

}  // namespace
