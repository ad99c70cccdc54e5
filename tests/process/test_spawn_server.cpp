// The reaper spawn server (spawn_options::reaper_server, the default): one `agenthost-reaper --server` per host
// process forks each agent's reaper. The first reaper-mode spawn (and the first after the server died) exec's its
// own reaper and starts the server right after; later ones go through the server. These tests pin down what it must
// keep from the per-agent exec path: the tree stays contained when the server dies (between spawns, or with the
// host), concurrent first spawns start exactly one server, nothing leaks over many cycles, and whatever the server
// cannot serve falls back to exec.
#include "test_util.hpp"

#include "../../process/src/linux/reaper_server.hpp"

#include <agenthost/process/child.hpp>
#include <agenthost/process/spawn_server.hpp>

#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <thread>

using namespace agenthost;
using namespace agenthost::process;
using namespace agenthost::test;

namespace {

int parent_of(int pid) {
  const auto p = read_proc_stat(pid);
  return p ? static_cast<int>(p->ppid) : -1;
}

std::string cmdline(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (char& c : s)
    if (c == '\0') c = ' ';
  return s;
}

bool is_server(int pid) { return cmdline(pid).find("agenthost-reaper --server --control-fd 3") != std::string::npos; }

/// Live (non-zombie) children of `parent`.
std::vector<int> children_of(int parent, bool include_zombies = false) {
  std::vector<int> out;
  for (const auto& p : all_processes())
    if (p.ppid == parent && (include_zombies || p.state != 'Z')) out.push_back(p.pid);
  return out;
}

/// Our spawn servers (normally at most one).
std::vector<int> our_servers() {
  std::vector<int> out;
  for (int pid : children_of(::getpid()))
    if (is_server(pid)) out.push_back(pid);
  return out;
}

/// Polls `cond` every millisecond until it holds or `timeout` passes (for states that have no event to wait on,
/// e.g. the server reaping its children).
bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds timeout = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

/// SIGKILLs `pid` and waits (bounded) until it is dead — through a pidfd, which turns readable at its exit.
bool kill_and_wait(int pid, std::chrono::milliseconds timeout = 5s) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return false;
  ::syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0);
  pollfd p{fd, POLLIN, 0};
  const bool dead = ::poll(&p, 1, static_cast<int>(timeout.count())) == 1;
  ::close(fd);
  return dead;
}

class SpawnServer : public ::testing::Test {
 protected:
  void TearDown() override { kill_leftovers("AGENTHOST_TEST_TOKEN=" + token); }
  child spawn(std::vector<std::string> args, const liveness_fifo* f = nullptr, bool server = true) {
    spawn_options o{.executable = AGENTHOST_FAKE_AGENT,
                    .args = std::move(args),
                    .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}},
                    .containment = containment_kind::reaper,
                    .reaper_path = AGENTHOST_REAPER,
                    .reaper_server = server};
    if (f != nullptr) o.env.set["AGENTHOST_LIVENESS_FIFO"] = f->path();
    auto c = child::spawn(io.get_executor(), std::move(o));
    if (!c) throw std::runtime_error("spawn failed: " + c.error().message);
    return std::move(*c);
  }
  /// Makes sure the server runs (a spawn that finds none exec's its reaper and starts one).
  void ensure_server() {
    auto warm = spawn({"exit", "0"});
    boost::system::error_code ec;
    stop(warm, ec);
    // posix_spawn returns once the server's exec has replaced its memory, but the kernel fills in the new argv (what
    // /proc/<pid>/cmdline shows) a moment later: on a loaded machine the first look may not recognise it yet.
    ASSERT_TRUE(eventually([] { return our_servers().size() == 1u; })) << our_servers().size() << " servers";
    // Until its first idle reaper says "ready", a spawn starts its agent itself instead of queueing behind the start.
    ASSERT_TRUE(eventually([] { return process::detail::spawn_server_ready(); })) << "the server never said ready";
  }
  stop_report stop(child& c, boost::system::error_code& ec) {
    std::optional<stop_report> r;
    c.async_stop(stop_policy::kill_now(), [&](boost::system::error_code e, stop_report rep) {
      ec = e;
      r = std::move(rep);
    });
    EXPECT_TRUE(run_until(io, [&] { return r.has_value(); }));
    return r.value_or(stop_report{});
  }
  asio::io_context io;
  std::string token = random_token();
};

