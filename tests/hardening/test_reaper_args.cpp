// The agenthost-reaper helper refuses every command line but the three the library builds
//   agenthost-reaper --control-fd 3 -- /absolute/executable argv0 [args…]      with fd 3 a SOCK_SEQPACKET socket
//   agenthost-reaper --control-fd 3 --adopt <pid>                               the same fd 3; <pid> its own child
//   agenthost-reaper --server --control-fd 3                                    (the spawn server), the same fd 3
// and then runs nothing (a marker executable would leave a file). It never resolves a bare or relative name, and a
// correct run opens no path besides /dev/null (checked through /proc/<reaper>/fd). The spawn server refuses every
// malformed request (answering "spawn-failed 22" when the request carries a usable control socket) and holds only
// its own few descriptors.
#include "hardening_util.hpp"

#include "../../process/src/detail/reaper_protocol.hpp"

#include <sys/syscall.h>

#include <spawn.h>
#include <sys/mman.h>
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

TEST_F(ReaperArguments, ServerRefusesWrongShapes) {
  expect_refused({"--server"}, fd3::seqpacket, "--server alone");
  expect_refused({"--server", "--control-fd"}, fd3::seqpacket, "--server --control-fd");
  expect_refused({"--server", "--control-fd", "4"}, fd3::seqpacket_as_fd4, "server, control fd 4");
  expect_refused({"--server", "--control-fd", "03"}, fd3::seqpacket, "server, fd spelled 03");
  expect_refused({"--server", "--control-fd", "3", "--"}, fd3::seqpacket, "server with --");
  expect_refused({"--server", "--control-fd", "3", "--", marker, "marker"}, fd3::seqpacket, "server with a command");
  expect_refused({"--control-fd", "3", "--server"}, fd3::seqpacket, "--server last");
  expect_refused({"--control-fd", "3", "--", "--server", "--control-fd", "3"}, fd3::seqpacket, "--server as command");
  const std::vector<std::string> ok{"--server", "--control-fd", "3"};
  expect_refused(ok, fd3::none, "server, no fd 3");
  expect_refused(ok, fd3::pipe, "server, fd 3 a pipe");
  expect_refused(ok, fd3::stream_socket, "server, fd 3 a SOCK_STREAM socket");
  expect_refused(ok, fd3::dgram_socket, "server, fd 3 a SOCK_DGRAM socket");
  expect_refused(ok, fd3::dev_null, "server, fd 3 /dev/null");
}

