// agenthost_bench_e2e — the whole path through real child processes: throughput, latency, scale, memory.
//
// A plain timed program (not Google Benchmark, not a test). The child is always fixtures/fake_agent; see bench/README.md
// sections "End to end", "Latency", "Scale" and "Memory" for what is measured and the targets.
//
//   throughput  fake_agent flood-file <pi transcript> --repeat R (as fast as it can write), consumed by
//                 split     posix_spawn + read() + memchr line split (the floor)
//                 simdjson  the same + simdjson On-Demand parse of every line (iterate + `type`)
//                 ours      child::spawn + async_read_lines + pi_mapper::on_line (messages counted and dropped)
//                 provider  providers::async_run_agent with the pi mapper (one std::function call per message)
//                 node      node_e2e.mjs: child_process.spawn + readline + JSON.parse (when `node` is on PATH)
//               rounds interleave the paths; MB/s = transcript bytes / wall time from spawn to end of stdout.
//   latency     fake_agent timestamps N --interval-us U (CLOCK_MONOTONIC ns in each line, one write per line); the
//               delay is taken on receipt: bare blocking read() vs child::async_read_lines (+ the mapper).
//   scale       K agents (1, 10, 50, 100) each `rate 1000000 --seconds S` (1 MB/s of 100-byte lines) on one
//               io_context thread, every line through a pi_mapper; host CPU (getrusage) over a steady-state window
//               and each line's delay against its due time. --scale-content adds realistic rows: each agent streams a
//               generated pi transcript (`rate 1000000 --file F`: pi-delta ≥ 0.84, pi-snapshot ≤ 0.83) at 1 MB/s.
//   memory      peak RSS (wait4 ru_maxrss) of `agenthost map --agent pi FILE > /dev/null` on the generated
//               transcripts (snapshot ~100 MB) against 2 × the longest line + 16 MiB.
//
// Flags: --only LIST (throughput,latency,scale,memory)  --quick  --rounds N  --mb N (throughput volume per run)
//        --kinds LIST (snapshot,delta,tools)  --agents LIST (default 1,10,50,100)  --scale-seconds S
//        --scale-tick-ms LIST (default 0,2: extra rows at the largest K with a paced poll()+sleep event loop)
//        --scale-coalesce-ms LIST (default 2,4,5: rows at every K with spawn_options::read_coalescing; 0 = none)
//        --scale-content LIST (default synthetic,pi-delta,pi-snapshot: what each scale agent streams)
//        --scale-no-mapper-row on|off, --scale-bare-row on|off (the largest K without the mapper; read by a bare
//        poll()+read() loop without the library: the floor), --scale-bare-parse-row on|off (that floor + simdjson
//        On-Demand of every line: a parsing host's floor), --scale-read-each-row on|off (the largest K's
//        coalescing rows again with AGENTHOST_IO_URING=0: one read() per ready pipe), --scale-plain-rows on|off
//        --scale-agent-tick-ms T (default 1: each fake agent wakes every T ms to write what is due; its lateness
//        counts as delay)
//        --latency-lines N  --latency-interval-us U  --no-node  --keep-files  --strict (exit 1 on a missed target)
//
// The sections live in throughput.cpp, latency.cpp, scale.cpp and memory.cpp; what they share in common.hpp.
#include "common.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>

using namespace agenthost::bench::e2e;

