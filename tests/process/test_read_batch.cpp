// detail::read_batch (process/src/linux/read_batch.hpp): many pipe reads in one system call. Whatever the backend
// (io_uring or one read() each), every entry's outcome must be what read() gives: the bytes, 0 at EOF, -errno.
#include "../../process/src/linux/read_batch.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

using agenthost::process::detail::read_batch;

namespace {

struct pipe_pair {
  int r = -1;
  int w = -1;
  pipe_pair() {
    int fds[2];
    if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0) {
      r = fds[0];
      w = fds[1];
    }
  }
  ~pipe_pair() {
    if (r >= 0) ::close(r);
    if (w >= 0) ::close(w);
  }
  pipe_pair(const pipe_pair&) = delete;
  pipe_pair& operator=(const pipe_pair&) = delete;
  void write_all(const std::string& s) const {
    ASSERT_EQ(::write(w, s.data(), s.size()), static_cast<ssize_t>(s.size()));
  }
  void close_writer() {
    ::close(w);
    w = -1;
  }
};

// What a scenario leaves in each pipe, and what a reader of `cap` bytes must get from it.
enum class state { data, empty, eof, data_then_eof };

std::string content_for(std::size_t i) { return "line " + std::to_string(i) + std::string(i % 37, 'x') + "\n"; }

// `n` pipes in the states cycled by `states`, read once through `batch` with `cap`-byte buffers: the outcome of each.
std::vector<std::pair<long, std::string>> read_scenario(read_batch& batch, std::size_t n, std::size_t cap,
                                                        const std::vector<state>& states) {
  std::vector<std::unique_ptr<pipe_pair>> pipes;
  std::vector<std::string> bufs(n, std::string(cap, '\0'));
  for (std::size_t i = 0; i < n; ++i) {
    pipes.push_back(std::make_unique<pipe_pair>());
    EXPECT_GE(pipes.back()->r, 0) << "pipe2: " << errno;
    switch (states[i % states.size()]) {
      case state::data: pipes[i]->write_all(content_for(i)); break;
      case state::empty: break;
      case state::eof: pipes[i]->close_writer(); break;
      case state::data_then_eof:
        pipes[i]->write_all(content_for(i));
        pipes[i]->close_writer();
        break;
    }
    batch.add(pipes[i]->r, {bufs[i].data(), bufs[i].size()});
  }
  EXPECT_EQ(batch.size(), n);
  batch.run();
  EXPECT_EQ(batch.size(), 0u);
  const auto results = batch.results();
  EXPECT_EQ(results.size(), n);
  std::vector<std::pair<long, std::string>> out;
  for (std::size_t i = 0; i < n && i < results.size(); ++i) {
    out.emplace_back(results[i], results[i] > 0 ? bufs[i].substr(0, static_cast<std::size_t>(results[i])) : "");
  }
  return out;
}

bool kernel_allows_io_uring() {
  // The same probe as the batch's: a ring can be set up (not forbidden by seccomp, the sysctl or an old kernel).
  char params[120] = {};
  const long fd = ::syscall(__NR_io_uring_setup, 2, params);
  if (fd < 0) return false;
  ::close(static_cast<int>(fd));
  return true;
}

TEST(ReadBatch, EveryEntryGetsWhatReadGivesWithEitherBackend) {
  const std::vector<state> states{state::data, state::empty, state::eof, state::data_then_eof, state::data};
  // 300 entries: more than one ring-full (128) per run, and a remainder.
  for (const std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{5}, std::size_t{300}}) {
    for (const std::size_t cap : {std::size_t{4096}, std::size_t{6}}) {  // 6: shorter than every line, a partial read
      read_batch ring_batch;
      read_batch plain_batch(read_batch::backend::plain_read);
      const auto got = read_scenario(ring_batch, n, cap, states);
      const auto want = read_scenario(plain_batch, n, cap, states);
      ASSERT_EQ(got.size(), n);
      EXPECT_EQ(got, want) << n << " entries, " << cap << "-byte buffers";
      EXPECT_FALSE(plain_batch.uses_io_uring());
      for (std::size_t i = 0; i < n; ++i) {
        const std::string line = content_for(i);
        switch (states[i % states.size()]) {
          case state::data:
          case state::data_then_eof:
            EXPECT_EQ(got[i].second, line.substr(0, cap)) << i;
            break;
          case state::empty: EXPECT_EQ(got[i].first, -EAGAIN) << i; break;
          case state::eof: EXPECT_EQ(got[i].first, 0) << i; break;
        }
      }
    }
  }
}

