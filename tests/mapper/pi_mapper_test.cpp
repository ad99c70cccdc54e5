// Behavioural tests of the pi mapper: exact texts, both wire formats, snapshots, thinking, tools (how a run ends,
// the session, usage, stats and bad input: pi_mapper_end_test.cpp).
#include "pi_mapper_test_util.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace agenthost::mapper::test {
namespace {

/// Rewrite lines of a snapshot-era capture: drop `delta` (and the final `content` of *_end) so that only the
/// cumulative snapshots remain; optionally drop `partial` too (then only the top-level `message` snapshot remains).
/// With `Json` = nlohmann::ordered_json pi's key order is kept; with nlohmann::json keys come out sorted (`partial`
/// before `type`, `message` before `type`), which exercises the mapper's order independence.
template <class Json>
std::vector<std::string> snapshots_only(const std::vector<std::string>& lines, bool drop_partial) {
  std::vector<std::string> r;
  for (const auto& l : lines) {
    Json j = Json::parse(l);
    if (j.value("type", "") == "message_update") {
      auto& ame = j["assistantMessageEvent"];
      const std::string t = ame.value("type", "");
      if (t == "text_delta" || t == "thinking_delta") ame.erase("delta");
      if (t == "text_end" || t == "thinking_end") ame.erase("content");
      if (drop_partial) ame.erase("partial");
    }
    r.push_back(j.dump());
  }
  return r;
}

// ---- text ------------------------------------------------------------------------------------------------------------

TEST(PiMapper, ConcatenatedDeltasEqualTheFinalText) {
  for (const auto& input : {kToolTurn, kThinking, kDerivedToolTurn,
                            std::string("synthetic/derived-1.x-delta-only-thinking.jsonl"),
                            std::string("synthetic/whitespace-snapshots.jsonl"),
                            std::string("synthetic/length-cjk.jsonl"), std::string("synthetic/invalid-lines.jsonl")}) {
    SCOPED_TRACE(input);
    const auto out = run_mapper(read_lines(fixture_path(input)));
    expect_valid_run(out);
    ASSERT_EQ(terminal(out).type, message_type::terminal_completed);
    EXPECT_EQ(assistant_text(out), terminal(out).content.at("text").get<std::string>());
  }
  const auto out = run_mapper(read_lines(fixture_path(kThinking)));
  EXPECT_EQ(assistant_text(out), kThinkingAnswer);
  EXPECT_EQ(texts(out, message_type::assistant).size(), 11u);  // one message per delta, none merged or lost
}

TEST(PiMapper, BothWireFormatsGiveTheSameMessages) {
  const auto snapshot_era = run_mapper(read_lines(fixture_path(kToolTurn)));
  const auto delta_only = run_mapper(read_lines(fixture_path(kDerivedToolTurn)));
  EXPECT_EQ(to_jsonl(snapshot_era), to_jsonl(delta_only));
  const auto thinking = run_mapper(read_lines(fixture_path(kThinking)));
  const auto thinking_delta_only =
      run_mapper(read_lines(fixture_path("synthetic/derived-1.x-delta-only-thinking.jsonl")));
  EXPECT_EQ(to_jsonl(thinking), to_jsonl(thinking_delta_only));
}

TEST(PiMapper, CumulativeSnapshotsWithoutDeltaGiveTheSameMessages) {
  for (const auto& input : {kToolTurn, kThinking}) {
    SCOPED_TRACE(input);
    const auto lines = read_lines(fixture_path(input));
    const auto reference = to_jsonl(run_mapper(lines));
    // From assistantMessageEvent.partial, then from the top-level message; in pi's key order and sorted.
    EXPECT_EQ(to_jsonl(run_mapper(snapshots_only<nlohmann::ordered_json>(lines, false))), reference);
    EXPECT_EQ(to_jsonl(run_mapper(snapshots_only<nlohmann::ordered_json>(lines, true))), reference);
    EXPECT_EQ(to_jsonl(run_mapper(snapshots_only<json>(lines, false))), reference);
    EXPECT_EQ(to_jsonl(run_mapper(snapshots_only<json>(lines, true))), reference);
  }
}

TEST(PiMapper, KeyOrderDoesNotMatter) {
  for (const auto& input : {kToolTurn, kThinking, kDerivedToolTurn, kRetry503,
                            std::string("synthetic/tool-result-before-call.jsonl"),
                            std::string("synthetic/compaction.jsonl")}) {
    SCOPED_TRACE(input);
    const auto lines = read_lines(fixture_path(input));
    EXPECT_EQ(to_jsonl(run_mapper(sorted_keys(lines))), to_jsonl(run_mapper(lines)));
  }
}

// pi ≤ 0.83 writes the cumulative message twice, as the update's `partial` and as `message`; the fast path checks a
// `message` with the same bytes as the `partial` it just checked by comparing the bytes. A `message` that only starts
// with them, or differs in one byte, is still checked on its own: the lines below are valid or invalid exactly as
// with the keys in another order (which takes the On-Demand path).
TEST(PiMapper, ASnapshotMessageRepeatingThePartialIsCheckedLikeAnyValue) {
  const auto partial = [](const std::string& text) {
    return R"({"role":"assistant","content":[{"type":"text","text":")" + text + R"("}],"stopReason":"stop"})";
  };
  bool message_first = false;  // `message` before the update: the On-Demand path
  const auto line = [&](const std::string& delta, const std::string& p, const std::string& m) {
    const std::string update = R"("assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":")" + delta +
                               R"(","partial":)" + p + "}";
    return message_first ? R"({"type":"message_update","message":)" + m + "," + update + "}"
                         : R"({"type":"message_update",)" + update + R"(,"message":)" + m + "}";
  };
  const std::string start = R"({"type":"message_start","message":{"role":"assistant","content":[],"model":"m"}})";
  const std::string text_start = R"({"type":"message_update","assistantMessageEvent":{"type":"text_start",)"
                                 R"("contentIndex":0,"partial":)" + partial("") + R"(},"message":)" + partial("") + "}";
  const std::string end = R"({"type":"message_end","message":)" + partial("abcf") + "}";
  const auto unclosed = partial("ab").substr(0, partial("ab").size() - 1);
  const auto run = [&] {
    return run_mapper({R"({"type":"session","id":"s"})", start, text_start,
                       line("a", partial("a"), partial("a")),          // the same bytes: valid
                       line("b", partial("ab"), partial("ab") + "x"),  // more after them: invalid
                       line("x", partial("ab"), partial("a\x01")),     // as long, a raw control byte: invalid
                       line("y", partial("ab"), unclosed),             // its closing brace missing: invalid
                       line("c", partial("abc"), partial("abc") + " "),  // whitespace after: valid
                       line("f", partial("abcf"), partial("abcX")),    // another valid value
                       end, R"({"type":"agent_end","messages":[]})"});
  };
  const auto out = run();
  expect_valid_run(out);
  EXPECT_EQ(terminal(out).content.at("invalid_output_line_count"), 3);
  EXPECT_EQ(assistant_text(out), "acf");
  message_first = true;
  const auto on_demand = run();
  EXPECT_EQ(terminal(on_demand).content.at("invalid_output_line_count"), 3);
  EXPECT_EQ(texts(on_demand, message_type::assistant), texts(out, message_type::assistant));
}

