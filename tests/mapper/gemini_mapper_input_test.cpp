// The Gemini CLI mapper on tools, sessions and hostile input: failed and synthesized calls, repeats, resumed
// sessions, garbage and oversize lines, escapes, finish twice; and the line parser's fast path against On-Demand.
#include "gemini_mapper_test_util.hpp"

#include <string>
#include <vector>

namespace agenthost::mapper::test {
namespace {

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
