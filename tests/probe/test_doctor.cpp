// `agenthost doctor` as a user (or an IDE) runs it: JSON when stdout is not a terminal, exit codes.
#include "probe_test_util.hpp"

#include <csignal>
#include <functional>

#ifdef AGENTHOST_CLI

using namespace agenthost;
using namespace agenthost::test;

namespace {

struct cli_result {
  int exit_code = -1;
  std::string out;
};

class Doctor : public probe_fixture {
 protected:
  // Runs the CLI with only PATH, HOME and the token in its environment; stdout is a pipe (so it prints JSON).
  // `started(pid)` runs once the program is spawned, before its output is read.
  cli_result doctor(std::vector<std::string> args, const std::string& path_var,
                    const std::function<void(pid_t)>& started = {}) {
    args.insert(args.begin(), {AGENTHOST_CLI, "doctor"});
    auto run = run_program(std::move(args),
                           {"PATH=" + path_var, "HOME=" + home.string(), needle(),
                            std::string("AGENTHOST_REAPER=") + AGENTHOST_REAPER},
                           "/dev/null", std::chrono::seconds(30), started);
    cli_result r{.exit_code = run.exit_code, .out = std::move(run.out)};
    EXPECT_TRUE(processes_with_env(needle()).empty()) << "doctor left processes behind";
    return r;
  }

  std::string fakes_path() const { return bin.string() + ":/usr/bin:/bin"; }

  /// The fakes of all five agents in bin/, each printing what the real CLI prints.
  void fake_all() {
    fake_pi("pi 1.6.0");
    fake_agent("claude", "2.1.332 (Claude Code)");
    fake_agent("codex", "codex-cli 0.171.0");
    fake_agent("gemini", "0.61.0");
    fake_agent("opencode", "1.18.33");
  }

  static std::vector<std::string> agents_of(const nlohmann::json& j) {
    std::vector<std::string> names;
    for (const auto& e : j) names.push_back(e.value("agent", "?"));
    return names;
  }
};

const std::vector<std::string> all_five = {"pi", "claude", "codex", "gemini", "opencode"};

TEST_F(Doctor, UsableAgentExitsZeroWithAJsonArray) {
  fake_pi("pi 1.6.0");
  const auto r = doctor({"--agent", "pi"}, fakes_path());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.out;
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["agent"], "pi");
  EXPECT_EQ(j[0]["available"], true);
  EXPECT_EQ(j[0]["version"], "1.6.0");
  EXPECT_EQ(j[0]["executable"], (bin / "pi").string());
}

TEST_F(Doctor, UnusableAgentExitsOne) {
  fake_pi("not a version");
  const auto r = doctor({"--agent", "pi"}, fakes_path());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.out;
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["available"], false);
  EXPECT_FALSE(j[0]["problems"].empty());
}

TEST_F(Doctor, MissingAgentExitsOne) {
  const auto r = doctor({"--json"}, bin.string());  // nothing on PATH, nothing in HOME
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.out;
  EXPECT_EQ(agents_of(j), all_five);
  for (const auto& e : j) {
    EXPECT_EQ(e["available"], false) << e.dump();
    EXPECT_EQ(e["executable"], "") << e.dump();
  }
}

TEST_F(Doctor, ByDefaultProbesAllFiveAgentsAndExitsZeroWhenAllAreUsable) {
  fake_all();
  const auto r = doctor({}, fakes_path());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.out;
  ASSERT_EQ(agents_of(j), all_five);
  const std::vector<std::string> versions = {"1.6.0", "2.1.332", "0.171.0", "0.61.0", "1.18.33"};
  for (std::size_t i = 0; i < j.size(); ++i) {
    EXPECT_EQ(j[i]["available"], true) << j[i].dump();
    EXPECT_EQ(j[i]["version"], versions[i]) << j[i].dump();
    EXPECT_EQ(j[i]["executable"], (bin / all_five[i]).string());
  }
}

TEST_F(Doctor, OneMissingAgentAmongFiveExitsOne) {
  fake_all();
  fs::remove(bin / "gemini");
  const auto r = doctor({}, fakes_path());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array() && j.size() == 5u) << r.out;
  EXPECT_EQ(j[3]["agent"], "gemini");
  EXPECT_EQ(j[3]["available"], false);
  EXPECT_EQ(j[2]["available"], true);
}

