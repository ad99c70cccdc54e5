// The real Gemini CLI (`@google/gemini-cli`, installed by scripts/install-agents.sh into .npm-agents/gemini/) against
// the scripted mock model server (tests/mockmodel/, Gemini streamGenerateContent wire). There is no Gemini provider or
// mapper yet, so the test drives `gemini -p … --output-format stream-json` through agenthost::process::child, parses
// its JSONL itself and checks it against the script: the streamed text deltas, the shell tool call and its output, the
// result event, HTTP failures, and that a three-phase stop (mid-stream, during a `sleep 30` tool) leaves no process
// behind.
//
// Skips (naming why) when gemini is not installed or python3 is missing. AGENTHOST_REAL_GEMINI overrides the
// executable. AGENTHOST_RECORD_FIXTURES=1 writes what gemini printed into
// fixtures/gemini/recorded/gemini-<version>-<scenario>.jsonl.
#include "real_cli_util.hpp"

#include <gtest/gtest.h>

#include <set>

using namespace agenthost;
using namespace agenthost::test;
using namespace agenthost::test::real;

namespace {

const std::string prefix = source_dir + "/.npm-agents/gemini";

std::string gemini_executable() {
  return cli_executable("AGENTHOST_REAL_GEMINI", prefix + "/node_modules/.bin/gemini");
}

std::string gemini_version() {
  return npm_package_version(prefix + "/node_modules/@google/gemini-cli/package.json");
}

std::string unavailable_reason() {
  return real::unavailable_reason("gemini", gemini_executable(), "install-status-gemini.txt", "AGENTHOST_REAL_GEMINI");
}

const char* const prompt = "Do what the scenario says.";

// API-key auth pinned (no auth dialog, no Code Assist / OAuth calls); one attempt per model call (its default is 10
// with 5-30 s backoff); no update check, usage statistics or telemetry.
const json settings_json = {{"security", {{"auth", {{"selectedType", "gemini-api-key"}}}}},
                            {"general", {{"maxAttempts", 1}, {"enableAutoUpdate", false},
                                         {"enableAutoUpdateNotification", false}}},
                            {"privacy", {{"usageStatisticsEnabled", false}}},
                            {"telemetry", {{"enabled", false}}}};

class RealGemini : public real_cli_test {
 protected:
  RealGemini() : real_cli_test("gemini") {}

  void SetUp() override {
    start(unavailable_reason(), {home + "/.gemini", dir + "/tmp"});
    if (stopped_early()) return;
    std::ofstream(home + "/.gemini/settings.json") << settings_json.dump(2);
  }

  // relaunch = false: GEMINI_CLI_NO_RELAUNCH=1 — gemini does not start itself a second time as a child node process
  // (with a bigger heap); halves its start-up (~10 s → ~5 s on a loaded 2-core machine). The stop tests keep the
  // default two-process layout: that is what a host signals.
  process::spawn_options spawn_options(const std::string& scenario, bool relaunch) const {
    process::spawn_options o{.executable = gemini_executable(),
            .args = {"-m", scenario, "--skip-trust", "--yolo", "--output-format", "stream-json", "-p", prompt},
            .working_directory = work,
            .env = {.unset = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                              "GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
                              "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA", "GOOGLE_APPLICATION_CREDENTIALS",
                              "GEMINI_MODEL", "NODE_OPTIONS", "DEBUG"},
                    .set = {{"HOME", home},
                            {"GEMINI_CLI_HOME", home},
                            {"GEMINI_API_KEY", "mock-key"},
                            {"GOOGLE_GEMINI_BASE_URL", mock->origin()},
                            // Its error reports (gemini-client-error-*.json) go to the OS temp dir.
                            {"TMPDIR", dir + "/tmp"},
                            {"NO_PROXY", "127.0.0.1,localhost"},
                            {"AGENTHOST_TEST_RUN", mark}}},
            .stdin_mode = process::stdin_kind::null,
            .reaper_path = AGENTHOST_REAPER};
    if (!relaunch) o.env.set["GEMINI_CLI_NO_RELAUNCH"] = "1";
    return o;
  }

