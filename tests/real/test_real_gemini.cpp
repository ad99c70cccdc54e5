// The real Gemini CLI (`@google/gemini-cli`, installed by scripts/install-agents.sh into .npm-agents/gemini/) against
// the scripted mock model server (tests/mockmodel/, Gemini streamGenerateContent wire), driven through the Gemini
// provider (providers::async_run_gemini). Every scenario checks the normalized stream — the exact scripted text
// without duplication, the shell tool call and its output, the terminal (HTTP failures classified), cancellation
// mid-stream and during a `sleep 30` tool with no process left behind — and, from the same run's raw stdout lines
// (run_options::on_agent_line), the quirks of gemini's stream-json that the mapper relies on (docs in
// fixtures/gemini/recorded/README.md).
//
// Skips (naming why) when gemini is not installed or python3 is missing. AGENTHOST_REAL_GEMINI overrides the
// executable. AGENTHOST_RECORD_FIXTURES=1 writes what gemini printed into
// fixtures/gemini/recorded/gemini-<version>-<scenario>.jsonl.
#include "cli_interrupt.hpp"
#include "real_cli_util.hpp"

#include <agenthost/providers/gemini.hpp>
#include <agenthost/transport/contract_checker.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <gtest/gtest.h>

#include <set>

using namespace agenthost;
using namespace agenthost::test;
using namespace agenthost::test::real;

namespace {

// API-key auth pinned (no auth dialog, no Code Assist / OAuth calls); one attempt per model call (its default is 10
// with 5-30 s backoff); no update check, usage statistics or telemetry.
const json settings_json = {{"security", {{"auth", {{"selectedType", "gemini-api-key"}}}}},
                            {"general", {{"maxAttempts", 1}, {"enableAutoUpdate", false},
                                         {"enableAutoUpdateNotification", false}}},
                            {"privacy", {{"usageStatisticsEnabled", false}}},
                            {"telemetry", {{"enabled", false}}}};

/// One run through the provider: the normalized messages and, from the same run, gemini's raw stdout lines.
struct gemini_run {
  std::vector<message> messages;
  message terminal;
  boost::system::error_code ec;
  cli_result raw;  // lines + events (no exit status: the provider reports it in the terminal)
  bool finished = false;
  bool cancelled = false;
  std::chrono::milliseconds elapsed{};
  std::optional<std::chrono::milliseconds> stop_elapsed;  // from the cancellation to the terminal, if cancelled
  std::optional<int> sleep_pid;                           // the tool's `sleep`, when a test looked for it
  bool node_alive_late_in_grace = false;  // a gemini node process still ran just before the grace period ended

  [[nodiscard]] std::vector<const message*> of(message_type t) const { return of_type(messages, t); }
  [[nodiscard]] std::vector<std::string> assistant() const {
    std::vector<std::string> out;
    for (const auto* m : of(message_type::assistant)) out.push_back(m->content.at("text").get<std::string>());
    return out;
  }
  [[nodiscard]] std::string dump() const {
    std::string s = raw.dump() + "\n  normalized:\n";
    for (const auto& m : messages) s += "  " + m.to_json_line() + "\n";
    return s;
  }
};

class RealGemini : public real_cli_test {
 protected:
  RealGemini() : real_cli_test("gemini") {}

  void SetUp() override {
    start(gemini_cli.unavailable_reason(), {home + "/.gemini", dir + "/tmp"});
    if (stopped_early()) return;
    std::ofstream(home + "/.gemini/settings.json") << settings_json.dump(2);
  }

