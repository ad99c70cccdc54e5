// Security properties of spawning: argv and stdin only (prompts and ids are never interpreted by a shell or read as
// flags or files), explicit environment inheritance (the allow-list hides secrets, also from the reaper helper), and
// prompts of any size (through stdin above the argv threshold; argv-only delivery fails clearly at the kernel's limit).
#include "hardening_util.hpp"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iterator>

using namespace agenthost;
using namespace agenthost::test;
using transport::message;
using transport::message_type;

namespace {

const std::string fixtures = AGENTHOST_FIXTURES_DIR;
const std::string tool_turn = fixtures + "/pi/pi-0.73.1-json-tool-turn.jsonl";

class Security : public provider_fixture {
 protected:
  // A stand-in `pi` (a script) that records its argv NUL-separated and its stdin byte for byte, then replays a
  // transcript.
  std::string stand_in_pi() {
    const std::string pi = dir + "/pi";
    write_file(pi, "#!/bin/sh\nprintf '%s\\0' \"$@\" > '" + dir + "/argv'\ncat > '" + dir + "/stdin'\nexec '" +
                       AGENTHOST_FAKE_AGENT + "' replay '" + tool_turn + "'\n");
    std::filesystem::permissions(pi, std::filesystem::perms::owner_all);
    return pi;
  }
  std::vector<std::string> recorded_argv() const {
    const std::string bytes = read_file(dir + "/argv");
    std::vector<std::string> argv;
    std::size_t pos = 0;
    while (pos < bytes.size()) {
      const std::size_t z = bytes.find('\0', pos);
      argv.push_back(bytes.substr(pos, z - pos));
      pos = z + 1;
    }
    return argv;
  }
  providers::pi_options pi_options(const std::string& pi) const {
    providers::pi_options o{.executable = pi, .no_session = true, .reaper_path = AGENTHOST_REAPER};
    o.env.set = {{"AGENTHOST_TEST_TOKEN", token}};
    return o;
  }
  message run_pi(const providers::pi_options& o, const std::string& prompt) {
    std::vector<message> got;
    auto terminal = providers::run_pi(o, prompt, [&](const message& m) { got.push_back(m); });
    EXPECT_EQ(transport::check_run(got), std::vector<std::string>{});
    EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
    return terminal;
  }

