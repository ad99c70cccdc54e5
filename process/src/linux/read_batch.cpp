#include "read_batch.hpp"

#include <linux/io_uring.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>

namespace agenthost::process::detail {

namespace {

// One tick reads at most one pipe per agent: 128 covers the common case in one call; more go in several.
constexpr unsigned kRingEntries = 128;

int sys_io_uring_setup(unsigned entries, io_uring_params* p) noexcept {
  return static_cast<int>(::syscall(__NR_io_uring_setup, entries, p));
}

int sys_io_uring_enter(int fd, unsigned to_submit, unsigned min_complete, unsigned flags) noexcept {
  return static_cast<int>(::syscall(__NR_io_uring_enter, fd, to_submit, min_complete, flags, nullptr, 0));
}

long plain_read(int fd, std::span<char> buf) noexcept {
  ssize_t n;
  do n = ::read(fd, buf.data(), buf.size());
  while (n < 0 && errno == EINTR);
  return n < 0 ? -static_cast<long>(errno) : static_cast<long>(n);
}

bool io_uring_disabled_by_environment() noexcept {
  const char* v = std::getenv("AGENTHOST_IO_URING");
  return v != nullptr && (std::string_view(v) == "0" || std::string_view(v) == "off");
}

}  // namespace

// The mapped submission and completion rings (no liburing: the library's consumers then need nothing more to link).
struct read_batch::ring {
  int fd = -1;
  void* sq_map = nullptr;
  std::size_t sq_map_size = 0;
  void* cq_map = nullptr;  // == sq_map with IORING_FEAT_SINGLE_MMAP
  std::size_t cq_map_size = 0;
  io_uring_sqe* sqes = nullptr;
  std::size_t sqes_size = 0;
  unsigned* sq_head = nullptr;
  unsigned* sq_tail = nullptr;
  unsigned sq_mask = 0;
  unsigned* sq_array = nullptr;
  unsigned sq_entries = 0;
  unsigned* cq_head = nullptr;
  unsigned* cq_tail = nullptr;
  unsigned cq_mask = 0;
  io_uring_cqe* cqes = nullptr;

  ~ring() {
    if (sqes != nullptr) ::munmap(sqes, sqes_size);
    if (cq_map != nullptr && cq_map != sq_map) ::munmap(cq_map, cq_map_size);
    if (sq_map != nullptr) ::munmap(sq_map, sq_map_size);
    if (fd >= 0) ::close(fd);
  }

