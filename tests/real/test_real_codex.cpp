// The real Codex CLI (`@openai/codex`, installed by scripts/install-agents.sh into .npm-agents/codex/) against the
// scripted mock model server (tests/mockmodel/, OpenAI Responses wire). There is no Codex provider or mapper yet, so
// the test drives `codex exec --json` through agenthost::process::child, parses its JSONL itself and checks it
// against the script: texts, reasoning, the shell tool call and its output, the terminal event, HTTP failures, and
// that a three-phase stop (mid-stream, during a `sleep 30` tool) leaves no process behind.
//
// Skips (naming why) when codex is not installed or python3 is missing. AGENTHOST_REAL_CODEX overrides the executable.
// AGENTHOST_RECORD_FIXTURES=1 writes what codex printed into fixtures/codex/recorded/codex-<version>-<scenario>.jsonl.
#include "real_cli_util.hpp"

#include <gtest/gtest.h>

using namespace agenthost;
using namespace agenthost::test;
using namespace agenthost::test::real;

namespace {

const std::string prefix = source_dir + "/.npm-agents/codex";

std::string codex_executable() {
  return cli_executable("AGENTHOST_REAL_CODEX", prefix + "/node_modules/.bin/codex");
}

std::string codex_version() {
  return npm_package_version(prefix + "/node_modules/@openai/codex/package.json");
}

std::string unavailable_reason() {
  return real::unavailable_reason("codex", codex_executable(), "install-status-codex.txt", "AGENTHOST_REAL_CODEX");
}

const char* const prompt = "Do what the scenario says.";

class RealCodex : public real_cli_test {
 protected:
  RealCodex() : real_cli_test("codex") {}

  void SetUp() override {
    start(unavailable_reason(), {dir + "/home", codex_home});
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

  // `codex exec --json --skip-git-repo-check -m <scenario> <extra…> <prompt>` (no prompt argument when it is empty).
  process::spawn_options spawn_options(const std::string& scenario, const std::vector<std::string>& extra = {},
                                       const std::string& prompt_arg = prompt) const {
    std::vector<std::string> args = {"exec", "--json", "--skip-git-repo-check", "-m", scenario};
    args.insert(args.end(), extra.begin(), extra.end());
    if (!prompt_arg.empty()) args.push_back(prompt_arg);
    return {.executable = codex_executable(),
            .args = std::move(args),
            .working_directory = work,
            .env = {.unset = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                              "OPENAI_API_KEY", "CODEX_API_KEY", "OPENAI_BASE_URL", "NODE_OPTIONS", "RUST_LOG"},
                    .set = {{"HOME", dir + "/home"},
                            {"CODEX_HOME", codex_home},
                            {"AGENTHOST_MOCK_API_KEY", "mock-key"},
                            {"NO_PROXY", "127.0.0.1,localhost"},
                            {"AGENTHOST_TEST_RUN", mark}}},
            // A prompt argument plus a stdin that is not a terminal: codex reads stdin to EOF and appends it
            // ("Reading additional input from stdin..."); an open pipe would hang it forever. /dev/null: EOF at once.
            .stdin_mode = process::stdin_kind::null,
            .reaper_path = AGENTHOST_REAPER};
  }

  cli_result run(const std::string& scenario, const std::function<bool(const cli_result&)>& stop_when = {},
                 const std::string& record_as = {}, const std::vector<std::string>& extra = {}) {
    return finish(scenario, run_cli(io, spawn_options(scenario, extra), stop_when), record_as);
  }

  cli_result finish(const std::string& scenario, cli_result r, const std::string& record_as = {}) {
    expect_clean_end("codex", scenario, r, run_mark());
    record_fixture("codex", "codex-" + codex_version() + "-" + (record_as.empty() ? scenario : record_as) + ".jsonl",
                   r.lines, {{work, "/home/user/project"}, {dir, "/home/user"}, {mock->origin(), "http://127.0.0.1:18765"}});
    return r;
  }

