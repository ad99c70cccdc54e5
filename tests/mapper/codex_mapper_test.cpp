// codex_mapper over every recorded `codex exec --json` transcript (fixtures/codex/recorded/) and over hostile input.
#include "mapper_test_util.hpp"

#include <agenthost/mapper/codex_mapper.hpp>

#include <gtest/gtest.h>

#include <csignal>

namespace agenthost::mapper::test {
namespace {

std::string codex_fixture(const std::string& name) {
  return std::string(AGENTHOST_FIXTURES_DIR) + "/codex/recorded/codex-0.171.0-" + name + ".jsonl";
}

std::vector<message> run_codex(const std::vector<std::string>& lines, codex_mapper_options options = {},
                               run_end end = exited(0)) {
  return map_lines<codex_mapper>(lines, std::move(options), end);
}

TEST(CodexMapper, ToolFixture) {
  const auto lines = read_lines(codex_fixture("tool"));
  const auto s = scripted("tool");
  const auto out = run_codex(lines);
  expect_valid_run(out);
  EXPECT_EQ(out.front().type, message_type::session_started);
  EXPECT_EQ(out.front().content.at("session_id"), "01a229da-2b26-7cb3-99a8-e086d5b7ce9f");
  EXPECT_EQ(out.front().content.at("agent"), "codex");
  // One assistant message per scripted text block, whole, nothing doubled.
  EXPECT_EQ(texts(out, message_type::assistant), s.texts);
  EXPECT_EQ(assistant_text(out), s.text());
  EXPECT_EQ(texts(out, message_type::assistant_thought), s.thoughts);

  const auto calls = of_type(out, message_type::tool_call);
  ASSERT_EQ(calls.size(), 1u) << to_jsonl(out);
  EXPECT_EQ(calls[0].content.at("name"), "shell");
  EXPECT_EQ(calls[0].content.at("tool_call_id"), "item_3");
  EXPECT_EQ(calls[0].content.at("input"), (json{{"command", "/bin/bash -lc 'echo agenthost-tool-output'"}}));
  EXPECT_FALSE(calls[0].content.contains("synthesized"));
  const auto done = of_type(out, message_type::tool_completed);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].content.at("output"), "agenthost-tool-output\n");
  EXPECT_EQ(done[0].content.at("raw_output").at("exit_code"), 0);
  EXPECT_TRUE(of_type(out, message_type::tool_failed).empty());
  EXPECT_TRUE(of_type(out, message_type::tool_update).empty()) << "no output streaming in exec --json";

  const auto& t = terminal(out);
  ASSERT_EQ(t.type, message_type::terminal_completed) << to_jsonl(out);
  EXPECT_EQ(t.content.at("text"), s.texts.back());
  EXPECT_EQ(t.content.at("session_id"), "01a229da-2b26-7cb3-99a8-e086d5b7ce9f");
  EXPECT_EQ(t.content.at("usage").at("input_tokens"), 200);
  EXPECT_EQ(t.content.at("usage").at("output_tokens"), 28);
  EXPECT_EQ(t.content.at("usage").at("total_tokens"), 228);
  EXPECT_FALSE(t.content.contains("invalid_output_lines"));

  // The "model metadata not found" warning item is a status, not a failure.
  const auto statuses = of_type(out, message_type::status);
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_EQ(statuses[0].content.at("kind"), "warning");
  EXPECT_EQ(statuses[0].content.at("code"), "agent_warning");

  // Buffered thinking comes when the turn ends: after the last assistant message. Streamed: before the first.
  const auto names = type_names(out);
  EXPECT_EQ(names, (std::vector<std::string>{"session.started", "status", "assistant", "tool.call", "tool.completed",
                                             "assistant", "assistant.thought", "assistant.thought",
                                             "terminal.completed"}));
  const auto streamed = run_codex(lines, {.thinking = thinking_mode::stream});
  EXPECT_EQ(type_names(streamed),
            (std::vector<std::string>{"session.started", "status", "assistant.thought", "assistant", "tool.call",
                                      "tool.completed", "assistant.thought", "assistant", "terminal.completed"}));
  expect_same_in_both_modes(run_codex, lines, exit0);
}

