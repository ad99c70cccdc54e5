// What the scenarios of agenthost_bench_process share: the configuration (set from the flags in bench_process.cpp),
// the samples and table rows they fill, the clock, the run token and the hygiene around every run, and the scenario
// entry points (stop.cpp, first_line.cpp).
#pragma once

#include <agenthost/process/child.hpp>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <csignal>
#include <cstddef>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace agenthost::bench::process_bench {

namespace asio = boost::asio;
namespace ap = agenthost::process;
using boost::system::error_code;
using clk = std::chrono::steady_clock;
using namespace std::chrono_literals;

inline constexpr const char* kFakeAgent = AGENTHOST_FAKE_AGENT;
inline constexpr const char* kReaper = AGENTHOST_REAPER;
inline constexpr const char* kTokenName = "AGENTHOST_BENCH_TOKEN";

extern volatile std::sig_atomic_t g_abort;

inline double ms_between(clk::time_point a, clk::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
inline double to_ms(std::chrono::nanoseconds d) { return std::chrono::duration<double, std::milli>(d).count(); }

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

const char* mode_name(ap::containment_kind k);

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
double percentile(std::vector<double> v, double p);

struct row {
  std::string scenario;
  std::string mode;
  samples s;
  std::optional<double> p95_limit_ms;  // target: p95 < limit (or ≤ when inclusive)
  bool inclusive = false;
  std::string target;                  // as printed
  std::string note;                    // extra column
};

std::string fmt_ms(double v);

// ---- process hygiene (outside every timed region) -------------------------------------------------------------------

/// SIGKILLs what carries the token; returns how many were found.
std::size_t kill_leftovers(const std::string& needle);

// ---- driving the library ------------------------------------------------------------------------------------------

/// Runs `io` until `done()`, `timeout` or an interrupt of the benchmark; returns done().
bool run_until(asio::io_context& io, const std::function<bool()>& done, std::chrono::milliseconds timeout);

/// Runs the handlers already queued (completions posted by a destroyed child).
void drain(asio::io_context& io);

struct bench_env {
  asio::io_context& io;
  std::string token;
  std::string needle() const { return std::string(kTokenName) + "=" + token; }
};

struct stop_outcome {
  bool done = false;
  error_code ec;
  ap::stop_report report;
  clk::time_point when{};
};

// ---- scenarios ------------------------------------------------------------------------------------------------------

/// `modes` followed by "ready never-exit": the fake agent's arguments for a tree that waits to be stopped.
std::vector<std::string> with_ready(std::vector<std::string> modes);  // stop.cpp

/// The stop scenarios (stop-coop, stop-sigint, kill-1000): one row per containment mode. stop.cpp.
void stop_scenario(const config& cfg, bench_env& env, std::vector<row>& table, const std::string& title,
                   const std::vector<std::string>& args, const ap::stop_policy& policy, ap::stop_phase expected,
                   int runs, int warmup, double limit_ms, bool inclusive, const std::string& target,
                   std::chrono::milliseconds subtract, std::vector<row>* ready_rows = nullptr);

/// first-line: bare posix_spawn + read() beside the library per containment variant, interleaved. first_line.cpp.
void first_line_scenario(const config& cfg, bench_env& env, std::vector<row>& table);

}  // namespace agenthost::bench::process_bench
