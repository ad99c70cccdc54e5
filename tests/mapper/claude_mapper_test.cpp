// Behavioural tests of the Claude Code mapper over every recorded transcript (fixtures/claude-code/recorded/) and
// hostile variations of them: exact scripted texts, thinking in both modes, tools, terminals, bad input.
#include "mapper_test_util.hpp"

#include <agenthost/mapper/claude_mapper.hpp>

#include "claude_event.hpp"  // mapper/src: the line parser's two paths

#include <algorithm>
#include <csignal>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace agenthost::mapper::test {
namespace {

const std::string kRecorded = std::string(AGENTHOST_FIXTURES_DIR) + "/claude-code/recorded/";

/// The lines of a recorded transcript; a missing file fails the test instead of mapping an empty run.
std::vector<std::string> recorded_lines(const std::string& name) {
  EXPECT_TRUE(std::ifstream(kRecorded + name, std::ios::binary).good()) << name;
  return read_lines(kRecorded + name);
}

/// claude_mapper over `lines`; every run it emits is checked against the contract.
std::vector<message> run(const std::vector<std::string>& lines, run_end end = exited(0),
                         claude_mapper_options options = {}) {
  auto out = map_lines<claude_mapper>(lines, std::move(options), end);
  EXPECT_EQ(transport::check_run(out), std::vector<std::string>{});
  return out;
}

// A line with one field replaced (parsed and dumped again: key order changes, which the mapper must not mind).
std::string with(const std::string& line, const json::json_pointer& ptr, const json& value) {
  json j = json::parse(line);
  j[ptr] = value;
  return j.dump();
}

bool is_text_delta(const std::string& line) { return line.find("\"text_delta\"") != std::string::npos; }

// ---- every recorded transcript ---------------------------------------------------------------------------------------

TEST(ClaudeMapper, ToolTranscript) {
  const auto s = scripted("tool");
  for (auto mode : {thinking_mode::buffered, thinking_mode::stream}) {
    SCOPED_TRACE(mode == thinking_mode::buffered ? "buffered" : "stream");
    const auto out = run(recorded_lines("tool.jsonl"), exited(0), {.thinking = mode});
    ASSERT_FALSE(out.empty());
    EXPECT_EQ(out.front().type, message_type::session_started);
    EXPECT_EQ(out.front().content.at("session_id"), "17b5f4fc-d8c2-4b5b-8756-ce668d5a2b7f");
    EXPECT_EQ(out.front().content.at("agent"), "claude");
    EXPECT_EQ(out.front().content.at("model"), "tool");
    EXPECT_EQ(out.front().content.at("cwd"), "/home/user/project");
    EXPECT_EQ(assistant_text(out), s.text()) << to_jsonl(out);
    EXPECT_EQ(texts(out, message_type::assistant_thought), s.thoughts);

    const auto calls = of_type(out, message_type::tool_call);
    ASSERT_EQ(calls.size(), 1u) << to_jsonl(out);
    EXPECT_EQ(calls[0].content.at("tool_call_id"), "call_mock_echo_1");
    EXPECT_EQ(calls[0].content.at("name"), "Bash");
    EXPECT_EQ(calls[0].content.at("input"), (json{{"command", "echo agenthost-tool-output"}}));
    const auto done = of_type(out, message_type::tool_completed);
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].content.at("tool_call_id"), "call_mock_echo_1");
    EXPECT_EQ(done[0].content.at("name"), "Bash");
    EXPECT_EQ(done[0].content.at("output"), "agenthost-tool-output");
    EXPECT_EQ(done[0].content.at("raw_output").at("stdout"), "agenthost-tool-output");
    EXPECT_TRUE(of_type(out, message_type::tool_failed).empty());
    EXPECT_TRUE(of_type(out, message_type::status).empty()) << "status/thinking_tokens lines are not mapped";

    ASSERT_EQ(out.back().type, message_type::terminal_completed);
    const json& t = terminal(out).content;
    EXPECT_EQ(t.at("text"), s.last_turn_text);
    EXPECT_EQ(t.at("session_id"), "17b5f4fc-d8c2-4b5b-8756-ce668d5a2b7f");
    EXPECT_EQ(t.at("model"), "tool");
    EXPECT_EQ(t.at("stop_reason"), "end_turn");
    EXPECT_EQ(t.at("num_turns"), 2);
    EXPECT_EQ(t.at("usage").at("input_tokens"), 200);
    EXPECT_EQ(t.at("usage").at("output_tokens"), 28);
    EXPECT_DOUBLE_EQ(t.at("usage").at("cost").at("total").get<double>(), 0.00136);
    EXPECT_FALSE(t.contains("text_diverged"));
    EXPECT_FALSE(t.contains("invalid_output_lines"));