  // relaunch = false: GEMINI_CLI_NO_RELAUNCH=1 — gemini does not start itself a second time as a child node process
  // (with a bigger heap); halves its start-up (~10 s → ~5 s on a loaded 2-core machine). The stop tests keep the
  // default two-process layout: that is what a host stops.
  providers::gemini_options options(const std::string& scenario, bool relaunch) const {
    providers::gemini_options o{
        .executable = gemini_cli.executable(),
        .model = scenario,
        .working_directory = work,
        .env = environment({"GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
                            "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA", "GOOGLE_APPLICATION_CREDENTIALS",
                            "GEMINI_MODEL", "DEBUG", "CI", "GITHUB_ACTIONS"},
                           {{"HOME", home},
                            {"GEMINI_CLI_HOME", home},
                            {"GEMINI_API_KEY", "mock-key"},
                            {"GOOGLE_GEMINI_BASE_URL", mock->origin()},
                            // Its error reports (gemini-client-error-*.json) go to the OS temp dir.
                            {"TMPDIR", dir + "/tmp"}}),
        .approval_mode = providers::gemini_approval_mode::yolo,
        .skip_trust = true,
        .reaper_path = AGENTHOST_REAPER};
    if (!relaunch) o.env.set["GEMINI_CLI_NO_RELAUNCH"] = "1";
    // Bounded: a hung gemini fails the test with a timeout terminal instead of hanging it.
    o.run.deadline = std::chrono::seconds(60);
    return o;
  }

  /// Runs `scenario` to its end. `cancel_when` is asked after every message and every 10 ms; once it says yes, the
  /// run is cancelled through the completion token's cancellation slot.
  gemini_run run(const std::string& scenario, const std::string& text = scenario_prompt,
                 const std::function<bool(gemini_run&)>& cancel_when = {},
                 std::optional<process::stop_policy> stop = std::nullopt, const std::string& record_as = {},
                 const std::vector<std::pair<std::string, std::string>>& extra_replacements = {}) {
    auto o = options(scenario, /*relaunch=*/static_cast<bool>(cancel_when));
    if (stop) o.run.stop = *stop;
    gemini_run r;
    o.run.on_agent_line = [&r](std::string_view line) {
      r.raw.lines.emplace_back(line);
      if (auto j = parse_line(r.raw.lines.back()); j.is_object()) r.raw.events.push_back(std::move(j));
    };
    asio::cancellation_signal sig;
    bool done = false;
    const auto t0 = std::chrono::steady_clock::now();
    stop_clock stop_watch;
    std::chrono::steady_clock::time_point done_at{};
    providers::async_run_gemini(io.get_executor(), o, text, [&](const message& m) { r.messages.push_back(m); },
                                asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code ec, message t) {
                                  r.ec = ec;
                                  r.terminal = std::move(t);
                                  done = true;
                                  done_at = std::chrono::steady_clock::now();
                                }));
    const auto grace = o.run.stop.graceful_wait;
    bool probed = false;
    r.finished = run_until(io, [&] {
      if (done) return true;
      const auto now = std::chrono::steady_clock::now();
      if (!r.cancelled && cancel_when && cancel_when(r)) {
        r.cancelled = true;
        stop_watch.mark();
        sig.emit(asio::cancellation_type::terminal);
      }
      // Just before the grace period ends (the tree kill follows): is gemini itself still running?
      if (r.cancelled && !probed && grace > 600ms && now >= stop_watch.marked_at() + grace - 300ms) {
        probed = true;
        r.node_alive_late_in_grace = process_named(run_mark(), "node").has_value();
      }
      return false;
    }, 90s);
    if (!r.finished) {  // bounded: cancel and give the stop its time, then report
      sig.emit(asio::cancellation_type::terminal);
      run_until(io, [&] { return done; }, 20s);
    }
    r.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    if (done) r.stop_elapsed = stop_watch.until(done_at);

