// The real Codex CLI (`@openai/codex`, installed by scripts/install-agents.sh into .npm-agents/codex/) against the
// scripted mock model server (tests/mockmodel/, OpenAI Responses wire), run through the Codex provider
// (providers::async_run_codex). Every scenario checks the normalized message stream against the script — exact text,
// nothing doubled, reasoning, the shell tool call and its output, the terminal, HTTP failures classified — and, from
// the same run (run_options::on_agent_line), the raw JSONL quirks that document codex itself. Cancellation (mid-stream,
// during a `sleep 30` tool) must end in terminal.cancelled with no process left behind.
//
// Skips (naming why) when codex is not installed or python3 is missing. AGENTHOST_REAL_CODEX overrides the executable.
// AGENTHOST_RECORD_FIXTURES=1 writes what codex printed into fixtures/codex/recorded/codex-<version>-<scenario>.jsonl.
#include "cli_interrupt.hpp"
#include "provider_run.hpp"
#include "real_cli_util.hpp"

#include <agenthost/providers/codex.hpp>

#include <gtest/gtest.h>

#include <cstdint>

using namespace agenthost;
using namespace agenthost::test;
using namespace agenthost::test::real;

namespace {

// CRC-32 (IEEE, as Python's zlib.crc32, which the mock reports for each user message).
std::uint32_t crc32(std::string_view bytes) {
  std::uint32_t c = 0xFFFFFFFFU;
  for (const char ch : bytes) {
    c ^= static_cast<unsigned char>(ch);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320U & (0U - (c & 1U)));
  }
  return c ^ 0xFFFFFFFFU;
}

using run_result = provider_run;

class RealCodex : public provider_cli_test {
 protected:
  RealCodex() : provider_cli_test(codex_cli) {}

  void SetUp() override {
    start(codex_cli.unavailable_reason(), {dir + "/home", codex_home});
    if (stopped_early()) return;
    std::ofstream(codex_home + "/config.toml") << config_toml();
  }

  // A custom provider (built-in ones ignore overrides): Responses over SSE, no websockets, no retries of its own
  // (request_max_retries / stream_max_retries = 0: one request per turn, so HTTP errors end the run at once).
  // Exec's defaults made explicit: never ask for approval; the sandbox is off (no bubblewrap/landlock needed in CI).
  std::string config_toml() const {
    return "model_provider = \"mock\"\n"
           "approval_policy = \"never\"\n"
           "sandbox_mode = \"danger-full-access\"\n"
           "[model_providers.mock]\n"
           "name = \"mock\"\n"
           "base_url = \"" + mock->origin() + "/v1\"\n"
           "wire_api = \"responses\"\n"
           "supports_websockets = false\n"
           "env_key = \"AGENTHOST_MOCK_API_KEY\"\n"
           "request_max_retries = 0\n"
           "stream_max_retries = 0\n";
  }

  // run_mark(): tool commands carry it too (codex passes its environment on). Not named *TOKEN*/*KEY*/*SECRET*:
  // shell_environment_policy's default excludes may drop such names.
  providers::codex_options options(const std::string& scenario) const {
    providers::codex_options o{
        .executable = codex_cli.executable(),
        .model = scenario,
        .working_directory = work,
        .env = environment({"OPENAI_API_KEY", "CODEX_API_KEY", "OPENAI_BASE_URL", "RUST_LOG"},
                           {{"HOME", dir + "/home"},
                            {"CODEX_HOME", codex_home},
                            {"AGENTHOST_MOCK_API_KEY", "mock-key"}}),
        .reaper_path = AGENTHOST_REAPER};
    o.run.deadline = std::chrono::seconds(60);
    o.run.first_event_timeout = std::chrono::seconds(30);
    return o;
  }