    // Thinking: stream releases each block at its frame (the first before any text); buffered holds both until the
    // final message ends (after all text).
    const std::size_t first_thought = index_of_first(out, message_type::assistant_thought);
    if (mode == thinking_mode::stream) {
      EXPECT_LT(first_thought, index_of_first(out, message_type::assistant));
      EXPECT_LT(index_of_last(out, message_type::assistant_thought), index_of_last(out, message_type::assistant));
    } else {
      EXPECT_GT(first_thought, index_of_last(out, message_type::assistant));
    }
  }
}

TEST(ClaudeMapper, AnswerTranscript) {
  const auto s = scripted("answer");
  for (auto mode : {thinking_mode::buffered, thinking_mode::stream}) {
    const auto out = run(recorded_lines("answer.jsonl"), exited(0), {.thinking = mode});
    EXPECT_EQ(assistant_text(out), s.text());
    EXPECT_EQ(texts(out, message_type::assistant_thought), s.thoughts);
    EXPECT_TRUE(of_type(out, message_type::tool_call).empty());
    ASSERT_EQ(out.back().type, message_type::terminal_completed);
    EXPECT_EQ(terminal(out).content.at("text"), s.last_turn_text);
    EXPECT_EQ(terminal(out).content.at("usage").at("input_tokens"), 100);
    EXPECT_EQ(terminal(out).content.at("usage").at("output_tokens"), 15);
  }
}

TEST(ClaudeMapper, OverloadedThenSuccessIsOneRetryStatusAndTheAnswerOnce) {
  const auto s = scripted("flaky");
  const auto out = run(recorded_lines("flaky.jsonl"));
  const auto statuses = of_type(out, message_type::status);
  ASSERT_EQ(statuses.size(), 1u) << to_jsonl(out);
  const json& st = statuses[0].content;
  EXPECT_EQ(st.at("kind"), "retry");
  EXPECT_EQ(st.at("attempt"), 1);
  EXPECT_EQ(st.at("max_attempts"), 1);
  EXPECT_EQ(st.at("delay_ms"), 606);
  EXPECT_EQ(st.at("error_status"), 503);
  EXPECT_EQ(st.at("error"), "503 overloaded");
  EXPECT_EQ(assistant_text(out), s.text());
  EXPECT_EQ(texts(out, message_type::assistant_thought), s.thoughts);
  ASSERT_EQ(out.back().type, message_type::terminal_completed);
  EXPECT_EQ(terminal(out).content.at("text"), s.last_turn_text);
}

TEST(ClaudeMapper, CutStreamRetriedByClaudeGivesTheTextOnceAndOnlyTheRetrysThinking) {
  const auto s = scripted("cut-retry");
  for (auto mode : {thinking_mode::buffered, thinking_mode::stream}) {
    const auto out = run(recorded_lines("cut-retry.jsonl"), exited(0), {.thinking = mode});
    EXPECT_EQ(assistant_text(out), "Hello world.");
    EXPECT_EQ(assistant_text(out), s.text());
    EXPECT_EQ(texts(out, message_type::assistant_thought), std::vector<std::string>{"Thinking again."});
    ASSERT_EQ(out.back().type, message_type::terminal_completed);
    // Claude's own total counts the cut attempt's message_start too.
    EXPECT_EQ(terminal(out).content.at("usage").at("input_tokens"), 200);
    const auto statuses = of_type(out, message_type::status);
    ASSERT_EQ(statuses.size(), 1u);
    EXPECT_EQ(statuses[0].content.at("error"), "unknown");
    EXPECT_FALSE(statuses[0].content.contains("error_status"));
  }
}

TEST(ClaudeMapper, HttpErrorsAreAgentErrorsWithStatusAndRetryable) {
  struct tc {
    std::string file;
    int status;
    std::string text_prefix;
  };
  for (const auto& c : {tc{"http500.jsonl", 500, "API Error: 500 mock internal server error."},
                        tc{"http429.jsonl", 429, "API Error: Request rejected (429)"}}) {
    SCOPED_TRACE(c.file);
    const auto out = run(recorded_lines(c.file), exited(1));  // Claude exits 1 after an API error
    ASSERT_EQ(out.back().type, message_type::terminal_failed) << to_jsonl(out);
    const json& t = terminal(out).content;
    EXPECT_EQ(t.at("reason"), "agent_error");
    EXPECT_EQ(t.at("http_status"), c.status);
    EXPECT_EQ(t.at("retryable"), true);
    EXPECT_EQ(t.at("text").get<std::string>().rfind(c.text_prefix, 0), 0u) << t.dump();
    EXPECT_EQ(t.at("exit_status"), "exited with code 1");
    EXPECT_EQ(t.at("terminal_reason"), "api_error");
    // The synthetic error message is not the model's answer.
    EXPECT_EQ(assistant_text(out), "");
    EXPECT_EQ(of_type(out, message_type::status).size(), 1u);
  }
}