  cli_result run(const std::string& scenario, const std::function<bool(const cli_result&)>& stop_when = {},
                 process::stop_policy policy = process::stop_policy::ctrl_c(), const std::string& record_as = {}) {
    auto r = run_cli(io, spawn_options(scenario, /*relaunch=*/static_cast<bool>(stop_when)), stop_when, policy);
    expect_clean_end("gemini", scenario, r, run_mark());
    record_fixture("gemini", "gemini-" + gemini_version() + "-" + (record_as.empty() ? scenario : record_as) + ".jsonl",
                   r.lines,
                   {{work, "/home/user/project"}, {dir, "/home/user"}, {mock->origin(), "http://127.0.0.1:18765"}});
    return r;
  }

  std::string home = dir + "/home";
};

// Every assistant `message` event's content, in order (stream-json: one per streamed text part, `delta: true`).
std::vector<std::string> assistant_deltas(const cli_result& r) {
  std::vector<std::string> out;
  for (const auto* e : r.of_type("message")) {
    if (e->value("role", "") != "assistant") continue;
    EXPECT_EQ(e->value("delta", false), true) << e->dump();
    out.push_back(e->value("content", ""));
  }
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x;
  return s;
}

// init first (with the model asked for), the prompt echoed as a user message; only known event types — thoughts
// (`thought: true` parts) are not exposed in stream-json at all.
void expect_run_frame(const cli_result& r, const std::string& scenario) {
  ASSERT_GE(r.events.size(), 2u) << r.dump();
  EXPECT_EQ(r.lines.size(), r.events.size()) << "every stdout line is a JSON object\n" << r.dump();
  EXPECT_EQ(r.events[0].value("type", ""), "init");
  EXPECT_EQ(r.events[0].value("model", ""), scenario);
  EXPECT_FALSE(r.events[0].value("session_id", "").empty());
  EXPECT_EQ(r.events[1].value("type", ""), "message");
  EXPECT_EQ(r.events[1].value("role", ""), "user");
  EXPECT_EQ(r.events[1].value("content", ""), prompt);
  const std::set<std::string> known = {"init", "message", "tool_use", "tool_result", "result"};
  for (const auto& e : r.events) EXPECT_TRUE(known.contains(e.value("type", ""))) << e.dump();
  EXPECT_EQ(r.dump().find("The user wants"), std::string::npos) << "a thought surfaced";
}

TEST_F(RealGemini, ToolCallAndANonAsciiAnswerStreamedChunkByChunk) {
  const auto s = scripted("tool");
  auto r = run("tool");
  expect_run_frame(r, "tool");
  EXPECT_EQ(r.exit_code(), 0) << r.dump();
  // Gemini CLI streams: one delta per scripted chunk, exactly, nothing doubled or lost.
  EXPECT_EQ(assistant_deltas(r), s.text_chunks) << r.dump();
  EXPECT_EQ(joined(assistant_deltas(r)), s.text());

  const auto uses = r.of_type("tool_use");
  ASSERT_EQ(uses.size(), 1u) << r.dump();
  const auto& call = s.tool_calls.at(0);
  EXPECT_EQ(uses[0]->at("tool_name"), "run_shell_command");
  // The tool id is the function call's id prefixed with the tool's name.
  EXPECT_EQ(uses[0]->at("tool_id"), "run_shell_command__" + call.at("id").get<std::string>());
  EXPECT_EQ(uses[0]->at("parameters"), call.at("arguments"));
  const auto results = r.of_type("tool_result");
  ASSERT_EQ(results.size(), 1u) << r.dump();
  EXPECT_EQ(results[0]->at("tool_id"), uses[0]->at("tool_id"));
  EXPECT_EQ(results[0]->at("status"), "success");
  EXPECT_EQ(results[0]->at("output"), "agenthost-tool-output") << "the output without its trailing newline";

  // Order: the first turn's text, the tool, the answer, the result last.
  std::vector<std::string> order;
  for (const auto& e : r.events) {
    const std::string t = e.value("type", "");
    if (order.empty() || order.back() != t) order.push_back(t);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"init", "message", "tool_use", "tool_result", "message", "result"}))
      << r.dump();
  const auto& result = r.events.back();
  EXPECT_EQ(result.at("status"), "success");
  // Usage over both calls: 100 prompt tokens each; one candidate token per streamed part (thoughts and the call
  // included: 9 + 16).
  EXPECT_EQ(result.at("stats").at("input_tokens"), 200);
  EXPECT_EQ(result.at("stats").at("output_tokens"), 25);
  EXPECT_EQ(result.at("stats").at("tool_calls"), 1);
  EXPECT_EQ(mock->requests_of("tool"), (std::vector<std::string>{"complete@turn0", "complete@turn1"}));
  // No side calls (countTokens, loadCodeAssist, next-speaker check, GETs): only the two streamed model calls.
  for (const auto& rec : mock->records()) {
    if (rec.contains("path")) {
      EXPECT_NE(rec.value("path", "").find(":streamGenerateContent?alt=sse"), std::string::npos) << rec.dump();
    }
  }
}