  // Runs codex through async_run_codex to its end (see run_provider).
  run_result run(const std::string& scenario, providers::codex_options o,
                 const std::function<bool(const run_result&)>& cancel_when = {}, const std::string& record_as = {},
                 const std::string& prompt = scenario_prompt) {
    return run_provider(scenario, std::move(o), prompt, cancel_when, record_as,
                        [](auto&&... a) { providers::async_run_codex(std::forward<decltype(a)>(a)...); });
  }
  run_result run(const std::string& scenario) { return run(scenario, options(scenario)); }

  // `scenario` with one config.toml value overridden.
  run_result run(const std::string& scenario, const std::string& config_key, const std::string& value) {
    auto o = options(scenario);
    o.config = {{config_key, value}};
    return run(scenario, o);
  }

  std::string codex_home = dir + "/codex-home";
};

// ---- raw quirks (what codex prints) ------------------------------------------------------------------------------

// The `text` of every completed item of `type`, in order.
std::vector<std::string> completed_texts(const run_result& r, const std::string& type) {
  std::vector<std::string> out;
  for (const auto* e : r.raw_of_type("item.completed"))
    if (e->at("item").value("type", "") == type) out.push_back(e->at("item").value("text", ""));
  return out;
}

// The frame every exec run has: thread.started first, a "model metadata not found" warning item (the mock's models
// are unknown to Codex), turn.started.
void expect_run_frame(const run_result& r) {
  ASSERT_GE(r.events.size(), 3u) << r.dump();
  EXPECT_EQ(r.lines.size(), r.events.size()) << "every stdout line is a JSON object\n" << r.dump();
  EXPECT_EQ(r.events[0].value("type", ""), "thread.started");
  EXPECT_FALSE(r.events[0].value("thread_id", "").empty());
  ASSERT_EQ(r.raw_of_type("turn.started").size(), 1u) << r.dump();
  for (const auto& e : r.events) {
    // exec --json streams no deltas: every message comes whole, only as item.completed.
    EXPECT_EQ(e.value("type", "").find("delta"), std::string::npos) << e.dump();
    if (e.value("type", "") == "item.started") {
      EXPECT_EQ(e.at("item").value("type", ""), "command_execution");
    }
  }
}

// ---- normalized stream -------------------------------------------------------------------------------------------

// Codex's thread id, from the first line (thread.started).
std::string thread_of(const run_result& r) { return r.events.at(0).value("thread_id", "?"); }

// The session message carries codex's thread id.
void expect_session(const run_result& r) {
  ASSERT_FALSE(r.messages.empty());
  ASSERT_FALSE(r.events.empty());
  EXPECT_EQ(r.messages.front().type, message_type::session_started) << r.dump();
  EXPECT_EQ(r.messages.front().content.value("session_id", ""), thread_of(r));
  EXPECT_EQ(r.messages.front().content.value("agent", ""), "codex");
}

// Codex exposes reasoning summaries and assistant messages as whole items: one assistant message per scripted text
// block, nothing doubled, nothing lost; the thoughts (buffered: after the text) one per thinking block.
void expect_script(const run_result& r, const script& s) {
  EXPECT_EQ(completed_texts(r, "agent_message"), s.texts) << r.dump();
  EXPECT_EQ(completed_texts(r, "reasoning"), s.thoughts) << r.dump();
  expect_whole_blocks(r, s);
}

void expect_completed(const run_result& r, const script& s) { expect_completed_as_scripted(r, s, thread_of); }

// A run that answered as scripted: its frame, the script, completed.
void expect_answered(const run_result& r, const script& s) {
  expect_run_frame(r);
  expect_script(r, s);
  expect_completed(r, s);
}

