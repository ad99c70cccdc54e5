// The Gemini CLI provider: its command lines, and runs through a real child process (the fake agent replaying what
// gemini 0.61.0 printed, fixtures/gemini/recorded/), including start failures and cancellation.
#include "provider_fixture.hpp"

#include <agenthost/mapper/gemini_mapper.hpp>
#include <agenthost/providers/gemini.hpp>

#include <nlohmann/json.hpp>

using namespace agenthost;
using namespace agenthost::test;
using providers::gemini_options;
using transport::message;
using transport::message_type;

namespace {

const std::string fixtures = AGENTHOST_FIXTURES_DIR;
std::string recorded(const std::string& scenario) {
  return fixtures + "/gemini/recorded/gemini-0.61.0-" + scenario + ".jsonl";
}

using args = std::vector<std::string>;

args arguments(const gemini_options& o, std::string_view prompt) {
  auto a = providers::build_gemini_arguments(o, prompt);
  EXPECT_TRUE(a.has_value()) << (a.has_value() ? "" : a.error());
  return a.has_value() ? *a : args{};
}

std::string argument_error(const gemini_options& o, std::string_view prompt) {
  auto a = providers::build_gemini_arguments(o, prompt);
  EXPECT_FALSE(a.has_value()) << "accepted";
  return a.has_value() ? std::string() : a.error();
}

TEST(GeminiArguments, PromptIsGluedToItsFlagSoItIsNeverAFlag) {
  EXPECT_EQ(arguments({}, "-rf /"), (args{"--output-format", "stream-json", "--prompt=-rf /"}));
  EXPECT_EQ(arguments({}, "--help"), (args{"--output-format", "stream-json", "--prompt=--help"}));
  EXPECT_EQ(arguments({}, "a=b\nc"), (args{"--output-format", "stream-json", "--prompt=a=b\nc"}));
}

TEST(GeminiArguments, AllOptionsInOrderExtraArgsFirst) {
  const gemini_options o{.model = "gemini-2.5-pro",
                         .session_id = "58ca36f0-8b3f-450e-b98b-017f1aae1da2",
                         .extra_args = {"--debug", "--policy", "p.toml"},
                         .approval_mode = providers::gemini_approval_mode::yolo,
                         .skip_trust = true,
                         .sandbox = true,
                         .include_directories = {"/src/lib", "../docs"}};
  EXPECT_EQ(arguments(o, "fix it"),
            (args{"--debug", "--policy", "p.toml", "--output-format", "stream-json", "-m", "gemini-2.5-pro",
                  "--skip-trust", "--approval-mode=yolo", "--sandbox", "--include-directories", "/src/lib",
                  "--include-directories", "../docs", "--resume", "58ca36f0-8b3f-450e-b98b-017f1aae1da2",
                  "--prompt=fix it"}));
  EXPECT_EQ(arguments({.approval_mode = providers::gemini_approval_mode::default_mode}, "x").at(2),
            "--approval-mode=default");
  EXPECT_EQ(arguments({.approval_mode = providers::gemini_approval_mode::auto_edit}, "x").at(2),
            "--approval-mode=auto_edit");
  EXPECT_EQ(arguments({.approval_mode = providers::gemini_approval_mode::plan}, "x").at(2), "--approval-mode=plan");
}

TEST(GeminiArguments, InvalidOptionsSayWhich) {
  EXPECT_NE(argument_error({}, "").find("empty"), std::string::npos);
  EXPECT_NE(argument_error({.session_id = "--yolo"}, "x").find("session id '--yolo'"), std::string::npos);
  EXPECT_NE(argument_error({.session_id = ""}, "x").find("session id"), std::string::npos);
  EXPECT_NE(argument_error({.model = "-x"}, "x").find("model '-x'"), std::string::npos);
  EXPECT_NE(argument_error({.include_directories = {"a,b"}}, "x").find("include directory 'a,b'"), std::string::npos);
  EXPECT_NE(argument_error({.include_directories = {""}}, "x").find("include directory"), std::string::npos);
  gemini_options with_stdin;
  with_stdin.run.stdin_data = "x";
  EXPECT_NE(argument_error(with_stdin, "x").find("stdin_data"), std::string::npos);
  const std::string huge(providers::gemini_prompt_stdin_max + 1, 'x');
  EXPECT_NE(argument_error({}, huge).find("at most 8388608 bytes"), std::string::npos);
}

TEST(GeminiArguments, LongPromptsGoThroughStdin) {
  const std::string at_limit(providers::gemini_prompt_argv_max, 'a');
  auto small = providers::build_gemini_command({}, at_limit);
  ASSERT_TRUE(small.has_value());
  EXPECT_FALSE(small->stdin_text.has_value());
  EXPECT_EQ(small->args.back(), "--prompt=" + at_limit);
  const std::string above = at_limit + "b";
  auto large = providers::build_gemini_command({}, above);
  ASSERT_TRUE(large.has_value());
  EXPECT_EQ(large->args, (args{"--output-format", "stream-json"})) << "no --prompt: stdin alone is the prompt";
  EXPECT_EQ(large->stdin_text, above);
  auto forced = providers::build_gemini_command({.prompt_delivery = providers::gemini_prompt_delivery::stdin}, "-x");
  ASSERT_TRUE(forced.has_value());
  EXPECT_EQ(forced->stdin_text, "-x");
  auto argv_only = providers::build_gemini_command({.prompt_delivery = providers::gemini_prompt_delivery::argv}, above);
  ASSERT_TRUE(argv_only.has_value());
  EXPECT_FALSE(argv_only->stdin_text.has_value());
  // A NUL byte cannot be in an argument (it would end it silently): stdin, or an error when argv is forced.
  const std::string with_nul("a\0b", 3);
  auto nul = providers::build_gemini_command({}, with_nul);
  ASSERT_TRUE(nul.has_value());
  EXPECT_EQ(nul->stdin_text, with_nul);
  EXPECT_NE(argument_error({.prompt_delivery = providers::gemini_prompt_delivery::argv}, with_nul).find("NUL"),
            std::string::npos);
  // make_gemini_run: a pipe for the prompt, /dev/null otherwise.
  auto run = providers::make_gemini_run({}, above);
  ASSERT_TRUE(run.spawn.has_value());
  EXPECT_EQ(run.spawn->stdin_mode, process::stdin_kind::pipe);
  EXPECT_EQ(run.run.stdin_data, above);
  auto plain = providers::make_gemini_run({}, "hi");
  ASSERT_TRUE(plain.spawn.has_value());
  EXPECT_EQ(plain.spawn->stdin_mode, process::stdin_kind::null);
  EXPECT_FALSE(plain.run.stdin_data.has_value());
}

TEST(GeminiArguments, StopPolicyInterruptsTheWholeTreeBriefly) {
  const gemini_options o;
  EXPECT_EQ(o.run.stop.interrupt_signal, SIGINT);
  EXPECT_EQ(o.run.stop.interrupt_target, process::signal_target::tree);
  EXPECT_TRUE(o.run.stop.interrupt_bytes.empty());
  EXPECT_EQ(o.run.stop.graceful_wait, std::chrono::milliseconds(1000));
}

class GeminiProvider : public provider_run_fixture<gemini_options> {
 protected:
  GeminiProvider() : provider_run_fixture("gemini") {}

