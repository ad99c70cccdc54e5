// opencode_mapper over every recorded `opencode run --format json` transcript (fixtures/opencode/recorded/) and over
// hostile input.
#include "mapper_test_util.hpp"

#include <agenthost/mapper/opencode_mapper.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>

namespace agenthost::mapper::test {
namespace {

std::string oc_fixture(const std::string& name) {
  return std::string(AGENTHOST_FIXTURES_DIR) + "/opencode/recorded/opencode-1.18.33-" + name + ".jsonl";
}

std::vector<message> run_oc(const std::vector<std::string>& lines, opencode_mapper_options options = {},
                            run_end end = exited(0)) {
  return map_lines<opencode_mapper>(lines, std::move(options), end);
}

TEST(OpencodeMapper, ToolFixture) {
  const auto lines = read_lines(oc_fixture("tool"));
  const auto s = scripted("tool");
  const auto out = run_oc(lines);
  expect_valid_run(out);
  ASSERT_EQ(out.front().type, message_type::session_started);
  EXPECT_EQ(out.front().content.at("session_id"), "ses_dd557ebfbffeCWlElkDUaI20E0");
  EXPECT_EQ(out.front().content.at("agent"), "opencode");
  EXPECT_FALSE(out.front().content.contains("synthesized"));
  EXPECT_EQ(texts(out, message_type::assistant), s.texts);
  EXPECT_EQ(assistant_text(out), s.text());
  EXPECT_EQ(texts(out, message_type::assistant_thought), s.thoughts);
  const auto calls = of_type(out, message_type::tool_call);
  ASSERT_EQ(calls.size(), 1u) << to_jsonl(out);
  EXPECT_EQ(calls[0].content.at("name"), "bash");
  EXPECT_EQ(calls[0].content.at("tool_call_id"), "call_mock_echo_1");
  EXPECT_EQ(calls[0].content.at("input"), (json{{"command", "echo agenthost-tool-output"}}));
  const auto done = of_type(out, message_type::tool_completed);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].content.at("output"), "agenthost-tool-output\n");
  EXPECT_EQ(done[0].content.at("raw_output").at("metadata").at("exit"), 0);
  EXPECT_TRUE(of_type(out, message_type::tool_failed).empty());
  // Buffered: the thoughts of both steps come when the final step ends, i.e. after the tool's result.
  EXPECT_GT(index_of_first(out, message_type::assistant_thought), index_of_last(out, message_type::tool_completed));
  const auto& t = terminal(out);
  ASSERT_EQ(t.type, message_type::terminal_completed) << to_jsonl(out);
  EXPECT_EQ(t.content.at("text"), s.texts.back());
  EXPECT_EQ(t.content.at("stop_reason"), "stop");
  EXPECT_EQ(t.content.at("session_id"), "ses_dd557ebfbffeCWlElkDUaI20E0");
  EXPECT_EQ(t.content.at("usage").at("input_tokens"), 200);
  EXPECT_EQ(t.content.at("usage").at("output_tokens"), 28);
  expect_same_in_both_modes(run_oc, lines, exit0);
}

TEST(OpencodeMapper, AnswerFixtures) {
  const auto s = scripted("answer");
  {
    const auto out = run_oc(read_lines(oc_fixture("answer")));  // without --thinking: no reasoning printed
    expect_valid_run(out);
    EXPECT_EQ(assistant_text(out), s.text());
    EXPECT_TRUE(of_type(out, message_type::assistant_thought).empty());
    ASSERT_EQ(terminal(out).type, message_type::terminal_completed);
    EXPECT_EQ(terminal(out).content.at("text"), s.text());
  }
  const auto lines = read_lines(oc_fixture("answer-thinking"));
  const auto out = run_oc(lines);
  expect_valid_run(out);
  EXPECT_EQ(texts(out, message_type::assistant), s.texts);
  EXPECT_EQ(texts(out, message_type::assistant_thought), s.thoughts);
  ASSERT_EQ(terminal(out).type, message_type::terminal_completed);
  EXPECT_EQ(terminal(out).content.at("text"), s.text());
  EXPECT_TRUE(terminal(out).content.contains("usage"));
  expect_same_in_both_modes(run_oc, lines, exit0);
}

