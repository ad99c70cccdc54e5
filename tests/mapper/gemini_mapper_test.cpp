// Behavioural tests of the Gemini CLI mapper: every recorded transcript (fixtures/gemini/recorded/) against the mock
// model's script, and the terminal decision. Hostile input and the fast path: gemini_mapper_input_test.cpp.
#include "gemini_mapper_test_util.hpp"

#include <csignal>
#include <string>
#include <vector>

namespace agenthost::mapper::test {
namespace {

// ---- recorded transcripts --------------------------------------------------------------------------------------------

TEST(GeminiMapper, AnswerIsTheScriptedTextInTheScriptedChunks) {
  const auto s = scripted("answer");
  for (const auto mode : {thinking_mode::buffered, thinking_mode::stream}) {
    const auto out = run_gemini(read_lines(gemini_fixture("answer")), exited(0), {.thinking = mode});
    expect_valid_run(out);
    EXPECT_EQ(out.front().type, message_type::session_started);
    EXPECT_EQ(out.front().content.at("session_id"), recorded_session_id("answer"));
    EXPECT_EQ(out.front().content.at("agent"), "gemini");
    EXPECT_EQ(out.front().content.at("model"), "answer");
    // One assistant message per streamed part, exactly the script's chunks (whitespace-only ones included).
    EXPECT_EQ(texts(out, message_type::assistant), s.chunks);
    EXPECT_TRUE(of_type(out, message_type::assistant_thought).empty()) << "gemini's stream-json has no thoughts";
    const auto& t = terminal(out);
    ASSERT_EQ(t.type, message_type::terminal_completed) << to_jsonl(out);
    EXPECT_EQ(t.content.at("text"), s.text());
    EXPECT_EQ(t.content.at("session_id"), recorded_session_id("answer"));
    EXPECT_EQ(t.content.at("model"), "answer");
    EXPECT_EQ(t.content.at("usage"), (json{{"input_tokens", 100}, {"output_tokens", 15}, {"cache_read_tokens", 0},
                                           {"cache_write_tokens", 0}, {"total_tokens", 115}}));
    EXPECT_FALSE(t.content.contains("invalid_output_lines"));
  }
}

TEST(GeminiMapper, ToolCallWithItsOutputAndTheFinalTurnsText) {
  const auto s = scripted("tool");
  const auto buffered = run_gemini(read_lines(gemini_fixture("tool")));
  const auto streamed = run_gemini(read_lines(gemini_fixture("tool")), exited(0), {.thinking = thinking_mode::stream});
  EXPECT_EQ(to_jsonl(buffered), to_jsonl(streamed));
  const auto& out = buffered;
  expect_valid_run(out);
  EXPECT_EQ(texts(out, message_type::assistant), s.chunks);
  EXPECT_EQ(assistant_text(out), s.text());
  EXPECT_EQ(type_names(out),
            (std::vector<std::string>{"session.started", "assistant", "assistant", "assistant", "tool.call",
                                      "tool.completed", "assistant", "assistant", "assistant", "assistant", "assistant",
                                      "assistant", "assistant", "assistant", "assistant", "assistant", "assistant",
                                      "assistant", "assistant", "terminal.completed"}));
  const auto calls = of_type(out, message_type::tool_call);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].content, (json{{"tool_call_id", "run_shell_command__call_mock_echo_1"},
                                    {"name", "run_shell_command"},
                                    {"input", {{"command", "echo agenthost-tool-output"}}}}));
  const auto done = of_type(out, message_type::tool_completed);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].content, (json{{"tool_call_id", "run_shell_command__call_mock_echo_1"},
                                   {"name", "run_shell_command"},
                                   {"output", "agenthost-tool-output"},
                                   {"raw_output", {{"status", "success"}, {"output", "agenthost-tool-output"}}}}));
  const auto& t = terminal(out);
  ASSERT_EQ(t.type, message_type::terminal_completed);
  // The final answer is the last turn's text (after the tool), not the text before the call.
  EXPECT_EQ(t.content.at("text"), s.last_turn_text);
  EXPECT_EQ(t.content.at("usage").at("input_tokens"), 200);
  EXPECT_EQ(t.content.at("usage").at("output_tokens"), 25);
}