TEST(ClaudeMapper, BashRefusingSleep30IsAFailedToolCallAndTheRunCompletes) {
  const auto out = run(recorded_lines("long-tool.jsonl"));
  const auto calls = of_type(out, message_type::tool_call);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].content.at("input"), (json{{"command", "sleep 30"}}));
  const auto failed = of_type(out, message_type::tool_failed);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].content.at("error").get<std::string>().rfind("<tool_use_error>Blocked: standalone sleep 30.", 0),
            0u);
  EXPECT_EQ(assistant_text(out), "Sleeping.The sleep finished.");
  ASSERT_EQ(out.back().type, message_type::terminal_completed);
  EXPECT_EQ(terminal(out).content.at("text"), "The sleep finished.");
}

TEST(ClaudeMapper, InterruptedRunsAreCancelledWhenTheCallerCancelled) {
  // Whatever Claude printed after our SIGINT (an error_during_execution result, or nothing) and however it exited.
  for (const std::string file : {"slow.jsonl", "long-tool-echo.jsonl", "long-tool-echo-sigint-cli-only.jsonl",
                                 "long-tool-echo-sigint-before-tool.jsonl", "long-tool-echo-sigterm.jsonl"}) {
    SCOPED_TRACE(file);
    const int code = file == "long-tool-echo-sigterm.jsonl" ? 143 : 0;
    const auto out = run(recorded_lines(file), run_end{.status = process::exited{code}, .cancelled = true});
    ASSERT_EQ(out.back().type, message_type::terminal_cancelled) << to_jsonl(out);
    if (file == "slow.jsonl") {
      EXPECT_EQ(assistant_text(out), "tick ");
      EXPECT_EQ(terminal(out).content.at("session_id"), "ebdde181-456f-4803-9eb3-ff4b88add45a");
    } else {
      EXPECT_EQ(assistant_text(out), "Sleeping.");
      const auto calls = of_type(out, message_type::tool_call);
      ASSERT_EQ(calls.size(), 1u);
      EXPECT_EQ(calls[0].content.at("input"), (json{{"command", "echo sleeping; sleep 30"}}));
      const auto failed = of_type(out, message_type::tool_failed);
      ASSERT_EQ(failed.size(), 1u);
      if (file == "long-tool-echo-sigint-before-tool.jsonl") {
        EXPECT_EQ(failed[0].content.at("closed_by_finish"), true);  // Claude never reported it
      } else if (file == "long-tool-echo-sigterm.jsonl") {
        EXPECT_EQ(failed[0].content.at("error"), "Exit code 137\nsleeping");
      } else {
        EXPECT_EQ(failed[0].content.at("raw_output"), "User rejected tool use");
        EXPECT_EQ(failed[0].content.at("error").get<std::string>().rfind("The user doesn't want to proceed", 0), 0u);
      }
    }
  }
}

TEST(ClaudeMapper, InterruptionsWithoutACallerCancelAreFailures) {
  // An error_during_execution result nobody asked for: the agent aborted.
  auto out = run(recorded_lines("slow.jsonl"));
  ASSERT_EQ(out.back().type, message_type::terminal_failed);
  EXPECT_EQ(terminal(out).content.at("reason"), "agent_error");
  EXPECT_EQ(terminal(out).content.at("retryable"), false);
  EXPECT_EQ(terminal(out).content.at("terminal_reason"), "aborted_streaming");
  EXPECT_NE(terminal(out).content.at("text").get<std::string>().find("error_during_execution"), std::string::npos);
  // Exit 0 without a result: never success.
  out = run(recorded_lines("long-tool-echo-sigint-before-tool.jsonl"));
  ASSERT_EQ(out.back().type, message_type::terminal_failed);
  EXPECT_EQ(terminal(out).content.at("reason"), "no_terminal_event");
  EXPECT_EQ(terminal(out).content.at("retryable"), true);  // Claude had started working
  // Exit 143 without a result.
  out = run(recorded_lines("long-tool-echo-sigterm.jsonl"),
            run_end{.status = process::exited{143}, .stderr_tail = "x\nbye\n"});
  ASSERT_EQ(out.back().type, message_type::terminal_failed);
  EXPECT_EQ(terminal(out).content.at("reason"), "exited");
  EXPECT_EQ(terminal(out).content.at("exit_code"), 143);
  EXPECT_NE(terminal(out).content.at("text").get<std::string>().find("stderr: bye"), std::string::npos);
}

