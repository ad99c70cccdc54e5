// agenthost_bench_e2e, section "throughput": the transcript flooded through a real child, consumed by the bare
// split / simdjson baselines, child::async_read_lines + the pi mapper, providers::async_run_agent and Node.
#include "common.hpp"

#include <agenthost/mapper/pi_mapper.hpp>
#include <agenthost/process/child.hpp>
#include <agenthost/providers/run.hpp>

#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace agenthost::bench::e2e {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;

bool have_node() { return std::system("node --version > /dev/null 2>&1") == 0; }

struct run_result {
  bool ok = false;
  double seconds = 0;
  double cpu = 0;  // host CPU seconds (our process), when measured
  std::uint64_t lines = 0;
  std::uint64_t messages = 0;
  std::string note;
};

/// posix_spawn + read() + memchr split (+ simdjson On-Demand of each line when `parse`).
run_result run_bare(const std::vector<std::string>& argv, bool parse) {
  run_result r;
  const double cpu0 = cpu_self_seconds();
  const std::int64_t t0 = mono_ns();
  bare_child c = bare_child::spawn(argv);
  split_buffer buf(std::size_t{256} << 10);  // the process layer's default read_chunk_bytes
  simdjson::ondemand::parser parser;
  std::size_t type_bytes = 0;
  const auto on_line = [&](const char* s, std::size_t n, std::size_t room) {
    ++r.lines;
    if (parse) type_bytes += simdjson_type_size(parser, s, n, room);
  };
  for (;;) {
    const ssize_t n = buf.read_lines(c.out, on_line);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
  }
  buf.finish(on_line);
  r.seconds = static_cast<double>(mono_ns() - t0) / 1e9;
  r.cpu = cpu_self_seconds() - cpu0;
  const int status = c.wait();
  r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  r.messages = type_bytes;  // keeps the parse observable
  return r;
}

/// child::spawn + async_read_lines + pi_mapper::on_line for every line.
run_result run_ours(const std::vector<std::string>& args) {
  run_result r;
  asio::io_context io;
  const double cpu0 = cpu_self_seconds();
  const std::int64_t t0 = mono_ns();
  auto c = agenthost::process::child::spawn(io.get_executor(), fake_options(args));
  if (!c) {
    r.note = "spawn failed: " + c.error().message;
    return r;
  }
  agenthost::mapper::pi_mapper mapper;
  std::vector<agenthost::transport::message> out;
  std::int64_t t_eof = 0;
  std::function<void()> read = [&] {
    c->async_read_lines([&](error_code ec, agenthost::process::line_batch lines) {
      if (ec) {
        t_eof = mono_ns();
        return;
      }
      for (const auto& l : lines) {
        ++r.lines;
        if (l.oversize) mapper.on_oversize_line(l.text, l.total_bytes, out);
        else mapper.on_line(l.text, out);
        r.messages += out.size();
        mapper.recycle(out);
      }
      read();
    });
  };
  read();
  std::optional<agenthost::process::exit_status> status;
  c->async_wait([&](error_code, agenthost::process::exit_status s) { status = s; });
  io.run();
  r.seconds = static_cast<double>(t_eof - t0) / 1e9;
  r.cpu = cpu_self_seconds() - cpu0;
  mapper.finish({.status = status}, out);
  r.ok = status && status->as_exited() != nullptr && status->as_exited()->code == 0 && !out.empty() &&
         out.back().type == agenthost::transport::message_type::terminal_completed &&
         mapper.stats().invalid_lines == 0;
  if (!r.ok) r.note = "run not clean";
  return r;
}

/// providers::async_run_agent with the pi mapper.
run_result run_provider(const std::vector<std::string>& args) {
  run_result r;
  asio::io_context io;
  const double cpu0 = cpu_self_seconds();
  const std::int64_t t0 = mono_ns();
  agenthost::providers::run_options options;
  options.linger_after_finish = std::chrono::hours(1);  // the repeated transcript "finishes" after every copy
  agenthost::transport::message terminal;
  std::int64_t t_end = 0;
  agenthost::providers::async_run_agent(
      io.get_executor(), fake_options(args), std::make_unique<agenthost::mapper::pi_mapper>(), options,
      [&](const agenthost::transport::message&) { ++r.messages; },
      [&](error_code, agenthost::transport::message t) {
        t_end = mono_ns();
        terminal = std::move(t);
      });
  io.run();
  r.seconds = static_cast<double>(t_end - t0) / 1e9;
  r.cpu = cpu_self_seconds() - cpu0;
  r.ok = terminal.type == agenthost::transport::message_type::terminal_completed;
  if (!r.ok) r.note = "terminal: " + terminal.to_json_line().substr(0, 200);
  return r;
}

run_result run_node(const std::string& file, std::uint64_t repeat) {
  run_result r;
  const std::string cmd = std::string("node ") + AGENTHOST_NODE_E2E + " '" + kFake + "' '" + file + "' " +
                          std::to_string(repeat);
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return r;
  std::array<char, 4096> buf{};
  std::string text;
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), f) != nullptr) text += buf.data();
  const int status = ::pclose(f);
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (status != 0 || !j.is_object()) {
    r.note = "node failed";
    return r;
  }
  r.lines = j.value("lines", std::uint64_t{0});
  r.seconds = j.value("seconds", 0.0);
  r.ok = r.seconds > 0;
  return r;
}