TEST(CodexMapper, AnswerFixtures) {
  for (const std::string name : {"answer", "answer-stdin-prompt"}) {
    SCOPED_TRACE(name);
    const auto lines = read_lines(codex_fixture(name));
    const auto s = scripted("answer");
    const auto out = run_codex(lines);
    expect_valid_run(out);
    EXPECT_EQ(assistant_text(out), s.text());
    EXPECT_EQ(texts(out, message_type::assistant), s.texts);
    EXPECT_EQ(texts(out, message_type::assistant_thought), s.thoughts);
    EXPECT_TRUE(of_type(out, message_type::tool_call).empty());
    const auto& t = terminal(out);
    ASSERT_EQ(t.type, message_type::terminal_completed);
    EXPECT_EQ(t.content.at("text"), s.text());
    EXPECT_EQ(t.content.at("usage").at("input_tokens"), 100);
    EXPECT_EQ(t.content.at("usage").at("output_tokens"), 15);
    expect_same_in_both_modes(run_codex, lines, exit0);
  }
}

TEST(CodexMapper, ResumedFixture) {
  const auto lines = read_lines(codex_fixture("answer-resumed"));
  const std::string thread = "01a22a80-cc6e-7280-b29e-5a6fcf7baa20";
  const auto out = run_codex(lines, {.requested_session_id = thread});
  expect_valid_run(out);
  ASSERT_EQ(out.front().type, message_type::session_resumed);
  EXPECT_EQ(out.front().content.at("resume"), "resumed");
  EXPECT_EQ(out.front().content.at("requested_session_id"), thread);
  EXPECT_EQ(assistant_text(out), scripted("answer").text());
  EXPECT_EQ(terminal(out).type, message_type::terminal_completed);
  // Codex's running total for the thread (two turns), reported as is.
  EXPECT_EQ(terminal(out).content.at("usage").at("input_tokens"), 200);
  expect_same_in_both_modes(run_codex, lines, exit0);
}

TEST(CodexMapper, CutRetryIsARetryStatusAndTheTextOnce) {
  const auto lines = read_lines(codex_fixture("cut-retry"));
  const auto s = scripted("cut-retry");
  const auto out = run_codex(lines);
  expect_valid_run(out);
  EXPECT_EQ(assistant_text(out), "Hello world.");
  EXPECT_EQ(assistant_text(out), s.text());
  EXPECT_EQ(texts(out, message_type::assistant_thought), s.thoughts);
  std::vector<json> retries;
  for (const auto& m : of_type(out, message_type::status))
    if (m.content.at("kind") == "retry") retries.push_back(m.content);
  ASSERT_EQ(retries.size(), 1u) << to_jsonl(out);
  EXPECT_EQ(retries[0].at("attempt"), 1);
  EXPECT_EQ(retries[0].at("max_attempts"), 2);
  EXPECT_EQ(retries[0].at("error").get<std::string>().rfind("stream disconnected before completion", 0), 0u);
  EXPECT_EQ(terminal(out).type, message_type::terminal_completed);
  expect_same_in_both_modes(run_codex, lines, exit0);
}

TEST(CodexMapper, FlakyRetriedSilently) {
  const auto lines = read_lines(codex_fixture("flaky"));
  const auto s = scripted("flaky");
  const auto out = run_codex(lines);
  expect_valid_run(out);
  EXPECT_EQ(assistant_text(out), s.text());
  EXPECT_EQ(texts(out, message_type::assistant_thought), s.thoughts);
  EXPECT_EQ(terminal(out).type, message_type::terminal_completed);
  EXPECT_EQ(terminal(out).content.at("text"), "Recovered answer \u00fc.");
  expect_same_in_both_modes(run_codex, lines, exit0);
}

TEST(CodexMapper, Http429IsAgentErrorWithStatusAndRetryable) {
  const auto lines = read_lines(codex_fixture("http429"));
  const auto out = run_codex(lines, {}, exit1);
  expect_valid_run(out);
  EXPECT_TRUE(of_type(out, message_type::assistant).empty());
  const auto& t = terminal(out);
  ASSERT_EQ(t.type, message_type::terminal_failed) << to_jsonl(out);
  EXPECT_EQ(t.content.at("reason"), "agent_error");
  EXPECT_EQ(t.content.at("text"), "exceeded retry limit, last status: 429 Too Many Requests");
  EXPECT_EQ(t.content.at("http_status"), 429);
  EXPECT_EQ(t.content.at("retryable"), true);
  EXPECT_EQ(t.content.at("exit_code"), 1);
  EXPECT_EQ(t.content.at("session_id"), "01a229da-3f3f-7271-95af-8abc72e8a44d");
  expect_same_in_both_modes(run_codex, lines, exit1);
  // Exit 0 after turn.failed (not what codex does, but the event decides): the same failure.
  EXPECT_EQ(terminal(run_codex(lines, {}, exit0)).content.at("reason"), "agent_error");
}

