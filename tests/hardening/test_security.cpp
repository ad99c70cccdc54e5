// Security properties of spawning: argv only (prompts and ids are never interpreted by a shell or read as flags),
// explicit environment inheritance (the allow-list hides secrets, also from the reaper helper), and the prompt size
// limit of an argv-only design.
#include "hardening_util.hpp"

#include <cstdlib>

using namespace agenthost;
using namespace agenthost::test;
using transport::message;
using transport::message_type;

namespace {

const std::string fixtures = AGENTHOST_FIXTURES_DIR;
const std::string tool_turn = fixtures + "/pi/pi-0.73.1-json-tool-turn.jsonl";

class Security : public provider_fixture {
 protected:
  // A stand-in `pi` (a script) that records its argv NUL-separated, then replays a transcript.
  std::string stand_in_pi() {
    const std::string pi = dir + "/pi";
    write_file(pi, "#!/bin/sh\nprintf '%s\\0' \"$@\" > '" + dir + "/argv'\nexec '" + AGENTHOST_FAKE_AGENT +
                       "' replay '" + tool_turn + "'\n");
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

TEST_F(Security, PromptAboveTheKernelsArgumentLimitIsAClearStartFailure) {
  // argv-only means the prompt is one argument: Linux limits one argument to MAX_ARG_STRLEN (32 pages = 128 KiB).
  // A 1 MiB prompt cannot be passed; the run must say so (start_failed, E2BIG), not crash or hang.
  const std::string pi = stand_in_pi();
  const auto t = run_pi(pi_options(pi), std::string(std::size_t{1} << 20, 'p'));
  ASSERT_EQ(t.type, message_type::terminal_failed);
  EXPECT_EQ(t.content.at("reason"), "start_failed");
  const std::string text = t.content.at("text").get<std::string>();
  EXPECT_NE(text.find("Argument list too long"), std::string::npos) << text;
  report_figure("security 1 MiB prompt: " + t.to_json_line().substr(0, 300));
  // Just below the limit works.
  const std::string big(128 * 1024 - 2, 'p');  // + the terminating NUL stays within 128 KiB
  EXPECT_EQ(run_pi(pi_options(pi), big).type, message_type::terminal_completed);
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
    EXPECT_TRUE(name == "PATH" || name == "HOME" || name == "AGENTHOST_TEST_TOKEN") << "leaked: " << name;
  }

  auto [unset, unset_reaper] = env_of({.unset = {"AGENTHOST_HARDENING_SECRET"}});
  EXPECT_EQ(unset.find("s3cr3t"), std::string::npos);
  EXPECT_EQ(unset_reaper.find("s3cr3t"), std::string::npos);

  auto [none, none_reaper] = env_of({.inherit = false});
  EXPECT_EQ(none, "env: AGENTHOST_TEST_TOKEN=" + token + "\nready\n") << "nothing but what was set";
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
