// agenthost_bench_mapper — throughput of every agent mapper beside parse-only baselines, on generated transcripts.
//
// Transcripts (built in memory, deterministic), pi_transcripts.hpp: `snapshot` (pi ≤ 0.83, one long answer with
// cumulative snapshots, ~100 MB), `delta` (pi ≥ 0.84, the same kind of answer ×10, delta-only), `tools` (pi ≥ 0.84
// agentic session: thinking, text, streamed tool calls, cumulative tool output); agent_transcripts.hpp: `claude`
// (Claude Code stream-json with partial messages, the `delta` answer), `codex` (1 M short `codex exec --json`
// events), `gemini` (Gemini CLI stream-json, the `delta` answer), `opencode` (OpenCode `run --format json`: 200 k
// events, whole parts in 40 k steps with a bash tool each), `unmapped` (1 M 100-byte lines of a type pi's mapper does
// not map: only checked, as the scale benchmark's synthetic content; not an agent's transcript).
// Benchmarks per transcript, run as repetitions in random interleaved order so that they share the machine's noise:
//   Mapper             the agent's mapper, on_line for every line, its messages consumed after each line (the worst
//                      case: every read of the agent's output holds one line)
//   MapperBatched      as `agenthost map` and the providers: merge_adjacent_text (the text deltas of one read become
//                      one message), the messages consumed after each 64 KiB read and after every line whose last
//                      message is not an `assistant` text (which the next delta could still extend)
//   SimdjsonParseOnly  simdjson On-Demand: iterate each line (stage 1 over the whole line) and read `type`
//   NlohmannDom        nlohmann::json::parse of each line
//   LineSplit          memchr over the transcript as one buffer (the floor of any line-based consumer)
//   MessagesOnly       building and destroying fresh copies of the messages the mapper emitted for the first 50 k lines,
//                      no parsing: what the contract's nlohmann::json content costs when every message is allocated
//                      anew (as the mappers did before they refilled the messages handed back with recycle())
//   MapperAcross       only with --across=K[xC]: K mappers take the lines C at a time in turn (K agents served by one
//                      thread; see run_mapper_across) — what switching between agents' mapper state costs
// Reported: MB/s (bytes without newlines / CPU time) and lines/s; then a summary table with the medians, Node's
// readline + JSON.parse (node_baseline.mjs, run when `node` is on PATH) and the ratios the goals are stated in.
//
// Flags (before Google Benchmark's own): --kinds=snapshot,delta,tools,claude,codex,gemini,opencode,unmapped --no-node
// --strict (exit 1 on a missed goal) --across=K[xC] (the MapperAcross row; C defaults to 13)
// Environment: AGENTHOST_BENCH_ANSWER_CHARS (snapshot answer; delta uses 10×), AGENTHOST_BENCH_TOOL_TURNS,
// AGENTHOST_BENCH_CODEX_EVENTS, AGENTHOST_BENCH_OPENCODE_EVENTS, AGENTHOST_BENCH_UNMAPPED_LINES,
// AGENTHOST_BENCH_DUMP_DIR (write the transcripts there as <kind>.jsonl).
#include "agent_transcripts.hpp"
#include "node_runner.hpp"
#include "pi_transcripts.hpp"

#include <agenthost/mapper/claude_mapper.hpp>
#include <agenthost/mapper/codex_mapper.hpp>
#include <agenthost/mapper/gemini_mapper.hpp>
#include <agenthost/mapper/opencode_mapper.hpp>
#include <agenthost/mapper/pi_mapper.hpp>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <malloc.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#ifndef AGENTHOST_NODE_BASELINE
#define AGENTHOST_NODE_BASELINE "bench/mapper/node_baseline.mjs"
#endif