TEST(OpencodeMapper, FlakyAndCutRetry) {
  {
    const auto out = run_oc(read_lines(oc_fixture("flaky")));
    expect_valid_run(out);
    EXPECT_EQ(assistant_text(out), scripted("flaky").text());
    EXPECT_EQ(terminal(out).type, message_type::terminal_completed);
  }
  // The cut attempt's thinking was printed before the cut; its partial text was not: the text comes once, whole.
  const auto lines = read_lines(oc_fixture("cut-retry"));
  const auto out = run_oc(lines);
  expect_valid_run(out);
  EXPECT_EQ(assistant_text(out), "Hello world.");
  EXPECT_EQ(texts(out, message_type::assistant_thought).size(), 2u);
  ASSERT_EQ(terminal(out).type, message_type::terminal_completed);
  EXPECT_EQ(terminal(out).content.at("text"), "Hello world.");
  expect_same_in_both_modes(run_oc, lines, exit0);
}

TEST(OpencodeMapper, HttpErrorsAreAgentErrorsWithStatusAndRetryable) {
  struct expected {
    const char* name;
    int status;
    bool retryable;
  };
  for (const auto& e : {expected{"http400", 400, false}, expected{"http429", 429, true},
                        expected{"http500", 500, true}}) {
    SCOPED_TRACE(e.name);
    const auto lines = read_lines(oc_fixture(e.name));
    const auto out = run_oc(lines, {}, exit1);
    expect_valid_run(out);
    EXPECT_EQ(out.front().type, message_type::session_started);
    const auto& t = terminal(out);
    ASSERT_EQ(t.type, message_type::terminal_failed) << to_jsonl(out);
    EXPECT_EQ(t.content.at("reason"), "agent_error");
    EXPECT_EQ(t.content.at("http_status"), e.status);
    EXPECT_EQ(t.content.at("retryable"), e.retryable);
    EXPECT_EQ(t.content.at("error_name"), "APIError");
    EXPECT_EQ(t.content.at("exit_code"), 1);
    EXPECT_TRUE(t.content.contains("response_body"));
    expect_same_in_both_modes(run_oc, lines, exit1);
    // The error event ends the run.
    opencode_mapper m;
    std::vector<message> o;
    for (const auto& l : lines) m.on_line(l, o);
    EXPECT_TRUE(m.agent_finished());
  }
  const auto out = run_oc(read_lines(oc_fixture("unknown-model")), {}, exit1);
  expect_valid_run(out);
  ASSERT_EQ(terminal(out).type, message_type::terminal_failed);
  EXPECT_EQ(terminal(out).content.at("reason"), "agent_error");
  EXPECT_EQ(terminal(out).content.at("retryable"), false);
  EXPECT_FALSE(terminal(out).content.contains("http_status"));
  EXPECT_NE(terminal(out).content.at("text").get<std::string>().find("Unexpected server error"), std::string::npos);
}

TEST(OpencodeMapper, InterruptedFixtures) {
  // SIGINT exit 130 / SIGTERM exit 143 without a final step: failed/exited (the provider's own cancel is cancelled).
  for (const auto& [name, code] : {std::pair{"slow", 130}, std::pair{"long-tool", 130},
                                   std::pair{"long-tool-sigterm", 143}}) {
    SCOPED_TRACE(name);
    const auto lines = read_lines(oc_fixture(name));
    const auto out = run_oc(lines, {}, {.status = process::exited{code}});
    expect_valid_run(out);
    ASSERT_EQ(terminal(out).type, message_type::terminal_failed);
    EXPECT_EQ(terminal(out).content.at("reason"), "exited");
    const auto cancelled = run_oc(lines, {}, {.status = process::exited{code}, .cancelled = true});
    expect_valid_run(cancelled);
    EXPECT_EQ(terminal(cancelled).type, message_type::terminal_cancelled);
    const auto signaled = run_oc(lines, {}, {.status = process::signaled{SIGKILL}});
    EXPECT_EQ(terminal(signaled).content.at("reason"), "signaled");
  }
  // Exit 0 without a final step_finish: the output ended early.
  const auto out = run_oc(read_lines(oc_fixture("long-tool")), {}, exit0);
  ASSERT_EQ(terminal(out).type, message_type::terminal_failed);
  EXPECT_EQ(terminal(out).content.at("reason"), "no_terminal_event");
}

