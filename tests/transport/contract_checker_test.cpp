// Tests of the contract checker on good and bad message sequences.
#include <agenthost/transport/contract_checker.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

using agenthost::transport::check_run;
using agenthost::transport::contract_checker;
using agenthost::transport::message;
using agenthost::transport::message_type;
using json = nlohmann::json;

namespace {

message session() { return {message_type::session_started, {{"session_id", "s1"}, {"agent", "pi"}}}; }
message text(std::string t) { return {message_type::assistant, {{"text", std::move(t)}}}; }
message call(std::string id) {
  return {message_type::tool_call, {{"tool_call_id", std::move(id)}, {"name", "bash"}, {"input", json::object()}}};
}
message update(std::string id) {
  return {message_type::tool_update, {{"tool_call_id", std::move(id)}, {"name", "bash"}, {"output", "par"}}};
}
message completed(std::string id) {
  return {message_type::tool_completed, {{"tool_call_id", std::move(id)}, {"name", "bash"}, {"output", "ok"}}};
}
message failed_tool(std::string id) {
  return {message_type::tool_failed, {{"tool_call_id", std::move(id)}, {"name", "bash"}, {"error", "boom"}}};
}
message done() { return {message_type::terminal_completed, {{"stop_reason", "stop"}, {"text", "hi"}}}; }
message failed() {
  return {message_type::terminal_failed,
          {{"text", "x"}, {"reason", "agent_error"}, {"stderr", ""}, {"invalid_output_lines", json::array()}}};
}

bool mentions(const std::vector<std::string>& v, const std::string& what) {
  for (const auto& s : v) {
    if (s.find(what) != std::string::npos) return true;
  }
  return false;
}

TEST(ContractChecker, AcceptsAWellFormedRun) {
  const std::vector<message> run{session(),      text("Hel"),  text("lo"), call("c1"), update("c1"),
                                 completed("c1"), call("c2"), failed_tool("c2"),
                                 {message_type::status, {{"kind", "retry"}, {"text", "retrying"}}},
                                 {message_type::assistant_thought, {{"text", "hmm"}}},
                                 done()};
  EXPECT_TRUE(check_run(run).empty()) << ::testing::PrintToString(check_run(run));
}

TEST(ContractChecker, AcceptsATerminalOnlyRun) {
  EXPECT_TRUE(check_run(std::vector<message>{failed()}).empty());
  EXPECT_TRUE(check_run(std::vector<message>{{message_type::terminal_cancelled, json::object()}}).empty());
}

TEST(ContractChecker, RejectsAMissingTerminal) {
  const auto v = check_run(std::vector<message>{session(), text("x")});
  EXPECT_TRUE(mentions(v, "without a terminal")) << ::testing::PrintToString(v);
}

TEST(ContractChecker, RejectsTwoTerminalsAndMessagesAfterTheTerminal) {
  auto v = check_run(std::vector<message>{session(), done(), failed()});
  EXPECT_TRUE(mentions(v, "after the terminal")) << ::testing::PrintToString(v);
  v = check_run(std::vector<message>{session(), done(), text("late")});
  EXPECT_TRUE(mentions(v, "#2 assistant: message after the terminal")) << ::testing::PrintToString(v);
}

TEST(ContractChecker, RejectsOpenToolCallsAtTheTerminal) {
  const auto v = check_run(std::vector<message>{session(), call("c1"), done()});
  EXPECT_TRUE(mentions(v, "still open")) << ::testing::PrintToString(v);
}

TEST(ContractChecker, RejectsDoubleCloseUnknownCallsAndDuplicateCalls) {
  auto v = check_run(std::vector<message>{session(), call("c1"), completed("c1"), failed_tool("c1"), done()});
  EXPECT_TRUE(mentions(v, "closed twice")) << ::testing::PrintToString(v);
  v = check_run(std::vector<message>{session(), completed("zz"), done()});
  EXPECT_TRUE(mentions(v, "unknown call")) << ::testing::PrintToString(v);
  v = check_run(std::vector<message>{session(), call("c1"), call("c1"), completed("c1"), done()});
  EXPECT_TRUE(mentions(v, "duplicate tool.call")) << ::testing::PrintToString(v);
  v = check_run(std::vector<message>{session(), call("c1"), completed("c1"), update("c1"), done()});
  EXPECT_TRUE(mentions(v, "tool.update after")) << ::testing::PrintToString(v);
}

TEST(ContractChecker, RejectsContentBeforeSessionAndSecondSession) {
  auto v = check_run(std::vector<message>{text("x"), session(), done()});
  EXPECT_TRUE(mentions(v, "before any session")) << ::testing::PrintToString(v);
  EXPECT_TRUE(mentions(v, "session.* after")) << ::testing::PrintToString(v);
  v = check_run(std::vector<message>{session(), session(), done()});
  EXPECT_TRUE(mentions(v, "second session")) << ::testing::PrintToString(v);
}

TEST(ContractChecker, RejectsMissingAndMistypedFields) {
  auto v = check_run(std::vector<message>{
      {message_type::terminal_failed, {{"text", "x"}, {"reason", "exited"}, {"exit_code", "1"}}}});
  EXPECT_TRUE(mentions(v, "missing field `stderr`")) << ::testing::PrintToString(v);
  EXPECT_TRUE(mentions(v, "missing field `invalid_output_lines`")) << ::testing::PrintToString(v);
  EXPECT_TRUE(mentions(v, "`exit_code` is not an integer")) << ::testing::PrintToString(v);
  v = check_run(std::vector<message>{session(),
                                     {message_type::tool_call, {{"tool_call_id", "c"}, {"name", "x"}, {"input", "s"}}},
                                     {message_type::status, {{"kind", "retry"}}},
                                     done()});
  EXPECT_TRUE(mentions(v, "`input` is not an object")) << ::testing::PrintToString(v);
  EXPECT_TRUE(mentions(v, "missing field `text`")) << ::testing::PrintToString(v);
  v = check_run(std::vector<message>{{message_type::terminal_failed,
                                      {{"text", "x"},
                                       {"reason", "exited"},
                                       {"stderr", ""},
                                       {"invalid_output_lines", json::array({1})}}}});
  EXPECT_TRUE(mentions(v, "non-string")) << ::testing::PrintToString(v);
  v = check_run(std::vector<message>{{message_type::status, json::array()}, failed()});
  EXPECT_TRUE(mentions(v, "content is not an object")) << ::testing::PrintToString(v);
}

// Tool outputs and errors are strings (docs/contract.md §1.1), and invalid_output_lines holds strings on every
// terminal that has it.
TEST(ContractChecker, RejectsToolOutputsThatAreNotStrings) {
  const auto v = check_run(std::vector<message>{
      session(), call("a"), call("b"), call("c"),
      {message_type::tool_update, {{"tool_call_id", "a"}, {"name", "bash"}, {"output", json::object()}}},
      {message_type::tool_completed, {{"tool_call_id", "a"}, {"name", "bash"}, {"output", json::array()}}},
      {message_type::tool_failed, {{"tool_call_id", "b"}, {"name", "bash"}, {"error", 1}}},
      completed("c"),
      {message_type::terminal_completed, {{"text", "hi"}, {"invalid_output_lines", json::array({json::object()})}}}});
  EXPECT_EQ(v.size(), 4u) << ::testing::PrintToString(v);
  EXPECT_TRUE(mentions(v, "`output` is not a string")) << ::testing::PrintToString(v);
  EXPECT_TRUE(mentions(v, "`error` is not a string")) << ::testing::PrintToString(v);
  EXPECT_TRUE(mentions(v, "non-string")) << ::testing::PrintToString(v);
}

TEST(ContractChecker, IncrementalUse) {
  contract_checker c;
  c.observe(session());
  c.observe(call("a"));
  EXPECT_TRUE(c.ok());
  EXPECT_FALSE(c.terminal_seen());
  c.observe(completed("a"));
  c.observe(done());
  EXPECT_TRUE(c.terminal_seen());
  EXPECT_TRUE(c.finish().empty());
  c.observe(text("late"));
  EXPECT_FALSE(c.ok());
}

}  // namespace