    EXPECT_TRUE(r.finished) << "gemini did not end within 90 s\n" << r.dump();
    EXPECT_EQ(processes_with_env(run_mark()), std::vector<int>{}) << "the run left processes behind";
    EXPECT_EQ(transport::check_run(r.messages), std::vector<std::string>{}) << r.dump();
    if (!r.messages.empty()) {
      EXPECT_EQ(r.messages.back(), r.terminal);
    }
    std::cout << "[ real gemini ] " << scenario << ": " << r.raw.lines.size() << " lines, " << r.messages.size()
              << " messages, " << transport::to_string(r.terminal.type) << ", " << r.elapsed.count() << " ms";
    if (r.stop_elapsed) std::cout << ", the stop took " << r.stop_elapsed->count() << " ms";
    std::cout << "\n";
    auto replacements = extra_replacements;
    const auto stable = stable_paths();
    replacements.insert(replacements.end(), stable.begin(), stable.end());
    record_fixture("gemini",
                   "gemini-" + gemini_cli.version() + "-" + (record_as.empty() ? scenario : record_as) + ".jsonl",
                   r.raw.lines, replacements);
    return r;
  }

  /// Cancel once the tool's `sleep` runs (looked up among the run's processes).
  std::function<bool(gemini_run&)> when_sleep_runs() const {
    return [this](gemini_run& now) {
      return sleep_runs(!now.of(message_type::tool_call).empty(), run_mark(), now.sleep_pid);
    };
  }

  std::string home = dir + "/home";
};

// ---- the raw stream-json (the mapper's ground truth) -------------------------------------------------------------------

// Every assistant `message` event's content, in order (stream-json: one per streamed text part, `delta: true`).
std::vector<std::string> raw_deltas(const cli_result& r) {
  std::vector<std::string> out;
  for (const auto* e : r.of_type("message")) {
    if (e->value("role", "") != "assistant") continue;
    EXPECT_EQ(e->value("delta", false), true) << e->dump();
    out.push_back(e->value("content", ""));
  }
  return out;
}

// init first (with the model asked for), the prompt echoed as a user message, exactly; only known event types —
// thoughts (`thought: true` parts) are not exposed in stream-json at all.
void expect_raw_frame(const cli_result& r, const std::string& scenario, const std::string& text = scenario_prompt) {
  ASSERT_GE(r.events.size(), 2u) << r.dump();
  EXPECT_EQ(r.lines.size(), r.events.size()) << "every stdout line is a JSON object\n" << r.dump();
  EXPECT_EQ(r.events[0].value("type", ""), "init");
  EXPECT_EQ(r.events[0].value("model", ""), scenario);
  EXPECT_FALSE(r.events[0].value("session_id", "").empty());
  EXPECT_EQ(r.events[1].value("type", ""), "message");
  EXPECT_EQ(r.events[1].value("role", ""), "user");
  EXPECT_TRUE(r.events[1].value("content", "") == text) << "the prompt arrived changed";
  const std::set<std::string> known = {"init", "message", "tool_use", "tool_result", "result"};
  for (const auto& e : r.events) EXPECT_TRUE(known.contains(e.value("type", ""))) << e.dump();
  EXPECT_EQ(r.dump().find("The user wants"), std::string::npos) << "a thought surfaced";
}

// ---- the normalized stream -----------------------------------------------------------------------------------------------

// session.started with gemini's own session id and the model; no thoughts (stream-json has none to map).
void expect_session(const gemini_run& r, const std::string& scenario) {
  ASSERT_FALSE(r.messages.empty());
  ASSERT_FALSE(r.raw.events.empty()) << r.dump();
  const auto& s = r.messages.front();
  EXPECT_EQ(s.type, message_type::session_started) << r.dump();
  EXPECT_EQ(s.content.at("agent"), "gemini");
  EXPECT_EQ(s.content.at("session_id"), r.raw.events[0].at("session_id"));
  EXPECT_EQ(s.content.at("model"), scenario);
  EXPECT_TRUE(r.of(message_type::assistant_thought).empty());
}