  std::string codex_home = dir + "/codex-home";
};

// The `text` of every completed item of `type`, in order.
std::vector<std::string> completed_texts(const cli_result& r, const std::string& type) {
  std::vector<std::string> out;
  for (const auto* e : r.of_type("item.completed"))
    if (e->at("item").value("type", "") == type) out.push_back(e->at("item").value("text", ""));
  return out;
}

// The frame every exec run has: thread.started first, a "model metadata not found" warning item (the mock's models
// are unknown to Codex), turn.started.
void expect_run_frame(const cli_result& r) {
  ASSERT_GE(r.events.size(), 3u) << r.dump();
  EXPECT_EQ(r.lines.size(), r.events.size()) << "every stdout line is a JSON object\n" << r.dump();
  EXPECT_EQ(r.events[0].value("type", ""), "thread.started");
  EXPECT_FALSE(r.events[0].value("thread_id", "").empty());
  ASSERT_EQ(r.of_type("turn.started").size(), 1u) << r.dump();
  for (const auto& e : r.events) {
    // exec --json streams no deltas: every message comes whole, only as item.completed.
    EXPECT_EQ(e.value("type", "").find("delta"), std::string::npos) << e.dump();
    if (e.value("type", "") == "item.started") {
      EXPECT_EQ(e.at("item").value("type", ""), "command_execution");
    }
  }
}

// Codex exposes reasoning summaries and assistant messages as whole items: one per scripted block, nothing doubled,
// nothing lost.
void expect_script(const cli_result& r, const script& s) {
  EXPECT_EQ(completed_texts(r, "agent_message"), s.texts) << r.dump();
  std::string all;
  for (const auto& t : completed_texts(r, "agent_message")) all += t;
  EXPECT_EQ(all, s.text());
  EXPECT_EQ(completed_texts(r, "reasoning"), s.thoughts) << r.dump();
}

TEST_F(RealCodex, ToolCallWithReasoningAndANonAsciiAnswer) {
  const auto s = scripted("tool");
  auto r = run("tool");
  expect_run_frame(r);
  expect_script(r, s);
  EXPECT_EQ(r.exit_code(), 0) << r.dump();

  // One command execution: started, then completed with the same id and the marker as output.
  const auto started = r.of_type("item.started");
  ASSERT_EQ(started.size(), 1u) << r.dump();
  const auto& call = started[0]->at("item");
  EXPECT_EQ(call.at("status"), "in_progress");
  EXPECT_TRUE(call.at("exit_code").is_null());
  // The scripted `echo agenthost-tool-output`, run through bash -lc.
  EXPECT_EQ(call.at("command"), "/bin/bash -lc 'echo agenthost-tool-output'");
  std::vector<const json*> done;
  for (const auto* e : r.of_type("item.completed"))
    if (e->at("item").value("type", "") == "command_execution") done.push_back(&e->at("item"));
  ASSERT_EQ(done.size(), 1u) << r.dump();
  EXPECT_EQ(done[0]->at("id"), call.at("id"));
  EXPECT_EQ(done[0]->at("aggregated_output"), "agenthost-tool-output\n");
  EXPECT_EQ(done[0]->at("exit_code"), 0);
  EXPECT_EQ(done[0]->at("status"), "completed");

  // Order: reasoning, message, the command (started, completed), reasoning, the answer, turn.completed last.
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
  // Usage over both model calls (100 input tokens per call, one output token per streamed delta).
  const auto& usage = r.events.back().at("usage");
  EXPECT_EQ(usage.at("input_tokens"), 200);
  EXPECT_EQ(usage.at("output_tokens"), 12 + 16);
  EXPECT_EQ(mock->requests_of("tool"), (std::vector<std::string>{"complete@turn0", "complete@turn1"}));
}

TEST_F(RealCodex, AnswerWithoutTools) {
  const auto s = scripted("answer");
  auto r = run("answer");
  expect_run_frame(r);
  expect_script(r, s);
  EXPECT_EQ(r.exit_code(), 0) << r.dump();
  EXPECT_TRUE(r.of_type("item.started").empty());
  ASSERT_EQ(r.events.back().value("type", ""), "turn.completed") << r.dump();
  EXPECT_EQ(r.events.back().at("usage").at("input_tokens"), 100);
  EXPECT_EQ(r.events.back().at("usage").at("output_tokens"), 15);
  EXPECT_EQ(mock->requests_of("answer"), (std::vector<std::string>{"complete@turn0"}));
}

// An HTTP error (no retries configured): an `error` event, then `turn.failed` with the same message, exit 1.
void expect_http_failure(const cli_result& r, const std::string& message) {
  expect_run_frame(r);
  EXPECT_EQ(r.exit_code(), 1) << r.dump();
  const auto errors = r.of_type("error");
  ASSERT_EQ(errors.size(), 1u) << r.dump();
  EXPECT_EQ(errors[0]->at("message"), message);
  ASSERT_EQ(r.events.back().value("type", ""), "turn.failed") << r.dump();
  EXPECT_EQ(r.events.back().at("error").at("message"), message);
  EXPECT_TRUE(completed_texts(r, "agent_message").empty());
}

// Codex 0.171.0 does not show the body of a 5xx: it replaces it with a canned "high demand" message.
TEST_F(RealCodex, Http500IsTurnFailedWithExit1) {
  auto r = run("http500");
  expect_http_failure(r, "We\u2019re currently experiencing high demand, which may cause temporary errors.");
  EXPECT_EQ(mock->requests_of("http500"), (std::vector<std::string>{"http_error@turn0"}));
}

// A 429 names the status, not the body.
TEST_F(RealCodex, Http429IsTurnFailedWithExit1) {
  auto r = run("http429");
  expect_http_failure(r, "exceeded retry limit, last status: 429 Too Many Requests");
  EXPECT_EQ(mock->requests_of("http429"), (std::vector<std::string>{"http_error@turn0"}));
}

// The stop (SIGINT to the group, 2 s grace, SIGKILL to the tree) while the model streams (40 s of "tick").
TEST_F(RealCodex, CancellationMidStream) {
  auto r = run("slow", [&](const cli_result&) { return mock->stream_started("slow"); });
  ASSERT_TRUE(r.stop.has_value()) << "the slow stream never started\n" << r.dump();
  expect_run_frame(r);
  // exec prints only whole items: nothing of the half-streamed message, and after SIGINT neither turn.completed nor
  // turn.failed.
  EXPECT_TRUE(completed_texts(r, "agent_message").empty()) << r.dump();
  EXPECT_TRUE(r.of_type("turn.completed").empty()) << r.dump();
  EXPECT_TRUE(r.of_type("turn.failed").empty()) << r.dump();
  // Recorded (codex 0.171.0): SIGINT ends codex by itself within the grace period, exit code 1.
  EXPECT_EQ(r.stop->phase, process::stop_phase::interrupt);
  EXPECT_EQ(r.exit_code(), 1) << r.dump();
  EXPECT_LT(r.elapsed, std::chrono::seconds(20)) << "the stream takes 40 s; the stop must not wait for it";
}

TEST_F(RealCodex, CancellationDuringAToolKillsTheToolProcess) {
  std::optional<int> sleep_pid;
  auto r = run("long-tool", [&](const cli_result& now) {
    if (now.of_type("item.started").empty()) return false;
    if (!sleep_pid) sleep_pid = process_named(run_mark(), "sleep");
    return sleep_pid.has_value();
  });
  ASSERT_TRUE(sleep_pid.has_value()) << "the tool's sleep never ran\n" << r.dump();
  ASSERT_TRUE(r.stop.has_value());
  expect_run_frame(r);
  EXPECT_EQ(completed_texts(r, "agent_message"), std::vector<std::string>{"Sleeping."});
  const auto started = r.of_type("item.started");
  ASSERT_EQ(started.size(), 1u) << r.dump();
  EXPECT_EQ(started[0]->at("item").at("command"), "/bin/bash -lc 'sleep 30'");
  EXPECT_TRUE(r.of_type("turn.completed").empty()) << r.dump();
  EXPECT_EQ(::kill(*sleep_pid, 0), -1) << "the tool's sleep survived";
  // Recorded (codex 0.171.0): on SIGINT codex kills its tool's process group itself and exits 1 within the grace.
  EXPECT_EQ(r.stop->phase, process::stop_phase::interrupt);
  EXPECT_EQ(r.exit_code(), 1) << r.dump();
  EXPECT_LT(r.elapsed, std::chrono::seconds(20)) << "the tool sleeps 30 s; the stop must not wait for it";
}

// A stream cut mid-answer, with stream_max_retries = 2: codex reports the reconnect as a top-level `error` event (not
// fatal) and prints only the retry's whole items — the half-streamed first attempt never shows.
TEST_F(RealCodex, StreamCutIsRetriedWithAReconnectingNotice) {
  const auto s = scripted("cut-retry");
  auto r = run("cut-retry", {}, {}, {"-c", "model_providers.mock.stream_max_retries=2"});
  expect_run_frame(r);
  expect_script(r, s);
  EXPECT_EQ(r.exit_code(), 0) << r.dump();
  const auto errors = r.of_type("error");
  ASSERT_EQ(errors.size(), 1u) << r.dump();
  EXPECT_EQ(errors[0]->value("message", "").rfind("Reconnecting... 1/2 (stream disconnected before completion: ", 0), 0u)
      << errors[0]->dump();
  EXPECT_EQ(r.events.back().value("type", ""), "turn.completed") << r.dump();
  EXPECT_EQ(mock->requests_of("cut-retry"), (std::vector<std::string>{"cut@turn0", "complete@turn0"}));
}

// HTTP 503 then an answer, with request_max_retries = 1: the retry leaves no trace in the JSONL.
TEST_F(RealCodex, ServerErrorIsRetriedSilently) {
  const auto s = scripted("flaky");
  auto r = run("flaky", {}, {}, {"-c", "model_providers.mock.request_max_retries=1"});
  expect_run_frame(r);
  expect_script(r, s);
  EXPECT_EQ(r.exit_code(), 0) << r.dump();
  EXPECT_TRUE(r.of_type("error").empty()) << r.dump();
  EXPECT_EQ(r.events.back().value("type", ""), "turn.completed") << r.dump();
  EXPECT_EQ(mock->requests_of("flaky"), (std::vector<std::string>{"http_error@turn0", "complete@turn0"}));
}

// The other way around the stdin trap: no prompt argument, the prompt written to a stdin pipe that is then closed.
TEST_F(RealCodex, PromptThroughStdinClosedAtOnce) {
  const auto s = scripted("answer");
  auto o = spawn_options("answer", {}, "");
  o.stdin_mode = process::stdin_kind::pipe;
  auto r = finish("answer", run_cli(io, std::move(o), {}, process::stop_policy::ctrl_c(), 60s, std::string(prompt)),
                  "answer-stdin-prompt");
  expect_run_frame(r);
  expect_script(r, s);
  EXPECT_EQ(r.exit_code(), 0) << r.dump();
  EXPECT_NE(r.stderr_tail.find("Reading prompt from stdin..."), std::string::npos) << r.stderr_tail;
}

// The same with SIGTERM to the leader (stop_policy::sigterm(), what the pi provider uses). Recorded (codex 0.171.0):
// the launcher ends by SIGTERM itself within ~50 ms and the tree is gone with it — the tool's `sleep` included (codex
// gives its tool processes PR_SET_PDEATHSIG).
TEST_F(RealCodex, SigtermDuringAToolKillsTheToolProcess) {
  std::optional<int> sleep_pid;
  auto o = spawn_options("long-tool");
  auto r = finish("long-tool", run_cli(io, std::move(o), [&](const cli_result& now) {
    if (now.of_type("item.started").empty()) return false;
    if (!sleep_pid) sleep_pid = process_named(run_mark(), "sleep");
    return sleep_pid.has_value();
  }, process::stop_policy::sigterm()), "long-tool-sigterm");
  ASSERT_TRUE(sleep_pid.has_value()) << "the tool's sleep never ran\n" << r.dump();
  ASSERT_TRUE(r.stop.has_value());
  EXPECT_TRUE(r.of_type("turn.completed").empty()) << r.dump();
  EXPECT_EQ(::kill(*sleep_pid, 0), -1) << "the tool's sleep survived";
  EXPECT_EQ(r.stop->phase, process::stop_phase::interrupt);
  ASSERT_TRUE(r.status && r.status->as_signaled() != nullptr) << r.status_text();
  EXPECT_EQ(r.status->as_signaled()->signal, SIGTERM);
  std::cout << "[ real codex ] SIGTERM during the tool: codex " << r.status_text() << " after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(r.stop->leader_exit_after).count()
            << " ms, stop phase " << phase_name(r.stop->phase) << "\n";
}

}  // namespace