  // Runs the fake agent directly (process layer) and returns its stdout lines; `while_running` sees the agent's pid
  // after its "ready" line.
  std::vector<std::string> agent_lines(process::spawn_options o, const std::function<void(int)>& while_running = {}) {
    auto c = process::child::spawn(io.get_executor(), std::move(o));
    EXPECT_TRUE(c.has_value()) << (c ? "" : c.error().message);
    if (!c) return {};
    std::vector<std::string> lines;
    bool eof = false, ready = false;
    std::function<void()> read = [&] {
      c->async_read_lines([&](boost::system::error_code ec, process::line_batch batch) {
        if (ec) {
          eof = true;
          return;
        }
        for (const auto& l : batch) {
          lines.emplace_back(l.text);
          ready = ready || l.text == "ready";
        }
        read();
      });
    };
    read();
    if (while_running) {
      EXPECT_TRUE(run_until(io, [&] { return ready || eof; }));
      while_running(c->pid());
    }
    bool stopped = false;
    if (while_running) {
      c->async_stop(process::stop_policy::kill_now(), [&](boost::system::error_code, process::stop_report) { stopped = true; });
    } else {
      stopped = true;
    }
    EXPECT_TRUE(run_until(io, [&] { return eof && stopped; }));
    return lines;
  }
};

TEST_F(Security, PromptsReachPiVerbatimAsOneArgumentNeverThroughAShell) {
  const std::string pi = stand_in_pi();
  const std::string pwned = dir + "/pwned";
  const std::vector<std::string> prompts{
      "--help", "-rf /", "$(id)", "`id`", "$(touch " + pwned + ")", "; touch " + pwned + " #", "a\nb\n\nc",
      "'\"\\", "*", "~", "-", "--", "-p", "\t leading whitespace", std::string(100 * 1024, 'p')};
  for (const auto& version : {std::optional<providers::version>{}, std::optional(providers::version{1, 6, 0})}) {
    for (const auto& prompt : prompts) {
      auto o = pi_options(pi);
      o.pi_version = version;
      o.prompt_delivery = providers::pi_prompt_delivery::argv;
      const auto terminal = run_pi(o, prompt);
      EXPECT_EQ(terminal.type, message_type::terminal_completed) << prompt.substr(0, 40);
      const auto argv = recorded_argv();
      ASSERT_GE(argv.size(), 2u);
      if (version) {  // pi ≥ 1.6: "-p -- PROMPT"
        EXPECT_EQ(argv[argv.size() - 2], "--");
        EXPECT_EQ(argv.back(), prompt);
      } else if (prompt[0] == '-') {  // older pi: no "--"; a leading space keeps it from being a flag
        EXPECT_EQ(argv.back(), " " + prompt);
        EXPECT_EQ(argv[argv.size() - 2], "-p");
      } else {
        EXPECT_EQ(argv.back(), prompt);
        EXPECT_EQ(argv[argv.size() - 2], "-p");
      }
      EXPECT_FALSE(std::filesystem::exists(pwned)) << "a prompt was interpreted by a shell: " << prompt;
    }
  }
}

TEST_F(Security, IdsAndOptionValuesAreSingleArgumentsAndIdsCannotBeFlags) {
  const std::string pi = stand_in_pi();
  auto o = pi_options(pi);
  o.no_session = false;
  o.session_id = "$(touch " + dir + "/pwned) x";
  o.model = "--help";
  o.extra_args = {"--arg with spaces", "$(id)"};
  EXPECT_EQ(run_pi(o, "hi").type, message_type::terminal_completed);
  EXPECT_EQ(recorded_argv(), (std::vector<std::string>{"--arg with spaces", "$(id)", "--mode", "json", "--model",
                                                        "--help", "--session", *o.session_id, "-p", "hi"}));
  EXPECT_FALSE(std::filesystem::exists(dir + "/pwned"));
  // A session id that would be read as a flag is refused before anything is spawned.
  for (const std::string id : {"--help", "-", ""}) {
    o.session_id = id;
    const auto t = run_pi(o, "hi");
    EXPECT_EQ(t.type, message_type::terminal_failed);
    EXPECT_EQ(t.content.at("reason"), "start_failed") << id;
  }
  o.session_id.reset();
  o.tools = std::vector<std::string>{"read", "--all"};
  EXPECT_EQ(run_pi(o, "hi").content.at("reason"), "start_failed") << "a tool name cannot be a flag";
}

// 1 MiB of varied bytes (text, newlines, shell syntax, flags, @file, UTF-8, control bytes), ending in a non-space.
std::string mebibyte_prompt() {
  static const char* const pieces[] = {"fix the test ", "\n", "$(touch /tmp/pwned) ", "`id` ", "; rm -rf / # ",
                                       "caf\xC3\xA9 ", "\xF0\x9F\x98\x80", "--help ", "@/etc/passwd ", "\t",
                                       "\x01\x7F", "'\"\\", "\xE3\x80\x80", "\r\n"};
  std::string s;
  std::uint64_t state = 1;
  while (s.size() < (std::size_t{1} << 20)) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    s += pieces[(state >> 33) % std::size(pieces)];
  }
  s.resize((std::size_t{1} << 20) - 1);
  s += '.';
  return s;
}

