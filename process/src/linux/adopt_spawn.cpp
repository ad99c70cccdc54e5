// The agent first, then its reaper: see adopt_spawn.hpp.
#include "adopt_spawn.hpp"

#include "../detail/reaper_protocol.hpp"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <vector>

#ifdef __GLIBC__
extern "C" int __clone(int (*fn)(void*), void* stack, int flags, void* arg, ...);  // NOLINT
#endif

namespace agenthost::process::detail {
namespace {

// The kernel's struct sigaction on the architectures below starts with the handler and the flags; for SIG_DFL
// without flags every other field (restorer, mask) is zero too, wherever it sits.
struct kernel_sigaction {
  void* handler = nullptr;
  unsigned long flags = 0;
  unsigned long rest[4] = {};
};
constexpr unsigned long kernel_sigset_size = 8;  // _NSIG / 8 on x86-64, arm64 and riscv64

#if defined(__x86_64__) || defined(__aarch64__) || (defined(__riscv) && __riscv_xlen == 64)
constexpr bool architecture_supported = true;
#else
constexpr bool architecture_supported = false;
#endif

// Everything A and B read or write: prepared by the host, which is suspended while they run.
struct shared_block {
  const char* agent_path;
  char* const* agent_argv;
  char* const* agent_envp;
  const char* agent_cwd;  // nullptr: inherit
  int stdio[3];
  int control;
  int devnull;
  const char* reaper_path;
  char* const* reaper_argv;  // its 5th entry is pid_text
  char* const* reaper_envp;
  void* agent_stack_top;
  char pid_text[16];
  // Results.
  int agent_pid;
  int error;
  bool agent_failed;
};

// Raw system calls only: the libc wrappers of several of these are intercepted by the sanitizers, whose state belongs
// to the (suspended) host thread. syscall(2) itself writes only errno, which is that thread's too and read right away.
#define AGENTHOST_CHILD_CODE __attribute__((no_sanitize("address", "thread", "undefined")))

// glibc's clone(3), called under its own name: ThreadSanitizer (GCC 12's libtsan) intercepts `clone` and treats every
// call as a fork — in a CLONE_VM child its fork bookkeeping rewrites the parent's own sanitizer state (lost mutexes,
// false races). The exported alias __clone is the same function without the interceptor.
AGENTHOST_CHILD_CODE int launch_clone(int (*fn)(void*), void* stack, int flags, void* arg) {
#ifdef __GLIBC__
  return __clone(fn, stack, flags, arg);
#else
  return ::clone(fn, stack, flags, arg);
#endif
}

AGENTHOST_CHILD_CODE long sys_errno(long rc) { return rc < 0 ? errno : 0; }

[[noreturn]] AGENTHOST_CHILD_CODE void sys_exit(int code) {
  for (;;) ::syscall(SYS_exit_group, code);
}

// B: becomes the agent. Its dispositions are A's, all default already, so no handler of the host can run once the
// mask opens.
AGENTHOST_CHILD_CODE int agent_side(void* arg) {
  auto* b = static_cast<shared_block*>(arg);
  long e = sys_errno(::syscall(SYS_setsid));
  for (int fd = 0; fd <= 2 && e == 0; ++fd) e = sys_errno(::syscall(SYS_dup3, b->stdio[fd], fd, 0));
  if (e == 0) e = sys_errno(::syscall(SYS_close_range, 3U, ~0U, 0U));
  if (e == 0 && b->agent_cwd != nullptr) e = sys_errno(::syscall(SYS_chdir, b->agent_cwd));
  if (e == 0) {
    const unsigned long empty = 0;
    ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &empty, nullptr, kernel_sigset_size);
    e = sys_errno(::syscall(SYS_execve, b->agent_path, b->agent_argv, b->agent_envp));
  }
  b->error = static_cast<int>(e != 0 ? e : EINVAL);
  b->agent_failed = true;
  sys_exit(127);
}

AGENTHOST_CHILD_CODE void reap(long pid) {
  while (::syscall(SYS_wait4, pid, nullptr, 0, nullptr) < 0 && errno == EINTR) {
  }
}

// A: a subreaper that starts B, then becomes agenthost-reaper (adopt mode). Every signal stays blocked until the
// reaper has its signalfd (a SIGTERM meanwhile waits pending, across the exec).
AGENTHOST_CHILD_CODE int reaper_side(void* arg) {
  auto* b = static_cast<shared_block*>(arg);
  // Every disposition to default, in this process's own copy of the table: a host's handler must never run on these
  // stacks, and a host's SIG_IGN of SIGCHLD (or SA_NOCLDWAIT) would let the kernel reap the agent — its exit status
  // lost — before the reaper resets it after its exec.
  const kernel_sigaction dfl{};
  for (long sig = 1; sig < 65; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) ::syscall(SYS_rt_sigaction, sig, &dfl, nullptr, kernel_sigset_size);
  long e = sys_errno(::syscall(SYS_setsid));
  if (e == 0) e = sys_errno(::syscall(SYS_prctl, PR_SET_CHILD_SUBREAPER, 1UL, 0UL, 0UL, 0UL));
  if (e != 0) {
    b->error = static_cast<int>(e);
    sys_exit(127);
  }
  // glibc's clone(3) wrapper is a few instructions around the system call; a raw clone cannot switch stacks from C.
  const int agent = launch_clone(agent_side, b->agent_stack_top, CLONE_VM | CLONE_VFORK | SIGCHLD, b);
  if (agent < 0) {
    b->error = errno;
    sys_exit(127);
  }
  if (b->agent_failed) {
    reap(agent);
    sys_exit(127);
  }
  b->agent_pid = agent;
  char digits[16];
  int n = 0;
  for (unsigned v = static_cast<unsigned>(agent); v != 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  for (int i = 0; i < n; ++i) b->pid_text[i] = digits[n - 1 - i];
  b->pid_text[n] = '\0';

  e = sys_errno(::syscall(SYS_dup3, b->control, reaper_control_fd, 0));
  for (int fd = 0; fd <= 2 && e == 0; ++fd) e = sys_errno(::syscall(SYS_dup3, b->devnull, fd, 0));
  if (e == 0) e = sys_errno(::syscall(SYS_close_range, 4U, ~0U, 0U));
  if (e == 0) e = sys_errno(::syscall(SYS_execve, b->reaper_path, b->reaper_argv, b->reaper_envp));
  // No reaper: the agent must not outlive this failure. It has only just exec'd, in its own session and group.
  b->error = static_cast<int>(e != 0 ? e : EINVAL);
  b->agent_pid = -1;
  ::syscall(SYS_kill, -static_cast<long>(agent), SIGKILL);
  ::syscall(SYS_kill, static_cast<long>(agent), SIGKILL);
  reap(agent);
  sys_exit(127);
}

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

std::atomic<bool> disabled_for_testing{false};

}  // namespace

bool adopt_spawn_supported() noexcept {
  // close_range(~0, ~0) closes nothing; it fails with ENOSYS before Linux 5.9.
  static const bool supported = architecture_supported && ::syscall(SYS_close_range, ~0U, ~0U, 0U) == 0;
  return supported && !disabled_for_testing.load(std::memory_order_relaxed);
}

void disable_adopt_spawn_for_testing(bool disabled) noexcept {
  disabled_for_testing.store(disabled, std::memory_order_relaxed);
}

adopted_spawn spawn_adopted(const std::filesystem::path& reaper, const spawn_request& r, int devnull) {
  if (!adopt_spawn_supported()) return {.error = ENOSYS};
  std::vector<char*> argv = c_strings(r.argv), envp = c_strings(r.envp);
  char* reaper_envp[] = {nullptr};

  shared_block b{};
  char* reaper_argv[] = {const_cast<char*>(reaper_program_name), const_cast<char*>("--control-fd"),
                         const_cast<char*>("3"), const_cast<char*>("--adopt"), b.pid_text, nullptr};
  b.agent_path = r.executable.c_str();
  b.agent_argv = argv.data();
  b.agent_envp = envp.data();
  b.agent_cwd = r.working_directory.empty() ? nullptr : r.working_directory.c_str();
  b.stdio[0] = r.stdin_fd;
  b.stdio[1] = r.stdout_fd;
  b.stdio[2] = r.stderr_fd;
  b.control = r.fd3;
  b.devnull = devnull;
  b.reaper_path = reaper.c_str();
  b.reaper_argv = reaper_argv;
  b.reaper_envp = reaper_envp;
  b.agent_pid = -1;

  // One mapping, two stacks, each above a guard page: [guard | B's stack | guard | A's stack].
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t stack_size = 64 * 1024;
  const std::size_t total = 2 * (page + stack_size);
  void* map = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (map == MAP_FAILED) return {.error = errno};
  auto* base = static_cast<char*>(map);
  ::mprotect(base, page, PROT_NONE);
  ::mprotect(base + page + stack_size, page, PROT_NONE);
  b.agent_stack_top = base + page + stack_size;
  void* reaper_stack_top = base + total;

  // All signals blocked across the clone: a handler of the host must not run on these stacks. A and B inherit the
  // mask; B clears it, the reaper sets its own.
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const int saved_errno = errno;
  const int pid = launch_clone(reaper_side, reaper_stack_top, CLONE_VM | CLONE_VFORK | SIGCHLD, &b);
  const int clone_errno = pid < 0 ? errno : 0;
  errno = saved_errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::munmap(map, total);

  if (pid < 0) return {.error = clone_errno};
  if (b.error != 0) {
    // A exited (it has reaped B); collect it unless the kernel did (a host that ignores SIGCHLD).
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return {.error = b.error, .agent_failed = b.agent_failed};
  }
  return {.reaper_pid = pid, .agent_pid = b.agent_pid};
}

}  // namespace agenthost::process::detail
