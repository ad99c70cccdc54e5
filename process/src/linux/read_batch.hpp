// Reading many pipes in one system call (internal, Linux: io_uring).
//
// Why: the read-coalescing poller (posix/read_poller.hpp) finds, every tick, up to one ready pipe per agent — 100
// agents at 4 ms are 25,000 read()s a second. Where a system call is expensive (a paravirtualized VM with page-table
// isolation measured 1.0–1.2 µs for getppid() and ~1.5 µs for a 4 KiB pipe read(); ~270 ns a read through one
// io_uring_enter for 100 of them), the system calls alone cost several points of a core. One io_uring_enter reads
// every ready pipe of the tick.
//
// Every read is non-blocking (RWF_NOWAIT): an empty pipe gives -EAGAIN instead of a pending request, so the batch is
// complete when the call returns and no buffer is written after run() returns. Where io_uring is unavailable — a
// kernel before 5.6, a seccomp profile that forbids it (Docker's default), kernel.io_uring_disabled, or the
// environment variable AGENTHOST_IO_URING=0 — or a kernel rejects a read it cannot do without blocking, run() falls
// back to one read() per entry, for good: the results are the same.
//
// Thread safety: none (one owner; the poller runs one tick at a time).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace agenthost::process::detail {

class read_batch {
 public:
  enum class backend { automatic, plain_read };

  /// `automatic`: io_uring when the kernel allows it (set up at the first run(), used for runs of two or more).
  explicit read_batch(backend b = backend::automatic) noexcept;
  ~read_batch();
  read_batch(const read_batch&) = delete;
  read_batch& operator=(const read_batch&) = delete;

  /// Queue a read of up to `buf.size()` bytes from `fd` (a pipe or another stream without a file position) into `buf`.
  void add(int fd, std::span<char> buf);
  /// Reads every queued entry, in one system call per ring-full when io_uring is in use. results()[i] is then the i-th
  /// entry's outcome as read() gives it: the bytes read, 0 at end of file, or -errno (-EAGAIN: nothing to read).
  /// Clears the queue.
  void run();
  [[nodiscard]] std::span<const long> results() const noexcept { return results_; }
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }

  /// True once a run() set the ring up (and it was not given up since).
  [[nodiscard]] bool uses_io_uring() const noexcept { return ring_ != nullptr; }

 private:
  struct entry {
    int fd;
    std::span<char> buf;
  };
  struct ring;

  void run_plain(std::size_t from);
  bool try_open_ring() noexcept;

  backend backend_;
  bool ring_tried_ = false;
  ring* ring_ = nullptr;
  std::vector<entry> entries_;
  std::vector<long> results_;
};

}  // namespace agenthost::process::detail