TEST_F(Security, MebibytePromptReachesPiExactlyThroughStdin) {
  // Above the argv threshold the prompt goes to pi's stdin (pi reads it to EOF, trims it, and puts it before the
  // prompt argument). Checked byte for byte: what the stand-in read on stdin, its argv, and what pi 0.73.1 would make
  // of both (stdin.trim() + argument).
  const std::string pi = stand_in_pi();
  const std::string core = mebibyte_prompt();
  struct variant {
    std::string prompt, stdin_bytes, argument, pi_sees;
  };
  const std::vector<variant> variants{
      {core, core, "", core},
      {core + "\n\n \t", core, "\n\n \t", core + "\n\n \t"},  // trailing whitespace survives as the argument
      {" \n\t" + core, core, "", core},                     // leading whitespace is dropped (documented)
      {"-" + core, "-" + core, "", "-" + core},               // no flag, no leading space needed
  };
  for (const auto& version : {std::optional<providers::version>{}, std::optional(providers::version{1, 6, 0})}) {
    for (const auto& v : variants) {
      std::filesystem::remove(dir + "/stdin");
      auto o = pi_options(pi);
      o.pi_version = version;
      const auto t0 = std::chrono::steady_clock::now();
      const auto terminal = run_pi(o, v.prompt);
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
      ASSERT_EQ(terminal.type, message_type::terminal_completed) << terminal.to_json_line().substr(0, 400);
      const std::string got = read_file(dir + "/stdin");
      EXPECT_EQ(got.size(), v.stdin_bytes.size());
      EXPECT_TRUE(got == v.stdin_bytes) << "stdin differs from the expected bytes";
      const auto argv = recorded_argv();
      ASSERT_GE(argv.size(), 1u);
      std::string argument;
      if (v.argument.empty()) {
        EXPECT_EQ(argv.back(), "-p") << "nothing after -p";
      } else {
        argument = argv.back();
        EXPECT_EQ(argv[argv.size() - 2], version ? "--" : "-p");
      }
      EXPECT_EQ(argument, v.argument);
      EXPECT_TRUE(got + argument == v.pi_sees) << "pi would not see the prompt";
      std::size_t argv_bytes = 0;
      for (const auto& a : argv) argv_bytes += a.size();
      EXPECT_LT(argv_bytes, 1000u) << "the prompt must not also be in argv";
      EXPECT_FALSE(std::filesystem::exists("/tmp/pwned"));
      report_figure("security 1 MiB prompt through stdin (" + std::to_string(v.prompt.size()) +
                    " bytes) to a stand-in pi: " + std::to_string(ms.count()) + " ms");
    }
  }
}

TEST_F(Security, AtFilePromptsGoThroughStdinNeverReadAsFiles) {
  // pi reads an argument starting with '@' as a file to attach: "@/etc/passwd" must stay text.
  const std::string pi = stand_in_pi();
  EXPECT_EQ(run_pi(pi_options(pi), "@/etc/passwd summarize").type, message_type::terminal_completed);
  EXPECT_EQ(read_file(dir + "/stdin"), "@/etc/passwd summarize");
  EXPECT_EQ(recorded_argv().back(), "-p");
  auto o = pi_options(pi);
  o.prompt_delivery = providers::pi_prompt_delivery::argv;  // forced argv: one leading space (pi 0.73.1 has no --)
  EXPECT_EQ(run_pi(o, "@/etc/passwd").type, message_type::terminal_completed);
  EXPECT_EQ(recorded_argv().back(), " @/etc/passwd");
}

TEST_F(Security, ArgvDeliveryAboveTheKernelsLimitIsAClearStartFailureBeforeSpawning) {
  // Forced argv: Linux limits one argument to MAX_ARG_STRLEN (32 pages = 128 KiB). The run says so, names the limit,
  // and spawns nothing.
  const std::string pi = stand_in_pi();
  auto o = pi_options(pi);
  o.prompt_delivery = providers::pi_prompt_delivery::argv;
  const auto t = run_pi(o, std::string(std::size_t{1} << 20, 'p'));
  ASSERT_EQ(t.type, message_type::terminal_failed);
  EXPECT_EQ(t.content.at("reason"), "start_failed");
  EXPECT_EQ(t.content.at("error"), "argument_list_too_long");
  const std::string text = t.content.at("text").get<std::string>();
  EXPECT_NE(text.find("MAX_ARG_STRLEN"), std::string::npos) << text;
  EXPECT_NE(text.find("1048576 bytes"), std::string::npos) << text;
  EXPECT_FALSE(std::filesystem::exists(dir + "/argv")) << "nothing may be spawned";
  report_figure("security 1 MiB prompt forced through argv: " + t.to_json_line().substr(0, 300));
  // Just below the limit works.
  const std::string big(128 * 1024 - 2, 'p');  // + the terminating NUL stays within 128 KiB
  EXPECT_EQ(run_pi(o, big).type, message_type::terminal_completed);
  EXPECT_EQ(recorded_argv().back(), big);
}

