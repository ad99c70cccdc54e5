// Spawning and streaming through a real child process (the fake agent), in both containment modes.
#include "test_util.hpp"

#include "../../process/src/linux/adopt_spawn.hpp"

#include <agenthost/process/child.hpp>
#include <agenthost/process/spawn_server.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <csignal>
#include <cstring>

using namespace agenthost;
using namespace agenthost::process;
using namespace agenthost::test;

namespace {

// reaper: through the spawn server after the first spawn of the process; reaper_exec: every agent started first and
// its own reaper exec'd after it, in adopt mode (see process/src/linux/adopt_spawn.hpp); reaper_first: the reaper
// exec'd first, spawning the agent itself, as on kernels without close_range.
struct containment_case {
  containment_kind mode;
  bool reaper_server;
  const char* name;
  bool reaper_first = false;
};

class ChildTest : public ::testing::TestWithParam<containment_case> {
 protected:
  void SetUp() override { process::detail::disable_adopt_spawn_for_testing(GetParam().reaper_first); }
  void TearDown() override {
    process::detail::disable_adopt_spawn_for_testing(false);
    kill_leftovers(token_env());
    EXPECT_EQ(zombie_children(), 0);
  }
  std::string token_env() const { return "AGENTHOST_TEST_TOKEN=" + token; }

  spawn_options options(std::vector<std::string> args) {
    return {.executable = AGENTHOST_FAKE_AGENT,
            .args = std::move(args),
            .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}},
            .containment = GetParam().mode,
            .reaper_path = AGENTHOST_REAPER,
            .reaper_server = GetParam().reaper_server};
  }

  child spawn(std::vector<std::string> args) {
    auto c = child::spawn(io.get_executor(), options(std::move(args)));
    if (!c) throw std::runtime_error("spawn failed: " + c.error().message);  // gtest reports it as a failure
    return std::move(*c);
  }

  // Reads stdout to EOF.
  std::vector<std::string> read_all(child& c, std::vector<line_view>* raw = nullptr) {
    std::vector<std::string> lines;
    bool eof = false;
    std::function<void()> next = [&] {
      c.async_read_lines([&](boost::system::error_code ec, line_batch batch) {
        if (ec) {
          EXPECT_EQ(ec, asio::error::eof);
          eof = true;
          return;
        }
        EXPECT_FALSE(batch.empty());
        for (const auto& l : batch) {
          lines.emplace_back(l.text);
          if (raw != nullptr) raw->push_back({{}, l.oversize, l.total_bytes});
        }
        next();
      });
    };
    next();
    EXPECT_TRUE(run_until(io, [&] { return eof; }));
    return lines;
  }

  exit_status wait(child& c) {
    std::optional<exit_status> st;
    c.async_wait([&](boost::system::error_code ec, exit_status s) {
      EXPECT_FALSE(ec);
      st = s;
    });
    EXPECT_TRUE(run_until(io, [&] { return st.has_value(); }));
    return st.value_or(exit_status{});
  }

  stop_report stop(child& c, stop_policy p = {}) {
    std::optional<stop_report> r;
    c.async_stop(p, [&](boost::system::error_code ec, stop_report rep) {
      EXPECT_FALSE(ec) << ec.message();
      r = rep;
    });
    EXPECT_TRUE(run_until(io, [&] { return r.has_value(); }));
    return r.value_or(stop_report{});
  }

  asio::io_context io;
  std::string token = random_token();
};

TEST_P(ChildTest, StreamsLinesAndReportsExitCodeAsAType) {
  auto c = spawn({"stdout", "hello", "stdout", "world", "exit", "3"});
  EXPECT_EQ(c.containment(), GetParam().mode);
  EXPECT_EQ(read_all(c), (std::vector<std::string>{"hello", "world"}));
  const auto st = wait(c);
  ASSERT_NE(st.as_exited(), nullptr);
  EXPECT_EQ(st.as_exited()->code, 3);
  EXPECT_EQ(st.to_string(), "exited with code 3");
  stop(c);
}

