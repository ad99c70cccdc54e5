// What the sections of agenthost_bench_e2e share: the configuration (set from the flags in bench_e2e.cpp), the report
// they print to, the clocks and formatting, the bare posix_spawn child of the baselines, and the section entry points
// (throughput.cpp, latency.cpp, scale.cpp, memory.cpp).
#pragma once

#include "../mapper/pi_transcripts.hpp"

#include <agenthost/process/child.hpp>

#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace agenthost::bench::e2e {

namespace fs = std::filesystem;
using agenthost::bench::transcript_kind;

// ---- small utilities -------------------------------------------------------------------------------------------------

// Inline: the two clocks are read on the measured paths (every batch of lines), as they were in a single file.
inline std::int64_t mono_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline double cpu_self_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

std::string load_average();
std::string fmt(double v, int digits = 0);
std::string fmt_us(double ns);
double percentile(std::vector<double>& v, double p);  // nearest rank; sorts v
double median(std::vector<double> v);
std::vector<std::string> split_list(const std::string& s);

extern volatile std::sig_atomic_t g_interrupted;

/// A child started with posix_spawn, stdout on a pipe, stdin and stderr from /dev/null (stderr inherited when asked).
struct bare_child {
  pid_t pid = -1;
  int out = -1;

  static bare_child spawn(const std::vector<std::string>& argv, bool inherit_stderr = false);
  int wait();
};

// ---- configuration -----------------------------------------------------------------------------------------------------

struct config {
  std::vector<std::string> only = {"throughput", "latency", "scale", "memory"};
  std::vector<transcript_kind> kinds = {transcript_kind::delta, transcript_kind::snapshot, transcript_kind::tools};
  int rounds = 5;
  double mb = 256;  // throughput volume per run
  std::vector<int> agents = {1, 10, 50, 100};
  double scale_seconds = 7;
  std::vector<int> scale_tick_ms = {0, 2};  // 0 = io_context::run(); T > 0 = poll() then sleep T ms (largest K only)
  std::vector<int> scale_coalesce_ms = {2, 4, 5};  // rows at every K with spawn_options::read_coalescing (run() loop)
  bool scale_plain_rows = true;  // off: only the coalescing rows (for profiling them)
  bool scale_no_mapper_row = true;  // also the largest K without the mapper (the process layer's share)
  bool scale_bare_row = true;  // also the largest K read by a bare poll()+read() loop, no library (the floor)
  bool scale_bare_parse_row = true;  // also that floor + simdjson On-Demand of every line (a parsing host's floor)
  // also the largest K's coalescing rows with AGENTHOST_IO_URING=0: the poller's one read() per ready pipe
  bool scale_read_each_row = true;
  // How often each fake agent wakes to write what is due (its `rate --tick-ms`): a line is written up to this late,
  // and the lateness counts in the delay columns. 1 ms by default; coarser on machines where 100 agents' wake-ups
  // alone fill the CPUs (the host then waits for a CPU, whatever it does).
  int scale_agent_tick_ms = 1;
  std::vector<std::string> scale_content = {"synthetic", "pi-delta", "pi-snapshot"};  // what each agent streams
  std::uint64_t latency_lines = 4000;
  std::uint64_t latency_interval_us = 500;
  bool node = true;
  bool keep_files = false;
  bool strict = false;
  bool wants(const std::string& what) const { return std::find(only.begin(), only.end(), what) != only.end(); }
};

inline const std::string kFake = AGENTHOST_FAKE_AGENT;
inline const std::string kReaper = AGENTHOST_REAPER;

agenthost::process::spawn_options fake_options(std::vector<std::string> args);

struct report {
  std::vector<std::string> lines;
  bool missed = false;
  void add(std::string s) {
    std::printf("%s\n", s.c_str());
    std::fflush(stdout);
    lines.push_back(std::move(s));
  }
};

// ---- sections ----------------------------------------------------------------------------------------------------------

void throughput(const config& cfg, const fs::path& dir, report& rep);  // throughput.cpp
void latency(const config& cfg, report& rep);                           // latency.cpp
void scale(const config& cfg, const fs::path& dir, report& rep);       // scale.cpp
void memory(const config& cfg, const fs::path& dir, report& rep);      // memory.cpp

/// `--rss-child PROGRAM ARGS…` (memory.cpp): the helper process that measures the peak RSS of `agenthost map`.
int rss_child_main(int argc, char** argv);

}  // namespace agenthost::bench::e2e
