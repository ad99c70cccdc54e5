// agenthost_bench_process — how fast agenthost::process stops process trees and delivers a child's first line.
//
// One run measures every scenario and prints one Markdown table (p50 / p95 / max over N runs, target, failures,
// verdict). The child program is the fake agent (fixtures/fake_agent); every process it creates carries this run's
// AGENTHOST_BENCH_TOKEN in its environment and holds a per-run liveness FIFO (see fixtures/fake_agent/README.md).
//
//   stop-coop    `fake_agent ready never-exit`, stop_policy::ctrl_c() ("\x03" on stdin + SIGINT to the group).
//                Metric: async_stop() call → its handler.                            Target: p95 < 50 ms.
//   stop-sigint  `fake_agent ignore-sigint spawn-children 10 ready never-exit` (11 processes), ctrl_c() with the
//                default graceful_wait (2 s): the tree survives phase 1 and is SIGKILLed.
//                Metric: async_stop() call → its handler.                            Target: p95 ≤ grace + 300 ms.
//   kill-1000    `fake_agent ignore-all spawn-children 1000 ready never-exit` (1,001 processes), graceful_wait 100 ms.
//                Metric: kill phase = (async_stop() call → handler) − graceful_wait. Target: p95 < 500 ms.
//                Also reported (no target): spawn of that tree → its "ready" line.
//   first-line   `fake_agent stdout x`: spawn → first stdout line delivered. Library (child::spawn → async_read_lines
//                handler, reaper and session containment) beside a bare pipe2 + posix_spawn + blocking read() of the
//                same program, interleaved run by run so that machine noise hits all three alike. Ratio = lib / bare.
//
// Timing: std::chrono::steady_clock (CLOCK_MONOTONIC) read in this process around public API calls only.
// Percentiles: nearest rank (p95 of 5 runs is the max; of 25 runs the 24th value).
// A run fails (column "fail") when: spawning or the "ready" line fails; the stop completes with an error or lists
// survivors; the stop ends in another phase than expected; the liveness FIFO is not at EOF within 1 s after the stop
// handler ran (some process of the tree still lives); a process carrying the run's token is still alive afterwards.
// Only checks outside the timed region; leftovers are SIGKILLed so one bad run cannot poison the next.
//
// Exit status: 0; 1 when any run failed; with --strict also 1 when a target is missed; 2 usage; 130 interrupted.
#include <agenthost/process/child.hpp>
#include <agenthost/process/spawn_server.hpp>

#include <boost/asio/io_context.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

namespace asio = boost::asio;
namespace ap = agenthost::process;
using boost::system::error_code;
using clk = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr const char* kFakeAgent = AGENTHOST_FAKE_AGENT;
constexpr const char* kReaper = AGENTHOST_REAPER;
constexpr const char* kTokenName = "AGENTHOST_BENCH_TOKEN";

volatile std::sig_atomic_t g_abort = 0;
extern "C" void on_abort_signal(int) { g_abort = 1; }