TEST(ClaudeMapper, EveryRecordedTranscriptGivesAValidRunInBothModes) {
  for (const std::string file :
       {"answer.jsonl", "cut-retry.jsonl", "flaky.jsonl", "http429.jsonl", "http500.jsonl",
        "long-tool-echo-sigint-before-tool.jsonl", "long-tool-echo-sigint-cli-only.jsonl",
        "long-tool-echo-sigterm.jsonl", "long-tool-echo.jsonl", "long-tool.jsonl", "slow.jsonl", "tool.jsonl"}) {
    for (auto mode : {thinking_mode::buffered, thinking_mode::stream}) {
      SCOPED_TRACE(file);
      const auto lines = recorded_lines(file);
      claude_mapper m({.thinking = mode});
      std::vector<message> out;
      for (const auto& l : lines) m.on_line(l, out);
      EXPECT_EQ(m.stats().lines, lines.size());
      EXPECT_EQ(m.stats().invalid_lines, 0u);
      EXPECT_EQ(m.agent_finished(), file.find("sigint-before-tool") == std::string::npos &&
                                        file.find("sigterm") == std::string::npos);
      m.finish(exited(0), out);
      EXPECT_EQ(transport::check_run(out), std::vector<std::string>{});
      EXPECT_EQ(out.front().type, message_type::session_started);
    }
  }
}

// ---- hostile input ---------------------------------------------------------------------------------------------------

TEST(ClaudeMapper, GarbageLinesAreCountedKeptAndNeverStopTheStream) {
  const auto s = scripted("answer");
  const std::vector<std::string> garbage = {
      "not json",  "{\"type\":\"stream_event\",\"event\":{",  "[1,2,3]", "{\"no_type\":1}", "{\"type\":5}",
      "{\"type\":\"result\"} trailing", "\"just a string\"", std::string("{\"type\":\"x\",\"s\":\"\xff\"}")};
  std::vector<std::string> lines;
  std::size_t g = 0;
  for (const auto& l : recorded_lines("answer.jsonl")) {
    lines.push_back(l);
    if (g < garbage.size()) lines.push_back(garbage[g++]);
  }
  lines.emplace_back("   ");  // blank: ignored, not invalid
  const auto out = run(lines);
  EXPECT_EQ(assistant_text(out), s.text());
  ASSERT_EQ(out.back().type, message_type::terminal_completed) << "a completed run stays completed";
  EXPECT_EQ(terminal(out).content.at("invalid_output_line_count"), garbage.size());
  EXPECT_EQ(terminal(out).content.at("invalid_output_lines").size(), garbage.size());
  EXPECT_EQ(terminal(out).content.at("invalid_output_lines").at(0), "not json");
}

TEST(ClaudeMapper, AWrongFieldTypeMakesTheLineInvalidAndTheFrameRestoresItsText) {
  const auto s = scripted("answer");
  auto lines = recorded_lines("answer.jsonl");
  // The block's last delta: the frame that follows restores a lost end (a lost middle would be a text_diverged
  // warning, see AFrameThatContradictsTheStreamIsAWarningAndTheStreamStands).
  const auto it = std::find_if(lines.rbegin(), lines.rend(), is_text_delta);
  ASSERT_NE(it, lines.rend());
  *it = with(*it, "/event/delta/text"_json_pointer, 42);
  const auto out = run(lines);
  EXPECT_EQ(assistant_text(out), s.text()) << "the full assistant frame carries what the bad delta lost";
  EXPECT_TRUE(of_type(out, message_type::status).empty());
  EXPECT_EQ(terminal(out).content.at("invalid_output_line_count"), 1);
  // null counts as absent, not invalid.
  auto nulls = recorded_lines("answer.jsonl");
  for (auto& l : nulls)
    if (l.find("\"message_delta\"") != std::string::npos) l = with(l, "/event/delta/stop_reason"_json_pointer, nullptr);
  EXPECT_FALSE(terminal(run(nulls)).content.contains("invalid_output_line_count"));
}

TEST(ClaudeMapper, RepeatedLinesAddNothing) {
  const auto original = run(recorded_lines("tool.jsonl"));
  std::vector<std::string> twice;
  for (const auto& l : recorded_lines("tool.jsonl")) {
    twice.push_back(l);
    twice.push_back(l);
  }
  EXPECT_EQ(to_jsonl(run(twice)), to_jsonl(original));
}

TEST(ClaudeMapper, UnknownEventTypesAreIgnored) {
  const auto original = run(recorded_lines("tool.jsonl"));
  std::vector<std::string> lines;
  for (const auto& l : recorded_lines("tool.jsonl")) {
    lines.push_back(l);
    lines.emplace_back(R"({"type":"future_event","payload":{"x":[1,2,3]}})");
    lines.emplace_back(R"({"type":"stream_event","event":{"type":"ping"},"parent_tool_use_id":null})");
    lines.emplace_back(R"({"type":"system","subtype":"hook_started","hook":{"name":"x"}})");
  }
  const auto out = run(lines);
  EXPECT_EQ(to_jsonl(out), to_jsonl(original));
}