TEST(PiMapper, KeepsWhitespaceOnlyFragments) {
  const auto out = run_mapper(read_lines(fixture_path("synthetic/whitespace-snapshots.jsonl")));
  EXPECT_EQ(texts(out, message_type::assistant),
            (std::vector<std::string>{"## Heading", "\n\n", "- [x] 1.1 item", " ", "tail"}));
}

TEST(PiMapper, NeverDerivesTextFromAStartSnapshot) {
  // thinking_start/text_start partials already hold the first delta's text (measured with pi 0.73.1).
  const auto out = run_mapper(read_lines(fixture_path(kToolTurn)));
  EXPECT_EQ(texts(out, message_type::assistant), (std::vector<std::string>{"The command ", "printed `hello`."}));
}

TEST(PiMapper, DeduplicatesReplayedAssistantPrefixAfterToolTurns) {
  const auto out = run_mapper(read_lines(fixture_path("synthetic/cross-turn-replay.jsonl")));
  expect_valid_run(out);
  EXPECT_EQ(texts(out, message_type::assistant), (std::vector<std::string>{"Alpha", "Beta"}));
  EXPECT_EQ(of_type(out, message_type::tool_call).size(), 1u);
  EXPECT_EQ(of_type(out, message_type::tool_completed).size(), 1u);
  EXPECT_EQ(terminal(out).content.at("text"), "AlphaBeta");
}