const std::string kStart =
    R"({"type":"step_start","sessionID":"ses_1","part":{"id":"p0","sessionID":"ses_1","type":"step-start"}})";
std::string text_line(const std::string& id, const std::string& text) {
  return json{{"type", "text"}, {"sessionID", "ses_1"}, {"part", {{"id", id}, {"type", "text"}, {"text", text}}}}
      .dump();
}
std::string finish_line(const std::string& id, const std::string& reason, int in, int out_tokens) {
  return json{{"type", "step_finish"},
              {"sessionID", "ses_1"},
              {"part",
               {{"id", id},
                {"reason", reason},
                {"type", "step-finish"},
                {"tokens", {{"input", in}, {"output", out_tokens}, {"reasoning", 0}, {"cache", {{"read", 3}, {"write", 0}}}}},
                {"cost", 0.5}}}}
      .dump();
}

TEST(OpencodeMapper, InvalidLinesAreReportedAndNeverStopTheStream) {
  const std::vector<std::string> lines = {
      kStart,
      "not json at all",
      R"({"type":"text","part":{"id":"a","text":"trunc)",             // truncated
      R"({"type":42})",                                                 // type not a string
      R"({"part":{"id":"x","text":"no type"}})",                        // no type
      R"([1,2,3])",                                                     // not an object
      R"({"type":"text","part":{"id":"b","text":7}})",                 // text not a string
      R"({"type":"text","part":"nope"})",                               // part not an object
      R"({"type":"step_finish","part":{"id":"f","tokens":{"input":"many"}}})",  // tokens of the wrong type
      R"({"type":"step_start","part":{}} trailing)",                    // trailing content
      "",                                                               // blank: ignored
      R"({"type":"some_future_event","part":42})",                      // unknown type: ignored, not invalid
      text_line("t1", "Fine."),
      finish_line("f1", "stop", 10, 2)};
  const auto out = run_oc(lines);
  expect_valid_run(out);
  EXPECT_EQ(assistant_text(out), "Fine.");
  const auto& t = terminal(out);
  ASSERT_EQ(t.type, message_type::terminal_completed) << to_jsonl(out);
  EXPECT_EQ(t.content.at("invalid_output_line_count"), 9);
  EXPECT_EQ(t.content.at("invalid_output_lines")[0], "not json at all");
  const auto bounded = run_oc(lines, {.max_invalid_lines = 2, .max_invalid_line_bytes = 8});
  EXPECT_EQ(terminal(bounded).content.at("invalid_output_line_count"), 9);
  ASSERT_EQ(terminal(bounded).content.at("invalid_output_lines").size(), 2u);
  EXPECT_LE(terminal(bounded).content.at("invalid_output_lines")[0].get<std::string>().size(), 8u + 3u);
}

// Lines in opencode's own field order take the mapper's byte-scan fast path; the same lines with their keys sorted
// (nlohmann's dump) take the On-Demand path. Both must give the same messages.
std::string fast_part(const std::string& type, const std::string& part_type, const std::string& id,
                      const std::string& rest) {
  return R"({"type":")" + type + R"(","timestamp":1796011996414,"sessionID":"ses_1","part":{"id":")" + id +
         R"(",)" + (type == "step_finish" ? R"("reason":"stop",)" : "") +
         R"("messageID":"msg_1","sessionID":"ses_1","type":")" + part_type + "\"" + rest + "}}";
}
std::string fast_text_line(const std::string& type, const std::string& id, const std::string& escaped_text) {
  return fast_part(type, type, id, R"(,"text":")" + escaped_text + R"(","time":{"start":1796011996349,"end":1796011996393})");
}
std::string fast_tool_line(const std::string& call, const std::string& input, const std::string& metadata,
                           const std::string& status = "completed") {
  return R"({"type":"tool_use","timestamp":1796011997164,"sessionID":"ses_1","part":{"type":"tool","tool":"bash",)"
         R"("callID":")" + call + R"(","state":{"status":")" + status + R"(","input":)" + input +
         R"(,"output":"out\n","metadata":)" + metadata +
         R"(,"title":"t","time":{"start":1,"end":2}},"id":"prt_)" + call + R"(","sessionID":"ses_1","messageID":"msg_1"}})";
}
const std::string kFastStart = fast_part("step_start", "step-start", "p0", "");
const std::string kFastFinish = fast_part(
    "step_finish", "step-finish", "p9",
    R"(,"tokens":{"total":112,"input":100,"output":12,"reasoning":3,"cache":{"write":1,"read":2}},"cost":0)");

