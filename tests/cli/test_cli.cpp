// The agenthost program as a user runs it: output, exit codes, signals.
#include "test_util.hpp"

#include <agenthost/transport/message.hpp>

#include <algorithm>
#include <fstream>

using namespace agenthost;
using namespace agenthost::test;
using transport::message;
using transport::message_type;

namespace {

const std::string fixtures = AGENTHOST_FIXTURES_DIR;

struct cli_result {
  int exit_code = -1;
  std::vector<message> messages;
  std::string raw;
};

// Runs the CLI (stdout is a pipe, so it prints JSONL); optionally sends `sig` once a line containing `trigger`
// appeared.
cli_result run_cli(std::vector<std::string> args, const std::string& stdin_file = "/dev/null", int sig = 0,
                   const std::string& trigger = {}, const std::vector<std::string>& extra_env = {}) {
  args.insert(args.begin(), AGENTHOST_CLI);
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry = *e;
    // An entry of `extra_env` replaces the inherited one (getenv would find the first of two).
    const bool replaced = std::any_of(extra_env.begin(), extra_env.end(), [&](const std::string& x) {
      return entry.substr(0, entry.find('=') + 1) == x.substr(0, x.find('=') + 1);
    });
    if (!replaced) env_store.emplace_back(entry);
  }
  env_store.insert(env_store.end(), extra_env.begin(), extra_env.end());
  bool signalled = false;
  auto run = run_program(std::move(args), std::move(env_store), stdin_file, std::chrono::seconds(30), {},
                         [&](const std::string& out, pid_t pid) {
                           if (sig != 0 && !signalled && out.find(trigger) != std::string::npos) {
                             ::kill(pid, sig);
                             signalled = true;
                           }
                         });
  cli_result r{.exit_code = run.exit_code, .messages = {}, .raw = std::move(run.out)};
  std::size_t pos = 0;
  while (pos < r.raw.size()) {
    auto end = r.raw.find('\n', pos);
    if (end == std::string::npos) end = r.raw.size();
    if (auto m = message::from_json_line(std::string_view(r.raw).substr(pos, end - pos))) r.messages.push_back(*m);
    pos = end + 1;
  }
  return r;
}

TEST(Cli, ReplayRunsTheRecordedTranscriptThroughAChildProcess) {
  auto r = run_cli({"replay", "--agent", "pi", fixtures + "/pi/pi-0.73.1-json-tool-turn.jsonl"});
  EXPECT_EQ(r.exit_code, 0) << r.raw;
  ASSERT_FALSE(r.messages.empty());
  EXPECT_EQ(r.messages.front().type, message_type::session_started);
  EXPECT_EQ(r.messages.back().type, message_type::terminal_completed);
}

TEST(Cli, MapDecidesFromTheEventsNotFromExitZero) {
  auto r = run_cli({"map", "--agent", "pi", fixtures + "/pi/pi-0.73.1-json-http400-error.jsonl"});
  EXPECT_EQ(r.exit_code, 1);
  ASSERT_FALSE(r.messages.empty());
  EXPECT_EQ(r.messages.back().type, message_type::terminal_failed);
  EXPECT_EQ(r.messages.back().content.at("http_status"), 400);
}

TEST(Cli, MapReadsStdinAndTakesTheExitAsGiven) {
  const std::string file = fixtures + "/pi/pi-0.73.1-json-tool-turn.jsonl";
  EXPECT_EQ(run_cli({"map", "--agent", "pi"}, file).exit_code, 0);
  auto sig = run_cli({"map", "--agent", "pi", "--exit-signal", "SIGKILL", file});
  EXPECT_EQ(sig.exit_code, 1);
  EXPECT_EQ(sig.messages.back().content.at("reason"), "signaled");
  auto code = run_cli({"map", "--agent", "pi", "--exit-code", "3", file});
  EXPECT_EQ(code.messages.back().content.at("reason"), "exited");
  EXPECT_EQ(code.messages.back().content.at("exit_code"), 3);
}