TEST(ClaudeMapper, SubAgentEventsAreNotMixedIntoTheMainText) {
  const auto s = scripted("answer");
  std::vector<std::string> lines;
  for (const auto& l : recorded_lines("answer.jsonl")) {
    lines.push_back(l);
    if (is_text_delta(l)) {
      lines.push_back(with(with(l, "/parent_tool_use_id"_json_pointer, "toolu_parent"), "/uuid"_json_pointer, "sub"));
      lines.back() = with(lines.back(), "/event/delta/text"_json_pointer, "SUBAGENT");
    }
  }
  const auto out = run(lines);
  EXPECT_EQ(assistant_text(out), s.text());
}

TEST(ClaudeMapper, AnOversizeLineIsReportedAsInvalid) {
  claude_mapper m;
  std::vector<message> out;
  const auto lines = recorded_lines("answer.jsonl");
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i == 3) m.on_oversize_line("{\"type\":\"stream_event\"", 99'000'000, out);
    m.on_line(lines[i], out);
  }
  m.finish(exited(0), out);
  EXPECT_EQ(transport::check_run(out), std::vector<std::string>{});
  ASSERT_EQ(out.back().type, message_type::terminal_completed);
  EXPECT_EQ(terminal(out).content.at("invalid_output_line_count"), 1);
  EXPECT_NE(terminal(out).content.at("invalid_output_lines").at(0).get<std::string>().find("99000000 bytes"),
            std::string::npos);
}

TEST(ClaudeMapper, AStreamCutBeforeTheResultIsAFailureThatLosesNothing) {
  auto lines = recorded_lines("tool.jsonl");
  // Cut right after the tool_use frame: the call is open, the first thinking block is held.
  const auto it = std::find_if(lines.begin(), lines.end(), [](const std::string& l) {
    return l.rfind("{\"type\":\"assistant\"", 0) == 0 && l.find("\"tool_use\"") != std::string::npos;
  });
  ASSERT_NE(it, lines.end());
  lines.erase(it + 1, lines.end());
  const auto out = run(lines);
  EXPECT_EQ(assistant_text(out), "Running the command now.");
  EXPECT_EQ(texts(out, message_type::assistant_thought),
            std::vector<std::string>{"The user wants me to run echo. I will call the bash tool."});
  const auto failed = of_type(out, message_type::tool_failed);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].content.at("closed_by_finish"), true);
  ASSERT_EQ(out.back().type, message_type::terminal_failed);
  EXPECT_EQ(terminal(out).content.at("reason"), "no_terminal_event");
}

TEST(ClaudeMapper, CommonEndsComeFirst) {
  const auto lines = recorded_lines("answer.jsonl");
  auto out = run(lines, run_end{.status = process::signaled{SIGKILL}});
  EXPECT_EQ(terminal(out).content.at("reason"), "signaled");
  EXPECT_EQ(terminal(out).content.at("signal"), SIGKILL);
  out = run(lines, run_end{.timeout = "idle"});
  EXPECT_EQ(terminal(out).content.at("reason"), "timeout");
  EXPECT_EQ(terminal(out).content.at("timeout"), "idle");
  out = run(lines, run_end{.status = process::exited{0}, .cancelled = true});
  EXPECT_EQ(out.back().type, message_type::terminal_cancelled);
  // The provider stopped a Claude that lingered after its result: the result decides.
  out = run(lines, run_end{.status = process::signaled{SIGINT}, .stopped_after_finish = true});
  ASSERT_EQ(out.back().type, message_type::terminal_completed);
  EXPECT_EQ(terminal(out).content.at("stopped_after_finish"), true);
  // No JSON at all and exit 1.
  out = run({"Error: unknown option '--bogus'"}, run_end{.status = process::exited{1}, .stderr_tail = "boom\n"});
  EXPECT_EQ(terminal(out).content.at("reason"), "exited");
  EXPECT_EQ(terminal(out).content.at("retryable"), false);
  EXPECT_TRUE(of_type(out, message_type::session_started).empty());
}

TEST(ClaudeMapper, FinishIsIdempotentAndLinesAfterItAreIgnored) {
  claude_mapper m;
  std::vector<message> out;
  for (const auto& l : recorded_lines("answer.jsonl")) m.on_line(l, out);
  EXPECT_TRUE(m.agent_finished());
  m.finish(exited(0), out);
  const std::size_t n = out.size();
  m.finish(exited(1), out);
  for (const auto& l : recorded_lines("tool.jsonl")) m.on_line(l, out);
  EXPECT_EQ(out.size(), n);
  EXPECT_EQ(transport::check_run(out), std::vector<std::string>{});
}