TEST(CodexMapper, Http500CannedMessageIsRetryableWithoutStatus) {
  const auto lines = read_lines(codex_fixture("http500"));
  const auto out = run_codex(lines, {}, exit1);
  expect_valid_run(out);
  const auto& t = terminal(out);
  ASSERT_EQ(t.type, message_type::terminal_failed);
  EXPECT_EQ(t.content.at("reason"), "agent_error");
  EXPECT_EQ(t.content.at("text"), "We\u2019re currently experiencing high demand, which may cause temporary errors.");
  // Codex replaces the 5xx body with this canned text: no status to report, but it is transient.
  EXPECT_FALSE(t.content.contains("http_status"));
  EXPECT_EQ(t.content.at("retryable"), true);
  expect_same_in_both_modes(run_codex, lines, exit1);
}

TEST(CodexMapper, CancelledDuringTheToolClosesTheCall) {
  const auto lines = read_lines(codex_fixture("long-tool"));
  const run_end cancelled{.status = process::exited{1}, .cancelled = true};
  const auto out = run_codex(lines, {}, cancelled);
  expect_valid_run(out);
  EXPECT_EQ(assistant_text(out), "Sleeping.");
  const auto calls = of_type(out, message_type::tool_call);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].content.at("input").at("command"), "/bin/bash -lc 'sleep 30'");
  const auto failed = of_type(out, message_type::tool_failed);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].content.at("closed_by_finish"), true);
  EXPECT_EQ(terminal(out).type, message_type::terminal_cancelled);
  expect_same_in_both_modes(run_codex, lines, cancelled);
  // Without cancellation the same exit 1 is a failure of the agent: exited, retryable (it had started working).
  const auto exited = run_codex(lines, {}, exit1);
  EXPECT_EQ(terminal(exited).content.at("reason"), "exited");
  EXPECT_EQ(terminal(exited).content.at("exit_code"), 1);
  EXPECT_EQ(terminal(exited).content.at("retryable"), true);
}

TEST(CodexMapper, SigtermFixtureIsSignaled) {
  const auto lines = read_lines(codex_fixture("long-tool-sigterm"));
  const run_end end{.status = process::signaled{SIGTERM}};
  const auto out = run_codex(lines, {}, end);
  expect_valid_run(out);
  const auto& t = terminal(out);
  ASSERT_EQ(t.type, message_type::terminal_failed);
  EXPECT_EQ(t.content.at("reason"), "signaled");
  EXPECT_EQ(t.content.at("signal"), SIGTERM);
  EXPECT_EQ(t.content.at("retryable"), true);
  expect_same_in_both_modes(run_codex, lines, end);
}

TEST(CodexMapper, SlowFixtureCancelledOrCut) {
  const auto lines = read_lines(codex_fixture("slow"));
  const auto cancelled = run_codex(lines, {}, {.status = process::exited{1}, .cancelled = true});
  expect_valid_run(cancelled);
  EXPECT_EQ(terminal(cancelled).type, message_type::terminal_cancelled);
  EXPECT_TRUE(of_type(cancelled, message_type::assistant).empty());
  // Exit 0 without turn.completed: the output ended before the final event.
  const auto cut = run_codex(lines, {}, exit0);
  expect_valid_run(cut);
  EXPECT_EQ(terminal(cut).content.at("reason"), "no_terminal_event");
  EXPECT_EQ(terminal(cut).content.at("retryable"), true);
  // A watchdog.
  const auto timed_out = run_codex(lines, {}, {.timeout = "idle"});
  EXPECT_EQ(terminal(timed_out).content.at("reason"), "timeout");
  EXPECT_EQ(terminal(timed_out).content.at("timeout"), "idle");
}

TEST(CodexMapper, AgentFinishedAfterTheTurnEnds) {
  codex_mapper m;
  std::vector<message> out;
  const auto lines = read_lines(codex_fixture("tool"));
  expect_finished_at_the_last_line(m, lines, out);
  EXPECT_EQ(m.session_id(), "01a229da-2b26-7cb3-99a8-e086d5b7ce9f");
  // The provider stopped a codex that lingered after turn.completed: still completed, marked.
  m.finish({.status = process::signaled{SIGTERM}, .stopped_after_finish = true}, out);
  EXPECT_EQ(out.back().type, message_type::terminal_completed);
  EXPECT_EQ(out.back().content.at("stopped_after_finish"), true);
  expect_valid_run(out);
  const auto n = out.size();
  m.finish(exit0, out);  // idempotent
  m.on_line(lines.back(), out);
  EXPECT_EQ(out.size(), n);

  codex_mapper failed;
  out.clear();
  for (const auto& l : read_lines(codex_fixture("http429"))) failed.on_line(l, out);
  EXPECT_TRUE(failed.agent_finished());
}

