// thought_release_batch and event_mapper::take_more (the Codex and OpenCode mappers): a turn's buffered thoughts are
// released a slice at a time, and whatever the consumer does — asks for every slice, never asks, or asks for some —
// it sees exactly the messages, in the order, that the mapper emits without a batch.
#include "mapper_test_util.hpp"

#include <agenthost/mapper/codex_mapper.hpp>
#include <agenthost/mapper/opencode_mapper.hpp>
#include <agenthost/mapper/pi_mapper.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace agenthost::mapper::test {
namespace {

namespace fs = std::filesystem;

using make_mapper = std::function<std::unique_ptr<event_mapper>(std::size_t batch)>;

make_mapper codex_with(bool merge = false) {
  return [merge](std::size_t batch) -> std::unique_ptr<event_mapper> {
    return std::make_unique<codex_mapper>(
        codex_mapper_options{.merge_adjacent_text = merge, .thought_release_batch = batch});
  };
}

make_mapper opencode_with(bool merge = false) {
  return [merge](std::size_t batch) -> std::unique_ptr<event_mapper> {
    return std::make_unique<opencode_mapper>(
        opencode_mapper_options{.merge_adjacent_text = merge, .thought_release_batch = batch});
  };
}

enum class asking { every_slice, never, first_slice_only };

/// What a consumer sees. It hands messages back (recycle) after every line and every slice; `asking` says when it
/// calls take_more(). `max_slice_thoughts` is the most thoughts one call appended.
std::vector<message> consume(event_mapper& mapper, const std::vector<std::string>& lines, asking how,
                             std::size_t* max_slice_thoughts = nullptr, const run_end& end = exit0) {
  std::vector<message> seen, out;
  auto take = [&] {
    const auto thoughts = static_cast<std::size_t>(std::count_if(
        out.begin(), out.end(), [](const message& m) { return m.type == message_type::assistant_thought; }));
    if (max_slice_thoughts != nullptr) *max_slice_thoughts = std::max(*max_slice_thoughts, thoughts);
    seen.insert(seen.end(), out.begin(), out.end());
    mapper.recycle(out);
  };
  for (const auto& l : lines) {
    mapper.on_line(l, out);
    take();
    if (how == asking::never) continue;
    while (mapper.take_more(out)) {
      EXPECT_FALSE(out.empty()) << "take_more() said it appended, but appended nothing";
      take();
      if (how == asking::first_slice_only) break;
    }
    if (how == asking::every_slice) {
      EXPECT_FALSE(mapper.take_more(out));  // once it said false, nothing more is held back
      EXPECT_TRUE(out.empty());
    }
  }
  mapper.finish(end, out);
  take();
  return seen;
}

std::vector<std::string> lines_of(const std::string& dir) {
  std::vector<std::string> lines;
  for (const auto& e : fs::directory_iterator(fs::path(AGENTHOST_FIXTURES_DIR) / dir)) {
    if (e.path().extension() != ".jsonl") continue;
    auto more = read_lines(e.path().string());
    lines.insert(lines.end(), more.begin(), more.end());
  }
  return lines;
}

/// A codex run of `turns` turns, each with `thoughts` reasoning items between commands and messages.
std::vector<std::string> codex_turns(std::size_t turns, std::size_t thoughts) {
  std::vector<std::string> l = {R"({"type":"thread.started","thread_id":"t-1"})"};
  std::size_t item = 0;
  for (std::size_t t = 0; t < turns; ++t) {
    l.emplace_back(R"({"type":"turn.started"})");
    for (std::size_t i = 0; i < thoughts; ++i) {
      const std::string id = "item_" + std::to_string(item++);
      l.push_back(R"({"type":"item.completed","item":{"id":")" + id + R"(","type":"reasoning","text":"thought )" +
                  std::to_string(t) + "." + std::to_string(i) + R"("}})");
      if (i % 5 == 4) {
        const std::string cmd = "item_" + std::to_string(item++);
        l.push_back(R"({"type":"item.started","item":{"id":")" + cmd +
                    R"(","type":"command_execution","command":"ls","aggregated_output":"","exit_code":null,"status":"in_progress"}})");
        l.push_back(R"({"type":"item.completed","item":{"id":")" + cmd +
                    R"(","type":"command_execution","command":"ls","aggregated_output":"a\n","exit_code":0,"status":"completed"}})");
      }
    }
    l.push_back(R"({"type":"item.completed","item":{"id":"item_)" + std::to_string(item++) +
                R"(","type":"agent_message","text":"done )" + std::to_string(t) + R"("}})");
    l.emplace_back(R"({"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":3}})");
  }
  return l;
}