TEST_F(Security, EnvironmentAllowListHidesSecretsFromTheAgentAndTheReaper) {
  ::setenv("AGENTHOST_HARDENING_SECRET", "s3cr3t-value", 1);
  auto env_of = [&](process::environment_options env) {
    env.set["AGENTHOST_TEST_TOKEN"] = token;
    auto o = fake({"print-env", "ready", "never-exit"});
    o.env = std::move(env);
    std::string reaper_env;
    auto lines = agent_lines(std::move(o), [&](int agent_pid) {
      // The agent's parent is the reaper helper: its environment must be as clean as the agent's.
      std::ifstream stat("/proc/" + std::to_string(agent_pid) + "/stat");
      std::string s;
      std::getline(stat, s);
      std::istringstream rest(s.substr(s.rfind(')') + 2));
      char state = 0;
      int ppid = 0;
      rest >> state >> ppid;
      reaper_env = read_file("/proc/" + std::to_string(ppid) + "/environ");
      EXPECT_NE(read_file("/proc/" + std::to_string(ppid) + "/cmdline").find("agenthost-reaper"), std::string::npos);
    });
    std::string all;
    for (const auto& l : lines) all += l + "\n";
    return std::pair{all, reaper_env};
  };
  const std::string secret = "AGENTHOST_HARDENING_SECRET=s3cr3t-value";

  auto [inherited, inherited_reaper] = env_of({});
  EXPECT_NE(inherited.find("env: " + secret), std::string::npos) << "control: inherited by default";

  auto [allowed, allowed_reaper] = env_of({.allow = {"PATH", "HOME"}});
  EXPECT_EQ(allowed.find("s3cr3t"), std::string::npos) << allowed;
  EXPECT_EQ(allowed_reaper.find("s3cr3t"), std::string::npos) << "the reaper helper got the secret";
  EXPECT_NE(allowed.find("env: PATH="), std::string::npos);
  EXPECT_NE(allowed.find("env: AGENTHOST_TEST_TOKEN=" + token), std::string::npos) << "`set` still applies";
  for (std::istringstream in(allowed); std::getline(in, inherited);) {
    if (inherited.rfind("env: ", 0) != 0) continue;
    const std::string name = inherited.substr(5, inherited.find('=') - 5);
    EXPECT_TRUE(name == "PATH" || name == "HOME" || name == "AGENTHOST_TEST_TOKEN" || name == "AGENTHOST_TREE_TOKEN")
        << "leaked: " << name;
  }

  auto [unset, unset_reaper] = env_of({.unset = {"AGENTHOST_HARDENING_SECRET"}});
  EXPECT_EQ(unset.find("s3cr3t"), std::string::npos);
  EXPECT_EQ(unset_reaper.find("s3cr3t"), std::string::npos);

  auto [none, none_reaper] = env_of({.inherit = false});
  // Nothing but what was set, and the library's own tree token (a random id, not a secret), which comes last.
  const auto tree = none.find("env: AGENTHOST_TREE_TOKEN=");
  ASSERT_NE(tree, std::string::npos) << none;
  EXPECT_EQ(none.substr(0, tree) + none.substr(none.find('\n', tree) + 1),
            "env: AGENTHOST_TEST_TOKEN=" + token + "\nready\n")
      << none;
  ::unsetenv("AGENTHOST_HARDENING_SECRET");
}

TEST_F(Security, PiProviderPassesTheEnvironmentOptionsThrough) {
  ::setenv("AGENTHOST_HARDENING_SECRET", "s3cr3t-value", 1);
  // The stand-in pi prints its environment as invalid output lines: they come back in invalid_output_lines.
  const std::string pi = dir + "/pi-env";
  write_file(pi, "#!/bin/sh\nenv | sort\nexec '" + std::string(AGENTHOST_FAKE_AGENT) + "' replay '" + tool_turn + "'\n");
  std::filesystem::permissions(pi, std::filesystem::perms::owner_all);
  auto o = pi_options(pi);
  o.env.allow = {"PATH"};
  const auto t = run_pi(o, "hi");
  ASSERT_EQ(t.type, message_type::terminal_completed);
  const std::string invalid = t.content.at("invalid_output_lines").dump();
  EXPECT_EQ(invalid.find("s3cr3t"), std::string::npos) << invalid;
  EXPECT_NE(invalid.find("PATH="), std::string::npos) << invalid;
  ::unsetenv("AGENTHOST_HARDENING_SECRET");
}

}  // namespace
