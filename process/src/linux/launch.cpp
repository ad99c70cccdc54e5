// Starting an agent's process tree: see launch.hpp.
#include "launch.hpp"

#include "../detail/reaper_protocol.hpp"
#include "../posix/spawn.hpp"
#include "adopt_spawn.hpp"
#include "exec_limits.hpp"
#include "proc_tree.hpp"
#include "reaper_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <string_view>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace agenthost::process::detail {

std::optional<exit_status> try_reap(int pidfd) {
  if (pidfd < 0) return exit_status{unknown_status{}};
  siginfo_t info{};
  for (;;) {
    if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED | WNOHANG) == 0) break;
    if (errno == EINTR) continue;
    return exit_status{unknown_status{}};
  }
  if (info.si_pid == 0) return std::nullopt;
  switch (info.si_code) {
    case CLD_EXITED: return exit_status{exited{info.si_status}};
    case CLD_KILLED: return exit_status{signaled{info.si_status, false}};
    case CLD_DUMPED: return exit_status{signaled{info.si_status, true}};
    default: return exit_status{unknown_status{}};
  }
}

namespace {

spawn_error os_error(const std::string& what, int err) {
  return {make_error_code(errc::spawn_failed), what + ": " + std::strerror(err)};
}

struct reaper_started {
  int agent_pid = -1;
  int reaper_pid = -1;  // only from a reaper forked by the spawn server
  unique_fd reaper_pidfd;
};

// Reads the reaper's first message: "started <pid>" ("started <pid> <reaper>" + a pidfd of the reaper, from the
// spawn server's reapers) or "spawn-failed <errno>".
boost::system::result<reaper_started, spawn_error> await_reaper_start(int control_fd, const std::filesystem::path& exe) {
  if (!poll_readable(control_fd, std::chrono::milliseconds{10000}))
    return spawn_error{make_error_code(errc::reaper_failed), "agenthost-reaper did not report within 10 s"};
  char buf[128];
  alignas(cmsghdr) char space[CMSG_SPACE(sizeof(int))];
  iovec iov{buf, sizeof buf - 1};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = space;
  mh.msg_controllen = sizeof space;
  ssize_t n;
  do n = ::recvmsg(control_fd, &mh, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  reaper_started r;
  for (cmsghdr* c = n > 0 ? CMSG_FIRSTHDR(&mh) : nullptr; c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int))) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
      r.reaper_pidfd.reset(fd);
    }
  }
  if (n <= 0) return spawn_error{make_error_code(errc::reaper_failed), "agenthost-reaper exited before the agent started"};
  buf[n] = '\0';
  const auto m = parse_reaper_message(std::string_view(buf, static_cast<std::size_t>(n)));
  if (m.kind == reaper_message_kind::started) {
    r.agent_pid = m.value;
    if (m.reaper != 0) r.reaper_pid = m.reaper;
    return r;
  }
  if (m.kind == reaper_message_kind::spawn_failed)
    return os_error("spawning '" + exe.string() + "' failed", m.value);
  return spawn_error{make_error_code(errc::reaper_failed), std::string("unexpected reaper message: ") + buf};
}

}  // namespace

