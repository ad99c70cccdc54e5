// agenthost_bench_process, the stop scenarios (stop-coop, stop-sigint, kill-1000): spawn the fake agent's tree, wait
// for its "ready" line, time async_stop() call → handler, then check that nothing of the tree lives.
#include "common.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <system_error>

namespace agenthost::bench::process_bench {
namespace {

/// A FIFO every process of the fake agent's tree inherits (AGENTHOST_LIVENESS_FIFO): EOF on our read end, after the
/// agent's first line, means the whole tree is gone.
class liveness_fifo {
 public:
  liveness_fifo() {
    char tmpl[] = "/tmp/agenthost-bench-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    path_ = dir_ + "/live";
    if (::mkfifo(path_.c_str(), 0600) != 0) throw std::runtime_error("mkfifo failed");
    fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0) throw std::runtime_error("open fifo failed");
  }
  ~liveness_fifo() {
    ::close(fd_);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  liveness_fifo(const liveness_fifo&) = delete;
  liveness_fifo& operator=(const liveness_fifo&) = delete;
  const std::string& path() const { return path_; }
  bool wait_eof(std::chrono::milliseconds timeout) const {
    const auto deadline = clk::now() + timeout;
    for (;;) {
      char buf[64];
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n == 0) return true;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clk::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(left.count()));
    }
  }

 private:
  std::string dir_, path_;
  int fd_ = -1;
};

struct ready_state {
  bool ready = false;
  bool eof = false;
  bool abandoned = false;  // the child is about to be destroyed: do not touch it again
};

void read_until_ready(ap::child& c, const std::shared_ptr<ready_state>& st) {
  c.async_read_lines([&c, st](error_code ec, ap::line_batch lines) {
    if (st->abandoned) return;
    if (ec) {
      st->eof = true;
      return;
    }
    for (const auto& l : lines)
      if (l.text == "ready") st->ready = true;
    if (!st->ready) read_until_ready(c, st);
  });
}

/// Spawns the fake agent with `args` and waits for its "ready" line. On failure records it in `s` and returns an
/// empty optional (the child, if any, is destroyed: its destructor kills the tree).
std::optional<ap::child> spawn_ready(bench_env& env, std::vector<std::string> args, ap::containment_kind mode,
                                     const liveness_fifo& fifo, samples& s, double* ready_ms = nullptr) {
  const auto t0 = clk::now();
  auto c = ap::child::spawn(env.io.get_executor(),
                            {.executable = kFakeAgent,
                             .args = std::move(args),
                             .env = {.set = {{kTokenName, env.token}, {"AGENTHOST_LIVENESS_FIFO", fifo.path()}}},
                             .containment = mode,
                             .reaper_path = kReaper});
  if (!c) {
    s.fail("spawn failed: " + c.error().message);
    return std::nullopt;
  }
  std::optional<ap::child> holder(std::move(*c));
  auto st = std::make_shared<ready_state>();
  read_until_ready(*holder, st);
  const bool ok = run_until(env.io, [&] { return st->ready || st->eof; }, 120s) && st->ready;
  if (ready_ms != nullptr) *ready_ms = ms_between(t0, clk::now());
  if (!ok) {
    s.fail(st->eof ? "stdout closed before \"ready\" (stderr: " + holder->stderr_tail() + ")"
                   : "no \"ready\" line within 120 s");
    st->abandoned = true;
    holder.reset();
    drain(env.io);
    kill_leftovers(env.needle());
    return std::nullopt;
  }
  return holder;
}

const char* phase_name(ap::stop_phase p) {
  switch (p) {
    case ap::stop_phase::already_gone: return "already_gone";
    case ap::stop_phase::interrupt: return "interrupt";
    case ap::stop_phase::kill: return "kill";
  }
  return "?";
}