TEST_F(RealGemini, AnswerWithoutTools) {
  const auto s = scripted("answer");
  auto r = run("answer");
  expect_run_frame(r, "answer");
  EXPECT_EQ(r.exit_code(), 0) << r.dump();
  EXPECT_EQ(assistant_deltas(r), s.text_chunks) << r.dump();
  EXPECT_TRUE(r.of_type("tool_use").empty());
  ASSERT_EQ(r.events.back().value("type", ""), "result") << r.dump();
  EXPECT_EQ(r.events.back().at("status"), "success");
  EXPECT_EQ(r.events.back().at("stats").at("input_tokens"), 100);
  EXPECT_EQ(r.events.back().at("stats").at("output_tokens"), 15);
  EXPECT_EQ(r.events.back().at("stats").at("tool_calls"), 0);
  EXPECT_EQ(mock->requests_of("answer"), (std::vector<std::string>{"complete@turn0"}));
}

// An HTTP error (one attempt configured): a `result` with status "error", and an exit code that is the HTTP status
// modulo 256 (gemini-cli 0.61.0 exits with the error's numeric code).
void expect_http_failure(const cli_result& r, const std::string& scenario, const std::string& message, int exit_code) {
  expect_run_frame(r, scenario);
  ASSERT_EQ(r.events.size(), 3u) << r.dump();
  const auto& result = r.events.back();
  ASSERT_EQ(result.value("type", ""), "result") << r.dump();
  EXPECT_EQ(result.at("status"), "error");
  EXPECT_EQ(result.at("error").at("type"), "unknown");
  EXPECT_EQ(result.at("error").at("message"), message);
  EXPECT_EQ(r.exit_code(), exit_code) << r.dump();
}

TEST_F(RealGemini, Http500IsAnErrorResultWithExit244) {
  auto r = run("http500");
  expect_http_failure(r, "http500",
                      "[API Error: {\"error\":{\"code\":500,\"message\":\"mock internal server error\","
                      "\"status\":\"INTERNAL\"}}]",
                      500 % 256);
  EXPECT_EQ(mock->requests_of("http500"), (std::vector<std::string>{"http_error@turn0"}));
}

TEST_F(RealGemini, Http429IsAnErrorResultWithExit173) {
  auto r = run("http429");
  expect_http_failure(r, "http429",
                      "[API Error: mock rate limit exceeded]\nPlease wait and try again later. To increase your "
                      "limits, request a quota increase through AI Studio, or switch to another /auth method",
                      429 % 256);
  EXPECT_EQ(mock->requests_of("http429"), (std::vector<std::string>{"http_error@turn0"}));
}

