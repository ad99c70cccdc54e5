// Fields of an unexpected JSON type, absurd token counts and events out of order, across the mappers: a line is
// either mapped whole or invalid (never both), sums never overflow, a real session id is never lost.
#include "mapper_test_util.hpp"

#include <agenthost/mapper/codex_mapper.hpp>
#include <agenthost/mapper/gemini_mapper.hpp>
#include <agenthost/mapper/opencode_mapper.hpp>

#include <gtest/gtest.h>

namespace agenthost::mapper::test {
namespace {

const std::string kThread = R"({"type":"thread.started","thread_id":"t-1"})";
const std::string kTurn = R"({"type":"turn.started"})";
const std::string kDone = R"({"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":3}})";

// json::value("kind", std::string()) threw on a non-string kind after the tool.call was emitted: the call was then
// left open, closed by finish as failed, and the same line counted invalid.
TEST(HostileFields, ACodexFileChangeWithAnObjectKindIsMappedWhole) {
  const std::vector<std::string> lines = {
      kThread, kTurn,
      R"({"type":"item.completed","item":{"id":"f","type":"file_change","changes":[{"path":"a.txt","kind":{"type":"add"}},{"path":7,"kind":null}],"status":"completed"}})",
      R"({"type":"item.completed","item":{"id":"todo","type":"todo_list","items":[{"text":5,"completed":"yes"},{"text":"b","completed":true}]}})",
      kDone};
  const auto out = map_lines<codex_mapper>(lines, codex_mapper_options{}, exited(0));
  expect_valid_run(out);
  const auto closed = of_type(out, message_type::tool_completed);
  ASSERT_EQ(closed.size(), 1u) << to_jsonl(out);
  EXPECT_EQ(closed[0].content.at("output"), "add a.txt\nchange ");
  EXPECT_FALSE(terminal(out).content.contains("invalid_output_lines")) << to_jsonl(out);
  EXPECT_EQ(terminal(out).type, message_type::terminal_completed);
}

// static_cast<long long>(1e300) is undefined behaviour; counts are clamped to [0, 9e15] and summed saturating (1e18).
TEST(HostileFields, AbsurdTokenCountsNeitherOverflowNorGoNegative) {
  const auto gemini = map_lines<gemini_mapper>(
      {R"({"type":"init","session_id":"s1","model":"g"})",
       R"({"type":"message","role":"assistant","content":"hi","delta":true})",
       R"({"type":"result","status":"success","stats":{"input_tokens":1e300,"output_tokens":1e19,"cached":5}})"},
      gemini_mapper_options{}, exited(0));
  const auto& u = terminal(gemini).content.at("usage");
  EXPECT_EQ(u.at("output_tokens"), 9'000'000'000'000'000LL) << u.dump();
  EXPECT_EQ(u.at("cache_read_tokens"), 5);
  EXPECT_EQ(u.at("input_tokens"), 9'000'000'000'000'000LL - 5);
  EXPECT_EQ(u.at("total_tokens"), 18'000'000'000'000'000LL);

  // Ten thousand turns of 9e15 tokens (each accepted by codex's reader) would overflow a long long sum.
  std::vector<std::string> lines = {kThread};
  for (int i = 0; i < 10000; ++i) {
    lines.push_back(kTurn);
    lines.push_back(
        R"({"type":"turn.completed","usage":{"input_tokens":-5,"cached_input_tokens":0,"output_tokens":9000000000000000}})");
  }
  const auto codex = map_lines<codex_mapper>(lines, codex_mapper_options{}, exited(0));
  const auto& cu = terminal(codex).content.at("usage");
  EXPECT_EQ(cu.at("input_tokens"), 0) << cu.dump();
  EXPECT_EQ(cu.at("output_tokens"), 1'000'000'000'000'000'000LL) << cu.dump();
  EXPECT_GT(cu.at("total_tokens").get<long long>(), 0);
}

// OpenCode's first line may carry no session (server.connected): the session is synthesized, and the id of the
// lines after it must still reach the terminal and session_id() — it is what the caller resumes with.
TEST(HostileFields, AnOpencodeSessionIdAfterASynthesizedSessionIsKept) {
  opencode_mapper m;
  std::vector<message> out;
  for (const char* l : {
           R"({"type":"server.connected","properties":{}})",
           R"({"type":"text","timestamp":1,"sessionID":"ses_1","part":{"id":"prt_1","messageID":"msg_1","sessionID":"ses_1","type":"text","text":"42","time":{"start":1,"end":2}}})",
           R"({"type":"step_finish","timestamp":2,"sessionID":"ses_1","part":{"id":"prt_2","reason":"stop","messageID":"msg_1","sessionID":"ses_1","type":"step-finish","tokens":{"total":3,"input":2,"output":1,"reasoning":0,"cache":{"write":0,"read":0}},"cost":0}})"})
    m.on_line(l, out);
  m.finish(exited(0), out);
  expect_valid_run(out);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.front().content.at("synthesized"), true) << to_jsonl(out);
  EXPECT_EQ(m.session_id(), "ses_1");
  EXPECT_EQ(terminal(out).content.at("session_id"), "ses_1") << to_jsonl(out);
}

}  // namespace
}  // namespace agenthost::mapper::test
