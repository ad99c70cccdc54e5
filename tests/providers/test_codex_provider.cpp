// The Codex provider: its command lines, and runs through a real child process (a stand-in `codex` script that
// records its argv and execs the fake agent replaying a recorded codex transcript).
#include "provider_fixture.hpp"

#include <agenthost/mapper/codex_mapper.hpp>
#include <agenthost/providers/codex.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

using namespace agenthost;
using namespace agenthost::test;
using providers::codex_options;
using transport::message;
using transport::message_type;

namespace {

const std::string codex_fixtures = std::string(AGENTHOST_FIXTURES_DIR) + "/codex/recorded/codex-0.171.0-";

std::vector<std::string> args_of(const codex_options& o, std::string_view prompt) {
  auto a = providers::build_codex_arguments(o, prompt);
  EXPECT_TRUE(a.has_value()) << (a ? "" : a.error());
  return a ? *a : std::vector<std::string>{};
}

std::string error_of(const codex_options& o, std::string_view prompt) {
  auto a = providers::build_codex_arguments(o, prompt);
  EXPECT_FALSE(a.has_value());
  return a ? std::string() : a.error();
}

using strings = std::vector<std::string>;

TEST(CodexArguments, Defaults) {
  EXPECT_EQ(args_of({}, "hello"), (strings{"exec", "--json", "--skip-git-repo-check", "--", "hello"}));
}

TEST(CodexArguments, PromptStartingWithADashStaysAPrompt) {
  EXPECT_EQ(args_of({}, "-rf /"), (strings{"exec", "--json", "--skip-git-repo-check", "--", "-rf /"}));
  EXPECT_EQ(args_of({}, "--help"), (strings{"exec", "--json", "--skip-git-repo-check", "--", "--help"}));
}

TEST(CodexArguments, AllOptions) {
  const codex_options o{.model = "gpt-5",
                        .extra_args = {"--color", "never"},
                        .sandbox = providers::codex_sandbox::workspace_write,
                        .skip_git_repo_check = false,
                        .ephemeral = true,
                        .config = {{"model_reasoning_effort", "\"high\""}, {"features.x", "true"}}};
  EXPECT_EQ(args_of(o, "fix it"),
            (strings{"exec", "--json", "--ephemeral", "-m", "gpt-5", "-c", "sandbox_mode=\"workspace-write\"", "-c",
                     "model_reasoning_effort=\"high\"", "-c", "features.x=true", "--color", "never", "--", "fix it"}));
}

TEST(CodexArguments, ResumeASession) {
  const codex_options o{.session_id = "01a229da-2b26-7cb3-99a8-e086d5b7ce9f",
                        .sandbox = providers::codex_sandbox::read_only};
  EXPECT_EQ(args_of(o, "-go on"),
            (strings{"exec", "resume", "--json", "--skip-git-repo-check", "-c", "sandbox_mode=\"read-only\"", "--",
                     "01a229da-2b26-7cb3-99a8-e086d5b7ce9f", "-go on"}));
}

TEST(CodexArguments, LongPromptsAndADashGoThroughStdin) {
  const std::string big(providers::codex_prompt_argv_max + 1, 'x');
  auto cmd = providers::build_codex_command({}, big);
  ASSERT_TRUE(cmd.has_value());
  EXPECT_EQ(cmd->args.back(), "-");
  EXPECT_EQ(cmd->args[cmd->args.size() - 2], "--");
  ASSERT_TRUE(cmd->stdin_text.has_value());
  EXPECT_EQ(*cmd->stdin_text, big);
  // Exactly at the limit: still an argument.
  const std::string limit(providers::codex_prompt_argv_max, 'y');
  EXPECT_FALSE(providers::build_codex_command({}, limit)->stdin_text.has_value());
  // "-" as an argument would mean "read stdin": the prompt "-" itself goes there.
  auto dash = providers::build_codex_command({}, "-");
  ASSERT_TRUE(dash.has_value());
  EXPECT_EQ(dash->args.back(), "-");
  EXPECT_EQ(dash->stdin_text, std::optional<std::string>("-"));
  // A NUL would end the argument there: stdin too.
  const std::string nul("fix\0 it", 7);
  auto with_nul = providers::build_codex_command({}, nul);
  ASSERT_TRUE(with_nul.has_value());
  EXPECT_EQ(with_nul->args.back(), "-");
  EXPECT_EQ(with_nul->stdin_text, std::optional<std::string>(nul));

  auto run = providers::make_codex_run({}, big);
  ASSERT_TRUE(run.spawn.has_value());
  EXPECT_EQ(run.spawn->stdin_mode, process::stdin_kind::pipe);
  EXPECT_EQ(run.run.stdin_data, std::optional<std::string>(big));
  auto small = providers::make_codex_run({}, "hi");
  ASSERT_TRUE(small.spawn.has_value());
  EXPECT_EQ(small.spawn->stdin_mode, process::stdin_kind::null);
  EXPECT_FALSE(small.run.stdin_data.has_value());
  // The stop policy: SIGINT to the group, nothing written to stdin.
  EXPECT_EQ(small.run.stop.interrupt_signal, SIGINT);
  EXPECT_EQ(small.run.stop.interrupt_target, process::signal_target::group);
  EXPECT_TRUE(small.run.stop.interrupt_bytes.empty());
}

TEST(CodexArguments, InvalidOptions) {
  EXPECT_NE(error_of({.session_id = ""}, "x").find("session id"), std::string::npos);
  EXPECT_NE(error_of({.session_id = "--last"}, "x").find("--last"), std::string::npos);
  EXPECT_NE(error_of({.model = "-x"}, "x").find("model"), std::string::npos);
  EXPECT_NE(error_of({.config = {{"", "1"}}}, "x").find("config key"), std::string::npos);
  EXPECT_NE(error_of({.config = {{"a=b", "1"}}}, "x").find("a=b"), std::string::npos);
  EXPECT_NE(error_of({.config = {{"-c", "1"}}}, "x").find("config key"), std::string::npos);
  EXPECT_NE(error_of({}, "").find("empty"), std::string::npos);
  codex_options with_stdin;
  with_stdin.run.stdin_data = "x";
  EXPECT_NE(error_of(with_stdin, "x").find("stdin_data"), std::string::npos);
  auto run = providers::make_codex_run({.session_id = ""}, "x");
  EXPECT_FALSE(run.spawn.has_value());
}

class CodexProvider : public provider_run_fixture<codex_options> {
 protected:
  CodexProvider() : provider_run_fixture("codex") {}