TEST_P(ChildTest, SignalDeathIsNotAnExitCode) {
  auto c = spawn({"kill-self", "9"});
  const auto st = wait(c);
  ASSERT_NE(st.as_signaled(), nullptr);
  EXPECT_EQ(st.as_signaled()->signal, SIGKILL);
  EXPECT_EQ(st.as_exited(), nullptr);
  stop(c);
}

TEST_P(ChildTest, ChildSeesOnlyStdioDescriptors) {
  // Open a descriptor without O_CLOEXEC in the host: it must not leak into the agent.
  const int leak = ::open("/dev/null", O_RDONLY);
  auto c = spawn({"print-fds"});
  const auto lines = read_all(c);
  ::close(leak);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "fds: 0 1 2");
  stop(c);
}

TEST_P(ChildTest, ChildStartsWithDefaultSignalDispositionsAndEmptyMask) {
  // A host started in the background has SIGINT ignored; exec would pass that on.
  struct sigaction old_int {}, ign {};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ign, &old_int);
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &block, &old_mask);
  auto c = spawn({"print-signals"});
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ::sigaction(SIGINT, &old_int, nullptr);
  const auto lines = read_all(c);
  ASSERT_FALSE(lines.empty());
  int checked = 0;
  for (const auto& l : lines) {
    // Signals 32 and 33 are glibc-internal (posix_spawn cannot reset them); every standard signal must be default.
    if (l.rfind("SigIgn:", 0) == 0 || l.rfind("SigBlk:", 0) == 0) {
      const auto mask = std::stoull(l.substr(l.find(':') + 1), nullptr, 16);
      EXPECT_EQ(mask & 0x7fffffffULL, 0u) << l;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2);
  stop(c);
}

TEST_P(ChildTest, EnvironmentOverrideRemoveAndAllowList) {
  ::setenv("AGENTHOST_TEST_SECRET", "s3cret", 1);
  ::setenv("AGENTHOST_TEST_KEEP", "kept", 1);
  auto opts = options({"print-env"});
  opts.env.unset = {"AGENTHOST_TEST_SECRET"};
  opts.env.set["AGENTHOST_TEST_NEW"] = "new value";
  auto c = child::spawn(io.get_executor(), opts);
  ASSERT_TRUE(c);
  auto lines = read_all(*c);
  auto has = [&](const std::string& s) { return std::find(lines.begin(), lines.end(), "env: " + s) != lines.end(); };
  EXPECT_FALSE(has("AGENTHOST_TEST_SECRET=s3cret"));
  EXPECT_TRUE(has("AGENTHOST_TEST_KEEP=kept"));
  EXPECT_TRUE(has("AGENTHOST_TEST_NEW=new value"));
  stop(*c);

  opts.env.allow = {"PATH"};
  auto c2 = child::spawn(io.get_executor(), opts);
  ASSERT_TRUE(c2);
  lines = read_all(*c2);
  for (const auto& l : lines)
    // The library adds its own tree token (not a secret: a random id).
    EXPECT_TRUE(l.rfind("env: PATH=", 0) == 0 || l.rfind("env: AGENTHOST_TEST_", 0) == 0 ||
                l.rfind("env: AGENTHOST_TREE_TOKEN=", 0) == 0)
        << l;
  EXPECT_FALSE(has("AGENTHOST_TEST_KEEP=kept"));
  stop(*c2);

  // A host under agenthost itself: one token entry, first, with the host's token and then the tree's own.
  opts.env.set["AGENTHOST_TREE_TOKEN"] = "above";
  auto c3 = child::spawn(io.get_executor(), opts);
  ASSERT_TRUE(c3);
  lines = read_all(*c3);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](const std::string& l) { return l.rfind("env: AGENTHOST_TREE_TOKEN=", 0) == 0; }),
            1);
  EXPECT_EQ(lines.front().rfind("env: AGENTHOST_TREE_TOKEN=above:", 0), 0u) << lines.front();
  EXPECT_EQ(lines.front().size(), std::string("env: AGENTHOST_TREE_TOKEN=above:").size() + 24) << lines.front();
  stop(*c3);
  ::unsetenv("AGENTHOST_TEST_SECRET");
  ::unsetenv("AGENTHOST_TEST_KEEP");
}

