// What the sections of agenthost_bench_e2e share: the configuration (set from the flags in bench_e2e.cpp), the report
// they print to, the clocks and formatting, the baselines' bare posix_spawn child, line splitter and simdjson parse,
// and the section entry points (throughput.cpp, latency.cpp, scale.cpp, memory.cpp).
#pragma once

#include "../mapper/pi_transcripts.hpp"

#include <agenthost/process/child.hpp>

#include <simdjson.h>

#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
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

/// The baselines' line splitter: a child's output is read into it a chunk at a time, and its whole lines are handed on
/// in place, each with at least simdjson's padding readable after it (the next lines, or the buffer's slack).
class split_buffer {
 public:
  explicit split_buffer(std::size_t chunk) : chunk_(chunk), buf_(2 * chunk + kPad) {}

  /// One read() of up to the chunk size from `fd` (the partial line moved to the front first when room runs out), then
  /// on_line(data, size, room) for each whole line it completes, `room` the bytes readable from `data`. Returns read()'s
  /// result (errno as it left it).
  template <class OnLine>
  ssize_t read_lines(int fd, OnLine&& on_line) {
    if (buf_.size() - end_ < chunk_ + kPad) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
      if (buf_.size() - end_ < chunk_ + kPad) buf_.resize(2 * (end_ + chunk_ + kPad));
    }
    const ssize_t n = ::read(fd, buf_.data() + end_, chunk_);
    if (n <= 0) return n;
    std::size_t scan = end_;
    end_ += static_cast<std::size_t>(n);
    while (scan < end_) {
      const void* nl = std::memchr(buf_.data() + scan, '\n', end_ - scan);
      if (nl == nullptr) break;
      const auto pos = static_cast<std::size_t>(static_cast<const char*>(nl) - buf_.data());
      on_line(buf_.data() + begin_, pos - begin_, buf_.size() - begin_);
      begin_ = scan = pos + 1;
    }
    return n;
  }

  /// The bytes after the last newline, if any (an unterminated last line), to on_line as read_lines() hands a line.
  template <class OnLine>
  void finish(OnLine&& on_line) {
    if (end_ > begin_) on_line(buf_.data() + begin_, end_ - begin_, buf_.size() - begin_);
    begin_ = end_;
  }

 private:
  static constexpr std::size_t kPad = simdjson::SIMDJSON_PADDING;
  std::size_t chunk_;
  std::vector<char> buf_;
  std::size_t begin_ = 0, end_ = 0;  // [begin_, end_): the bytes not yet handed on
};

/// The mapper benchmark's SimdjsonParseOnly for one line, parsed in place (`room` bytes readable from `s`: at least
/// n + SIMDJSON_PADDING): simdjson On-Demand iterate (stage 1 over the whole line), then read `type`. Returns the size
/// of `type` (0 when the line is not an object with a string `type`), to keep the parse observable.
inline std::size_t simdjson_type_size(simdjson::ondemand::parser& parser, const char* s, std::size_t n,
                                      std::size_t room) {
  simdjson::ondemand::document doc;
  if (parser.iterate(simdjson::padded_string_view(s, n, room)).get(doc) != simdjson::SUCCESS) return 0;
  std::string_view type;
  return doc["type"].get_string().get(type) == simdjson::SUCCESS ? type.size() : 0;
}

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