// `agent | agenthost map`: each message is printed as its line is mapped, not when the input ends. The first line goes
// in, its message must come out while the input is still open (the rest is written only then).
TEST(Cli, MapFromALivePipePrintsEachMessageAsItsLineComes) {
  std::ifstream file(fixtures + "/pi/pi-0.73.1-json-tool-turn.jsonl");
  std::string first, line, rest;
  ASSERT_TRUE(std::getline(file, first));
  while (std::getline(file, line)) rest += line + "\n";
  first += "\n";
  int in[2], out[2];
  ASSERT_EQ(::pipe2(in, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  std::vector<std::string> args = {AGENTHOST_CLI, "map", "--agent", "pi"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(::posix_spawn(&pid, AGENTHOST_CLI, &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  ASSERT_EQ(::write(in[1], first.data(), first.size()), static_cast<ssize_t>(first.size()));
  // The session's message, within 20 s, while stdin is still open.
  std::string got;
  char buf[4096];
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  while (got.find('\n') == std::string::npos && std::chrono::steady_clock::now() < give_up) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  const bool first_came_alone = got.find('\n') != std::string::npos;
  ASSERT_EQ(::write(in[1], rest.data(), rest.size()), static_cast<ssize_t>(rest.size()));
  ::close(in[1]);
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(first_came_alone) << "no message before the input ended";
  const auto session = message::from_json_line(std::string_view(got).substr(0, got.find('\n')));
  ASSERT_TRUE(session.has_value()) << got;
  EXPECT_EQ(session->type, message_type::session_started);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << got;
}

TEST(Cli, MapsEveryAgentsRecordedOutput) {
  // One recorded tool run per agent: the agent's own mapper, the same contract.
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"pi", "/pi/pi-0.73.1-json-tool-turn.jsonl"},
      {"claude", "/claude-code/recorded/tool.jsonl"},
      {"codex", "/codex/recorded/codex-0.171.0-tool.jsonl"},
      {"gemini", "/gemini/recorded/gemini-0.61.0-tool.jsonl"},
      {"opencode", "/opencode/recorded/opencode-1.18.33-tool.jsonl"},
  };
  for (const auto& [agent, file] : runs) {
    auto r = run_cli({"map", "--agent", agent, fixtures + file});
    EXPECT_EQ(r.exit_code, 0) << agent;
    ASSERT_FALSE(r.messages.empty()) << agent;
    EXPECT_EQ(r.messages.front().content.at("agent"), agent);
    EXPECT_EQ(r.messages.back().type, message_type::terminal_completed) << agent;
    std::size_t calls = 0;
    for (const auto& m : r.messages) calls += m.type == message_type::tool_call ? 1 : 0;
    EXPECT_EQ(calls, 1u) << agent;
  }
}

TEST(Cli, UsageErrorsExitTwo) {
  EXPECT_EQ(run_cli({"run", "--agent", "pi"}).exit_code, 2);                      // no prompt
  EXPECT_EQ(run_cli({"run", "--agent", "nope", "hi"}).exit_code, 2);              // unknown agent
  EXPECT_EQ(run_cli({"run", "--agent", "pi", "--bogus", "hi"}).exit_code, 2);     // unknown option
  EXPECT_EQ(run_cli({"run", "--agent", "pi", "--timeout", "soon", "hi"}).exit_code, 2);
  EXPECT_EQ(run_cli({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(run_cli({"map", "--agent", "pi", "--exit-code", "1", "--exit-signal", "9"}).exit_code, 2);
  // pi's own flags are refused for the other agents instead of being dropped.
  EXPECT_EQ(run_cli({"run", "--agent", "codex", "--provider", "x", "hi"}).exit_code, 2);
  EXPECT_EQ(run_cli({"run", "--agent", "gemini", "--no-session", "hi"}).exit_code, 2);
  // A flag given a value, a duration that would end the run at once, a second agent: refused, not half-taken.
  EXPECT_EQ(run_cli({"run", "--agent", "pi", "--no-session=false", "hi"}).exit_code, 2);
  EXPECT_EQ(run_cli({"run", "--agent", "pi", "--verbose=0", "hi"}).exit_code, 2);
  EXPECT_EQ(run_cli({"run", "--agent", "pi", "--timeout", "0", "hi"}).exit_code, 2);
  EXPECT_EQ(run_cli({"run", "--agent", "pi", "--idle-timeout", "0.5ms", "hi"}).exit_code, 2);
  EXPECT_EQ(run_cli({"run", "--agent", "pi", "--agent", "claude", "hi"}).exit_code, 2);
  // An input that cannot be read is the caller's error, with nothing made up on stdout.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"map", "--agent", "pi", "/"}, std::vector<std::string>{"replay", "--agent", "pi", "/"},
        std::vector<std::string>{"replay", "--agent", "pi", "/nonexistent/agenthost.jsonl"}}) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << " " << args[3];
    EXPECT_EQ(r.raw, "") << args[0] << " " << args[3];
  }
  // Refused by the provider rather than the parser: the start_failed terminal is printed, the exit says usage error.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "--agent", "pi", "--session", "s1", "--no-session", "hi"},
        std::vector<std::string>{"run", "--agent", "pi", "--thinking-level", "bogus", "hi"},
        std::vector<std::string>{"run", "--agent", "opencode", "--model", "gpt-5", "hi"}}) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args[2] << " " << args[3];
    ASSERT_EQ(r.messages.size(), 1u) << args[2] << " " << args[3];
    EXPECT_EQ(r.messages[0].content.at("error"), "invalid_options");
  }
}

TEST(Cli, HelpAfterACommandPrintsTheUsage) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, std::vector<std::string>{"run", "--help"},
        std::vector<std::string>{"run", "--agent", "pi", "-h", "hi"}, std::vector<std::string>{"doctor", "--help"},
        std::vector<std::string>{"map", "--agent", "pi", "--help"}}) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 0) << args[0];
    EXPECT_EQ(r.raw.rfind("usage:\n", 0), 0u) << args[0] << ": " << r.raw;
  }
  // After `--` it is the prompt's word: this run starts the agent (here one that does not exist).
  const auto r = run_cli({"run", "--agent", "pi", "--executable", "/nonexistent/pi", "--", "--help"});
  EXPECT_EQ(r.exit_code, 1) << r.raw;
  ASSERT_EQ(r.messages.size(), 1u) << r.raw;
  EXPECT_EQ(r.messages[0].content.at("reason"), "start_failed");
}