TEST_P(ChildTest, WorkingDirectoryIsApplied) {
  auto opts = options({"print-cwd"});
  opts.working_directory = "/tmp";
  auto c = child::spawn(io.get_executor(), opts);
  ASSERT_TRUE(c);
  EXPECT_EQ(read_all(*c), (std::vector<std::string>{"/tmp"}));
  stop(*c);
}

TEST_P(ChildTest, CrlfSplitUtf8NoTrailingNewlineAndBom) {
  auto c = spawn({"bom", "crlf", "split-utf8", "no-trailing-newline"});
  const auto lines = read_all(c);
  ASSERT_GE(lines.size(), 3u);
  for (const auto& l : lines) {
    EXPECT_EQ(l.find('\r'), std::string::npos) << l;
    EXPECT_EQ(l.find("\xEF\xBB\xBF"), std::string::npos) << l;
  }
  stop(c);
}

TEST_P(ChildTest, LongLinesWithinAndBeyondTheMaximum) {
  auto opts = options({"line", "3000000", "stdout", "after", "line", "100", "exit", "0"});
  opts.max_line_bytes = 1 << 20;
  auto c = child::spawn(io.get_executor(), opts);
  ASSERT_TRUE(c);
  std::vector<line_view> raw;
  const auto lines = read_all(*c, &raw);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(raw[0].oversize);
  EXPECT_EQ(raw[0].total_bytes, 3000000u);
  EXPECT_EQ(lines[0].size(), opts.oversize_head_bytes);
  EXPECT_EQ(lines[1], "after");
  EXPECT_FALSE(raw[2].oversize);
  EXPECT_EQ(lines[2].size(), 100u);
  stop(*c);
}

TEST_P(ChildTest, StderrFloodIsDrainedIntoABoundedTail) {
  auto opts = options({"stderr-flood", "20000000", "stderr", "the last words", "stdout", "done"});
  opts.stderr_tail_bytes = 4096;
  auto c = child::spawn(io.get_executor(), opts);
  ASSERT_TRUE(c);
  EXPECT_EQ(read_all(*c), (std::vector<std::string>{"done"}));
  wait(*c);
  stop(*c);  // the tree is gone only once stderr was drained to the end
  const auto tail = c->stderr_tail();
  EXPECT_LE(tail.size(), 4096u);
  EXPECT_NE(tail.find("the last words"), std::string::npos);
  EXPECT_GE(c->stderr_bytes(), 20000000u);
}

TEST_P(ChildTest, WritesToStdinAndEofOnClose) {
  auto c = spawn({"read-stdin"});
  std::size_t written = 0;
  c.async_write_stdin(asio::buffer(std::string("one\ntwo\n")), [&](boost::system::error_code ec, std::size_t n) {
    EXPECT_FALSE(ec);
    written = n;
  });
  ASSERT_TRUE(run_until(io, [&] { return written == 8; }));
  c.close_stdin();
  EXPECT_EQ(read_all(c), (std::vector<std::string>{"stdin: one", "stdin: two"}));
  EXPECT_TRUE(wait(c).success());
  stop(c);
}

TEST_P(ChildTest, WritingToAGoneAgentIsStdinClosedNotSigpipe) {
  auto c = spawn({"exit", "0"});
  wait(c);
  stop(c);
  std::optional<boost::system::error_code> result;
  const std::string big(1 << 20, 'x');
  c.async_write_stdin(asio::buffer(big), [&](boost::system::error_code ec, std::size_t) { result = ec; });
  ASSERT_TRUE(run_until(io, [&] { return result.has_value(); }));
  EXPECT_EQ(*result, agenthost::errc::stdin_closed);
}

