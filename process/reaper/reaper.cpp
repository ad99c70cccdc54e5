// agenthost-reaper — the subreaper helper between the host and an agent.
//
// Why it exists: agents put their tool commands in new sessions (setsid) and some tools double-fork daemons, so a
// process-group kill or a /proc walk from the host misses descendants, and when the host dies (even by SIGKILL) nobody
// would clean up. This program marks itself PR_SET_CHILD_SUBREAPER: every orphan of the agent's tree is reparented
// to it, so (1) a parent-link walk from here finds the whole tree, and (2) "no child left" (waitpid → ECHILD) means
// "tree gone". It is single-threaded, so unlike the host it may call waitpid(-1). When its control socket reaches EOF
// — the host exited or died — it kills the tree.
//
// Three ways to run (see src/detail/reaper_protocol.hpp):
// - adopting: `agenthost-reaper --control-fd 3 --adopt <pid>`, exec'd by the host's launch child after that child
//   (already a subreaper) started the agent <pid> (src/linux/adopt_spawn.hpp): the agent does not wait for our exec;
// - per agent: `agenthost-reaper --control-fd 3 -- <executable> <argv0> [args…]`, exec'd by the host for one agent
//   (kernels without close_range, which adopt mode needs);
// - spawn server: `agenthost-reaper --server --control-fd 3`, one per host process. It keeps one per-agent reaper
//   fork()ed and prepared ahead of time, which takes the next request itself: a spawn then costs neither an exec nor
//   a fork on its path, and the forked reaper runs exactly the per-agent code below. The server itself opens no path
//   and reads nothing but its "taken" pipe and its signalfd.
//
// It refuses to run unless fd 3 is a SOCK_SEQPACKET socket and the command line has the exact expected shape; it
// opens no path except /proc, /dev/null (per-agent mode only) and the agent executable it is told to run.

#include "../src/detail/reaper_protocol.hpp"
#include "../src/linux/proc_tree.hpp"
#include "../src/posix/fd_passing.hpp"
#include "../src/posix/clean_spawn_attributes.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

extern char** environ;

namespace {

using namespace agenthost::process::detail;

int control = reaper_control_fd;  // -1 once the host is gone

void send_message(const std::string& msg) {
  // MSG_NOSIGNAL: a gone host must not kill us before we cleaned up.
  if (control >= 0) (void)::send(control, msg.data(), msg.size(), MSG_NOSIGNAL);
}

// One message with a descriptor attached (SCM_RIGHTS).
void send_message_with_fd(const std::string& msg, int fd) {
  if (control < 0) return;
  (void)send_with_fds(control, msg, std::span<const int>(&fd, 1));
}

int usage() {
  std::fputs("agenthost-reaper: internal helper of the agenthost library; not meant to be run by hand.\n"
             "usage: agenthost-reaper --control-fd 3 -- <executable> <argv0> [args...]\n"
             "       agenthost-reaper --control-fd 3 --adopt <pid>\n"
             "       agenthost-reaper --server --control-fd 3\n",
             stderr);
  return 2;
}

bool is_seqpacket(int fd) {
  int type = 0;
  socklen_t len = sizeof type;
  return ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_SEQPACKET;
}

// Signals every live process of our tree except ourselves. Under a subreaper the parent-link walk is complete.
void signal_tree(int sig) {
  const auto all = scan_processes();
  for (const auto& e : tree_members(all, ::getpid(), false, 0)) signal_process(e, sig);
}

// Signals process group `pgid` (the agent's, whose leader we reaped) only while a process of our tree is still in it:
// a member keeps the group id reserved, an empty group's id can be recycled by a stranger's setpgid/setsid.
void signal_group_of_tree(int pgid, int sig) {
  const auto all = scan_processes();
  for (const auto& e : tree_members(all, ::getpid(), false, 0))
    if (e.pgid == pgid) {
      ::kill(-pgid, sig);  // at once: members forking right now are not missed
      return;
    }
}

// Per-agent set-up that does not depend on the request: done by the server's idle reaper before a request arrives,
// so that a spawn only pays for posix_spawn itself.
struct prepared {
  int sigfd = -1;
  int self_pidfd = -1;  // forked by the server: a pidfd of ourselves for the host (it cannot wait for us)
  int error = 0;        // errno of the first failure; reported as "spawn-failed" once a control socket is there
};

// What the reaper's signalfd handles (and keeps blocked): SIGCHLD and the termination signals.
sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, sig);
  return set;
}