boost::system::result<launched_tree, spawn_error> launch_tree(const spawn_options& options) {
  // execve() takes C strings: a NUL would silently end an argument there (and break the spawn server's NUL-separated
  // request). Refused by name before anything else.
  const auto nul_in = [](std::string_view s) { return s.find('\0') != std::string_view::npos; };
  const auto refuse = [](const std::string& what) {
    return spawn_error{make_error_code(errc::argument_contains_nul), what + " contains a NUL byte"};
  };
  if (nul_in(options.executable.native())) return refuse("the executable path");
  if (options.argv0 && nul_in(*options.argv0)) return refuse("argv0");
  for (std::size_t i = 0; i < options.args.size(); ++i)
    if (nul_in(options.args[i])) return refuse("argument " + std::to_string(i + 1));
  for (const auto& [name, value] : options.env.set)
    if (nul_in(name) || nul_in(value)) return refuse("the environment variable '" + name + "'");
  if (nul_in(options.working_directory.native())) return refuse("the working directory");
  // A zero-byte read looks like end of file (or completes at once, forever); a huge chunk is allocated per read.
  constexpr std::size_t max_read_chunk = std::size_t{1} << 30;
  if (options.read_chunk_bytes == 0 || options.read_chunk_bytes > max_read_chunk)
    return spawn_error{make_error_code(errc::invalid_options),
                       "read_chunk_bytes must be between 1 and 1 GiB, not " + std::to_string(options.read_chunk_bytes)};

  // Resolve and check everything we can before creating any process, so each failure names its path.
  // (The probe, providers/src/discovery.cpp executable_search_path(), follows this rule: keep them alike.)
  std::string path_var;
  if (auto it = options.env.set.find("PATH"); it != options.env.set.end()) {
    path_var = it->second;
  } else if (const char* p = std::getenv("PATH"); p != nullptr && options.env.inherit) {
    path_var = p;
  } else {
    path_var = "/usr/local/bin:/usr/bin:/bin";
  }
  auto exe = resolve_executable(options.executable, path_var);
  if (!exe) return exe.error();
  if (!options.working_directory.empty()) {
    struct stat st {};
    if (::stat(options.working_directory.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return spawn_error{make_error_code(errc::working_directory_not_found),
                         "working directory not found: '" + options.working_directory.string() + "'"};
  }
  containment_kind mode = options.containment;
  std::filesystem::path reaper;
  if (mode != containment_kind::session) {
    reaper = find_reaper(options.reaper_path);
    if (reaper.empty()) {
      if (mode == containment_kind::reaper)
        return spawn_error{make_error_code(errc::reaper_not_found),
                           "agenthost-reaper not found" +
                               (options.reaper_path.empty() ? std::string{}
                                                            : " at '" + options.reaper_path.string() + "'")};
      options.log.log(log_level::warn,
                      "agenthost-reaper not found: falling back to session containment (setsid'd daemons may escape)");
      mode = containment_kind::session;
    } else {
      mode = containment_kind::reaper;
    }
  }

  // Pipes: the parent's ends are close-on-exec and non-blocking; the child's ends are moved above 2 (see
  // move_above_stdio) and are closed here right after the spawn, so EOF arrives when the tree is gone.
  // A host out of descriptors (EMFILE/ENFILE) fails here: the error names the agent and what the descriptor was for.
  const auto no_descriptor = [&](const std::string& what) {
    return os_error("spawning '" + exe->string() + "': " + what, errno);
  };
  int p[2];
  unique_fd out_r, out_w, err_r, err_w, in_parent, in_child, ctl_parent, ctl_child;
  if (::pipe2(p, O_CLOEXEC) != 0) return no_descriptor("creating the stdout pipe (pipe2)");
  out_r.reset(p[0]);
  out_w.reset(p[1]);
  if (::pipe2(p, O_CLOEXEC) != 0) return no_descriptor("creating the stderr pipe (pipe2)");
  err_r.reset(p[0]);
  err_w.reset(p[1]);
  if (options.stdin_mode == stdin_kind::pipe) {
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) != 0)
      return no_descriptor("creating the stdin socket (socketpair)");
    in_parent.reset(p[0]);
    in_child.reset(p[1]);
    ::shutdown(in_child.get(), SHUT_WR);  // the agent's stdin is read-only
  } else {
    in_child.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!in_child) return no_descriptor("opening /dev/null for stdin");
  }
  if (mode == containment_kind::reaper) {
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p) != 0)
      return no_descriptor("creating the reaper's control socket (socketpair)");
    ctl_parent.reset(p[0]);
    ctl_child.reset(p[1]);
  }
  out_w = move_above_stdio(std::move(out_w));
  err_w = move_above_stdio(std::move(err_w));
  in_child = move_above_stdio(std::move(in_child));
  if (ctl_child) ctl_child = move_above_stdio(std::move(ctl_child));
  if (!out_w || !err_w || !in_child || (mode == containment_kind::reaper && !ctl_child))
    return no_descriptor("moving the agent's descriptors above 2 (fcntl F_DUPFD_CLOEXEC)");

  spawn_request req;
  const std::string argv0 = options.argv0.value_or(options.executable.string());
  req.argv = {argv0};
  req.argv.insert(req.argv.end(), options.args.begin(), options.args.end());
  req.envp = build_environment(options.env);
  // Without a reaper (session mode, or a reaper that died) an environment token is how a stop finds daemons that
  // escaped both the session and the parent links (they inherit the environment). A host that itself runs under
  // agenthost (an agent driving agents) has a token already: the agent gets one entry with both (a second entry
  // would be dropped by Node.js and Python, which keep the first of two, and with it this tree's token), first in
  // the environment so that a huge one cannot push it past what a stop reads.
  std::string tree_token;
  {
    std::random_device rd;
    char hex[40];
    std::snprintf(hex, sizeof hex, "%08x%08x%08x", rd(), rd(), static_cast<unsigned>(::getpid()));
    tree_token = std::string("AGENTHOST_TREE_TOKEN=") + hex;
    constexpr std::string_view name = "AGENTHOST_TREE_TOKEN=";
    std::string entry;
    for (auto it = req.envp.begin(); it != req.envp.end();) {
      if (it->compare(0, name.size(), name) != 0) {
        ++it;
        continue;
      }
      // The tokens above, the most recent ones (a bound against an absurd depth of nesting).
      std::string_view above = std::string_view(*it).substr(name.size());
      constexpr std::size_t kMaxTokensAbove = 16 * 25;
      if (above.size() > kMaxTokensAbove) {
        above = above.substr(above.size() - kMaxTokensAbove);
        above.remove_prefix(std::min(above.size(), above.find(':') + 1));
      }
      if (!above.empty()) entry = std::string(above) + ":";
      it = req.envp.erase(it);
    }
    entry = std::string(name) + entry + hex;
    req.envp.insert(req.envp.begin(), std::move(entry));
  }
  // The strictest exec on the way is the reaper-first one of kernels before 5.9 (the reaper's own arguments come in
  // front of the agent's): checked for every reaper-mode spawn, so that what is accepted does not depend on the
  // kernel, and here, so that a refused command line is a specific error before anything is spawned.
  if (auto problem = check_exec_limits(req.argv, req.envp, mode == containment_kind::reaper ? 6 : 1,
                                               4096 + 64 + 2 * (exe->native().size() + 1)))
    return spawn_error{make_error_code(errc::argument_list_too_long), *problem};
  req.stdin_fd = in_child.get();
  req.stdout_fd = out_w.get();
  req.stderr_fd = err_w.get();

  // Reaper mode, fast path: the spawn server forks the agent's reaper (no exec). The server runs with "/" as its
  // working directory, so it gets an absolute one: the host's current directory when none is given.
  bool via_server = false;
  bool start_server = false;
  if (mode == containment_kind::reaper && options.reaper_server) {
    std::error_code cwd_ec;
    req.executable = *exe;
    req.working_directory = options.working_directory.empty() ? std::filesystem::current_path(cwd_ec)
                                                              : std::filesystem::absolute(options.working_directory,
                                                                                          cwd_ec);
    req.fd3 = ctl_child.get();
    std::string why;
    const int rc = cwd_ec ? cwd_ec.value() : send_spawn_request(reaper, req, &why);
    via_server = rc == 0;
    if (!why.empty())
      options.log.log(rc == spawn_server_thread_differs ? log_level::debug : log_level::info,
                      "agenthost-reaper spawn server not used: " + why + "; this agent gets a reaper of its own");
    // No server yet (or it died): this spawn starts the agent and its own reaper itself and the server right after,
    // so the server's start-up overlaps the agent's instead of adding an exec and a fork to this spawn's path.
    start_server = rc == ESRCH;
    // EINPROGRESS: the server is still starting; this spawn is faster on its own than queued behind that start.
    if (!via_server && !start_server && rc != EINPROGRESS && rc != spawn_server_thread_differs)
      options.log.log(log_level::info, std::string("agenthost-reaper spawn server not used (") + std::strerror(rc) +
                                           "): starting a reaper for this agent");
  }

  std::optional<int> pid;
  int agent_pid = -1;
  const auto in_directory = [&] {
    return options.working_directory.empty() ? std::string{} : " in '" + options.working_directory.string() + "'";
  };
  // Reaper mode without the server: the agent is started first and its reaper exec'd after it, in adopt mode (see
  // adopt_spawn.hpp), so the agent's start does not wait for the reaper's exec. Kernels before 5.9 exec the reaper
  // first, which then spawns the agent.
  const bool adopt = !via_server && mode == containment_kind::reaper && adopt_spawn_supported();
  if (adopt) {
    unique_fd devnull = move_above_stdio(unique_fd{::open("/dev/null", O_RDWR | O_CLOEXEC)});
    if (!devnull) return no_descriptor("opening /dev/null for agenthost-reaper");
    req.executable = *exe;
    req.working_directory = options.working_directory;
    req.fd3 = ctl_child.get();
    const adopted_spawn a = spawn_adopted(reaper, req, devnull.get());
    if (a.error != 0) {
      if (a.agent_failed) return os_error("spawning '" + exe->string() + "'" + in_directory() + " failed", a.error);
      return os_error("starting agenthost-reaper '" + reaper.string() + "' for '" + exe->string() + "'", a.error);
    }
    pid = a.reaper_pid;
    agent_pid = a.agent_pid;
  } else if (!via_server) {
    if (mode == containment_kind::reaper) {
      req.executable = reaper;
      std::vector<std::string> agent_argv = std::move(req.argv);
      req.argv = {reaper_program_name, "--control-fd", "3", "--", exe->string()};
      req.argv.insert(req.argv.end(), agent_argv.begin(), agent_argv.end());
      req.fd3 = ctl_child.get();
    } else {
      req.executable = *exe;
    }
    req.working_directory = options.working_directory;
    int spawn_errno = 0;
    const int pid_value = spawn_process(req, spawn_errno);
    if (pid_value <= 0) {
      const std::string what = mode == containment_kind::reaper ? "spawning agenthost-reaper '" + reaper.string() + "'"
                                                                : "spawning '" + exe->string() + "'";
      return os_error(what + in_directory(), spawn_errno);
    }
    pid = pid_value;
  }
  // Right after this spawn, in the background: this spawn returns without waiting for the server's exec.
  if (start_server) {
    if (const int e = take_background_start_error(); e != 0)
      options.log.log(log_level::info, std::string("agenthost-reaper spawn server not started: ") + std::strerror(e));
    start_spawn_server_in_background(reaper);
  }
  // Our copies of the child's ends: closed now, so EOF arrives when the tree is gone (the server got its own copies
  // with the request).
  out_w.reset();
  err_w.reset();
  in_child.reset();
  ctl_child.reset();

  unique_fd pidfd;
  bool auto_reaped = false;
  if (via_server) {
    auto started = await_reaper_start(ctl_parent.get(), *exe);
    sweep_retired_spawn_servers();  // this request was taken: the queue of a server replaced meanwhile may be empty
    // On failure, closing the control socket (EOF) makes a reaper that is still there kill whatever it started and
    // exit; the server reaps it.
    if (!started) return started.error();
    if (started->reaper_pid <= 0 || !started->reaper_pidfd)
      return spawn_error{make_error_code(errc::reaper_failed), "agenthost-reaper spawn server: no reaper pidfd"};
    agent_pid = started->agent_pid;
    pid = started->reaper_pid;
    pidfd = std::move(started->reaper_pidfd);
  } else {
    pidfd.reset(pidfd_open(*pid));
    // ESRCH: the child already exited and was reaped by the kernel — the host ignores SIGCHLD (or has SA_NOCLDWAIT).
    // That is a run that ended, with its status lost, not a spawn failure.
    auto_reaped = !pidfd && errno == ESRCH;
    if (!pidfd && !auto_reaped) {
      // Without a pidfd we cannot signal or wait without PID-reuse races; refuse rather than run unsafely.
      const int e = errno;
      int st = 0;
      if (mode == containment_kind::reaper) {
        // The reaper (adopting, or reaper-first: it may have started the agent already) kills what it started and
        // exits on EOF on its control socket; killing it instead would orphan that agent. Bounded: a reaper that
        // does not exit within 2 s is killed.
        ctl_parent.reset();
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        pid_t r = 0;
        while ((r = ::waitpid(*pid, &st, WNOHANG)) == 0 && std::chrono::steady_clock::now() < give_up)
          ::poll(nullptr, 0, 5);
        if (r == 0) ::kill(*pid, SIGKILL);
        if (r <= 0) ::waitpid(*pid, &st, 0);
      } else {
        ::kill(-*pid, SIGKILL);  // the agent leads its own session and group: what it forked already goes too
        ::kill(*pid, SIGKILL);
        ::waitpid(*pid, &st, 0);
      }
      return os_error("spawning '" + exe->string() + "': " +
                          (e == ENOSYS ? "pidfd_open (Linux >= 5.3 required)" : "pidfd_open"), e);
    }
    if (agent_pid < 0) agent_pid = *pid;
    if (mode == containment_kind::reaper && !adopt) {
      auto started = await_reaper_start(ctl_parent.get(), *exe);
      if (!started) {
        ctl_parent.reset();  // EOF makes the reaper kill whatever it started and exit
        if (pidfd) poll_readable(pidfd.get(), std::chrono::milliseconds{2000});
        if (pidfd && !try_reap(pidfd.get())) kill_and_reap(pidfd.get());
        return started.error();
      }
      agent_pid = started->agent_pid;
    }
  }

  launched_tree t;
  t.mode = mode;
  t.agent_pid = agent_pid;
  t.direct_pid = *pid;
  t.direct_is_child = !via_server;
  t.auto_reaped = auto_reaped;
  t.tree_token = std::move(tree_token);
  t.direct_pidfd = std::move(pidfd);
  t.stdout_read = std::move(out_r);
  t.stderr_read = std::move(err_r);
  t.stdin_write = std::move(in_parent);
  t.control = std::move(ctl_parent);
  return t;
}

}  // namespace agenthost::process::detail