// ---- hostile input ------------------------------------------------------------------------------------------------

const std::string kThread = R"({"type":"thread.started","thread_id":"t-1"})";
const std::string kTurn = R"({"type":"turn.started"})";
const std::string kDone =
    R"({"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":3,"reasoning_output_tokens":1}})";
std::string agent_message(const std::string& id, const std::string& text, const std::string& event = "item.completed") {
  return json{{"type", event}, {"item", {{"id", id}, {"type", "agent_message"}, {"text", text}}}}.dump();
}

TEST(CodexMapper, InvalidLinesAreReportedAndNeverStopTheStream) {
  const std::vector<std::string> lines = {
      kThread,
      "not json at all",
      R"({"type":"item.completed","item":{"id":"a","type":"agent_message","text":"trunc)",  // truncated
      R"({"type":42})",                                                                      // type not a string
      R"({"item":{"id":"x","type":"agent_message","text":"no type"}})",                       // no type
      R"([1,2,3])",                                                                           // not an object
      R"({"type":"item.completed","item":{"id":"b","type":"agent_message","text":7}})",      // text not a string
      R"({"type":"item.completed","item":"nope"})",                                           // item not an object
      R"({"type":"item.completed","item":{"type":"agent_message","text":"no id"}})",          // item without id
      R"({"type":"turn.started"} trailing)",                                                  // trailing content
      std::string("{\"type\":\"error\",\"message\":\"bad \xff utf8\"}"),                     // invalid UTF-8
      "",                                                                                     // blank: ignored
      "   ",
      kTurn,
      agent_message("item_1", "Fine."),
      kDone};
  const auto out = run_codex(lines);
  expect_valid_run(out);
  EXPECT_EQ(assistant_text(out), "Fine.");
  const auto& t = terminal(out);
  // A completed run stays completed; the bad lines are reported with it.
  ASSERT_EQ(t.type, message_type::terminal_completed) << to_jsonl(out);
  EXPECT_EQ(t.content.at("invalid_output_line_count"), 10);
  ASSERT_EQ(t.content.at("invalid_output_lines").size(), 10u);
  EXPECT_EQ(t.content.at("invalid_output_lines")[0], "not json at all");
  // Bounded: only the first N are kept, each cut.
  const auto bounded = run_codex(lines, {.max_invalid_lines = 2, .max_invalid_line_bytes = 8});
  EXPECT_EQ(terminal(bounded).content.at("invalid_output_line_count"), 10);
  ASSERT_EQ(terminal(bounded).content.at("invalid_output_lines").size(), 2u);
  EXPECT_LE(terminal(bounded).content.at("invalid_output_lines")[0].get<std::string>().size(), 8u + 3u);
}

TEST(CodexMapper, NullFieldsAreAbsentAndUnknownEventsIgnored) {
  const std::vector<std::string> lines = {
      kThread,
      kTurn,
      R"({"type":"item.plan.delta","item_id":"p","delta":42})",  // unknown to the mapper: ignored, even odd fields
      R"({"type":"request_user_input","id":"t","call_id":"c","questions":[]})",
      R"({"type":"future.event","message":{"x":1}})",
      R"({"type":"item.completed","item":{"id":"c1","type":"collab_tool_call","tool":"wait"}})",  // unmapped item
      R"({"type":"item.started","item":{"id":"cmd","type":"command_execution","command":"ls","aggregated_output":null,"exit_code":null,"status":"in_progress"}})",
      R"({"type":"item.updated","item":{"id":"cmd","type":"command_execution","command":"ls","aggregated_output":"a\n","exit_code":null,"status":"in_progress"}})",
      R"({"type":"item.completed","item":{"id":"cmd","type":"command_execution","command":"ls","aggregated_output":"a\nb\n","exit_code":0,"status":"completed"}})",
      agent_message("m", "Done."),
      kDone};
  const auto out = run_codex(lines);
  expect_valid_run(out);
  EXPECT_FALSE(terminal(out).content.contains("invalid_output_lines")) << to_jsonl(out);
  const auto updates = of_type(out, message_type::tool_update);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].content.at("output"), "a\n");
  EXPECT_EQ(of_type(out, message_type::tool_completed).at(0).content.at("output"), "a\nb\n");
  EXPECT_EQ(terminal(out).type, message_type::terminal_completed);
}

