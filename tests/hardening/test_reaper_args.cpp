// The agenthost-reaper helper refuses every command line but the one the library builds
//   agenthost-reaper --control-fd 3 -- /absolute/executable argv0 [args…]      with fd 3 a SOCK_SEQPACKET socket
// and then runs nothing (a marker executable would leave a file). It never resolves a bare or relative name, and a
// correct run opens no path besides /dev/null (checked through /proc/<reaper>/fd).
#include "hardening_util.hpp"

#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>

using namespace agenthost;
using namespace agenthost::test;

extern char** environ;

namespace {

enum class fd3 { none, pipe, stream_socket, dgram_socket, dev_null, seqpacket, seqpacket_as_fd4 };

struct reaper_run {
  int exit_code = -1;  // -1: killed or did not end
  std::string stderr_text;
  std::string control;  // what the reaper said on the control socket
};

class ReaperArguments : public ::testing::Test {
 protected:
  void SetUp() override {
    marker = dir + "/marker";
    write_file(marker, "#!/bin/sh\ntouch '" + dir + "/ran'\n");
    std::filesystem::permissions(marker, std::filesystem::perms::owner_all);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }
  bool marker_ran() const { return std::filesystem::exists(dir + "/ran"); }

  // Spawns the reaper with `args` (after argv[0]) and the given fd 3, in `dir`, and waits (≤ 10 s) for it to exit.
  reaper_run run(const std::vector<std::string>& args, fd3 kind) {
    int control[2] = {-1, -1};
    int err[2];
    EXPECT_EQ(::pipe2(err, O_CLOEXEC), 0);
    switch (kind) {
      case fd3::none: break;
      case fd3::pipe: EXPECT_EQ(::pipe2(control, O_CLOEXEC), 0); break;
      case fd3::stream_socket: EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, control), 0); break;
      case fd3::dgram_socket: EXPECT_EQ(::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, control), 0); break;
      case fd3::dev_null:
        control[0] = ::open("/dev/null", O_RDWR | O_CLOEXEC);
        control[1] = ::open("/dev/null", O_RDWR | O_CLOEXEC);
        break;
      case fd3::seqpacket:
      case fd3::seqpacket_as_fd4:
        EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, control), 0);
        break;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    const int target = kind == fd3::seqpacket_as_fd4 ? 4 : 3;
    if (kind == fd3::seqpacket_as_fd4) posix_spawn_file_actions_addopen(&fa, 3, "/dev/null", O_RDONLY, 0);
    if (control[1] >= 0) {
      posix_spawn_file_actions_adddup2(&fa, control[1], target);
    } else {
      posix_spawn_file_actions_addclose(&fa, 3);
    }
    posix_spawn_file_actions_addclosefrom_np(&fa, target + 1);
    posix_spawn_file_actions_addchdir_np(&fa, dir.c_str());
    std::vector<std::string> all{"agenthost-reaper"};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, AGENTHOST_REAPER, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    EXPECT_EQ(rc, 0);
    ::close(err[1]);
    if (control[1] >= 0) ::close(control[1]);
    reaper_run r;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int status = 0;
    for (;;) {
      const pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) break;
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        ADD_FAILURE() << "the reaper did not exit";
        break;
      }
      ::usleep(2000);
    }
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    char buf[4096];
    for (ssize_t n; (n = ::read(err[0], buf, sizeof buf)) > 0;) r.stderr_text.append(buf, static_cast<std::size_t>(n));
    ::close(err[0]);
    if (control[0] >= 0) {
      if (kind == fd3::seqpacket) {
        for (ssize_t n; (n = ::recv(control[0], buf, sizeof buf, MSG_DONTWAIT)) > 0;)
          r.control.append(buf, static_cast<std::size_t>(n)).append("\n");
      }
      ::close(control[0]);
    }
    return r;
  }

  void expect_refused(const std::vector<std::string>& args, fd3 kind, const std::string& what) {
    const auto r = run(args, kind);
    EXPECT_EQ(r.exit_code, 2) << what;
    EXPECT_NE(r.stderr_text.find("usage: agenthost-reaper"), std::string::npos) << what << ": " << r.stderr_text;
    EXPECT_TRUE(r.control.empty()) << what;
    EXPECT_FALSE(marker_ran()) << what << ": the executable was run";
  }

  std::string dir = make_temp_dir();
  std::string marker;
};