void expect_completed(const gemini_run& r, const std::string& text, int input_tokens, int output_tokens) {
  ASSERT_EQ(r.terminal.type, message_type::terminal_completed) << r.dump();
  EXPECT_FALSE(r.ec);
  EXPECT_EQ(r.terminal.content.at("text"), text);
  EXPECT_EQ(r.terminal.content.at("session_id"), r.messages.front().content.at("session_id"));
  EXPECT_EQ(r.terminal.content.at("exit_status"), "exited with code 0");
  EXPECT_EQ(r.terminal.content.at("usage").at("input_tokens"), input_tokens);
  EXPECT_EQ(r.terminal.content.at("usage").at("output_tokens"), output_tokens);
  EXPECT_FALSE(r.terminal.content.contains("invalid_output_lines")) << r.dump();
}

TEST_F(RealGemini, ToolCallAndANonAsciiAnswerStreamedChunkByChunk) {
  const auto s = scripted("tool");
  auto r = run("tool");
  expect_session(r, "tool");
  // Gemini CLI streams one delta per scripted chunk, exactly, nothing doubled or lost; the normalized stream too.
  EXPECT_EQ(joined(r.assistant()), s.text()) << r.dump();
  const auto& call = s.tool_calls.at(0);
  const auto calls = r.of(message_type::tool_call);
  ASSERT_EQ(calls.size(), 1u) << r.dump();
  // The tool id is the function call's id prefixed with the tool's name.
  EXPECT_EQ(calls[0]->content.at("tool_call_id"), "run_shell_command__" + call.at("id").get<std::string>());
  EXPECT_EQ(calls[0]->content.at("name"), "run_shell_command");
  EXPECT_EQ(calls[0]->content.at("input"), call.at("arguments"));
  const auto results = r.of(message_type::tool_completed);
  ASSERT_EQ(results.size(), 1u) << r.dump();
  EXPECT_EQ(results[0]->content.at("tool_call_id"), calls[0]->content.at("tool_call_id"));
  EXPECT_EQ(results[0]->content.at("output"), "agenthost-tool-output") << "the output without its trailing newline";
  EXPECT_TRUE(r.of(message_type::tool_failed).empty());
  // Order: the first turn's text, the tool, the answer, the terminal.
  std::vector<std::string> order;
  for (const auto& m : r.messages) {
    const std::string t(transport::to_string(m.type));
    if (order.empty() || order.back() != t) order.push_back(t);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"session.started", "assistant", "tool.call", "tool.completed", "assistant",
                                             "terminal.completed"}));
  // The final answer is the last turn's text. Usage over both calls: 100 prompt tokens each; one candidate token per
  // streamed part (thoughts and the call included: 9 + 16).
  expect_completed(r, s.last_text, 200, 25);

  // Raw: the same run's stream-json.
  expect_raw_frame(r.raw, "tool");
  EXPECT_EQ(raw_deltas(r.raw), s.text_chunks);
  std::vector<std::string> raw_order;
  for (const auto& e : r.raw.events) {
    const std::string t = e.value("type", "");
    if (raw_order.empty() || raw_order.back() != t) raw_order.push_back(t);
  }
  EXPECT_EQ(raw_order, (std::vector<std::string>{"init", "message", "tool_use", "tool_result", "message", "result"}));
  const auto uses = r.raw.of_type("tool_result");
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0]->at("status"), "success");
  EXPECT_EQ(r.raw.events.back().at("stats").at("tool_calls"), 1);
  EXPECT_EQ(mock->requests_of("tool"), (std::vector<std::string>{"complete@turn0", "complete@turn1"}));
  // No side calls (countTokens, loadCodeAssist, next-speaker check, GETs): only the two streamed model calls.
  for (const auto& rec : mock->records()) {
    if (rec.contains("path")) {
      EXPECT_NE(rec.value("path", "").find(":streamGenerateContent?alt=sse"), std::string::npos) << rec.dump();
    }
  }
}