TEST_F(SpawnServer, EveryAgentsReaperIsForkedByOneServer) {
  ensure_server();
  auto a = spawn({"ready", "never-exit"});
  auto b = spawn({"ready", "never-exit"});
  ASSERT_TRUE(read_until_line(io, a, "ready"));
  ASSERT_TRUE(read_until_line(io, b, "ready"));
  const int reaper_a = parent_of(a.pid()), reaper_b = parent_of(b.pid());
  EXPECT_NE(reaper_a, reaper_b) << "one reaper per agent";
  EXPECT_EQ(parent_of(reaper_a), parent_of(reaper_b));
  EXPECT_TRUE(is_server(parent_of(reaper_a))) << cmdline(parent_of(reaper_a));
  EXPECT_EQ(parent_of(parent_of(reaper_a)), ::getpid());
  EXPECT_EQ(our_servers().size(), 1u);
  boost::system::error_code ec;
  EXPECT_TRUE(stop(a, ec).survivors.empty());
  EXPECT_TRUE(stop(b, ec).survivors.empty());
}

TEST_F(SpawnServer, PrestartStartsTheServerBeforeTheFirstSpawn) {
  for (int pid : our_servers()) ASSERT_TRUE(kill_and_wait(pid));
  ASSERT_TRUE(eventually([] { return our_servers().empty(); }));
  ASSERT_TRUE(prestart_spawn_server(AGENTHOST_REAPER));
  ASSERT_TRUE(eventually([] { return our_servers().size() == 1u; })) << our_servers().size() << " servers";
  const int server = our_servers().front();
  ASSERT_TRUE(prestart_spawn_server(AGENTHOST_REAPER)) << "a second call finds it running";
  EXPECT_EQ(our_servers(), std::vector<int>{server});
  // It returned once the server's first idle reaper said "ready": the first spawn takes a reaper the server forked.
  EXPECT_TRUE(process::detail::spawn_server_ready());
  auto a = spawn({"ready", "never-exit"});
  ASSERT_TRUE(read_until_line(io, a, "ready"));
  EXPECT_EQ(parent_of(parent_of(a.pid())), server) << cmdline(parent_of(parent_of(a.pid())));
  boost::system::error_code ec;
  EXPECT_TRUE(stop(a, ec).survivors.empty());
}

// A spawn that finds no server starts it on a thread of its own and returns; a start that fails there is kept for the
// next spawn to log (that thread may not call the host's logger), once, and the next spawn tries again.
TEST_F(SpawnServer, ABackgroundStartThatFailsIsReportedOnceAndTheNextSpawnStartsOne) {
  for (int pid : our_servers()) ASSERT_TRUE(kill_and_wait(pid));
  ASSERT_TRUE(eventually([] { return our_servers().empty(); }));
  process::detail::start_spawn_server_in_background("/nonexistent/agenthost-reaper");
  // It waits for the background start to end: no server came of it.
  EXPECT_EQ(process::detail::wait_spawn_server_ready(5s), ESRCH);
  EXPECT_EQ(process::detail::take_background_start_error(), ENOENT);
  EXPECT_EQ(process::detail::take_background_start_error(), 0) << "reported once";
  EXPECT_EQ(zombie_children(), 0);
  auto a = spawn({"ready", "never-exit"});
  ASSERT_TRUE(read_until_line(io, a, "ready"));
  EXPECT_EQ(parent_of(parent_of(a.pid())), ::getpid()) << "found no server: exec'd its reaper";
  EXPECT_EQ(process::detail::wait_spawn_server_ready(5s), 0) << "the spawn started one in the background";
  EXPECT_EQ(our_servers().size(), 1u);
  boost::system::error_code ec;
  EXPECT_TRUE(stop(a, ec).survivors.empty());
}