TEST(CodexMapper, DuplicatedEventsAddNothing) {
  const std::vector<std::string> lines = {
      kThread, kThread, kTurn,
      R"({"type":"item.completed","item":{"id":"r","type":"reasoning","text":"Think."}})",
      R"({"type":"item.completed","item":{"id":"r","type":"reasoning","text":"Think."}})",
      agent_message("m1", "Hello "),
      agent_message("m1", "Hello "),
      R"({"type":"item.started","item":{"id":"c","type":"command_execution","command":"true","aggregated_output":"","exit_code":null,"status":"in_progress"}})",
      R"({"type":"item.started","item":{"id":"c","type":"command_execution","command":"true","aggregated_output":"","exit_code":null,"status":"in_progress"}})",
      R"({"type":"item.completed","item":{"id":"c","type":"command_execution","command":"true","aggregated_output":"","exit_code":0,"status":"completed"}})",
      R"({"type":"item.completed","item":{"id":"c","type":"command_execution","command":"true","aggregated_output":"","exit_code":0,"status":"completed"}})",
      agent_message("m2", "world."),
      kDone, kDone};
  const auto out = run_codex(lines);
  expect_valid_run(out);
  EXPECT_EQ(of_type(out, message_type::session_started).size(), 1u);
  EXPECT_EQ(assistant_text(out), "Hello world.");
  EXPECT_EQ(texts(out, message_type::assistant_thought), std::vector<std::string>{"Think."});
  EXPECT_EQ(of_type(out, message_type::tool_call).size(), 1u);
  EXPECT_EQ(of_type(out, message_type::tool_completed).size(), 1u);
  // Usage counted once: input 10 of which 4 cached → 6 uncached + 4 cache reads.
  const auto& usage = terminal(out).content.at("usage");
  EXPECT_EQ(usage.at("input_tokens"), 6);
  EXPECT_EQ(usage.at("cache_read_tokens"), 4);
  EXPECT_EQ(usage.at("output_tokens"), 3);
  EXPECT_EQ(usage.at("reasoning_tokens"), 1);
  EXPECT_EQ(terminal(out).content.at("text"), "world.");
}

// The ids of closed calls are remembered for the last kRememberedClosedCalls (1,024) calls, so a long run keeps
// constant memory: a repeat within that window adds nothing; an id that comes back after more calls is a new call.
TEST(CodexMapper, ClosedCallsAreRememberedForTheLast1024Calls) {
  const auto started = [](const std::string& id) {
    return R"({"type":"item.started","item":{"id":")" + id +
           R"(","type":"command_execution","command":"true","aggregated_output":"","exit_code":null,"status":"in_progress"}})";
  };
  const auto completed = [](const std::string& id) {
    return R"({"type":"item.completed","item":{"id":")" + id +
           R"(","type":"command_execution","command":"true","aggregated_output":"x","exit_code":0,"status":"completed"}})";
  };
  // Short ids (inside the string object) and long ones (on the heap) alike.
  const auto id_of = [](int i) { return (i % 2 ? "c" : "call_with_a_long_identifier_") + std::to_string(i); };
  std::vector<std::string> lines = {kThread, kTurn};
  constexpr int kCalls = 3000;
  for (int i = 0; i < kCalls; ++i) {
    lines.push_back(started(id_of(i)));
    lines.push_back(completed(id_of(i)));
    // Repeats of calls closed 1 and 1,023 calls ago: still remembered.
    lines.push_back(completed(id_of(i)));
    if (i >= 1023) lines.push_back(started(id_of(i - 1023)));
  }
  lines.push_back(kDone);
  auto out = run_codex(lines);
  expect_valid_run(out);
  EXPECT_EQ(of_type(out, message_type::tool_call).size(), std::size_t{kCalls});
  EXPECT_EQ(of_type(out, message_type::tool_completed).size(), std::size_t{kCalls});

  // 1,024 calls later an id is forgotten: its result now opens and closes a call again.
  lines.insert(lines.end() - 1, completed(id_of(kCalls - 1024)));  // the oldest still remembered: nothing
  lines.insert(lines.end() - 1, completed(id_of(kCalls - 1024 - 1)));
  out = run_codex(lines);
  const auto calls = of_type(out, message_type::tool_call);
  ASSERT_EQ(calls.size(), std::size_t{kCalls + 1});
  EXPECT_EQ(calls.back().content.at("tool_call_id"), id_of(kCalls - 1024 - 1));
  const auto results = of_type(out, message_type::tool_completed);
  ASSERT_EQ(results.size(), std::size_t{kCalls + 1});
  EXPECT_EQ(results.back().content.at("tool_call_id"), id_of(kCalls - 1024 - 1));
}

