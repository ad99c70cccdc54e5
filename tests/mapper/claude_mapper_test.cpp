// Behavioural tests of the Claude Code mapper over every recorded transcript (fixtures/claude-code/recorded/) and
// variations of them: exact scripted texts, thinking in both modes, tools, terminals, the double delivery of text
// (stream and frame). Hostile input and the line parser's two paths: claude_mapper_input_test.cpp.
#include "claude_mapper_test_util.hpp"

#include "claude_event.hpp"  // mapper/src: the line parser's two paths

#include <algorithm>
#include <csignal>
#include <iostream>
#include <string>
#include <vector>

namespace agenthost::mapper::test {
namespace {

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

// One stream_event line of the main agent around a raw API event.
std::string stream_line(const json& event) {
  return json{{"type", "stream_event"}, {"event", event}, {"parent_tool_use_id", nullptr}, {"session_id", "s"}}.dump();
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

// The first retry is cut too, while it still repeated the abandoned text: the consumer has seen "Hello wor" once,
// and the second retry's repetition of it is not emitted again either.
TEST(ClaudeMapper, ARetryCutAgainWhileRepeatingStillEmitsTheTextOnce) {
  auto lines = cut_mid_text({"Hello world."});
  const auto stream = [](const json& event, const json& extra = json::object()) {
    json l{{"type", "stream_event"}, {"event", event}, {"parent_tool_use_id", nullptr}, {"session_id", "s"}};
    l.update(extra);
    return l.dump();
  };
  const std::vector<std::string> cut_again = {
      stream({{"type", "message_start"}, {"message", {{"id", "msg_1b"}, {"model", "m"}}}}),
      stream({{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}}),
      stream({{"type", "content_block_delta"}, {"index", 0}, {"delta", {{"type", "text_delta"}, {"text", "Hello"}}}}),
      stream({{"type", "message_stop"}},
             {{"abandoned_blocks", {{"api_message_id", "msg_1b"}, {"from_block_index", 0}}}})};
  lines.insert(lines.begin() + 7, cut_again.begin(), cut_again.end());  // after the first cut's api_retry
  const auto out = run(lines);
  EXPECT_EQ(assistant_text(out), "Hello world.") << to_jsonl(out);
  EXPECT_FALSE(terminal(out).content.contains("text_diverged")) << to_jsonl(out);
}

// A tool input assembled from input_json_delta lines is nested as deep as the agent likes; beyond the mappers' depth
// limit it is kept as text (writing a 100,000-level value out would recurse that deep).
TEST(ClaudeMapper, AToolInputNestedTooDeepIsKeptAsText) {
  const auto delta = [&](const std::string& part) {
    return stream_line({{"type", "content_block_delta"},
                        {"index", 0},
                        {"delta", {{"type", "input_json_delta"}, {"partial_json", part}}}});
  };
  for (const std::size_t levels : {std::size_t{100}, std::size_t{100000}}) {
    const std::vector<std::string> lines = {
        R"({"type":"system","subtype":"init","session_id":"s","model":"m","cwd":"/"})",
        stream_line({{"type", "message_start"}, {"message", {{"id", "msg_1"}, {"model", "m"}}}}),
        stream_line({{"type", "content_block_start"},
                     {"index", 0},
                     {"content_block",
                      {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "Bash"}, {"input", json::object()}}}}),
        delta(R"({"a":)" + std::string(levels, '[')),
        delta(std::string(levels, ']') + "}"),
        stream_line({{"type", "content_block_stop"}, {"index", 0}})};
    const auto out = run(lines);
    const auto calls = of_type(out, message_type::tool_call);
    ASSERT_EQ(calls.size(), 1u) << levels;
    const auto& input = calls[0].content.at("input");
    if (levels == 100) {
      EXPECT_TRUE(input.at("a").is_array());
    } else {
      ASSERT_TRUE(input.contains("partial_json"));
      EXPECT_EQ(input.at("partial_json").get<std::string>().size(), 2 * levels + 6);
      EXPECT_NO_THROW((void)calls[0].to_json_line());
    }
  }
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

// The retry runs a tool instead of repeating the abandoned text: that text is void once the retry's message ends, and
// the next message's text is its own even when it begins the same way (it used to be taken for the replay).
TEST(ClaudeMapper, ARetryThatRunsAToolInsteadRetractsTheAbandonedText) {
  auto lines = cut_mid_text({"x"});
  lines.resize(8);  // up to the retry's message_start (msg_2)
  const auto text = [&](const std::string& id, const std::vector<std::string>& deltas) {
    std::vector<std::string> l = {
        stream_line({{"type", "message_start"}, {"message", {{"id", id}, {"model", "m"}}}}),
        stream_line(
            {{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}})};
    for (const auto& d : deltas)
      l.push_back(stream_line(
          {{"type", "content_block_delta"}, {"index", 0}, {"delta", {{"type", "text_delta"}, {"text", d}}}}));
    return l;
  };
  const std::vector<std::string> tool = {
      stream_line(
          {{"type", "content_block_start"},
           {"index", 0},
           {"content_block", {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "Bash"}, {"input", json::object()}}}}),
      stream_line({{"type", "content_block_delta"},
                   {"index", 0},
                   {"delta", {{"type", "input_json_delta"}, {"partial_json", R"({"command":"ls"})"}}}}),
      stream_line({{"type", "content_block_stop"}, {"index", 0}}),
      stream_line({{"type", "message_delta"}, {"delta", {{"stop_reason", "tool_use"}}}}),
      stream_line({{"type", "message_stop"}}),
      json{{"type", "user"},
           {"message", {{"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "a b"}}}}}},
           {"session_id", "s"}}
          .dump()};
  lines.insert(lines.end(), tool.begin(), tool.end());
  for (auto& l : text("msg_3", {"Hello wor", "ld."})) lines.push_back(std::move(l));
  lines.push_back(stream_line({{"type", "content_block_stop"}, {"index", 0}}));
  lines.push_back(stream_line({{"type", "message_delta"}, {"delta", {{"stop_reason", "end_turn"}}}}));
  lines.push_back(stream_line({{"type", "message_stop"}}));
  lines.push_back(
      json{{"type", "result"}, {"subtype", "success"}, {"is_error", false}, {"result", "Hello world."}}.dump());
  const auto out = run(lines);
  std::size_t retracted_at = out.size();
  std::string after;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i].type == message_type::status && out[i].content.value("code", "") == "retry_diverged") {
      EXPECT_EQ(out[i].content.at("retracted_text"), "Hello wor");
      retracted_at = i;
    }
    if (i > retracted_at && out[i].type == message_type::assistant)
      after += out[i].content.at("text").get<std::string>();
  }
  ASSERT_LT(retracted_at, out.size()) << to_jsonl(out);
  EXPECT_EQ(of_type(out, message_type::tool_completed).size(), 1u);
  EXPECT_EQ(after, "Hello world.") << "the next message's text, whole";
  EXPECT_EQ(terminal(out).content.at("text_diverged"), true);
}

// Claude's other way to retry a cut stream: the same request without streaming (assistant frames under another id, no
// message_start). Its frame is the retry: what repeats the abandoned text is not emitted twice, anything else voids it.
TEST(ClaudeMapper, AnUnstreamedRetryIsTheRetryToo) {
  for (const std::string retry : {"Hello world.", "Goodbye."}) {
    auto lines = cut_mid_text({"x"});
    lines.resize(7);  // up to the cut's api_retry
    const json content = {{{"type", "text"}, {"text", retry}}};
    lines.push_back(json{{"type", "assistant"},
                         {"message", {{"id", "msg_fb"}, {"model", "m"}, {"content", content}}},
                         {"parent_tool_use_id", nullptr},
                         {"session_id", "s"}}
                        .dump());
    lines.push_back(json{{"type", "result"}, {"subtype", "success"}, {"is_error", false}, {"result", retry}}.dump());
    const auto out = run(lines);
    const bool same = retry == "Hello world.";
    EXPECT_EQ(assistant_text(out), same ? retry : "Hello wor" + retry) << to_jsonl(out);
    EXPECT_EQ(terminal(out).content.contains("text_diverged"), !same) << to_jsonl(out);
  }
}

// A retry's text block that ends (no frame first) having repeated only part of the abandoned text: the retraction and
// that text come before the tool call the retry makes next, as they were said.
TEST(ClaudeMapper, ARetrysShortTextIsSettledWhenItsBlockEnds) {
  auto lines = cut_mid_text({"x"});
  lines.resize(8);  // up to the retry's message_start (msg_2)
  for (const json& event : std::vector<json>{
           {{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}},
           {{"type", "content_block_delta"}, {"index", 0}, {"delta", {{"type", "text_delta"}, {"text", "Hello"}}}},
           {{"type", "content_block_stop"}, {"index", 0}},
           {{"type", "content_block_start"},
            {"index", 1},
            {"content_block", {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "Bash"}, {"input", json::object()}}}},
           {{"type", "content_block_stop"}, {"index", 1}},
           {{"type", "message_delta"}, {"delta", {{"stop_reason", "tool_use"}}}},
           {{"type", "message_stop"}}})
    lines.push_back(stream_line(event));
  const auto out = run(lines);
  std::size_t retracted = out.size(), text = out.size(), call = out.size();
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i].type == message_type::status && out[i].content.value("code", "") == "retry_diverged") retracted = i;
    if (out[i].type == message_type::assistant && out[i].content.at("text") == "Hello") text = i;
    if (out[i].type == message_type::tool_call) call = i;
  }
  ASSERT_LT(call, out.size()) << to_jsonl(out);
  EXPECT_LT(retracted, text) << to_jsonl(out);
  EXPECT_LT(text, call) << to_jsonl(out);
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