TEST_P(ChildTest, StdoutEofAndExitAreIndependent) {
  // The leader exits at once; its child keeps stdout open: the exit must be reported anyway.
  auto c = spawn({"leader-exits-early"});
  const auto st = wait(c);
  EXPECT_TRUE(st.success()) << st.to_string();
  bool read_done = false;
  c.async_read_lines([&](boost::system::error_code, line_batch) { read_done = true; });
  // The stop kills the child holding stdout: the read ends with EOF.
  const auto r = stop(c, stop_policy::kill_now());
  EXPECT_TRUE(r.survivors.empty());
  EXPECT_TRUE(run_until(io, [&] { return read_done; }));
}

TEST_P(ChildTest, ReadCancellationLosesNoData) {
  auto c = spawn({"stdout", "first", "never-exit"});
  asio::cancellation_signal sig;
  std::optional<boost::system::error_code> first;
  std::vector<std::string> got;
  c.async_read_lines(asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code ec, line_batch b) {
    first = ec;
    for (auto& l : b) got.emplace_back(l.text);
  }));
  ASSERT_TRUE(run_until(io, [&] { return first.has_value(); }));
  EXPECT_EQ(got, std::vector<std::string>{"first"});
  std::optional<boost::system::error_code> second;
  c.async_read_lines(asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code ec, line_batch) {
    second = ec;
  }));
  io.poll();
  sig.emit(asio::cancellation_type::terminal);
  ASSERT_TRUE(run_until(io, [&] { return second.has_value(); }));
  EXPECT_EQ(*second, asio::error::operation_aborted);
  EXPECT_TRUE(c.running());
  stop(c);
}

TEST_P(ChildTest, WaitCancellationDoesNotAffectTheProcess) {
  auto c = spawn({"never-exit"});
  asio::cancellation_signal sig;
  std::optional<boost::system::error_code> ec;
  c.async_wait(asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code e, exit_status) { ec = e; }));
  io.poll();
  sig.emit(asio::cancellation_type::total);
  ASSERT_TRUE(run_until(io, [&] { return ec.has_value(); }));
  EXPECT_EQ(*ec, asio::error::operation_aborted);
  EXPECT_TRUE(c.running());
  const auto r = stop(c);
  EXPECT_EQ(r.phase, stop_phase::interrupt);
}

TEST_P(ChildTest, SlowConsumerBlocksTheAgentInsteadOfGrowingMemory) {
  // 100,000 lines of 1 KB = ~100 MB: far more than a pipe holds. While nobody reads, the agent must stay blocked in
  // write() (stdout is read only while a read is pending), and every line arrives once the consumer catches up.
  auto c = spawn({"flood-lines", "100000", "--size", "1000", "exit", "0"});
  std::size_t lines = 0;
  bool first = false;
  c.async_read_lines([&](boost::system::error_code, line_batch b) {
    lines += b.size();
    first = true;
  });
  ASSERT_TRUE(run_until(io, [&] { return first; }));
  // No read pending now. Give the agent ample time to finish if it could (it cannot: the pipe is full).
  std::optional<exit_status> st;
  c.async_wait([&](boost::system::error_code, exit_status s) { st = s; });
  io.run_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(st.has_value()) << "the agent wrote 100 MB although nobody read: output was buffered somewhere";
  ASSERT_TRUE(read_to_end(io, c, [&](line_batch b) {
    for (const auto& l : b) EXPECT_EQ(l.total_bytes, 1000u);
    lines += b.size();
  }, 60s));
  ASSERT_TRUE(run_until(io, [&] { return st.has_value(); }));
  EXPECT_EQ(lines, 100000u);
  EXPECT_TRUE(st->success());
  stop(c);
}

TEST_P(ChildTest, StopWritingCtrlCToAClosedStdinNeverRaisesSigpipe) {
  auto c = spawn({"close-stdin", "ready", "never-exit"});
  bool ready = false;
  c.async_read_lines([&](boost::system::error_code, line_batch) { ready = true; });
  ASSERT_TRUE(run_until(io, [&] { return ready; }));
  // Phase 1 writes "\x03" into a stdin nobody reads any more: the test process must survive it.
  const auto r = stop(c);
  EXPECT_EQ(r.phase, stop_phase::interrupt);
}