TEST_F(RealCodex, ToolCallWithReasoningAndANonAsciiAnswer) {
  const auto s = scripted("tool");
  auto r = run("tool");
  expect_run_frame(r);
  expect_session(r);
  expect_script(r, s);
  expect_completed(r, s);

  // Raw: one command execution, started then completed with the same id and the marker as output.
  const auto started = r.raw_of_type("item.started");
  ASSERT_EQ(started.size(), 1u) << r.dump();
  const auto& call = started[0]->at("item");
  EXPECT_EQ(call.at("status"), "in_progress");
  EXPECT_TRUE(call.at("exit_code").is_null());
  // The scripted `echo agenthost-tool-output`, run through bash -lc.
  EXPECT_EQ(call.at("command"), "/bin/bash -lc 'echo agenthost-tool-output'");
  std::vector<const json*> done;
  for (const auto* e : r.raw_of_type("item.completed"))
    if (e->at("item").value("type", "") == "command_execution") done.push_back(&e->at("item"));
  ASSERT_EQ(done.size(), 1u) << r.dump();
  EXPECT_EQ(done[0]->at("id"), call.at("id"));
  EXPECT_EQ(done[0]->at("aggregated_output"), "agenthost-tool-output\n");
  EXPECT_EQ(done[0]->at("exit_code"), 0);
  EXPECT_EQ(done[0]->at("status"), "completed");
  // Raw order: reasoning, message, the command (started, completed), reasoning, the answer, turn.completed last.
  std::vector<std::string> order;
  for (const auto& e : r.events) {
    const std::string t = e.value("type", "");
    if (t == "item.started" || t == "item.completed")
      order.push_back(t + ":" + e.at("item").value("type", ""));
    else if (t != "thread.started" && t != "turn.started")
      order.push_back(t);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"item.completed:error", "item.completed:reasoning",
                                             "item.completed:agent_message", "item.started:command_execution",
                                             "item.completed:command_execution", "item.completed:reasoning",
                                             "item.completed:agent_message", "turn.completed"}))
      << r.dump();

  // Normalized: exactly one tool call, its output, in order with the text; buffered thoughts at the end.
  const auto calls = r.of_type(message_type::tool_call);
  ASSERT_EQ(calls.size(), 1u) << r.dump();
  EXPECT_EQ(calls[0].content.at("name"), "shell");
  EXPECT_EQ(calls[0].content.at("tool_call_id"), call.at("id"));
  EXPECT_EQ(calls[0].content.at("input"), (json{{"command", "/bin/bash -lc 'echo agenthost-tool-output'"}}));
  const auto completed = r.of_type(message_type::tool_completed);
  ASSERT_EQ(completed.size(), 1u) << r.dump();
  EXPECT_EQ(completed[0].content.at("output"), "agenthost-tool-output\n");
  EXPECT_TRUE(r.of_type(message_type::tool_failed).empty()) << r.dump();
  std::vector<std::string> kinds;
  for (const auto& m : r.messages)
    if (m.type != message_type::status) kinds.emplace_back(transport::to_string(m.type));
  EXPECT_EQ(kinds, (std::vector<std::string>{"session.started", "assistant", "tool.call", "tool.completed", "assistant",
                                             "assistant.thought", "assistant.thought", "terminal.completed"}))
      << r.dump();
  // Usage over both model calls (100 input tokens per call, one output token per streamed delta).
  EXPECT_EQ(r.raw_of_type("turn.completed").at(0)->at("usage").at("input_tokens"), 200);
  const auto& usage = r.terminal.content.at("usage");
  EXPECT_EQ(usage.at("input_tokens"), 200);
  EXPECT_EQ(usage.at("output_tokens"), 12 + 16);
  EXPECT_EQ(mock->requests_of("tool"), (std::vector<std::string>{"complete@turn0", "complete@turn1"}));
}

