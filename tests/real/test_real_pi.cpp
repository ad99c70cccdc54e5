// The real pi CLI (installed from npm by scripts/install-agents.sh into .npm-agents/) against the scripted mock model
// server (tests/mockmodel/), through the provider and through the agenthost program. Checks that what pi really prints
// maps to the scripted content exactly, that failures are classified, and that a stop leaves no process behind.
//
// Skips (naming why) when pi is not installed or python3 is missing. AGENTHOST_REAL_PI overrides the pi executable.
// AGENTHOST_RECORD_FIXTURES=1 writes what pi printed into fixtures/pi/recorded/pi-<version>-<scenario>.jsonl.
#include "cli_interrupt.hpp"
#include "real_cli_util.hpp"

#include <agenthost/providers/pi.hpp>
#include <agenthost/transport/contract_checker.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <nlohmann/json.hpp>

#include <spawn.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <iostream>
#include <memory>
#include <optional>

using namespace agenthost;
using namespace agenthost::test;
using namespace agenthost::test::real;

namespace {

// A mapper that hands every line to the pi mapper and keeps a copy (what pi printed, for diagnostics and recording).
class recording_mapper final : public mapper::event_mapper {
 public:
  recording_mapper(std::unique_ptr<mapper::event_mapper> inner, std::shared_ptr<std::vector<std::string>> lines)
      : inner_(std::move(inner)), lines_(std::move(lines)) {}
  void on_line(std::string_view line, std::vector<message>& out) override {
    lines_->emplace_back(line);
    inner_->on_line(line, out);
  }
  void on_oversize_line(std::string_view head, std::size_t total, std::vector<message>& out) override {
    lines_->push_back("<oversize line of " + std::to_string(total) + " bytes>");
    inner_->on_oversize_line(head, total, out);
  }
  [[nodiscard]] bool agent_finished() const noexcept override { return inner_->agent_finished(); }
  void finish(const mapper::run_end& end, std::vector<message>& out) override { inner_->finish(end, out); }
  [[nodiscard]] const mapper::mapper_stats& stats() const noexcept override { return inner_->stats(); }

 private:
  std::unique_ptr<mapper::event_mapper> inner_;
  std::shared_ptr<std::vector<std::string>> lines_;
};

std::string assistant_text(const std::vector<message>& ms) {
  std::string s;
  for (const auto& m : ms)
    if (m.type == message_type::assistant) s += m.content.at("text").get<std::string>();
  return s;
}

std::vector<std::string> all_of(const std::vector<message>& ms, message_type t, const char* field) {
  std::vector<std::string> out;
  for (const auto& m : ms)
    if (m.type == t) out.push_back(m.content.at(field).get<std::string>());
  return out;
}

std::string dump(const std::vector<message>& ms) {
  std::string s;
  for (const auto& m : ms) s += "  " + m.to_json_line() + "\n";
  return s;
}

// The scenarios as pi models of one custom provider "mock".
json models_json(const std::string& base_url) {
  json models = json::array();
  for (const auto& [name, _] : scenarios().items())
    models.push_back({{"id", name}, {"reasoning", true}, {"contextWindow", 32000}, {"maxTokens", 4096}});
  return {{"providers",
           {{"mock",
             {{"baseUrl", base_url},
              {"api", "openai-completions"},
              {"apiKey", "mock-key"},
              {"compat", {{"supportsDeveloperRole", false}, {"supportsUsageInStreaming", true}}},
              {"models", models}}}}}};
}

// pi's own retry of failed model calls: one retry after 100 ms (instead of three after 2, 4, 8 s), and no extra
// retries inside the OpenAI client. Supported by pi 0.73.1 (settings-manager.js getRetrySettings /
// getProviderRetrySettings).
const json settings_json = {{"retry", {{"enabled", true}, {"maxRetries", 1}, {"baseDelayMs", 100},
                                       {"provider", {{"maxRetries", 0}}}}}};

class RealPi : public real_cli_test {
 protected:
  RealPi() : real_cli_test("pi", "AGENTHOST_TEST_TOKEN") {}

