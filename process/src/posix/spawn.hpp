// posix_spawn-based launcher (internal; POSIX + glibc extensions).
//
// Why not Boost.Process v2's launcher (Boost 1.81, the version Debian 12 ships): it fork()s the multithreaded host and
// calls io_context::notify_fork in the child, which deadlocks when another thread holds the reactor mutex
// (boostorg/process #430); a failed exec leaves a zombie (#445/#447); and descriptors between 3 and its error pipe leak
// into the child (fixed only in 1.85). glibc's posix_spawn uses clone(CLONE_VM|CLONE_VFORK), runs no user code in the
// child, reports exec failure synchronously without a zombie, and has everything we need: SETSID, SETSIGMASK,
// SETSIGDEF, addchdir_np, addclosefrom_np.
#pragma once

#include "../detail/unique_fd.hpp"

#include <agenthost/process/error.hpp>
#include <agenthost/process/options.hpp>

#include <boost/system/result.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace agenthost::process::detail {

/// The environment the agent gets, as "K=V" strings.
std::vector<std::string> build_environment(const environment_options& env);

/// Resolve `exe` to an absolute path of an executable regular file, searching `path_var` for bare names.
boost::system::result<std::filesystem::path, spawn_error> resolve_executable(const std::filesystem::path& exe,
                                                                            const std::string& path_var);

/// Where the reaper helper is, or an empty path when it cannot be found.
std::filesystem::path find_reaper(const std::filesystem::path& configured);

struct spawn_request {
  std::filesystem::path executable;    // absolute
  std::vector<std::string> argv;       // argv[0] included
  std::vector<std::string> envp;
  std::filesystem::path working_directory;  // empty = inherit
  int stdin_fd = -1;                   // child ends; dup'ed to 0, 1, 2
  int stdout_fd = -1;
  int stderr_fd = -1;
  int fd3 = -1;                        // dup'ed to 3 when >= 0 (the reaper's control socket)
};

/// posix_spawn with a new session, default signal dispositions, an empty signal mask, and only 0, 1, 2 (and 3 when
/// requested) open in the child. Returns the pid, or -1 with `error` set to the errno.
int spawn_process(const spawn_request& request, int& error);

/// A descriptor number >= 10 with FD_CLOEXEC, so that dup2(fd, 0..3) in the child is never a no-op that would keep
/// close-on-exec set (a host may run with 0, 1 or 2 closed). Closes `fd`.
unique_fd move_above_stdio(unique_fd fd);

}  // namespace agenthost::process::detail
