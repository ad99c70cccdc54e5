// The real Claude Code CLI (`@anthropic-ai/claude-code`, installed by scripts/install-agents.sh into
// .npm-agents/claude-code/) against the scripted mock model server (tests/mockmodel/, Anthropic Messages wire), run
// through the Claude provider (agenthost::providers::async_run_claude). Every scenario checks the normalized stream —
// the exact scripted text once, the thinking, the Bash tool call and its output, the terminal (HTTP errors classified,
// cancellation through the completion token's cancellation slot) and that no process survives — and, from the same
// run's raw stdout lines (run_options::on_agent_line), the CLI's own behaviour that the mapping relies on: streamed
// deltas plus a full frame per block, the `result` line, api_retry lines, what SIGINT and SIGTERM do.
//
// A cancelled run's lines end where agenthost stopped reading (the process layer drops what the stopping agent still
// prints, by design): what Claude prints after an interrupt is observed by the probes that signal the CLI themselves
// (Sigint…/Sigterm… below), whose runs end by themselves.
//
// Skips (naming why) when claude is not installed or python3 is missing. AGENTHOST_REAL_CLAUDE overrides the
// executable. AGENTHOST_RECORD_FIXTURES=1 writes what claude printed into fixtures/claude-code/recorded/<name>.jsonl.
#include "real_claude.hpp"

using namespace agenthost;
using namespace agenthost::test;
using namespace agenthost::test::real;
using namespace agenthost::test::real::claude_suite;