TEST(GeminiMapper, Http500IsAnAgentErrorWithItsStatus) {
  const auto out = run_gemini(read_lines(gemini_fixture("http500")), exited(244));
  expect_valid_run(out);
  const auto& t = terminal(out);
  ASSERT_EQ(t.type, message_type::terminal_failed) << to_jsonl(out);
  EXPECT_EQ(t.content.at("reason"), "agent_error");
  const std::string msg =
      "[API Error: {\"error\":{\"code\":500,\"message\":\"mock internal server error\",\"status\":\"INTERNAL\"}}]";
  EXPECT_EQ(t.content.at("text"), msg);
  EXPECT_EQ(t.content.at("error_message"), msg);
  EXPECT_EQ(t.content.at("error_type"), "unknown");
  EXPECT_EQ(t.content.at("http_status"), 500);
  EXPECT_EQ(t.content.at("retryable"), true);
  EXPECT_EQ(t.content.at("exit_code"), 244);
  EXPECT_EQ(t.content.at("session_id"), recorded_session_id("http500"));
  EXPECT_TRUE(of_type(out, message_type::assistant).empty());
}

TEST(GeminiMapper, Http429StatusComesBackFromTheExitCode) {
  const auto out = run_gemini(read_lines(gemini_fixture("http429")), exited(173));
  expect_valid_run(out);
  const auto& t = terminal(out);
  ASSERT_EQ(t.type, message_type::terminal_failed);
  EXPECT_EQ(t.content.at("reason"), "agent_error");
  EXPECT_EQ(t.content.at("text").get<std::string>().rfind("[API Error: mock rate limit exceeded]\n", 0), 0u);
  EXPECT_EQ(t.content.at("http_status"), 429) << "173 = 429 mod 256, the only trace of the status";
  EXPECT_EQ(t.content.at("retryable"), true);
  // Without the exit code the message alone still reads as a rate limit (retryable), but has no status.
  const auto no_code = run_gemini(read_lines(gemini_fixture("http429")), {.stopped_after_finish = true});
  EXPECT_FALSE(terminal(no_code).content.contains("http_status"));
  EXPECT_EQ(terminal(no_code).content.at("retryable"), true);
}

TEST(GeminiMapper, CutStreamKeepsThePartialTextAndFailsRetryably) {
  const auto out = run_gemini(read_lines(gemini_fixture("cut-retry")), exited(1));
  expect_valid_run(out);
  EXPECT_EQ(texts(out, message_type::assistant), (std::vector<std::string>{"Hello ", "wor"}));
  const auto& t = terminal(out);
  ASSERT_EQ(t.type, message_type::terminal_failed);
  EXPECT_EQ(t.content.at("reason"), "agent_error");
  EXPECT_EQ(t.content.at("text"), "[API Error: terminated]");
  EXPECT_FALSE(t.content.contains("http_status")) << "exit code 1 is not a status";
  EXPECT_EQ(t.content.at("retryable"), true);
  EXPECT_EQ(t.content.at("exit_code"), 1);
}

TEST(GeminiMapper, SilentlyRetriedAnswerCompletes) {
  const auto s = scripted("flaky");
  const auto out = run_gemini(read_lines(gemini_fixture("flaky")));
  expect_valid_run(out);
  EXPECT_EQ(texts(out, message_type::assistant), s.chunks);
  ASSERT_EQ(terminal(out).type, message_type::terminal_completed);
  EXPECT_EQ(terminal(out).content.at("text"), "Recovered answer ü.");
}

