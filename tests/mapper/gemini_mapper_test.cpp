// Behavioural tests of the Gemini CLI mapper: every recorded transcript (fixtures/gemini/recorded/) against the mock
// model's script, the terminal decision, and hostile input.
#include "mapper_test_util.hpp"

#include <agenthost/mapper/gemini_mapper.hpp>

#include <csignal>
#include <string>
#include <vector>

namespace agenthost::mapper::test {
namespace {

std::string gemini_fixture(const std::string& scenario) {
  return std::string(AGENTHOST_FIXTURES_DIR) + "/gemini/recorded/gemini-0.61.0-" + scenario + ".jsonl";
}

/// The session id gemini printed in a recorded transcript's `init` (its first line).
std::string recorded_session_id(const std::string& scenario) {
  return json::parse(read_lines(gemini_fixture(scenario)).at(0)).at("session_id").get<std::string>();
}

std::vector<message> run_gemini(const std::vector<std::string>& lines, run_end end = exited(0),
                                gemini_mapper_options options = {}) {
  return map_lines<gemini_mapper>(lines, std::move(options), end);
}

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

const std::string kInit = R"({"type":"init","timestamp":"t","session_id":"s-1","model":"m"})";
const std::string kUser = R"({"type":"message","timestamp":"t","role":"user","content":"hi"})";
std::string delta(const std::string& text) {
  return json{{"type", "message"}, {"timestamp", "t"}, {"role", "assistant"}, {"content", text}, {"delta", true}}.dump();
}
const std::string kSuccess =
    R"({"type":"result","timestamp":"t","status":"success","stats":{"total_tokens":15,"input_tokens":10,"output_tokens":5,"cached":0,"input":10,"duration_ms":1,"tool_calls":0,"models":{}}})";
const std::string kToolUse =
    R"({"type":"tool_use","timestamp":"t","tool_name":"read_file","tool_id":"read_file__c1","parameters":{"path":"a.txt"}})";
const std::string kToolResult =
    R"({"type":"tool_result","timestamp":"t","tool_id":"read_file__c1","status":"success","output":"contents"})";

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

// ---- tools -------------------------------------------------------------------------------------------------------------

TEST(GeminiMapper, ToolFailureAndSynthesizedCall) {
  const auto out = run_gemini(
      {kInit, kToolUse,
       R"({"type":"tool_result","tool_id":"read_file__c1","status":"error","output":"display","error":{"type":"FILE_NOT_FOUND","message":"File not found: a.txt"}})",
       R"({"type":"tool_result","tool_id":"run_shell_command__c2","status":"success","output":"hi"})", kSuccess});
  expect_valid_run(out);
  const auto failed = of_type(out, message_type::tool_failed);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].content,
            (json{{"tool_call_id", "read_file__c1"},
                  {"name", "read_file"},
                  {"error", "File not found: a.txt"},
                  {"raw_output",
                   {{"status", "error"},
                    {"output", "display"},
                    {"error", {{"type", "FILE_NOT_FOUND"}, {"message", "File not found: a.txt"}}}}}}));
  // A result for a call never announced: a synthesized call, named after the id's prefix.
  const auto calls = of_type(out, message_type::tool_call);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].content, (json{{"tool_call_id", "run_shell_command__c2"},
                                    {"name", "run_shell_command"},
                                    {"input", json::object()},
                                    {"synthesized", true}}));
  EXPECT_EQ(of_type(out, message_type::tool_completed).at(0).content.at("output"), "hi");
  // An error result without an error object or output still says something.
  const auto bare = run_gemini({kInit, kToolUse, R"({"type":"tool_result","tool_id":"read_file__c1","status":"error"})"});
  EXPECT_EQ(of_type(bare, message_type::tool_failed).at(0).content.at("error"), "tool error");
}

TEST(GeminiMapper, DuplicatedEventsCountOnce) {
  const auto out = run_gemini({kInit, kInit, kUser, delta("Let me read it."), kToolUse, kToolUse, kToolResult,
                               kToolResult, delta("Done."), kToolUse, kSuccess,
                               R"({"type":"result","status":"error","error":{"message":"late"}})"});
  expect_valid_run(out);
  EXPECT_EQ(type_names(out), (std::vector<std::string>{"session.started", "assistant", "tool.call", "tool.completed",
                                                       "assistant", "terminal.completed"}));
  // The repeated (closed) tool_use after the result did not reset the final turn's text; the first result decides.
  EXPECT_EQ(terminal(out).content.at("text"), "Done.");
  EXPECT_EQ(terminal(out).content.at("usage").at("input_tokens"), 10);
  // A repeated delta is indistinguishable from a model that says the same thing twice: it is emitted as printed.
  const auto twice = run_gemini({kInit, delta("tick "), delta("tick "), kSuccess});
  EXPECT_EQ(assistant_text(twice), "tick tick ");
}