TEST(PiMapper, DoesNotTruncateAMessageThatMerelyBeginsLikeThePreviousOne) {
  const auto out = run_mapper(read_lines(fixture_path("synthetic/replay-lookalike.jsonl")));
  expect_valid_run(out);
  EXPECT_EQ(assistant_text(out),
            "I will run the tests."        // turn 1
            "I will run the linter now."   // turn 2: diverges inside turn 1's text → whole
            "I will run"                   // turn 3: a prefix of turn 2's text → whole
            "I will run"                   // turn 4: equal to turn 3's text → whole
            "Linting passed; now running the full test suite."  // turn 5
            // final turn: generated in deltas that repeat turn 5's text, then go on — genuine text, kept whole (a
            // replay arrives as already-accumulated text; see RepeatsOnlyAccumulatedText…)
            "Linting passed; now running the full test suite. All 42 tests pass.");
  // Text generated in deltas is never held: turn 3's deltas are emitted as they come, before its tool call.
  const auto turn3 = std::find_if(out.begin(), out.end(), [](const message& m) {
    return m.type == message_type::tool_call && m.content.at("tool_call_id") == "call_3";
  });
  ASSERT_NE(turn3, out.end());
  EXPECT_EQ((turn3 - 2)->type, message_type::assistant);
  EXPECT_EQ((turn3 - 2)->content.at("text"), "I will");
  EXPECT_EQ((turn3 - 1)->type, message_type::assistant);
  EXPECT_EQ((turn3 - 1)->content.at("text"), " run");
}