TEST_F(SpawnServer, PrestartErrorsAreSpecific) {
  auto missing = prestart_spawn_server("/nonexistent/agenthost-reaper");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, agenthost::errc::reaper_not_found);
  EXPECT_NE(missing.error().message.find("/nonexistent/agenthost-reaper"), std::string::npos);
  ensure_server();
  char tmpl[] = "/tmp/agenthost-reaper-link-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string link = dir + "/agenthost-reaper";
  std::filesystem::create_symlink(AGENTHOST_REAPER, link);
  auto other = prestart_spawn_server(link);
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, agenthost::errc::spawn_failed);
  EXPECT_NE(other.error().message.find("another reaper path"), std::string::npos) << other.error().message;
}

TEST_F(SpawnServer, ExecPathWhenDisabled) {
  auto a = spawn({"ready", "never-exit"}, nullptr, false);
  ASSERT_TRUE(read_until_line(io, a, "ready"));
  EXPECT_EQ(parent_of(parent_of(a.pid())), ::getpid()) << "the reaper is exec'd by the host";
  boost::system::error_code ec;
  EXPECT_TRUE(stop(a, ec).survivors.empty());
  EXPECT_FALSE(ec);
}

TEST_F(SpawnServer, AnotherReaperPathFallsBackToExec) {
  ensure_server();
  auto first = spawn({"ready", "never-exit"});  // the server runs AGENTHOST_REAPER
  ASSERT_TRUE(read_until_line(io, first, "ready"));
  char tmpl[] = "/tmp/agenthost-reaper-link-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string link = dir + "/agenthost-reaper";
  std::filesystem::create_symlink(AGENTHOST_REAPER, link);
  auto c = child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                            .args = {"ready", "never-exit"},
                                            .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}},
                                            .containment = containment_kind::reaper,
                                            .reaper_path = link});
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_TRUE(read_until_line(io, *c, "ready"));
  EXPECT_EQ(parent_of(parent_of(c->pid())), ::getpid()) << "exec'd, not served by the other path's server";
  boost::system::error_code ec;
  EXPECT_TRUE(stop(*c, ec).survivors.empty());
  EXPECT_TRUE(stop(first, ec).survivors.empty());
  std::filesystem::remove_all(dir);
}

TEST_F(SpawnServer, LargeEnvironmentTravelsThroughAMemfd) {
  ensure_server();
  // 4 × 60 KB of environment: more than one SOCK_SEQPACKET packet may carry inline (one string must stay below the
  // kernel's 128 KiB MAX_ARG_STRLEN).
  const std::string big(60 * 1024, 'v');
  auto c = child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                            .args = {"print-env", "print-cwd"},
                                            .working_directory = "/tmp",
                                            .env = {.set = {{"AGENTHOST_TEST_TOKEN", token},
                                                            {"BIG", big},
                                                            {"BIG2", big},
                                                            {"BIG3", big},
                                                            {"BIG4", big + "4"}}},
                                            .containment = containment_kind::reaper,
                                            .reaper_path = AGENTHOST_REAPER});
  ASSERT_TRUE(c) << c.error().message;
  bool saw_big = false, saw_cwd = false, eof = false;
  std::function<void()> next = [&] {
    c->async_read_lines([&](boost::system::error_code ec, line_batch lines) {
      if (ec) {
        eof = true;
        return;
      }
      for (const auto& l : lines) {
        saw_big = saw_big || l.text == "env: BIG4=" + big + "4";
        saw_cwd = saw_cwd || l.text == "/tmp";
      }
      next();
    });
  };
  next();
  ASSERT_TRUE(run_until(io, [&] { return eof; }));
  EXPECT_TRUE(saw_big);
  EXPECT_TRUE(saw_cwd);
}