TEST_P(ChildTest, HostIgnoringSigchld) {
  // A host with SIGCHLD ignored lets the kernel reap its children: statuses are lost, nothing may hang.
  struct sigaction ign {}, old {};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGCHLD, &ign, &old);
  auto c = spawn({"exit", "7"});
  const auto st = wait(c);
  if (GetParam().mode == containment_kind::reaper) {
    // The reaper reports the agent's status over its own channel: still exact.
    ASSERT_NE(st.as_exited(), nullptr) << st.to_string();
    EXPECT_EQ(st.as_exited()->code, 7);
  } else {
    EXPECT_TRUE(st.is_unknown()) << st.to_string();
  }
  const auto r = stop(c);
  EXPECT_TRUE(r.survivors.empty());
  EXPECT_LT(r.elapsed, std::chrono::seconds(2));
  ::sigaction(SIGCHLD, &old, nullptr);
}

INSTANTIATE_TEST_SUITE_P(Containment, ChildTest,
                         ::testing::Values(containment_case{containment_kind::reaper, true, "reaper"},
                                           containment_case{containment_kind::reaper, false, "reaper_exec"},
                                           containment_case{containment_kind::reaper, false, "reaper_first", true},
                                           containment_case{containment_kind::session, true, "session"}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// ---- start failures -----------------------------------------------------------------------------------------------

TEST(SpawnErrors, MissingExecutableNamesThePath) {
  asio::io_context io;
  const int fds = open_fd_count();
  auto c = child::spawn(io.get_executor(), {.executable = "/nonexistent/agent-xyz"});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, agenthost::errc::executable_not_found);
  EXPECT_NE(c.error().message.find("/nonexistent/agent-xyz"), std::string::npos);
  auto c2 = child::spawn(io.get_executor(), {.executable = "agenthost-no-such-agent"});
  ASSERT_FALSE(c2);
  EXPECT_EQ(c2.error().code, agenthost::errc::executable_not_found);
  EXPECT_NE(c2.error().message.find("agenthost-no-such-agent"), std::string::npos);
  EXPECT_EQ(open_fd_count(), fds);
  EXPECT_EQ(zombie_children(), 0);
}

// execve() would end a string at its first NUL (a prompt cut silently) and the spawn server's request is
// NUL-separated: each place a NUL can hide is refused by name, before anything is spawned, in both containments.
TEST(SpawnErrors, NulBytesAreRefusedByNameBeforeSpawning) {
  asio::io_context io;
  const int fds = open_fd_count();
  using namespace std::string_literals;
  for (const auto mode : {containment_kind::reaper, containment_kind::session}) {
    const auto refused = [&](spawn_options o, const std::string& what) {
      if (o.executable.empty()) o.executable = AGENTHOST_FAKE_AGENT;
      o.containment = mode;
      o.reaper_path = AGENTHOST_REAPER;
      auto c = child::spawn(io.get_executor(), std::move(o));
      ASSERT_FALSE(c) << what;
      EXPECT_EQ(c.error().code, agenthost::errc::argument_contains_nul) << what;
      EXPECT_NE(c.error().message.find(what + " contains a NUL byte"), std::string::npos) << c.error().message;
    };
    refused({.args = {"exit", "fix\0 the test"s}}, "argument 2");
    refused({.args = {"exit", "0"}, .env = {.set = {{"PROMPT", "a\0b"s}}}}, "the environment variable 'PROMPT'");
    refused({.executable = std::string(AGENTHOST_FAKE_AGENT) + "\0x"s, .args = {"exit", "0"}}, "the executable path");
    refused({.args = {"exit", "0"}, .working_directory = "/tmp\0/x"s}, "the working directory");
    refused({.args = {"exit", "0"}, .argv0 = "agent\0"s}, "argv0");
  }
  EXPECT_STREQ(agenthost::errc_name(agenthost::errc::argument_contains_nul), "argument_contains_nul");
  EXPECT_EQ(open_fd_count(), fds) << "a refused spawn leaked descriptors";
}

TEST(SpawnErrors, CommandLinesTheKernelWouldRefuseNameTheCulpritBeforeSpawning) {
  asio::io_context io;
  const int fds = open_fd_count();
  const std::size_t max_string = 32 * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));  // MAX_ARG_STRLEN
  const auto spawn = [&](spawn_options o) {
    o.executable = AGENTHOST_FAKE_AGENT;
    o.containment = containment_kind::reaper;
    o.reaper_path = AGENTHOST_REAPER;
    return child::spawn(io.get_executor(), std::move(o));
  };
  auto one = spawn({.args = {"exit", std::string(max_string, 'a')}});
  ASSERT_FALSE(one);
  EXPECT_EQ(one.error().code, agenthost::errc::argument_list_too_long);
  EXPECT_STREQ(agenthost::errc_name(agenthost::errc::argument_list_too_long), "argument_list_too_long");
  EXPECT_NE(one.error().message.find("argument 2 is " + std::to_string(max_string) + " bytes"), std::string::npos)
      << one.error().message;
  EXPECT_NE(one.error().message.find("MAX_ARG_STRLEN"), std::string::npos) << one.error().message;
  auto env = spawn({.args = {"exit", "0"}, .env = {.set = {{"BIG", std::string(max_string, 'e')}}}});
  ASSERT_FALSE(env);
  EXPECT_NE(env.error().message.find("environment variable BIG"), std::string::npos) << env.error().message;
  // 60 arguments of 120 KB: 7.2 MB, above any total limit (at most 6 MiB).
  auto total = spawn({.args = std::vector<std::string>(60, std::string(120000, 't'))});
  ASSERT_FALSE(total);
  EXPECT_NE(total.error().message.find("RLIMIT_STACK"), std::string::npos) << total.error().message;
  EXPECT_EQ(open_fd_count(), fds);
  EXPECT_EQ(zombie_children(), 0);
  // Just below the per-string limit, through the reaper: the agent runs and gets the argument intact.
  auto ok = spawn({.args = {"stdout", std::string(max_string - 1, 'b')}});
  ASSERT_TRUE(ok) << ok.error().message;
  std::size_t longest = 0;
  for (int i = 0; i < 100 && longest == 0; ++i) {
    bool done = false;
    ok->async_read_lines([&](boost::system::error_code ec, line_batch lines) {
      if (!ec)
        for (const auto& l : lines) longest = std::max(longest, l.total_bytes);
      else
        longest = longest == 0 ? 1 : longest;
      done = true;
    });
    ASSERT_TRUE(run_until(io, [&] { return done; }));
  }
  EXPECT_EQ(longest, max_string - 1);
}