TEST(CodexMapper, PartialAgentMessagesEmitOnlyWhatIsNewAndFlagDivergence) {
  const std::vector<std::string> lines = {kThread, kTurn,
                                          agent_message("m", "Hel", "item.started"),
                                          agent_message("m", "Hello", "item.updated"),
                                          agent_message("m", "Hello!"),
                                          agent_message("n", "Abc", "item.updated"),
                                          agent_message("n", "Xyz"),
                                          kDone};
  const auto out = run_codex(lines);
  expect_valid_run(out);
  EXPECT_EQ(texts(out, message_type::assistant), (std::vector<std::string>{"Hel", "lo", "!", "Abc"}));
  const auto statuses = of_type(out, message_type::status);
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_EQ(statuses[0].content.at("code"), "text_diverged");
  EXPECT_EQ(statuses[0].content.at("final_text"), "Xyz");
  EXPECT_EQ(terminal(out).content.at("text_diverged"), true);
  EXPECT_EQ(terminal(out).content.at("text"), "Xyz");
}

TEST(CodexMapper, OtherToolItems) {
  const std::vector<std::string> lines = {
      kThread, kTurn,
      // Completed only (no started): the call is announced with its real input.
      R"({"type":"item.completed","item":{"id":"f","type":"file_change","changes":[{"path":"a.txt","kind":"add"},{"path":"b.txt","kind":"update"}],"status":"completed"}})",
      R"({"type":"item.completed","item":{"id":"f2","type":"file_change","changes":[{"path":"c.txt","kind":"delete"}],"status":"failed"}})",
      R"({"type":"item.started","item":{"id":"mcp","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"x"},"result":null,"error":null,"status":"in_progress"}})",
      R"({"type":"item.completed","item":{"id":"mcp","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"x"},"result":{"content":[{"type":"text","text":"r1"},{"type":"text","text":"r2"}],"structured_content":null},"error":null,"status":"completed"}})",
      R"({"type":"item.completed","item":{"id":"mcp2","type":"mcp_tool_call","server":"docs","tool":"get","arguments":null,"result":null,"error":{"message":"boom"},"status":"failed"}})",
      R"({"type":"item.started","item":{"id":"w","type":"web_search","query":"","action":{"type":"other"}}})",
      R"({"type":"item.completed","item":{"id":"w","type":"web_search","query":"simdjson","action":{"type":"search","query":"simdjson"}}})",
      R"({"type":"item.completed","item":{"id":"bad","type":"command_execution","command":"false","aggregated_output":"","exit_code":1,"status":"failed"}})",
      // The same result again: the call is closed, nothing is added.
      R"({"type":"item.completed","item":{"id":"bad","type":"command_execution","command":"false","aggregated_output":"","exit_code":1,"status":"failed"}})",
      R"({"type":"item.started","item":{"id":"todo","type":"todo_list","items":[{"text":"a","completed":false}]}})",
      R"({"type":"item.updated","item":{"id":"todo","type":"todo_list","items":[{"text":"a","completed":false}]}})",
      R"({"type":"item.completed","item":{"id":"todo","type":"todo_list","items":[{"text":"a","completed":true}]}})",
      kDone};
  const auto out = run_codex(lines);
  expect_valid_run(out);
  const auto calls = of_type(out, message_type::tool_call);
  ASSERT_EQ(calls.size(), 6u) << to_jsonl(out);
  EXPECT_EQ(calls[0].content.at("name"), "apply_patch");
  EXPECT_EQ(calls[0].content.at("input").at("changes").size(), 2u);
  EXPECT_EQ(calls[2].content.at("name"), "mcp__docs__search");
  EXPECT_EQ(calls[2].content.at("input"), (json{{"q", "x"}}));
  EXPECT_EQ(calls[3].content.at("input"), json::object());
  EXPECT_EQ(calls[4].content.at("name"), "web_search");
  EXPECT_EQ(calls[5].content.at("name"), "shell");
  EXPECT_EQ(calls[5].content.at("input"), (json{{"command", "false"}}));  // announced with its real input
  EXPECT_FALSE(calls[5].content.contains("synthesized"));
  const auto completed = of_type(out, message_type::tool_completed);
  ASSERT_EQ(completed.size(), 3u);
  EXPECT_EQ(completed[0].content.at("output"), "add a.txt\nupdate b.txt");
  EXPECT_EQ(completed[1].content.at("output"), "r1\nr2");
  EXPECT_EQ(completed[2].content.at("raw_output").at("query"), "simdjson");
  const auto failed = of_type(out, message_type::tool_failed);
  ASSERT_EQ(failed.size(), 3u);
  EXPECT_EQ(failed[0].content.at("error"), "delete c.txt");
  EXPECT_EQ(failed[1].content.at("error"), "boom");
  EXPECT_EQ(failed[2].content.at("error"), "the command exited with code 1");
  EXPECT_EQ(failed[2].content.at("raw_output").at("exit_code"), 1);
  std::vector<std::string> todo;
  for (const auto& m : of_type(out, message_type::status))
    if (m.content.at("kind") == "todo_list") todo.push_back(m.content.at("text"));
  EXPECT_EQ(todo, (std::vector<std::string>{"[ ] a", "[x] a"}));
}