// The host changes what a child inherits after the server started (here its umask and its open-files limit, as a
// host that configures itself after prestart_spawn_server() would): the next agent still gets the host's values, not
// the server's — that spawn starts its own reaper and replaces the server, whose next agents get them too.
TEST_F(SpawnServer, WhatTheHostChangedAfterTheServerStartedReachesTheAgents) {
  ensure_server();
  const auto servers_before = our_servers();
  ASSERT_EQ(servers_before.size(), 1u);
  rlimit files{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &files), 0);
  ASSERT_GT(files.rlim_cur, 200u);
  const rlimit lowered{files.rlim_cur - 7, files.rlim_max};
  struct restore {
    mode_t mask;
    rlimit limit;
    ~restore() {
      ::umask(mask);
      ::setrlimit(RLIMIT_NOFILE, &limit);
    }
  } restore_host{::umask(027), files};  // restored even when an assertion below fails
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
  const std::string expected_limit = std::to_string(lowered.rlim_cur);
  // Prints what it inherited, then stays until stopped (so that its reaper's parent can be looked at).
  const auto start = [&] {
    auto c = child::spawn(io.get_executor(), {.executable = "/bin/sh",
                                              .args = {"-c", "umask; ulimit -Sn; echo ready; exec sleep 60"},
                                              .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}},
                                              .containment = containment_kind::reaper,
                                              .reaper_path = AGENTHOST_REAPER});
    if (!c) throw std::runtime_error("spawn failed: " + c.error().message);
    return std::move(*c);
  };
  const auto inherited = [&](child& c) {
    std::vector<std::string> lines;
    bool done = false;
    std::function<void()> next = [&] {
      c.async_read_lines([&](boost::system::error_code ec, line_batch b) {
        for (const auto& l : b) lines.emplace_back(l.text);
        done = ec || std::find(lines.begin(), lines.end(), "ready") != lines.end();
        if (!done) next();
      });
    };
    next();
    EXPECT_TRUE(run_until(io, [&] { return done; }));
    return lines;
  };
  const std::vector<std::string> want = {"0027", expected_limit, "ready"};

  auto a = start();
  EXPECT_EQ(inherited(a), want);
  EXPECT_EQ(parent_of(parent_of(a.pid())), ::getpid()) << "its own reaper, exec'd by the host";
  ASSERT_TRUE(eventually([&] { return our_servers().size() == 1u && our_servers() != servers_before; }))
      << "the server that started before the change was not replaced";
  ASSERT_TRUE(eventually([] { return process::detail::spawn_server_ready(); })) << "the new server never said ready";
  auto b = start();
  EXPECT_EQ(inherited(b), want);
  EXPECT_EQ(parent_of(parent_of(b.pid())), our_servers().at(0)) << "served by the new server";

  boost::system::error_code ec;
  EXPECT_TRUE(stop(a, ec).survivors.empty());
  EXPECT_TRUE(stop(b, ec).survivors.empty());
}