  struct result {
    boost::system::error_code ec;
    std::vector<message> messages;
    message terminal;
    std::vector<std::string> pi_lines;  // what pi printed on stdout
    std::chrono::milliseconds elapsed{};  // the whole run, pi's start-up included
    std::optional<std::chrono::milliseconds> stop_elapsed;  // from the cancellation to the terminal, if cancelled
  };

  void SetUp() override {
    start(pi_unavailable_reason(), {dir + "/home", dir + "/agent"});
    if (stopped_early()) return;
    std::ofstream(dir + "/agent/models.json") << models_json(mock->base_url()).dump(2);
    std::ofstream(dir + "/agent/settings.json") << settings_json.dump(2);
  }

  // Isolated: own HOME and config dir, offline, no proxies, only the mock provider; the token marks every process.
  process::environment_options pi_environment() const {
    return environment({"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_BASE_URL"},
                       {{"HOME", dir + "/home"},
                        {"PI_CODING_AGENT_DIR", dir + "/agent"},
                        {"PI_OFFLINE", "1"},
                        {"PI_SKIP_VERSION_CHECK", "1"}});
  }

  providers::pi_options options(const std::string& scenario) const {
    providers::pi_options o{.executable = pi_executable(),
                            .provider = "mock",
                            .model = scenario,
                            .thinking_level = "low",
                            .no_session = true,
                            .working_directory = work,
                            .env = pi_environment(),
                            .pi_version = providers::version::parse(pi_version_string()),
                            .reaper_path = AGENTHOST_REAPER};
    o.run.deadline = std::chrono::seconds(60);
    o.run.first_event_timeout = std::chrono::seconds(30);
    return o;
  }

  // Runs pi to its end. `cancel_when` is asked after every message and may also poll (e.g. for a tool's process):
  // once it says yes, the run is cancelled through its cancellation slot.
  result run(const std::string& scenario, const providers::pi_options& o,
             const std::function<bool(const std::vector<message>&)>& cancel_when = {},
             std::unique_ptr<mapper::event_mapper> pi_mapper = nullptr) {
    if (!pi_mapper) pi_mapper = providers::make_pi_mapper(o);
    result r;
    auto lines = std::make_shared<std::vector<std::string>>();
    bool done = false;
    asio::cancellation_signal sig;
    const auto t0 = std::chrono::steady_clock::now();
    stop_clock stop_watch;
    providers::async_run_agent(
        io.get_executor(), providers::pi_spawn_options(o, scenario_prompt),
        std::make_unique<recording_mapper>(std::move(pi_mapper), lines), o.run,
        [&](const message& m) { r.messages.push_back(m); },
        asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code ec, message t) {
          r.ec = ec;
          r.terminal = std::move(t);
          done = true;
        }));
    const bool finished = run_until(io, [&] {
      if (!done && !stop_watch.marked() && cancel_when && cancel_when(r.messages)) {
        stop_watch.mark();
        sig.emit(asio::cancellation_type::terminal);
      }
      return done;
    }, 90s);
    const auto ended = std::chrono::steady_clock::now();
    r.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(ended - t0);
    r.stop_elapsed = stop_watch.until(ended);
    r.pi_lines = *lines;
    EXPECT_TRUE(finished) << "the run did not end within 90 s";
    EXPECT_EQ(transport::check_run(r.messages), std::vector<std::string>{}) << dump(r.messages);
    if (!r.messages.empty()) {
      EXPECT_EQ(r.messages.back(), r.terminal);
    }
    EXPECT_EQ(processes_with_env(run_mark()), std::vector<int>{})
        << "the run left processes behind";
    if (scenarios().contains(scenario)) record(scenario, r);
    std::cout << "[ real pi ] " << scenario << ": " << r.pi_lines.size() << " lines from pi, " << r.messages.size()
              << " messages, " << r.elapsed.count() << " ms\n";
    return r;
  }

  // AGENTHOST_RECORD_FIXTURES=1: what pi printed → fixtures/pi/recorded/, with the temporary paths replaced.
  void record(const std::string& scenario, const result& r) const {
    const std::string version = pi_version_string();
    record_fixture("pi", "pi-" + (version.empty() ? "unknown" : version) + "-" + scenario + ".jsonl", r.pi_lines,
                   stable_paths());
  }

  std::vector<std::string> mock_requests_of(const std::string& scenario) const { return mock->requests_of(scenario); }
};