TEST(OpencodeMapper, FastPathAndOnDemandPathAgree) {
  std::vector<std::vector<std::string>> runs;
  for (const std::string name : {"tool", "answer", "answer-thinking", "cut-retry", "flaky", "http429", "long-tool"})
    runs.push_back(read_lines(oc_fixture(name)));
  // Escapes, non-ASCII text (raw and escaped, a surrogate pair), negative and large counts.
  runs.push_back({kFastStart,
                  fast_text_line("reasoning", "p1", R"(Think \"twice\"\n\tthen caf\u00e9 \ud83c\udf0d.)"),
                  fast_text_line("text", "p2", "你好, café 🌍 \\\\ \\/ \\b\\f\\r"),
                  fast_text_line("text", "p3", ""),
                  fast_part("step_finish", "step-finish", "p9",
                            R"(,"tokens":{"total":-1,"input":9000000000000000,"output":-12,"reasoning":0,)"
                            R"("cache":{"write":0,"read":0}},"cost":7)")});
  // Tool parts: every kind of JSON value in `input` and `metadata`, a repeated key, a non-object input.
  runs.push_back({kFastStart,
                  fast_tool_line("c1", R"({"command":"echo \"hi\"\n","n":-42,"big":999999999999999999,"f":false,)"
                                       R"("t":true,"z":null,"a":[1,[],{},"x\u00e9",[[["deep"]]]],"o":{}})",
                                 R"({"output":"out\n","exit":0,"truncated":false,"k":1,"k":2})"),
                  fast_tool_line("c2", R"("just a string")", "null"),
                  fast_tool_line("c3", "[]", "{}", "running"),
                  fast_tool_line("c3", "{}", R"({"exit":1})", "error"),
                  fast_tool_line("", R"({"a":1})", "{}"),
                  kFastFinish});
  std::size_t fast_shaped = 0;
  for (const auto& lines : runs) {
    const auto reordered = sorted_keys(lines);
    for (std::size_t i = 0; i < lines.size(); ++i) {
      for (const char* head : {R"({"type":"step_)", R"({"type":"text")", R"({"type":"reasoning")", R"({"type":"tool_use")"})
        if (lines[i].rfind(head, 0) == 0) {
          ++fast_shaped;
          EXPECT_NE(reordered[i], lines[i]);
        }
    }
    for (const auto mode : {thinking_mode::buffered, thinking_mode::stream}) {
      const auto fast = run_oc(lines, {.thinking = mode}, exit0);
      EXPECT_EQ(to_jsonl(fast), to_jsonl(run_oc(reordered, {.thinking = mode}, exit0)));
      EXPECT_EQ(terminal(fast).content.value("invalid_output_line_count", 0), 0) << to_jsonl(fast);
    }
  }
  EXPECT_GE(fast_shaped, 40u);  // the fixtures and the generated runs hold 41 such lines
  const auto tools = run_oc(runs.back());
  const auto calls = of_type(tools, message_type::tool_call);
  ASSERT_EQ(calls.size(), 4u) << to_jsonl(tools);
  EXPECT_EQ(calls[0].content.at("input").at("a").at(3), "xé");
  EXPECT_EQ(calls[0].content.at("input").at("big"), 999999999999999999);
  EXPECT_EQ(calls[1].content.at("input"), json({{"value", "just a string"}}));
  EXPECT_EQ(of_type(tools, message_type::tool_completed)[0].content.at("raw_output").at("metadata").at("k"), 2);
  EXPECT_EQ(calls[3].content.at("tool_call_id"), "prt_");  // no call id: the part id names the call
  const auto out = run_oc(runs[runs.size() - 2]);
  EXPECT_EQ(texts(out, message_type::assistant_thought), std::vector<std::string>{"Think \"twice\"\n\tthen café 🌍."});
  EXPECT_EQ(assistant_text(out), "你好, café 🌍 \\ / \b\f\r");
  EXPECT_EQ(terminal(out).content.at("usage").at("input_tokens"), 9000000000000000);
}

TEST(OpencodeMapper, FastPathShapedButBrokenLinesAreInvalid) {
  const std::vector<std::string> bad = {
      fast_text_line("text", "t", R"(bad \x escape)"),
      fast_text_line("text", "t", "bad utf8 \xC3\x28"),
      fast_text_line("text", "t", "ok") + " trailing",
      fast_text_line("text", "t", "raw \x01 control"),
      R"({"type":"text","timestamp":1,"sessionID":"ses_1","part":{"id":"t","messageID":"m","sessionID":"ses_1","type":"text","text":"not closed}})",
      fast_part("step_finish", "step-finish", "f",
                R"(,"tokens":{"total":1,"input":1.5,"output":0,"reasoning":0,"cache":{"write":0,"read":0}},"cost":0)"),
      fast_part("step_finish", "step-finish", "f",
                R"(,"tokens":{"total":1,"input":90000000000000000,"output":0,"reasoning":0,"cache":{"write":0,"read":0}},"cost":0)"),
      fast_tool_line("c", R"({"command":"bad \x escape"})", "{}"),
      fast_tool_line("c", R"({"command":"raw )" "\x01" R"( control"})", "{}"),
      fast_tool_line("c", "{}", R"({"exit":tru})"),
      fast_tool_line("c", R"({"a":[1,2})", "{}"),
      fast_tool_line("c", std::string(300, '[') + std::string(300, ']'), "{}"),  // deeper than kMaxConvertDepth
      fast_tool_line("c", R"({"huge":123456789012345678901234})", "{}"),  // beyond 64 bits: On-Demand rejects it
  };
  for (const auto& b : bad) {
    const auto out = run_oc({kFastStart, b, fast_text_line("text", "t9", "fine"), kFastFinish});
    expect_valid_run(out);
    EXPECT_EQ(terminal(out).content.at("invalid_output_line_count"), 1) << b;
    EXPECT_EQ(assistant_text(out), "fine") << b;
  }
  // Accepted through On-Demand: a fractional cost, an escaped key, an empty event session id (the part's counts),
  // whitespace after the object.
  const std::vector<std::pair<std::string, std::string>> good = {
      {fast_part("step_finish", "step-finish", "f",
                 R"(,"tokens":{"total":1,"input":4,"output":0,"reasoning":0,"cache":{"write":0,"read":0}},"cost":0.25)"),
       ""},
      {R"({"type":"text","timestamp":1,"sessionID":"ses_1","part":{"id":"t","messageID":"m","sessionID":"ses_1","type":"text","t\u0065xt":"esc","time":{"start":1,"end":2}}})",
       "esc"},
      {R"({"type":"text","timestamp":1,"sessionID":"","part":{"id":"t","messageID":"m","sessionID":"ses_1","type":"text","text":"empty","time":{"start":1,"end":2}}}  )",
       "empty"},
      {fast_tool_line("c", R"({"x":1.5,"y":1e3,"z":-0.0})", R"({ "spaced" : [ 1 , 2 ] })"), ""},
  };
  for (const auto& [g, text] : good) {
    const auto out = run_oc({kFastStart, g, kFastFinish});
    expect_valid_run(out);
    EXPECT_EQ(terminal(out).content.value("invalid_output_line_count", 0), 0) << g << "\n" << to_jsonl(out);
    EXPECT_EQ(assistant_text(out), text) << g;
  }
}