// The mapper reads codex's usual lines with a byte-level fast path and everything else with simdjson On-Demand: the
// same lines with their keys in another order (nlohmann sorts them: "item" before "type") must give the same
// messages.
TEST(CodexMapper, FastPathAndOnDemandPathAgree) {
  for (const std::string name : {"tool", "answer", "cut-retry", "http429", "long-tool", "answer-resumed"}) {
    SCOPED_TRACE(name);
    const auto lines = read_lines(codex_fixture(name));
    const auto reordered = sorted_keys(lines);
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].rfind(R"({"type":"item.)", 0) == 0) {
        EXPECT_NE(reordered[i], lines[i]);
      }
    }
    for (const auto mode : {thinking_mode::buffered, thinking_mode::stream}) {
      EXPECT_EQ(to_jsonl(run_codex(lines, {.thinking = mode}, exit1)),
                to_jsonl(run_codex(reordered, {.thinking = mode}, exit1)));
    }
  }
}

TEST(CodexMapper, FastPathShapedButBrokenLinesAreInvalid) {
  const std::string item = R"({"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":)";
  const std::vector<std::string> bad = {
      item + "\"bad \\x escape\"}}",
      item + "\"bad utf8 \xC3\x28\"}}",
      item + "\"ok\"}} trailing",
      item + "\"raw \x01 control\"}}",
      item + "\"not closed}}",
      R"({"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"x","aggregated_output":"","exit_code":1.5,"status":"failed"}})",
  };
  for (const auto& b : bad) {
    const auto out = run_codex({kThread, kTurn, b, agent_message("item_9", "fine"), kDone});
    expect_valid_run(out);
    EXPECT_EQ(terminal(out).content.at("invalid_output_line_count"), 1) << b;
    EXPECT_EQ(assistant_text(out), "fine") << b;
    EXPECT_TRUE(of_type(out, message_type::tool_call).empty()) << b;
  }
  // Accepted variants: a huge exit code (read by On-Demand), an escaped id, whitespace after the object.
  const std::vector<std::string> good = {
      R"({"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"x","aggregated_output":"o","exit_code":4294967296,"status":"failed"}})",
      R"({"type":"item.completed","item":{"id":"item_\u0032","type":"command_execution","command":"x","aggregated_output":"o","exit_code":0,"status":"completed"}})",
      R"({"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"x","aggregated_output":"o","exit_code":-1,"status":"failed"}}  )",
  };
  for (const auto& g : good) {
    const auto out = run_codex({kThread, kTurn, g, kDone});
    expect_valid_run(out);
    EXPECT_FALSE(terminal(out).content.contains("invalid_output_lines")) << g;
    ASSERT_EQ(of_type(out, message_type::tool_call).size(), 1u) << g;
    EXPECT_EQ(of_type(out, message_type::tool_call)[0].content.at("tool_call_id"), "item_2") << g;
  }
}

TEST(CodexMapper, OversizeLineIsInvalid) {
  codex_mapper m;
  std::vector<message> out;
  m.on_line(kThread, out);
  m.on_line(kTurn, out);
  m.on_oversize_line(R"({"type":"item.completed","item":{"id":"huge")", 100u << 20, out);
  m.on_line(agent_message("m", "ok"), out);
  m.on_line(kDone, out);
  m.finish(exit0, out);
  expect_valid_run(out);
  EXPECT_EQ(out.back().type, message_type::terminal_completed);
  EXPECT_EQ(out.back().content.at("invalid_output_line_count"), 1);
  EXPECT_NE(out.back().content.at("invalid_output_lines")[0].get<std::string>().find("104857600 bytes"),
            std::string::npos);
  EXPECT_EQ(m.stats().lines, 5u);
}

