// The `agenthost run` program against a real agent CLI, interrupted like a user's Ctrl+C: shared by the real-CLI
// suites. Needs AGENTHOST_REAPER; expect_agenthost_run_interrupted also AGENTHOST_CLI (the program's path).
#pragma once

#include "real_cli_util.hpp"

#include <agenthost/process/options.hpp>
#include <agenthost/transport/contract_checker.hpp>
#include <agenthost/transport/message.hpp>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace agenthost::test::real {

struct cli_interrupt_result {
  bool spawned = false;
  bool signalled = false;  ///< SIGINT was sent (the trigger text appeared in time)
  int wait_status = 0;     ///< waitpid's status of the agenthost program
  std::string raw;         ///< its stdout
  std::string stderr_text;
  std::vector<transport::message> messages;  ///< its stdout parsed as contract messages
  std::chrono::milliseconds elapsed{};  ///< the whole run, the agent's start-up included
  /// From the SIGINT to the program's exit; nullopt when no SIGINT was sent.
  std::optional<std::chrono::milliseconds> stop_elapsed;
};

/// Runs `program args…` with the host's environment minus env.unset, plus env.set and AGENTHOST_REAPER (the program
/// passes its environment on to the agent); stdin /dev/null, stderr to `stderr_file`. Sends SIGINT to the program once
/// its stdout contains `trigger`. Bounded by `limit` (then SIGKILL).
inline cli_interrupt_result run_cli_and_interrupt(const std::string& program, const std::vector<std::string>& args,
                                                  const process::environment_options& env,
                                                  const std::string& stderr_file, const std::string& trigger,
                                                  std::chrono::seconds limit = std::chrono::seconds(60)) {
  cli_interrupt_result r;
  std::vector<std::string> argv_store = {program};
  argv_store.insert(argv_store.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_store) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string item(*e);
    const std::string name = item.substr(0, item.find('='));
    if (std::find(env.unset.begin(), env.unset.end(), name) == env.unset.end() && !env.set.contains(name) &&
        name != "AGENTHOST_REAPER")
      env_store.push_back(item);
  }
  for (const auto& [k, v] : env.set) env_store.push_back(k + "=" + v);
  env_store.push_back(std::string("AGENTHOST_REAPER=") + AGENTHOST_REAPER);
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return r;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const auto t0 = std::chrono::steady_clock::now();
  r.spawned = ::posix_spawn(&pid, program.c_str(), &fa, nullptr, argv.data(), envp.data()) == 0;
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  if (!r.spawned) {
    ::close(out[0]);
    return r;
  }
  char buf[65536];
  const auto deadline = t0 + limit;
  stop_clock stop_watch;
  bool timed_out = true;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 1000) < 0) break;
    if ((p.revents & (POLLIN | POLLHUP)) == 0) continue;
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) {
      timed_out = false;
      break;
    }
    r.raw.append(buf, static_cast<std::size_t>(n));
    if (!r.signalled && r.raw.find(trigger) != std::string::npos) {
      stop_watch.mark();
      r.signalled = ::kill(pid, SIGINT) == 0;
    }
  }
  ::close(out[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  ::waitpid(pid, &r.wait_status, 0);
  const auto ended = std::chrono::steady_clock::now();
  r.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(ended - t0);
  if (r.signalled) r.stop_elapsed = stop_watch.until(ended);
  std::istringstream lines(r.raw);
  for (std::string l; std::getline(lines, l);)
    if (auto m = transport::message::from_json_line(l)) r.messages.push_back(*m);
  std::ifstream err(stderr_file);
  r.stderr_text.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
  return r;
}

/// What every interrupted `agenthost run` must show: SIGINT sent, exit code 130, terminal.cancelled last, a valid run.
inline void expect_cancelled_with_130(const cli_interrupt_result& r) {
  ASSERT_TRUE(r.spawned);
  EXPECT_TRUE(r.signalled) << "the trigger never appeared\n" << r.raw << r.stderr_text;
  ASSERT_TRUE(WIFEXITED(r.wait_status)) << "status " << r.wait_status << "\n" << r.raw << r.stderr_text;
  EXPECT_EQ(WEXITSTATUS(r.wait_status), 130) << r.raw << r.stderr_text;
  ASSERT_FALSE(r.messages.empty()) << r.raw;
  EXPECT_EQ(r.messages.back().type, transport::message_type::terminal_cancelled) << r.raw;
  EXPECT_EQ(transport::check_run(r.messages), std::vector<std::string>{}) << r.raw;
}

#ifdef AGENTHOST_CLI
/// Every suite's CliSigintCancelsTheRunAndExits130: `agenthost run --agent <agent> --executable <executable>
/// <options…> --json --timeout 60s -- <scenario_prompt>` with `env` (stderr to <dir>/cli.stderr), SIGINT once its
/// stdout shows `trigger`, must end as expect_cancelled_with_130 says within kStopBound of the SIGINT, leaving no
/// process with `run_mark`.
inline cli_interrupt_result expect_agenthost_run_interrupted(const std::string& agent, const std::string& executable,
                                                             const std::vector<std::string>& options,
                                                             const process::environment_options& env,
                                                             const std::string& trigger, const std::string& dir,
                                                             const std::string& run_mark) {
  std::vector<std::string> args = {"run", "--agent", agent, "--executable", executable};
  args.insert(args.end(), options.begin(), options.end());
  args.insert(args.end(), {"--json", "--timeout", "60s", "--", scenario_prompt});
  const auto r = run_cli_and_interrupt(AGENTHOST_CLI, args, env, dir + "/cli.stderr", trigger);
  expect_cancelled_with_130(r);
  EXPECT_EQ(processes_with_env(run_mark), std::vector<int>{}) << "agenthost, its reaper, " << agent
                                                              << " or a tool survived";
  EXPECT_LT(stopped_in(r.stop_elapsed), kStopBound)
      << "from the SIGINT to the exit; the whole run took " << r.elapsed.count() << " ms";
  return r;
}
#endif

}  // namespace agenthost::test::real