TEST(OpencodeMapper, DuplicatedEventsAddNothing) {
  const std::vector<std::string> lines = {kStart, text_line("t1", "Once."), text_line("t1", "Once."),
                                          finish_line("f1", "stop", 10, 2), finish_line("f1", "stop", 10, 2)};
  const auto out = run_oc(lines);
  expect_valid_run(out);
  EXPECT_EQ(assistant_text(out), "Once.");
  EXPECT_EQ(terminal(out).content.at("usage").at("input_tokens"), 10);
  EXPECT_EQ(terminal(out).content.at("usage").at("cache_read_tokens"), 3);
  // A repeated tool_use closes the call once.
  auto tool = read_lines(oc_fixture("tool"));
  tool.insert(tool.begin() + 4, tool[3]);
  const auto t = run_oc(tool);
  expect_valid_run(t);
  EXPECT_EQ(of_type(t, message_type::tool_call).size(), 1u);
  EXPECT_EQ(of_type(t, message_type::tool_completed).size(), 1u);
}

TEST(OpencodeMapper, RepeatedPartsOfAStepWithManyPartsAddNothing) {
  // More parts in one step than the mapper tracks in its short list: repeats before and past that point.
  std::vector<std::string> lines = {kStart};
  std::string expected;
  for (int i = 0; i < 40; ++i) {
    lines.push_back(text_line("t" + std::to_string(i), std::to_string(i) + "."));
    expected += std::to_string(i) + ".";
  }
  for (const int again : {3, 31, 32, 39}) lines.push_back(text_line("t" + std::to_string(again), "again"));
  lines.push_back(finish_line("f1", "stop", 10, 2));
  const auto out = run_oc(lines);
  expect_valid_run(out);
  EXPECT_EQ(assistant_text(out), expected);
}

