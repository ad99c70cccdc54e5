// The OpenCode provider: its command lines, and runs through a real child process (a stand-in `opencode` script that
// records its argv and execs the fake agent replaying a recorded opencode transcript).
#include "provider_fixture.hpp"

#include <agenthost/mapper/opencode_mapper.hpp>
#include <agenthost/providers/opencode.hpp>

#include <nlohmann/json.hpp>

using namespace agenthost;
using namespace agenthost::test;
using providers::opencode_options;
using transport::message;
using transport::message_type;

namespace {

const std::string oc_fixtures = std::string(AGENTHOST_FIXTURES_DIR) + "/opencode/recorded/opencode-1.18.33-";

std::vector<std::string> args_of(const opencode_options& o, std::string_view prompt) {
  auto a = providers::build_opencode_arguments(o, prompt);
  EXPECT_TRUE(a.has_value()) << (a ? "" : a.error());
  return a ? *a : std::vector<std::string>{};
}

std::string error_of(const opencode_options& o, std::string_view prompt) {
  auto a = providers::build_opencode_arguments(o, prompt);
  EXPECT_FALSE(a.has_value());
  return a ? std::string() : a.error();
}

using strings = std::vector<std::string>;

TEST(OpencodeArguments, DefaultsAndThePromptOnStdin) {
  EXPECT_EQ(args_of({}, "hello"), (strings{"run", "--format", "json", "--thinking"}));
  // The prompt is never an argument, whatever it looks like: it goes to stdin as given.
  for (const std::string& p : strings{"-rf /", "--help", "say \"hi\" there", std::string("nul\0byte", 8)}) {
    auto cmd = providers::build_opencode_command({}, p);
    ASSERT_TRUE(cmd.has_value());
    EXPECT_EQ(cmd->args, (strings{"run", "--format", "json", "--thinking"}));
    ASSERT_TRUE(cmd->stdin_text.has_value());
    EXPECT_EQ(*cmd->stdin_text, p);
  }
  const auto run = providers::make_opencode_run({}, "-x");
  ASSERT_TRUE(run.spawn.has_value());
  EXPECT_EQ(run.spawn->stdin_mode, process::stdin_kind::pipe);
  EXPECT_EQ(run.run.stdin_data, std::optional<std::string>("-x"));
}

TEST(OpencodeArguments, AllOptions) {
  const opencode_options o{.model = "mock/tool",
                           .session_id = "ses_abc",
                           .extra_args = {"--log-level", "WARN"},
                           .show_thinking = false,
                           .agent = "build",
                           .variant = "high",
                           .auto_approve = true,
                           .fork = true};
  EXPECT_EQ(args_of(o, "fix it"),
            (strings{"run", "--format", "json", "-m", "mock/tool", "--session", "ses_abc", "--fork", "--agent", "build",
                     "--variant", "high", "--auto", "--log-level", "WARN"}));
}

TEST(OpencodeArguments, InvalidOptions) {
  EXPECT_NE(error_of({.session_id = ""}, "x").find("session id"), std::string::npos);
  EXPECT_NE(error_of({.session_id = "--continue"}, "x").find("--continue"), std::string::npos);
  EXPECT_NE(error_of({.model = "-x/y"}, "x").find("model"), std::string::npos);
  EXPECT_NE(error_of({.model = "noslash"}, "x").find("provider/model"), std::string::npos);
  EXPECT_NE(error_of({.agent = "-a"}, "x").find("agent"), std::string::npos);
  EXPECT_NE(error_of({.variant = "--v"}, "x").find("variant"), std::string::npos);
  EXPECT_NE(error_of({.fork = true}, "x").find("fork"), std::string::npos);
  EXPECT_NE(error_of({.extra_args = {std::string("a\0b", 3)}}, "x").find("NUL"), std::string::npos);
  EXPECT_NE(error_of({}, "").find("empty"), std::string::npos);
  opencode_options with_stdin;
  with_stdin.run.stdin_data = "x";
  EXPECT_NE(error_of(with_stdin, "x").find("stdin_data"), std::string::npos);
  auto run = providers::make_opencode_run({.session_id = ""}, "x");
  EXPECT_FALSE(run.spawn.has_value());
}

class OpencodeProvider : public provider_run_fixture<opencode_options> {
 protected:
  OpencodeProvider() : provider_run_fixture("opencode") {}

