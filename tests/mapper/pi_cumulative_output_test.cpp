// pi's tool_execution_update carries the whole output so far; the fast path reuses the text of the bytes an update
// shares with the one before it and unescapes only what follows (pi_event_parser::fast_cumulative_text). These tests
// check that every reported output is the decoding of its own line, also where the shared bytes end at an escape or
// in a surrogate pair, and that the reuse changes nothing compared with a run where it cannot happen.
#include "pi_mapper_test_util.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <vector>

namespace agenthost::mapper::test {
namespace {

using json = nlohmann::json;

std::string update(const std::string& id, const std::string& raw_text) {
  return R"({"type":"tool_execution_update","toolCallId":")" + id +
         R"(","toolName":"bash","args":{"command":"make test"},"partialResult":{"content":[{"type":"text","text":")" +
         raw_text + R"("}],"details":{}}})";
}

const std::string kStart =
    R"({"type":"tool_execution_start","toolCallId":"t","toolName":"bash","args":{"command":"make test"}})";
const std::string kStartOther =
    R"({"type":"tool_execution_start","toolCallId":"other","toolName":"bash","args":{"command":"yes"}})";
const std::string kEnd = R"({"type":"tool_execution_end","toolCallId":"t","toolName":"bash",)"
                         R"("result":{"content":[{"type":"text","text":"done"}]},"isError":false})";

std::vector<std::string> outputs_of(const std::vector<message>& out, const std::string& id) {
  std::vector<std::string> o;
  for (const auto& m : of_type(out, message_type::tool_update))
    if (m.content.at("tool_call_id") == id) o.push_back(m.content.at("output"));
  return o;
}

/// Raw (escaped) output pieces, each decodable on its own by nlohmann (no lone surrogates).
std::string random_piece(std::mt19937& rng) {
  static const std::vector<std::string> pieces = {"\\n", "\\\"", "\\\\", "\\t", "\\u00e9", "\\ud83d\\ude00",
                                                  "\xE4\xBD\xA0", "ok (3 ms)", "test_case_", "  "};
  std::string p = pieces[std::uniform_int_distribution<std::size_t>(0, pieces.size() - 1)(rng)];
  if (std::uniform_int_distribution<int>(0, 3)(rng) == 0)
    p += std::string(std::uniform_int_distribution<std::size_t>(1, 70)(rng), 'x');
  return p;
}

TEST(PiCumulativeOutput, EveryUpdateIsTheDecodingOfItsOwnLine) {
  std::mt19937 rng(3);
  std::vector<std::string> lines{R"({"type":"session","id":"s"})", kStart};
  std::vector<std::string> expected;
  std::string raw;
  std::vector<std::size_t> piece_ends{0};  // where the pieces of `raw` end (cuts never split an escape)
  for (int i = 0; i < 600; ++i) {
    const int change = std::uniform_int_distribution<int>(0, 19)(rng);
    if (change == 0) {  // shorter, then different: the memo's bytes are no longer a prefix
      while (piece_ends.size() > 1 && piece_ends.back() > raw.size() / 2) piece_ends.pop_back();
      raw.resize(piece_ends.back());
      raw += "\\nrestarted";
    } else if (change == 1) {
      raw = "other start " + raw;  // the same bytes, shifted: nothing to reuse
      piece_ends = {0};
    } else if (change != 2) {  // change == 2: the same output again (not reported)
      for (int k = std::uniform_int_distribution<int>(1, 5)(rng); k > 0; --k) raw += random_piece(rng);
    }
    piece_ends.push_back(raw.size());
    lines.push_back(update("t", raw));
    const std::string text = json::parse("\"" + raw + "\"").get<std::string>();
    if (expected.empty() || expected.back() != text) expected.push_back(text);
  }
  lines.push_back(kEnd);
  const auto out = run_mapper(lines);
  expect_valid_run(out);
  EXPECT_EQ(outputs_of(out, "t"), expected);
}

TEST(PiCumulativeOutput, ASurrogatePairSplitAcrossUpdatesIsJoined) {
  const auto out = run_mapper({R"({"type":"session","id":"s"})", kStart, update("t", "a\\ud83d"),
                               update("t", "a\\ud83d\\ude00"), update("t", "a\\ud83d\\ude00\\n"), kEnd});
  expect_valid_run(out);
  EXPECT_EQ(outputs_of(out, "t"),
            (std::vector<std::string>{"a\xEF\xBF\xBD", "a\xF0\x9F\x98\x80", "a\xF0\x9F\x98\x80\n"}));
}