namespace replay_cases {
// A tool-use turn that says `first`, then a final message whose text arrives as `updates` (text_delta lines built by
// the caller) and ends with `final_text`.
std::vector<std::string> two_turns(const std::string& first, const std::vector<std::string>& updates,
                                   const std::string& final_text) {
  const auto text = [](const std::string& t) { return nlohmann::json(t).dump(); };
  std::vector<std::string> l = {
      R"({"type":"session","version":3,"id":"s1","cwd":"/p"})",
      R"({"type":"agent_start"})",
      R"({"type":"turn_start"})",
      R"({"type":"message_start","message":{"role":"assistant","content":[]}})",
      R"({"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":)" + text(first) + "}}",
      R"({"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":)" + text(first) +
          R"(},{"type":"toolCall","id":"c1","name":"bash","arguments":{}}],"stopReason":"toolUse"}})",
      R"({"type":"tool_execution_end","toolCallId":"c1","toolName":"bash","result":{"content":[]},"isError":false})",
      R"({"type":"turn_end"})",
      R"({"type":"turn_start"})",
      R"({"type":"message_start","message":{"role":"assistant","content":[]}})"};
  l.insert(l.end(), updates.begin(), updates.end());
  l.push_back(R"({"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":)" +
              text(final_text) + R"(}],"stopReason":"stop"}})");
  l.push_back(R"({"type":"agent_end"})");
  return l;
}
std::string delta(const std::string& d) {
  return R"({"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":)" +
         nlohmann::json(d).dump() + "}}";
}
std::string snapshot(const std::string& t) {
  return R"({"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"partial":{"role":"assistant","content":[{"type":"text","text":)" +
         nlohmann::json(t).dump() + "}]}}}";
}
}  // namespace replay_cases

TEST(PiMapper, ReplayIsOnlyTextThatArrivesAlreadyAccumulated) {
  using namespace replay_cases;
  // A snapshot holding the earlier text and more, at once: a replay.
  auto out = run_mapper(two_turns("Let me check.", {snapshot("Let me check. Fine.")}, "Let me check. Fine."));
  expect_valid_run(out);
  EXPECT_EQ(assistant_text(out), "Let me check. Fine.");
  // A single delta holding the earlier text and more: a replay.
  out = run_mapper(two_turns("Let me check.", {delta("Let me check. Fine.")}, "Let me check. Fine."));
  EXPECT_EQ(assistant_text(out), "Let me check. Fine.");
  // A snapshot equal to the earlier text, then a longer one: a replay that goes on.
  out = run_mapper(two_turns("Let me check.", {snapshot("Let me check."), snapshot("Let me check. Fine.")},
                             "Let me check. Fine."));
  EXPECT_EQ(assistant_text(out), "Let me check. Fine.");
  // A snapshot equal to the earlier text and nothing more: a new message that says the same.
  out = run_mapper(two_turns("Let me check.", {snapshot("Let me check.")}, "Let me check."));
  EXPECT_EQ(assistant_text(out), "Let me check.Let me check.");
  // Generated in deltas — one equal to the earlier text, or smaller ones — then more: genuine text, kept whole.
  out = run_mapper(two_turns("Let me check.", {delta("Let me check."), delta(" Fine.")}, "Let me check. Fine."));
  expect_valid_run(out);
  EXPECT_EQ(assistant_text(out), "Let me check.Let me check. Fine.");
  out = run_mapper(two_turns("Let me check.", {delta("Let me "), delta("check."), delta(" Fine.")},
                             "Let me check. Fine."));
  EXPECT_EQ(assistant_text(out), "Let me check.Let me check. Fine.");
  EXPECT_EQ(terminal(out).content.at("text"), "Let me check. Fine.");
}

TEST(PiMapper, RecordedRepeatAfterToolKeepsTheGenuineRepeat) {
  // pi 0.73.1: the answer after the tool streams "Let me check." then " It is fine." — the model's own words.
  const auto out = run_mapper(read_lines(fixture_path("recorded/pi-0.73.1-repeat-after-tool.jsonl")));
  expect_valid_run(out);
  EXPECT_EQ(assistant_text(out), "Let me check.Let me check. It is fine.");
  EXPECT_EQ(terminal(out).content.at("text"), "Let me check. It is fine.");
}

TEST(PiMapper, StreamCutAndRetriedByPiIsNotRepeated) {
  for (const auto mode : {thinking_mode::buffered, thinking_mode::stream}) {
    const auto out = run_mapper(read_lines(fixture_path("recorded/pi-0.73.1-cut-retry.jsonl")), {.thinking = mode});
    expect_valid_run(out);
    EXPECT_EQ(assistant_text(out), "Hello world.");
    EXPECT_EQ(texts(out, message_type::assistant), (std::vector<std::string>{"Hello ", "wor", "ld."}));
    EXPECT_EQ(terminal(out).type, message_type::terminal_completed);
    EXPECT_EQ(terminal(out).content.at("text"), "Hello world.");
    EXPECT_FALSE(terminal(out).content.contains("text_diverged"));
    for (const auto& s : of_type(out, message_type::status)) EXPECT_EQ(s.content.at("kind"), "retry");
    // Buffered thinking of the failed attempt is dropped (the retry thought again); stream mode released it already.
    if (mode == thinking_mode::buffered) {
      EXPECT_EQ(texts(out, message_type::assistant_thought), (std::vector<std::string>{"Thinking again."}));
    } else {
      EXPECT_EQ(texts(out, message_type::assistant_thought),
                (std::vector<std::string>{"Thinking once.", "Thinking again."}));
    }
  }
}

namespace {
std::vector<std::string> cut_retry_with_second_attempt(const std::string& from, const std::string& to) {
  auto lines = read_lines(fixture_path("recorded/pi-0.73.1-cut-retry.jsonl"));
  bool retried = false;
  for (auto& l : lines) {
    if (l.find(R"("type":"auto_retry_start")") != std::string::npos) retried = true;
    if (!retried) continue;
    for (std::size_t p = l.find(from); p != std::string::npos; p = l.find(from, p + to.size())) l.replace(p, from.size(), to);
  }
  return lines;
}
}  // namespace

TEST(PiMapper, RetryThatDivergesVoidsTheEarlierPartialText) {
  // The retry says "Hello there." where the failed attempt streamed "Hello wor".
  auto out = run_mapper(cut_retry_with_second_attempt("wor", "the"));
  expect_valid_run(out);
  std::vector<message> warnings;
  for (const auto& s : of_type(out, message_type::status))
    if (s.content.at("kind") == "warning") warnings.push_back(s);
  ASSERT_EQ(warnings.size(), 1u) << to_jsonl(out);
  EXPECT_EQ(warnings[0].content.at("code"), "retry_diverged");
  EXPECT_EQ(warnings[0].content.at("retracted_text"), "Hello wor");
  // After the warning, the retry's text from its start.
  std::string after;
  bool seen = false;
  for (const auto& m : out) {
    if (m.type == message_type::status && m.content.at("kind") == "warning") seen = true;
    if (seen && m.type == message_type::assistant) after += m.content.at("text").get<std::string>();
  }
  EXPECT_EQ(after, "Hello theld.");
  EXPECT_EQ(terminal(out).content.at("text"), "Hello theld.");
  EXPECT_EQ(terminal(out).content.value("text_diverged", false), true);

  // The retry is only a part of what was streamed ("Hello " then the end): the rest is void.
  auto lines = read_lines(fixture_path("recorded/pi-0.73.1-cut-retry.jsonl"));
  bool retried = false;
  std::vector<std::string> shorter;
  for (const auto& l : lines) {
    if (l.find(R"("type":"auto_retry_start")") != std::string::npos) retried = true;
    if (retried && (l.find(R"("delta":"wor")") != std::string::npos || l.find(R"("delta":"ld.")") != std::string::npos))
      continue;
    std::string c = l;
    if (retried) {
      for (std::size_t p = c.find("Hello world."); p != std::string::npos; p = c.find("Hello world.", p + 6))
        c.replace(p, 12, "Hello ");
    }
    shorter.push_back(c);
  }
  out = run_mapper(shorter);
  expect_valid_run(out);
  const auto statuses = of_type(out, message_type::status);
  bool retracted = false;
  for (const auto& s : statuses) retracted = retracted || s.content.value("retracted_text", "") == "Hello wor";
  EXPECT_TRUE(retracted) << to_jsonl(out);
  EXPECT_EQ(texts(out, message_type::assistant).back(), "Hello ");
  EXPECT_EQ(terminal(out).content.at("text"), "Hello ");
}

TEST(PiMapper, FailedAttemptWithoutRetryKeepsItsTextAndThinking) {
  // No auto_retry_start: the failed message is the last word; its buffered thinking is released by finish().
  auto lines = read_lines(fixture_path("recorded/pi-0.73.1-cut-retry.jsonl"));
  std::vector<std::string> first;
  for (const auto& l : lines) {
    if (l.find(R"("type":"auto_retry_start")") != std::string::npos) break;
    first.push_back(l);
  }
  const auto out = run_mapper(first);
  expect_valid_run(out);
  EXPECT_EQ(assistant_text(out), "Hello wor");
  EXPECT_EQ(texts(out, message_type::assistant_thought), (std::vector<std::string>{"Thinking once."}));
  EXPECT_EQ(terminal(out).type, message_type::terminal_failed);
}

TEST(PiMapper, RepeatedFinalMessageEndAddsNothing) {
  auto lines = read_lines(fixture_path(kToolTurn));
  const auto once = run_mapper(lines);
  // The last text_end / message_end / turn_end / agent_end, printed again.
  const std::size_t n = lines.size();
  std::vector<std::string> twice = lines;
  for (std::size_t i = n - 4; i < n; ++i) twice.push_back(lines[i]);
  const auto out = run_mapper(twice);
  expect_valid_run(out);
  EXPECT_EQ(assistant_text(out), assistant_text(once));
  EXPECT_EQ(to_jsonl(out), to_jsonl(once));
}

TEST(PiMapper, EventsOfACallClosedInAnEarlierTurnAreIgnored) {
  const std::vector<std::string> lines = {
      R"({"type":"session","version":3,"id":"s1","cwd":"/p"})",
      R"({"type":"agent_start"})",
      R"({"type":"tool_execution_end","toolCallId":"c1","toolName":"bash","result":{"content":[{"type":"text","text":"ok"}]},"isError":false})",
      R"({"type":"turn_end"})",
      R"({"type":"message_update","assistantMessageEvent":{"type":"toolcall_end","contentIndex":0,"toolCall":{"type":"toolCall","id":"c1","name":"bash","arguments":{}}}})",
      R"({"type":"tool_execution_start","toolCallId":"c1","toolName":"bash","args":{}})",
      R"({"type":"tool_execution_update","toolCallId":"c1","toolName":"bash","partialResult":{"content":[{"type":"text","text":"o"}]}})",
      R"({"type":"tool_execution_end","toolCallId":"c1","toolName":"bash","result":{"content":[]},"isError":true})",
      R"({"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"Done."},{"type":"toolCall","id":"c1","name":"bash","arguments":{}}],"stopReason":"stop"}})",
      R"({"type":"agent_end"})"};
  const auto out = run_mapper(lines);
  expect_valid_run(out);
  EXPECT_EQ(of_type(out, message_type::tool_call).size(), 1u);
  EXPECT_EQ(of_type(out, message_type::tool_completed).size(), 1u);
  EXPECT_EQ(of_type(out, message_type::tool_failed).size(), 0u);
  EXPECT_EQ(of_type(out, message_type::tool_update).size(), 0u);
  EXPECT_EQ(terminal(out).type, message_type::terminal_completed);
}

