// Behavioural tests of the pi mapper, how a run ends and what it reports: terminals (exit codes, signals, HTTP
// errors, auto-retries, truncation), the session, usage and stats, and bad input. Texts, thinking and tools are in
// pi_mapper_test.cpp.
#include "pi_mapper_test_util.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace agenthost::mapper::test {
namespace {

// ---- terminal -----------------------------------------------------------------------------------------------------------

TEST(PiMapper, Http400WithExitZeroIsAFailure) {
  const auto out = run_mapper(read_lines(fixture_path(kHttp400)));
  expect_valid_run(out);
  const auto& t = terminal(out);
  ASSERT_EQ(t.type, message_type::terminal_failed);
  EXPECT_EQ(t.content.at("reason"), "agent_error");
  EXPECT_EQ(t.content.at("text"), "400 fake bad request");
  EXPECT_EQ(t.content.at("http_status"), 400);
  EXPECT_EQ(t.content.at("retryable"), false);
  EXPECT_EQ(t.content.at("stop_reason"), "error");
}

// An error message can carry a whole response body: the terminal keeps its first 2,000 bytes (as every mapper), its
// HTTP status still read from the start.
TEST(PiMapper, AHugeErrorMessageIsBounded) {
  std::vector<std::string> lines;
  for (auto l : read_lines(fixture_path(kHttp400))) {
    const std::string from = R"("errorMessage":"400 fake bad request")";
    if (const auto at = l.find(from); at != std::string::npos)
      l.replace(at, from.size(), R"("errorMessage":"400 )" + std::string(100000, 'b') + "\"");
    lines.push_back(l);
  }
  const auto out = run_mapper(lines);
  expect_valid_run(out);
  const auto& t = terminal(out);
  ASSERT_EQ(t.type, message_type::terminal_failed) << to_jsonl(out).substr(0, 2000);
  EXPECT_EQ(t.content.at("http_status"), 400);
  EXPECT_LE(t.content.at("error_message").get<std::string>().size(), 2003u);
  EXPECT_LE(t.content.at("text").get<std::string>().size(), 2003u);
  EXPECT_EQ(t.content.at("text").get<std::string>().substr(0, 8), "400 bbbb");
}

TEST(PiMapper, AutoRetryCyclesAreStatusAndTheFinalFailureIsRetryable) {
  pi_mapper mapper;
  std::vector<message> out;
  std::vector<bool> finished_after_agent_end, finished_after_retry_start;
  for (const auto& l : read_lines(fixture_path(kRetry503))) {
    mapper.on_line(l, out);
    if (l.find(R"("type":"agent_end")") != std::string::npos) finished_after_agent_end.push_back(mapper.agent_finished());
    if (l.find(R"("type":"auto_retry_start")") != std::string::npos) {
      finished_after_retry_start.push_back(mapper.agent_finished());
    }
  }
  EXPECT_EQ(finished_after_agent_end, (std::vector<bool>{true, true, true, true}));
  EXPECT_EQ(finished_after_retry_start, (std::vector<bool>{false, false, false}));
  EXPECT_TRUE(mapper.agent_finished());
  mapper.finish({.status = process::exited{0}}, out);
  expect_valid_run(out);
  const auto statuses = of_type(out, message_type::status);
  ASSERT_EQ(statuses.size(), 4u);
  for (const auto& s : statuses) EXPECT_EQ(s.content.at("kind"), "retry");
  EXPECT_EQ(statuses[0].content.at("attempt"), 1);
  EXPECT_EQ(statuses[0].content.at("delay_ms"), 2000);
  EXPECT_EQ(statuses[3].content.at("success"), false);
  const auto& t = terminal(out);
  ASSERT_EQ(t.type, message_type::terminal_failed);
  EXPECT_EQ(t.content.at("reason"), "agent_error");
  EXPECT_EQ(t.content.at("http_status"), 503);
  EXPECT_EQ(t.content.at("retryable"), true);
}