double ms_between(clk::time_point a, clk::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
double to_ms(std::chrono::nanoseconds d) { return std::chrono::duration<double, std::milli>(d).count(); }

// ---- configuration --------------------------------------------------------------------------------------------------

struct config {
  int runs = 25;        // per light scenario and containment mode
  int heavy_runs = 5;   // kill-1000
  int warmup = 2;       // discarded runs before stop-coop and first-line
  int tree_size = 1000;
  std::chrono::milliseconds sigint_grace{2000};
  std::chrono::milliseconds kill_grace{100};
  std::vector<ap::containment_kind> modes{ap::containment_kind::reaper, ap::containment_kind::session};
  std::set<std::string> only;  // empty: every scenario
  bool quick = false;
  bool strict = false;
  bool wants(const std::string& s) const { return only.empty() || only.contains(s); }
};

const char* mode_name(ap::containment_kind k) {
  switch (k) {
    case ap::containment_kind::reaper: return "reaper";
    case ap::containment_kind::session: return "session";
    case ap::containment_kind::automatic: return "auto";
  }
  return "?";
}

void usage(std::ostream& os) {
  os << "usage: agenthost_bench_process [--quick] [--runs N] [--heavy-runs N] [--warmup N] [--tree-size K]\n"
        "                               [--sigint-grace-ms MS] [--kill-grace-ms MS]\n"
        "                               [--containment reaper|session|both] [--only LIST] [--strict]\n"
        "  --runs N             measured runs per light scenario and containment mode (default 25)\n"
        "  --heavy-runs N       runs of the 1,000-process tree per containment mode (default 5)\n"
        "  --warmup N           discarded runs before stop-coop and first-line (default 2)\n"
        "  --quick              CI mode: --runs 5 --heavy-runs 1 --warmup 1\n"
        "  --tree-size K        children of the big tree (default 1000, at most 2000)\n"
        "  --sigint-grace-ms MS graceful_wait of stop-sigint (default 2000, the stop_policy default)\n"
        "  --kill-grace-ms MS   graceful_wait of kill-1000 (default 100)\n"
        "  --containment M      containment of the stop scenarios and library first-line rows (default both)\n"
        "  --only LIST          comma-separated subset of: stop-coop,stop-sigint,kill-1000,first-line\n"
        "  --strict             exit 1 when a target is missed (default: only when a run fails)\n";
}

std::optional<config> parse_args(int argc, char** argv) {
  config c;
  std::optional<int> runs, heavy, warm;
  auto number = [&](int& i, long lo, long hi) -> std::optional<long> {
    if (i + 1 >= argc) return std::nullopt;
    char* end = nullptr;
    const long v = std::strtol(argv[++i], &end, 10);
    if (*end != '\0' || v < lo || v > hi) return std::nullopt;
    return v;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::optional<long> v;
    if (a == "--help" || a == "-h") {
      usage(std::cout);
      std::exit(0);
    } else if (a == "--quick") {
      c.quick = true;
    } else if (a == "--strict") {
      c.strict = true;
    } else if (a == "--runs") {
      if (!(v = number(i, 1, 100000))) return std::nullopt;
      runs = static_cast<int>(*v);
    } else if (a == "--heavy-runs") {
      if (!(v = number(i, 1, 100000))) return std::nullopt;
      heavy = static_cast<int>(*v);
    } else if (a == "--warmup") {
      if (!(v = number(i, 0, 1000))) return std::nullopt;
      warm = static_cast<int>(*v);
    } else if (a == "--tree-size") {
      if (!(v = number(i, 1, 2000))) return std::nullopt;
      c.tree_size = static_cast<int>(*v);
    } else if (a == "--sigint-grace-ms") {
      if (!(v = number(i, 0, 600000))) return std::nullopt;
      c.sigint_grace = std::chrono::milliseconds{*v};
    } else if (a == "--kill-grace-ms") {
      if (!(v = number(i, 0, 600000))) return std::nullopt;
      c.kill_grace = std::chrono::milliseconds{*v};
    } else if (a == "--containment") {
      if (i + 1 >= argc) return std::nullopt;
      const std::string m = argv[++i];
      if (m == "reaper") {
        c.modes = {ap::containment_kind::reaper};
      } else if (m == "session") {
        c.modes = {ap::containment_kind::session};
      } else if (m != "both") {
        return std::nullopt;
      }
    } else if (a == "--only") {
      if (i + 1 >= argc) return std::nullopt;
      std::stringstream ss(argv[++i]);
      std::string item;
      while (std::getline(ss, item, ',')) {
        if (item != "stop-coop" && item != "stop-sigint" && item != "kill-1000" && item != "first-line")
          return std::nullopt;
        c.only.insert(item);
      }
    } else {
      return std::nullopt;
    }
  }
  if (c.quick) {
    c.runs = 5;
    c.heavy_runs = 1;
    c.warmup = 1;
  }
  if (runs) c.runs = *runs;
  if (heavy) c.heavy_runs = *heavy;
  if (warm) c.warmup = *warm;
  return c;
}

// ---- results --------------------------------------------------------------------------------------------------------

struct samples {
  std::vector<double> ms;
  int failures = 0;
  std::vector<std::string> notes;  // the first few failure reasons
  void fail(std::string why) {
    ++failures;
    if (notes.size() < 4) notes.push_back(std::move(why));
  }
};

// Nearest rank: the smallest value with at least p % of the samples at or below it.
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

struct row {
  std::string scenario;
  std::string mode;
  samples s;
  std::optional<double> p95_limit_ms;  // target: p95 < limit (or ≤ when inclusive)
  bool inclusive = false;
  std::string target;                  // as printed
  std::string note;                    // extra column
};

std::string fmt_ms(double v) {
  if (std::isnan(v)) return "–";
  char buf[32];
  if (v >= 100)
    std::snprintf(buf, sizeof buf, "%.0f ms", v);
  else if (v >= 10)
    std::snprintf(buf, sizeof buf, "%.1f ms", v);
  else
    std::snprintf(buf, sizeof buf, "%.2f ms", v);
  return buf;
}

// ---- process hygiene (outside every timed region) -------------------------------------------------------------------

/// Live processes (not zombies) whose environment contains `needle` ("NAME=value").
std::vector<int> processes_with_env(const std::string& needle) {
  std::vector<int> pids;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return pids;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == ::getpid()) continue;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    if (close == std::string::npos || close + 2 >= line.size() || line[close + 2] == 'Z') continue;
    std::ifstream env("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    std::string item;
    while (std::getline(env, item, '\0')) {
      if (item == needle) {
        pids.push_back(static_cast<int>(pid));
        break;
      }
    }
  }
  ::closedir(d);
  return pids;
}