// A thread that differs from the one that started the server in what only a thread has (here no_new_privs, which the
// kernel never lets a thread drop) gets a reaper of its own, so that its agent inherits that; the server is not
// replaced for it and still serves the other threads.
TEST_F(SpawnServer, AThreadThatDiffersFromTheServersGetsItsOwnReaperAndTheServerStays) {
  ensure_server();
  const auto servers_before = our_servers();
  ASSERT_EQ(servers_before.size(), 1u);
  std::optional<child> a;
  std::thread([&] {
    ASSERT_EQ(::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
    a.emplace(spawn({"ready", "never-exit"}));
  }).join();
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(read_until_line(io, *a, "ready"));
  EXPECT_EQ(parent_of(parent_of(a->pid())), ::getpid()) << "its own reaper, exec'd by the host";
  std::ifstream status("/proc/" + std::to_string(a->pid()) + "/status");
  std::string line, no_new_privs;
  while (std::getline(status, line))
    if (line.rfind("NoNewPrivs:", 0) == 0) no_new_privs = line;
  EXPECT_EQ(no_new_privs, "NoNewPrivs:\t1");
  auto b = spawn({"ready", "never-exit"});
  ASSERT_TRUE(read_until_line(io, b, "ready"));
  EXPECT_EQ(our_servers(), servers_before) << "the server was replaced";
  EXPECT_EQ(parent_of(parent_of(b.pid())), servers_before[0]) << "served by the server";
  boost::system::error_code ec;
  EXPECT_TRUE(stop(*a, ec).survivors.empty());
  EXPECT_TRUE(stop(b, ec).survivors.empty());
}

// A stop that starts as the agent exits: its kill phase's sweep can find the reaper dead and handle it right there, in
// the tick that then arms the kill phase's wait. That stop must end at once, not when kill_wait runs out (it did, 1
// run in ~40, with the default 5 s). The race needs no help: it is repeated, with a kill_wait longer than run_until's
// bound, for the server's reapers and for exec'd ones.
TEST_F(SpawnServer, AStopAsTheAgentExitsDoesNotWaitOutTheKillPhase) {
  ensure_server();
  auto policy = stop_policy::kill_now();
  policy.kill_wait = std::chrono::minutes{10};
  for (const bool server : {true, false}) {
    for (int round = 0; round < 60; ++round) {
      auto c = spawn({"exit", "0"}, nullptr, server);
      std::optional<stop_report> r;
      c.async_stop(policy, [&](boost::system::error_code, stop_report rep) { r = std::move(rep); });
      ASSERT_TRUE(run_until(io, [&] { return r.has_value(); })) << "round " << round << (server ? ", server" : "");
      EXPECT_TRUE(r->survivors.empty());
    }
  }
}

// The server dies by SIGKILL between spawns: the next spawn reaps it (no zombie of ours), exec's its own reaper and
// starts a new server, which serves the spawn after; the agent started through the dead server is still contained —
// its reaper talks to us directly.
TEST_F(SpawnServer, ServerKilledBetweenSpawns) {
  ensure_server();
  liveness_fifo fifo_a;
  auto a = spawn({"ignore-all", "setsid-child", "double-fork-daemon", "ready", "never-exit"}, &fifo_a);
  ASSERT_TRUE(read_until_line(io, a, "ready"));
  const int old_server = parent_of(parent_of(a.pid()));
  ASSERT_TRUE(is_server(old_server));
  ASSERT_TRUE(kill_and_wait(old_server));

  auto b = spawn({"ready", "never-exit"});
  ASSERT_TRUE(read_until_line(io, b, "ready"));
  EXPECT_EQ(parent_of(parent_of(b.pid())), ::getpid()) << "found no server: exec'd its reaper";
  // The new server shows its own command line in /proc a moment after posix_spawn returned.
  ASSERT_TRUE(eventually([] { return our_servers().size() == 1u; })) << our_servers().size() << " servers";
  const auto servers = our_servers();
  EXPECT_NE(servers[0], old_server);
  EXPECT_EQ(zombie_children(), 0) << "the dead server was not reaped";
  ASSERT_TRUE(eventually([] { return process::detail::spawn_server_ready(); })) << "the new server never said ready";
  auto c = spawn({"ready", "never-exit"});
  ASSERT_TRUE(read_until_line(io, c, "ready"));
  EXPECT_EQ(parent_of(parent_of(c.pid())), servers[0]) << "served by the new server";

  boost::system::error_code ec;
  const auto r = stop(a, ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(r.survivors.empty());
  EXPECT_EQ(r.phase, stop_phase::kill);
  EXPECT_TRUE(fifo_a.wait_eof(1s)) << "a process of the orphaned reaper's tree survived";
  EXPECT_TRUE(stop(b, ec).survivors.empty());
  EXPECT_TRUE(stop(c, ec).survivors.empty());
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
}

// A server killed while the agent it started keeps running: signals, exit status and the tree-gone report still
// arrive (they travel on the agent's own control socket).
TEST_F(SpawnServer, ExitStatusArrivesAfterTheServerDied) {
  ensure_server();
  auto a = spawn({"ready", "read-stdin", "exit", "7"});
  ASSERT_TRUE(read_until_line(io, a, "ready"));
  ASSERT_TRUE(kill_and_wait(parent_of(parent_of(a.pid()))));
  a.close_stdin();
  std::optional<exit_status> st;
  a.async_wait([&](boost::system::error_code, exit_status s) { st = s; });
  ASSERT_TRUE(run_until(io, [&] { return st.has_value(); }));
  ASSERT_NE(st->as_exited(), nullptr) << st->to_string();
  EXPECT_EQ(st->as_exited()->code, 7);
  boost::system::error_code ec;
  const auto r = stop(a, ec);
  EXPECT_FALSE(ec);
  EXPECT_TRUE(r.survivors.empty());  // the phase depends on whether the reaper's "empty" already arrived
}

// Three threads spawn at once while no server runs: exactly one server is started, every spawn works.
TEST_F(SpawnServer, ConcurrentFirstSpawnsStartOneServer) {
  ensure_server();
  for (int pid : our_servers()) ASSERT_TRUE(kill_and_wait(pid));
  std::atomic<int> ok{0}, failures{0};
  std::atomic<int> waiting{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      asio::io_context tio;
      ++waiting;
      while (waiting.load() < 3) std::this_thread::yield();  // start together
      for (int i = 0; i < 5; ++i) {
        auto c = child::spawn(tio.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                                   .args = {"stdout", "x", "exit", "0"},
                                                   .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}},
                                                   .containment = containment_kind::reaper,
                                                   .reaper_path = AGENTHOST_REAPER});
        if (!c) {
          ++failures;
          continue;
        }
        if (!read_until_line(tio, *c, "x", 10s)) ++failures;
        std::optional<stop_report> r;
        c->async_stop({}, [&](boost::system::error_code ec, stop_report rep) {
          if (ec) ++failures;
          r = rep;
        });
        if (!run_until(tio, [&] { return r.has_value(); }, 10s)) ++failures;
        ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(ok.load(), 15);
  EXPECT_EQ(our_servers().size(), 1u);
  EXPECT_EQ(zombie_children(), 0);
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
}

// 200 spawn/stop cycles through one server: no descriptor growth in the host or the server, no zombie anywhere, the
// same server all along, and the server back to a single (idle) child.
TEST_F(SpawnServer, TwoHundredCyclesLeakNothing) {
  ensure_server();
  int fds = 0, server = -1;
  std::vector<std::string> server_fds;
  auto list_fds = [](int pid) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
      std::error_code ec;
      out.push_back(e.path().filename().string() + " -> " + std::filesystem::read_symlink(e.path(), ec).string());
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  for (int i = 0; i < 201; ++i) {
    // The first cycle starts the server and creates the io_context's own descriptors: baseline after it.
    if (i == 1) fds = open_fd_count();
    auto c = spawn({"stdout", "hi", "never-exit"});
    if (i == 1) {
      server = parent_of(parent_of(c.pid()));
      ASSERT_TRUE(is_server(server));
      server_fds = list_fds(server);
    }
    boost::system::error_code ec;
    const auto r = stop(c, ec);
    EXPECT_FALSE(ec);
    EXPECT_TRUE(r.survivors.empty());
  }
  io.poll();
  EXPECT_EQ(open_fd_count(), fds);
  EXPECT_EQ(zombie_children(), 0);
  EXPECT_EQ(our_servers(), std::vector<int>{server});
  EXPECT_EQ(list_fds(server), server_fds);
  // The reapers exited (our pidfds said so); the server reaps them on its SIGCHLD.
  EXPECT_TRUE(eventually([&] { return children_of(server, true).size() == 1; }))
      << children_of(server, true).size() << " children of the server (want: the idle reaper)";
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
}

// The host dies by SIGKILL with agents started through the server (and one whose reaper was exec'd): every tree is
// gone within 1 s, and so is the server (it reads EOF on its socket).
TEST(SpawnServerHostDeath, SigkilledHostLeavesNoSurvivorAndNoServer) {
  liveness_fifo fifo;
  const std::string token = random_token();
  const auto host = spawn_test_host("SpawnServerHostDeath.DISABLED_ChildHost", fifo.path(), token);
  ASSERT_GT(host.pid, 0);
  ASSERT_FALSE(host.ready.empty()) << "the test host did not get its agent trees running";
  const int server = std::atoi(host.ready.c_str());
  ASSERT_GT(server, 0);
  const int server_fd = static_cast<int>(::syscall(SYS_pidfd_open, server, 0));
  ASSERT_GE(server_fd, 0);
  ASSERT_FALSE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty());
  ::kill(host.pid, SIGKILL);
  int st = 0;
  ::waitpid(host.pid, &st, 0);
  EXPECT_TRUE(fifo.wait_eof(1s)) << "an agent tree survived its host";
  pollfd s{server_fd, POLLIN, 0};
  EXPECT_EQ(::poll(&s, 1, 1000), 1) << "the spawn server survived its host";
  ::close(server_fd);
  EXPECT_TRUE(eventually([&] { return processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty(); }, 1s));
  kill_leftovers("AGENTHOST_TEST_TOKEN=" + token);
}