TEST(PiMapper, AgentEndIsNotTerminalWhenARetryOrCompactionFollows) {
  pi_mapper mapper;
  std::vector<message> out;
  mapper.on_line(R"({"type":"agent_end","messages":[],"willRetry":true})", out);
  EXPECT_FALSE(mapper.agent_finished());
  mapper.on_line(R"({"type":"agent_settled","aborted":false})", out);
  EXPECT_TRUE(mapper.agent_finished());
  mapper.on_line(R"({"type":"agent_start"})", out);
  EXPECT_FALSE(mapper.agent_finished());
  mapper.on_line(R"({"type":"agent_end","messages":[]})", out);
  EXPECT_TRUE(mapper.agent_finished());
  mapper.on_line(R"({"type":"auto_compaction_start","reason":"threshold"})", out);
  EXPECT_FALSE(mapper.agent_finished());
  mapper.on_line(R"({"type":"auto_compaction_end","aborted":false,"willRetry":true})", out);
  EXPECT_FALSE(mapper.agent_finished());
  mapper.on_line(R"({"type":"agent_start"})", out);
  mapper.on_line(R"({"type":"agent_end","messages":[],"willRetry":false})", out);
  EXPECT_TRUE(mapper.agent_finished());
  mapper.on_line(R"({"type":"compaction_start","reason":"threshold"})", out);
  mapper.on_line(R"({"type":"compaction_end","reason":"threshold","aborted":false,"willRetry":false})", out);
  EXPECT_TRUE(mapper.agent_finished());

  const auto compaction = run_mapper(read_lines(fixture_path("synthetic/compaction.jsonl")));
  expect_valid_run(compaction);
  EXPECT_EQ(terminal(compaction).type, message_type::terminal_completed);
  EXPECT_EQ(of_type(compaction, message_type::status).size(), 4u);
}

TEST(PiMapper, LengthStopIsCompletedAndTruncated) {
  const auto out = run_mapper(read_lines(fixture_path("synthetic/length-cjk.jsonl")));
  const auto& t = terminal(out);
  ASSERT_EQ(t.type, message_type::terminal_completed);
  EXPECT_EQ(t.content.at("truncated"), true);
  EXPECT_EQ(t.content.at("text"), "你好，世界! 😀 and more");
  EXPECT_EQ(texts(out, message_type::assistant_thought), (std::vector<std::string>{"想一想。"}));
}

TEST(PiMapper, EveryTruncationOfAStreamIsAWellFormedRun) {
  for (const auto& input : {kToolTurn, kDerivedToolTurn, kRetry503}) {
    const auto lines = read_lines(fixture_path(input));
    for (std::size_t n = 0; n <= lines.size(); ++n) {
      SCOPED_TRACE(input + " cut after " + std::to_string(n) + " lines");
      const std::vector<std::string> prefix(lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(n));
      pi_mapper mapper;
      std::vector<message> out;
      for (const auto& l : prefix) mapper.on_line(l, out);
      const bool finished = mapper.agent_finished();
      mapper.finish({.status = process::exited{0}}, out);
      expect_valid_run(out);
      const auto& t = terminal(out);
      if (!finished) {
        ASSERT_EQ(t.type, message_type::terminal_failed);
        EXPECT_EQ(t.content.at("reason"), "no_terminal_event");
      }
    }
  }
}

TEST(PiMapper, NonZeroExitAndSignalsAreAlwaysFailures) {
  const auto lines = read_lines(fixture_path(kToolTurn));  // a run that completed
  auto out = run_mapper(lines, {}, {.status = process::exited{2}, .stderr_tail = "line 1\nfatal: boom\n"});
  EXPECT_EQ(terminal(out).type, message_type::terminal_failed);
  EXPECT_EQ(terminal(out).content.at("reason"), "exited");
  EXPECT_EQ(terminal(out).content.at("exit_code"), 2);
  EXPECT_EQ(terminal(out).content.at("stderr"), "line 1\nfatal: boom\n");
  EXPECT_NE(terminal(out).content.at("text").get<std::string>().find("fatal: boom"), std::string::npos);
  out = run_mapper(lines, {}, {.status = process::signaled{2}});
  EXPECT_EQ(terminal(out).content.at("reason"), "signaled");
  EXPECT_EQ(terminal(out).content.at("signal"), 2);
  EXPECT_FALSE(terminal(out).content.contains("exit_code"));
  // The provider stopped pi itself after it finished (pi can hang after its last event): decided from the events.
  out = run_mapper(lines, {}, {.status = process::signaled{15}, .stopped_after_finish = true});
  EXPECT_EQ(terminal(out).type, message_type::terminal_completed);
  EXPECT_EQ(terminal(out).content.at("stopped_after_finish"), true);
  // …but only when pi had finished.
  auto cut = lines;
  cut.resize(20);
  out = run_mapper(cut, {}, {.status = process::signaled{15}, .stopped_after_finish = true});
  EXPECT_EQ(terminal(out).content.at("reason"), "signaled");
}