namespace {

TEST_F(RealClaude, ToolCallWithThinkingAndANonAsciiAnswer) {
  const auto s = scripted("tool");
  {
    auto r = run("tool");
    expect_session(r, "tool", work);
    expect_completed(r, s, 2, 200, 12 + 16);
    const auto& call = s.tool_calls.at(0);
    const message* done = expect_one_tool_call(r, call.at("id"), call.at("arguments"), message_type::tool_completed);
    ASSERT_NE(done, nullptr);
    EXPECT_EQ(done->content.at("output"), "agenthost-tool-output");
    EXPECT_EQ(done->content.at("raw_output").at("stdout"), "agenthost-tool-output");
    EXPECT_TRUE(r.of(message_type::status).empty()) << r.dump();
    // Buffered thinking: both blocks after the last text, before the terminal.
    std::size_t last_text = 0, first_thought = r.messages.size();
    for (std::size_t i = 0; i < r.messages.size(); ++i) {
      if (r.messages[i].type == message_type::assistant) last_text = i;
      if (r.messages[i].type == message_type::assistant_thought && first_thought == r.messages.size()) first_thought = i;
    }
    EXPECT_GT(first_thought, last_text) << r.dump();

    // The raw stream: what the mapping relies on.
    const cli_result& raw = r.raw;
    expect_run_frame(raw, "tool", work);
    EXPECT_EQ(expect_well_formed_api_stream(raw), 2u);
    expect_script(raw, s);
    expect_success_result(raw, s, 2, 200, 12 + 16);
    const auto uses = frame_blocks(raw, "tool_use");
    ASSERT_EQ(uses.size(), 1u) << raw.dump();
    EXPECT_EQ(uses[0]->at("id"), call.at("id"));
    EXPECT_EQ(uses[0]->at("name"), "Bash");
    EXPECT_EQ(uses[0]->at("input"), call.at("arguments"));
    EXPECT_EQ(json::parse(joined(deltas(raw, "input_json_delta", "partial_json"))), call.at("arguments"));
    EXPECT_GT(deltas(raw, "input_json_delta", "partial_json").size(), 3u);
    // Its result: one user line with the tool_result (the output without its trailing newline) and the raw stdout.
    const auto users = raw.of_type("user");
    ASSERT_EQ(users.size(), 1u) << raw.dump();
    const auto& content = users[0]->at("message").at("content");
    ASSERT_EQ(content.size(), 1u);
    EXPECT_EQ(content[0].at("type"), "tool_result");
    EXPECT_EQ(content[0].at("tool_use_id"), call.at("id"));
    EXPECT_EQ(content[0].at("content"), "agenthost-tool-output");
    EXPECT_EQ(content[0].value("is_error", true), false);
    EXPECT_EQ(users[0]->at("tool_use_result").at("stdout"), "agenthost-tool-output");
    EXPECT_EQ(users[0]->at("tool_use_result").at("interrupted"), false);
    // Order of the full frames and the tool result: thinking, text, tool_use, result, thinking, text, result.
    std::vector<std::string> order;
    for (const auto& e : raw.events) {
      const std::string t = e.value("type", "");
      if (t == "assistant")
        order.push_back("assistant:" + e.at("message").at("content").at(0).value("type", ""));
      else if (t == "user" || t == "result")
        order.push_back(t);
    }
    EXPECT_EQ(order, (std::vector<std::string>{"assistant:thinking", "assistant:text", "assistant:tool_use", "user",
                                               "assistant:thinking", "assistant:text", "result"}))
        << raw.dump();
    // No request besides the two model calls of the scenario (no title, quota or token-count calls).
    EXPECT_EQ(mock->requests_of("tool"), (std::vector<std::string>{"complete@turn0", "complete@turn1"}));
    std::size_t requests = 0;
    for (const auto& rec : mock->records())
      if (rec.contains("method")) ++requests;
    EXPECT_EQ(requests, 2u);
  }
}

TEST_F(RealClaude, AnswerWithoutToolsStreamingThinking) {
  const auto s = scripted("answer");
  auto o = options("answer");
  o.thinking_output = mapper::thinking_mode::stream;
  // A prompt made of flags: after `--` Claude takes it as the prompt (else it would print its help, or its version).
  const std::string flags_prompt = "--help -v -p Do what the scenario says.";
  auto r = run("answer", {}, {}, {}, o, flags_prompt);
  expect_session(r, "answer", work);
  expect_completed(r, s, 1, 100, 15);
  EXPECT_TRUE(r.of(message_type::tool_call).empty());
  // Streamed thinking: released at its frame, before the text.
  std::size_t first_text = r.messages.size(), thought = r.messages.size();
  for (std::size_t i = r.messages.size(); i-- > 0;) {
    if (r.messages[i].type == message_type::assistant) first_text = i;
    if (r.messages[i].type == message_type::assistant_thought) thought = i;
  }
  EXPECT_LT(thought, first_text) << r.dump();

  expect_run_frame(r.raw, "answer", work);
  EXPECT_EQ(expect_well_formed_api_stream(r.raw), 1u);
  expect_script(r.raw, s);
  expect_success_result(r.raw, s, 1, 100, 15);
  EXPECT_TRUE(frame_blocks(r.raw, "tool_use").empty());
  EXPECT_TRUE(r.raw.of_type("user").empty());
  EXPECT_EQ(mock->requests_of("answer"), (std::vector<std::string>{"complete@turn0"}));
  json digests;
  for (const auto& rec : mock->records())
    if (rec.is_object() && rec.value("scenario", "") == "answer") digests = rec.value("user_digests", json::array());
  ASSERT_FALSE(digests.empty());
  EXPECT_EQ(digests.back().at("tail"), flags_prompt.substr(flags_prompt.size() - 32)) << digests.dump();
}

// An HTTP error: Claude retries once (CLAUDE_CODE_MAX_RETRIES=1, a system/api_retry line), then prints a synthetic
// assistant message with the error text and a result that is subtype "success" with is_error true, and exits 1.
// Normalized: one retry status, no assistant text, terminal.failed agent_error with http_status and retryable.
void expect_http_failure(const claude_run& run, int status, const std::string& retry_error,
                         const std::string& api_error_type, const std::string& text) {
  ASSERT_EQ(run.terminal.type, message_type::terminal_failed) << run.dump();
  const json& t = run.terminal.content;
  EXPECT_EQ(t.at("reason"), "agent_error");
  EXPECT_EQ(t.at("http_status"), status);
  EXPECT_EQ(t.at("retryable"), true);
  EXPECT_EQ(t.at("text"), text);
  EXPECT_EQ(t.at("exit_status"), "exited with code 1");
  EXPECT_EQ(run.text(), "") << "the error text is not the model's answer";
  const auto statuses = run.of(message_type::status);
  ASSERT_EQ(statuses.size(), 1u) << run.dump();
  EXPECT_EQ(statuses[0]->content.at("kind"), "retry");
  EXPECT_EQ(statuses[0]->content.at("attempt"), 1);
  EXPECT_EQ(statuses[0]->content.at("max_attempts"), 1);
  EXPECT_EQ(statuses[0]->content.at("error_status"), status);

  const cli_result& r = run.raw;
  EXPECT_EQ(r.exit_code(), 1) << r.dump();
  std::vector<const json*> api_retries;
  for (const auto* e : r.of_type("system"))
    if (e->value("subtype", "") == "api_retry") api_retries.push_back(e);
  ASSERT_EQ(api_retries.size(), 1u) << r.dump();
  EXPECT_EQ(api_retries[0]->at("attempt"), 1);
  EXPECT_EQ(api_retries[0]->at("max_retries"), 1);
  EXPECT_EQ(api_retries[0]->at("error_status"), status);
  EXPECT_EQ(api_retries[0]->at("error"), retry_error);
  EXPECT_TRUE(deltas(r, "text_delta", "text").empty());
  const auto frames = r.of_type("assistant");
  ASSERT_EQ(frames.size(), 1u) << r.dump();
  EXPECT_EQ(frames[0]->at("message").at("model"), "<synthetic>");
  EXPECT_EQ(frames[0]->value("is_api_error_message", false), true);
  EXPECT_EQ(frame_texts(r, "text", "text"), std::vector<std::string>{text});
  const json& res = result_event(r);
  ASSERT_TRUE(res.is_object()) << r.dump();
  EXPECT_EQ(&res, &r.events.back());
  EXPECT_EQ(res.value("subtype", ""), "success");
  EXPECT_EQ(res.value("is_error", false), true);
  EXPECT_EQ(res.value("api_error_status", 0), status);
  EXPECT_EQ(res.value("api_error_type", ""), api_error_type);
  EXPECT_EQ(res.value("terminal_reason", ""), "api_error");
  EXPECT_EQ(res.value("result", ""), text);
}

TEST_F(RealClaude, Http500IsARetryableAgentErrorAfterOneRetry) {
  auto r = run("http500");
  expect_session(r, "http500", work);
  expect_run_frame(r.raw, "http500", work);
  expect_http_failure(r, 500, "server_error", "api_error",
                      "API Error: 500 mock internal server error. This is a server-side issue, usually temporary — "
                      "try again in a moment. If it persists, check your inference gateway (" +
                          mock->origin().substr(7) + ").");
  EXPECT_EQ(mock->requests_of("http500"), (std::vector<std::string>{"http_error@turn0", "http_error@turn0"}));
}

TEST_F(RealClaude, Http429IsARetryableAgentErrorAfterOneRetry) {
  auto r = run("http429");
  expect_session(r, "http429", work);
  expect_run_frame(r.raw, "http429", work);
  expect_http_failure(r, 429, "rate_limit", "rate_limit_error",
                      "API Error: Request rejected (429) · mock rate limit exceeded");
  EXPECT_EQ(mock->requests_of("http429"), (std::vector<std::string>{"http_error@turn0", "http_error@turn0"}));
}

// HTTP 503 (Anthropic's overloaded_error), then the answer on Claude's own retry: one retry status, the answer once.
TEST_F(RealClaude, OverloadedThenSuccessOnClaudesRetry) {
  const auto s = scripted("flaky");
  auto r = run("flaky");
  expect_session(r, "flaky", work);
  expect_completed(r, s, 1, 100, 5);
  const auto statuses = r.of(message_type::status);
  ASSERT_EQ(statuses.size(), 1u) << r.dump();
  EXPECT_EQ(statuses[0]->content.at("kind"), "retry");
  EXPECT_EQ(statuses[0]->content.at("error_status"), 503);
  EXPECT_EQ(statuses[0]->content.at("error"), "503 overloaded");

  expect_run_frame(r.raw, "flaky", work);
  std::vector<const json*> api_retries;
  for (const auto* e : r.raw.of_type("system"))
    if (e->value("subtype", "") == "api_retry") api_retries.push_back(e);
  ASSERT_EQ(api_retries.size(), 1u) << r.raw.dump();
  EXPECT_EQ(api_retries[0]->at("error_status"), 503);
  EXPECT_EQ(api_retries[0]->at("error"), "overloaded");
  EXPECT_EQ(expect_well_formed_api_stream(r.raw), 1u);
  expect_script(r.raw, s);
  expect_success_result(r.raw, s, 1, 100, 5);
  EXPECT_EQ(mock->requests_of("flaky"), (std::vector<std::string>{"http_error@turn0", "complete@turn0"}));
}

// The stream is cut mid-thinking; Claude closes the cut message (message_stop with abandoned_blocks), retries and
// streams the retry's blocks: the text comes exactly once, and only the retry's thinking is released.
TEST_F(RealClaude, StreamCutAndRetriedByClaudeIsNotDuplicated) {
  const auto s = scripted("cut-retry");
  auto r = run("cut-retry");
  expect_session(r, "cut-retry", work);
  EXPECT_EQ(r.text(), "Hello world.") << r.dump();
  EXPECT_EQ(r.text(), s.text());
  EXPECT_EQ(r.thoughts(), std::vector<std::string>{s.thoughts.back()}) << r.dump();
  ASSERT_EQ(r.terminal.type, message_type::terminal_completed) << r.dump();
  EXPECT_EQ(r.terminal.content.at("text"), s.last_text);
  EXPECT_FALSE(r.terminal.content.contains("text_diverged"));
  const auto statuses = r.of(message_type::status);
  ASSERT_EQ(statuses.size(), 1u) << r.dump();
  EXPECT_EQ(statuses[0]->content.at("error"), "unknown");

  const cli_result& raw = r.raw;
  expect_run_frame(raw, "cut-retry", work);
  std::vector<const json*> api_retries;
  for (const auto* e : raw.of_type("system"))
    if (e->value("subtype", "") == "api_retry") api_retries.push_back(e);
  ASSERT_EQ(api_retries.size(), 1u) << raw.dump();
  EXPECT_TRUE(api_retries[0]->at("error_status").is_null());
  EXPECT_EQ(api_retries[0]->at("error"), "unknown");
  // What Claude relays of the cut attempt varies from run to run: nothing, or its message_start (and sometimes its
  // first thinking delta) closed by a synthetic message_stop with abandoned_blocks.
  const std::size_t messages = expect_well_formed_api_stream(raw);
  EXPECT_TRUE(messages == 1 || messages == 2) << raw.dump();
  std::size_t abandoned = 0;
  for (const auto* e : raw.of_type("stream_event")) abandoned += e->contains("abandoned_blocks") ? 1 : 0;
  EXPECT_EQ(abandoned, messages - 1) << raw.dump();
  EXPECT_EQ(deltas(raw, "text_delta", "text"), s.text_chunks) << raw.dump();
  EXPECT_EQ(frame_texts(raw, "text", "text"), s.texts);
  const auto thoughts = streamed_blocks(raw, "thinking_delta", "thinking");
  ASSERT_FALSE(thoughts.empty());
  EXPECT_EQ(thoughts.back(), s.thoughts.back());
  if (thoughts.size() > 1) {  // the cut attempt's thinking, as far as it came
    EXPECT_EQ(thoughts.size(), 2u) << raw.dump();
    EXPECT_EQ(std::string("Thinking once.").rfind(thoughts.front(), 0), 0u) << raw.dump();
  }
  const json& res = result_event(raw);
  ASSERT_TRUE(res.is_object()) << raw.dump();
  EXPECT_EQ(res.value("subtype", ""), "success");
  EXPECT_EQ(res.value("result", ""), s.last_text);
  EXPECT_EQ(raw.exit_code(), 0);
  std::cout << "[ real claude ] cut stream: " << messages << " API message(s) relayed, result usage "
            << res.at("usage").value("input_tokens", 0) << " in / " << res.at("usage").value("output_tokens", 0)
            << " out\n";
  EXPECT_EQ(r.terminal.content.at("usage").at("input_tokens"), res.at("usage").value("input_tokens", 0));
  EXPECT_EQ(mock->requests_of("cut-retry"), (std::vector<std::string>{"cut@turn0", "complete@turn0"}));
}

// A prompt above 64 KiB goes through Claude's stdin (no prompt argument): it reaches the model whole.
TEST_F(RealClaude, ALongPromptReachesTheModelThroughStdin) {
  const auto s = scripted("answer");
  std::string text = "-- a prompt that starts like a flag\n";
  for (int i = 0; text.size() <= providers::claude_prompt_argv_max + 1000; ++i)
    text += "line " + std::to_string(i) + ": caf\xC3\xA9 $(id) `x` --help\n";
  text += "the last 32 characters are ASCII: END-OF-PROMPT";  // the mock's tail is 32 characters
  auto cmd = providers::build_claude_command(options("answer"), text);
  ASSERT_TRUE(cmd);
  ASSERT_TRUE(cmd->stdin_text.has_value());
  auto r = run("answer", {}, "", {}, std::nullopt, text);
  expect_completed(r, s, 1, 100, 15);
  json digests;
  for (const auto& rec : mock->records())
    if (rec.is_object() && rec.value("scenario", "") == "answer") digests = rec.value("user_digests", json::array());
  ASSERT_FALSE(digests.empty()) << "no request of the scenario";
  // Claude may put context before the prompt in the same user message; the prompt is its end, whole.
  const json& d = digests.back();
  EXPECT_EQ(d.at("tail"), text.substr(text.size() - 32)) << d.dump();
  EXPECT_GE(d.at("bytes").get<std::size_t>(), text.size()) << d.dump();
  std::cout << "[ real claude ] " << text.size() << "-byte prompt through stdin: the user message has " << d.at("bytes")
            << " bytes\n";
}

}  // namespace