  // Runs to the end through async_run_codex; `cancel_when` may emit the cancellation signal from on_message.
  result run(const codex_options& o, std::string_view prompt, cancel_predicate cancel_when = {}) {
    return run_to_end([&](auto on_message, auto done) {
      providers::async_run_codex(io.get_executor(), o, prompt, std::move(on_message), std::move(done));
    }, cancel_when);
  }
};

TEST_F(CodexProvider, ToolRunThroughARealProcessMatchesTheMapper) {
  const std::string fixture = codex_fixtures + "tool.jsonl";
  auto o = stand_in("replay " + fixture + " --chunk 7");
  o.model = "tool";
  auto r = run(o, "-do it");
  EXPECT_FALSE(r.ec);
  EXPECT_EQ(recorded_argv(), (strings{"exec", "--json", "--skip-git-repo-check", "-m", "tool", "--", "-do it"}));
  ASSERT_EQ(r.terminal.type, message_type::terminal_completed) << r.terminal.to_json_line();
  // The same messages as the mapper fed the fixture directly (the exit status is the only addition).
  auto expected = mapped<mapper::codex_mapper>(fixture, {.status = process::exited{0}});
  EXPECT_EQ(json_lines(merged_text(r.messages)), json_lines(merged_text(expected)));
}

// Lines that arrive in one read: every message is handed on as soon as its line is mapped, not after the whole read,
// except an `assistant` text, which waits for the next line in case that one's delta extends it (merged).
TEST_F(CodexProvider, MessagesOfOneReadAreHandedOnLineByLine) {
  const std::vector<std::string> transcript = {
      R"({"type":"thread.started","thread_id":"t1"})",
      R"({"type":"turn.started"})",
      R"({"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"ls","aggregated_output":"","exit_code":null,"status":"in_progress"}})",
      R"({"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"ls","aggregated_output":"a\n","exit_code":0,"status":"completed"}})",
      R"({"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Hello"}})",
      R"({"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":" world"}})",
      R"({"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1}})"};
  const std::string file = dir + "/one-read.jsonl";
  {
    std::ofstream f(file);
    for (const auto& l : transcript) f << l << '\n';
  }
  ASSERT_LT(std::filesystem::file_size(file), 4096u);  // one write() of at most PIPE_BUF bytes: one read
  auto o = stand_in("replay " + file + " --stream");
  std::vector<std::string> log;
  o.run.on_agent_line = [&](std::string_view l) {
    const auto it = std::find(transcript.begin(), transcript.end(), l);
    log.push_back("line " + std::to_string(it - transcript.begin()));
  };
  result r;
  bool done = false;
  providers::async_run_codex(io.get_executor(), o, "x",
                             [&](const message& m) { log.push_back(std::string(transport::to_string(m.type))); },
                             [&](boost::system::error_code ec, message t) {
                               r.ec = ec;
                               r.terminal = std::move(t);
                               done = true;
                             });
  ASSERT_TRUE(run_until(io, [&] { return done; }, 30s));
  EXPECT_EQ(log, (strings{"line 0", "session.started", "line 1", "line 2", "tool.call", "line 3", "tool.completed",
                          "line 4", "line 5", "line 6", "assistant", "terminal.completed"}));
  EXPECT_EQ(r.terminal.content.at("text"), " world");
}