namespace {

using agenthost::bench::transcript;
using agenthost::bench::transcript_kind;
using mapper_ptr = std::unique_ptr<agenthost::mapper::event_mapper>;

/// The Codex and OpenCode mappers' thought_release_batch, as the providers (and so `agenthost map`) set it.
constexpr std::size_t kThoughtBatch = 8;

std::size_t env_size(const char* name, std::size_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return static_cast<std::size_t>(std::strtoull(v, nullptr, 10));
}

/// One transcript kind: how to build it and which mapper reads it.
struct bench_kind {
  std::string name;
  std::function<transcript()> make;
  std::function<mapper_ptr(bool merge)> make_mapper;  // merge: merge_adjacent_text, as the providers set it
  bool emits_messages = true;  // false: no MessagesOnly row (there is nothing to build)
};

std::size_t answer_chars() {
  using agenthost::bench::default_size;
  return env_size("AGENTHOST_BENCH_ANSWER_CHARS", default_size(transcript_kind::snapshot));
}

const std::vector<bench_kind>& all_kinds() {
  namespace b = agenthost::bench;
  namespace m = agenthost::mapper;
  static const std::vector<bench_kind> kinds = {
      {"snapshot", [] { return b::make_transcript(transcript_kind::snapshot, answer_chars()); },
       [](bool merge) { return std::make_unique<m::pi_mapper>(m::pi_mapper_options{.merge_adjacent_text = merge}); }},
      // The same answer ×10, delta-only (the delta transcript would be tiny otherwise).
      {"delta", [] { return b::make_transcript(transcript_kind::delta, 10 * answer_chars()); },
       [](bool merge) { return std::make_unique<m::pi_mapper>(m::pi_mapper_options{.merge_adjacent_text = merge}); }},
      {"tools",
       [] {
         return b::make_transcript(transcript_kind::tools,
                                   env_size("AGENTHOST_BENCH_TOOL_TURNS", b::default_size(transcript_kind::tools)));
       },
       [](bool merge) { return std::make_unique<m::pi_mapper>(m::pi_mapper_options{.merge_adjacent_text = merge}); }},
      {"claude", [] { return b::make_claude_answer(10 * answer_chars()); },
       [](bool merge) { return std::make_unique<m::claude_mapper>(m::claude_mapper_options{.merge_adjacent_text = merge}); }},
      {"codex", [] { return b::make_codex_events(env_size("AGENTHOST_BENCH_CODEX_EVENTS", 1000000)); },
       [](bool merge) {
         return std::make_unique<m::codex_mapper>(
             m::codex_mapper_options{.merge_adjacent_text = merge, .thought_release_batch = kThoughtBatch});
       }},
      {"gemini", [] { return b::make_gemini_answer(10 * answer_chars()); },
       [](bool merge) { return std::make_unique<m::gemini_mapper>(m::gemini_mapper_options{.merge_adjacent_text = merge}); }},
      {"opencode", [] { return b::make_opencode_steps(env_size("AGENTHOST_BENCH_OPENCODE_EVENTS", 200000)); },
       [](bool merge) {
         return std::make_unique<m::opencode_mapper>(
             m::opencode_mapper_options{.merge_adjacent_text = merge, .thought_release_batch = kThoughtBatch});
       }},
      // Not an agent's transcript: the cost of a line that is only checked (the scale benchmark's synthetic content).
      {"unmapped", [] { return b::make_unmapped_lines(env_size("AGENTHOST_BENCH_UNMAPPED_LINES", 1000000)); },
       [](bool merge) { return std::make_unique<m::pi_mapper>(m::pi_mapper_options{.merge_adjacent_text = merge}); },
       false},
  };
  return kinds;
}

struct prepared {
  transcript t;
  std::string joined;  // lines joined with '\n' (LineSplit)
};

const prepared& get(const bench_kind& k) {
  static std::map<std::string, std::unique_ptr<prepared>> cache;
  auto& p = cache[k.name];
  if (!p) {
    p = std::make_unique<prepared>();
    p->t = k.make();
    p->joined.reserve(p->t.bytes + p->t.lines.size());
    for (const auto& l : p->t.lines) (p->joined += l) += '\n';
  }
  return *p;
}

void report(benchmark::State& state, const transcript& t) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(t.bytes));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(t.lines.size()));
}

void run_mapper(benchmark::State& state, const bench_kind& k) {
  const transcript& t = get(k).t;
  std::size_t messages = 0;
  std::vector<agenthost::transport::message> out;
  for (auto _ : state) {
    const auto mapper_owner = k.make_mapper(false);
    agenthost::mapper::event_mapper& mapper = *mapper_owner;
    for (const auto& l : t.lines) {
      mapper.on_line(l, out);
      messages += out.size();
      mapper.recycle(out);  // as a provider does once it has handed the messages on
      while (mapper.take_more(out)) {  // a turn's buffered thoughts, a slice at a time (as a provider asks for them)
        messages += out.size();
        mapper.recycle(out);
      }
    }
    mapper.finish({.status = agenthost::process::exited{0}}, out);
    if (out.empty() || out.back().type != agenthost::transport::message_type::terminal_completed ||
        mapper.stats().invalid_lines != 0) {
      state.SkipWithError("the mapper did not complete the run cleanly");
      break;
    }
    out.clear();
  }
  benchmark::DoNotOptimize(messages);
  report(state, t);
}

