// The Claude Code mapper on hostile input: garbage and wrongly typed lines, repeats, unknown events, sub-agents,
// oversize lines, a cut stream, finish twice; and the line parser's fast path against On-Demand on every line.
#include "claude_mapper_test_util.hpp"

#include "claude_event.hpp"  // mapper/src: the line parser's two paths

#include <algorithm>
#include <csignal>
#include <iostream>
#include <string>
#include <vector>

namespace agenthost::mapper::test {
namespace {

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
    // Fields that other kinds of line give another type: an unknown kind is still ignored, not invalid.
    lines.emplace_back(R"({"type":"rate_limit_event","message":"slow down","result":{"ok":true},"usage":7})");
  }
  const auto out = run(lines);
  EXPECT_EQ(to_jsonl(out), to_jsonl(original));
  // Still invalid: a known kind with a field of the wrong type, and an unknown kind with such a field that is not
  // JSON after it (the second pass validates every value).
  const auto bad =
      run({R"({"type":"result","result":{"ok":true}})", R"({"type":"rate_limit_event","usage":7,"x":[1,}})"});
  EXPECT_EQ(terminal(bad).content.at("invalid_output_lines").size(), 2u) << to_jsonl(bad);
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

}  // namespace
}  // namespace agenthost::mapper::test