TEST(GeminiMapper, StoppedMidStreamIsCancelledWithThePrefix) {
  const auto s = scripted("slow");
  const auto lines = read_lines(gemini_fixture("slow"));
  const auto out = run_gemini(lines, {.cancelled = true});
  expect_valid_run(out);
  EXPECT_EQ(texts(out, message_type::assistant), (std::vector<std::string>{"tick ", "tick "}));
  EXPECT_EQ(terminal(out).type, message_type::terminal_cancelled);
  EXPECT_EQ(terminal(out).content.at("session_id"), recorded_session_id("slow"));
  // The same output with an exit 0 and no cancellation: gemini never printed its result.
  const auto cut = run_gemini(lines, exited(0));
  expect_valid_run(cut);
  ASSERT_EQ(terminal(cut).type, message_type::terminal_failed);
  EXPECT_EQ(terminal(cut).content.at("reason"), "no_terminal_event");
  EXPECT_EQ(terminal(cut).content.at("text"), "gemini's output ended before its final event (result)");
  EXPECT_EQ(terminal(cut).content.at("retryable"), true);
}

TEST(GeminiMapper, StoppedDuringAToolClosesTheCall) {
  for (const auto* scenario : {"long-tool", "long-tool-sigterm"}) {
    SCOPED_TRACE(scenario);
    const auto lines = read_lines(gemini_fixture(scenario));
    const auto out = run_gemini(lines, {.cancelled = true});
    expect_valid_run(out);
    EXPECT_EQ(type_names(out), (std::vector<std::string>{"session.started", "assistant", "tool.call", "tool.failed",
                                                         "terminal.cancelled"}));
    EXPECT_EQ(of_type(out, message_type::tool_call)[0].content.at("input"), (json{{"command", "sleep 30"}}));
    const auto failed = of_type(out, message_type::tool_failed)[0].content;
    EXPECT_EQ(failed.at("closed_by_finish"), true);
    EXPECT_EQ(failed.at("tool_call_id"), "run_shell_command__call_mock_sleep_1");
    EXPECT_EQ(failed.at("name"), "run_shell_command");
    // Killed by someone else than the caller: signaled.
    const auto killed = run_gemini(lines, {.status = process::signaled{SIGKILL}});
    expect_valid_run(killed);
    EXPECT_EQ(terminal(killed).content.at("reason"), "signaled");
    EXPECT_EQ(terminal(killed).content.at("signal"), SIGKILL);
  }
}

TEST(GeminiMapper, EveryRecordingGivesTheSameMessagesInBothThinkingModes) {
  for (const auto* scenario :
       {"tool", "answer", "http500", "http429", "cut-retry", "flaky", "slow", "long-tool", "long-tool-sigterm"}) {
    SCOPED_TRACE(scenario);
    const auto lines = read_lines(gemini_fixture(scenario));
    for (const run_end& end : {run_end{.status = process::exited{0}}, run_end{.cancelled = true}}) {
      const auto buffered = run_gemini(lines, end, {.thinking = thinking_mode::buffered});
      const auto streamed = run_gemini(lines, end, {.thinking = thinking_mode::stream});
      expect_valid_run(buffered);
      EXPECT_EQ(to_jsonl(buffered), to_jsonl(streamed));
      EXPECT_TRUE(of_type(buffered, message_type::assistant_thought).empty());
      EXPECT_FALSE(terminal(buffered).content.contains("invalid_output_line_count"));
    }
  }
}

// ---- terminal decision -------------------------------------------------------------------------------------------------