// The same lines with an update of another call between each two (its text replaces the memo, so nothing is reused)
// must give the same messages for call t and the same invalid lines — also for updates that share the memo's bytes
// and then go wrong (a malformed escape, a raw control character, invalid UTF-8, an unclosed string).
TEST(PiCumulativeOutput, ReusingTheLastTextChangesNothing) {
  std::mt19937 rng(9);
  std::vector<std::string> updates;
  std::string raw;
  for (int i = 0; i < 300; ++i) {
    for (int k = std::uniform_int_distribution<int>(1, 4)(rng); k > 0; --k) raw += random_piece(rng);
    updates.push_back(update("t", raw));
    switch (i % 25) {
      case 5: updates.push_back(update("t", raw + "\\x")); break;
      case 10: updates.push_back(update("t", raw + "\x01")); break;
      case 15: updates.push_back(update("t", raw + "\xC3(")); break;
      case 20: updates.push_back(update("t", raw).substr(0, 60 + raw.size())); break;
      case 22: updates.push_back(update("t", raw + "\\ud83d")); break;
      default: break;
    }
  }
  std::vector<std::string> reused{R"({"type":"session","id":"s"})", kStart, kStartOther};
  std::vector<std::string> fresh = reused;
  for (const auto& u : updates) {
    reused.push_back(u);
    fresh.push_back(update("other", "unrelated " + std::to_string(fresh.size())));
    fresh.push_back(u);
  }
  reused.push_back(kEnd);
  fresh.push_back(kEnd);
  const auto a = run_mapper(reused);
  const auto b = run_mapper(fresh);
  const auto outputs = outputs_of(a, "t");
  EXPECT_GT(outputs.size(), 300u);
  EXPECT_EQ(outputs, outputs_of(b, "t"));
  const auto& ta = terminal(a).content;
  const auto& tb = terminal(b).content;
  ASSERT_TRUE(ta.contains("invalid_output_lines"));
  EXPECT_EQ(ta.at("invalid_output_line_count"), tb.at("invalid_output_line_count"));
  EXPECT_EQ(ta.at("invalid_output_line_count"), 48);
  EXPECT_EQ(ta.at("invalid_output_lines"), tb.at("invalid_output_lines"));
}

// A closed call's result (a toolResult message_end, turn_end.toolResults) and a message_start's toolResult content are
// not built, only checked: they are invalid exactly when they would fail to convert, and they change nothing else.
TEST(PiIgnoredResults, AreCheckedLikeBuiltOnesAndChangeNothing) {
  const std::string head = R"({"role":"toolResult","toolCallId":"t","toolName":"bash",)";
  const std::string result_message =
      head + R"("content":[{"type":"text","text":"done"}],"details":{"exit":0},"isError":false})";
  const std::string bad_result_message = head + R"("content":[{"type":"text","text":"do\qne"}],"isError":false})";
  const std::string bad_details = head + R"("content":[],"details":{"x":"\u12"},"isError":false})";
  const std::string assistant = R"({"role":"assistant","content":[],"stopReason":"toolUse","model":"m"})";
  const std::vector<std::string> lines{
      R"({"type":"session","id":"s"})",
      kStart,
      update("t", "partial"),
      kEnd,
      R"({"type":"message_start","message":)" + result_message + "}",
      R"({"type":"message_start","message":)" + bad_result_message + "}",  // invalid: a bad escape in content
      R"({"type":"message_end","message":)" + result_message + "}",
      R"({"type":"message_end","message":)" + bad_result_message + "}",    // invalid, although ignored
      R"({"type":"message_end","message":)" + bad_details + "}",           // invalid: a bad escape in details
      R"({"type":"turn_end","message":)" + assistant + R"(,"toolResults":[)" + result_message + "]}",
      R"({"type":"turn_end","message":)" + assistant + R"(,"toolResults":[)" + bad_result_message + "]}",  // invalid
      R"({"type":"agent_end","messages":[]})"};
  const auto out = run_mapper(lines);
  expect_valid_run(out);
  EXPECT_EQ(terminal(out).content.at("invalid_output_line_count"), 4);
  const auto done = of_type(out, message_type::tool_completed);
  ASSERT_EQ(done.size(), 1u);  // tool_execution_end closed it; the later results are repeats
  EXPECT_EQ(done[0].content.at("output"), "done");
  EXPECT_EQ(done[0].content.at("raw_output"), json::parse(R"({"content":[{"type":"text","text":"done"}]})"));
  // Where the result is the first one (no tool_execution_end), the message_end result is built and reported whole.
  const auto first = run_mapper({R"({"type":"session","id":"s"})", kStart,
                                 R"({"type":"message_end","message":)" + result_message + "}",
                                 R"({"type":"agent_end","messages":[]})"});
  const auto closed = of_type(first, message_type::tool_completed);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].content.at("raw_output"),
            json::parse(R"({"content":[{"type":"text","text":"done"}],"details":{"exit":0}})"));
}

}  // namespace
}  // namespace agenthost::mapper::test
