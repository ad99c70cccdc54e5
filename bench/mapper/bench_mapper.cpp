// agenthost_bench_mapper — throughput of the pi mapper on long generated transcripts.
//
// Transcripts (built in memory, deterministic):
//   snapshot: pi ≤ 0.83 — every message_update carries the delta plus the cumulative message twice (`partial` and
//             `message`), so the log grows quadratically with the answer (20 k characters → ~100 MB).
//   delta:    pi ≥ 0.84 — message_update carries only the delta and a usage object.
// Benchmarks per transcript: our mapper (lines → messages), simdjson On-Demand parse-only (iterate each line, read
// `type`), nlohmann DOM parse of each line. Reported: bytes/s (MB/s) and items/s (lines/s).
//
// Environment: AGENTHOST_BENCH_ANSWER_CHARS (snapshot answer size, default 20000; the delta transcript uses 10×),
// AGENTHOST_BENCH_DUMP_DIR (write both transcripts there as .jsonl, e.g. for bench/mapper/node_baseline.mjs).
#include <agenthost/mapper/pi_mapper.hpp>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

using json = nlohmann::ordered_json;

struct transcript {
  std::vector<std::string> lines;  // each with capacity ≥ size + SIMDJSON_PADDING (for the parse-only baseline)
  std::size_t bytes = 0;
};

std::size_t env_size(const char* name, std::size_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return static_cast<std::size_t>(std::strtoull(v, nullptr, 10));
}

/// Deterministic prose with some multi-byte characters, cut in ~4-character "tokens".
std::vector<std::string> answer_chunks(std::size_t chars) {
  static const char* words[] = {"the ", "mapper ", "reads ", "only ", "what ", "it ", "needs; ", "你好 ",
                                "snapshot ", "delta ", "\n\n", "- item ", "`code` ", "é ", "42. "};
  std::vector<std::string> chunks;
  std::size_t total = 0;
  std::size_t i = 0;
  while (total < chars) {
    std::string w = words[(i * 7 + i / 3) % (sizeof(words) / sizeof(words[0]))];
    total += w.size();
    chunks.push_back(std::move(w));
    ++i;
  }
  return chunks;
}

json usage_json(int in, int out) {
  return {{"input", in},
          {"output", out},
          {"cacheRead", 0},
          {"cacheWrite", 0},
          {"totalTokens", in + out},
          {"cost", {{"input", 0}, {"output", 0}, {"cacheRead", 0}, {"cacheWrite", 0}, {"total", 0}}}};
}

json assistant(const std::string& text, const char* stop) {
  json content = json::array();
  if (!text.empty()) content.push_back({{"type", "text"}, {"text", text}});
  return {{"role", "assistant"}, {"content", content},   {"api", "openai-completions"}, {"provider", "local"},
          {"model", "fake-model"}, {"usage", usage_json(0, 0)}, {"stopReason", stop},
          {"timestamp", 1795978154187LL}, {"responseId", "chatcmpl-fake"}};
}

void add(transcript& t, const json& j) {
  std::string s = j.dump();
  t.bytes += s.size();
  s.reserve(s.size() + simdjson::SIMDJSON_PADDING);
  t.lines.push_back(std::move(s));
}