// Runs only inside the re-executed test host above: three trees (two through the server), then reports the server's
// pid.
TEST(SpawnServerHostDeath, DISABLED_ChildHost) {
  const auto setup = test_host_setup_from_env();
  if (!setup) GTEST_SKIP() << "only run by SpawnServerHostDeath";
  asio::io_context io;
  std::vector<child> trees;
  // The first tree's reaper is exec'd (no server yet; that spawn starts it), the other two are the server's.
  for (int i = 0; i < 3; ++i) {
    auto c = child::spawn(io.get_executor(), host_death_tree(*setup));
    ASSERT_TRUE(c);
    ASSERT_TRUE(read_until_line(io, *c, "ready"));
    trees.push_back(std::move(*c));
    if (i == 0) {
      ASSERT_TRUE(eventually([] { return process::detail::spawn_server_ready(); }));
    }
  }
  const int server = parent_of(parent_of(trees[1].pid()));
  ASSERT_TRUE(is_server(server));
  ASSERT_EQ(parent_of(parent_of(trees[2].pid())), server);
  const std::string msg = std::to_string(server);
  ASSERT_EQ(::write(setup->ready_fd, msg.data(), msg.size()), static_cast<ssize_t>(msg.size()));
  for (;;) ::pause();  // SIGKILLed here
}