// Delta lines in the exact form Claude prints take a strict byte scan instead of simdjson On-Demand; whatever path a
// line takes, the rules are the same.
TEST(ClaudeMapper, HotLinesInClaudesOwnFormFollowTheSameRules) {
  const std::string init = R"({"type":"system","subtype":"init","cwd":"/","session_id":"s","model":"m"})";
  const std::string start =
      R"({"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}},"session_id":"s","parent_tool_use_id":null,"uuid":"u0"})";
  auto delta = [](const std::string& text_json, const std::string& tail = R"(,"session_id":"s","parent_tool_use_id":null,"uuid":"UUID"})") {
    static int n = 0;
    std::string t = tail;
    if (const auto p = t.find("UUID"); p != std::string::npos) t.replace(p, 4, "d" + std::to_string(++n));
    return R"({"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":)" +
           text_json + "}}" + t;
  };
  struct tc {
    std::string line;
    std::string text;  // emitted
    std::size_t invalid;
  };
  const std::vector<tc> cases = {
      {delta(R"("plain")"), "plain", 0},
      {delta(R"("a\"b\\n\u00e9\n\ud83d!")"), "a\"b\\n\xC3\xA9\n\xEF\xBF\xBD!", 0},  // escapes; a lone surrogate
      {delta(R"("x")") + " trailing", "", 1},
      {delta(R"("x")").substr(0, 60), "", 1},                           // cut
      {delta("\"caf\xC3\"") , "", 1},                                     // invalid UTF-8
      {delta("\"tab\tinside\""), "", 1},                                  // raw control character in the text
      {delta(R"("bad \x escape")"), "", 1},
      {delta(R"(42)"), "", 1},                                            // wrong type
      {delta(R"("sub")", R"(,"parent_tool_use_id":"toolu_1","uuid":"UUID"})"), "", 0},  // a sub-agent's
      {delta(R"("x")", R"(,"uuid":"UUID","type":"something_else"})"), "", 0},          // the last `type` wins
      {delta(R"("x")", R"(,"uuid":"UUID","parent_tool_use_id":5})"), "", 1},
      {delta(R"("ok")", R"(,"uuid":"UUID","extra":{"a":[1,2.5,true,null,"s\n"]}})"), "ok", 0},
      {delta(R"("ok")", R"(,"uuid":"UUID","api_message_id":"m\u0041"})"), "ok", 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.line);
    claude_mapper m;
    std::vector<message> out;
    m.on_line(init, out);
    m.on_line(start, out);
    m.on_line(c.line, out);
    EXPECT_EQ(assistant_text(out), c.text);
    EXPECT_EQ(m.stats().invalid_lines, c.invalid);
    m.finish(exited(0), out);
    EXPECT_EQ(transport::check_run(out), std::vector<std::string>{});
  }
  // The same text in both forms (Claude's key order, and sorted keys for On-Demand) maps to the same messages.
  const std::string fast = delta(R"("a\tb\u00e9")");
  claude_mapper a, b;
  std::vector<message> out_a, out_b;
  for (auto* m : {&a, &b}) {
    auto& out = m == &a ? out_a : out_b;
    m->on_line(init, out);
    m->on_line(start, out);
    m->on_line(m == &a ? fast : json::parse(fast).dump(), out);
  }
  EXPECT_EQ(to_jsonl(out_a), to_jsonl(out_b));
  EXPECT_EQ(assistant_text(out_a), "a\tb\xC3\xA9");
}