TEST(OpencodeMapper, AgentFinishedAndToolCallsSteps) {
  opencode_mapper m;
  std::vector<message> out;
  m.on_line(kStart, out);
  EXPECT_FALSE(m.agent_finished());
  m.on_line(finish_line("f1", "tool-calls", 1, 1), out);
  EXPECT_FALSE(m.agent_finished()) << "another step follows tool calls";
  // opencode calls the model again after a finish reason the AI SDK could not map, or none (session/prompt.ts).
  m.on_line(R"({"type":"step_start","sessionID":"ses_1","part":{"id":"pu","type":"step-start"}})", out);
  m.on_line(finish_line("fu", "unknown", 1, 1), out);
  EXPECT_FALSE(m.agent_finished()) << "another step follows an unknown finish reason";
  m.on_line(R"({"type":"step_start","sessionID":"ses_1","part":{"id":"pn","type":"step-start"}})", out);
  m.on_line(R"({"type":"step_finish","sessionID":"ses_1","part":{"id":"fn","type":"step-finish"}})", out);
  EXPECT_FALSE(m.agent_finished()) << "another step follows a step_finish without a reason";
  m.on_line(R"({"type":"step_start","sessionID":"ses_1","part":{"id":"p1","type":"step-start"}})", out);
  m.on_line(text_line("t1", "Done."), out);
  m.on_line(finish_line("f2", "stop", 1, 1), out);
  EXPECT_TRUE(m.agent_finished());
  EXPECT_EQ(m.session_id(), "ses_1");
  m.finish(exit0, out);
  const std::size_t n = out.size();
  m.finish(exit1, out);  // idempotent
  EXPECT_EQ(out.size(), n);
  expect_valid_run(out);
  EXPECT_EQ(terminal(out).content.at("usage").at("input_tokens"), 3);
  EXPECT_EQ(terminal(out).content.at("text"), "Done.");
}