/// After a line, as the providers and `agenthost map` hand messages on: at the end of a read, and after a line whose
/// last message cannot grow (anything but an `assistant` text, which the next delta may extend); then a turn's
/// buffered thoughts, a slice at a time.
void hand_on(agenthost::mapper::event_mapper& mapper, std::vector<agenthost::transport::message>& out,
             std::size_t& messages, bool end_of_read) {
  const bool can_grow = out.empty() || out.back().type == agenthost::transport::message_type::assistant;
  if (end_of_read || !can_grow) {
    messages += out.size();
    mapper.recycle(out);
  }
  while (mapper.take_more(out)) {
    messages += out.size();
    mapper.recycle(out);
  }
}

/// As `agenthost map` and the providers use a mapper: the lines of one read (here 64 KiB of input) map into one
/// output vector, consumed after the read, with merge_adjacent_text (the text deltas of the read become one message).
void run_mapper_batched(benchmark::State& state, const bench_kind& k) {
  const transcript& t = get(k).t;
  std::size_t messages = 0;
  std::vector<agenthost::transport::message> out;
  constexpr std::size_t kReadBytes = std::size_t{64} << 10;
  for (auto _ : state) {
    const auto mapper_owner = k.make_mapper(true);
    agenthost::mapper::event_mapper& mapper = *mapper_owner;
    std::size_t in_read = 0;
    for (const auto& l : t.lines) {
      mapper.on_line(l, out);
      const bool read_done = (in_read += l.size() + 1) >= kReadBytes;
      if (read_done) in_read = 0;
      hand_on(mapper, out, messages, read_done);
    }
    mapper.finish({.status = agenthost::process::exited{0}}, out);
    if (out.empty() || out.back().type != agenthost::transport::message_type::terminal_completed ||
        mapper.stats().invalid_lines != 0) {
      state.SkipWithError("the mapper did not complete the run cleanly");
      break;
    }
    messages += out.size();
    out.clear();
  }
  benchmark::DoNotOptimize(messages);
  report(state, t);
}

/// --across=K[xC]: the MapperAcross row (off by default).
std::size_t g_across_mappers = 0;
std::size_t g_across_chunk = 13;

/// K mappers (merge_adjacent_text, as the providers run them) take the transcript's lines C at a time in turn — as K
/// agents whose reads each hold C lines, served by one thread (the scale benchmark's 100 pi-delta agents at 4 ms read
/// coalescing: C ≈ 13) — their messages handed back after each turn. Each mapper sees the first P = min(lines,
/// 1,000,000 / K) lines, a coherent stream; they are the same lines for every mapper (hot in cache after the first), so
/// the gap to MapperBatched is the cost of switching between the mappers' own state (cold in cache at each turn).
void run_mapper_across(benchmark::State& state, const bench_kind& k) {
  const transcript& t = get(k).t;
  const std::size_t mappers = g_across_mappers, chunk = g_across_chunk;  // both > 0 (checked with the flag)
  const std::size_t lines = std::min(t.lines.size(), std::max<std::size_t>(1, 1000000 / mappers));
  const std::size_t first = std::min(lines, chunk);  // the first turn's lines, not timed
  std::size_t timed_bytes = 0;
  for (std::size_t i = first; i < lines; ++i) timed_bytes += t.lines[i].size();
  std::size_t messages = 0;
  std::vector<agenthost::transport::message> out;
  std::vector<mapper_ptr> all;
  const auto map_turn = [&](agenthost::mapper::event_mapper& mapper, std::size_t at, std::size_t to) {
    for (std::size_t i = at; i < to; ++i) {
      mapper.on_line(t.lines[i], out);
      hand_on(mapper, out, messages, i + 1 == to);  // a turn is one read
    }
  };
  for (auto _ : state) {
    // Untimed: making the mappers, their first turn (where each allocates its buffers) and dropping them after.
    state.PauseTiming();
    all.clear();
    for (std::size_t i = 0; i < mappers; ++i) {
      all.push_back(k.make_mapper(true));
      map_turn(*all.back(), 0, first);
    }
    state.ResumeTiming();
    for (std::size_t at = first; at < lines; at += chunk) {
      const std::size_t to = std::min(lines, at + chunk);
      for (const auto& mapper : all) map_turn(*mapper, at, to);
    }
    for (const auto& mapper : all) {
      if (mapper->stats().invalid_lines != 0) {
        state.SkipWithError("a mapper reported invalid lines");
        break;
      }
    }
  }
  benchmark::DoNotOptimize(messages);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * mappers * timed_bytes));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * mappers * (lines - first)));
}