TEST_F(Doctor, NamedAgentsKeepTheCommandLineOrder) {
  fake_all();
  const auto r = doctor({"--agent", "codex", "--agent", "claude"}, fakes_path());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.out;
  EXPECT_EQ(agents_of(j), (std::vector<std::string>{"codex", "claude"}));
  EXPECT_EQ(j[0]["version"], "0.171.0");
  EXPECT_EQ(j[1]["version"], "2.1.332");
}

TEST_F(Doctor, CwdSelectsTheFolderGeminiTrusts) {
  fake_agent("gemini", "0.61.0");
  const auto work = fs::canonical(dir) / "work";
  fs::create_directories(work);
  auto untrusted = [&] {
    const auto r = doctor({"--agent", "gemini", "--cwd", work.string()}, fakes_path());
    EXPECT_EQ(r.exit_code, 0) << r.out;  // a hint, not a problem
    return r.out.find("is not a trusted folder") != std::string::npos;
  };
  EXPECT_TRUE(untrusted());
  write(home / ".gemini" / "trustedFolders.json", nlohmann::json{{work.string(), "TRUST_FOLDER"}}.dump(), 0644);
  EXPECT_FALSE(untrusted());
}

TEST_F(Doctor, HangingAgentIsBoundedByTimeout) {
  write(bin / "pi", "#!/bin/sh\nsleep 60 &\nsleep 60\n");
  const auto start = std::chrono::steady_clock::now();
  const auto r = doctor({"--timeout", "300ms"}, fakes_path());  // also checks no process is left
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("timed out after 0.3 s"), std::string::npos) << r.out;
}

// Ctrl-C during a probe: the version command's tree is killed, what was found is printed (the executable), and the
// exit says the answer was cut short (130, as `run` does) rather than "not usable" (1).
TEST_F(Doctor, SigintKillsTheProbesPrintsWhatWasFoundAndExits130) {
  const auto fifo = dir / "started";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // The fake pi says it runs through the FIFO (its open blocks until the test reads), then hangs with a child.
  write(bin / "pi", "#!/bin/sh\necho up > " + fifo.string() + "\nsleep 60 &\nsleep 60\n");
  const auto r = doctor({"--agent", "pi", "--timeout", "30s"}, fakes_path(), [&](pid_t pid) {
    std::ifstream in(fifo);  // returns once pi is running
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, "up");
    ::kill(pid, SIGINT);
  });  // also checks no process is left
  EXPECT_EQ(r.exit_code, 130) << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array() && j.size() == 1u) << r.out;
  EXPECT_EQ(j[0]["agent"], "pi");
  EXPECT_EQ(j[0]["available"], false) << r.out;
  EXPECT_EQ(j[0]["executable"], (bin / "pi").string()) << r.out;
}

TEST_F(Doctor, ExecutableOptionProbesThatFileForAnyAgent) {
  fake_agent("codex", "codex-cli 0.171.0");  // on PATH, but --executable wins
  const auto exe = fake_agent("codex", "codex-cli 0.170.2", 0, dir / "elsewhere" / "codex");
  const auto r = doctor({"--agent", "codex", "--executable", exe.string()}, fakes_path());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array() && j.size() == 1u) << r.out;
  EXPECT_EQ(j[0]["agent"], "codex");
  EXPECT_EQ(j[0]["executable"], exe.string());
  EXPECT_EQ(j[0]["version"], "0.170.2");
}

TEST_F(Doctor, ExecutableOptionProbesThatFile) {
  const auto exe = fake_pi("0.73.1", 0, dir / "elsewhere" / "pi");
  const auto r = doctor({"--agent", "pi", "--executable", exe.string()}, fakes_path());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.out;
  EXPECT_EQ(j[0]["executable"], exe.string());
  EXPECT_EQ(j[0]["version"], "0.73.1");
}

TEST_F(Doctor, UsageErrorsExitTwo) {
  EXPECT_EQ(doctor({"--agent", "nope"}, fakes_path()).exit_code, 2);
  EXPECT_EQ(doctor({"--agent", "claude-code"}, fakes_path()).exit_code, 2);
  EXPECT_EQ(doctor({"--agent", "codex", "--agent", "nope"}, fakes_path()).exit_code, 2);
  EXPECT_EQ(doctor({"extra"}, fakes_path()).exit_code, 2);
  EXPECT_EQ(doctor({"--executable", "/x/pi"}, fakes_path()).exit_code, 2);  // needs exactly one --agent
  EXPECT_EQ(doctor({"--agent", "pi", "--agent", "codex", "--executable", "/x/pi"}, fakes_path()).exit_code, 2);
  EXPECT_EQ(doctor({"--timeout", "soon"}, fakes_path()).exit_code, 2);
}

}  // namespace

#endif