// ---- session -----------------------------------------------------------------------------------------------------------

TEST(GeminiMapper, ResumedOrRestartedSession) {
  const auto resumed = run_gemini({kInit, kSuccess}, exited(0), {.requested_session_id = "s-1"});
  expect_valid_run(resumed);
  EXPECT_EQ(resumed.front().type, message_type::session_resumed);
  EXPECT_EQ(resumed.front().content.at("resume"), "resumed");
  const auto restarted = run_gemini({kInit, kSuccess}, exited(0), {.requested_session_id = "other"});
  EXPECT_EQ(restarted.front().content.at("resume"), "restarted");
  EXPECT_EQ(restarted.front().content.at("requested_session_id"), "other");
  // Text before any init: a synthesized session first.
  const auto early = run_gemini({delta("x"), kInit, kSuccess});
  expect_valid_run(early);
  EXPECT_EQ(early.front().content.at("synthesized"), true);
  EXPECT_EQ(early.front().content.at("session_id"), "");
  EXPECT_EQ(terminal(early).content.at("session_id"), "s-1") << "the late init still names the session";
  EXPECT_EQ(terminal(early).content.at("model"), "m");
  gemini_mapper m;
  std::vector<message> out;
  m.on_line(kInit, out);
  EXPECT_EQ(m.session_id(), "s-1");
}

// ---- bad input ---------------------------------------------------------------------------------------------------------

TEST(GeminiMapper, GarbageLinesAreCountedAndNeverStopTheStream) {
  const std::vector<std::string> bad = {
      "not json",
      R"({"type":"message","role":"assistant","content":"trunc)",
      "[1,2,3]",
      R"({"no_type":1})",
      R"({"type":5})",
      R"({"type":"message","role":"assistant","content":"x","delta":true} {"type":"result"})",
      R"({"type":"message","role":"assistant","content":42,"delta":true})",
      R"({"type":"message","content":"no role"})",
      R"({"type":"tool_use","tool_id":7,"tool_name":"x"})",
      R"({"type":"tool_result","tool_id":"read_file__c1"})",
      R"({"type":"init","session_id":null})",
      R"({"type":"result","status":false})",
      R"({"type":"error"})",
      "{\"type\":\"message\",\"role\":\"assistant\",\"content\":\"\xff\xfe\"}",
  };
  std::vector<std::string> lines = {kInit, delta("Hello ")};
  lines.insert(lines.end(), bad.begin(), bad.end());
  lines.insert(lines.end(), {"", "   ", kToolUse, kToolResult, delta("world."), kSuccess});
  gemini_mapper mapper;
  std::vector<message> out;
  for (const auto& l : lines) mapper.on_line(l, out);
  EXPECT_TRUE(mapper.agent_finished());
  mapper.finish({.status = process::exited{0}}, out);
  expect_valid_run(out);
  EXPECT_EQ(assistant_text(out), "Hello world.");
  const auto& t = terminal(out);
  ASSERT_EQ(t.type, message_type::terminal_completed) << "a completed run stays completed";
  EXPECT_EQ(t.content.at("invalid_output_line_count"), bad.size());
  ASSERT_EQ(t.content.at("invalid_output_lines").size(), bad.size());
  EXPECT_EQ(t.content.at("invalid_output_lines")[0], "not json");
  EXPECT_EQ(mapper.stats().invalid_lines, bad.size());
  EXPECT_EQ(mapper.stats().lines, lines.size());
  EXPECT_EQ(of_type(out, message_type::tool_completed).size(), 1u) << "the invalid tool_result changed nothing";
}

TEST(GeminiMapper, InvalidLinesAreBoundedAndReportedInFailures) {
  std::vector<std::string> lines = {kInit};
  for (int i = 0; i < 25; ++i) lines.push_back("garbage " + std::to_string(i) + std::string(100, 'x'));
  const auto out = run_gemini(lines, exited(0), {.max_invalid_lines = 3, .max_invalid_line_bytes = 20});
  expect_valid_run(out);
  const auto& t = terminal(out);
  EXPECT_EQ(t.content.at("reason"), "no_terminal_event");
  EXPECT_EQ(t.content.at("invalid_output_line_count"), 25);
  ASSERT_EQ(t.content.at("invalid_output_lines").size(), 3u);
  EXPECT_EQ(t.content.at("invalid_output_lines")[0], "garbage 0xxxxxxxxxxx…");
  EXPECT_NE(t.content.at("text").get<std::string>().find("printed 25 line(s) of non-JSON or invalid output"),
            std::string::npos);
}