// Also: a prompt that starts with '-' reaches the model as the prompt (the provider puts `--` before it), and the
// session can be resumed (`codex exec resume … -- ID PROMPT`).
TEST_F(RealCodex, AnswerWithoutToolsThenResume) {
  const auto s = scripted("answer");
  const std::string dash_prompt = "--help is not a flag here. " + scenario_prompt;
  auto r = run("answer", options("answer"), {}, {}, dash_prompt);
  expect_run_frame(r);
  expect_session(r);
  expect_script(r, s);
  expect_completed(r, s);
  EXPECT_TRUE(r.raw_of_type("item.started").empty());
  EXPECT_TRUE(r.of_type(message_type::tool_call).empty());
  EXPECT_EQ(r.terminal.content.at("usage").at("input_tokens"), 100);
  EXPECT_EQ(r.terminal.content.at("usage").at("output_tokens"), 15);
  EXPECT_EQ(mock->requests_of("answer"), (std::vector<std::string>{"complete@turn0"}));
  auto last_user_head = [&] { return mock->last_user_digest().value_or(json::object()).value("head", ""); };
  EXPECT_EQ(last_user_head(), dash_prompt.substr(0, 32));

  // Resume that thread with another prompt: the same thread id, reported as session.resumed.
  const std::string thread = r.events.at(0).value("thread_id", "");
  auto o = options("answer");
  o.session_id = thread;
  auto again = run("answer", o, {}, "answer-resumed", "-Once more. " + scenario_prompt);
  ASSERT_FALSE(again.messages.empty());
  EXPECT_EQ(again.messages.front().type, message_type::session_resumed) << again.dump();
  EXPECT_EQ(again.messages.front().content.value("resume", ""), "resumed") << again.dump();
  expect_script(again, s);
  expect_completed(again, s);
  EXPECT_EQ(last_user_head(), ("-Once more. " + scenario_prompt).substr(0, 32));
  EXPECT_EQ(again.events.at(0).value("thread_id", ""), thread);
  // Recorded (codex 0.171.0): after a resume, turn.completed's usage is the thread's running total (both turns:
  // 2 × 100 input, 2 × 15 output), not the turn's; the terminal reports what codex said.
  ASSERT_EQ(again.raw_of_type("turn.completed").size(), 1u) << again.dump();
  EXPECT_EQ(again.raw_of_type("turn.completed")[0]->at("usage").at("input_tokens"), 200);
  EXPECT_EQ(again.raw_of_type("turn.completed")[0]->at("usage").at("output_tokens"), 30);
  EXPECT_EQ(again.terminal.content.at("usage").at("input_tokens"), 200);
}

// An HTTP error (no retries configured): raw, an `error` event then `turn.failed` with the same message, exit 1;
// normalized, a warning status and terminal.failed agent_error.
void expect_http_failure(const run_result& r, const std::string& message) {
  expect_run_frame(r);
  expect_session(r);
  const auto errors = r.raw_of_type("error");
  ASSERT_EQ(errors.size(), 1u) << r.dump();
  EXPECT_EQ(errors[0]->at("message"), message);
  ASSERT_EQ(r.events.back().value("type", ""), "turn.failed") << r.dump();
  EXPECT_EQ(r.events.back().at("error").at("message"), message);
  EXPECT_TRUE(completed_texts(r, "agent_message").empty());
  EXPECT_TRUE(r.of_type(message_type::assistant).empty());
  EXPECT_FALSE(r.ec);
  ASSERT_EQ(r.terminal.type, message_type::terminal_failed) << r.dump();
  EXPECT_EQ(r.terminal.content.at("reason"), "agent_error");
  EXPECT_EQ(r.terminal.content.at("text"), message);
  EXPECT_EQ(r.terminal.content.at("exit_code"), 1);
  EXPECT_EQ(r.terminal.content.value("exit_status", ""), "exited with code 1");
  EXPECT_EQ(r.terminal.content.at("retryable"), true);
}

// Codex 0.171.0 does not show the body of a 5xx: it replaces it with a canned "high demand" message, which names no
// status — so no http_status, but retryable.
TEST_F(RealCodex, Http500IsAgentErrorRetryable) {
  auto r = run("http500");
  expect_http_failure(r, "We\u2019re currently experiencing high demand, which may cause temporary errors.");
  EXPECT_FALSE(r.terminal.content.contains("http_status")) << r.dump();
  EXPECT_EQ(mock->requests_of("http500"), (std::vector<std::string>{"http_error@turn0"}));
}