TEST(CodexMapper, ExitCodesWithoutAFinalEvent) {
  const std::vector<std::string> lines = {kThread, kTurn, agent_message("m", "partial"),
                                          R"({"type":"error","message":"stream error: unexpected status 503"})"};
  // Exit 0 without turn.completed.
  auto out = run_codex(lines);
  expect_valid_run(out);
  EXPECT_EQ(terminal(out).content.at("reason"), "no_terminal_event");
  EXPECT_NE(terminal(out).content.at("text").get<std::string>().find("unexpected status 503"), std::string::npos);
  // The error event itself is a warning status, with the status it names.
  const auto statuses = of_type(out, message_type::status);
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_EQ(statuses[0].content.at("http_status"), 503);
  // Non-zero exit without turn.failed → exited, with the last error and stderr's last line.
  out = run_codex(lines, {}, {.status = process::exited{2}, .stderr_tail = "boot\nError: no auth\n"});
  expect_valid_run(out);
  EXPECT_EQ(terminal(out).content.at("reason"), "exited");
  EXPECT_EQ(terminal(out).content.at("exit_code"), 2);
  EXPECT_NE(terminal(out).content.at("text").get<std::string>().find("Error: no auth"), std::string::npos);
  EXPECT_EQ(terminal(out).content.at("stderr"), "boot\nError: no auth\n");
  // Nothing at all, exit 1 (bad arguments): exited, not retryable.
  out = run_codex({}, {}, exit1);
  expect_valid_run(out);
  EXPECT_EQ(terminal(out).content.at("reason"), "exited");
  EXPECT_EQ(terminal(out).content.at("retryable"), false);
  // Killed by a signal.
  out = run_codex(lines, {}, {.status = process::signaled{SIGKILL}});
  EXPECT_EQ(terminal(out).content.at("reason"), "signaled");
  EXPECT_EQ(terminal(out).content.at("signal_name"), "SIGKILL");
  // Cancelled wins over everything, even after turn.completed.
  auto done = lines;
  done.push_back(kDone);
  out = run_codex(done, {}, {.status = process::exited{0}, .cancelled = true});
  EXPECT_EQ(terminal(out).type, message_type::terminal_cancelled);
}

TEST(CodexMapper, ResumedSession) {
  const std::vector<std::string> lines = {kThread, kTurn, agent_message("m", "x"), kDone};
  auto out = run_codex(lines, {.requested_session_id = "t-1"});
  expect_valid_run(out);
  EXPECT_EQ(out.front().type, message_type::session_resumed);
  EXPECT_EQ(out.front().content.at("resume"), "resumed");
  out = run_codex(lines, {.requested_session_id = "other"});
  EXPECT_EQ(out.front().content.at("resume"), "restarted");
  // No thread.started at all: a synthesized session before the content.
  out = run_codex({kTurn, agent_message("m", "x"), kDone});
  expect_valid_run(out);
  EXPECT_EQ(out.front().content.at("synthesized"), true);
}

TEST(CodexMapper, BufferedThinkingIsReleasedOnCutRuns) {
  const std::vector<std::string> lines = {
      kThread, kTurn, R"({"type":"item.completed","item":{"id":"r","type":"reasoning","text":"Half a thought."}})"};
  const auto out = run_codex(lines, {}, {.status = process::exited{1}, .cancelled = true});
  expect_valid_run(out);
  EXPECT_EQ(texts(out, message_type::assistant_thought), std::vector<std::string>{"Half a thought."});
}

TEST(CodexMapper, HttpStatusAndRetryHint) {
  EXPECT_EQ(codex_http_status("exceeded retry limit, last status: 429 Too Many Requests"), 429);
  EXPECT_EQ(codex_http_status("unexpected status 400 Bad Request: {}"), 400);
  EXPECT_EQ(codex_http_status("503 service unavailable"), 503);
  EXPECT_EQ(codex_http_status("status 1234"), std::nullopt);
  EXPECT_EQ(codex_http_status("We\u2019re currently experiencing high demand"), std::nullopt);
  EXPECT_TRUE(codex_error_is_retryable("exceeded retry limit, last status: 429 Too Many Requests"));
  EXPECT_TRUE(codex_error_is_retryable("unexpected status 502 Bad Gateway"));
  EXPECT_FALSE(codex_error_is_retryable("unexpected status 400 Bad Request: invalid model"));
  EXPECT_FALSE(codex_error_is_retryable("You've hit your usage limit. Try again later"));
  EXPECT_TRUE(codex_error_is_retryable("stream disconnected before completion: timeout"));
  EXPECT_FALSE(codex_error_is_retryable("model not supported"));
}

}  // namespace
}  // namespace agenthost::mapper::test