TEST(GeminiMapper, UnknownEventsAndFieldsAreIgnoredNotInvalid) {
  const auto out = run_gemini(
      {kInit, R"({"type":"thought","content":"future event"})", R"({"type":"usage","n":{"deep":[1,2,{"x":null}]}})",
       R"({"delta":true,"content":"Key order ","role":"assistant","type":"message","extra":[1]})",
       R"({"type":"message","role":"system","content":"not the model's"})",
       R"({"type":"message","role":"assistant","content":"does not matter","delta":"yes","model":null,"timestamp":5})",
       R"({"type":"init","session_id":"s-2","model":42})", kSuccess});
  expect_valid_run(out);
  EXPECT_EQ(assistant_text(out), "Key order does not matter");
  EXPECT_FALSE(terminal(out).content.contains("invalid_output_lines"));
  EXPECT_EQ(terminal(out).content.at("session_id"), "s-1") << "a second init changes nothing";
}

TEST(GeminiMapper, EscapesAndLoneSurrogates) {
  const auto out = run_gemini({kInit, R"({"type":"message","role":"assistant","content":"caf\u00e9\n\"q\"\t"})",
                               R"({"type":"message","role":"assistant","content":"\ud83d"})",
                               R"({"type":"message","role":"assistant","content":"\ude00!"})", kSuccess});
  expect_valid_run(out);
  EXPECT_EQ(texts(out, message_type::assistant),
            (std::vector<std::string>{"café\n\"q\"\t", "\xEF\xBF\xBD", "\xEF\xBF\xBD!"}));
}

// Assistant text lines of gemini's exact shape take a byte-scan fast path; every other line (here: the same events
// with their keys in another order) takes simdjson On-Demand. Both must accept the same lines and give the same
// messages.
TEST(GeminiMapper, FastPathAndOnDemandPathAgree) {
  for (const auto* scenario : {"tool", "answer", "http500", "http429", "cut-retry", "flaky", "slow", "long-tool"}) {
    SCOPED_TRACE(scenario);
    const auto lines = read_lines(gemini_fixture(scenario));
    const auto reordered = sorted_keys(lines);  // `content` first
    EXPECT_NE(lines, reordered);
    EXPECT_EQ(to_jsonl(run_gemini(lines)), to_jsonl(run_gemini(reordered)));
  }
  const std::string head = R"({"type":"message","timestamp":"2026-11-30T00:20:37.967Z","role":"assistant","content":)";
  const std::vector<std::pair<std::string, bool>> cases = {
      {head + R"("caf\u00e9 \ud83d\n\"q\"","delta":true})", true},
      {head + R"("x","delta":false})", true},
      {head + R"("x"})", true},
      {head + R"("x","delta":true}  )", true},
      {head + R"("x","delta":true,"extra":[1]})", true},
      {R"({"type":"message","timestamp":5,"role":"assistant","content":"x","delta":true})", true},
      {R"({"type":"message","timestamp":"t","role":"assis\u0074ant","content":"x","delta":true})", true},
      {head + R"("x","delta":true}x)", false},
      {head + R"("a\qb","delta":true})", false},
      {head + R"("x","delta":tru})", false},
      {head + R"("x)", false},
      {"{\"type\":\"message\",\"timestamp\":\"t\xff\",\"role\":\"assistant\",\"content\":\"x\",\"delta\":true}", false},
      {head + "\"\xe2\x82\",\"delta\":true}", false},  // a truncated UTF-8 sequence in the content
  };
  // The same JSON text with one leading space never matches the fast path's shape: the On-Demand path's verdict.
  auto agree = [](const std::string& line) {
    gemini_mapper fast, slow;
    std::vector<message> fast_out, slow_out;
    fast.on_line(line, fast_out);
    slow.on_line(" " + line, slow_out);
    EXPECT_EQ(fast.stats().invalid_lines, slow.stats().invalid_lines) << line;
    EXPECT_EQ(to_jsonl(fast_out), to_jsonl(slow_out)) << line;
    return fast.stats().invalid_lines == 0;
  };
  // Random byte edits of real assistant lines after the shared head (deterministic): both paths agree on each.
  std::uint64_t state = 42;
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::size_t>(state >> 33);
  };
  static const std::string kBytes[] = {"\"", "\\", "}", ",", "x", "\x01", "\xff", "\xc3\xa9", "\xe2\x82", " ", "u",
                                       "\\u00e9", "\\ud83d", "\\q", ":", "{", "]", "true", "0"};
  std::size_t accepted = 0, tried = 0;
  for (const auto& l : read_lines(gemini_fixture("tool"))) {
    if (l.find(R"("role":"assistant")") == std::string::npos) continue;
    const std::size_t from = std::string_view(R"({"type":"message",)").size();
    for (int i = 0; i < 400; ++i) {
      std::string m = l;
      for (std::size_t edits = 1 + next() % 2; edits > 0; --edits) {
        const std::size_t at = from + next() % (m.size() - from);
        switch (next() % 3) {
          case 0: m.replace(at, 1, kBytes[next() % std::size(kBytes)]); break;
          case 1: m.insert(at, kBytes[next() % std::size(kBytes)]); break;
          default: m.erase(at, 1); break;
        }
      }
      ++tried;
      if (agree(m)) ++accepted;
    }
  }
  EXPECT_GT(accepted, 0u) << "some edits keep the line valid";
  EXPECT_LT(accepted, tried) << "most edits break it";
  for (const auto& [line, valid] : cases) {
    EXPECT_EQ(agree(line), valid) << line;
    SCOPED_TRACE(line);
    gemini_mapper mapper;
    std::vector<message> out;
    mapper.on_line(line, out);
    EXPECT_EQ(mapper.stats().invalid_lines, valid ? 0u : 1u);
    // The On-Demand path's verdict on the same event with `type` moved last (never the fast path's shape).
    static constexpr std::string_view kType = R"("type":"message",)";
    ASSERT_EQ(line.substr(1, kType.size()), kType);
    const auto close = line.rfind('}');
    if (close == std::string::npos) continue;  // unclosed: nothing to move
    const std::string moved = "{" + line.substr(1 + kType.size(), close - 1 - kType.size()) + R"(,"type":"message"})" +
                              line.substr(close + 1);
    gemini_mapper other;
    std::vector<message> other_out;
    other.on_line(moved, other_out);
    EXPECT_EQ(other.stats().invalid_lines, valid ? 0u : 1u) << moved;
    EXPECT_EQ(to_jsonl(out), to_jsonl(other_out));
    if (valid) {
      EXPECT_EQ(out.size(), 2u) << "session.started, assistant";
    }
  }
}

