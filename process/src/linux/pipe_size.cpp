#include "pipe_size.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cstdio>

namespace agenthost::process::detail {

namespace {

std::size_t pipe_max_size() noexcept {
  std::size_t v = std::size_t{1} << 20;  // the kernel's default
  if (std::FILE* f = std::fopen("/proc/sys/fs/pipe-max-size", "re")) {
    unsigned long n = 0;
    if (std::fscanf(f, "%lu", &n) == 1 && n > 0) v = n;
    std::fclose(f);
  }
  return v;
}

}  // namespace

void grow_pipe(int fd, std::size_t bytes) noexcept {
  static const std::size_t max_size = pipe_max_size();  // read once (thread-safe static initialization)
  const std::size_t want = std::min(bytes, max_size);
  const int now = ::fcntl(fd, F_GETPIPE_SZ);
  if (now < 0 || want <= static_cast<std::size_t>(now)) return;
  (void)::fcntl(fd, F_SETPIPE_SZ, static_cast<int>(want));
}

}  // namespace agenthost::process::detail