struct path_stats {
  std::vector<double> mbps, lps, cpu_per_gb;
  int failures = 0;
  std::string note;
};

}  // namespace

void throughput(const config& cfg, const fs::path& dir, report& rep) {
  const bool node = cfg.node && have_node();
  rep.add("");
  rep.add("### Throughput (end to end, through a real child)");
  rep.add("");
  rep.add("fake_agent `flood-file FILE --repeat R` writes the transcript as fast as it can (1 MiB writes); " +
          std::to_string(cfg.rounds) + " round(s), paths interleaved; median MB/s (10^6 bytes incl. newlines / wall "
          "time from spawn to end of stdout); host CPU = our process's user+sys per GB." +
          (node ? "" : " Node not run."));
  rep.add("");
  rep.add("| transcript | path | MB per run | lines per run | MB/s | lines/s | host CPU s/GB | ÷ simdjson path | "
          "÷ Node | notes |");
  rep.add("|---|---|---:|---:|---:|---:|---:|---:|---:|---|");
  for (auto kind : cfg.kinds) {
    const auto t = agenthost::bench::make_transcript(kind, agenthost::bench::default_size(kind));
    const std::string name(agenthost::bench::to_string(kind));
    const fs::path file = dir / ("pi-" + name + ".jsonl");
    {
      std::ofstream f(file, std::ios::binary);
      for (const auto& l : t.lines) f << l << '\n';
    }
    const double file_bytes = static_cast<double>(fs::file_size(file));
    const auto repeat = static_cast<std::uint64_t>(std::max(1.0, std::round(cfg.mb * 1e6 / file_bytes)));
    const double bytes = file_bytes * static_cast<double>(repeat);
    const std::uint64_t lines = t.lines.size() * repeat;
    const std::vector<std::string> args = {"flood-file", file.string(), "--repeat", std::to_string(repeat)};
    std::vector<std::string> argv = {kFake};
    argv.insert(argv.end(), args.begin(), args.end());

    const std::vector<std::string> order = {"split", "simdjson", "ours", "provider", "node"};
    std::map<std::string, path_stats> stats;
    for (int round = 0; round < cfg.rounds && g_interrupted == 0; ++round) {
      for (std::size_t i = 0; i < order.size(); ++i) {
        const std::string& p = order[(i + static_cast<std::size_t>(round)) % order.size()];  // rotate the order
        if (p == "node" && !node) continue;
        run_result r;
        if (p == "split") r = run_bare(argv, false);
        else if (p == "simdjson") r = run_bare(argv, true);
        else if (p == "ours") r = run_ours(args);
        else if (p == "provider") r = run_provider(args);
        else r = run_node(file.string(), repeat);
        path_stats& s = stats[p];
        if (!r.ok) {
          ++s.failures;
          s.note = r.note;
          continue;
        }
        s.mbps.push_back(bytes / 1e6 / r.seconds);
        s.lps.push_back(static_cast<double>(lines) / r.seconds);
        if (r.cpu > 0) s.cpu_per_gb.push_back(r.cpu / (bytes / 1e9));
      }
    }
    const double simd = stats["simdjson"].mbps.empty() ? 0 : median(stats["simdjson"].mbps);
    const double nodev = stats["node"].mbps.empty() ? 0 : median(stats["node"].mbps);
    for (const auto& p : order) {
      if (p == "node" && !node) continue;
      path_stats& s = stats[p];
      if (s.mbps.empty()) {
        rep.add("| " + name + " | " + p + " | " + fmt(bytes / 1e6) + " | " + std::to_string(lines) +
                " | – | – | – | – | – | failed: " + s.note + " |");
        rep.missed = rep.missed || p == "ours";
        continue;
      }
      const double m = median(s.mbps);
      std::string notes;
      if (p == "ours" || p == "provider") {
        const bool met_simd = simd > 0 && m / simd >= 0.5;
        const bool met_node = nodev == 0 || m / nodev >= 5;
        if (met_simd && met_node) {
          notes = std::string("meets ≥ 50 % simdjson") + (nodev > 0 ? ", ≥ 5× Node" : "");
        } else {
          notes = "**misses** " + std::string(met_simd ? "" : "≥ 50 % simdjson") + (!met_simd && !met_node ? ", " : "") +
                  (met_node ? "" : "≥ 5× Node");
        }
        if (p == "ours") rep.missed = rep.missed || !(met_simd && met_node);
      }
      if (s.failures > 0) notes += (notes.empty() ? "" : "; ") + std::to_string(s.failures) + " failed run(s)";
      rep.add("| " + name + " | " + p + " | " + fmt(bytes / 1e6) + " | " + std::to_string(lines) + " | " + fmt(m) +
              " | " + fmt(median(s.lps)) + " | " + (s.cpu_per_gb.empty() ? "–" : fmt(median(s.cpu_per_gb), 2)) +
              " | " + (simd > 0 ? fmt(100 * m / simd) + " %" : "–") + " | " +
              (nodev > 0 ? "×" + fmt(m / nodev, 1) : "–") + " | " + notes + " |");
    }
  }
}

}  // namespace agenthost::bench::e2e