// The byte-scan fast path and simdjson On-Demand give the same verdict and the same event for every recorded line and
// for thousands of damaged variants of the hot ones (cut, a byte replaced by a structural or invalid character).
TEST(ClaudeMapper, TheFastPathAndOnDemandAgreeOnEveryLine) {
  using detail::claude::event_parser;
  using detail::claude::x_event;
  event_parser fast(true), slow(false);
  std::size_t compared = 0, accepted = 0, fast_hits = 0;
  auto same = [&](const std::string& line) {
    const auto a = fast.parse(line);
    const auto b = slow.parse(line);
    ++compared;
    ASSERT_EQ(a, b) << line;
    if (a != simdjson::SUCCESS) return;
    ++accepted;
    const x_event& x = fast.event();
    const x_event& y = slow.event();
    EXPECT_EQ(x.kind, y.kind) << line;
    EXPECT_EQ(x.subtype, y.subtype) << line;
    EXPECT_EQ(x.session_id, y.session_id) << line;
    EXPECT_EQ(x.uuid, y.uuid) << line;
    EXPECT_EQ(x.from_subagent, y.from_subagent) << line;
    EXPECT_EQ(x.api, y.api) << line;
    EXPECT_EQ(x.index, y.index) << line;
    EXPECT_EQ(x.delta, y.delta) << line;
    EXPECT_EQ(x.delta_text, y.delta_text) << line;
    EXPECT_EQ(x.abandoned, y.abandoned) << line;
    EXPECT_EQ(x.api_message_id, y.api_message_id) << line;
    EXPECT_EQ(x.api_model, y.api_model) << line;
    EXPECT_EQ(x.stop_reason, y.stop_reason) << line;
    EXPECT_EQ(x.usage.present, y.usage.present) << line;
    EXPECT_EQ(x.usage.input, y.usage.input) << line;
    EXPECT_EQ(x.usage.output, y.usage.output) << line;
    EXPECT_EQ(x.usage.cache_read, y.usage.cache_read) << line;
    EXPECT_EQ(x.usage.cache_write, y.usage.cache_write) << line;
    EXPECT_EQ(x.content_block.kind, y.content_block.kind) << line;
    EXPECT_EQ(x.content_block.text, y.content_block.text) << line;
    EXPECT_EQ(x.content_block.id, y.content_block.id) << line;
    EXPECT_EQ(x.content_block.name, y.content_block.name) << line;
    EXPECT_EQ(x.content_block.has_input, y.content_block.has_input) << line;
    EXPECT_EQ(x.content_block.input, y.content_block.input) << line;
    if (fast.took_fast_path()) ++fast_hits;
  };
  const std::string damage = std::string("\"\\}{],:0 \x01\xff") + '\0';
  for (const std::string file :
       {"answer.jsonl", "cut-retry.jsonl", "flaky.jsonl", "http429.jsonl", "http500.jsonl",
        "long-tool-echo-sigint-before-tool.jsonl", "long-tool-echo-sigint-cli-only.jsonl",
        "long-tool-echo-sigterm.jsonl", "long-tool-echo.jsonl", "long-tool.jsonl", "slow.jsonl", "tool.jsonl"}) {
    for (const auto& line : recorded_lines(file)) {
      same(line);
      if (line.size() > 600) continue;  // the hot lines are short; frames and results take On-Demand anyway
      for (std::size_t i = 0; i < line.size(); i += 3) {
        same(line.substr(0, i));
        for (char c : damage) {
          std::string v = line;
          v[i] = c;
          same(v);
        }
      }
    }
  }
  EXPECT_GT(fast_hits, 200u) << "the fast path took too few lines to mean anything";
  std::cout << "[ claude parser ] " << compared << " lines compared, " << accepted << " accepted, " << fast_hits
            << " by the fast path\n";
}

// ---- text: the double delivery ---------------------------------------------------------------------------------------

TEST(ClaudeMapper, TextThatWasNeverStreamedComesFromTheFrame) {
  const auto s = scripted("tool");
  std::vector<std::string> lines;
  for (const auto& l : recorded_lines("tool.jsonl"))
    if (!is_text_delta(l)) lines.push_back(l);
  const auto out = run(lines);
  EXPECT_EQ(assistant_text(out), s.text());
  EXPECT_FALSE(terminal(out).content.contains("text_diverged"));
  // Some deltas lost (a delta line dropped): only the missing end is added.
  std::vector<std::string> some;
  for (const auto& l : recorded_lines("answer.jsonl"))
    if (!(is_text_delta(l) && l.find("\"end.\"") != std::string::npos)) some.push_back(l);
  EXPECT_EQ(assistant_text(run(some)), scripted("answer").text());
}

TEST(ClaudeMapper, AFrameThatContradictsTheStreamIsAWarningAndTheStreamStands) {
  const auto s = scripted("answer");
  auto lines = recorded_lines("answer.jsonl");
  for (auto& l : lines)
    if (l.rfind("{\"type\":\"assistant\"", 0) == 0 && l.find("\"type\":\"text\"") != std::string::npos)
      l = with(l, "/message/content/0/text"_json_pointer, "Something else entirely.");
  const auto out = run(lines);
  EXPECT_EQ(assistant_text(out), s.text());
  const auto statuses = of_type(out, message_type::status);
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_EQ(statuses[0].content.at("code"), "text_diverged");
  EXPECT_EQ(statuses[0].content.at("final_text"), "Something else entirely.");
  EXPECT_EQ(terminal(out).content.at("text_diverged"), true);
}