// The prompt starts with dashes: `--prompt=<text>` keeps gemini from reading it as flags (it would otherwise take
// `--yolo` and `-p` as options); it arrives unchanged, as the echoed user message shows.
TEST_F(RealGemini, AnswerWithoutToolsToAPromptThatLooksLikeFlags) {
  const std::string flags_prompt = "--yolo -p " + scenario_prompt;
  const auto s = scripted("answer");
  auto r = run("answer", flags_prompt);
  expect_session(r, "answer");
  EXPECT_EQ(joined(r.assistant()), s.text()) << r.dump();
  EXPECT_TRUE(r.of(message_type::tool_call).empty());
  expect_completed(r, s.text(), 100, 15);
  expect_raw_frame(r.raw, "answer", flags_prompt);
  EXPECT_EQ(raw_deltas(r.raw), s.text_chunks);
  EXPECT_EQ(r.raw.events.back().at("stats").at("tool_calls"), 0);
  EXPECT_EQ(mock->requests_of("answer"), (std::vector<std::string>{"complete@turn0"}));
}

// An HTTP error (one attempt configured): gemini prints a `result` with status "error" and exits with the HTTP status
// modulo 256 (gemini-cli 0.61.0 uses the error's numeric code as its exit code).
void expect_http_failure(const gemini_run& r, const std::string& scenario, const std::string& msg, int status) {
  expect_session(r, scenario);
  ASSERT_EQ(r.terminal.type, message_type::terminal_failed) << r.dump();
  EXPECT_EQ(r.terminal.content.at("reason"), "agent_error");
  EXPECT_EQ(r.terminal.content.at("text"), msg);
  EXPECT_EQ(r.terminal.content.at("http_status"), status);
  EXPECT_EQ(r.terminal.content.at("retryable"), true);
  EXPECT_EQ(r.terminal.content.at("exit_code"), status % 256);
  EXPECT_TRUE(r.of(message_type::assistant).empty());
  expect_raw_frame(r.raw, scenario);
  ASSERT_EQ(r.raw.events.size(), 3u) << r.dump();
  const auto& result = r.raw.events.back();
  ASSERT_EQ(result.value("type", ""), "result") << r.dump();
  EXPECT_EQ(result.at("status"), "error");
  EXPECT_EQ(result.at("error").at("type"), "unknown");
  EXPECT_EQ(result.at("error").at("message"), msg);
}

TEST_F(RealGemini, Http500IsAnAgentErrorWithStatus500) {
  auto r = run("http500");
  // The status is in the message (the API's JSON error body) and in the exit code (244).
  expect_http_failure(r, "http500",
                      "[API Error: {\"error\":{\"code\":500,\"message\":\"mock internal server error\","
                      "\"status\":\"INTERNAL\"}}]",
                      500);
  EXPECT_EQ(mock->requests_of("http500"), (std::vector<std::string>{"http_error@turn0"}));
}

TEST_F(RealGemini, Http429IsAnAgentErrorWithStatus429FromTheExitCode) {
  auto r = run("http429");
  // The message carries no status: only the exit code (173 = 429 mod 256) does.
  expect_http_failure(r, "http429",
                      "[API Error: mock rate limit exceeded]\nPlease wait and try again later. To increase your "
                      "limits, request a quota increase through AI Studio, or switch to another /auth method",
                      429);
  EXPECT_EQ(mock->requests_of("http429"), (std::vector<std::string>{"http_error@turn0"}));
}