/// SIGKILLs what carries the token; returns how many were found.
std::size_t kill_leftovers(const std::string& needle) {
  const auto pids = processes_with_env(needle);
  for (int pid : pids) ::kill(pid, SIGKILL);
  return pids.size();
}

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

// ---- driving the library ------------------------------------------------------------------------------------------

/// Runs `io` until `done()`, `timeout` or an interrupt of the benchmark; returns done().
bool run_until(asio::io_context& io, const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = clk::now() + timeout;
  while (!done()) {
    if (g_abort != 0 || clk::now() >= deadline) return false;
    if (io.stopped()) io.restart();
    if (io.run_one_for(50ms) == 0 && io.stopped()) std::this_thread::sleep_for(1ms);  // nothing pending at all
  }
  return true;
}

/// Runs the handlers already queued (completions posted by a destroyed child).
void drain(asio::io_context& io) {
  io.restart();
  io.poll();
}

struct bench_env {
  asio::io_context& io;
  std::string token;
  std::string needle() const { return std::string(kTokenName) + "=" + token; }
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

struct stop_outcome {
  bool done = false;
  error_code ec;
  ap::stop_report report;
  clk::time_point when{};
};

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

// ---- scenarios ------------------------------------------------------------------------------------------------------

std::vector<std::string> with_ready(std::vector<std::string> modes) {
  modes.emplace_back("ready");
  modes.emplace_back("never-exit");
  return modes;
}

void progress(const std::string& what) { std::cerr << "[bench] " << what << std::endl; }

/// Runs `one(mode, measured)` for warmup + runs rounds, each round over every mode in turn.
void rounds(const config& cfg, int runs, int warmup, const std::function<void(std::size_t, bool)>& one) {
  for (int i = 0; i < warmup + runs && g_abort == 0; ++i)
    for (std::size_t m = 0; m < cfg.modes.size() && g_abort == 0; ++m) one(m, i >= warmup);
}

void stop_scenario(const config& cfg, bench_env& env, std::vector<row>& table, const std::string& title,
                   const std::vector<std::string>& args, const ap::stop_policy& policy, ap::stop_phase expected,
                   int runs, int warmup, double limit_ms, bool inclusive, const std::string& target,
                   std::chrono::milliseconds subtract, std::vector<row>* ready_rows = nullptr) {
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

/// Bare baseline: pipe2 + posix_spawn + blocking read() until the first '\n'. Returns ms or nullopt (recorded).
std::optional<double> bare_first_line(const bench_env& env, samples& s) {
  std::vector<std::string> args{kFakeAgent, "stdout", "x"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) envs.emplace_back(*e);
  envs.push_back(env.needle());
  std::vector<char*> envp;
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);

  const auto t0 = clk::now();
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    s.fail(std::string("pipe2: ") + std::strerror(errno));
    return std::nullopt;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, kFakeAgent, &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(p[1]);
  std::string got;
  if (rc == 0) {
    char buf[256];
    while (got.find('\n') == std::string::npos) {
      const ssize_t n = ::read(p[0], buf, sizeof buf);
      if (n > 0) {
        got.append(buf, static_cast<std::size_t>(n));
      } else if (n < 0 && errno == EINTR && g_abort == 0) {
        continue;
      } else {
        break;
      }
    }
  }
  const auto t1 = clk::now();
  ::close(p[0]);
  if (rc != 0) {
    s.fail(std::string("posix_spawn: ") + std::strerror(rc));
    return std::nullopt;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got != "x\n") {
    s.fail("bare: unexpected output '" + got + "'");
    return std::nullopt;
  }
  return ms_between(t0, t1);
}

struct line_state {
  bool done = false;
  error_code ec;
  std::string text;
  clk::time_point when{};
};

/// The library's reaper spawn server of this process (our child running `agenthost-reaper --server`), or -1.
int find_spawn_server() {
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return -1;
  int found = -1;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state = 0;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid != ::getpid() || state == 'Z') continue;
    std::ifstream cmd("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    if (all.find(std::string("--server\0", 9)) != std::string::npos) found = static_cast<int>(pid);
  }
  ::closedir(d);
  return found;
}