int main(int argc, char** argv) {
  if (argc >= 3 && std::string_view(argv[1]) == "--rss-child") return rss_child_main(argc - 2, argv + 2);
  config cfg;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--only") {
      cfg.only = split_list(value());
    } else if (a == "--quick") {
      cfg.rounds = 1;
      cfg.mb = 64;
      cfg.agents = {1, 10, 100};
      cfg.scale_seconds = 4;
      cfg.latency_lines = 1000;
    } else if (a == "--rounds") {
      cfg.rounds = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--mb") {
      cfg.mb = std::max(1.0, std::atof(value().c_str()));
    } else if (a == "--kinds") {
      cfg.kinds.clear();
      for (const auto& k : split_list(value())) {
        if (k == "snapshot") cfg.kinds.push_back(transcript_kind::snapshot);
        else if (k == "delta") cfg.kinds.push_back(transcript_kind::delta);
        else if (k == "tools") cfg.kinds.push_back(transcript_kind::tools);
        else {
          std::fprintf(stderr, "unknown transcript kind '%s'\n", k.c_str());
          return 2;
        }
      }
    } else if (a == "--agents") {
      cfg.agents.clear();
      for (const auto& k : split_list(value())) cfg.agents.push_back(std::max(1, std::atoi(k.c_str())));
    } else if (a == "--scale-tick-ms") {
      cfg.scale_tick_ms.clear();
      for (const auto& t : split_list(value())) cfg.scale_tick_ms.push_back(std::max(0, std::atoi(t.c_str())));
    } else if (a == "--scale-coalesce-ms") {
      cfg.scale_coalesce_ms.clear();
      for (const auto& t : split_list(value())) cfg.scale_coalesce_ms.push_back(std::max(0, std::atoi(t.c_str())));
    } else if (a == "--scale-plain-rows") {
      cfg.scale_plain_rows = value() != "off";
    } else if (a == "--scale-no-mapper-row") {
      cfg.scale_no_mapper_row = value() != "off";
    } else if (a == "--scale-bare-row") {
      cfg.scale_bare_row = value() != "off";
    } else if (a == "--scale-bare-parse-row") {
      cfg.scale_bare_parse_row = value() != "off";
    } else if (a == "--scale-read-each-row") {
      cfg.scale_read_each_row = value() != "off";
    } else if (a == "--scale-agent-tick-ms") {
      cfg.scale_agent_tick_ms = std::clamp(std::atoi(value().c_str()), 1, 1000);
    } else if (a == "--scale-content") {
      cfg.scale_content = split_list(value());
      for (const auto& c : cfg.scale_content)
        if (c != "synthetic" && c != "pi-delta" && c != "pi-snapshot") {
          std::fprintf(stderr, "unknown scale content '%s' (synthetic, pi-delta, pi-snapshot)\n", c.c_str());
          return 2;
        }
    } else if (a == "--scale-seconds") {
      cfg.scale_seconds = std::max(2.5, std::atof(value().c_str()));
    } else if (a == "--latency-lines") {
      cfg.latency_lines = std::strtoull(value().c_str(), nullptr, 10);
    } else if (a == "--latency-interval-us") {
      cfg.latency_interval_us = std::strtoull(value().c_str(), nullptr, 10);
    } else if (a == "--no-node") {
      cfg.node = false;
    } else if (a == "--keep-files") {
      cfg.keep_files = true;
    } else if (a == "--strict") {
      cfg.strict = true;
    } else {
      std::fprintf(stderr,
                   "usage: agenthost_bench_e2e [--only throughput,latency,scale,memory] [--quick] [--rounds N] [--mb N]\n"
                   "       [--kinds snapshot,delta,tools] [--agents 1,10,50,100] [--scale-seconds S] [--scale-tick-ms 0,2]\n"
                   "       [--scale-coalesce-ms 2,4,5] [--scale-no-mapper-row on|off] [--scale-bare-row on|off]\n"
                   "       [--scale-bare-parse-row on|off] [--scale-read-each-row on|off] [--scale-plain-rows on|off]\n"
                   "       [--scale-agent-tick-ms 1]\n"
                   "       [--scale-content synthetic,pi-delta,pi-snapshot]\n"
                   "       [--latency-lines N] [--latency-interval-us U] [--no-node] [--keep-files] [--strict]\n");
      return 2;
    }
  }
  std::signal(SIGINT, [](int) { g_interrupted = 1; });
  std::signal(SIGPIPE, SIG_IGN);  // popen'd node
  char tmpl[] = "/tmp/agenthost-bench-e2e-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const fs::path dir = tmpl;

  struct utsname u{};
  ::uname(&u);
  report rep;
  const std::int64_t t0 = mono_ns();
  const std::string load_before = load_average();
  rep.add("agenthost_bench_e2e — " + std::to_string(::sysconf(_SC_NPROCESSORS_ONLN)) + " CPUs, " + u.sysname + " " +
          u.release + ", build " + AGENTHOST_BENCH_BUILD_TYPE + "; load average at start " + load_before);
  try {
    if (cfg.wants("throughput")) throughput(cfg, dir, rep);
    if (cfg.wants("latency") && g_interrupted == 0) latency(cfg, rep);
    if (cfg.wants("scale") && g_interrupted == 0) scale(cfg, dir, rep);
    if (cfg.wants("memory") && g_interrupted == 0) memory(cfg, dir, rep);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "agenthost_bench_e2e: %s\n", e.what());
    if (!cfg.keep_files) fs::remove_all(dir);
    return 1;
  }
  rep.add("");
  rep.add("load average at end " + load_average() + "; " + fmt(static_cast<double>(mono_ns() - t0) / 1e9) +
          " s total" + (rep.missed ? "; at least one target missed" : "; all targets met"));
  if (cfg.keep_files) std::printf("files kept in %s\n", dir.c_str());
  else fs::remove_all(dir);
  if (g_interrupted != 0) return 130;
  return cfg.strict && rep.missed ? 1 : 0;
}
