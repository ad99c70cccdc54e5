// The fixture shared by the provider tests that run an agent through a real child process: the fake agent, started
// directly or behind a stand-in script named like the real agent that records its argv.
#pragma once

#include "provider_test_util.hpp"
#include "test_util.hpp"

#include <agenthost/mapper/event_mapper.hpp>
#include <agenthost/transport/contract_checker.hpp>
#include <agenthost/transport/message.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace agenthost::test {

/// The lines of a text file (none when it cannot be read).
inline std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

/// Each message as its JSON line: a mismatch between two runs then prints as readable text.
inline std::vector<std::string> json_lines(const std::vector<transport::message>& messages) {
  std::vector<std::string> out;
  for (const auto& m : messages) out.push_back(m.to_json_line());
  return out;
}

/// What a `Mapper` alone makes of a transcript file ending with `end`: the reference for a run through a process.
template <class Mapper>
std::vector<transport::message> mapped(const std::string& file, const mapper::run_end& end) {
  Mapper m;
  std::vector<transport::message> out;
  for (const auto& l : read_lines(file)) m.on_line(l, out);
  m.finish(end, out);
  return out;
}

/// How a run ended, with every message it handed on (the terminal last).
struct run_result {
  boost::system::error_code ec;
  std::vector<transport::message> messages;
  transport::message terminal;
};

/// Asked of every message of a run: true cancels the run there.
using cancel_predicate = std::function<bool(const transport::message&)>;

/// A test of one provider's runs (`Options` are its options): an io_context, a private temp dir, and a token put in
/// the environment of every process of a run, so that leftovers can be found and, after each test, killed.
template <class Options>
class provider_run_fixture : public ::testing::Test {
 protected:
  using result = run_result;

  /// `agent` names the stand-in executable and, to tell the fixtures' leftovers apart, the temp dir.
  explicit provider_run_fixture(std::string agent) : dir(temp_dir(agent)), agent_(std::move(agent)) {}

  void TearDown() override {
    kill_leftovers("AGENTHOST_TEST_TOKEN=" + token);
    std::filesystem::remove_all(dir);
  }

  /// Writes the stand-in dir/<agent>, a script that records its arguments (one per line) in dir/argv, then execs the
  /// fake agent with `fake_args` as shell words (exec keeps the pid, so the run sees the fake agent as the agent).
  /// Returns its path.
  std::string stand_in_script(const std::string& fake_args) const {
    const std::string path = dir + "/" + agent_;
    {
      std::ofstream s(path);
      s << "#!/bin/sh\nprintf '%s\\n' \"$@\" > " << dir << "/argv\nexec " << AGENTHOST_FAKE_AGENT << " " << fake_args
        << "\n";
    }
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    return path;
  }

  /// The same with each of `fake_args` one word, whatever spaces it holds (none may hold a single quote).
  std::string stand_in_script(const std::vector<std::string>& fake_args) const {
    std::string words;
    for (const auto& a : fake_args) words += (words.empty() ? "'" : " '") + a + "'";
    return stand_in_script(words);
  }

  /// Options that run `executable` with the token in its environment and the reaper built with the tests.
  Options options(const std::string& executable) const {
    Options o;
    o.executable = executable;
    o.env.set = {{"AGENTHOST_TEST_TOKEN", token}};
    o.reaper_path = AGENTHOST_REAPER;
    return o;
  }

  /// Options that run the stand-in with `fake_args` (see stand_in_script).
  Options stand_in(const std::string& fake_args) const { return options(stand_in_script(fake_args)); }
  Options stand_in(const std::vector<std::string>& fake_args) const { return options(stand_in_script(fake_args)); }

  /// The arguments the last stand-in was started with.
  std::vector<std::string> recorded_argv() const { return read_lines(dir + "/argv"); }

  /// Runs one operation to its end: `start(on_message, completion_token)` starts it on `io`; `cancel_when` may emit
  /// the cancellation signal from inside on_message. Checks what every run must satisfy: it ends within 30 s, the
  /// contract checker finds nothing, the terminal is the last message, and no process is left behind.
  template <class Start>
  result run_to_end(Start start, const cancel_predicate& cancel_when) {
    result r;
    bool done = false;
    asio::cancellation_signal sig;
    start(
        [&](const transport::message& m) {
          r.messages.push_back(m);
          if (cancel_when && cancel_when(m)) sig.emit(asio::cancellation_type::terminal);
        },
        asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code ec, transport::message t) {
          r.ec = ec;
          r.terminal = std::move(t);
          done = true;
        }));
    EXPECT_TRUE(run_until(io, [&] { return done; }, 30s));
    EXPECT_EQ(transport::check_run(r.messages), std::vector<std::string>{});
    EXPECT_FALSE(r.messages.empty());
    if (!r.messages.empty()) {
      EXPECT_EQ(r.messages.back(), r.terminal);
    }
    EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty()) << "the run left processes behind";
    return r;
  }

  asio::io_context io;
  std::string token = random_token();
  std::string dir;

 private:
  static std::string temp_dir(const std::string& agent) {
    std::string t = "/tmp/agenthost-" + agent + "-provider-XXXXXX";
    return ::mkdtemp(t.data());
  }

  std::string agent_;
};

}  // namespace agenthost::test