TEST(PiMapper, ExitZeroAloneIsNeverSuccess) {
  // No event at all.
  auto out = run_mapper({});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(terminal(out).content.at("reason"), "no_terminal_event");
  // agent_end without any assistant message.
  out = run_mapper({R"({"type":"session","id":"s"})", R"({"type":"agent_end","messages":[]})"});
  EXPECT_EQ(terminal(out).content.at("reason"), "protocol");
  // A final message whose stopReason is still "pending" / unknown.
  out = run_mapper({R"({"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"deferred"}})",
                    R"({"type":"agent_end","messages":[]})"});
  EXPECT_EQ(terminal(out).content.at("reason"), "protocol");
}

TEST(PiMapper, InvalidJsonOnlyOutputIsATerminalFailure) {
  const auto out = run_mapper({"plain text preamble", "this is not json"});
  ASSERT_EQ(out.size(), 1u);
  const auto& t = terminal(out);
  EXPECT_EQ(t.type, message_type::terminal_failed);
  EXPECT_NE(t.content.at("text").get<std::string>().find("non-JSON"), std::string::npos);
  EXPECT_EQ(t.content.at("invalid_output_lines"), (json{"plain text preamble", "this is not json"}));
}

TEST(PiMapper, DuplicateTerminalEventsAndRepeatedFinishGiveOneTerminal) {
  pi_mapper mapper;
  std::vector<message> out;
  for (const auto& l : read_lines(fixture_path("synthetic/duplicate-terminal.jsonl"))) mapper.on_line(l, out);
  mapper.finish({.status = process::exited{0}}, out);
  const auto size = out.size();
  mapper.finish({.status = process::exited{1}}, out);
  mapper.on_line(R"({"type":"agent_start"})", out);
  EXPECT_EQ(out.size(), size);
  expect_valid_run(out);
  EXPECT_EQ(texts(out, message_type::assistant), (std::vector<std::string>{"Once."}));
}

TEST(PiMapper, TimeoutAndCancellation) {
  const auto lines = read_lines(fixture_path(kToolTurn));
  auto out = run_mapper(lines, {}, {.timeout = "first_event"});
  EXPECT_EQ(terminal(out).content.at("reason"), "timeout");
  EXPECT_EQ(terminal(out).content.at("timeout"), "first_event");
  out = run_mapper(lines, {}, {.cancelled = true});
  EXPECT_EQ(terminal(out).type, message_type::terminal_cancelled);
  expect_valid_run(out);
}

// ---- session, usage, stats --------------------------------------------------------------------------------------------

TEST(PiMapper, SessionStartedResumedRestarted) {
  const auto lines = read_lines(fixture_path(kToolTurn));
  auto out = run_mapper(lines);
  EXPECT_EQ(out[0].type, message_type::session_started);
  EXPECT_EQ(out[0].content.at("session_id"), "01a228a3-d083-76d7-a9f9-b93789e48028");
  EXPECT_EQ(out[0].content.at("cwd"), "/home/user/project");
  EXPECT_EQ(out[0].content.at("agent"), "pi");
  out = run_mapper(lines, {.requested_session_id = "01a228a3-d083-76d7-a9f9-b93789e48028"});
  EXPECT_EQ(out[0].type, message_type::session_resumed);
  EXPECT_EQ(out[0].content.at("resume"), "resumed");
  out = run_mapper(lines, {.requested_session_id = "01a228a3"});  // pi accepts a partial id
  EXPECT_EQ(out[0].content.at("resume"), "resumed");
  out = run_mapper(lines, {.requested_session_id = "ffff"});
  EXPECT_EQ(out[0].type, message_type::session_resumed);
  EXPECT_EQ(out[0].content.at("resume"), "restarted");
  EXPECT_EQ(out[0].content.at("requested_session_id"), "ffff");
  out = run_mapper(lines, {.agent = "omp"});
  EXPECT_EQ(out[0].content.at("agent"), "omp");
}