// A host that exits (returns from main) right after its first reaper-mode spawn, while the spawn server is still being
// started on its thread: that thread's posix_spawn child shares the host's memory until its exec, so it shows the
// host's environment and command line. The exit waits for that exec: once the host is reaped, no process carries its
// environment (the server, exec'd with an empty one, then reads EOF and exits).
TEST(SpawnServerHostExit, AnExitDuringTheServersStartLeavesNothingWithTheHostsEnvironment) {
  liveness_fifo fifo;
  int leftovers = 0;
  for (int i = 0; i < 20 && leftovers == 0; ++i) {
    const std::string token = random_token();
    const auto host = spawn_test_host("SpawnServerHostExit.DISABLED_ChildHost", fifo.path(), token);
    ASSERT_GT(host.pid, 0);
    int st = 0;
    ASSERT_EQ(::waitpid(host.pid, &st, 0), host.pid);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
    leftovers = static_cast<int>(processes_with_env("AGENTHOST_HOST_DEATH_TOKEN=" + token).size());
    kill_leftovers("AGENTHOST_HOST_DEATH_TOKEN=" + token);
  }
  EXPECT_EQ(leftovers, 0) << "a process with the exited host's environment outlived it";
}

// Runs only inside the test host above: starts the server in the background and exits at once.
TEST(SpawnServerHostExit, DISABLED_ChildHost) {
  const auto setup = test_host_setup_from_env();
  if (!setup) GTEST_SKIP() << "only run by SpawnServerHostExit";
  ::close(setup->ready_fd);
  process::detail::start_spawn_server_in_background(AGENTHOST_REAPER);
  std::exit(0);
}

}  // namespace