// A turn's buffered thoughts reach the caller in slices (thought_release_batch, take_more): all of them, in order,
// before the terminal, the same messages as the mapper without a batch.
TEST_F(CodexProvider, ATurnOfManyThoughtsIsDeliveredWhole) {
  std::vector<std::string> transcript = {R"({"type":"thread.started","thread_id":"t1"})", R"({"type":"turn.started"})"};
  std::vector<std::string> thoughts;
  for (int i = 0; i < 50; ++i) {
    thoughts.push_back("thought " + std::to_string(i));
    transcript.push_back(R"({"type":"item.completed","item":{"id":"item_)" + std::to_string(i) +
                         R"(","type":"reasoning","text":")" + thoughts.back() + R"("}})");
  }
  transcript.emplace_back(R"({"type":"item.completed","item":{"id":"item_50","type":"agent_message","text":"done"}})");
  transcript.emplace_back(R"({"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1}})");
  const std::string file = dir + "/thoughts.jsonl";
  {
    std::ofstream f(file);
    for (const auto& l : transcript) f << l << '\n';
  }
  auto r = run(stand_in("replay " + file + " --chunk 100"), "x");
  EXPECT_FALSE(r.ec);
  ASSERT_EQ(r.terminal.type, message_type::terminal_completed) << r.terminal.to_json_line();
  std::vector<std::string> seen;
  for (const auto& m : r.messages)
    if (m.type == message_type::assistant_thought) seen.push_back(m.content.at("text").get<std::string>());
  EXPECT_EQ(seen, thoughts);
  auto expected = mapped<mapper::codex_mapper>(file, {.status = process::exited{0}});
  EXPECT_EQ(json_lines(merged_text(r.messages)), json_lines(merged_text(expected)));
}

