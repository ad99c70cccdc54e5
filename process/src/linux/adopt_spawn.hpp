// Starting an agent and its own reaper without a second exec on the agent's path (internal; Linux).
//
// The exec'd reaper used to come first: posix_spawn(agenthost-reaper), then the reaper's posix_spawn(agent), so the
// agent only started after two execs. Here one vfork-style child of the host (A) marks itself a subreaper, starts the
// agent (B) as its own vfork-style child, and only then execs agenthost-reaper in adopt mode
// (`--control-fd 3 --adopt <pid>`): the subreaper mark survives execve, and B is already A's child, so the reaper
// supervises it exactly as if it had spawned it. The agent runs while its reaper is being exec'd.
//
// A and B share the host's memory (CLONE_VM | CLONE_VFORK, the way glibc's posix_spawn works): the host thread stays
// suspended until A has exec'd or exited, and A until B has. They run no user code, allocate nothing, and make raw
// system calls only (no errno, no sanitizer interceptor, no signal handler of the host can run in them).
#pragma once

#include "../posix/spawn.hpp"

#include <filesystem>

namespace agenthost::process::detail {

/// What spawn_adopted did.
struct adopted_spawn {
  int reaper_pid = -1;     ///< A: the host's child, agenthost-reaper once exec'd; -1 when nothing runs
  int agent_pid = -1;      ///< B: the agent, A's child
  int error = 0;           ///< errno of the failure (0: both run)
  bool agent_failed = false;  ///< the agent could not be started (its exec, chdir, …); else a reaper-side failure
};

/// Whether this kernel has what spawn_adopted needs (close_range, Linux >= 5.9). Checked once.
bool adopt_spawn_supported() noexcept;

/// Tests only: `true` makes adopt_spawn_supported() false, so that spawns take the reaper-first exec that kernels
/// before 5.9 use (otherwise untested on a current kernel). Atomic; affects spawns that start after the call.
void disable_adopt_spawn_for_testing(bool disabled) noexcept;

/// Starts `agent` (executable, argv, envp, working_directory, stdio descriptors; fd3 = the reaper's end of its control
/// socket) under a new agenthost-reaper at `reaper`, as described above. Both run in sessions of their own with
/// default signal dispositions; the agent has an empty signal mask and only 0, 1, 2 open; the reaper has 0-2 on
/// /dev/null (`devnull`, a descriptor >= 10) and 3, nothing else. On failure nothing is left running or unreaped.
/// Blocks for the two execs. Thread-safe (all state is per call).
adopted_spawn spawn_adopted(const std::filesystem::path& reaper, const spawn_request& agent, int devnull);

}  // namespace agenthost::process::detail
