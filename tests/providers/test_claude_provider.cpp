// The Claude Code provider: its command lines, and runs through a real child process (the fake agent replaying
// recorded Claude output, behind a stand-in `claude` script that records its argv).
#include "provider_fixture.hpp"

#include <agenthost/providers/claude.hpp>
#include <agenthost/transport/contract_checker.hpp>

#include <nlohmann/json.hpp>

#include <fstream>

using namespace agenthost;
using namespace agenthost::test;
using providers::claude_options;
using providers::claude_permission_mode;
using transport::message;
using transport::message_type;

namespace {

const std::string recorded = std::string(AGENTHOST_FIXTURES_DIR) + "/claude-code/recorded/";
const std::vector<std::string> fixed = {"-p", "--output-format", "stream-json", "--verbose",
                                        "--include-partial-messages"};

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ---- command lines ---------------------------------------------------------------------------------------------------

TEST(ClaudeArguments, DefaultsAndAPromptThatLooksLikeAFlag) {
  auto a = providers::build_claude_arguments({}, "-rf / --help");
  ASSERT_TRUE(a) << a.error();
  EXPECT_EQ(*a, concat(fixed, {"--", "-rf / --help"}));
}

TEST(ClaudeArguments, EveryOption) {
  claude_options o{.model = "sonnet",
                   .session_id = std::string("0d4b6c1e-1111-2222-3333-444455556666"),
                   .extra_args = {"--add-dir", "/srv/a", "/srv/b"},
                   .allowed_tools = {"Bash(git *)", "Read"},
                   .disallowed_tools = {"WebFetch"},
                   .tools = std::vector<std::string>{},
                   .permission_mode = claude_permission_mode::accept_edits,
                   .append_system_prompt = "-be brief",
                   .max_turns = 3};
  auto a = providers::build_claude_arguments(o, "fix it");
  ASSERT_TRUE(a) << a.error();
  // Extra arguments first (a list option among them stops at our first flag); the prompt after `--`.
  EXPECT_EQ(*a, concat(concat({"--add-dir", "/srv/a", "/srv/b"}, fixed),
                       {"--model", "sonnet", "--resume", "0d4b6c1e-1111-2222-3333-444455556666",
                        "--allowedTools=Bash(git *),Read", "--disallowedTools=WebFetch", "--tools=",
                        "--permission-mode", "acceptEdits", "--append-system-prompt=-be brief", "--max-turns", "3",
                        "--", "fix it"}));
}

TEST(ClaudeArguments, InvalidOptionsAreErrorsNamingTheOption) {
  struct tc {
    claude_options o;
    std::string prompt;
    std::string needle;
  };
  std::vector<tc> cases;
  cases.push_back({{.session_id = std::string()}, "x", "session id"});
  cases.push_back({{.session_id = std::string("--continue")}, "x", "session id"});
  cases.push_back({{.model = "--evil"}, "x", "model"});
  cases.push_back({{.allowed_tools = {"Bash", ""}}, "x", "allowed_tools"});
  cases.push_back({{.disallowed_tools = {"-x"}}, "x", "disallowed_tools"});
  cases.push_back({{.tools = std::vector<std::string>{"a,b"}}, "x", "tools"});
  cases.push_back({{.max_turns = 0}, "x", "max_turns"});
  cases.push_back({{}, "", "prompt is empty"});
  cases.push_back({{.model = std::string("a\0b", 3)}, "x", "NUL"});
  cases.push_back({{.extra_args = {std::string("--x\0", 4)}}, "x", "NUL"});
  claude_options with_stdin;
  with_stdin.run.stdin_data = "x";
  cases.push_back({with_stdin, "x", "stdin_data"});
  for (const auto& c : cases) {
    auto a = providers::build_claude_arguments(c.o, c.prompt);
    ASSERT_FALSE(a) << c.needle;
    EXPECT_NE(a.error().find(c.needle), std::string::npos) << a.error();
    auto run = providers::make_claude_run(c.o, c.prompt);
    ASSERT_FALSE(run.spawn);
    EXPECT_EQ(run.spawn.error(), a.error());
  }
}

TEST(ClaudeArguments, ALongPromptGoesThroughStdin) {
  const std::string at_limit(providers::claude_prompt_argv_max, 'a');
  auto small = providers::make_claude_run({}, at_limit);
  ASSERT_TRUE(small.spawn);
  EXPECT_EQ(small.spawn->args.back(), at_limit);
  EXPECT_EQ(small.spawn->stdin_mode, process::stdin_kind::null);
  EXPECT_FALSE(small.run.stdin_data);

  const std::string big = "-" + std::string(providers::claude_prompt_argv_max, 'b');
  auto r = providers::make_claude_run({.model = "m"}, big);
  ASSERT_TRUE(r.spawn);
  EXPECT_EQ(r.spawn->args, concat(fixed, {"--model", "m"})) << "no `--`, no prompt argument: claude reads stdin";
  EXPECT_EQ(r.spawn->stdin_mode, process::stdin_kind::pipe);
  ASSERT_TRUE(r.run.stdin_data);
  EXPECT_EQ(*r.run.stdin_data, big);
  // A NUL byte would cut an argument: such a prompt goes through stdin whole, whatever its size.
  const std::string nul("before\0after", 12);
  auto n = providers::make_claude_run({}, nul);
  ASSERT_TRUE(n.spawn);
  EXPECT_EQ(n.spawn->args, fixed);
  ASSERT_TRUE(n.run.stdin_data);
  EXPECT_EQ(*n.run.stdin_data, nul);
}

TEST(ClaudeArguments, TheDefaultStopIsClaudesGracefulInterrupt) {
  const claude_options o;
  EXPECT_EQ(o.run.stop.interrupt_signal, SIGINT);
  EXPECT_EQ(o.run.stop.interrupt_bytes, "\x03");
  EXPECT_EQ(o.executable, "claude");
}

// ---- runs through a real child ---------------------------------------------------------------------------------------

class ClaudeProvider : public provider_run_fixture<claude_options> {
 protected:
  ClaudeProvider() : provider_run_fixture("claude") {}