void expect_completed_with_script(const std::vector<message>& ms, const message& terminal, const script& s) {
  ASSERT_EQ(terminal.type, message_type::terminal_completed) << dump(ms);
  ASSERT_FALSE(ms.empty());
  EXPECT_EQ(ms.front().type, message_type::session_started);
  // The exact scripted text: nothing lost, nothing doubled, streamed as the model streamed it — every delta ends where
  // a scripted chunk ends (the provider merges the chunks that arrive in one read).
  EXPECT_EQ(assistant_text(ms), s.text());
  std::set<std::size_t> chunk_ends;
  std::size_t at = 0;
  for (const auto& c : s.text_chunks) chunk_ends.insert(at += c.size());
  at = 0;
  for (const auto& d : all_of(ms, message_type::assistant, "text"))
    EXPECT_TRUE(chunk_ends.count(at += d.size()) == 1) << "a delta ends inside a scripted chunk, at byte " << at;
  EXPECT_EQ(terminal.content.at("text"), s.last_text);
  EXPECT_EQ(terminal.content.at("stop_reason"), "stop");
  EXPECT_FALSE(terminal.content.value("text_diverged", false));
  // Thinking: pi exposes reasoning_content as thinking blocks; one assistant.thought per block, in order.
  EXPECT_EQ(all_of(ms, message_type::assistant_thought, "text"), s.thoughts);
}

TEST_F(RealPi, ToolCallWithThinkingAndANonAsciiAnswer) {
  const auto s = scripted("tool");
  auto r = run("tool", options("tool"));
  expect_completed_with_script(r.messages, r.terminal, s);
  EXPECT_EQ(r.messages.front().content.at("cwd"), work);

  const auto calls = of_type(r.messages, message_type::tool_call);
  ASSERT_EQ(calls.size(), 1u) << dump(r.messages);
  const auto& call = s.tool_calls.at(0);
  EXPECT_EQ(calls[0]->content.at("tool_call_id"), call.at("id"));
  EXPECT_EQ(calls[0]->content.at("name"), "bash");
  EXPECT_EQ(calls[0]->content.at("input"), call.at("arguments"));
  const auto done = of_type(r.messages, message_type::tool_completed);
  ASSERT_EQ(done.size(), 1u) << dump(r.messages);
  EXPECT_EQ(done[0]->content.at("tool_call_id"), call.at("id"));
  EXPECT_EQ(done[0]->content.at("output"), "agenthost-tool-output\n");
  EXPECT_TRUE(of_type(r.messages, message_type::tool_failed).empty());

  // Usage is summed over both model calls (the mock reports 100 prompt tokens per call, one output token per chunk).
  const auto& usage = r.terminal.content.at("usage");
  EXPECT_EQ(usage.at("input_tokens"), 200);
  EXPECT_EQ(usage.at("output_tokens"), 12 + 16);
  EXPECT_EQ(mock_requests_of("tool"), (std::vector<std::string>{"complete@turn0", "complete@turn1"}));
}

TEST_F(RealPi, AnswerWithoutTools) {
  const auto s = scripted("answer");
  auto r = run("answer", options("answer"));
  expect_completed_with_script(r.messages, r.terminal, s);
  EXPECT_TRUE(of_type(r.messages, message_type::tool_call).empty());
  EXPECT_EQ(r.terminal.content.at("usage").at("input_tokens"), 100);
  EXPECT_EQ(mock_requests_of("answer"), (std::vector<std::string>{"complete@turn0"}));
}

TEST_F(RealPi, StreamedThinkingComesPerTurn) {
  const auto s = scripted("tool");
  auto o = options("tool");
  o.thinking_output = mapper::thinking_mode::stream;
  auto r = run("tool-stream-thinking", o);
  expect_completed_with_script(r.messages, r.terminal, s);
  // The first turn's thinking is out before its tool call, the second's after the tool result. (pi 0.73.1 with
  // openai-completions ends every block only when the model's response is complete, so a thought never comes before
  // the text of its own turn.)
  std::vector<message_type> order;
  for (const auto& m : r.messages)
    if (m.type == message_type::assistant_thought || m.type == message_type::tool_call ||
        m.type == message_type::tool_completed)
      order.push_back(m.type);
  EXPECT_EQ(order, (std::vector<message_type>{message_type::assistant_thought, message_type::tool_call,
                                              message_type::tool_completed, message_type::assistant_thought}))
      << dump(r.messages);
}

