// Reaping our children that could not be reaped when their child object went (internal, Linux).
//
// An exited process is not always reapable at once: while a tracer (a debugger, strace, LeakSanitizer's check at the
// process's exit) holds it, only the tracer is told of its death, and its parent can wait for it once the tracer let
// go. A destructor bounded by spawn_options::destroy_timeout cannot wait for that; dropping the pidfd would leave a
// zombie for the host's lifetime. It hands the pidfd here instead.
#pragma once

#include "../detail/unique_fd.hpp"

#include <chrono>

namespace agenthost::process::detail {

/// Waits at most `bound` until `pidfd` (our child's) has exited and can be reaped: first for the exit (the pidfd turns
/// readable), then, while a tracer still holds the dead process, every millisecond for waitid(WNOWAIT) to see it. True
/// when a reap now finds it, or when waitid refuses (ECHILD: not our child, or reaped already) — try_reap() then says
/// unknown_status. Reaps nothing itself. A negative `pidfd` is true at once.
bool wait_reapable(int pidfd, std::chrono::milliseconds bound) noexcept;

/// Takes `pidfd`, a pidfd of our own child that may still run or be held by a tracer, and reaps the child once it can
/// be, then closes the pidfd. The waiting is done by one thread per host process, started on first use; it blocks
/// every signal and retries at growing intervals (1 ms to 1 s) while it holds pidfds, and sleeps otherwise. Never
/// throws: without memory or a thread the pidfd is closed, and the child stays a zombie as it would have before.
/// Thread-safe. A fork()ed copy of the host starts afresh (its parent's children are not its own).
void reap_later(unique_fd pidfd) noexcept;

}  // namespace agenthost::process::detail
