// Linux's limits on what execve() accepts (internal). Checked before spawning so that a command line the kernel
// would refuse is an errc::argument_list_too_long naming the culprit, not a bare E2BIG from deep inside a spawn (or
// from the reaper, after the spawn already "succeeded").
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace agenthost::process::detail {

/// The limits of this process: MAX_ARG_STRLEN (32 pages) per string, and the kernel's bprm_stack_limits() total
/// (min(RLIMIT_STACK / 4, 6 MiB), at least 128 KiB) for all strings plus their pointers.
struct exec_limits {
  std::size_t max_string = 0;
  std::size_t max_total = 0;
  static exec_limits current();
};

/// nullopt when `argv` and `envp` (plus `extra_strings` more strings of `extra_bytes` in all, e.g. the reaper's own
/// arguments in front of the agent's) fit; otherwise a message naming the argument or variable, its size and the
/// limit. argv[0] is named "argv[0]", argv[i] "argument i", an environment string by its variable name.
std::optional<std::string> check_exec_limits(const std::vector<std::string>& argv,
                                             const std::vector<std::string>& envp, std::size_t extra_strings,
                                             std::size_t extra_bytes, const exec_limits& limits = exec_limits::current());

}  // namespace agenthost::process::detail