TEST(GeminiMapper, ExitCodesWithoutAResult) {
  const std::vector<std::string> lines = {kInit, kUser, delta("Hel")};
  const auto one = run_gemini(lines, exited(1));
  expect_valid_run(one);
  EXPECT_EQ(terminal(one).content.at("reason"), "exited");
  EXPECT_EQ(terminal(one).content.at("exit_code"), 1);
  EXPECT_EQ(terminal(one).content.at("retryable"), true) << "it had started working";
  EXPECT_FALSE(terminal(one).content.contains("http_status"));
  // A status-like exit code with an error event but no result (its result line lost): the status is read back.
  const auto lost = run_gemini({kInit, R"({"type":"error","timestamp":"t","severity":"error","message":"boom"})"},
                               {.status = process::exited{247}, .stderr_tail = "x\nlast words\n"});
  expect_valid_run(lost);
  EXPECT_EQ(terminal(lost).content.at("reason"), "exited");
  EXPECT_EQ(terminal(lost).content.at("http_status"), 503);
  EXPECT_EQ(terminal(lost).content.at("retryable"), true);
  EXPECT_EQ(terminal(lost).content.at("text"), "gemini exited with code 247; boom; stderr: last words");
  // Nothing printed at all.
  const auto nothing = run_gemini({}, exited(41));
  expect_valid_run(nothing);
  EXPECT_EQ(terminal(nothing).content.at("reason"), "exited");
  EXPECT_EQ(terminal(nothing).content.at("retryable"), false);
  const auto silent = run_gemini({}, exited(0));
  EXPECT_EQ(terminal(silent).content.at("reason"), "no_terminal_event");
  EXPECT_EQ(terminal(silent).content.at("text"), "gemini printed no JSON event");
  EXPECT_EQ(terminal(silent).content.at("retryable"), false);
}

TEST(GeminiMapper, SignalsTimeoutsAndStoppedAfterFinish) {
  const std::vector<std::string> done = {kInit, delta("ok"), kSuccess};
  const auto timeout = run_gemini({kInit, delta("ok")}, {.timeout = "idle"});
  expect_valid_run(timeout);
  EXPECT_EQ(terminal(timeout).content.at("reason"), "timeout");
  EXPECT_EQ(terminal(timeout).content.at("timeout"), "idle");
  EXPECT_EQ(terminal(timeout).content.at("retryable"), true);
  const auto killed = run_gemini({kInit, delta("ok")}, {.status = process::signaled{SIGSEGV}});
  EXPECT_EQ(terminal(killed).content.at("reason"), "signaled");
  // The provider stopped gemini after its result (it lingered): the result decides.
  const auto lingered = run_gemini(done, {.status = process::signaled{SIGKILL}, .stopped_after_finish = true});
  expect_valid_run(lingered);
  ASSERT_EQ(terminal(lingered).type, message_type::terminal_completed) << to_jsonl(lingered);
  EXPECT_EQ(terminal(lingered).content.at("stopped_after_finish"), true);
  EXPECT_EQ(terminal(lingered).content.at("text"), "ok");
  // A success result but a non-zero exit: the exit is not ignored.
  const auto odd = run_gemini(done, exited(3));
  EXPECT_EQ(terminal(odd).content.at("reason"), "exited");
  EXPECT_EQ(terminal(odd).content.at("text"), "gemini exited with code 3; after a success result");
  // A cancellation wins over everything the agent printed.
  const auto cancelled = run_gemini(done, {.cancelled = true});
  EXPECT_EQ(terminal(cancelled).type, message_type::terminal_cancelled);
}