// opencode calls the model again after a step in which it ran a tool, whatever the step's finish reason
// (session/prompt.ts): some OpenAI-compatible servers answer `finish_reason: "stop"` with tool calls. Tools the provider
// ran (part.metadata.providerExecuted) and tools the user interrupted (state.metadata.interrupted) do not count.
TEST(OpencodeMapper, AStepThatRanAToolGoesOnWhateverItsReason) {
  const auto step_start = [](const std::string& id, const std::string& msg) {
    return json{{"type", "step_start"},
                {"sessionID", "ses_1"},
                {"part", {{"id", id}, {"messageID", msg}, {"type", "step-start"}}}}
        .dump();
  };
  const auto tool = [](const std::string& id, const std::string& msg, const std::string& status, json state_metadata,
                       json part_metadata) {
    json part = {{"id", id},       {"messageID", msg},
                 {"type", "tool"}, {"tool", "bash"},
                 {"callID", "c_" + id},
                 {"state", {{"status", status}, {"input", {{"command", "true"}}}, {"output", "ok"}}}};
    if (status == "error") part["state"]["error"] = "stopped";
    if (!state_metadata.is_null()) part["state"]["metadata"] = std::move(state_metadata);
    if (!part_metadata.is_null()) part["metadata"] = std::move(part_metadata);
    return json{{"type", "tool_use"}, {"sessionID", "ses_1"}, {"part", std::move(part)}}.dump();
  };
  const auto finish = [](const std::string& id, const std::string& msg, const std::string& reason) {
    return json{{"type", "step_finish"},
                {"sessionID", "ses_1"},
                {"part", {{"id", id}, {"messageID", msg}, {"reason", reason}, {"type", "step-finish"}}}}
        .dump();
  };
  const auto finished_after = [](const std::vector<std::string>& lines) {
    opencode_mapper m;
    std::vector<message> out;
    for (const auto& l : lines) m.on_line(l, out);
    EXPECT_EQ(m.stats().invalid_lines, 0u);
    return m.agent_finished();
  };
  const std::string ran = tool("t1", "m1", "completed", nullptr, nullptr);
  EXPECT_FALSE(finished_after({step_start("s1", "m1"), ran, finish("f1", "m1", "stop")}));
  EXPECT_FALSE(finished_after({step_start("s1", "m1"), ran, finish("f1", "m1", "length")}));
  // A failed tool ran too; the provider's own metadata beside it changes nothing.
  EXPECT_FALSE(finished_after({step_start("s1", "m1"), tool("t1", "m1", "error", json::object(), {{"openai", 1}}),
                               finish("f1", "m1", "stop")}));
  // A retried attempt continues the message its cut attempt ran the tool in.
  EXPECT_FALSE(finished_after({step_start("s1", "m1"), ran, step_start("s2", "m1"), finish("f1", "m1", "stop")}));
  // The next step (another message) ends the run.
  EXPECT_TRUE(finished_after({step_start("s1", "m1"), ran, finish("f1", "m1", "stop"), step_start("s2", "m2"),
                              finish("f2", "m2", "stop")}));
  // Not opencode's tools: run by the provider, or interrupted by the user.
  EXPECT_TRUE(finished_after({step_start("s1", "m1"),
                              tool("t1", "m1", "completed", nullptr, {{"providerExecuted", true}, {"x", 1}}),
                              finish("f1", "m1", "stop")}));
  EXPECT_TRUE(finished_after({step_start("s1", "m1"), tool("t1", "m1", "error", {{"interrupted", true}}, nullptr),
                              finish("f1", "m1", "stop")}));
  // A flag that is not `true`, or a metadata that is not an object, is no flag (and the line stays valid).
  EXPECT_FALSE(finished_after({step_start("s1", "m1"),
                               tool("t1", "m1", "completed", nullptr, {{"providerExecuted", "yes"}}),
                               finish("f1", "m1", "stop")}));
  EXPECT_FALSE(finished_after({step_start("s1", "m1"), tool("t1", "m1", "completed", nullptr, "meta"),
                               finish("f1", "m1", "stop")}));
  EXPECT_FALSE(finished_after({step_start("s1", "m1"), tool("t1", "m1", "error", {{"interrupted", 1}}, nullptr),
                               finish("f1", "m1", "stop")}));

  // The recorded tool run with its first step's reason changed to `stop`: the same messages, the same terminal.
  auto lines = read_lines(oc_fixture("tool"));
  const auto first_finish = std::find_if(lines.begin(), lines.end(), [](const std::string& l) {
    return l.find(R"("reason":"tool-calls")") != std::string::npos;
  });
  ASSERT_NE(first_finish, lines.end());
  const auto recorded = run_oc(lines);
  first_finish->replace(first_finish->find("tool-calls"), 10, "stop");
  opencode_mapper m;
  std::vector<message> out;
  for (auto it = lines.begin(); it != lines.end(); ++it) {
    m.on_line(*it, out);
    if (it == first_finish) {
      EXPECT_FALSE(m.agent_finished()) << "finished after the step that ran the tool";
    }
  }
  EXPECT_TRUE(m.agent_finished());
  m.finish(exit0, out);
  EXPECT_EQ(to_jsonl(out), to_jsonl(recorded));
}

