// Spawn attributes for a child that must start clean (internal; shared by the library and the reaper helper).
#pragma once

#include <signal.h>
#include <spawn.h>

namespace agenthost::process::detail {

/// A new session, every signal disposition default and an empty signal mask. The parent may have SIGINT ignored
/// (a host started in the background) or signals blocked (the reaper blocks SIGCHLD for its signalfd): exec keeps
/// both, and the agent would then ignore phase 1 of the stop. Returns posix_spawnattr_init's error.
inline int init_clean_spawn_attributes(posix_spawnattr_t& attr) {
  if (const int rc = posix_spawnattr_init(&attr); rc != 0) return rc;
  sigset_t empty, all;
  sigemptyset(&empty);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  return 0;
}

}  // namespace agenthost::process::detail