TEST(GeminiMapper, ErrorResults) {
  // INVALID_STREAM (0.61.0): an error event, then a result with status error and no error object.
  const auto invalid_stream = run_gemini(
      {kInit, R"({"type":"error","timestamp":"t","severity":"error","message":"Model stream ended with empty response"})",
       R"({"type":"result","timestamp":"t","status":"error","stats":{}})"},
      exited(0));
  expect_valid_run(invalid_stream);
  const auto statuses = of_type(invalid_stream, message_type::status);
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_EQ(statuses[0].content, (json{{"kind", "warning"}, {"code", "gemini_error"}, {"severity", "error"},
                                       {"text", "Model stream ended with empty response"}}));
  EXPECT_EQ(terminal(invalid_stream).content.at("reason"), "agent_error");
  EXPECT_EQ(terminal(invalid_stream).content.at("text"), "Model stream ended with empty response");
  EXPECT_EQ(terminal(invalid_stream).content.at("retryable"), false);
  // A fatal error type is never retryable, whatever its text says.
  const auto fatal = run_gemini(
      {kInit, R"({"type":"result","status":"error","error":{"type":"FatalTurnLimitedError","message":"Reached max session turns; unavailable"}})"},
      exited(53));
  EXPECT_EQ(terminal(fatal).content.at("error_type"), "FatalTurnLimitedError");
  EXPECT_EQ(terminal(fatal).content.at("retryable"), false);
  EXPECT_FALSE(terminal(fatal).content.contains("http_status"));
  // A status at the start of the message.
  const auto leading = run_gemini({R"({"type":"result","status":"error","error":{"message":"[API Error: 400 bad"}})"},
                                  exited(144));
  EXPECT_EQ(terminal(leading).content.at("http_status"), 400);
  EXPECT_EQ(terminal(leading).content.at("retryable"), false);
  // A warning-severity error event is reported and does not become the failure text.
  const auto warned = run_gemini({kInit, R"({"type":"error","severity":"warning","message":"Loop detected"})", kSuccess});
  EXPECT_EQ(terminal(warned).type, message_type::terminal_completed);
  EXPECT_EQ(of_type(warned, message_type::status).at(0).content.at("severity"), "warning");
  // An unknown result status.
  const auto odd = run_gemini({kInit, R"({"type":"result","status":"paused"})"});
  EXPECT_EQ(terminal(odd).content.at("reason"), "protocol");
  EXPECT_EQ(terminal(odd).content.at("retryable"), false);
}

TEST(GeminiMapper, HttpStatusAndRetryableRules) {
  EXPECT_EQ(gemini_http_status("429 Too Many Requests", std::nullopt), 429);
  EXPECT_EQ(gemini_http_status("[API Error: 503 unavailable]", std::nullopt), 503);
  EXPECT_EQ(gemini_http_status(R"([API Error: {"error":{"code": 404,"message":"no model"}}])", std::nullopt), 404);
  EXPECT_EQ(gemini_http_status("message", 244), 500);
  EXPECT_EQ(gemini_http_status("message", 144), 400);
  EXPECT_EQ(gemini_http_status("message", 255), 511);
  EXPECT_EQ(gemini_http_status("message", 143), std::nullopt);
  EXPECT_EQ(gemini_http_status("message", 130), std::nullopt) << "FatalCancellationError's own code";
  EXPECT_EQ(gemini_http_status("message", 1), std::nullopt);
  EXPECT_EQ(gemini_http_status("4290 things", std::nullopt), std::nullopt);
  EXPECT_EQ(gemini_http_status(R"({"code":1234})", std::nullopt), std::nullopt);
  EXPECT_EQ(gemini_http_status(R"({"code":500})", 173), 500) << "the message wins over the exit code";
  EXPECT_TRUE(gemini_error_is_retryable("x", "unknown", 500));
  EXPECT_TRUE(gemini_error_is_retryable("x", "unknown", 429));
  EXPECT_TRUE(gemini_error_is_retryable("x", "", 408));
  EXPECT_FALSE(gemini_error_is_retryable("terminated", "unknown", 400));
  EXPECT_TRUE(gemini_error_is_retryable("[API Error: terminated]", "unknown", std::nullopt));
  EXPECT_TRUE(gemini_error_is_retryable("TypeError: fetch failed", "", std::nullopt));
  EXPECT_TRUE(gemini_error_is_retryable("read ECONNRESET", "", std::nullopt));
  EXPECT_FALSE(gemini_error_is_retryable("API key not valid", "unknown", std::nullopt));
  EXPECT_FALSE(gemini_error_is_retryable("overloaded", "FatalAuthenticationError", 503));
}

}  // namespace
}  // namespace agenthost::mapper::test