/// Stops `c` with `policy`; returns the external stop time (call → handler) in ms, or nullopt on failure (recorded
/// in `s`). Checks afterwards that nothing of the tree lives.
std::optional<double> timed_stop(bench_env& env, std::optional<ap::child>& c, const ap::stop_policy& policy,
                                 ap::stop_phase expected, const liveness_fifo& fifo, samples& s,
                                 double* reported_ms = nullptr) {
  auto out = std::make_shared<stop_outcome>();
  const auto t0 = clk::now();
  c->async_stop(policy, [out](error_code ec, ap::stop_report r) {
    out->when = clk::now();
    out->ec = ec;
    out->report = std::move(r);
    out->done = true;
  });
  const bool finished = run_until(env.io, [&] { return out->done; }, policy.graceful_wait + policy.kill_wait + 10s);
  std::optional<double> result;
  bool ok = finished;
  if (!finished) {
    s.fail("stop did not complete");
  } else {
    result = ms_between(t0, out->when);
    if (reported_ms != nullptr) *reported_ms = to_ms(out->report.elapsed);
    if (out->ec || !out->report.survivors.empty()) {
      ok = false;
      s.fail("stop: " + (out->ec ? out->ec.message() : std::string("ok")) + ", " +
             std::to_string(out->report.survivors.size()) + " survivor(s) reported");
    } else if (out->report.phase != expected) {
      ok = false;
      s.fail(std::string("stop ended in phase ") + phase_name(out->report.phase) + ", expected " +
             phase_name(expected));
    }
  }
  // Independent of the report: every process of the tree holds the FIFO, and carries the token.
  if (!fifo.wait_eof(1s)) {
    ok = false;
    s.fail("liveness FIFO still open 1 s after the stop completed");
  }
  c.reset();
  drain(env.io);
  if (const auto n = kill_leftovers(env.needle()); n > 0) {
    if (ok) s.fail(std::to_string(n) + " process(es) with the run token alive after the stop");
    ok = false;
  }
  if (!ok) return std::nullopt;
  return result;
}

/// Runs `one(mode, measured)` for warmup + runs rounds, each round over every mode in turn.
void rounds(const config& cfg, int runs, int warmup, const std::function<void(std::size_t, bool)>& one) {
  for (int i = 0; i < warmup + runs && g_abort == 0; ++i)
    for (std::size_t m = 0; m < cfg.modes.size() && g_abort == 0; ++m) one(m, i >= warmup);
}

}  // namespace

std::vector<std::string> with_ready(std::vector<std::string> modes) {
  modes.emplace_back("ready");
  modes.emplace_back("never-exit");
  return modes;
}

void stop_scenario(const config& cfg, bench_env& env, std::vector<row>& table, const std::string& title,
                   const std::vector<std::string>& args, const ap::stop_policy& policy, ap::stop_phase expected,
                   int runs, int warmup, double limit_ms, bool inclusive, const std::string& target,
                   std::chrono::milliseconds subtract, std::vector<row>* ready_rows) {
  std::vector<samples> per_mode(cfg.modes.size()), ready(cfg.modes.size());
  std::vector<std::vector<double>> reported(cfg.modes.size());
  rounds(cfg, runs, warmup, [&](std::size_t m, bool measured) {
    samples scratch;
    samples& s = measured ? per_mode[m] : scratch;
    liveness_fifo fifo;
    double ready_ms = 0;
    auto c = spawn_ready(env, args, cfg.modes[m], fifo, s, &ready_ms);
    if (!c) return;
    double rep = 0;
    const auto t = timed_stop(env, c, policy, expected, fifo, s, &rep);
    if (!measured) return;
    ready[m].ms.push_back(ready_ms);
    if (t) {
      s.ms.push_back(*t - to_ms(subtract));
      reported[m].push_back(rep - to_ms(subtract));
    }
  });
  for (std::size_t m = 0; m < cfg.modes.size(); ++m) {
    row r{title, mode_name(cfg.modes[m]), per_mode[m], limit_ms, inclusive, target, {}};
    if (!reported[m].empty()) r.note = "report.elapsed" + std::string(subtract.count() > 0 ? " − grace" : "") +
                                       " p50 " + fmt_ms(percentile(reported[m], 50));
    table.push_back(std::move(r));
    if (ready_rows != nullptr)
      ready_rows->push_back(row{"spawn " + std::to_string(cfg.tree_size + 1) + "-process tree → \"ready\"",
                                mode_name(cfg.modes[m]), ready[m], std::nullopt, false, "(info)", {}});
  }
}

}  // namespace agenthost::bench::process_bench