// Calls closed in earlier turns are remembered as in every mapper: the last 1,024 of them (constant memory in a run
// of any length); an id closed 1,024 calls before comes back as a new call.
TEST(PiMapper, ClosedCallsAreRememberedForTheLast1024Calls) {
  const auto end_of = [](const std::string& id) {
    return R"({"type":"tool_execution_end","toolCallId":")" + id +
           R"(","toolName":"bash","result":{"content":[{"type":"text","text":"ok"}]},"isError":false})";
  };
  const auto start_of = [](const std::string& id) {
    return R"({"type":"tool_execution_start","toolCallId":")" + id + R"(","toolName":"bash","args":{}})";
  };
  const auto id_of = [](int i) { return (i % 2 ? "c" : "call_with_a_long_identifier_") + std::to_string(i); };
  std::vector<std::string> lines = {R"({"type":"session","version":3,"id":"s1","cwd":"/p"})",
                                    R"({"type":"agent_start"})"};
  constexpr int kCalls = 3000;
  for (int i = 0; i < kCalls; ++i) {
    lines.push_back(start_of(id_of(i)));
    lines.push_back(end_of(id_of(i)));
    lines.push_back(R"({"type":"turn_end"})");
    // Repeats of calls closed 1 and 1,023 calls ago, in later turns: still remembered.
    lines.push_back(end_of(id_of(i)));
    if (i >= 1023) lines.push_back(start_of(id_of(i - 1023)));
  }
  const std::string agent_end = R"({"type":"agent_end"})";
  lines.push_back(agent_end);
  auto out = run_mapper(lines);
  expect_valid_run(out);
  EXPECT_EQ(of_type(out, message_type::tool_call).size(), std::size_t{kCalls});
  EXPECT_EQ(of_type(out, message_type::tool_completed).size(), std::size_t{kCalls});

  lines.pop_back();
  lines.push_back(end_of(id_of(kCalls - 1024)));  // the oldest still remembered: nothing
  lines.push_back(end_of(id_of(kCalls - 1024 - 1)));  // forgotten: a synthesized call and its result
  lines.push_back(agent_end);
  out = run_mapper(lines);
  const auto calls = of_type(out, message_type::tool_call);
  ASSERT_EQ(calls.size(), std::size_t{kCalls + 1});
  EXPECT_EQ(calls.back().content.at("tool_call_id"), id_of(kCalls - 1024 - 1));
  EXPECT_EQ(calls.back().content.value("synthesized", false), true);
  EXPECT_EQ(of_type(out, message_type::tool_completed).size(), std::size_t{kCalls + 1});
}