TEST(ReadBatch, ABadDescriptorFailsItsEntryOnly) {
  for (const auto backend : {read_batch::backend::automatic, read_batch::backend::plain_read}) {
    read_batch batch(backend);
    pipe_pair a, b;
    a.write_all("a\n");
    b.write_all("bb\n");
    std::string ba(16, '\0'), bad(16, '\0'), bb(16, '\0');
    batch.add(a.r, {ba.data(), ba.size()});
    batch.add(1 << 20, {bad.data(), bad.size()});  // far above any open descriptor
    batch.add(b.r, {bb.data(), bb.size()});
    batch.run();
    const auto r = batch.results();
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(r[0], 2);
    EXPECT_EQ(ba.substr(0, 2), "a\n");
    EXPECT_EQ(r[1], -EBADF);
    EXPECT_EQ(r[2], 3);
    EXPECT_EQ(bb.substr(0, 3), "bb\n");
  }
}

TEST(ReadBatch, AFileTheRingCannotReadWithoutBlockingIsReadPlainlyAndTheRingGivenUp) {
  // A /proc file has no non-blocking read: io_uring answers RWF_NOWAIT with -EOPNOTSUPP (as an old kernel answers an
  // unknown opcode with -EINVAL). The batch reads that entry with read() and gives the ring up for good.
  if (!kernel_allows_io_uring()) GTEST_SKIP() << "io_uring_setup fails here: plain reads only";
  read_batch batch;
  pipe_pair a, b;
  a.write_all("a\n");
  b.write_all("bb\n");
  const int proc = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(proc, 0);
  std::string ba(16, '\0'), bp(4096, '\0'), bb(16, '\0');
  batch.add(a.r, {ba.data(), ba.size()});
  batch.add(proc, {bp.data(), bp.size()});
  batch.add(b.r, {bb.data(), bb.size()});
  batch.run();
  ::close(proc);
  const auto r = batch.results();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0], 2);
  EXPECT_EQ(ba.substr(0, 2), "a\n");
  ASSERT_GT(r[1], 0) << "the /proc file was not read: " << r[1];
  EXPECT_EQ(bp.substr(0, std::to_string(::getpid()).size() + 1), std::to_string(::getpid()) + " ");
  EXPECT_EQ(r[2], 3);
  EXPECT_EQ(bb.substr(0, 3), "bb\n");
  EXPECT_FALSE(batch.uses_io_uring());
  // And it goes on, one read() each.
  a.write_all("again\n");
  batch.add(a.r, {ba.data(), ba.size()});
  batch.add(b.r, {bb.data(), bb.size()});
  batch.run();
  EXPECT_EQ(batch.results()[0], 6);
  EXPECT_EQ(batch.results()[1], -EAGAIN);
}

TEST(ReadBatch, UsesTheRingWhereTheKernelAllowsItUnlessTheEnvironmentSaysNo) {
  if (!kernel_allows_io_uring()) GTEST_SKIP() << "io_uring_setup fails here (errno " << errno << "): plain reads only";
  const auto run_two = [](read_batch& batch) {
    pipe_pair a, b;
    a.write_all("x\n");
    std::string ba(8, '\0'), bb(8, '\0');
    batch.add(a.r, {ba.data(), ba.size()});
    batch.add(b.r, {bb.data(), bb.size()});
    batch.run();
    EXPECT_EQ(batch.results()[0], 2);
    EXPECT_EQ(batch.results()[1], -EAGAIN);
  };
  {
    read_batch batch;
    EXPECT_FALSE(batch.uses_io_uring());  // not before the first run
    run_two(batch);
    EXPECT_TRUE(batch.uses_io_uring());
  }
  ASSERT_EQ(::setenv("AGENTHOST_IO_URING", "0", 1), 0);
  {
    read_batch batch;
    run_two(batch);
    EXPECT_FALSE(batch.uses_io_uring());
  }
  ::unsetenv("AGENTHOST_IO_URING");
}

}  // namespace