// Cancelled once the 40-s stream's first deltas are out: the provider's stop (SIGINT to the tree, 1-s grace, tree
// kill). gemini ends on SIGINT by itself mid-stream (recorded: ~0.1 s, exit 0, no `result`).
TEST_F(RealGemini, CancellationMidStream) {
  const auto s = scripted("slow");
  const std::size_t two_chunks = s.text_chunks.at(0).size() + s.text_chunks.at(1).size();
  auto r = run("slow", scenario_prompt, [&](gemini_run& now) { return joined(now.assistant()).size() >= two_chunks; });
  ASSERT_TRUE(r.cancelled) << "no delta came\n" << r.dump();
  expect_session(r, "slow");
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  EXPECT_EQ(r.terminal.type, message_type::terminal_cancelled) << r.dump();
  const std::string got = joined(r.assistant());
  ASSERT_GE(got.size(), two_chunks);
  EXPECT_LT(got.size(), s.text().size());
  EXPECT_EQ(got, s.text().substr(0, got.size())) << "what was streamed before the stop is a prefix of the script";
  expect_raw_frame(r.raw, "slow");
  EXPECT_EQ(joined(raw_deltas(r.raw)), got);
  EXPECT_TRUE(r.raw.of_type("result").empty()) << "no result event after SIGINT\n" << r.dump();
  EXPECT_LT(stopped_in(r.stop_elapsed), kStopBound) << "the stream takes 40 s; the stop must not wait for it";
}

// Cancelled while the shell tool's `sleep 30` runs. Recorded (gemini-cli 0.61.0): SIGINT to gemini's group ends gemini
// (after ~1-3.5 s) but not the `sleep`, which runs in a session of its own; the provider's stop signals the whole tree
// and then kills it, so nothing survives.
TEST_F(RealGemini, CancellationDuringAToolKillsTheToolProcess) {
  auto r = run("long-tool", scenario_prompt, when_sleep_runs());
  ASSERT_TRUE(r.sleep_pid.has_value()) << "the tool's sleep never ran\n" << r.dump();
  expect_session(r, "long-tool");
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  EXPECT_EQ(r.terminal.type, message_type::terminal_cancelled) << r.dump();
  EXPECT_EQ(joined(r.assistant()), "Sleeping.");
  const auto calls = r.of(message_type::tool_call);
  ASSERT_EQ(calls.size(), 1u) << r.dump();
  EXPECT_EQ(calls[0]->content.at("input").at("command"), "sleep 30");
  const auto closed = r.of(message_type::tool_failed);
  ASSERT_EQ(closed.size(), 1u) << r.dump();
  EXPECT_EQ(closed[0]->content.at("closed_by_finish"), true);
  expect_raw_frame(r.raw, "long-tool");
  EXPECT_TRUE(r.raw.of_type("tool_result").empty()) << r.dump();
  EXPECT_TRUE(r.raw.of_type("result").empty()) << r.dump();
  EXPECT_EQ(::kill(*r.sleep_pid, 0), -1) << "the tool's sleep survived";
  EXPECT_LT(stopped_in(r.stop_elapsed), kStopBound) << "the tool sleeps 30 s; the stop must not wait for it";
}

// The stream is cut after "Hello wor": gemini does not retry a broken stream (also not with maxAttempts 2, tried by
// hand): the deltas already printed stay, then an error result "[API Error: terminated]" and exit 1.
TEST_F(RealGemini, StreamCutEndsTheRunAfterThePartialText) {
  auto r = run("cut-retry");
  expect_session(r, "cut-retry");
  EXPECT_EQ(joined(r.assistant()), "Hello wor") << r.dump();
  ASSERT_EQ(r.terminal.type, message_type::terminal_failed) << r.dump();
  EXPECT_EQ(r.terminal.content.at("reason"), "agent_error");
  EXPECT_EQ(r.terminal.content.at("text"), "[API Error: terminated]");
  EXPECT_EQ(r.terminal.content.at("retryable"), true) << "a cut connection is transient";
  EXPECT_FALSE(r.terminal.content.contains("http_status"));
  EXPECT_EQ(r.terminal.content.at("exit_code"), 1);
  expect_raw_frame(r.raw, "cut-retry");
  EXPECT_EQ(raw_deltas(r.raw), (std::vector<std::string>{"Hello ", "wor"}));
  EXPECT_EQ(r.raw.events.back().value("type", ""), "result");
  EXPECT_EQ(mock->requests_of("cut-retry"), (std::vector<std::string>{"cut@turn0"}));
}