// A request as the library sends it: one packet, SCM_RIGHTS [control, stdin, stdout, stderr (, more)].
bool send_request(int sock, std::string_view payload, const std::vector<int>& fds) {
  iovec iov{const_cast<char*>(payload.data()), payload.size()};
  std::vector<char> space(CMSG_SPACE(sizeof(int) * std::max<std::size_t>(fds.size(), 1)));
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  if (!fds.empty()) {
    mh.msg_control = space.data();
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  return ::sendmsg(sock, &mh, MSG_NOSIGNAL) >= 0;
}

// The first answer on a control socket, "" at EOF (≤ 10 s).
std::string answer(int ctl) {
  pollfd p{ctl, POLLIN, 0};
  if (::poll(&p, 1, 10000) != 1) return "(no answer within 10 s)";
  char buf[128];
  const ssize_t n = ::recv(ctl, buf, sizeof buf, 0);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

TEST_F(ReaperArguments, ServerRefusesMalformedRequestsAndHoldsOnlyItsOwnDescriptors) {
  int sock[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sock), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  for (int fd = 0; fd <= 2; ++fd) posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", O_RDWR, 0);
  posix_spawn_file_actions_adddup2(&fa, sock[1], 3);
  posix_spawn_file_actions_addclosefrom_np(&fa, 4);
  std::vector<std::string> all{"agenthost-reaper", "--server", "--control-fd", "3"};
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t server = -1;
  ASSERT_EQ(::posix_spawn(&server, AGENTHOST_REAPER, &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  ::close(sock[1]);
  const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  auto request = [&](std::string_view payload, int extra_fds, bool seqpacket_ctl = true) {
    int ctl[2];
    if (seqpacket_ctl) {
      EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl), 0);
    } else {
      EXPECT_EQ(::pipe2(ctl, O_CLOEXEC), 0);
    }
    std::vector<int> fds{ctl[1]};
    for (int i = 0; i < extra_fds; ++i) fds.push_back(null_fd);
    EXPECT_TRUE(send_request(sock[0], payload, fds));
    ::close(ctl[1]);
    std::string a = seqpacket_ctl ? answer(ctl[0]) : std::string();
    ::close(ctl[0]);
    return a;
  };
  auto payload = [&](const std::string& exe, const std::string& cwd) {
    return process::detail::encode_spawn_payload(exe, cwd, {"marker"}, {"PATH=/usr/bin:/bin"});
  };
  const std::string refused = "spawn-failed " + std::to_string(EINVAL);
  EXPECT_EQ(request(payload("marker", dir), 3), refused) << "bare executable";
  EXPECT_EQ(request(payload("./marker", dir), 3), refused) << "relative executable";
  EXPECT_EQ(request(payload(marker, "relative/dir"), 3), refused) << "relative working directory";
  EXPECT_EQ(request("garbage", 3), refused) << "no payload";
  EXPECT_EQ(request(payload(marker, dir) + "x", 3), refused) << "trailing bytes";
  EXPECT_EQ(request(payload(marker, dir), 2), refused) << "three descriptors";
  EXPECT_EQ(request(payload(marker, dir), 6), refused) << "seven descriptors";
  EXPECT_EQ(request(process::detail::spawn_payload_magic, 4), refused) << "a fifth descriptor that is no memfd";
  request(payload(marker, dir), 3, false);  // a control "socket" that is a pipe: dropped without an answer
  ASSERT_TRUE(send_request(sock[0], payload(marker, dir), {})) << "no descriptors at all";
  EXPECT_FALSE(marker_ran());

  // The server's own descriptors: 0-2 (/dev/null), its socket, its signalfd, its "taken" pipe — whatever it served.
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(server) + "/fd")) {
    const std::string t = std::filesystem::read_symlink(e.path()).string();
    const bool allowed = t == "/dev/null" || t.rfind("socket:", 0) == 0 || t == "anon_inode:[signalfd]" ||
                         t.rfind("pipe:", 0) == 0;
    EXPECT_TRUE(allowed) << "the server holds " << t;
  }

  // The control: the exact request runs the marker (so the refusals above are refusals, not a broken setup).
  int ctl[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl), 0);
  ASSERT_TRUE(send_request(sock[0], payload(marker, dir), {ctl[1], null_fd, null_fd, null_fd}));
  ::close(ctl[1]);
  std::string said;
  for (std::string a; (a = answer(ctl[0])).size() > 0 && a.rfind("(no answer", 0) != 0;) said += a + "\n";
  ::close(ctl[0]);
  EXPECT_EQ(said.rfind("started ", 0), 0u) << said;
  EXPECT_NE(said.find("exit 0\nempty\n"), std::string::npos) << said;
  EXPECT_TRUE(marker_ran());

  // EOF on its socket (the host is gone): the server exits 0.
  const int server_fd = static_cast<int>(::syscall(SYS_pidfd_open, server, 0));
  ::close(sock[0]);
  ::close(null_fd);
  pollfd p{server_fd, POLLIN, 0};
  const bool exited = ::poll(&p, 1, 10000) == 1;
  ::close(server_fd);
  int status = -1;
  if (exited) {
    ::waitpid(server, &status, 0);
  } else {
    ::kill(server, SIGKILL);
    ::waitpid(server, &status, 0);
  }
  EXPECT_TRUE(exited) << "the server did not exit after EOF";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_F(ReaperArguments, AdoptRefusesWrongShapesAndProcessesThatAreNotItsChildren) {
  // Adopt mode supervises an agent its parent started before exec'ing it; any other pid, a sloppy number or a wrong
  // fd 3 is refused, and the process named is left alone.
  pid_t stranger = -1;
  char sleep_path[] = "/bin/sleep";
  char* sleep_argv[] = {sleep_path, const_cast<char*>("30"), nullptr};
  ASSERT_EQ(::posix_spawn(&stranger, sleep_path, nullptr, nullptr, sleep_argv, environ), 0);
  const std::string pid = std::to_string(stranger);
  expect_refused({"--control-fd", "3", "--adopt"}, fd3::seqpacket, "--adopt without a pid");
  const std::vector<std::string> sloppy{"0", "-1", "0" + pid, pid + "x", " " + pid, "", "99999999999", "+" + pid};
  for (const auto& bad : sloppy)
    expect_refused({"--control-fd", "3", "--adopt", bad}, fd3::seqpacket, "--adopt '" + bad + "'");
  expect_refused({"--control-fd", "3", "--adopt", pid, "extra"}, fd3::seqpacket, "--adopt with a trailing argument");
  expect_refused({"--adopt", pid, "--control-fd", "3"}, fd3::seqpacket, "--adopt first");
  expect_refused({"--control-fd", "3", "--adopt", pid}, fd3::pipe, "--adopt, fd 3 a pipe");
  expect_refused({"--control-fd", "3", "--adopt", pid}, fd3::seqpacket, "--adopt of the test's own child");
  expect_refused({"--control-fd", "3", "--adopt", "1"}, fd3::seqpacket, "--adopt of init");
  expect_refused({"--control-fd", "3", "--adopt", std::to_string(::getpid())}, fd3::seqpacket, "--adopt of the test");
  // Still running, and still ours to reap.
  EXPECT_EQ(::waitpid(stranger, nullptr, WNOHANG), 0) << "the named process was touched";
  ::kill(stranger, SIGKILL);
  ::waitpid(stranger, nullptr, 0);
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
  // The agent runs while its reaper is still being exec'd (adopt mode): until the reaper's main has made its signalfd,
  // the descriptors seen are the runtime's start-up (a sanitizer reads /proc/self/maps), not the reaper's own.
  const std::string fd_dir = "/proc/" + std::to_string(reaper) + "/fd";
  const auto holds_signalfd = [&] {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(fd_dir, ec))
      if (std::filesystem::read_symlink(e.path(), ec) == "anon_inode:[signalfd]") return true;
    return false;
  };
  ASSERT_TRUE(run_until(io, holds_signalfd, std::chrono::seconds(10))) << "the reaper never made its signalfd";
  std::vector<std::string> targets;
  for (const auto& e : std::filesystem::directory_iterator(fd_dir)) {
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