  // async_run_claude to its end; `cancel_when` may emit the cancellation signal from inside on_message.
  result run(const claude_options& o, std::string_view prompt, cancel_predicate cancel_when = {}) {
    return run_to_end([&](auto on_message, auto done) {
      providers::async_run_claude(io.get_executor(), o, prompt, std::move(on_message), std::move(done));
    }, cancel_when);
  }
};

TEST_F(ClaudeProvider, ARunThroughARealProcessGivesTheMappersMessages) {
  auto o = stand_in({"replay", recorded + "tool.jsonl", "--chunk", "7"});
  o.model = "tool";
  std::vector<std::string> raw;
  o.run.on_agent_line = [&](std::string_view l) { raw.emplace_back(l); };
  auto r = run(o, "--version");
  EXPECT_FALSE(r.ec);
  ASSERT_EQ(r.terminal.type, message_type::terminal_completed);
  // Same messages as the mapper over the file, except the exit status the process layer adds.
  // (Compared with adjacent text deltas merged: the provider merges the deltas of one read.)
  const auto expected = merged_text(mapped<mapper::claude_mapper>(recorded + "tool.jsonl", {.status = process::exited{0}}));
  const auto got = merged_text(r.messages);
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(got[i], expected[i]) << i;
  EXPECT_EQ(raw, read_lines(recorded + "tool.jsonl"));
  EXPECT_EQ(recorded_argv(), concat(fixed, {"--model", "tool", "--", "--version"}));
}

TEST_F(ClaudeProvider, AnApiErrorExitingOneIsAnAgentError) {
  auto r = run(stand_in({"replay", recorded + "http429.jsonl", "exit", "1"}), "x");
  ASSERT_EQ(r.terminal.type, message_type::terminal_failed);
  EXPECT_EQ(r.terminal.content.at("reason"), "agent_error");
  EXPECT_EQ(r.terminal.content.at("http_status"), 429);
  EXPECT_EQ(r.terminal.content.at("retryable"), true);
  EXPECT_EQ(r.terminal.content.at("exit_status"), "exited with code 1");
}

TEST_F(ClaudeProvider, ALongPromptReachesClaudesStdinWhole) {
  std::string prompt;
  while (prompt.size() <= providers::claude_prompt_argv_max) prompt += "caf\xC3\xA9 --flag $(id) \n";
  std::vector<std::string> raw;
  auto o = stand_in({"stdin-digest", "replay", recorded + "answer.jsonl"});
  o.run.on_agent_line = [&](std::string_view l) { raw.emplace_back(l); };
  auto r = run(o, prompt);
  ASSERT_EQ(r.terminal.type, message_type::terminal_completed);
  ASSERT_FALSE(raw.empty());
  const auto digest = nlohmann::json::parse(raw.front());
  EXPECT_EQ(digest.at("type"), "stdin_digest");
  EXPECT_EQ(digest.at("bytes"), prompt.size());
  EXPECT_EQ(recorded_argv(), fixed);
  EXPECT_FALSE(r.terminal.content.contains("invalid_output_line_count")) << "an unknown event type is ignored";
  EXPECT_EQ(r.terminal.content.at("text"), "## Answer\n\nThe answer is 42. \xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C! caf\xC3\xA9 \xCE\xA9\xCE\xBC\xCE\xAD\xCE\xB3\xCE\xB1 \tend.");
}

TEST_F(ClaudeProvider, StartFailuresAreTerminalMessages) {
  claude_options missing{.executable = dir + "/no-such-claude", .reaper_path = AGENTHOST_REAPER};
  auto m = run(missing, "hi");
  EXPECT_FALSE(m.ec);
  ASSERT_EQ(m.messages.size(), 1u);
  EXPECT_EQ(m.terminal.type, message_type::terminal_failed);
  EXPECT_EQ(m.terminal.content.at("reason"), "start_failed");
  EXPECT_NE(m.terminal.content.at("text").get<std::string>().find("no-such-claude"), std::string::npos);

  auto invalid = run({.reaper_path = AGENTHOST_REAPER, .max_turns = -1}, "hi");
  EXPECT_EQ(invalid.terminal.content.at("reason"), "start_failed");
  EXPECT_NE(invalid.terminal.content.at("text").get<std::string>().find("max_turns"), std::string::npos);
  // The blocking helper too.
  const auto t = providers::run_claude(missing, "hi", [](const message&) {});
  EXPECT_EQ(t.content.at("reason"), "start_failed");
}

TEST_F(ClaudeProvider, ExitZeroWithoutAResultIsAFailure) {
  auto r = run(stand_in({"replay", recorded + "long-tool-echo-sigint-before-tool.jsonl"}), "x");
  ASSERT_EQ(r.terminal.type, message_type::terminal_failed);
  EXPECT_EQ(r.terminal.content.at("reason"), "no_terminal_event");
}

TEST_F(ClaudeProvider, CancellationMidStream) {
  auto r = run(stand_in({"replay", recorded + "tool.jsonl", "--delay-ms", "20", "never-exit"}), "x",
               [](const message& m) { return m.type == message_type::assistant; });
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  ASSERT_EQ(r.terminal.type, message_type::terminal_cancelled);
  EXPECT_EQ(r.terminal.content.at("session_id"), "17b5f4fc-d8c2-4b5b-8756-ce668d5a2b7f");
}

TEST_F(ClaudeProvider, CancellationDuringAToolClosesTheCallAndKillsTheTree) {
  // The transcript up to the tool_use frame, then a "tool" child that ignores SIGINT and the "agent" hangs.
  auto lines = read_lines(recorded + "long-tool-echo.jsonl");
  const std::string head = dir + "/head.jsonl";
  {
    std::ofstream out(head);
    for (const auto& l : lines) {
      out << l << "\n";
      if (l.rfind("{\"type\":\"assistant\"", 0) == 0 && l.find("\"tool_use\"") != std::string::npos) break;
    }
  }
  auto o = stand_in({"ignore-sigint", "spawn-children", "1", "replay", head, "never-exit"});
  o.run.stop.graceful_wait = std::chrono::milliseconds(300);
  auto r = run(o, "x", [](const message& m) { return m.type == message_type::tool_call; });
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  ASSERT_EQ(r.terminal.type, message_type::terminal_cancelled);
  std::size_t closed = 0;
  for (const auto& m : r.messages)
    if (m.type == message_type::tool_failed && m.content.value("closed_by_finish", false)) ++closed;
  EXPECT_EQ(closed, 1u);
}

TEST_F(ClaudeProvider, CancellationStillMapsWhatClaudePrintsWhenInterrupted) {
  // Recorded: SIGINT to claude during its tool; it then printed the interrupted tool result and a `result` with the
  // turn's usage and cost. Here the stand-in replays the lines before the interruption and prints the rest on SIGINT.
  const auto lines = read_lines(recorded + "long-tool-echo-sigint-cli-only.jsonl");
  ASSERT_EQ(lines.size(), 20u);
  const std::string head = dir + "/head.jsonl", last_words = dir + "/last-words.jsonl";
  {
    std::ofstream h(head), w(last_words);
    for (std::size_t i = 0; i < lines.size(); ++i) (i < 17 ? h : w) << lines[i] << "\n";
  }
  auto r = run(stand_in({"on-signal-print", "INT", last_words, "replay", head, "never-exit"}), "x",
               [](const message& m) { return m.type == message_type::tool_call; });
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  ASSERT_EQ(r.terminal.type, message_type::terminal_cancelled);
  // The result printed during the stop is mapped: the turn's usage and cost reach the terminal.
  ASSERT_TRUE(r.terminal.content.contains("usage")) << r.terminal.content.dump();
  EXPECT_EQ(r.terminal.content.at("usage").at("input_tokens"), 100);
  EXPECT_EQ(r.terminal.content.at("usage").at("output_tokens"), 5);
  ASSERT_TRUE(r.terminal.content.at("usage").contains("cost"))
      << "total_cost_usd comes with the result only: " << r.terminal.content.dump();
  EXPECT_DOUBLE_EQ(r.terminal.content.at("usage").at("cost").at("total").get<double>(), 0.0005);
  EXPECT_EQ(r.terminal.content.at("exit_status"), "exited with code 0");
  // The tool call is closed by claude's own interrupted tool result, not by the end of the run.
  std::size_t calls = 0, closed = 0, closed_by_finish = 0;
  for (const auto& m : r.messages) {
    if (m.type == message_type::tool_call) ++calls;
    if (m.type == message_type::tool_completed || m.type == message_type::tool_failed) {
      ++closed;
      if (m.content.value("closed_by_finish", false)) ++closed_by_finish;
    }
  }
  EXPECT_EQ(calls, 1u);
  EXPECT_EQ(closed, 1u);
  EXPECT_EQ(closed_by_finish, 0u);
  EXPECT_EQ(transport::check_run(r.messages), std::vector<std::string>{});
}

}  // namespace