  bool open() noexcept {
    io_uring_params p{};
    fd = sys_io_uring_setup(kRingEntries, &p);  // the descriptor is close-on-exec: agents spawned later do not get it
    if (fd < 0) return false;
    sq_map_size = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    cq_map_size = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
    const bool single = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
    if (single) sq_map_size = cq_map_size = std::max(sq_map_size, cq_map_size);
    sq_map = ::mmap(nullptr, sq_map_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
    if (sq_map == MAP_FAILED) return (sq_map = nullptr), false;
    if (single) {
      cq_map = sq_map;
    } else {
      cq_map = ::mmap(nullptr, cq_map_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_CQ_RING);
      if (cq_map == MAP_FAILED) return (cq_map = nullptr), false;
    }
    sqes_size = p.sq_entries * sizeof(io_uring_sqe);
    void* s = ::mmap(nullptr, sqes_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
    if (s == MAP_FAILED) return false;
    sqes = static_cast<io_uring_sqe*>(s);
    auto* sq = static_cast<char*>(sq_map);
    auto* cq = static_cast<char*>(cq_map);
    sq_head = reinterpret_cast<unsigned*>(sq + p.sq_off.head);
    sq_tail = reinterpret_cast<unsigned*>(sq + p.sq_off.tail);
    sq_mask = *reinterpret_cast<unsigned*>(sq + p.sq_off.ring_mask);
    sq_array = reinterpret_cast<unsigned*>(sq + p.sq_off.array);
    sq_entries = p.sq_entries;
    cq_head = reinterpret_cast<unsigned*>(cq + p.cq_off.head);
    cq_tail = reinterpret_cast<unsigned*>(cq + p.cq_off.tail);
    cq_mask = *reinterpret_cast<unsigned*>(cq + p.cq_off.ring_mask);
    cqes = reinterpret_cast<io_uring_cqe*>(cq + p.cq_off.cqes);
    return true;
  }
};

read_batch::read_batch(backend b) noexcept : backend_(b) {}

read_batch::~read_batch() { delete ring_; }

void read_batch::add(int fd, std::span<char> buf) { entries_.push_back({fd, buf}); }

bool read_batch::try_open_ring() noexcept {
  ring_tried_ = true;
  if (backend_ != backend::automatic || io_uring_disabled_by_environment()) return false;
  auto* r = new (std::nothrow) ring;
  if (r == nullptr) return false;
  if (!r->open()) {
    delete r;
    return false;
  }
  ring_ = r;
  return true;
}

void read_batch::run_plain(std::size_t from) {
  for (std::size_t i = from; i < entries_.size(); ++i) results_[i] = plain_read(entries_[i].fd, entries_[i].buf);
}

void read_batch::run() {
  const std::size_t n = entries_.size();
  results_.assign(n, -EAGAIN);  // what an entry the ring could not read reports if a path below missed it: try again
  // Set up at the first run, whatever its size: the ring is then one of the context's descriptors from its first tick
  // on, not one that appears when a second agent happens to share a tick. A single read goes without it (no gain).
  if (n > 0 && ring_ == nullptr && !ring_tried_) try_open_ring();
  std::size_t done = 0;
  while (ring_ != nullptr && n - done >= 2) {
    ring& r = *ring_;
    const auto count = static_cast<unsigned>(std::min<std::size_t>(n - done, r.sq_entries));
    const unsigned tail = *r.sq_tail;  // only this thread writes the tail
    for (unsigned k = 0; k < count; ++k) {
      const unsigned slot = (tail + k) & r.sq_mask;
      io_uring_sqe& sqe = r.sqes[slot];
      std::memset(&sqe, 0, sizeof sqe);
      const entry& e = entries_[done + k];
      sqe.opcode = IORING_OP_READ;
      sqe.fd = e.fd;
      sqe.addr = reinterpret_cast<std::uintptr_t>(e.buf.data());
      sqe.len = static_cast<unsigned>(std::min<std::size_t>(e.buf.size(), 0x7ffff000));
      sqe.off = static_cast<std::uint64_t>(-1);  // the current position: pipes have none
      sqe.rw_flags = RWF_NOWAIT;  // never a pending request: the batch is over when the call returns
      sqe.user_data = done + k;
      r.sq_array[slot] = slot;
    }
    std::atomic_ref<unsigned>(*r.sq_tail).store(tail + count, std::memory_order_release);

    unsigned completed = 0;
    bool ring_failed = false;
    int busy = 0;
    while (completed < count) {
      const unsigned unsubmitted = tail + count - std::atomic_ref<unsigned>(*r.sq_head).load(std::memory_order_acquire);
      const int rc = sys_io_uring_enter(r.fd, unsubmitted, count - completed, IORING_ENTER_GETEVENTS);
      if (rc < 0 && errno != EINTR && ((errno != EAGAIN && errno != EBUSY) || ++busy > 3)) {
        // Nothing more will complete through this ring. What was submitted has completed already (non-blocking
        // reads are done at submission); entries without a completion are read below.
        ring_failed = true;
      }
      unsigned head = *r.cq_head;
      const unsigned cq_tail = std::atomic_ref<unsigned>(*r.cq_tail).load(std::memory_order_acquire);
      for (; head != cq_tail; ++head) {
        const io_uring_cqe& c = r.cqes[head & r.cq_mask];
        const auto i = static_cast<std::size_t>(c.user_data);
        results_[i] = c.res;
        // An old kernel without IORING_OP_READ (-EINVAL) or a file that cannot read without blocking (-EOPNOTSUPP):
        // read it the plain way, and give the ring up for good.
        if (c.res == -EINVAL || c.res == -EOPNOTSUPP) {
          results_[i] = plain_read(entries_[i].fd, entries_[i].buf);
          ring_failed = true;
        }
        ++completed;
      }
      std::atomic_ref<unsigned>(*r.cq_head).store(head, std::memory_order_release);
      if (ring_failed) break;
    }
    if (ring_failed && completed < count) {
      // Only entries never submitted can lack a completion here (see above): read them the plain way.
      const unsigned submitted = std::atomic_ref<unsigned>(*r.sq_head).load(std::memory_order_acquire) - tail;
      for (std::size_t i = done + submitted; i < done + count; ++i)
        results_[i] = plain_read(entries_[i].fd, entries_[i].buf);
    }
    done += count;
    if (ring_failed) {
      delete ring_;  // the loop ends; the rest is read the plain way below
      ring_ = nullptr;
    }
  }
  run_plain(done);
  entries_.clear();
}

}  // namespace agenthost::process::detail