// pi retries 5xx/429 itself (here once, after 100 ms, see settings_json) and then gives up; JSON mode exits 0.
void expect_http_failure(const std::vector<message>& ms, const message& terminal, int status, bool retryable,
                         const std::string& text) {
  ASSERT_EQ(terminal.type, message_type::terminal_failed) << dump(ms);
  EXPECT_EQ(terminal.content.at("reason"), "agent_error");
  EXPECT_EQ(terminal.content.at("http_status"), status);
  EXPECT_EQ(terminal.content.at("retryable"), retryable);
  EXPECT_EQ(terminal.content.at("text"), std::to_string(status) + " " + text);
  EXPECT_EQ(terminal.content.at("stop_reason"), "error");
  EXPECT_EQ(assistant_text(ms), "");
  const auto statuses = of_type(ms, message_type::status);
  if (retryable) {
    ASSERT_EQ(statuses.size(), 2u) << dump(ms);
    EXPECT_EQ(statuses[0]->content.at("kind"), "retry");
    EXPECT_EQ(statuses[0]->content.at("attempt"), 1);
    EXPECT_EQ(statuses[0]->content.at("delay_ms"), 100);
    EXPECT_EQ(statuses[1]->content.at("retry_end"), true);
    EXPECT_EQ(statuses[1]->content.at("success"), false);
  } else {
    EXPECT_TRUE(statuses.empty()) << dump(ms);
  }
}

TEST_F(RealPi, Http500IsARetryableAgentError) {
  auto r = run("http500", options("http500"));
  expect_http_failure(r.messages, r.terminal, 500, true, "mock internal server error");
  EXPECT_EQ(mock_requests_of("http500"), (std::vector<std::string>{"http_error@turn0", "http_error@turn0"}));
}

TEST_F(RealPi, Http429IsARetryableAgentError) {
  auto r = run("http429", options("http429"));
  expect_http_failure(r.messages, r.terminal, 429, true, "mock rate limit exceeded");
  EXPECT_EQ(mock_requests_of("http429"), (std::vector<std::string>{"http_error@turn0", "http_error@turn0"}));
}

TEST_F(RealPi, Http400IsNotRetried) {
  auto r = run("http400", options("http400"));
  expect_http_failure(r.messages, r.terminal, 400, false, "mock bad request");
  EXPECT_EQ(mock_requests_of("http400"), (std::vector<std::string>{"http_error@turn0"}));
}

TEST_F(RealPi, ServerErrorThenSuccessOnPisRetry) {
  const auto s = scripted("flaky");
  auto r = run("flaky", options("flaky"));
  expect_completed_with_script(r.messages, r.terminal, s);
  const auto statuses = of_type(r.messages, message_type::status);
  ASSERT_EQ(statuses.size(), 2u) << dump(r.messages);
  EXPECT_EQ(statuses[0]->content.at("error"), "503 mock overloaded");
  EXPECT_EQ(statuses[1]->content.at("retry_end"), true);
  EXPECT_EQ(statuses[1]->content.at("success"), true);
  EXPECT_EQ(mock_requests_of("flaky"), (std::vector<std::string>{"http_error@turn0", "complete@turn0"}));
}

// Regression (mapper, pi 0.73.1): when the model stream is cut after "Hello wor", pi ends that message with
// stopReason "error" / errorMessage "terminated", retries by itself and streams "Hello world." again. The mapper
// emitted both attempts' deltas ("Hello worHello world.") without any warning. Now the retry's text that repeats the
// failed attempt's streamed text is not emitted again (a retry that diverges gets a `retry_diverged` warning), and the
// failed attempt's buffered thinking is dropped (contract §1.2).
TEST_F(RealPi, StreamCutAndRetriedByPiIsNotDuplicated) {
  const auto s = scripted("cut-retry");
  auto r = run("cut-retry", options("cut-retry"));
  ASSERT_EQ(r.terminal.type, message_type::terminal_completed) << dump(r.messages);
  EXPECT_EQ(r.terminal.content.at("text"), "Hello world.");
  EXPECT_TRUE(assistant_text(r.messages) == "Hello world." || r.terminal.content.value("text_diverged", false))
      << "the streamed text is not the answer and nothing says so\n" << dump(r.messages);
  EXPECT_EQ(mock_requests_of("cut-retry"), (std::vector<std::string>{"cut@turn0", "complete@turn0"}));
}