TEST(GeminiMapper, OversizeLineIsReportedAndTheRunGoesOn) {
  gemini_mapper mapper;
  std::vector<message> out;
  mapper.on_line(kInit, out);
  mapper.on_oversize_line(R"({"type":"message","role":"assistant","content":"aaaa)", 50'000'000, out);
  mapper.on_line(delta("after"), out);
  mapper.on_line(kSuccess, out);
  mapper.finish({.status = process::exited{0}}, out);
  expect_valid_run(out);
  EXPECT_EQ(assistant_text(out), "after");
  const auto& t = terminal(out);
  EXPECT_EQ(t.type, message_type::terminal_completed);
  EXPECT_EQ(t.content.at("invalid_output_line_count"), 1);
  EXPECT_EQ(t.content.at("invalid_output_lines")[0].get<std::string>().rfind("[line of 50000000 bytes dropped", 0), 0u);
}

TEST(GeminiMapper, LongLinesAndDeepParameters) {
  // A 20-MiB delta grows the buffer, the next line releases it; the text is intact either way.
  const std::string big(20u << 20, 'z');
  std::string deep = "1";
  for (int i = 0; i < 300; ++i) deep = "[" + deep + "]";
  const auto out = run_gemini({kInit, delta(big), delta("small"),
                               R"({"type":"tool_use","tool_id":"t1","tool_name":"x","parameters":)" + deep + "}",
                               kSuccess});
  expect_valid_run(out);
  EXPECT_EQ(assistant_text(out), big + "small");
  // Parameters nested deeper than the mapper converts: the line is invalid (no call is opened).
  EXPECT_TRUE(of_type(out, message_type::tool_call).empty());
  EXPECT_EQ(terminal(out).content.at("invalid_output_line_count"), 1);
}

TEST(GeminiMapper, FinishIsIdempotentAndLinesAfterItAreIgnored) {
  gemini_mapper mapper;
  std::vector<message> out;
  for (const auto& l : read_lines(gemini_fixture("answer"))) mapper.on_line(l, out);
  mapper.finish({.status = process::exited{0}}, out);
  const std::size_t n = out.size();
  mapper.finish({.cancelled = true}, out);
  mapper.on_line(delta("late"), out);
  EXPECT_EQ(out.size(), n);
  expect_valid_run(out);
  EXPECT_EQ(terminal(out).type, message_type::terminal_completed);
}

TEST(GeminiMapper, AgentFinishedOnlyAfterTheResult) {
  gemini_mapper mapper;
  std::vector<message> out;
  const auto lines = read_lines(gemini_fixture("tool"));
  expect_finished_at_the_last_line(mapper, lines, out);
}

}  // namespace
}  // namespace agenthost::mapper::test