/// An opencode run whose final step holds `thoughts` reasoning parts (after a tool step holding as many).
std::vector<std::string> opencode_steps(std::size_t thoughts) {
  const std::string session = R"("sessionID":"ses_1")";
  std::vector<std::string> l;
  std::size_t part = 0;
  auto step = [&](const std::string& message_id, const std::string& reason) {
    l.push_back(R"({"type":"step_start","timestamp":1,)" + session + R"(,"part":{"id":"prt_s)" +
                std::to_string(part++) + R"(","messageID":")" + message_id + R"(",)" + session +
                R"(,"type":"step-start"}})");
    for (std::size_t i = 0; i < thoughts; ++i)
      l.push_back(R"({"type":"reasoning","timestamp":1,)" + session + R"(,"part":{"id":"prt_r)" +
                  std::to_string(part++) + R"(","messageID":")" + message_id + R"(",)" + session +
                  R"(,"type":"reasoning","text":"thought )" + message_id + "." + std::to_string(i) +
                  R"(","time":{"start":1,"end":2}}})");
    l.push_back(R"({"type":"text","timestamp":1,)" + session + R"(,"part":{"id":"prt_t)" + std::to_string(part++) +
                R"(","messageID":")" + message_id + R"(",)" + session +
                R"(,"type":"text","text":"step )" + message_id + R"(","time":{"start":1,"end":2}}})");
    l.push_back(R"({"type":"step_finish","timestamp":1,)" + session + R"(,"part":{"id":"prt_f)" +
                std::to_string(part++) + R"(","reason":")" + reason + R"(","messageID":")" + message_id + R"(",)" +
                session +
                R"(,"type":"step-finish","tokens":{"total":3,"input":1,"output":2,"reasoning":0,"cache":{"write":0,"read":0}},"cost":0}})");
  };
  step("msg_1", "tool-calls");
  step("msg_2", "stop");
  return l;
}

struct release_case {
  std::string name;
  make_mapper make;
  std::vector<std::string> lines;
  std::size_t thoughts;  // assistant.thought messages the run emits
};

std::vector<release_case> cases() {
  return {
      {"codex recorded", codex_with(), lines_of("codex/recorded"), 0},
      {"codex 3 turns of 40", codex_with(), codex_turns(3, 40), 120},
      {"codex merged text, 2 turns of 17", codex_with(true), codex_turns(2, 17), 34},
      {"opencode recorded", opencode_with(), lines_of("opencode/recorded"), 0},
      {"opencode 2 steps of 30", opencode_with(), opencode_steps(30), 60},
      {"opencode merged text, 2 steps of 9", opencode_with(true), opencode_steps(9), 18},
  };
}

TEST(ThoughtRelease, EveryConsumerSeesWhatAnUnbatchedMapperEmits) {
  for (const auto& c : cases()) {
    const auto reference_mapper = c.make(0);
    const auto reference = consume(*reference_mapper, c.lines, asking::never);
    if (c.thoughts != 0) {
      EXPECT_EQ(of_type(reference, message_type::assistant_thought).size(), c.thoughts) << c.name;
      expect_valid_run(reference);
    }
    for (const std::size_t batch : {1, 3, 8, 1000}) {
      for (const asking how : {asking::every_slice, asking::never, asking::first_slice_only}) {
        SCOPED_TRACE(c.name + ", batch " + std::to_string(batch) + ", asking " +
                     std::to_string(static_cast<int>(how)));
        const auto mapper = c.make(batch);
        std::size_t max_slice = 0;
        const auto seen = consume(*mapper, c.lines, how, &max_slice);
        EXPECT_EQ(to_jsonl(seen), to_jsonl(reference));
        // A consumer that asks for every slice never gets more than a batch of thoughts from one call.
        if (how == asking::every_slice) {
          EXPECT_LE(max_slice, batch);
        }
      }
    }
  }
}