prepared prepare_reaper(bool want_pidfd) {
  prepared p;
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    p.error = errno;
    return p;
  }
  // SIGCHLD and the termination signals arrive through a signalfd; they are blocked here but the agent gets an empty
  // mask and default dispositions.
  const sigset_t handled = handled_signals();
  ::sigprocmask(SIG_BLOCK, &handled, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  p.sigfd = ::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  if (p.sigfd < 0) {
    p.error = errno;
    return p;
  }
  if (want_pidfd) {
    p.self_pidfd = pidfd_open(::getpid());
    if (p.self_pidfd < 0) p.error = errno;
    else ::fcntl(p.self_pidfd, F_SETFD, FD_CLOEXEC);
  }
  return p;
}

// The server's write end of its "took a request" pipe, in an idle reaper until it told the server (then -1).
int notify_fd = -1;

// Tells the server that this idle reaper is taken, so that it forks the next one. Sent once the agent was spawned
// (or refused): forking the next reaper then competes with the agent's start-up less.
void notify_server() {
  if (notify_fd < 0) return;
  const pid_t self = ::getpid();
  (void)::write(notify_fd, &self, sizeof self);
  ::close(notify_fd);
  notify_fd = -1;
}

int supervise(pid_t agent, int sigfd);

// What the per-agent reaper runs. `stdio` null: the agent inherits our 0, 1, 2 (per-agent exec mode), which we then
// point at /dev/null. Otherwise the agent gets stdio[0..2] and we close them (forked by the server, whose 0, 1, 2 are
// /dev/null already). `cwd` empty: inherit ours.
int run_reaper(const prepared& p, const char* executable, char* const* argv, char* const* envp, const char* cwd,
               const int* stdio) {
  ::fcntl(control, F_SETFD, FD_CLOEXEC);
  if (p.error != 0) {
    notify_server();
    send_message("spawn-failed " + std::to_string(p.error));
    return 127;
  }
  posix_spawnattr_t attr;
  if (const int rc = init_clean_spawn_attributes(attr); rc != 0) {
    notify_server();
    send_message("spawn-failed " + std::to_string(rc));
    return 127;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdio != nullptr)
    for (int fd = 0; fd <= 2; ++fd) posix_spawn_file_actions_adddup2(&actions, stdio[fd], fd);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);  // the agent sees only 0, 1, 2
  if (cwd != nullptr && *cwd != '\0') posix_spawn_file_actions_addchdir_np(&actions, cwd);
  pid_t agent = 0;
  const int rc = ::posix_spawn(&agent, executable, &actions, &attr, argv, envp);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  notify_server();
  if (rc != 0) {
    send_message("spawn-failed " + std::to_string(rc));
    return 127;
  }
  if (stdio == nullptr) {
    // Our copies of the agent's stdio must not keep its pipes open after the tree is gone; dropped before "started",
    // so that once the host's spawn completes the reaper holds none of them.
    const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull >= 0) {
      for (int fd = 0; fd <= 2; ++fd) ::dup2(devnull, fd);
      ::close(devnull);
    }
    send_message("started " + std::to_string(agent));
  } else {
    for (int fd = 0; fd <= 2; ++fd) ::close(stdio[fd]);
    send_message_with_fd("started " + std::to_string(agent) + " " + std::to_string(::getpid()), p.self_pidfd);
    ::close(p.self_pidfd);
  }
  return supervise(agent, p.sigfd);
}