TEST_F(CodexProvider, RunCodexBlockingHelper) {
  const std::string fixture = codex_fixtures + "answer.jsonl";
  auto o = stand_in("replay " + fixture);
  o.session_id = "01a229da-3327-7201-bbb3-c0298e619f74";
  std::vector<message> got;
  auto terminal = providers::run_codex(o, "again", [&](const message& m) { got.push_back(m); });
  EXPECT_EQ(terminal.type, message_type::terminal_completed);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.front().type, message_type::session_resumed);
  EXPECT_EQ(got.front().content.at("resume"), "resumed");
  EXPECT_EQ(recorded_argv(), (strings{"exec", "resume", "--json", "--skip-git-repo-check", "--",
                                      "01a229da-3327-7201-bbb3-c0298e619f74", "again"}));
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
}

TEST_F(CodexProvider, TurnFailedThenExit1IsAgentError) {
  auto r = run(stand_in("replay " + codex_fixtures + "http429.jsonl exit 1"), "x");
  EXPECT_FALSE(r.ec);
  ASSERT_EQ(r.terminal.type, message_type::terminal_failed);
  EXPECT_EQ(r.terminal.content.at("reason"), "agent_error");
  EXPECT_EQ(r.terminal.content.at("http_status"), 429);
  EXPECT_EQ(r.terminal.content.at("retryable"), true);
  EXPECT_EQ(r.terminal.content.at("exit_code"), 1);
}

TEST_F(CodexProvider, LongPromptReachesStdin) {
  // The stand-in hashes what arrives on stdin; the prompt must arrive whole, then EOF. Its line is an event type
  // the mapper ignores: the raw-line tap sees it.
  auto o = stand_in("stdin-digest");
  std::vector<std::string> raw;
  o.run.on_agent_line = [&](std::string_view l) { raw.emplace_back(l); };
  const std::string big(providers::codex_prompt_argv_max * 2, 'p');
  auto r = run(o, big);
  EXPECT_EQ(recorded_argv().back(), "-");
  EXPECT_EQ(r.terminal.content.at("reason"), "no_terminal_event");
  ASSERT_EQ(raw.size(), 1u);
  const auto digest = nlohmann::json::parse(raw[0]);
  EXPECT_EQ(digest.at("bytes"), big.size());
}

TEST_F(CodexProvider, MissingExecutableIsStartFailed) {
  codex_options o{.executable = dir + "/no-such-codex", .reaper_path = AGENTHOST_REAPER};
  auto r = run(o, "x");
  EXPECT_FALSE(r.ec);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.terminal.type, message_type::terminal_failed);
  EXPECT_EQ(r.terminal.content.at("reason"), "start_failed");
  EXPECT_NE(r.terminal.content.at("text").get<std::string>().find("no-such-codex"), std::string::npos);
}

TEST_F(CodexProvider, InvalidOptionIsStartFailed) {
  auto r = run({.session_id = "-x", .reaper_path = AGENTHOST_REAPER}, "x");
  EXPECT_FALSE(r.ec);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.terminal.content.at("reason"), "start_failed");
  EXPECT_NE(r.terminal.content.at("text").get<std::string>().find("session id"), std::string::npos);
}

TEST_F(CodexProvider, CancellationMidStreamDuringTheTool) {
  // The long-tool transcript line by line, then the "agent" hangs (with a child in its own session, like codex's
  // tool command); cancelled once the tool call is out.
  auto o = stand_in("replay " + codex_fixtures + "long-tool.jsonl --delay-ms 20 setsid-child never-exit");
  o.run.stop.graceful_wait = std::chrono::milliseconds(500);
  auto r = run(o, "x", [](const message& m) { return m.type == message_type::tool_call; });
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  EXPECT_EQ(r.terminal.type, message_type::terminal_cancelled);
  bool closed = false;
  for (const auto& m : r.messages)
    closed = closed || (m.type == message_type::tool_failed && m.content.value("closed_by_finish", false));
  EXPECT_TRUE(closed) << "the open tool call must be closed as failed";
}

}  // namespace