TEST(PiMapper, UsageIsSummedOverAssistantMessages) {
  const auto out = run_mapper(read_lines(fixture_path(kToolTurn)));
  const auto& usage = terminal(out).content.at("usage");
  EXPECT_EQ(usage.at("input_tokens"), 280);
  EXPECT_EQ(usage.at("output_tokens"), 28);
  EXPECT_EQ(usage.at("total_tokens"), 308);
  EXPECT_EQ(usage.at("cost").at("total"), 0.0);
}

TEST(PiMapper, StatsCountLinesBytesAndInvalidLines) {
  pi_mapper mapper;
  std::vector<message> out;
  mapper.on_line(R"({"type":"agent_start"})", out);
  mapper.on_line("nope", out);
  mapper.on_line("", out);
  mapper.on_oversize_line(R"({"type":"message_update")", 10'000'000, out);
  EXPECT_EQ(mapper.stats().lines, 4u);
  EXPECT_EQ(mapper.stats().bytes, 22u + 4u + 10'000'000u);
  EXPECT_EQ(mapper.stats().invalid_lines, 2u);
}

// ---- bad input ----------------------------------------------------------------------------------------------------------

TEST(PiMapper, BadLinesNeverStopTheStreamAndAreReportedBounded) {
  const auto out = run_mapper(read_lines(fixture_path("synthetic/invalid-lines.jsonl")),
                              {.max_invalid_lines = 5, .max_invalid_line_bytes = 16});
  expect_valid_run(out);
  const auto& t = terminal(out);
  ASSERT_EQ(t.type, message_type::terminal_completed);  // a completed run stays completed
  EXPECT_EQ(assistant_text(out), "Hello, world");
  EXPECT_EQ(t.content.at("invalid_output_line_count"), 13);
  const auto& kept = t.content.at("invalid_output_lines");
  ASSERT_EQ(kept.size(), 5u);
  EXPECT_EQ(kept[0].get<std::string>(), "plain text pream\xE2\x80\xA6");  // 16 bytes kept, then an ellipsis
  for (const auto& l : kept) EXPECT_LE(l.get<std::string>().size(), 16u + 3u);
}

TEST(PiMapper, NonObjectsMissingTypesAndTrailingContentAreInvalid) {
  for (const std::string& bad : std::vector<std::string>{"[1]", "\"s\"", "1", "null", "{}", R"({"type":null})", R"({"type":{"a":1}})",
                                R"({"type":"agent_end"}{"type":"agent_end"})", R"({"type":"agent_end"} x)",
                                R"({"type":"agent_end")", std::string("{\"type\":\"agent_end\"}\0", 21),
                                std::string("\0", 1), "{\"type\":\"agent_end\",\"x\":\"\xC3\x28\"}"}) {
    SCOPED_TRACE(bad);
    pi_mapper mapper;
    std::vector<message> out;
    mapper.on_line(bad, out);
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(mapper.stats().invalid_lines, 1u);
    EXPECT_FALSE(mapper.agent_finished());
  }
  // Unknown but valid event types are ignored, not errors.
  pi_mapper mapper;
  std::vector<message> out;
  mapper.on_line(R"({"type":"queue_update","steering":[],"followUp":[]})", out);
  mapper.on_line(R"(  {"type":"thinking_level_changed","level":"high"}  )", out);
  EXPECT_EQ(mapper.stats().invalid_lines, 0u);
  EXPECT_TRUE(out.empty());
  // Broken lines of such a type are still invalid lines (they are checked, only not parsed).
  mapper.on_line(R"({"type":"queue_update","steering":[],"followUp":})", out);
  mapper.on_line(R"({"type":"queue_update","steering":[]}})", out);
  EXPECT_EQ(mapper.stats().invalid_lines, 2u);
  EXPECT_TRUE(out.empty());
}