TEST(PiMapper, ReplayDedupeCanBeDisabled) {
  const auto out = run_mapper(read_lines(fixture_path("synthetic/cross-turn-replay.jsonl")),
                              {.dedupe_replayed_text = false});
  EXPECT_EQ(texts(out, message_type::assistant), (std::vector<std::string>{"Alpha", "AlphaBeta"}));
}

TEST(PiMapper, ReportsADivergingFinalText) {
  const auto out = run_mapper(read_lines(fixture_path("synthetic/final-text-divergence.jsonl")));
  expect_valid_run(out);
  // (a) message_end carries more than was streamed: the missing suffix is emitted.
  EXPECT_EQ(texts(out, message_type::assistant)[2], " 42.");
  // (b) message_end contradicts the stream: a warning with the final text, and the terminal's text is the final one.
  const auto warnings = of_type(out, message_type::status);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].content.at("kind"), "warning");
  EXPECT_EQ(warnings[0].content.at("code"), "text_diverged");
  EXPECT_EQ(warnings[0].content.at("final_text"), "Checked: one failure.");
  EXPECT_EQ(terminal(out).content.at("text"), "Checked: one failure.");
  EXPECT_EQ(terminal(out).content.at("text_diverged"), true);
}

TEST(PiMapper, LoneSurrogateInADeltaIsReplacedNotFatal) {
  // JSON.stringify escapes a UTF-16 pair split across deltas as lone surrogates.
  const std::vector<std::string> lines{
      R"({"type":"session","id":"s","cwd":"/"})",
      R"({"type":"message_start","message":{"role":"assistant","content":[],"stopReason":"pending"}})",
      R"({"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"a\ud83d"}})",
      R"({"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"\ude00b"}})",
      R"({"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"a\ud83d\ude00b"}],"stopReason":"stop"}})",
      R"({"type":"agent_end","messages":[]})"};
  pi_mapper mapper;
  std::vector<message> out;
  for (const auto& l : lines) mapper.on_line(l, out);
  mapper.finish({.status = process::exited{0}}, out);
  expect_valid_run(out);
  EXPECT_EQ(mapper.stats().invalid_lines, 0u);
  EXPECT_EQ(texts(out, message_type::assistant)[0], "a\xEF\xBF\xBD");
  EXPECT_EQ(terminal(out).type, message_type::terminal_completed);
  EXPECT_EQ(terminal(out).content.at("text"), "a\xF0\x9F\x98\x80" "b");
}