// The slices of one release: batch, batch, …, the rest; the turn's other messages are not held back.
TEST(ThoughtRelease, ATurnsThoughtsComeInSlicesAfterTheLineThatEndsIt) {
  const auto lines = codex_turns(1, 10);
  codex_mapper mapper({.thought_release_batch = 4});
  std::vector<message> out;
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    mapper.on_line(lines[i], out);
    EXPECT_FALSE(mapper.take_more(out)) << "line " << i;
  }
  EXPECT_TRUE(of_type(out, message_type::assistant_thought).empty());  // buffered until the turn ends
  out.clear();
  mapper.on_line(lines.back(), out);  // turn.completed
  EXPECT_EQ(texts(out, message_type::assistant_thought),
            (std::vector<std::string>{"thought 0.0", "thought 0.1", "thought 0.2", "thought 0.3"}));
  EXPECT_TRUE(mapper.agent_finished());
  out.clear();
  ASSERT_TRUE(mapper.take_more(out));
  EXPECT_EQ(texts(out, message_type::assistant_thought),
            (std::vector<std::string>{"thought 0.4", "thought 0.5", "thought 0.6", "thought 0.7"}));
  out.clear();
  ASSERT_TRUE(mapper.take_more(out));
  EXPECT_EQ(texts(out, message_type::assistant_thought), (std::vector<std::string>{"thought 0.8", "thought 0.9"}));
  out.clear();
  EXPECT_FALSE(mapper.take_more(out));
  EXPECT_TRUE(out.empty());
  mapper.finish(exit0, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out.back().type, message_type::terminal_completed);
}

// A release cut short, then a new turn, an oversize line or the end: what is held back comes first.
TEST(ThoughtRelease, HeldBackThoughtsComeBeforeAnythingElse) {
  const auto two_turns = codex_turns(2, 6);
  {
    codex_mapper mapper({.thought_release_batch = 2});
    std::vector<message> out;
    for (const auto& l : two_turns) mapper.on_line(l, out);
    mapper.finish(exit0, out);
    const auto thoughts = texts(out, message_type::assistant_thought);
    ASSERT_EQ(thoughts.size(), 12u);
    EXPECT_EQ(thoughts[5], "thought 0.5");
    EXPECT_EQ(thoughts[6], "thought 1.0");
    // The first turn's thoughts all precede the second turn's first message.
    EXPECT_LT(index_of_last(out, message_type::assistant_thought),
              index_of_first(out, message_type::terminal_completed));
    expect_valid_run(out);
  }
  {
    const auto one_turn = codex_turns(1, 6);
    codex_mapper mapper({.thought_release_batch = 2});
    std::vector<message> out;
    for (const auto& l : one_turn) mapper.on_line(l, out);
    EXPECT_EQ(of_type(out, message_type::assistant_thought).size(), 2u);
    mapper.on_oversize_line(R"({"type":"item.completed")", 50u << 20, out);
    EXPECT_EQ(of_type(out, message_type::assistant_thought).size(), 6u);
    EXPECT_FALSE(mapper.take_more(out));
    mapper.finish(exit0, out);
    EXPECT_EQ(mapper.stats().invalid_lines, 1u);
    expect_valid_run(out);
  }
  {
    // Stopped or killed right after the turn's last line: finish() appends the rest, then the terminal.
    const auto one_turn = codex_turns(1, 7);
    codex_mapper mapper({.thought_release_batch = 3});
    std::vector<message> out;
    for (const auto& l : one_turn) mapper.on_line(l, out);
    mapper.finish({.status = process::signaled{9, false}}, out);
    EXPECT_EQ(texts(out, message_type::assistant_thought).size(), 7u);
    EXPECT_TRUE(out.back().is_terminal());
    EXPECT_FALSE(mapper.take_more(out));
    expect_valid_run(out);
  }
}

TEST(ThoughtRelease, StreamedThinkingAndOtherMappersHoldNothingBack) {
  codex_mapper streaming({.thinking = thinking_mode::stream, .thought_release_batch = 1});
  std::vector<message> out;
  for (const auto& l : codex_turns(1, 5)) {
    streaming.on_line(l, out);
    EXPECT_FALSE(streaming.take_more(out));
  }
  EXPECT_EQ(of_type(out, message_type::assistant_thought).size(), 5u);
  pi_mapper pi;
  EXPECT_FALSE(pi.take_more(out));  // event_mapper's default
}

}  // namespace
}  // namespace agenthost::mapper::test