// Adopt mode: the host's launch child started `agent` as its own child, marked itself a subreaper and exec'd us, with
// every signal blocked, every disposition default and 0-2 on /dev/null already. The dispositions are reset once more
// (this mode's contract must not depend on the caller), the mask becomes exactly what the signalfd handles, and no
// "started" is sent: the host knows the pid.
int adopt(pid_t agent) {
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) ::signal(sig, SIG_DFL);
  ::fcntl(control, F_SETFD, FD_CLOEXEC);
  // Only our own child can be supervised (its status is ours to collect); WNOWAIT leaves an exited one for the loop.
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(agent), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return usage();
  const prepared p = prepare_reaper(false);
  if (p.error != 0) {
    // Without the signalfd the loop cannot run; the host sees us exit and kills the agent's tree itself.
    ::kill(-agent, SIGKILL);
    ::kill(agent, SIGKILL);
    return 127;
  }
  const sigset_t handled = handled_signals();
  ::sigprocmask(SIG_SETMASK, &handled, nullptr);
  return supervise(agent, p.sigfd);
}

// The reaper's life once the agent runs: reaps, reports the leader's exit and "empty", obeys the host's commands, and
// kills the tree when the host is gone or a termination signal arrives.
int supervise(pid_t agent, int sigfd) {
  bool leader_alive = true;
  bool killing = false;  // after "kill" or host EOF: SIGKILL every process of the tree until none is left
  int rescan_ms = 5;
  for (;;) {
    // Reap everything that exited; report the leader.
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid > 0) {
        if (pid == agent) {
          leader_alive = false;
          send_message("exit " + std::to_string(status));
        }
        continue;
      }
      if (pid < 0 && errno == ECHILD) {
        send_message("empty");
        return 0;
      }
      break;  // 0: children remain
    }
    if (killing) signal_tree(SIGKILL);

    pollfd fds[2] = {{control, POLLIN, 0}, {sigfd, POLLIN, 0}};
    // While killing, rescan periodically: new orphans may have appeared between scans, and a process that forks in a
    // loop is caught on the next sweep (a SIGKILLed process cannot fork any more, so sweeps converge).
    // The rescans back off (5 ms doubling up to 200 ms) while nothing happens: a member we may not kill (EPERM: a
    // setuid program) or one stuck in an uninterruptible sleep must not keep the reaper scanning /proc 200 times a
    // second for as long as it lives. Every exit of a child wakes the loop at once anyway.
    const int n = ::poll(fds, 2, killing ? rescan_ms : -1);
    if (killing && n == 0) rescan_ms = std::min(rescan_ms * 2, 200);
    if (n < 0 && errno != EINTR) killing = true;
    if (n <= 0) continue;
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo info;
      while (::read(sigfd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
        if (info.ssi_signo != SIGCHLD) killing = true;  // someone wants us gone: take the tree with us
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[128];
      const ssize_t len = ::recv(control, buf, sizeof buf - 1, MSG_DONTWAIT);
      if (len == 0 || (len < 0 && errno != EAGAIN && errno != EINTR)) {
        killing = true;  // host gone; poll() ignores the negative fd from now on
        ::close(control);
        control = -1;
        continue;
      }
      if (len < 0) continue;
      buf[len] = '\0';
      const auto cmd = parse_reaper_command(std::string_view(buf, static_cast<std::size_t>(len)));
      const int sig = cmd.signal;
      if (cmd.kind == reaper_command_kind::kill) {
        killing = true;
      } else if (cmd.kind == reaper_command_kind::signal_leader) {
        if (leader_alive) ::kill(agent, sig);  // our unreaped child: its pid cannot have been recycled
      } else if (cmd.kind == reaper_command_kind::signal_group) {
        // While the leader is our unreaped child its pid, hence its group id, cannot be recycled. Once it is reaped an
        // empty group's id can be: then only the members of our tree still in that group are signalled.
        if (leader_alive) ::kill(-agent, sig);
        else signal_group_of_tree(agent, sig);
      } else if (cmd.kind == reaper_command_kind::signal_tree) {
        signal_tree(sig);
      }
    }
  }
}