// A 429 names the status, not the body.
TEST_F(RealCodex, Http429IsAgentErrorWithStatus) {
  auto r = run("http429");
  expect_http_failure(r, "exceeded retry limit, last status: 429 Too Many Requests");
  EXPECT_EQ(r.terminal.content.at("http_status"), 429);
  EXPECT_EQ(mock->requests_of("http429"), (std::vector<std::string>{"http_error@turn0"}));
}

// Cancelled while the model streams (40 s of "tick"): the provider's stop (SIGINT to the group) ends codex at once.
TEST_F(RealCodex, CancellationMidStream) {
  auto r = run("slow", options("slow"), [&](const run_result&) { return mock->stream_started("slow"); });
  ASSERT_TRUE(mock->stream_started("slow")) << "the slow stream never started\n" << r.dump();
  expect_run_frame(r);
  // Raw: exec prints only whole items — nothing of the half-streamed message, and after SIGINT neither
  // turn.completed nor turn.failed.
  EXPECT_TRUE(completed_texts(r, "agent_message").empty()) << r.dump();
  EXPECT_TRUE(r.raw_of_type("turn.completed").empty()) << r.dump();
  EXPECT_TRUE(r.raw_of_type("turn.failed").empty()) << r.dump();
  // Normalized.
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  EXPECT_EQ(r.terminal.type, message_type::terminal_cancelled) << r.dump();
  EXPECT_TRUE(r.of_type(message_type::assistant).empty());
  EXPECT_LT(stopped_in(r.stop_elapsed), kStopBound) << "the stream takes 40 s; the stop must not wait for it";
}

TEST_F(RealCodex, CancellationDuringAToolKillsTheToolProcess) {
  std::optional<int> sleep_pid;
  auto r = run("long-tool", options("long-tool"), [&](const run_result& now) {
    return sleep_runs(!now.of_type(message_type::tool_call).empty(), run_mark(), sleep_pid);
  });
  ASSERT_TRUE(sleep_pid.has_value()) << "the tool's sleep never ran\n" << r.dump();
  expect_run_frame(r);
  EXPECT_EQ(completed_texts(r, "agent_message"), std::vector<std::string>{"Sleeping."});
  const auto started = r.raw_of_type("item.started");
  ASSERT_EQ(started.size(), 1u) << r.dump();
  EXPECT_EQ(started[0]->at("item").at("command"), "/bin/bash -lc 'sleep 30'");
  EXPECT_TRUE(r.raw_of_type("turn.completed").empty()) << r.dump();
  EXPECT_EQ(::kill(*sleep_pid, 0), -1) << "the tool's sleep survived";
  // Normalized: the text, the call closed by the cancellation, terminal.cancelled.
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  EXPECT_EQ(r.terminal.type, message_type::terminal_cancelled) << r.dump();
  EXPECT_EQ(r.assistant_text(), "Sleeping.");
  const auto failed = r.of_type(message_type::tool_failed);
  ASSERT_EQ(failed.size(), 1u) << r.dump();
  EXPECT_EQ(failed[0].content.value("closed_by_finish", false), true);
  EXPECT_EQ(failed[0].content.at("tool_call_id"), started[0]->at("item").at("id"));
  EXPECT_LT(stopped_in(r.stop_elapsed), kStopBound) << "the tool sleeps 30 s; the stop must not wait for it";
}