/// The contract messages the (per-line) mapper emits for the first lines of a transcript, one vector per line.
struct message_sample {
  std::vector<std::vector<agenthost::transport::message>> per_line;
  std::size_t bytes = 0;  // of those lines, without newlines
};

const message_sample& sample(const bench_kind& k) {
  constexpr std::size_t kSampleLines = 50000;
  static std::map<std::string, std::unique_ptr<message_sample>> cache;
  auto& s = cache[k.name];
  if (!s) {
    s = std::make_unique<message_sample>();
    const transcript& t = get(k).t;
    const auto mapper = k.make_mapper(false);
    for (std::size_t i = 0; i < t.lines.size() && i < kSampleLines; ++i) {
      auto& out = s->per_line.emplace_back();
      mapper->on_line(t.lines[i], out);
      s->bytes += t.lines[i].size();
    }
  }
  return *s;
}

/// Only building and destroying fresh copies of the messages the mapper emits (the allocations of building them
/// anew), no parsing, no mapping — for the first 50 k lines. A mapper faster than this refills recycled messages.
void run_messages_only(benchmark::State& state, const bench_kind& k) {
  const message_sample& s = sample(k);
  std::vector<agenthost::transport::message> out;
  std::size_t n = 0;
  for (auto _ : state) {
    for (const auto& messages : s.per_line) {
      out.insert(out.end(), messages.begin(), messages.end());
      n += out.size();
      out.clear();
    }
  }
  benchmark::DoNotOptimize(n);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(s.bytes));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(s.per_line.size()));
}

void run_simdjson(benchmark::State& state, const bench_kind& k) {
  const transcript& t = get(k).t;
  simdjson::ondemand::parser parser;
  std::size_t n = 0;
  for (auto _ : state) {
    for (const auto& l : t.lines) {
      simdjson::ondemand::document doc;
      if (parser.iterate(simdjson::padded_string_view(l.data(), l.size(), l.capacity())).get(doc)) continue;
      std::string_view type;
      if (doc["type"].get_string().get(type) == simdjson::SUCCESS) n += type.size();
    }
  }
  benchmark::DoNotOptimize(n);
  report(state, t);
}

void run_nlohmann(benchmark::State& state, const bench_kind& k) {
  const transcript& t = get(k).t;
  std::size_t n = 0;
  for (auto _ : state) {
    for (const auto& l : t.lines) {
      const auto j = nlohmann::json::parse(l, nullptr, false);
      n += j.size();
    }
  }
  benchmark::DoNotOptimize(n);
  report(state, t);
}

void run_split(benchmark::State& state, const bench_kind& k) {
  const prepared& p = get(k);
  std::size_t n = 0;
  for (auto _ : state) {
    const char* s = p.joined.data();
    const char* end = s + p.joined.size();
    while (s < end) {
      const void* nl = std::memchr(s, '\n', static_cast<std::size_t>(end - s));
      if (nl == nullptr) break;
      ++n;
      s = static_cast<const char*>(nl) + 1;
    }
  }
  benchmark::DoNotOptimize(n);
  report(state, p.t);
}

// ---- results -------------------------------------------------------------------------------------------------------

struct result {
  double bytes_per_second = 0;
  double items_per_second = 0;
};

/// Keeps the median of each benchmark (or its single run) while printing as usual.
class capture_reporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, result> results;

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      if (r.error_occurred) continue;
      const bool single = r.run_type == Run::RT_Iteration && r.repetitions <= 1;
      if (!single && r.aggregate_name != "median") continue;
      result& x = results[r.run_name.function_name];
      if (auto it = r.counters.find("bytes_per_second"); it != r.counters.end()) x.bytes_per_second = it->second;
      if (auto it = r.counters.find("items_per_second"); it != r.counters.end()) x.items_per_second = it->second;
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