  struct result : run_result {
    std::vector<std::string> lines;  // as the agent printed them (on_agent_line)
  };

  // Keeps the agent's raw lines too: several tests compare them with the transcript or read the stdin digest there.
  result run(gemini_options o, std::string_view prompt, cancel_predicate cancel_when = {}) {
    std::vector<std::string> lines;
    o.run.on_agent_line = [&](std::string_view l) { lines.emplace_back(l); };
    auto r = run_to_end([&](auto on_message, auto done) {
      providers::async_run_gemini(io.get_executor(), o, prompt, std::move(on_message), std::move(done));
    }, cancel_when);
    return {std::move(r), std::move(lines)};
  }
};

TEST_F(GeminiProvider, ToolRunThroughARealProcessGivesTheMappersMessages) {
  auto o = stand_in({"replay", recorded("tool"), "--chunk", "7"});
  o.model = "tool";
  o.skip_trust = true;
  auto r = run(o, "-p do it");
  EXPECT_FALSE(r.ec);
  EXPECT_EQ(recorded_argv(), (args{"--output-format", "stream-json", "-m", "tool", "--skip-trust", "--prompt=-p do it"}));
  EXPECT_EQ(r.lines, read_lines(recorded("tool")));
  const auto expected = merged_text(mapped<mapper::gemini_mapper>(recorded("tool"), {.status = process::exited{0}}));
  const auto got = merged_text(r.messages);
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(got[i], expected[i]) << i;
  EXPECT_EQ(r.terminal.type, message_type::terminal_completed);
  EXPECT_EQ(r.terminal.content.at("exit_status"), "exited with code 0");
}

TEST_F(GeminiProvider, HttpErrorExitCodeReachesTheMapper) {
  auto r = run(stand_in({"replay", recorded("http429"), "exit", "173"}), "x");
  EXPECT_EQ(r.terminal.type, message_type::terminal_failed);
  EXPECT_EQ(r.terminal.content.at("reason"), "agent_error");
  EXPECT_EQ(r.terminal.content.at("http_status"), 429);
  EXPECT_EQ(r.terminal.content.at("retryable"), true);
  EXPECT_EQ(r.terminal.content.at("exit_code"), 173);
}

TEST_F(GeminiProvider, ResumeReportsTheSession) {
  auto o = stand_in({"replay", recorded("answer")});
  o.session_id = nlohmann::json::parse(read_lines(recorded("answer")).at(0)).at("session_id").get<std::string>();
  auto r = run(o, "again");
  EXPECT_EQ(recorded_argv(), (args{"--output-format", "stream-json", "--resume", *o.session_id, "--prompt=again"}));
  ASSERT_FALSE(r.messages.empty());
  EXPECT_EQ(r.messages.front().type, message_type::session_resumed);
  EXPECT_EQ(r.messages.front().content.at("resume"), "resumed");
  EXPECT_EQ(r.terminal.type, message_type::terminal_completed);
}

TEST_F(GeminiProvider, LongPromptArrivesWholeOnStdin) {
  // stdin-digest prints {"type":"stdin_digest",…} (an event type gemini's mapper ignores) before the replay.
  std::string prompt;
  for (int i = 0; prompt.size() <= providers::gemini_prompt_argv_max; ++i) prompt += "line " + std::to_string(i) + " €\n";
  auto r = run(stand_in({"stdin-digest", "replay", recorded("answer")}), prompt);
  EXPECT_EQ(recorded_argv(), (args{"--output-format", "stream-json"}));
  ASSERT_FALSE(r.lines.empty());
  const auto digest = nlohmann::json::parse(r.lines.front());
  EXPECT_EQ(digest.at("type"), "stdin_digest");
  EXPECT_EQ(digest.at("bytes"), prompt.size());
  EXPECT_EQ(r.terminal.type, message_type::terminal_completed);
  EXPECT_FALSE(r.terminal.content.contains("invalid_output_lines"));
}

TEST_F(GeminiProvider, StartFailuresAreTerminalMessages) {
  auto missing = run(options(dir + "/no-such-gemini"), "x");
  EXPECT_FALSE(missing.ec);
  ASSERT_EQ(missing.messages.size(), 1u);
  EXPECT_EQ(missing.terminal.type, message_type::terminal_failed);
  EXPECT_EQ(missing.terminal.content.at("reason"), "start_failed");
  EXPECT_NE(missing.terminal.content.at("text").get<std::string>().find("no-such-gemini"), std::string::npos);

  auto invalid = run(stand_in({"replay", recorded("answer")}), "");
  ASSERT_EQ(invalid.messages.size(), 1u);
  EXPECT_EQ(invalid.terminal.content.at("reason"), "start_failed");
  EXPECT_EQ(invalid.terminal.content.at("error"), "invalid_options");
  EXPECT_FALSE(std::filesystem::exists(dir + "/argv")) << "nothing was spawned";

  // Forced onto argv, a prompt above the kernel's per-argument limit cannot start.
  auto o = stand_in({"replay", recorded("answer")});
  o.prompt_delivery = providers::gemini_prompt_delivery::argv;
  auto too_long = run(o, std::string(std::size_t{200} << 10, 'x'));
  EXPECT_EQ(too_long.terminal.content.at("reason"), "start_failed");
  EXPECT_EQ(too_long.terminal.content.at("error"), "argument_list_too_long");
}

TEST_F(GeminiProvider, CancelledDuringAToolStopsTheWholeTree) {
  // The stand-in ignores SIGINT (so the tree kill has to end it) and leaves a child in a session of its own, like
  // gemini's shell tool; it then hangs after the tool_use line.
  auto o =
      stand_in({"ignore-sigint", "setsid-child", "replay", recorded("long-tool"), "--delay-ms", "20", "never-exit"});
  o.run.stop.graceful_wait = std::chrono::milliseconds(200);
  auto r = run(o, "x", [](const message& m) { return m.type == message_type::tool_call; });
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  EXPECT_EQ(r.terminal.type, message_type::terminal_cancelled);
  std::vector<std::string> types;
  for (const auto& m : r.messages) types.emplace_back(transport::to_string(m.type));
  EXPECT_EQ(types, (std::vector<std::string>{"session.started", "assistant", "tool.call", "tool.failed",
                                             "terminal.cancelled"}));
  EXPECT_EQ(r.messages[3].content.at("closed_by_finish"), true);
}

TEST_F(GeminiProvider, CancelledMidStream) {
  auto o = stand_in({"replay", recorded("slow"), "--delay-ms", "50", "never-exit"});
  auto r = run(o, "x", [](const message& m) { return m.type == message_type::assistant; });
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  EXPECT_EQ(r.terminal.type, message_type::terminal_cancelled);
  EXPECT_EQ(r.terminal.content.at("session_id"),
            nlohmann::json::parse(read_lines(recorded("slow")).at(0)).at("session_id").get<std::string>());
}

TEST_F(GeminiProvider, LingeringAfterTheResultIsStoppedAndStillCompleted) {
  auto o = stand_in({"replay", recorded("answer"), "never-exit"});
  o.run.linger_after_finish = std::chrono::milliseconds(100);
  auto r = run(o, "x");
  EXPECT_FALSE(r.ec);
  ASSERT_EQ(r.terminal.type, message_type::terminal_completed);
  EXPECT_EQ(r.terminal.content.at("stopped_after_finish"), true);
}

TEST_F(GeminiProvider, RunGeminiBlocks) {
  std::vector<message> got;
  auto t = providers::run_gemini(stand_in({"replay", recorded("flaky")}), "x",
                                 [&](const message& m) { got.push_back(m); });
  EXPECT_EQ(t.type, message_type::terminal_completed);
  EXPECT_EQ(t.content.at("text"), "Recovered answer ü.");
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back(), t);
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
}

}  // namespace