TEST_F(ReaperArguments, RefusesWrongShapes) {
  expect_refused({}, fd3::seqpacket, "no arguments");
  expect_refused({"--help"}, fd3::seqpacket, "--help");
  expect_refused({"--control-fd", "3", marker, "marker"}, fd3::seqpacket, "missing --");
  expect_refused({"--control-fd", "3", "--", marker}, fd3::seqpacket, "no argv0");
  expect_refused({"--control-fd", "3", "--"}, fd3::seqpacket, "no executable");
  expect_refused({"--control-fd=3", "--", marker, "marker"}, fd3::seqpacket, "--control-fd=3");
  expect_refused({"--control-fd", "4", "--", marker, "marker"}, fd3::seqpacket_as_fd4, "control fd 4");
  expect_refused({"-x", "--control-fd", "3", "--", marker, "marker"}, fd3::seqpacket, "a leading option");
  expect_refused({"--control-fd", "03", "--", marker, "marker"}, fd3::seqpacket, "fd spelled 03");
  expect_refused({"--", "--control-fd", "3", marker, "marker"}, fd3::seqpacket, "-- first");
}

TEST_F(ReaperArguments, RefusesAControlFdThatIsNotASeqpacketSocket) {
  const std::vector<std::string> ok{"--control-fd", "3", "--", marker, "marker"};
  expect_refused(ok, fd3::none, "no fd 3");
  expect_refused(ok, fd3::pipe, "fd 3 a pipe");
  expect_refused(ok, fd3::stream_socket, "fd 3 a SOCK_STREAM socket");
  expect_refused(ok, fd3::dgram_socket, "fd 3 a SOCK_DGRAM socket");
  expect_refused(ok, fd3::dev_null, "fd 3 /dev/null");
}

TEST_F(ReaperArguments, NeverResolvesARelativeOrBareExecutable) {
  // The marker sits in the reaper's working directory and PATH could find "sh": both must be refused.
  expect_refused({"--control-fd", "3", "--", "marker", "marker"}, fd3::seqpacket, "bare name in cwd");
  expect_refused({"--control-fd", "3", "--", "./marker", "marker"}, fd3::seqpacket, "./relative");
  expect_refused({"--control-fd", "3", "--", "sh", "sh", "-c", "touch ran"}, fd3::seqpacket, "bare name on PATH");
  expect_refused({"--control-fd", "3", "--", "", "x"}, fd3::seqpacket, "empty path");
}

TEST_F(ReaperArguments, TheExactShapeRunsTheAgent) {
  // The control: the library's own shape works (so the refusals above are refusals, not a broken setup).
  const auto r = run({"--control-fd", "3", "--", marker, "marker"}, fd3::seqpacket);
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_TRUE(marker_ran());
  EXPECT_EQ(r.control.rfind("started ", 0), 0u) << r.control;
  EXPECT_NE(r.control.find("exit 0\nempty\n"), std::string::npos) << r.control;
}

TEST_F(ReaperArguments, OpensNoPathButDevNull) {
  // A running reaper (under the library) holds: 0-2 → /dev/null, 3 → its control socket, a signalfd. Nothing else.
  asio::io_context io;
  const std::string token = random_token();
  auto c = process::child::spawn(io.get_executor(), {.executable = AGENTHOST_FAKE_AGENT,
                                                     .args = {"ready", "never-exit"},
                                                     .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}},
                                                     .containment = process::containment_kind::reaper,
                                                     .reaper_path = AGENTHOST_REAPER});
  ASSERT_TRUE(c.has_value());
  bool ready = false;
  c->async_read_lines([&](boost::system::error_code, process::line_batch) { ready = true; });
  ASSERT_TRUE(run_until(io, [&] { return ready; }));
  std::ifstream stat("/proc/" + std::to_string(c->pid()) + "/stat");
  std::string s;
  std::getline(stat, s);
  std::istringstream rest(s.substr(s.rfind(')') + 2));
  char state = 0;
  int reaper = 0;
  rest >> state >> reaper;
  std::vector<std::string> targets;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(reaper) + "/fd")) {
    const std::string t = std::filesystem::read_symlink(e.path()).string();
    targets.push_back(e.path().filename().string() + " -> " + t);
    // A reaper forked by the spawn server also holds a pidfd of itself for the instant between sending it to the host
    // and closing it.
    const bool allowed = t == "/dev/null" || t.rfind("socket:", 0) == 0 || t == "anon_inode:[signalfd]" ||
                         t == "anon_inode:[pidfd]";
    EXPECT_TRUE(allowed) << "the reaper holds " << t;
  }
  std::string all;
  for (const auto& t : targets) all += t + "; ";
  report_figure("reaper fds: " + all);
  bool stopped = false;
  c->async_stop(process::stop_policy::kill_now(), [&](boost::system::error_code, process::stop_report) { stopped = true; });
  EXPECT_TRUE(run_until(io, [&] { return stopped; }));
  kill_leftovers("AGENTHOST_TEST_TOKEN=" + token);
}

}  // namespace
