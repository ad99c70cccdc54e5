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
//
// The scenarios live in stop.cpp and first_line.cpp; what they share in common.hpp / common.cpp.
#include "common.hpp"

#include <signal.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace agenthost::bench::process_bench;

namespace {

extern "C" void on_abort_signal(int) { g_abort = 1; }

// ---- configuration --------------------------------------------------------------------------------------------------

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

void progress(const std::string& what) { std::cerr << "[bench] " << what << std::endl; }

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