TEST(SpawnErrors, NonExecutableFileAndDirectory) {
  asio::io_context io;
  char tmpl[] = "/tmp/agenthost-nx-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  ::close(fd);
  auto c = child::spawn(io.get_executor(), {.executable = tmpl});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, agenthost::errc::executable_not_executable);
  EXPECT_NE(c.error().message.find(tmpl), std::string::npos);
  ::unlink(tmpl);
  auto d = child::spawn(io.get_executor(), {.executable = "/tmp"});
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, agenthost::errc::executable_not_executable);
}

TEST(SpawnErrors, MissingWorkingDirectoryNamesThePath) {
  asio::io_context io;
  const int fds = open_fd_count();
  auto c = child::spawn(io.get_executor(),
                        {.executable = AGENTHOST_FAKE_AGENT, .working_directory = "/nonexistent/dir-abc"});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, agenthost::errc::working_directory_not_found);
  EXPECT_NE(c.error().message.find("/nonexistent/dir-abc"), std::string::npos);
  EXPECT_EQ(open_fd_count(), fds);
}

TEST(SpawnErrors, RequiredReaperMissing) {
  asio::io_context io;
  auto c = child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                            .containment = containment_kind::reaper,
                                            .reaper_path = "/nonexistent/agenthost-reaper"});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, agenthost::errc::reaper_not_found);
  EXPECT_THROW((void)c.value(), boost::system::system_error);
}

