// Spawning with the host's descriptors all but exhausted: RLIMIT_NOFILE just above what is open, raised one at a
// time, so that each descriptor the spawn needs (its pipes, the reaper's control socket, the pidfd of the process it
// started, …) is in turn the first it cannot have. Each spawn succeeds or fails with a specific error, and leaves no
// process, zombie or descriptor behind.
#include "test_util.hpp"

#include <agenthost/process/child.hpp>

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <set>

using namespace agenthost;
using namespace agenthost::process;
using namespace agenthost::test;

namespace {

struct limit_case {
  containment_kind containment;
  const char* name;
};

class SpawnUnderDescriptorLimit : public ::testing::TestWithParam<limit_case> {
 protected:
  void TearDown() override { kill_leftovers("AGENTHOST_TEST_TOKEN=" + token); }

  spawn_options options() const {
    return {.executable = AGENTHOST_FAKE_AGENT,
            .args = {"ready", "never-exit"},
            .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}},
            .containment = GetParam().containment,
            .reaper_path = AGENTHOST_REAPER,
            .reaper_server = false};  // a server's own descriptors would come and go between the counts
  }

  void stop(child& c) {
    bool done = false;
    c.async_stop(stop_policy::kill_now(), [&](boost::system::error_code, stop_report r) {
      EXPECT_TRUE(r.survivors.empty());
      done = true;
    });
    EXPECT_TRUE(run_until(io, [&] { return done; }));
  }

  asio::io_context io;
  std::string token = random_token();
};

// This project's AddressSanitizer builds also run UndefinedBehaviorSanitizer, whose vptr check asks whether an
// object's memory is readable by writing it into a pipe (sanitizer_common's IsAccessibleMemoryRange): with no
// descriptor left, every polymorphic access (a Boost error category's, when a spawn reports its error) is "invalid".
#if defined(__SANITIZE_ADDRESS__)
#define AGENTHOST_UBSAN_VPTR_NEEDS_DESCRIPTORS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AGENTHOST_UBSAN_VPTR_NEEDS_DESCRIPTORS 1
#endif
#endif

TEST_P(SpawnUnderDescriptorLimit, EverySpawnSucceedsOrFailsCleanly) {
#ifdef AGENTHOST_UBSAN_VPTR_NEEDS_DESCRIPTORS
  GTEST_SKIP() << "UndefinedBehaviorSanitizer's vptr check needs a pipe: it cannot run out of descriptors";
#endif
  {
    // The io_context's own descriptors (epoll, eventfd, timerfd) come with its first I/O object: before the counts.
    auto warm = child::spawn(io.get_executor(), options());
    ASSERT_TRUE(warm) << warm.error().message;
    stop(*warm);
  }
  io.restart();
  io.poll();
  const int fds_before = open_fd_count();
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  struct restore {
    rlimit limit;
    ~restore() { ::setrlimit(RLIMIT_NOFILE, &limit); }
  } restore_limit{saved};
  const int lowest_free = ::dup(0);
  ASSERT_GE(lowest_free, 0);
  ::close(lowest_free);

  std::set<std::string> errors;
  int failures = 0;
  bool last_succeeded = false;
  for (int extra = 0; extra <= 24; ++extra) {
    rlimit tight = saved;
    tight.rlim_cur = static_cast<rlim_t>(lowest_free + extra);
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
    std::string outcome = "spawned";
    {
      auto c = child::spawn(io.get_executor(), options());
      ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
      last_succeeded = c.has_value();
      if (c) {
        // It may still fail to start for want of descriptors (its reaper runs under the same limit): whatever it
        // does, the stop ends its tree.
        stop(*c);
      } else {
        ++failures;
        outcome = c.error().message;
        EXPECT_FALSE(outcome.empty());
        EXPECT_EQ(c.error().code, errc::spawn_failed) << outcome;
        errors.insert(outcome);
      }
    }
    // The child is gone; its internal operations end with it (they hold its state until they ran).
    io.restart();
    io.poll();
    EXPECT_EQ(open_fd_count(), fds_before) << "limit " << lowest_free + extra << ": a descriptor was left open ("
                                           << outcome << ")";
    EXPECT_EQ(zombie_children(), 0) << "limit " << lowest_free + extra;
    EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty()) << "limit " << lowest_free + extra;
  }
  EXPECT_GE(failures, 2) << "the limits never bit: the test tested nothing";
  EXPECT_TRUE(last_succeeded) << "24 free descriptors were not enough for a spawn";
  // Each names the agent, what the descriptor was for, and why it could not be had.
  EXPECT_GE(errors.size(), 2u);
  for (const auto& e : errors) {
    EXPECT_NE(e.find("spawning '" AGENTHOST_FAKE_AGENT "': "), std::string::npos) << e;
    EXPECT_NE(e.find(std::strerror(EMFILE)), std::string::npos) << e;
    EXPECT_EQ(e.find("Linux >= 5.3"), std::string::npos) << "a descriptor limit reported as an old kernel: " << e;
  }
}

INSTANTIATE_TEST_SUITE_P(Containments, SpawnUnderDescriptorLimit,
                         ::testing::Values(limit_case{containment_kind::session, "session"},
                                           limit_case{containment_kind::reaper, "reaper"}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

}  // namespace