  // Runs to the end through async_run_opencode; `cancel_when` may emit the cancellation signal from on_message.
  result run(const opencode_options& o, std::string_view prompt, cancel_predicate cancel_when = {}) {
    return run_to_end([&](auto on_message, auto done) {
      providers::async_run_opencode(io.get_executor(), o, prompt, std::move(on_message), std::move(done));
    }, cancel_when);
  }
};

TEST_F(OpencodeProvider, ToolRunThroughARealProcessMatchesTheMapper) {
  const std::string fixture = oc_fixtures + "tool.jsonl";
  auto o = stand_in("replay " + fixture + " --chunk 7");
  o.model = "mock/tool";
  auto r = run(o, "-do it");
  EXPECT_FALSE(r.ec);
  EXPECT_EQ(recorded_argv(), (strings{"run", "--format", "json", "--thinking", "-m", "mock/tool"}));
  ASSERT_EQ(r.terminal.type, message_type::terminal_completed) << r.terminal.to_json_line();
  // The same messages as the mapper fed the fixture directly (the exit status is the only addition).
  auto expected = mapped<mapper::opencode_mapper>(fixture, {.status = process::exited{0}});
  EXPECT_EQ(json_lines(merged_text(r.messages)), json_lines(merged_text(expected)));
}

TEST_F(OpencodeProvider, RunOpencodeBlockingHelperResumes) {
  auto o = stand_in("replay " + oc_fixtures + "answer.jsonl");
  o.session_id = "ses_dd557ebfbffeCWlElkDUaI20E0";
  std::vector<message> got;
  auto terminal = providers::run_opencode(o, "again", [&](const message& m) { got.push_back(m); });
  EXPECT_EQ(terminal.type, message_type::terminal_completed) << terminal.to_json_line();
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.front().type, message_type::session_resumed);
  EXPECT_EQ(recorded_argv(),
            (strings{"run", "--format", "json", "--thinking", "--session", "ses_dd557ebfbffeCWlElkDUaI20E0"}));
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
}

TEST_F(OpencodeProvider, ErrorThenExit1IsAgentError) {
  auto r = run(stand_in("replay " + oc_fixtures + "http429.jsonl exit 1"), "x");
  EXPECT_FALSE(r.ec);
  ASSERT_EQ(r.terminal.type, message_type::terminal_failed);
  EXPECT_EQ(r.terminal.content.at("reason"), "agent_error");
  EXPECT_EQ(r.terminal.content.at("http_status"), 429);
  EXPECT_EQ(r.terminal.content.at("retryable"), true);
  EXPECT_EQ(r.terminal.content.at("exit_code"), 1);
}

TEST_F(OpencodeProvider, PromptReachesStdinExactly) {
  // The stand-in hashes what arrives on stdin: the prompt must arrive whole (a large one too, a leading '-' and
  // quotes unchanged), then EOF. Its line is an event type the mapper ignores: the raw-line tap sees it.
  for (const std::string& prompt : strings{std::string("-\"quoted\" prompt"), std::string(std::size_t{200} << 10, 'p')}) {
    auto o = stand_in("stdin-digest");
    std::vector<std::string> raw;
    o.run.on_agent_line = [&](std::string_view l) { raw.emplace_back(l); };
    auto r = run(o, prompt);
    EXPECT_EQ(recorded_argv(), (strings{"run", "--format", "json", "--thinking"}));
    EXPECT_EQ(r.terminal.content.at("reason"), "no_terminal_event");
    ASSERT_EQ(raw.size(), 1u);
    const auto digest = nlohmann::json::parse(raw[0]);
    EXPECT_EQ(digest.at("bytes"), prompt.size());
  }
}

TEST_F(OpencodeProvider, MissingExecutableIsStartFailed) {
  opencode_options o{.executable = dir + "/no-such-opencode", .reaper_path = AGENTHOST_REAPER};
  auto r = run(o, "x");
  EXPECT_FALSE(r.ec);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.terminal.type, message_type::terminal_failed);
  EXPECT_EQ(r.terminal.content.at("reason"), "start_failed");
  EXPECT_NE(r.terminal.content.at("text").get<std::string>().find("no-such-opencode"), std::string::npos);
}

TEST_F(OpencodeProvider, InvalidOptionIsStartFailed) {
  auto r = run({.session_id = "-x", .reaper_path = AGENTHOST_REAPER}, "x");
  EXPECT_FALSE(r.ec);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.terminal.content.at("reason"), "start_failed");
  EXPECT_NE(r.terminal.content.at("text").get<std::string>().find("session id"), std::string::npos);
}

TEST_F(OpencodeProvider, CancellationMidStreamDuringTheTool) {
  // The tool transcript line by line, then the "agent" hangs with a child in its own session (like opencode's bash
  // tool command); cancelled once the tool call is out. The tree kill must end both.
  auto o = stand_in("replay " + oc_fixtures + "long-tool.jsonl --delay-ms 20 setsid-child never-exit");
  o.run.stop.graceful_wait = std::chrono::milliseconds(500);
  auto r = run(o, "x", [](const message& m) { return m.type == message_type::assistant; });
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  EXPECT_EQ(r.terminal.type, message_type::terminal_cancelled);
}

}  // namespace
