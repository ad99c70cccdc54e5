// agenthost-reaper — the subreaper helper between the host and an agent.
//
// Why it exists: agents put their tool commands in new sessions (setsid) and some tools double-fork daemons, so a
// process-group kill or a /proc walk from the host misses descendants, and when the host dies (even by SIGKILL) nobody
// would clean up. This program marks itself PR_SET_CHILD_SUBREAPER: every orphan of the agent's tree is reparented
// to it, so (1) a parent-link walk from here finds the whole tree, and (2) "no child left" (waitpid → ECHILD) means
// "tree gone". It is single-threaded, so unlike the host it may call waitpid(-1). When its control socket reaches EOF
// — the host exited or died — it kills the tree.
//
// It refuses to run unless fd 3 is a SOCK_SEQPACKET socket and the command line has the exact expected shape; it
// opens no path except /proc and the agent executable it is told to run.

#include "../src/detail/reaper_protocol.hpp"
#include "../src/linux/proc_tree.hpp"
#include "../src/posix/clean_spawn_attributes.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

extern char** environ;

namespace {

using namespace agenthost::process::detail;

int control = reaper_control_fd;  // -1 once the host is gone

void send_message(const std::string& msg) {
  // MSG_NOSIGNAL: a gone host must not kill us before we cleaned up.
  if (control >= 0) (void)::send(control, msg.data(), msg.size(), MSG_NOSIGNAL);
}

int usage() {
  std::fputs("agenthost-reaper: internal helper of the agenthost library; not meant to be run by hand.\n"
             "usage: agenthost-reaper --control-fd 3 -- <executable> <argv0> [args...]\n",
             stderr);
  return 2;
}

bool control_is_seqpacket() {
  int type = 0;
  socklen_t len = sizeof type;
  return ::getsockopt(control, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_SEQPACKET;
}

// Signals every live process of our tree except ourselves. Under a subreaper the parent-link walk is complete.
void signal_tree(int sig) {
  const auto all = scan_processes();
  for (const auto& e : tree_members(all, ::getpid(), false, 0)) signal_process(e, sig);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5 || std::string_view(argv[1]) != "--control-fd" || std::string_view(argv[2]) != "3" ||
      std::string_view(argv[3]) != "--" || !control_is_seqpacket())
    return usage();
  const char* executable = argv[4];
  if (argc < 6 || executable[0] != '/') return usage();

  ::fcntl(control, F_SETFD, FD_CLOEXEC);
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    send_message("spawn-failed " + std::to_string(errno));
    return 127;
  }

  // SIGCHLD and the termination signals arrive through a signalfd; they are blocked here but the agent gets an empty
  // mask and default dispositions.
  sigset_t handled;
  sigemptyset(&handled);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&handled, s);
  ::sigprocmask(SIG_BLOCK, &handled, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  const int sigfd = ::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigfd < 0) {
    send_message("spawn-failed " + std::to_string(errno));
    return 127;
  }

  posix_spawnattr_t attr;
  if (const int rc = init_clean_spawn_attributes(attr); rc != 0) {
    send_message("spawn-failed " + std::to_string(rc));
    return 127;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);  // the agent sees only 0, 1, 2
  pid_t agent = 0;
  const int rc = ::posix_spawn(&agent, executable, &actions, &attr, argv + 5, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    send_message("spawn-failed " + std::to_string(rc));
    return 127;
  }
  send_message("started " + std::to_string(agent));
  // Our copies of the agent's stdio must not keep its pipes open after the tree is gone.
  const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0) {
    for (int fd = 0; fd <= 2; ++fd) ::dup2(devnull, fd);
    ::close(devnull);
  }

  bool leader_alive = true;
  bool killing = false;  // after "kill" or host EOF: SIGKILL every process of the tree until none is left
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
    const int n = ::poll(fds, 2, killing ? 5 : -1);
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
        ::kill(-agent, sig);  // a process group id is not recycled while the group has members
      } else if (cmd.kind == reaper_command_kind::signal_tree) {
        signal_tree(sig);
      }
    }
  }
}