// pi never replays a previous turn's text: each assistant message starts empty and its deltas are what the model sent.
// With the replay rule off, a model that repeats its tool-turn text keeps every character.
TEST_F(RealPi, RepeatedToolTurnTextIsKeptWithoutReplayDedupe) {
  const auto s = scripted("repeat-after-tool");
  auto o = options("repeat-after-tool");
  auto r = run("repeat-after-tool", o, {},
               std::make_unique<mapper::pi_mapper>(mapper::pi_mapper_options{.dedupe_replayed_text = false}));
  expect_completed_with_script(r.messages, r.terminal, s);
}

// Regression (mapper default, pi 0.73.1): with dedupe_replayed_text = true (the provider's default) the same real
// output lost the model's genuine "Let me check." at the start of the second answer. The replay rule now applies only
// to text that arrives already accumulated (a snapshot or a single delta holding the earlier text and more), not to
// text generated in deltas.
TEST_F(RealPi, RepeatedToolTurnTextIsKeptByDefault) {
  const auto s = scripted("repeat-after-tool");
  auto r = run("repeat-after-tool-default", options("repeat-after-tool"));
  expect_completed_with_script(r.messages, r.terminal, s);
}

TEST_F(RealPi, CancellationMidStream) {
  const auto s = scripted("slow");
  auto r = run("slow", options("slow"), [](const std::vector<message>& ms) {
    return !ms.empty() && ms.back().type == message_type::assistant;
  });
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  ASSERT_EQ(r.terminal.type, message_type::terminal_cancelled) << dump(r.messages);
  const std::string got = assistant_text(r.messages);
  EXPECT_FALSE(got.empty());
  EXPECT_EQ(s.text().substr(0, got.size()), got) << "what was streamed before the stop is a prefix of the script";
  EXPECT_LT(got.size(), s.text().size());
  EXPECT_LT(stopped_in(r.stop_elapsed), kStopBound) << "the stream takes 40 s; the stop must not wait for it";
}

TEST_F(RealPi, CancellationDuringAToolKillsTheToolProcess) {
  std::optional<int> sleep_pid;
  auto r = run("long-tool", options("long-tool"), [&](const std::vector<message>& ms) {
    // Once the call is announced, wait (polling /proc, bounded by the run's deadline) for its `sleep 30` to run.
    return sleep_runs(!of_type(ms, message_type::tool_call).empty(), run_mark(), sleep_pid);
  });
  ASSERT_TRUE(sleep_pid.has_value()) << "the tool's sleep never ran\n" << dump(r.messages);
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  ASSERT_EQ(r.terminal.type, message_type::terminal_cancelled) << dump(r.messages);
  const auto failed = of_type(r.messages, message_type::tool_failed);
  ASSERT_EQ(failed.size(), 1u) << dump(r.messages);
  EXPECT_EQ(failed[0]->content.at("tool_call_id"), "call_mock_sleep_1");
  EXPECT_EQ(failed[0]->content.value("closed_by_finish", false), true);
  EXPECT_EQ(process_named(run_mark(), "sleep"), std::nullopt) << "the tool's sleep survived";
  EXPECT_LT(stopped_in(r.stop_elapsed), kStopBound) << "the tool sleeps 30 s; the stop must not wait for it";
}

#ifdef AGENTHOST_CLI
TEST_F(RealPi, CliSigintCancelsTheRunAndExits130) {
  const auto r = expect_agenthost_run_interrupted(
      "pi", pi_executable(), {"--provider", "mock", "--model", "slow", "--no-session", "--cwd", work},
      pi_environment(), "{\"type\":\"assistant\",", dir, run_mark());
  std::cout << "[ real pi ] agenthost run + SIGINT: " << r.messages.size() << " messages, " << r.elapsed.count()
            << " ms\n";
}
#endif

}  // namespace