TEST(OpencodeMapper, FailedToolAndOpenCallClosedByFinish) {
  const std::string failed =
      R"({"type":"tool_use","sessionID":"ses_1","part":{"id":"pt","type":"tool","tool":"bash","callID":"c1",)"
      R"("state":{"status":"error","input":{"command":"false"},"error":"boom"}}})";
  const std::string running =
      R"({"type":"tool_use","sessionID":"ses_1","part":{"id":"pr","type":"tool","tool":"read","callID":"c2",)"
      R"("state":{"status":"running","input":{"path":"x"}}}})";
  const auto out = run_oc({kStart, failed, running}, {}, exit0);
  expect_valid_run(out);
  const auto f = of_type(out, message_type::tool_failed);
  ASSERT_EQ(f.size(), 2u) << to_jsonl(out);
  EXPECT_EQ(f[0].content.at("tool_call_id"), "c1");
  EXPECT_EQ(terminal(out).content.at("reason"), "no_terminal_event");
}

// Some OpenAI-compatible servers number their tool calls per response: `call_0` in every step. The call of a later
// step is another call (named by its part id), while the same part printed again (running, then completed, or a
// repeated line) stays the one call.
TEST(OpencodeMapper, ACallIdTheModelReusesInALaterStepIsAnotherCall) {
  const auto tool = [](const std::string& part, const std::string& msg, const std::string& status,
                       const std::string& command) {
    return json{{"type", "tool_use"},
                {"sessionID", "ses_1"},
                {"part",
                 {{"id", part},
                  {"messageID", msg},
                  {"type", "tool"},
                  {"tool", "bash"},
                  {"callID", "call_0"},
                  {"state", {{"status", status}, {"input", {{"command", command}}}, {"output", command + " ran"}}}}}}
        .dump();
  };
  const auto out = run_oc({kStart, tool("p1", "m1", "completed", "ls"), tool("p2", "m2", "running", "pwd"),
                           tool("p2", "m2", "completed", "pwd"), tool("p2", "m2", "completed", "pwd"),
                           tool("p1", "m1", "completed", "ls")},
                          {}, exit0);
  expect_valid_run(out);
  const auto calls = of_type(out, message_type::tool_call);
  const auto done = of_type(out, message_type::tool_completed);
  ASSERT_EQ(calls.size(), 2u) << to_jsonl(out);
  ASSERT_EQ(done.size(), 2u) << to_jsonl(out);
  EXPECT_EQ(calls[0].content.at("tool_call_id"), "call_0");
  EXPECT_EQ(calls[1].content.at("tool_call_id"), "p2");
  EXPECT_EQ(done[1].content.at("tool_call_id"), "p2");
  EXPECT_EQ(done[1].content.at("output"), "pwd ran") << to_jsonl(out);
}

TEST(OpencodeMapper, OversizeLineAndResumedSession) {
  opencode_mapper m({.requested_session_id = "ses_1"});
  std::vector<message> out;
  m.on_line(kStart, out);
  m.on_oversize_line(R"({"type":"text")", 1u << 30, out);
  m.on_line(text_line("t1", "ok"), out);
  m.on_line(finish_line("f1", "stop", 1, 1), out);
  m.finish(exit0, out);
  expect_valid_run(out);
  EXPECT_EQ(out.front().type, message_type::session_resumed);
  EXPECT_EQ(terminal(out).content.at("invalid_output_line_count"), 1);
  EXPECT_EQ(terminal(out).type, message_type::terminal_completed);
}

TEST(OpencodeMapper, NothingPrinted) {
  const auto out = run_oc({}, {}, exit1);
  expect_valid_run(out);
  EXPECT_EQ(terminal(out).content.at("reason"), "exited");
  const auto zero = run_oc({}, {}, exit0);
  EXPECT_EQ(terminal(zero).content.at("reason"), "no_terminal_event");
}

}  // namespace
}  // namespace agenthost::mapper::test
