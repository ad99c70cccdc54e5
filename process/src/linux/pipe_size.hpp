// Growing a pipe's kernel buffer (internal, Linux: F_SETPIPE_SZ).
#pragma once

#include <cstddef>

namespace agenthost::process::detail {

/// Best effort: grow the pipe `fd` to hold `bytes` (capped by /proc/sys/fs/pipe-max-size; never shrinks it). Why: a
/// read gets at most what the pipe holds — with the default 64 KiB a 256 KiB read chunk never fills, so bulk output
/// costs 4x the reads and wake-ups. Failure (EPERM past the per-user pipe quota, an old kernel) is ignored.
void grow_pipe(int fd, std::size_t bytes) noexcept;

}  // namespace agenthost::process::detail