// The stop (SIGINT to the group, 2 s grace, SIGKILL to the tree) once the 40-s stream's first deltas are out.
TEST_F(RealGemini, CancellationMidStream) {
  const auto s = scripted("slow");
  auto r = run("slow", [](const cli_result& now) { return now.of_type("message").size() >= 3; });
  ASSERT_TRUE(r.stop.has_value()) << "no delta came\n" << r.dump();
  expect_run_frame(r, "slow");
  const auto got = assistant_deltas(r);
  ASSERT_FALSE(got.empty());
  EXPECT_LT(got.size(), s.text_chunks.size());
  EXPECT_EQ(got, std::vector<std::string>(s.text_chunks.begin(), s.text_chunks.begin() + static_cast<long>(got.size())))
      << "what was streamed before the stop is a prefix of the script";
  EXPECT_TRUE(r.of_type("result").empty()) << "no result event after SIGINT\n" << r.dump();
  // Recorded (gemini-cli 0.61.0): SIGINT ends both its node processes, usually within ~100 ms, with exit code 0; on
  // a heavily loaded machine the 2-s grace can pass first (then SIGKILL).
  EXPECT_TRUE(r.exit_code() == 0 || (r.status && r.status->as_signaled() != nullptr &&
                                     r.status->as_signaled()->signal == SIGKILL))
      << r.dump();
  EXPECT_LT(r.elapsed, std::chrono::seconds(20)) << "the stream takes 40 s; the stop must not wait for it";
}

// The default three-phase stop; AGENTHOST_TEST_GRACE_MS overrides its grace period (to measure how long gemini takes
// to exit by itself: ~3.5 s during a tool on a loaded 2-core machine).
process::stop_policy grace_policy(process::stop_policy p = process::stop_policy::ctrl_c()) {
  if (const char* g = std::getenv("AGENTHOST_TEST_GRACE_MS")) p.graceful_wait = std::chrono::milliseconds(std::atoi(g));
  return p;
}

TEST_F(RealGemini, CancellationDuringAToolKillsTheToolProcess) {
  std::optional<int> sleep_pid;
  auto r = run("long-tool", [&](const cli_result& now) {
    if (now.of_type("tool_use").empty()) return false;
    if (!sleep_pid) sleep_pid = process_named(run_mark(), "sleep");
    return sleep_pid.has_value();
  }, grace_policy());
  ASSERT_TRUE(sleep_pid.has_value()) << "the tool's sleep never ran\n" << r.dump();
  ASSERT_TRUE(r.stop.has_value());
  expect_run_frame(r, "long-tool");
  EXPECT_EQ(assistant_deltas(r), std::vector<std::string>{"Sleeping."});
  const auto uses = r.of_type("tool_use");
  ASSERT_EQ(uses.size(), 1u) << r.dump();
  EXPECT_EQ(uses[0]->at("parameters").at("command"), "sleep 30");
  EXPECT_TRUE(r.of_type("result").empty()) << r.dump();
  // Recorded (gemini-cli 0.61.0): SIGINT ends gemini with exit code 0 (after ~0.1-2 s; on a loaded machine the
  // 2-s grace can pass first, then SIGKILL), but its shell tool's `sleep 30` (in a session of its own) keeps
  // running, orphaned: only phase 3 (SIGKILL to the reaper's whole tree) ends it.
  EXPECT_TRUE(r.exit_code() == 0 || (r.status && r.status->as_signaled() != nullptr &&
                                     r.status->as_signaled()->signal == SIGKILL))
      << r.dump();
  EXPECT_EQ(r.stop->phase, process::stop_phase::kill) << "gemini now ends its tool on SIGINT: update the README";
  std::cout << "[ real gemini ] SIGINT during the tool: gemini " << r.status_text() << " after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(r.stop->leader_exit_after).count() << " ms\n";
  EXPECT_EQ(::kill(*sleep_pid, 0), -1) << "the tool's sleep survived";
  EXPECT_LT(r.elapsed, std::chrono::seconds(20)) << "the tool sleeps 30 s; the stop must not wait for it";
}