// A stream cut mid-answer, with stream_max_retries = 2: codex reports the reconnect as a top-level `error` event (not
// fatal; normalized: a `retry` status) and prints only the retry's whole items — the half-streamed first attempt
// never shows.
TEST_F(RealCodex, StreamCutIsRetriedWithAReconnectingNotice) {
  const auto s = scripted("cut-retry");
  auto r = run("cut-retry", "model_providers.mock.stream_max_retries", "2");
  expect_answered(r, s);
  const auto errors = r.raw_of_type("error");
  ASSERT_EQ(errors.size(), 1u) << r.dump();
  EXPECT_EQ(errors[0]->value("message", "").rfind("Reconnecting... 1/2 (stream disconnected before completion: ", 0), 0u)
      << errors[0]->dump();
  std::vector<json> retries;
  for (const auto& m : r.of_type(message_type::status))
    if (m.content.value("kind", "") == "retry") retries.push_back(m.content);
  ASSERT_EQ(retries.size(), 1u) << r.dump();
  EXPECT_EQ(retries[0].at("attempt"), 1);
  EXPECT_EQ(retries[0].at("max_attempts"), 2);
  EXPECT_EQ(mock->requests_of("cut-retry"), (std::vector<std::string>{"cut@turn0", "complete@turn0"}));
}

// HTTP 503 then an answer, with request_max_retries = 1: the retry leaves no trace in the JSONL.
TEST_F(RealCodex, ServerErrorIsRetriedSilently) {
  const auto s = scripted("flaky");
  auto r = run("flaky", "model_providers.mock.request_max_retries", "1");
  expect_answered(r, s);
  EXPECT_TRUE(r.raw_of_type("error").empty()) << r.dump();
  EXPECT_EQ(mock->requests_of("flaky"), (std::vector<std::string>{"http_error@turn0", "complete@turn0"}));
}

// A prompt above 64 KiB goes through codex's stdin (`-` as the prompt argument), then EOF: it arrives whole.
TEST_F(RealCodex, PromptThroughStdinClosedAtOnce) {
  const auto s = scripted("answer");
  std::string big = scenario_prompt + "\n";
  for (int i = 0; big.size() <= providers::codex_prompt_argv_max; ++i)
    big += "Line " + std::to_string(i) + ": caf\u00e9 \u4f60\u597d -- $(not a command) `nor this`\n";
  big += "End.";
  auto r = run("answer", options("answer"), {}, "answer-stdin-prompt", big);
  expect_answered(r, s);
  const std::optional<json> digest = mock->last_user_digest();
  ASSERT_TRUE(digest.has_value());
  EXPECT_EQ(digest->at("bytes"), big.size());
  EXPECT_EQ(digest->at("crc32"), crc32(big));
}

// The same stop with SIGTERM to the leader (stop_policy::sigterm(), what the pi provider uses). Recorded (codex
// 0.171.0): the launcher ends by SIGTERM itself within ~50 ms and the tree is gone with it — the tool's `sleep`
// included (codex gives its tool processes PR_SET_PDEATHSIG).
TEST_F(RealCodex, SigtermDuringAToolKillsTheToolProcess) {
  std::optional<int> sleep_pid;
  auto o = options("long-tool");
  o.run.stop = process::stop_policy::sigterm();
  auto r = run("long-tool", o, [&](const run_result& now) {
    return sleep_runs(!now.of_type(message_type::tool_call).empty(), run_mark(), sleep_pid);
  }, "long-tool-sigterm");
  ASSERT_TRUE(sleep_pid.has_value()) << "the tool's sleep never ran\n" << r.dump();
  EXPECT_TRUE(r.raw_of_type("turn.completed").empty()) << r.dump();
  EXPECT_EQ(::kill(*sleep_pid, 0), -1) << "the tool's sleep survived";
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  EXPECT_EQ(r.terminal.type, message_type::terminal_cancelled) << r.dump();
  EXPECT_LT(stopped_in(r.stop_elapsed), kStopBound);
}

#ifdef AGENTHOST_CLI
// `agenthost run --agent codex` interrupted by SIGINT while the model streams (codex prints no text before the item is
// complete, so the signal goes once the session started): terminal.cancelled, exit code 130, nothing left.
TEST_F(RealCodex, CliSigintCancelsTheRunAndExits130) {
  const auto o = options("slow");
  expect_agenthost_run_interrupted("codex", o.executable.string(), {"--model", "slow", "--cwd", work}, o.env,
                                   "{\"type\":\"session.started\",", dir, run_mark());
}
#endif

}  // namespace