// ---- thinking --------------------------------------------------------------------------------------------------------

TEST(PiMapper, ThinkingIsBufferedUntilTheFinalTurnAndNothingIsLost) {
  const auto out = run_mapper(read_lines(fixture_path(kToolTurn)));
  // The thinking of the tool-use turn is kept and released when the final turn ends, after its text.
  EXPECT_EQ(texts(out, message_type::assistant_thought),
            (std::vector<std::string>{"The user wants me to run echo."}));
  const auto names = type_names(out);
  EXPECT_EQ(names, (std::vector<std::string>{"session.started", "tool.call", "tool.update", "tool.completed",
                                             "assistant", "assistant", "assistant.thought", "terminal.completed"}));
  const auto thinking = run_mapper(read_lines(fixture_path(kThinking)));
  EXPECT_EQ(texts(thinking, message_type::assistant_thought), (std::vector<std::string>{kThinkingText}));
}

TEST(PiMapper, StreamModeReleasesThinkingAsEachBlockCompletes) {
  const auto out = run_mapper(read_lines(fixture_path(kToolTurn)), {.thinking = thinking_mode::stream});
  // thinking_end (contentIndex 0) arrives after the toolcall deltas of contentIndex 1 but before toolcall_end.
  EXPECT_EQ(type_names(out), (std::vector<std::string>{"session.started", "assistant.thought", "tool.call",
                                                       "tool.update", "tool.completed", "assistant", "assistant",
                                                       "terminal.completed"}));
  EXPECT_EQ(texts(out, message_type::assistant_thought),
            (std::vector<std::string>{"The user wants me to run echo."}));
}

TEST(PiMapper, MergeAdjacentTextJoinsTheDeltasOfOneBatchOnly) {
  const auto lines = read_lines(fixture_path(kToolTurn));
  // The whole transcript in one batch (one output vector): the two deltas of the answer become one message.
  pi_mapper merging({.thinking = thinking_mode::stream, .merge_adjacent_text = true});
  std::vector<message> out;
  for (const auto& l : lines) merging.on_line(l, out);
  merging.finish({.status = process::exited{0}}, out);
  EXPECT_EQ(type_names(out), (std::vector<std::string>{"session.started", "assistant.thought", "tool.call",
                                                       "tool.update", "tool.completed", "assistant",
                                                       "terminal.completed"}));
  EXPECT_EQ(texts(out, message_type::assistant), (std::vector<std::string>{"The command printed `hello`."}));
  EXPECT_EQ(transport::check_run(out), std::vector<std::string>{});
  // One line per batch (the caller empties its vector between lines): nothing to merge, nothing held back.
  pi_mapper per_line({.thinking = thinking_mode::stream, .merge_adjacent_text = true});
  std::vector<message> all;
  for (const auto& l : lines) {
    std::vector<message> batch;
    per_line.on_line(l, batch);
    all.insert(all.end(), batch.begin(), batch.end());
  }
  per_line.finish({.status = process::exited{0}}, all);
  EXPECT_EQ(all, run_mapper(lines, {.thinking = thinking_mode::stream}));
}

TEST(PiMapper, BufferedThinkingIsReleasedWhenTheStreamIsCutShort) {
  auto lines = read_lines(fixture_path(kToolTurn));
  lines.resize(12);  // ends inside the first assistant message, after its thinking_end
  for (const auto mode : {thinking_mode::buffered, thinking_mode::stream}) {
    const auto out = run_mapper(lines, {.thinking = mode});
    expect_valid_run(out);
    EXPECT_EQ(texts(out, message_type::assistant_thought),
              (std::vector<std::string>{"The user wants me to run echo."}));
  }
  lines.resize(9);  // inside the thinking deltas: what was streamed so far
  const auto out = run_mapper(lines);
  EXPECT_EQ(texts(out, message_type::assistant_thought), (std::vector<std::string>{"The user wants me to run echo."}));
  lines.resize(8);
  EXPECT_EQ(texts(run_mapper(lines), message_type::assistant_thought),
            (std::vector<std::string>{"The user wants "}));
}