// The stream is cut after "Hello wor": gemini does not retry a broken stream (also not with maxAttempts 2, tried by
// hand): the deltas already printed stay, then an error result "[API Error: terminated]" and exit 1.
TEST_F(RealGemini, StreamCutEndsTheRunAfterThePartialText) {
  auto r = run("cut-retry");
  expect_run_frame(r, "cut-retry");
  EXPECT_EQ(assistant_deltas(r), (std::vector<std::string>{"Hello ", "wor"})) << r.dump();
  const auto& result = r.events.back();
  ASSERT_EQ(result.value("type", ""), "result") << r.dump();
  EXPECT_EQ(result.at("status"), "error");
  EXPECT_EQ(result.at("error").at("message"), "[API Error: terminated]");
  EXPECT_EQ(r.exit_code(), 1) << r.dump();
  EXPECT_EQ(mock->requests_of("cut-retry"), (std::vector<std::string>{"cut@turn0"}));
}

// HTTP 503 then an answer, with maxAttempts 2: gemini retries after its backoff (~4.5 s) and nothing of it shows in
// stream-json (stderr: "Attempt 1 failed with status 503. Retrying with backoff...").
TEST_F(RealGemini, ServerErrorIsRetriedAfterABackoffSilently) {
  auto settings = settings_json;
  settings["general"]["maxAttempts"] = 2;
  std::ofstream(home + "/.gemini/settings.json", std::ios::trunc) << settings.dump(2);
  const auto s = scripted("flaky");
  auto r = run("flaky");
  expect_run_frame(r, "flaky");
  EXPECT_EQ(assistant_deltas(r), s.text_chunks) << r.dump();
  EXPECT_EQ(r.events.back().value("type", ""), "result");
  EXPECT_EQ(r.events.back().at("status"), "success");
  EXPECT_EQ(r.exit_code(), 0) << r.dump();
  EXPECT_NE(r.stderr_tail.find("Attempt 1 failed with status 503. Retrying with backoff..."), std::string::npos)
      << r.stderr_tail;
  EXPECT_EQ(mock->requests_of("flaky"), (std::vector<std::string>{"http_error@turn0", "complete@turn0"}));
}

// The same with SIGTERM to the leader (stop_policy::sigterm(), what the pi provider uses). Recorded (gemini-cli
// 0.61.0): the leader — the relaunching parent node — does not end on a SIGTERM of its own (still running after 10 s
// with AGENTHOST_TEST_GRACE_MS=10000; by hand after 12 s), so the stop needs SIGKILL. (SIGTERM to the whole group, by
// hand: exit 0 after ~1.6 s, the tool's sleep orphaned as with SIGINT.)
TEST_F(RealGemini, SigtermDuringAToolKillsTheToolProcess) {
  std::optional<int> sleep_pid;
  auto r = run("long-tool", [&](const cli_result& now) {
    if (now.of_type("tool_use").empty()) return false;
    if (!sleep_pid) sleep_pid = process_named(run_mark(), "sleep");
    return sleep_pid.has_value();
  }, grace_policy(process::stop_policy::sigterm()), "long-tool-sigterm");
  ASSERT_TRUE(sleep_pid.has_value()) << "the tool's sleep never ran\n" << r.dump();
  ASSERT_TRUE(r.stop.has_value());
  EXPECT_TRUE(r.of_type("result").empty()) << r.dump();
  EXPECT_EQ(::kill(*sleep_pid, 0), -1) << "the tool's sleep survived";
  EXPECT_EQ(r.stop->phase, process::stop_phase::kill);
  ASSERT_TRUE(r.status && r.status->as_signaled() != nullptr) << r.status_text();
  EXPECT_EQ(r.status->as_signaled()->signal, SIGKILL) << "gemini now ends on SIGTERM: update the README";
  std::cout << "[ real gemini ] SIGTERM during the tool: gemini " << r.status_text() << " after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(r.stop->leader_exit_after).count()
            << " ms, stop phase " << phase_name(r.stop->phase) << "\n";
}

}  // namespace
