// pi mappers that share a thread, and a mapper that changes threads: the line parser's event record is per thread
// (mapper/src/pi_event.hpp), so interleaving lines of several agents, or moving a mapper to another thread between
// lines, must give exactly the messages each mapper gives alone.
#include "pi_mapper_test_util.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace agenthost::mapper::test {
namespace {

// Transcripts of every kind pi writes: snapshot era (tool turns, thinking, errors, retries) and delta-only.
std::vector<std::vector<std::string>> transcripts() {
  std::vector<std::vector<std::string>> t;
  for (const auto* name : {"recorded/pi-0.73.1-tool.jsonl", "recorded/pi-0.73.1-long-tool.jsonl",
                           "recorded/pi-0.73.1-repeat-after-tool.jsonl", "recorded/pi-0.73.1-http500.jsonl",
                           "recorded/pi-0.73.1-cut-retry.jsonl", "pi-0.73.1-json-thinking.jsonl",
                           "derived-1.x-delta-only-tool-turn.jsonl", "pi-0.73.1-json-503-auto-retry.jsonl",
                           "synthetic/cross-turn-replay.jsonl", "synthetic/invalid-lines.jsonl"}) {
    t.push_back(read_lines(fixture_path(name)));
    EXPECT_FALSE(t.back().empty()) << name;
  }
  return t;
}

std::vector<std::string> alone(const std::vector<std::vector<std::string>>& t) {
  std::vector<std::string> expected;
  for (const auto& lines : t) expected.push_back(to_jsonl(run_mapper(lines)));
  return expected;
}

TEST(PiMapperThreads, InterleavedMappersOnOneThreadMapAsEachAlone) {
  const auto t = transcripts();
  const auto expected = alone(t);
  std::vector<std::unique_ptr<pi_mapper>> mappers;
  std::vector<std::vector<message>> out(t.size());
  for (std::size_t i = 0; i < t.size(); ++i) mappers.push_back(std::make_unique<pi_mapper>(pi_mapper_options{}));
  // One line of each agent in turn, as one io_context thread serves many agents.
  for (std::size_t line = 0, left = t.size(); left > 0; ++line) {
    left = 0;
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (line >= t[i].size()) continue;
      ++left;
      mappers[i]->on_line(t[i][line], out[i]);
    }
  }
  for (std::size_t i = 0; i < t.size(); ++i) {
    mappers[i]->finish(exited(0), out[i]);
    EXPECT_EQ(to_jsonl(out[i]), expected[i]) << "transcript " << i;
  }
}

TEST(PiMapperThreads, AMapperThatChangesThreadsBetweenLinesMapsAsAlone) {
  const auto t = transcripts();
  const auto expected = alone(t);
  for (std::size_t i = 0; i < t.size(); ++i) {
    pi_mapper moved(pi_mapper_options{});
    pi_mapper stays(pi_mapper_options{});  // keeps the main thread's record busy with another agent's lines in between
    std::vector<message> out, other;
    const auto& lines = t[i];
    const auto& other_lines = t[(i + 1) % t.size()];
    for (std::size_t l = 0; l < lines.size(); ++l) {
      if (l % 2 == 0) {
        moved.on_line(lines[l], out);
      } else {
        std::thread([&] { moved.on_line(lines[l], out); }).join();
      }
      if (l < other_lines.size()) stays.on_line(other_lines[l], other);
    }
    moved.finish(exited(0), out);
    EXPECT_EQ(to_jsonl(out), expected[i]) << "transcript " << i;
  }
}

TEST(PiMapperThreads, MappersMadeOnOneThreadAndRunOnSeveralAtOnceMapAsAlone) {
  const auto t = transcripts();
  const auto expected = alone(t);
  // Made here, run on three other threads at the same time: each must use its running thread's record.
  constexpr std::size_t kThreads = 3;
  std::vector<std::vector<std::unique_ptr<pi_mapper>>> mappers(kThreads);
  for (auto& m : mappers) {
    for (std::size_t i = 0; i < t.size(); ++i) m.push_back(std::make_unique<pi_mapper>(pi_mapper_options{}));
  }
  std::vector<std::vector<std::string>> got(kThreads, std::vector<std::string>(t.size()));
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 20; ++round) {  // long enough for the threads to overlap
        for (std::size_t i = 0; i < t.size(); ++i) {
          pi_mapper& m = *mappers[k][i];
          if (round > 0) m = pi_mapper(pi_mapper_options{});
          std::vector<message> out;
          for (const auto& l : t[i]) m.on_line(l, out);
          m.finish(exited(0), out);
          if (round == 0) got[k][i] = to_jsonl(out);
          else if (to_jsonl(out) != got[k][i]) got[k][i] = "differs in round " + std::to_string(round);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& g : got) EXPECT_EQ(g, expected);
}

// A toolCall whose parse fails half-way (here at a bad escape in its arguments, after its id and name) must leave
// nothing for the next line: neither in the same mapper (a toolCall without an id would get the failed line's) nor in
// the next mapper of the thread after the first was destroyed (under ASan: a read of freed memory).
TEST(PiMapperThreads, AToolCallThatFailedHalfWayLeavesNothingForTheNextLine) {
  const std::string session = R"({"type":"session","id":"s"})";
  const std::string start = R"({"type":"message_start","message":{"role":"assistant","content":[],"model":"m"}})";
  const auto call_end = [](const std::string& call) {
    return R"({"type":"message_update","assistantMessageEvent":{"type":"toolcall_end","contentIndex":0,"toolCall":)" +
           call + "}}";
  };
  const std::string failed =
      call_end(R"({"type":"toolCall","id":"call_stale","name":"stale_tool","arguments":{"command":"l\qs"}})");
  const std::string without_id = call_end(R"({"type":"toolCall","arguments":{"command":"pwd"}})");
  const std::string end = R"({"type":"agent_end","messages":[]})";
  // The failed line's id or name in a tool message (the terminal quotes the failed line itself, as it should).
  const auto mentions_stale = [](const std::vector<message>& out) {
    for (const auto& m : out) {
      if (transport::is_terminal(m.type)) continue;
      const auto text = m.content.dump();
      if (text.find("call_stale") != std::string::npos || text.find("stale_tool") != std::string::npos) return true;
    }
    return false;
  };
  // The reference: the same lines without the failed one, on a thread of their own.
  std::vector<message> reference;
  std::thread([&] { reference = run_mapper({session, start, without_id, end}); }).join();
  {
    pi_mapper first(pi_mapper_options{});
    std::vector<message> out;
    for (const auto& l : {session, start, failed}) first.on_line(l, out);
  }
  const auto next = run_mapper({session, start, without_id, end});
  EXPECT_FALSE(mentions_stale(next));
  EXPECT_EQ(to_jsonl(next), to_jsonl(reference));
  const auto same = run_mapper({session, start, failed, without_id, end});
  EXPECT_FALSE(mentions_stale(same)) << to_jsonl(same);
  EXPECT_EQ(terminal(same).content.at("invalid_output_line_count"), 1);
}

}  // namespace
}  // namespace agenthost::mapper::test