// ---- tools -------------------------------------------------------------------------------------------------------------

TEST(PiMapper, ToolCallIsDeduplicatedAcrossAllItsSources) {
  const auto out = run_mapper(read_lines(fixture_path(kToolTurn)));
  const auto calls = of_type(out, message_type::tool_call);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].content.at("tool_call_id"), "call_1");
  EXPECT_EQ(calls[0].content.at("name"), "bash");
  EXPECT_EQ(calls[0].content.at("input"), (json{{"command", "echo hello"}}));
  const auto updates = of_type(out, message_type::tool_update);
  ASSERT_EQ(updates.size(), 1u);  // the empty first partialResult and repeats are not reported
  EXPECT_EQ(updates[0].content.at("output"), "hello\n");
  const auto done = of_type(out, message_type::tool_completed);
  ASSERT_EQ(done.size(), 1u);  // tool_execution_end, toolResult message_end and turn_end.toolResults: one result
  EXPECT_EQ(done[0].content.at("output"), "hello\n");
}

TEST(PiMapper, PartialResultsReplaceEachOther) {
  const std::vector<std::string> lines{
      R"({"type":"session","id":"s"})",
      R"({"type":"tool_execution_start","toolCallId":"t","toolName":"bash","args":{"command":"seq 3"}})",
      R"({"type":"tool_execution_update","toolCallId":"t","toolName":"bash","partialResult":{"content":[{"type":"text","text":"1\n"}]}})",
      R"({"type":"tool_execution_update","toolCallId":"t","toolName":"bash","partialResult":{"content":[{"type":"text","text":"1\n2\n"}]}})",
      R"({"type":"tool_execution_update","toolCallId":"t","toolName":"bash","partialResult":{"content":[{"type":"text","text":"1\n2\n"}]}})",
      R"({"type":"tool_execution_end","toolCallId":"t","toolName":"bash","result":{"content":[{"type":"text","text":"1\n2\n3\n"}]},"isError":false})"};
  const auto out = run_mapper(lines);
  expect_valid_run(out);
  std::vector<std::string> outputs;
  for (const auto& m : of_type(out, message_type::tool_update)) outputs.push_back(m.content.at("output"));
  EXPECT_EQ(outputs, (std::vector<std::string>{"1\n", "1\n2\n"}));
  EXPECT_EQ(of_type(out, message_type::tool_completed)[0].content.at("output"), "1\n2\n3\n");
}

TEST(PiMapper, ToolResultBeforeItsCallAndToolsThatFailBeforeRunning) {
  const auto out = run_mapper(read_lines(fixture_path("synthetic/tool-result-before-call.jsonl")));
  expect_valid_run(out);
  const auto calls = of_type(out, message_type::tool_call);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].content.at("tool_call_id"), "call_a");
  EXPECT_EQ(calls[0].content.at("synthesized"), true);
  const auto failed = of_type(out, message_type::tool_failed);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].content.at("error"), "Tool nope not found");
}

TEST(PiMapper, OpenToolCallsAreClosedAsFailedWhenTheRunEnds) {
  auto lines = read_lines(fixture_path(kToolTurn));
  lines.resize(17);  // after tool_execution_update, before tool_execution_end
  for (const auto& end : {run_end{.status = process::exited{0}}, run_end{.cancelled = true},
                          run_end{.timeout = "deadline"}, run_end{.status = process::signaled{15}}}) {
    const auto out = run_mapper(lines, {}, end);
    expect_valid_run(out);
    const auto failed = of_type(out, message_type::tool_failed);
    ASSERT_EQ(failed.size(), 1u);
    EXPECT_EQ(failed[0].content.at("tool_call_id"), "call_1");
    EXPECT_EQ(failed[0].content.at("closed_by_finish"), true);
  }
  const auto cancelled = run_mapper(lines, {}, {.cancelled = true});
  EXPECT_EQ(terminal(cancelled).type, message_type::terminal_cancelled);
}

}  // namespace
}  // namespace agenthost::mapper::test