TEST(SpawnErrors, ReaperRefusesToRunByHand) {
  // No control socket on fd 3, wrong arguments: usage and exit 2, nothing spawned.
  const int rc = std::system((std::string(AGENTHOST_REAPER) + " /bin/true 2>/dev/null").c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  const int rc2 = std::system((std::string(AGENTHOST_REAPER) + " --control-fd 3 -- /bin/true true 2>/dev/null").c_str());
  EXPECT_EQ(WEXITSTATUS(rc2), 2);
}

// An executable file the kernel cannot run (no ELF header, no "#!"): execve fails with ENOEXEC after every check.
std::string write_unrunnable_file() {
  char tmpl[] = "/tmp/agenthost-noexec-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  const std::string junk = "this is not a program\n";
  EXPECT_EQ(::write(fd, junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
  ::fchmod(fd, 0700);
  ::close(fd);
  return tmpl;
}

TEST(SpawnErrors, AnAgentTheKernelCannotExecIsASpawnErrorOnEveryPath) {
  // Reaper without the server (the agent first, its reaper after it), through the server, and session: the exec
  // failure is reported synchronously with the errno, and nothing is left behind.
  const std::string bad = write_unrunnable_file();
  asio::io_context io;
  // The spawn server up front, and waited for: otherwise the server spawn below is the process's first and starts it
  // on a background thread, whose descriptors come and go while this test counts them (and no spawn goes through it).
  const auto prestarted = prestart_spawn_server(AGENTHOST_REAPER);
  ASSERT_TRUE(prestarted) << prestarted.error().message;
  using path = std::pair<containment_kind, bool>;  // containment, reaper_server
  for (const auto& [mode, server] : {path{containment_kind::reaper, false}, path{containment_kind::reaper, true},
                                     path{containment_kind::session, false}}) {
    const int fds = open_fd_count();
    auto c = child::spawn(io.get_executor(), {.executable = bad,
                                              .containment = mode,
                                              .reaper_path = AGENTHOST_REAPER,
                                              .reaper_server = server});
    ASSERT_FALSE(c) << "mode " << static_cast<int>(mode) << " server " << server;
    EXPECT_EQ(c.error().code, agenthost::errc::spawn_failed);
    EXPECT_NE(c.error().message.find(bad), std::string::npos) << c.error().message;
    EXPECT_NE(c.error().message.find(std::strerror(ENOEXEC)), std::string::npos) << c.error().message;
    EXPECT_EQ(open_fd_count(), fds);
    EXPECT_EQ(zombie_children(), 0);
  }
  ::unlink(bad.c_str());
}

TEST(SpawnErrors, AReaperThatCannotBeExecdLeavesNoAgentRunning) {
  // The reaper path passes every check (an executable file) but execve refuses it: by then the agent already runs
  // (it is started before its reaper), so it must be killed and reaped before the error is returned.
  const std::string bad_reaper = write_unrunnable_file();
  const std::string token = random_token();
  asio::io_context io;
  // Waits for a background start of the spawn server an earlier test may have left under way (see above).
  const auto server = prestart_spawn_server(AGENTHOST_REAPER);
  ASSERT_TRUE(server) << server.error().message;
  const int fds = open_fd_count();
  auto c = child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                            .args = {"ready", "never-exit"},
                                            .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}},
                                            .containment = containment_kind::reaper,
                                            .reaper_path = bad_reaper,
                                            .reaper_server = false});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, agenthost::errc::spawn_failed);
  EXPECT_NE(c.error().message.find(bad_reaper), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find(std::strerror(ENOEXEC)), std::string::npos) << c.error().message;
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
  EXPECT_EQ(open_fd_count(), fds);
  EXPECT_EQ(zombie_children(), 0);
  kill_leftovers("AGENTHOST_TEST_TOKEN=" + token);
  ::unlink(bad_reaper.c_str());
}

}  // namespace