// A stream cut mid-text that Claude retries: the retry's repetition of the abandoned text is not emitted again.
std::vector<std::string> cut_mid_text(const std::vector<std::string>& retry_chunks) {
  auto ev = [](const json& event) {
    static int n = 0;
    return json{{"type", "stream_event"}, {"event", event}, {"parent_tool_use_id", nullptr},
                {"uuid", "u" + std::to_string(++n)}, {"session_id", "s"}}
        .dump();
  };
  auto delta = [&](const std::string& t) {
    return ev({{"type", "content_block_delta"}, {"index", 0}, {"delta", {{"type", "text_delta"}, {"text", t}}}});
  };
  std::vector<std::string> l = {
      R"({"type":"system","subtype":"init","session_id":"s","model":"m","cwd":"/"})",
      ev({{"type", "message_start"}, {"message", {{"id", "msg_1"}, {"model", "m"}}}}),
      ev({{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}}),
      delta("Hello "),
      delta("wor"),
      json{{"type", "stream_event"}, {"event", {{"type", "message_stop"}}}, {"parent_tool_use_id", nullptr},
           {"uuid", "cut"}, {"abandoned_blocks", {{"api_message_id", "msg_1"}, {"from_block_index", 0}}}}
          .dump(),
      R"({"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":500,"error_status":null,"error":"unknown"})",
      ev({{"type", "message_start"}, {"message", {{"id", "msg_2"}, {"model", "m"}}}}),
      ev({{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}})};
  std::string whole;
  for (const auto& c : retry_chunks) {
    l.push_back(delta(c));
    whole += c;
  }
  l.push_back(json{{"type", "assistant"},
                   {"message", {{"id", "msg_2"}, {"model", "m"}, {"content", {{{"type", "text"}, {"text", whole}}}}}},
                   {"parent_tool_use_id", nullptr}}
                  .dump());
  l.push_back(ev({{"type", "content_block_stop"}, {"index", 0}}));
  l.push_back(ev({{"type", "message_delta"}, {"delta", {{"stop_reason", "end_turn"}}}}));
  l.push_back(ev({{"type", "message_stop"}}));
  l.push_back(json{{"type", "result"}, {"subtype", "success"}, {"is_error", false}, {"result", whole}}.dump());
  return l;
}

TEST(ClaudeMapper, ARetryRepeatingAnAbandonedAttemptsTextEmitsItOnce) {
  auto out = run(cut_mid_text({"Hello ", "wor", "ld."}));
  EXPECT_EQ(assistant_text(out), "Hello world.");
  EXPECT_FALSE(terminal(out).content.contains("text_diverged"));
  out = run(cut_mid_text({"Hello world", "."}));  // chunked differently
  EXPECT_EQ(assistant_text(out), "Hello world.");
}

TEST(ClaudeMapper, ARetryThatDivergesRetractsTheAbandonedText) {
  for (const auto& chunks : {std::vector<std::string>{"Hello ", "there."}, std::vector<std::string>{"Hel"}}) {
    const auto out = run(cut_mid_text(chunks));
    std::string retry;
    for (const auto& c : chunks) retry += c;
    const auto statuses = of_type(out, message_type::status);
    ASSERT_EQ(statuses.size(), 2u) << to_jsonl(out);  // the retry, then the retraction
    EXPECT_EQ(statuses[1].content.at("code"), "retry_diverged");
    EXPECT_EQ(statuses[1].content.at("retracted_text"), "Hello wor");
    EXPECT_EQ(assistant_text(out), "Hello wor" + retry) << "the void text, then the retry's text from its start";
    EXPECT_EQ(terminal(out).content.at("text_diverged"), true);
    EXPECT_EQ(terminal(out).content.at("text"), retry);
  }
}

TEST(ClaudeMapper, ResumedSessions) {
  auto out = run(recorded_lines("answer.jsonl"), exited(0),
                 {.requested_session_id = std::string("f0000000-0000-0000-0000-000000000000")});
  ASSERT_EQ(out.front().type, message_type::session_resumed);
  EXPECT_EQ(out.front().content.at("resume"), "restarted");
  const std::string id = out.front().content.at("session_id");
  out = run(recorded_lines("answer.jsonl"), exited(0), {.requested_session_id = id});
  EXPECT_EQ(out.front().content.at("resume"), "resumed");
}

TEST(ClaudeMapper, RetryableRule) {
  EXPECT_TRUE(claude_error_is_retryable(429, ""));
  EXPECT_TRUE(claude_error_is_retryable(529, ""));
  EXPECT_TRUE(claude_error_is_retryable(500, ""));
  EXPECT_FALSE(claude_error_is_retryable(400, "API Error: 400 bad request"));
  EXPECT_FALSE(claude_error_is_retryable(401, "invalid x-api-key"));
  EXPECT_TRUE(claude_error_is_retryable(std::nullopt, "API Error: Connection refused (ECONNREFUSED)"));
  EXPECT_TRUE(claude_error_is_retryable(std::nullopt, "Overloaded"));
  EXPECT_FALSE(claude_error_is_retryable(std::nullopt, "prompt is too long"));
}

}  // namespace
}  // namespace agenthost::mapper::test