transcript make(std::size_t chars, bool snapshot_era) {
  transcript t;
  add(t, {{"type", "session"}, {"version", 3}, {"id", "01a228a3-d083-76d7-a9f9-b93789e48028"},
          {"timestamp", "2026-11-29T18:49:14.116Z"}, {"cwd", "/home/user/project"}});
  add(t, {{"type", "agent_start"}});
  add(t, {{"type", "turn_start"}});
  json user = {{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", "Write a long answer."}}})},
               {"timestamp", 1795978154134LL}};
  add(t, {{"type", "message_start"}, {"message", user}});
  add(t, {{"type", "message_end"}, {"message", user}});
  add(t, {{"type", "message_start"}, {"message", assistant("", snapshot_era ? "stop" : "pending")}});
  std::string text;
  const auto chunks = answer_chunks(chars);
  for (const auto& c : chunks) {
    text += c;
    json ame = {{"type", "text_delta"}, {"contentIndex", 0}, {"delta", c}};
    if (snapshot_era) {
      const json partial = assistant(text, "stop");
      ame["partial"] = partial;
      add(t, {{"type", "message_update"}, {"assistantMessageEvent", ame}, {"message", partial}});
    } else {
      add(t, {{"type", "message_update"}, {"usage", usage_json(0, 0)}, {"assistantMessageEvent", ame}});
    }
  }
  json final_message = assistant(text, "stop");
  final_message["usage"] = usage_json(1000, static_cast<int>(chunks.size()));
  add(t, {{"type", "message_end"}, {"message", final_message}});
  add(t, {{"type", "turn_end"}, {"message", final_message}, {"toolResults", json::array()}});
  add(t, {{"type", "agent_end"}, {"messages", json::array({user, final_message})}, {"willRetry", false}});
  if (!snapshot_era) add(t, {{"type", "agent_settled"}, {"aborted", false}});
  return t;
}

const transcript& snapshot_transcript() {
  static const transcript t = make(env_size("AGENTHOST_BENCH_ANSWER_CHARS", 20000), true);
  return t;
}

const transcript& delta_transcript() {
  static const transcript t = make(10 * env_size("AGENTHOST_BENCH_ANSWER_CHARS", 20000), false);
  return t;
}

void report(benchmark::State& state, const transcript& t) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(t.bytes));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(t.lines.size()));
  state.counters["MB"] = static_cast<double>(t.bytes) / 1e6;
  state.counters["lines"] = static_cast<double>(t.lines.size());
}

void run_mapper(benchmark::State& state, const transcript& t) {
  std::size_t messages = 0;
  std::vector<agenthost::transport::message> out;
  for (auto _ : state) {
    agenthost::mapper::pi_mapper mapper;
    for (const auto& l : t.lines) {
      mapper.on_line(l, out);
      messages += out.size();
      out.clear();  // a provider hands messages on; do not let the vector grow with the run
    }
    mapper.finish({.status = agenthost::process::exited{0}}, out);
    if (out.empty() || out.back().type != agenthost::transport::message_type::terminal_completed) {
      state.SkipWithError("the mapper did not complete the run");
      break;
    }
    out.clear();
  }
  benchmark::DoNotOptimize(messages);
  report(state, t);
}

void run_simdjson(benchmark::State& state, const transcript& t) {
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

void run_nlohmann(benchmark::State& state, const transcript& t) {
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

void BM_Snapshot_Mapper(benchmark::State& s) { run_mapper(s, snapshot_transcript()); }
void BM_Snapshot_SimdjsonParseOnly(benchmark::State& s) { run_simdjson(s, snapshot_transcript()); }
void BM_Snapshot_NlohmannDom(benchmark::State& s) { run_nlohmann(s, snapshot_transcript()); }
void BM_Delta_Mapper(benchmark::State& s) { run_mapper(s, delta_transcript()); }
void BM_Delta_SimdjsonParseOnly(benchmark::State& s) { run_simdjson(s, delta_transcript()); }
void BM_Delta_NlohmannDom(benchmark::State& s) { run_nlohmann(s, delta_transcript()); }

BENCHMARK(BM_Snapshot_Mapper)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_Snapshot_SimdjsonParseOnly)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_Snapshot_NlohmannDom)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_Delta_Mapper)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_Delta_SimdjsonParseOnly)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_Delta_NlohmannDom)->Unit(benchmark::kMillisecond)->MinTime(2.0);

void dump_if_asked() {
  const char* dir = std::getenv("AGENTHOST_BENCH_DUMP_DIR");
  if (dir == nullptr || *dir == '\0') return;
  for (const auto& [name, t] : {std::pair{"pi-snapshot.jsonl", &snapshot_transcript()},
                                std::pair{"pi-delta.jsonl", &delta_transcript()}}) {
    std::ofstream f(std::string(dir) + "/" + name, std::ios::binary);
    for (const auto& l : t->lines) f << l << '\n';
  }
}

}  // namespace

int main(int argc, char** argv) {
  dump_if_asked();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