std::string fmt(double v, int digits = 0) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<const bench_kind*> kinds;
  for (const auto& k : all_kinds()) kinds.push_back(&k);
  bool node = true;
  bool strict = false;
  bool interleave_given = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--no-node") {
      node = false;
    } else if (a == "--strict") {
      strict = true;
    } else if (a.rfind("--across=", 0) == 0) {
      const std::string v(a.substr(9));
      char* rest = nullptr;
      g_across_mappers = std::strtoul(v.c_str(), &rest, 10);
      if (*rest == 'x') g_across_chunk = std::strtoul(rest + 1, &rest, 10);
      if (g_across_mappers == 0 || g_across_chunk == 0 || *rest != '\0') {
        std::fprintf(stderr, "--across=K[xC]: K mappers (> 0), C lines each turn (> 0, default 13)\n");
        return 2;
      }
    } else if (a.rfind("--kinds=", 0) == 0) {
      kinds.clear();
      std::stringstream ss{std::string(a.substr(8))};
      for (std::string k; std::getline(ss, k, ',');) {
        const auto& all = all_kinds();
        const auto it = std::find_if(all.begin(), all.end(), [&](const bench_kind& b) { return b.name == k; });
        if (it == all.end()) {
          std::fprintf(stderr,
                       "unknown transcript kind '%s' (snapshot, delta, tools, claude, codex, gemini, opencode, "
                       "unmapped)\n",
                       k.c_str());
          return 2;
        }
        kinds.push_back(&*it);
      }
    } else {
      if (a.rfind("--benchmark_enable_random_interleaving", 0) == 0) interleave_given = true;
      args.push_back(argv[i]);
    }
  }
  if (g_across_mappers > 0) {
    // MapperAcross makes K mappers per iteration. glibc would give their memory back to the kernel when they are
    // dropped (heap trimming, mmap'd blocks) and the next K would fault in fresh pages at their first long line —
    // ~15 % of that row's time, a cost long-lived agents' mappers pay once. Kept in the heap instead; this applies to
    // the run's other rows too.
    ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
    ::mallopt(M_MMAP_THRESHOLD, 64 << 20);
  }
  // Repetitions in random interleaved order: the ratios then come from runs that shared the machine's noise.
  static char interleave[] = "--benchmark_enable_random_interleaving=true";
  if (!interleave_given) args.insert(args.begin() + 1, interleave);
  int n = static_cast<int>(args.size());

  if (const char* dir = std::getenv("AGENTHOST_BENCH_DUMP_DIR"); dir != nullptr && *dir != '\0') {
    for (const auto* k : kinds)
      std::ofstream(std::string(dir) + "/" + k->name + ".jsonl", std::ios::binary) << get(*k).joined;
  }
  for (const auto* k : kinds) {
    const std::string& base = k->name;
    const auto add = [&](const char* what, void (*fn)(benchmark::State&, const bench_kind&), double min_time) {
      benchmark::RegisterBenchmark((base + "/" + what).c_str(), [fn, k](benchmark::State& s) { fn(s, *k); })
          ->Unit(benchmark::kMillisecond)
          ->MinTime(min_time)
          ->Repetitions(3)
          ->ReportAggregatesOnly(true);
    };
    add("Mapper", run_mapper, 0.5);
    add("MapperBatched", run_mapper_batched, 0.5);
    add("SimdjsonParseOnly", run_simdjson, 0.5);
    add("NlohmannDom", run_nlohmann, 0.2);
    add("LineSplit", run_split, 0.2);
    if (k->emits_messages) add("MessagesOnly", run_messages_only, 0.2);
    if (g_across_mappers > 0) add("MapperAcross", run_mapper_across, 0.5);
  }

  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;
  const std::string load_before = load_average();
  capture_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  const std::string load_after = load_average();

  const bool run_it = node && agenthost::bench::have_node();
  std::map<std::string, agenthost::bench::node_result> nodes;
  if (run_it) {
    std::vector<std::pair<std::string, const std::string*>> transcripts;
    for (const auto* k : kinds) transcripts.emplace_back(k->name, &get(*k).joined);
    nodes = agenthost::bench::run_node(AGENTHOST_NODE_BASELINE, transcripts);
  }

  // Summary.
  struct utsname u{};
  ::uname(&u);
  std::printf("\nagenthost_bench_mapper — %ld CPUs, %s %s; load average %s → %s%s\n", ::sysconf(_SC_NPROCESSORS_ONLN),
              u.sysname, u.release, load_before.c_str(), load_after.c_str(),
              run_it ? "" : "; Node not run (--no-node or no `node` on PATH)");
  std::printf("MB/s = 10^6 bytes (without newlines) per second of CPU time, median of 3 interleaved repetitions; "
              "Node: best of 3 rounds, the faster of wall and CPU time\n\n");
  std::printf("| transcript | MB | lines | mapper MB/s (per line) | mapper lines/s | mapper MB/s batched (as agenthost "
              "map) | simdjson On-Demand parse-only MB/s | nlohmann DOM MB/s | Node readline+JSON.parse MB/s | line "
              "split MB/s | per line ÷ Node | per line ÷ simdjson | batched ÷ Node | batched ÷ simdjson | goal (≥ 5× "
              "Node, ≥ 1/3 simdjson) |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  bool all_met = true;
  bool any_row = false;
  for (const auto* k : kinds) {
    const std::string& base = k->name;
    const transcript& t = get(*k).t;
    const auto r = [&](const char* what) {
      const auto it = reporter.results.find(base + "/" + what);
      return it == reporter.results.end() ? result{} : it->second;
    };
    const result mapper = r("Mapper"), batched = r("MapperBatched"), simd = r("SimdjsonParseOnly"),
                 dom = r("NlohmannDom"), split = r("LineSplit");
    if (mapper.bytes_per_second == 0) continue;  // filtered out
    any_row = true;
    double node_mbps = 0;
    if (auto it = nodes.find(k->name); it != nodes.end() && it->second.file_bytes > 0) {
      // Node's figures count the newlines: scale to the bytes the C++ benchmarks count.
      node_mbps = std::max(it->second.wall_mbps, it->second.cpu_mbps) * static_cast<double>(t.bytes) /
                  it->second.file_bytes;
    }
    const double m = mapper.bytes_per_second / 1e6, mb = batched.bytes_per_second / 1e6;
    const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    const double vs_simd = ratio(mapper.bytes_per_second, simd.bytes_per_second);
    const double vs_node = ratio(m, node_mbps);
    const double b_simd = ratio(batched.bytes_per_second, simd.bytes_per_second), b_node = ratio(mb, node_mbps);
    const auto meets = [&](double simd_ratio, double node_ratio) {
      return simd_ratio >= 1.0 / 3.0 && (node_mbps == 0 || node_ratio >= 5.0);
    };
    const bool met = meets(vs_simd, vs_node), met_batched = meets(b_simd, b_node);
    all_met = all_met && met_batched;
    const std::string verdict = met            ? (node_mbps > 0 ? "met" : "met (simdjson part; no Node)")
                                : met_batched ? "met batched; **missed** per line"
                                              : "**missed**";
    const auto times = [&](double v) { return node_mbps > 0 ? "×" + fmt(v, 1) : std::string("–"); };
    std::printf("| %s | %s | %zu | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", base.c_str(),
                fmt(static_cast<double>(t.bytes) / 1e6, 1).c_str(), t.lines.size(), fmt(m).c_str(),
                fmt(mapper.items_per_second).c_str(), fmt(mb).c_str(), fmt(simd.bytes_per_second / 1e6).c_str(),
                fmt(dom.bytes_per_second / 1e6).c_str(), node_mbps > 0 ? fmt(node_mbps).c_str() : "–",
                fmt(split.bytes_per_second / 1e6).c_str(), times(vs_node).c_str(), (fmt(100 * vs_simd) + " %").c_str(),
                times(b_node).c_str(), (fmt(100 * b_simd) + " %").c_str(), verdict.c_str());
  }
  if (!any_row) std::printf("(no mapper benchmark ran)\n");

  // What fresh messages alone cost: the mappers refill the messages handed back (recycle()) instead; where the mapper
  // runs faster than this, parsing and mapping included, that reuse is what pays.
  std::printf("\n| transcript | fresh messages only MB/s (build + destroy copies of the emitted messages, no parsing) | "
              "fresh messages only ÷ simdjson | mapper (per line, recycling) ÷ fresh messages only |\n"
              "|---|---:|---:|---:|\n");
  for (const auto* k : kinds) {
    const auto r = [&](const char* what) {
      const auto it = reporter.results.find(k->name + "/" + what);
      return it == reporter.results.end() ? result{} : it->second;
    };
    const result mapper = r("Mapper"), simd = r("SimdjsonParseOnly"), only = r("MessagesOnly");
    if (only.bytes_per_second == 0 || simd.bytes_per_second == 0) continue;
    std::printf("| %s | %s | %s %% | %s %% |\n", k->name.c_str(), fmt(only.bytes_per_second / 1e6).c_str(),
                fmt(100 * only.bytes_per_second / simd.bytes_per_second).c_str(),
                mapper.bytes_per_second > 0 ? fmt(100 * mapper.bytes_per_second / only.bytes_per_second).c_str() : "–");
    // (a ratio above 100 %: the mapper, parsing included, is faster than allocating its messages anew)
  }
  return strict && !all_met ? 1 : 0;
}