// HTTP 503 then an answer, with maxAttempts 2: gemini retries after its backoff (~4.5 s) and nothing of it shows in
// stream-json (stderr: "Attempt 1 failed with status 503. Retrying with backoff..."). The prompt is above 64 KiB, so
// the provider sends it through gemini's stdin (no --prompt): gemini takes it whole, as its echo shows.
TEST_F(RealGemini, ServerErrorIsRetriedSilentlyAndALongPromptGoesThroughStdin) {
  auto settings = settings_json;
  settings["general"]["maxAttempts"] = 2;
  std::ofstream(home + "/.gemini/settings.json", std::ios::trunc) << settings.dump(2);
  std::string long_prompt = "-- " + scenario_prompt;  // leading dashes and spaces, kept as they are
  for (int i = 0; long_prompt.size() <= providers::gemini_prompt_argv_max; ++i)
    long_prompt += " filler " + std::to_string(i) + " é";
  long_prompt += " end. ";  // trailing space, kept too
  const auto s = scripted("flaky");
  auto r = run("flaky", long_prompt, {}, std::nullopt, {}, {{long_prompt, "<a prompt of " +
                                                              std::to_string(long_prompt.size()) + " bytes>"}});
  expect_session(r, "flaky");
  EXPECT_EQ(joined(r.assistant()), s.text()) << r.dump();
  EXPECT_TRUE(r.of(message_type::status).empty()) << "the retry leaves no trace in stream-json";
  expect_completed(r, s.text(), 100, 5);
  expect_raw_frame(r.raw, "flaky", long_prompt);
  EXPECT_EQ(mock->requests_of("flaky"), (std::vector<std::string>{"http_error@turn0", "complete@turn0"}));
}

// The same cancellation with the stop policy the pi provider uses (SIGTERM to the leader). Recorded (gemini-cli
// 0.61.0): the leader — the relaunching parent node — does not end on a SIGTERM of its own (still running after 10 s
// with AGENTHOST_TEST_GRACE_MS=10000; by hand after 12 s), which is why the Gemini provider interrupts with SIGINT;
// only the tree kill ends this run.
TEST_F(RealGemini, SigtermToTheLeaderDoesNotStopGemini) {
  auto policy = process::stop_policy::sigterm();
  if (const char* g = std::getenv("AGENTHOST_TEST_GRACE_MS")) policy.graceful_wait = std::chrono::milliseconds(std::atoi(g));
  auto r = run("long-tool", scenario_prompt, when_sleep_runs(), policy, "long-tool-sigterm");
  ASSERT_TRUE(r.sleep_pid.has_value()) << "the tool's sleep never ran\n" << r.dump();
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  EXPECT_EQ(r.terminal.type, message_type::terminal_cancelled) << r.dump();
  EXPECT_EQ(r.of(message_type::tool_call).size(), 1u);
  EXPECT_TRUE(r.raw.of_type("result").empty()) << r.dump();
  EXPECT_TRUE(r.node_alive_late_in_grace) << "gemini now ends on SIGTERM: update the README and the provider's doc";
  EXPECT_GE(r.stop_elapsed.value_or(0ms), policy.graceful_wait) << "only the tree kill after the grace period ends it";
  EXPECT_EQ(::kill(*r.sleep_pid, 0), -1) << "the tool's sleep survived";
}

#ifdef AGENTHOST_CLI
// `agenthost run --agent gemini` interrupted by SIGINT once the first text delta is out: terminal.cancelled, exit code
// 130, nothing left (gemini's own tree included).
TEST_F(RealGemini, CliSigintCancelsTheRunAndExits130) {
  const auto o = options("slow", /*relaunch=*/true);
  expect_agenthost_run_interrupted(
      "gemini", o.executable.string(),
      {"--model", "slow", "--cwd", work, "--arg=--skip-trust", "--arg=--approval-mode=yolo"}, o.env,
      "{\"type\":\"assistant\",", dir, run_mark());
}
#endif

}  // namespace
