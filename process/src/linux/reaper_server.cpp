#include "reaper_server.hpp"

#include "../detail/reaper_protocol.hpp"
#include "inherited_state.hpp"
#include "proc_tree.hpp"
#include "../posix/fd_passing.hpp"

#include <fcntl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace agenthost::process::detail {
namespace {

struct server_state {
  std::mutex m;
  pid_t owner = 0;  // getpid() when the server was started: a fork()ed copy of the host must not share it
  std::filesystem::path reaper;
  unique_fd sock;   // our end of the server's SOCK_SEQPACKET socket (close-on-exec)
  unique_fd pidfd;  // the server is our child: reaped through this, never with waitpid(-1)
  inherited_snapshot inherited;  // inherited_state() of the thread that started the server, just before it did
  bool ready = false;  // an idle reaper said "ready": the server is up (a request may wait for a fork, not a start)
  // A background start (start_spawn_server_in_background) is under way: getpid() of the process whose thread spawns
  // the server, outside the lock; 0 when none is. Written under the lock; atomic for the atexit handler's first look,
  // which must not take the lock in a fork()ed child (another thread of the parent may have held it at the fork).
  // The reaper path it starts.
  std::atomic<pid_t> starting_owner{0};
  std::filesystem::path starting_reaper;
  std::condition_variable start_done;  // notified when a background start ends
  int background_error = 0;            // the last background start's errno, until take_background_start_error()
  // Servers replaced while requests of other threads were still queued on their socket: killing one then would fail
  // those spawns. Each keeps serving until its queue is empty, then is killed and reaped (sweep_retired).
  struct retired_server {
    unique_fd sock;
    unique_fd pidfd;
    pid_t owner = 0;  // getpid() when it was retired: a fork()ed copy of the host only closes its copies
  };
  std::vector<retired_server> retired;
};

// Never destroyed: a spawn from another static object's destructor must still find it, and the descriptors are meant
// to stay open until the process exits (that EOF is what tells the server the host is gone).
server_state& state() {
  static auto* s = new server_state;
  return *s;
}

// Forget the server; kill and reap it when it is ours (it may be alive but unusable, e.g. stopped).
void reset(server_state& s, bool ours) {
  if (ours && s.pidfd) kill_and_reap(s.pidfd.get());
  s.sock.reset();
  s.pidfd.reset();
  s.owner = 0;
  s.ready = false;
  s.inherited = {};
}

// Requests still queued on the socket of a server (sent, not yet taken by one of its idle reapers).
bool has_queued_requests(int sock) {
  int queued = 0;
  return ::ioctl(sock, SIOCOUTQ, &queued) == 0 && queued > 0;
}

// Replaces the server (see inherited_state.hpp): at once when nothing is queued for it, else once its queue is empty.
void retire(server_state& s) {
  if (s.sock && has_queued_requests(s.sock.get())) {
    s.retired.push_back({std::move(s.sock), std::move(s.pidfd), s.owner});
    reset(s, false);
  } else {
    reset(s, true);
  }
}

// Kills and reaps the retired servers that have nothing queued any more (or died). Those of the process we were
// fork()ed from are not ours: only our copies of their descriptors are closed (closing a pidfd neither kills nor reaps).
void sweep_retired(server_state& s) {
  const pid_t self = ::getpid();
  std::erase_if(s.retired, [self](server_state::retired_server& r) {
    if (r.owner != self) return true;
    if (has_queued_requests(r.sock.get()) && !poll_readable(r.pidfd.get(), std::chrono::milliseconds{0})) return false;
    kill_and_reap(r.pidfd.get());
    return true;
  });
}

// Forgets what this process cannot use any more: the server of the process it was fork()ed from (not ours to kill),
// retired servers that are done, a server that died.
void drop_stale(server_state& s) {
  if (s.sock && s.owner != ::getpid()) reset(s, false);
  if (!s.retired.empty()) sweep_retired(s);
  if (s.sock && poll_readable(s.pidfd.get(), std::chrono::milliseconds{0})) reset(s, true);
}

// Whether a background start is under way in this process. A fork()ed copy of the host forgets its parent's: that
// thread is not in this process.
bool starting(server_state& s) {
  if (s.starting_owner != 0 && s.starting_owner != ::getpid()) s.starting_owner = 0;
  return s.starting_owner != 0;
}

// Reads the idle reapers' "ready" packets (the only ones the server's side ever sends us), so none pile up.
bool check_ready(server_state& s) {
  char buf[16];
  for (;;) {
    const ssize_t n = ::recv(s.sock.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n == 5 && std::string_view(buf, 5) == "ready") s.ready = true;
    if (n <= 0) return s.ready;
  }
}

struct spawned_server {
  unique_fd sock;   // our end of its socket
  unique_fd pidfd;  // of our child, the server
  inherited_snapshot inherited;  // what it inherited from us (inherited_state())
};

// Spawns `reaper --server`. Touches no shared state: a background start runs it without the lock.
int spawn_server(const std::filesystem::path& reaper, spawned_server& out) {
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) return errno;
  unique_fd ours{sp[0]};
  unique_fd theirs = move_above_stdio(unique_fd{sp[1]});
  unique_fd devnull = move_above_stdio(unique_fd{::open("/dev/null", O_RDWR | O_CLOEXEC)});
  if (!theirs || !devnull) return errno;
  // A stopped or wedged server must not hang a spawn: the send gives up after 5 s and the caller falls back.
  const timeval timeout{5, 0};
  ::setsockopt(ours.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  spawn_request r;
  r.executable = reaper;
  r.argv = {reaper_program_name, "--server", "--control-fd", "3"};
  // No environment (each request carries the agent's), "/" as working directory (it must not keep the host's busy).
  r.working_directory = "/";
  r.stdin_fd = r.stdout_fd = r.stderr_fd = devnull.get();
  r.fd3 = theirs.get();
  out.inherited = inherited_state();  // right before the spawn, on the spawning thread: what the server gets
  int err = 0;
  const int pid = spawn_process(r, err);
  if (pid <= 0) return err;
  unique_fd pidfd{pidfd_open(pid)};
  if (!pidfd) {
    err = errno;
    // ESRCH: it already exited and the kernel reaped it (the host ignores SIGCHLD): its pid may name another process
    // by now. Otherwise it is our unreaped child, whose pid cannot have been recycled.
    if (err != ESRCH) {
      ::kill(pid, SIGKILL);
      int st = 0;
      ::waitpid(pid, &st, 0);
    }
    return err;
  }
  out.sock = std::move(ours);
  out.pidfd = std::move(pidfd);
  return 0;
}

void install(server_state& s, spawned_server&& server, const std::filesystem::path& reaper) {
  s.sock = std::move(server.sock);
  s.pidfd = std::move(server.pidfd);
  s.reaper = reaper;
  s.owner = ::getpid();
  s.inherited = std::move(server.inherited);
}

int start(server_state& s, const std::filesystem::path& reaper) {
  spawned_server server;
  int e = 0;
  try {
    e = spawn_server(reaper, server);
  } catch (const std::bad_alloc&) {
    e = ENOMEM;  // the request's strings, the snapshot
  }
  if (e != 0) return e;
  install(s, std::move(server), reaper);
  return 0;
}

int send_request(int sock, const std::string& payload, const spawn_request& r) {
  unique_fd memfd;
  std::string_view inline_part = payload;
  if (payload.size() > spawn_payload_inline_max) {
    memfd.reset(::memfd_create("agenthost-spawn", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!memfd) return errno;
    std::size_t done = 0;
    while (done < payload.size()) {
      const ssize_t n = ::write(memfd.get(), payload.data() + done, payload.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return n < 0 ? errno : EIO;
      done += static_cast<std::size_t>(n);
    }
    ::fcntl(memfd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    inline_part = spawn_payload_magic;
  }
  int fds[5] = {r.fd3, r.stdin_fd, r.stdout_fd, r.stderr_fd, memfd.get()};
  const std::size_t nfds = memfd ? 5 : 4;
  return send_with_fds(sock, inline_part, std::span<const int>(fds, nfds));
}

// Under the lock: 0 when this process has a ready server for `reaper`, else why not: ESRCH (none), EINPROGRESS (one
// is starting, or not ready yet), ENOTSUP (it is another reaper's).
int server_unusable(server_state& s, const std::filesystem::path& reaper) {
  drop_stale(s);
  if (!s.sock && starting(s)) return s.starting_reaper == reaper ? EINPROGRESS : ENOTSUP;
  if (!s.sock) return ESRCH;
  if (s.reaper != reaper) return ENOTSUP;
  return check_ready(s) ? 0 : EINPROGRESS;
}

}  // namespace

int send_spawn_request(const std::filesystem::path& reaper, const spawn_request& request, std::string* why) {
  auto& s = state();
  {
    // No server to send to: the answer needs no snapshot.
    std::lock_guard lock(s.m);
    if (const int e = server_unusable(s, reaper); e != 0) return e;
  }
  const std::string payload = encode_spawn_payload(request.executable.string(), request.working_directory.string(),
                                                   request.argv, request.envp);
  const inherited_snapshot inherited = inherited_state();  // outside the lock: three /proc reads
  std::lock_guard lock(s.m);
  if (const int e = server_unusable(s, reaper); e != 0) return e;  // again: another thread may have replaced it
  // See inherited_state.hpp. The host changed since the server started: its agents would not get the change. This
  // spawn starts its own reaper (which inherits from us) and the server is started again, from now.
  if (auto what = first_difference(s.inherited.process_wide, inherited.process_wide); !what.empty()) {
    if (why != nullptr) *why = "the host's " + what + " changed since the server started: replacing it";
    retire(s);
    return ESRCH;
  }
  // Only this thread differs from the one that started the server: not a reason to replace it.
  if (auto what = first_difference(s.inherited.per_thread, inherited.per_thread); !what.empty()) {
    if (why != nullptr) *why = "this thread's " + what + " differs from the server's";
    return spawn_server_thread_differs;
  }
  const int err = send_request(s.sock.get(), payload, request);
  if (err == 0) return 0;
  // EPIPE/ECONNRESET: the server died since the check above (its socket closes before its pidfd turns readable).
  // EAGAIN after the send timeout: it is wedged. Anything else (ENOBUFS, ENOMEM, …): this request could not be sent,
  // but those of other threads queued before it still can be taken. Either way replace it; this spawn falls back to
  // exec.
  if (err == EPIPE || err == ECONNRESET || err == ECONNREFUSED || err == EAGAIN || err == EWOULDBLOCK) {
    reset(s, true);
  } else {
    retire(s);
  }
  return err == EPIPE || err == ECONNRESET || err == ECONNREFUSED ? ESRCH : err;
}

bool spawn_server_ready() {
  auto& s = state();
  std::lock_guard lock(s.m);
  return s.sock && s.owner == ::getpid() && check_ready(s);
}

int wait_spawn_server_ready(std::chrono::milliseconds timeout) {
  using clock_type = std::chrono::steady_clock;
  const auto deadline = clock_type::now() + timeout;
  auto& s = state();
  unique_fd sock, pidfd;  // duplicates, polled without the lock (a concurrent reset closes the originals)
  {
    std::unique_lock lock(s.m);
    // A background start is one posix_spawn: wait for it, within the timeout.
    if (!s.start_done.wait_until(lock, deadline, [&] { return !starting(s); })) return ETIMEDOUT;
    if (!s.sock || s.owner != ::getpid()) return ESRCH;
    if (check_ready(s)) return 0;
    sock.reset(::fcntl(s.sock.get(), F_DUPFD_CLOEXEC, 0));
    pidfd.reset(::fcntl(s.pidfd.get(), F_DUPFD_CLOEXEC, 0));
    if (!sock || !pidfd) return errno;
  }
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock_type::now());
    if (left.count() <= 0) return ETIMEDOUT;
    pollfd p[2] = {{sock.get(), POLLIN, 0}, {pidfd.get(), POLLIN, 0}};
    if (::poll(p, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) return errno;
    std::lock_guard lock(s.m);
    if (!s.sock) return ESRCH;
    if (check_ready(s)) return 0;
    if ((p[0].revents & (POLLHUP | POLLERR)) != 0 || (p[1].revents & POLLIN) != 0) return ESRCH;  // it died
  }
}

int start_spawn_server(const std::filesystem::path& reaper) {
  const inherited_snapshot inherited = inherited_state();
  auto& s = state();
  std::unique_lock lock(s.m);
  s.start_done.wait(lock, [&] { return !starting(s); });  // one posix_spawn at most
  drop_stale(s);
  // Started before the host changed (see send_spawn_request): replaced now rather than by the first spawn.
  if (s.sock && s.reaper == reaper && !first_difference(s.inherited.process_wide, inherited.process_wide).empty())
    retire(s);
  if (s.sock) return s.reaper == reaper ? 0 : ENOTSUP;
  return start(s, reaper);
}

// At exit(): waits (at most 5 s) for a background start that is under way. Its thread's posix_spawn child shares the
// host's memory until its exec, so until then it shows the host's command line and environment; exit() does not wait
// for it (only the thread that spawned it would), and it would outlive the host under that guise — a process a
// caller that looks for leftovers by environment rightly counts. Once exec'd, the server reads EOF and exits.
static void wait_for_background_start_at_exit() {
  auto& s = state();
  if (s.starting_owner.load() != ::getpid()) return;  // none, or the parent's (this is a fork()ed copy of the host)
  std::unique_lock lock(s.m);
  s.start_done.wait_for(lock, std::chrono::seconds(5), [&] { return !starting(s); });
}

void start_spawn_server_in_background(const std::filesystem::path& reaper) {
  auto& s = state();
  static std::once_flag at_exit;
  std::call_once(at_exit, [] { std::atexit(wait_for_background_start_at_exit); });  // may fail (ENOMEM): no wait then
  // Built before the start is marked as under way: nothing that can throw comes between the mark and the thread's end.
  auto run = [reaper]() noexcept {
    spawned_server server;
    int e = 0;
    try {
      e = spawn_server(reaper, server);
    } catch (...) {
      e = ENOMEM;  // the request's strings; nothing else throws there
    }
    auto& st = state();
    {
      std::lock_guard lock(st.m);
      if (st.starting_owner == ::getpid()) {
        st.starting_owner = 0;
        if (e != 0) st.background_error = e;
        else if (!st.sock) install(st, std::move(server), reaper);
      }
      // Not installed (cannot happen while starts wait for each other; kept safe): ours to reap, not to leave as a
      // zombie.
      if (server.pidfd) kill_and_reap(server.pidfd.get());
    }
    st.start_done.notify_all();
  };
  {
    std::lock_guard lock(s.m);
    drop_stale(s);
    if (s.sock || starting(s)) return;
    s.starting_reaper = reaper;  // may throw: before the mark
    s.starting_owner = ::getpid();
  }
  // The thread blocks every signal (it inherits the mask it is created with): a signal sent to the process goes to one
  // of the host's threads, as it would without this one. The server gets an empty mask anyway (posix_spawn attributes).
  sigset_t all, before;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &before);
  bool started = false;
  try {
    std::thread(run).detach();
    started = true;
  } catch (...) {
    // no thread to be had (std::system_error, or no memory for one): started below, here, as before
  }
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (!started) run();
}

void sweep_retired_spawn_servers() {
  auto& s = state();
  std::lock_guard lock(s.m);
  if (!s.retired.empty()) sweep_retired(s);
}

int take_background_start_error() {
  auto& s = state();
  std::lock_guard lock(s.m);
  return std::exchange(s.background_error, 0);
}

}  // namespace agenthost::process::detail