/// Waits (polling /proc, bounded) until this process's spawn server runs and has a child: its idle reaper.
bool server_has_idle_reaper(std::chrono::milliseconds timeout) {
  const auto deadline = clk::now() + timeout;
  while (clk::now() < deadline) {
    if (const int server = find_spawn_server(); server > 0) {
      std::ifstream children("/proc/" + std::to_string(server) + "/task/" + std::to_string(server) + "/children");
      int child = 0;
      if (children >> child && child > 0) return true;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return false;
}

/// SIGKILLs the spawn server and waits (≤ 5 s) until it is dead, so that the next spawn starts a new one.
void kill_spawn_server() {
  const int pid = find_spawn_server();
  if (pid <= 0) return;
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return;
  ::syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0);
  pollfd p{fd, POLLIN, 0};
  ::poll(&p, 1, 5000);
  ::close(fd);
}

/// How a first-line row spawns.
struct first_line_variant {
  const char* label;
  ap::containment_kind mode;
  bool reaper_server = true;
  bool fresh_server = false;  // kill the spawn server before the run: the timed spawn starts a new one
  bool prestart = false;      // after that kill, prestart_spawn_server() (untimed) before the timed spawn
  bool prestart_settled = false;  // … and wait (untimed) until the server has forked its first idle reaper
};

/// Library: child::spawn → the async_read_lines handler with the first line. Returns ms or nullopt (recorded).
std::optional<double> lib_first_line(bench_env& env, const first_line_variant& v, samples& s) {
  if (v.fresh_server) kill_spawn_server();  // untimed
  // Untimed, as a host's start-up would do it. Without `prestart_settled` the timed spawn follows at once (the server
  // may still be starting and forking its first idle reaper: the worst case, a host that spawns right after
  // prestarting); with it, the server is ready (a host that prestarted at its start-up, before its first agent).
  if (v.prestart) {
    if (auto r = ap::prestart_spawn_server(kReaper); !r) {
      s.fail("prestart_spawn_server: " + r.error().message);
      return std::nullopt;
    }
    if (v.prestart_settled && !server_has_idle_reaper(2s)) {
      s.fail("the prestarted server forked no idle reaper within 2 s");
      return std::nullopt;
    }
  }
  const auto t0 = clk::now();
  auto c = ap::child::spawn(env.io.get_executor(), {.executable = kFakeAgent,
                                                    .args = {"stdout", "x"},
                                                    .env = {.set = {{kTokenName, env.token}}},
                                                    .containment = v.mode,
                                                    .reaper_path = kReaper,
                                                    .reaper_server = v.reaper_server});
  if (!c) {
    s.fail("spawn failed: " + c.error().message);
    return std::nullopt;
  }
  auto st = std::make_shared<line_state>();
  c->async_read_lines([st](error_code ec, ap::line_batch lines) {
    st->when = clk::now();
    st->ec = ec;
    if (!ec && !lines.empty()) st->text = std::string(lines.front().text);
    st->done = true;
  });
  const bool finished = run_until(env.io, [&] { return st->done; }, 10s);
  std::optional<double> result;
  if (!finished) {
    s.fail("no first line within 10 s");
  } else if (st->ec || st->text != "x") {
    s.fail("first line: " + (st->ec ? st->ec.message() : "'" + st->text + "'"));
  } else {
    result = ms_between(t0, st->when);
  }
  // Untimed: make sure the (short-lived) tree is gone before the next run.
  if (finished) {
    auto out = std::make_shared<stop_outcome>();
    c->async_stop(ap::stop_policy::kill_now(), [out](error_code ec, ap::stop_report r) {
      out->ec = ec;
      out->report = std::move(r);
      out->done = true;
    });
    if (!run_until(env.io, [&] { return out->done; }, 10s) || out->ec) {
      s.fail("cleanup stop failed");
      result.reset();
    }
  }
  { auto gone = std::move(*c); }
  drain(env.io);
  if (const auto n = kill_leftovers(env.needle()); n > 0) {
    s.fail(std::to_string(n) + " process(es) with the run token alive after the run");
    result.reset();
  }
  return result;
}

void first_line_scenario(const config& cfg, bench_env& env, std::vector<row>& table) {
  std::vector<first_line_variant> variants;
  for (auto mode : cfg.modes) {
    if (mode == ap::containment_kind::reaper) {
      variants.push_back({"reaper, exec per agent", mode, false, false});
      variants.push_back({"reaper, server (steady)", mode, true, false});
      variants.push_back({"reaper, server (first spawn)", mode, true, true});
      variants.push_back({"reaper, server (first spawn right after prestart)", mode, true, true, true});
      variants.push_back({"reaper, server (first spawn, prestarted)", mode, true, true, true, true});
    } else {
      variants.push_back({mode_name(mode), mode});
    }
  }
  samples bare;
  std::vector<samples> lib(variants.size());
  for (int i = 0; i < cfg.warmup + cfg.runs && g_abort == 0; ++i) {
    const bool measured = i >= cfg.warmup;
    samples scratch;
    if (auto t = bare_first_line(env, measured ? bare : scratch); t && measured) bare.ms.push_back(*t);
    for (std::size_t m = 0; m < variants.size() && g_abort == 0; ++m) {
      samples scratch2;
      if (auto t = lib_first_line(env, variants[m], measured ? lib[m] : scratch2); t && measured)
        lib[m].ms.push_back(*t);
    }
  }
  table.push_back(row{"first line: bare posix_spawn + read()", "–", bare, std::nullopt, false, "(baseline)", {}});
  const double b50 = percentile(bare.ms, 50), b95 = percentile(bare.ms, 95);
  for (std::size_t m = 0; m < variants.size(); ++m) {
    row r{"first line: child::spawn → async_read_lines", variants[m].label, lib[m], std::nullopt, false,
          "(info)", {}};
    char buf[96];
    std::snprintf(buf, sizeof buf, "ratio to bare: ×%.2f p50, ×%.2f p95", percentile(lib[m].ms, 50) / b50,
                  percentile(lib[m].ms, 95) / b95);
    r.note = buf;
    table.push_back(std::move(r));
  }
}

// ---- report ---------------------------------------------------------------------------------------------------------

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

std::string random_token() {
  std::random_device rd;
  std::ostringstream s;
  s << std::hex << rd() << rd();
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  const auto parsed = parse_args(argc, argv);
  if (!parsed) {
    usage(std::cerr);
    return 2;
  }
  const config cfg = *parsed;

  struct sigaction sa {};
  sa.sa_handler = on_abort_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);

  for (const char* p : {kFakeAgent, kReaper}) {
    if (::access(p, X_OK) != 0) {
      std::cerr << "agenthost_bench_process: " << p << " is missing; build agenthost_fake_agent and agenthost_reaper\n";
      return 2;
    }
  }

  asio::io_context io;
  bench_env env{io, random_token()};
  const std::string load_before = loadavg();
  const auto wall0 = clk::now();
  std::vector<row> table, info_rows;

  try {
    if (cfg.wants("stop-coop") && g_abort == 0) {
      progress("stop-coop: " + std::to_string(cfg.runs) + " runs per containment");
      stop_scenario(cfg, env, table, "stop: cooperative (`ready never-exit`), ctrl_c()", with_ready({}),
                    ap::stop_policy::ctrl_c(), ap::stop_phase::interrupt, cfg.runs, cfg.warmup, 50.0, false,
                    "p95 < 50 ms", 0ms);
    }
    if (cfg.wants("stop-sigint") && g_abort == 0) {
      progress("stop-sigint: " + std::to_string(cfg.runs) + " runs per containment, grace " +
               std::to_string(cfg.sigint_grace.count()) + " ms");
      ap::stop_policy p = ap::stop_policy::ctrl_c();
      p.graceful_wait = cfg.sigint_grace;
      const double limit = static_cast<double>(cfg.sigint_grace.count()) + 300.0;
      stop_scenario(cfg, env, table, "stop: SIGINT-ignoring tree of 11, grace " + std::to_string(cfg.sigint_grace.count()) + " ms",
                    with_ready({"ignore-sigint", "spawn-children", "10"}), p, ap::stop_phase::kill, cfg.runs, 0, limit,
                    true, "p95 ≤ " + std::to_string(static_cast<long>(limit)) + " ms", 0ms);
    }
    if (cfg.wants("kill-1000") && g_abort == 0) {
      progress("kill-1000: " + std::to_string(cfg.heavy_runs) + " runs per containment, " +
               std::to_string(cfg.tree_size + 1) + " processes");
      ap::stop_policy p = ap::stop_policy::ctrl_c();
      p.graceful_wait = cfg.kill_grace;
      stop_scenario(cfg, env, table,
                    "kill phase: tree of " + std::to_string(cfg.tree_size + 1) + " (`ignore-all`), stop − grace " +
                        std::to_string(cfg.kill_grace.count()) + " ms",
                    with_ready({"ignore-all", "spawn-children", std::to_string(cfg.tree_size)}), p,
                    ap::stop_phase::kill, cfg.heavy_runs, 0, 500.0, false, "p95 < 500 ms", cfg.kill_grace,
                    &info_rows);
    }
    if (cfg.wants("first-line") && g_abort == 0) {
      progress("first-line: " + std::to_string(cfg.runs) + " interleaved runs (bare, library per containment)");
      first_line_scenario(cfg, env, table);
    }
  } catch (const std::exception& e) {
    std::cerr << "agenthost_bench_process: " << e.what() << "\n";
    kill_leftovers(env.needle());
    return 1;
  }
  table.insert(table.end(), info_rows.begin(), info_rows.end());
  const double wall_s = ms_between(wall0, clk::now()) / 1000.0;
  if (const auto n = kill_leftovers(env.needle()); n > 0)
    std::cerr << "agenthost_bench_process: killed " << n << " leftover process(es)\n";
  if (g_abort != 0) {
    std::cerr << "agenthost_bench_process: interrupted\n";
    return 130;
  }

  utsname u{};
  ::uname(&u);
  std::cout << "agenthost_bench_process — " << std::thread::hardware_concurrency() << " CPUs, Linux " << u.release
            << ", build " << AGENTHOST_BENCH_BUILD_TYPE << "; load average " << load_before << " → " << loadavg()
            << "; " << static_cast<int>(wall_s) << " s total\n"
            << "runs: " << cfg.runs << " per scenario and containment (heavy: " << cfg.heavy_runs
            << ", warmup discarded: " << cfg.warmup << ")" << (cfg.quick ? " [--quick]" : "")
            << "; percentiles by nearest rank; times from steady_clock around the public API\n\n";
  std::cout << "| scenario | containment | N | p50 | p95 | max | target | fail | verdict | notes |\n"
            << "|---|---|---:|---:|---:|---:|---|---:|---|---|\n";
  bool any_fail = false, any_miss = false;
  for (const auto& r : table) {
    const double p95 = percentile(r.s.ms, 95);
    std::string verdict = "–";
    if (r.p95_limit_ms) {
      const bool met = !std::isnan(p95) && (r.inclusive ? p95 <= *r.p95_limit_ms : p95 < *r.p95_limit_ms);
      verdict = met && r.s.failures == 0 ? "PASS" : "FAIL";
      any_miss = any_miss || !met;
    } else if (r.s.failures > 0) {
      verdict = "FAIL";
    }
    any_fail = any_fail || r.s.failures > 0;
    std::cout << "| " << r.scenario << " | " << r.mode << " | " << r.s.ms.size() << " | "
              << fmt_ms(percentile(r.s.ms, 50)) << " | " << fmt_ms(p95) << " | "
              << fmt_ms(r.s.ms.empty() ? std::nan("") : *std::max_element(r.s.ms.begin(), r.s.ms.end())) << " | "
              << r.target << " | " << r.s.failures << " | " << verdict << " | " << r.note << " |\n";
  }
  bool header = false;
  for (const auto& r : table) {
    for (const auto& n : r.s.notes) {
      if (!header) std::cout << "\nfailures:\n";
      header = true;
      std::cout << "- " << r.scenario << " [" << r.mode << "]: " << n << "\n";
    }
  }
  std::cout << std::flush;
  if (any_fail) return 1;
  if (cfg.strict && any_miss) return 1;
  return 0;
}