// ---- spawn server ---------------------------------------------------------------------------------------------------
//
// The server keeps one idle reaper forked ahead of time. The idle reaper itself reads the next request from the
// server socket (a SOCK_SEQPACKET packet goes to exactly one reader), so a spawn costs the host one wake-up of an
// already prepared process plus posix_spawn — no fork, no exec on the path. Once taken, the idle reaper tells the
// server through a pipe and the server forks the next one; requests arriving meanwhile wait in the socket.

constexpr int server_socket = reaper_control_fd;

void close_all(const std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
}

// Answers a request that cannot run on its control socket (when that is one), so the host does not wait.
void refuse(int ctl, int err) {
  if (ctl >= 0 && is_seqpacket(ctl)) {
    const std::string msg = "spawn-failed " + std::to_string(err);
    (void)::send(ctl, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
}

// Reads a memfd payload. Only a memfd (it supports seals) of a sane size is accepted: the server reads no other file.
bool read_memfd(int fd, std::string& out) {
  struct stat st {};
  if (::fcntl(fd, F_GET_SEALS) < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
      static_cast<std::size_t>(st.st_size) > spawn_payload_max)
    return false;
  out.resize(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// An idle reaper: prepared, waiting for one request on the server socket. Never returns.
[[noreturn]] void idle_reaper() {
  const prepared p = prepare_reaper(true);
  // Tells the host that a request is taken at once: until the first "ready" a spawn starts its agent itself rather
  // than wait for the server's start. Every idle reaper says it (the first may die before it could); the host reads
  // them at its next spawn, so at most one or two are ever queued.
  (void)::send(server_socket, "ready", 5, MSG_NOSIGNAL | MSG_DONTWAIT);
  static char buf[spawn_payload_inline_max + 1];
  alignas(cmsghdr) static char space[CMSG_SPACE(sizeof(int) * 8)];
  msghdr mh{};
  iovec iov{buf, sizeof buf};
  ssize_t n;
  for (;;) {
    mh = msghdr{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = space;
    mh.msg_controllen = sizeof space;
    n = ::recvmsg(server_socket, &mh, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  if (n <= 0) ::_exit(0);  // the host is gone (or the socket broke): nothing was taken
  ::close(server_socket);  // taken: this process reads no further request
  std::vector<int> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      fds.push_back(fd);
    }
  }
  // fds: control, stdin, stdout, stderr [, memfd]
  const int ctl = fds.empty() ? -1 : fds[0];
  auto give_up = [&](int err) {
    notify_server();
    refuse(ctl, err);
    close_all(fds);
    ::_exit(127);
  };
  if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || (fds.size() != 4 && fds.size() != 5) || !is_seqpacket(ctl))
    give_up(EINVAL);
  std::string payload;
  if (fds.size() == 5) {
    if (std::string_view(buf, static_cast<std::size_t>(n)) != spawn_payload_magic || !read_memfd(fds[4], payload))
      give_up(EINVAL);
    ::close(fds[4]);
  } else {
    payload.assign(buf, static_cast<std::size_t>(n));
  }
  spawn_payload req;
  if (!decode_spawn_payload(payload, req)) give_up(EINVAL);
  // Every field is followed by a NUL inside `payload`: the views are C strings.
  std::vector<char*> argv, envp;
  for (auto a : req.argv) argv.push_back(const_cast<char*>(a.data()));
  argv.push_back(nullptr);
  for (auto e : req.envp) envp.push_back(const_cast<char*>(e.data()));
  envp.push_back(nullptr);
  // From here on this process holds exactly: 0-2 (/dev/null, the server's), 3 (its control socket), its signalfd,
  // its own pidfd (until "started" is sent) and the agent's three stdio descriptors (until the agent runs).
  ::dup2(ctl, reaper_control_fd);
  ::close(ctl);
  control = reaper_control_fd;
  const int stdio[3] = {fds[1], fds[2], fds[3]};
  const std::string exe(req.executable), cwd(req.cwd);
  ::_exit(run_reaper(p, exe.c_str(), argv.data(), envp.data(), cwd.c_str(), stdio));
}

int run_server() {
  ::fcntl(server_socket, F_SETFD, FD_CLOEXEC);
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  const int sigfd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  int taken[2];
  if (sigfd < 0 || ::pipe2(taken, O_CLOEXEC | O_NONBLOCK) != 0) return 1;
  auto fork_idle = [&]() -> pid_t {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(taken[0]);
      ::close(sigfd);
      notify_fd = taken[1];
      ::setsid();  // like an exec'd reaper: its own session, out of reach of signals to the server's group
      idle_reaper();
    }
    return pid;
  };
  pid_t idle = fork_idle();
  int idle_deaths = 0;  // idle reapers that died without taking a request, in a row
  for (;;) {
    if (idle < 0) return 1;  // fork() failed: the host restarts us (or falls back) on its next spawn
    // The socket is polled for hang-up only (events 0): requests are the idle reaper's, not ours.
    pollfd pf[3] = {{server_socket, 0, 0}, {taken[0], POLLIN, 0}, {sigfd, POLLIN, 0}};
    if (::poll(pf, 3, -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    // The host is gone. The idle reaper reads EOF and exits by itself; every per-agent reaper reads EOF on its own
    // control socket and kills its tree.
    if (pf[0].revents & (POLLHUP | POLLERR)) return 0;
    if (pf[1].revents & POLLIN) {
      pid_t who = 0;
      while (::read(taken[0], &who, sizeof who) == static_cast<ssize_t>(sizeof who)) {
        if (who == idle) {
          idle = 0;
          idle_deaths = 0;
        }
      }
    }
    if (pf[2].revents & POLLIN) {
      signalfd_siginfo info;
      while (::read(sigfd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      }
      int status = 0;
      for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
        if (pid == idle) {  // killed while idle (or its set-up crashed)
          idle = 0;
          if (++idle_deaths >= 3) return 1;  // something kills them: stop rather than fork in a loop
        }
      }
    }
    if (idle == 0) idle = fork_idle();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string_view(argv[1]) == "--server" && std::string_view(argv[2]) == "--control-fd" &&
      std::string_view(argv[3]) == "3") {
    // 0-2 must be open (the host gives /dev/null): received descriptors must never land there.
    for (int fd = 0; fd <= 2; ++fd)
      if (::fcntl(fd, F_GETFD) < 0) return usage();
    if (!is_seqpacket(server_socket)) return usage();
    control = -1;  // the server itself never speaks the per-agent protocol on its own socket
    return run_server();
  }
  if (argc == 5 && std::string_view(argv[1]) == "--control-fd" && std::string_view(argv[2]) == "3" &&
      std::string_view(argv[3]) == "--adopt") {
    int agent = 0;
    if (!is_seqpacket(control) || !parse_reaper_number(argv[4], "", 1, 0x7fffffff, agent)) return usage();
    return adopt(agent);
  }
  if (argc < 5 || std::string_view(argv[1]) != "--control-fd" || std::string_view(argv[2]) != "3" ||
      std::string_view(argv[3]) != "--" || !is_seqpacket(control))
    return usage();
  const char* executable = argv[4];
  if (argc < 6 || executable[0] != '/') return usage();
  return run_reaper(prepare_reaper(false), executable, argv + 5, environ, nullptr, nullptr);
}