TEST(PiMapper, DeeplyNestedJsonDoesNotOverflowTheStack) {
  const std::string depth(1'000'000, '[');
  const std::string close(1'000'000, ']');
  pi_mapper mapper;
  std::vector<message> out;
  // In a field the mapper skips: valid, cheap.
  mapper.on_line(R"({"type":"agent_start","junk":)" + depth + close + "}", out);
  EXPECT_EQ(mapper.stats().invalid_lines, 0u);
  // In a field the mapper converts (tool arguments): rejected as invalid, no recursion beyond a fixed depth.
  mapper.on_line(R"({"type":"tool_execution_start","toolCallId":"x","toolName":"y","args":)" + depth + close + "}",
                 out);
  EXPECT_EQ(mapper.stats().invalid_lines, 1u);
  // Unbalanced.
  mapper.on_line(R"({"type":"agent_start","junk":)" + depth + "}", out);
  EXPECT_EQ(mapper.stats().invalid_lines, 2u);
  mapper.finish({.status = process::exited{0}}, out);
  expect_valid_run(out);
}

TEST(PiMapper, AnOversizeLineIsReportedAndMessageEndFillsTheGap) {
  auto lines = read_lines(fixture_path(kThinking));
  pi_mapper mapper;
  std::vector<message> out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find(R"("delta":"42")") != std::string::npos) {  // the process layer dropped this line
      mapper.on_oversize_line(std::string_view(lines[i]).substr(0, 64), lines[i].size(), out);
      continue;
    }
    mapper.on_line(lines[i], out);
  }
  mapper.finish({.status = process::exited{0}}, out);
  expect_valid_run(out);
  // The delta "42" was lost; the following snapshots had deltas for their own text only, so the text stream
  // diverged; the final text stays authoritative and the divergence is reported.
  EXPECT_EQ(terminal(out).type, message_type::terminal_completed);
  EXPECT_EQ(terminal(out).content.at("text"), kThinkingAnswer);
  EXPECT_EQ(terminal(out).content.at("invalid_output_line_count"), 1);
  EXPECT_NE(terminal(out).content.at("invalid_output_lines")[0].get<std::string>().find("bytes dropped"),
            std::string::npos);
  EXPECT_EQ(terminal(out).content.at("text_diverged"), true);
}

TEST(PiMapper, RetryableRuleAndHttpStatus) {
  EXPECT_TRUE(pi_error_is_retryable("503 service unavailable"));
  EXPECT_TRUE(pi_error_is_retryable("429 Too Many Requests"));
  EXPECT_TRUE(pi_error_is_retryable("Overloaded"));
  EXPECT_TRUE(pi_error_is_retryable("rate_limit_error: slow down"));
  EXPECT_TRUE(pi_error_is_retryable("TypeError: fetch failed"));
  EXPECT_TRUE(pi_error_is_retryable("Connection error."));
  EXPECT_TRUE(pi_error_is_retryable("terminated"));
  EXPECT_FALSE(pi_error_is_retryable("400 fake bad request"));
  EXPECT_FALSE(pi_error_is_retryable("Request was aborted."));
  EXPECT_FALSE(pi_error_is_retryable("401 invalid api key"));
  EXPECT_EQ(leading_http_status("400 fake bad request"), 400);
  EXPECT_EQ(leading_http_status("503"), 503);
  EXPECT_EQ(leading_http_status("5030 x"), std::nullopt);
  EXPECT_EQ(leading_http_status("abc"), std::nullopt);
  EXPECT_EQ(leading_http_status("099 x"), std::nullopt);
  EXPECT_EQ(leading_http_status(""), std::nullopt);
}

TEST(PiMapper, NoSessionHeaderSynthesizesOneBeforeContent) {
  const auto out = run_mapper(read_lines(fixture_path("pi-0.73.1-rpc-prompt-abort.jsonl")));
  expect_valid_run(out);
  EXPECT_EQ(out[0].type, message_type::session_started);
  EXPECT_EQ(out[0].content.at("synthesized"), true);
  EXPECT_EQ(terminal(out).content.at("reason"), "agent_error");
  EXPECT_EQ(terminal(out).content.at("text"), "Request was aborted.");
  EXPECT_EQ(terminal(out).content.at("retryable"), false);
}

TEST(PiMapper, MapperIsMovable) {
  pi_mapper a;
  std::vector<message> out;
  a.on_line(R"({"type":"session","id":"s1"})", out);
  pi_mapper b = std::move(a);
  EXPECT_EQ(b.session_id(), "s1");
}

}  // namespace
}  // namespace agenthost::mapper::test