TEST(Cli, MissingExecutableIsAFailedRunNotAUsageError) {
  auto r = run_cli({"run", "--agent", "pi", "--executable", "/nonexistent/pi", "hello"});
  EXPECT_EQ(r.exit_code, 1);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].content.at("reason"), "start_failed");
}

TEST(Cli, ExtraArgumentsAndDashPromptsReachTheAgentVerbatim) {
  char tmpl[] = "/tmp/agenthost-cli-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string pi = dir + "/pi";
  {
    std::ofstream s(pi);
    s << "#!/bin/sh\nprintf '%s\\n' \"$@\" > " << dir << "/argv\nexec " << AGENTHOST_FAKE_AGENT << " replay " << fixtures
      << "/pi/pi-0.73.1-json-tool-turn.jsonl\n";
  }
  std::filesystem::permissions(pi, std::filesystem::perms::owner_all);
  auto r = run_cli({"run", "--agent", "pi", "--executable", pi, "--arg=--yolo", "--arg", "-x", "--model", "m", "--",
                    "-rf", "/"});
  EXPECT_EQ(r.exit_code, 0) << r.raw;
  std::ifstream in(dir + "/argv");
  std::vector<std::string> argv;
  for (std::string l; std::getline(in, l);) argv.push_back(l);
  EXPECT_EQ(argv, (std::vector<std::string>{"--yolo", "-x", "--mode", "json", "--model", "m", "-p", " -rf /"}));
  std::filesystem::remove_all(dir);
}

// `run` starts the agent `doctor` reports: the version pi's flags depend on (here 1.6.0: `--thinking max`, `--` before
// the prompt), and an agent found in an install place off PATH (~/.npm-global/bin), run by that path.
TEST(Cli, RunStartsWhatDoctorFinds) {
  char tmpl[] = "/tmp/agenthost-cli-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const auto script = [&](const std::string& path, const std::string& body) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << "#!/bin/sh\n" << body;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  };
  script(dir + "/pi", "if [ \"$1\" = --version ]; then echo 1.6.0; exit 0; fi\nprintf '%s\\n' \"$@\" > " + dir +
                          "/argv\nexec " + AGENTHOST_FAKE_AGENT + " replay " + fixtures +
                          "/pi/pi-0.73.1-json-tool-turn.jsonl\n");
  auto r = run_cli({"run", "--agent", "pi", "--executable", dir + "/pi", "--thinking-level", "max", "--", "-hi"});
  EXPECT_EQ(r.exit_code, 0) << r.raw;
  std::ifstream in(dir + "/argv");
  std::vector<std::string> argv;
  for (std::string l; std::getline(in, l);) argv.push_back(l);
  EXPECT_EQ(argv, (std::vector<std::string>{"--mode", "json", "--thinking", "max", "-p", "--", "-hi"}));

  script(dir + "/home/.npm-global/bin/claude", "echo ran > " + dir + "/claude-ran\nexit 3\n");
  r = run_cli({"run", "--agent", "claude", "hi"}, "/dev/null", 0, {},
              {"HOME=" + dir + "/home", "PATH=/usr/bin:/bin", "NPM_CONFIG_PREFIX=" + dir + "/none"});
  EXPECT_EQ(r.exit_code, 1) << r.raw;
  EXPECT_TRUE(std::filesystem::exists(dir + "/claude-ran")) << r.raw;
  ASSERT_FALSE(r.messages.empty());
  EXPECT_EQ(r.messages.back().content.at("reason"), "exited") << r.raw;
  std::filesystem::remove_all(dir);
}

TEST(Cli, SigintStopsTheAgentTreePrintsCancelledAndExits130) {
  const std::string token = random_token();
  char tmpl[] = "/tmp/agenthost-cli-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string pi = dir + "/pi";
  {
    // A stand-in pi that prints the header, then hangs with a setsid'd child (like a running tool).
    std::ofstream s(pi);
    s << "#!/bin/sh\nexec " << AGENTHOST_FAKE_AGENT << " stdout '{\"type\":\"session\",\"version\":3,\"id\":\"s1\"}' "
      << "setsid-child never-exit\n";
  }
  std::filesystem::permissions(pi, std::filesystem::perms::owner_all);
  auto r = run_cli({"run", "--agent", "pi", "--executable", pi, "hello"}, "/dev/null", SIGINT, "session.started",
                   {"AGENTHOST_TEST_TOKEN=" + token});
  EXPECT_EQ(r.exit_code, 130) << r.raw;
  ASSERT_FALSE(r.messages.empty());
  EXPECT_EQ(r.messages.back().type, message_type::terminal_cancelled);
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
  kill_leftovers("AGENTHOST_TEST_TOKEN=" + token);
  std::filesystem::remove_all(dir);
}

}  // namespace
