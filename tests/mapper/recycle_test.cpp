// event_mapper::recycle: handing consumed messages back changes nothing in what a mapper emits (every recorded
// transcript of every agent, also when the consumer modified the messages it handed back), reuses their storage (a
// steady stream allocates nothing), and keeps no large buffer. And object_writer, which refills a recycled message's
// content in place.
#include "../common/replace_operator_new.hpp"
#include "mapper_test_util.hpp"
#include "message_reuse.hpp"
#include "ondemand_util.hpp"
#include "pi_mapper_impl.hpp"

#include <agenthost/mapper/claude_mapper.hpp>
#include <agenthost/mapper/codex_mapper.hpp>
#include <agenthost/mapper/gemini_mapper.hpp>
#include <agenthost/mapper/opencode_mapper.hpp>
#include <agenthost/mapper/pi_mapper.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <new>

// Counts this thread's allocations while a test asks for it (allocations_in): this test program replaces the global
// operator new and delete (replace_operator_new.hpp).
namespace {
thread_local bool t_counting = false;
thread_local std::size_t t_allocations = 0;
thread_local std::size_t t_bytes = 0;
}  // namespace

void* test_malloc(std::size_t size) noexcept {
  if (t_counting) {
    ++t_allocations;
    t_bytes += size;
  }
  return std::malloc(size);
}

namespace agenthost::mapper::test {
namespace {

using detail::object_writer;
namespace fs = std::filesystem;

// ---- object_writer --------------------------------------------------------------------------------------------------

TEST(ObjectWriter, SameKeyComparesEveryByteOfEveryLength) {
  // Two overlapping loads for 4–16 bytes: a difference at any position, in keys of any length, must show.
  const std::string base = "abcdefghijklmnopqrstu";
  for (std::size_t n = 0; n <= base.size(); ++n) {
    const std::string a = base.substr(0, n);
    EXPECT_TRUE(detail::same_key(a, std::string(a))) << n;
    EXPECT_FALSE(detail::same_key(a, a + "v")) << n;  // lengths differ
    for (std::size_t i = 0; i < n; ++i) {
      std::string b = a;
      b[i] = static_cast<char>(b[i] ^ 0x20);
      EXPECT_FALSE(detail::same_key(a, b)) << n << " " << i;
    }
  }
}

TEST(ObjectWriter, FillsAnEmptyObject) {
  json j = json::object();
  object_writer w(j);
  w.string("a", "x");
  w.integer("b", 7);
  w.boolean("c", true);
  w.null("d");
  w.value("e", json::array({1, 2}));
  w.done();
  EXPECT_EQ(j, json::parse(R"({"a":"x","b":7,"c":true,"d":null,"e":[1,2]})"));
}

TEST(ObjectWriter, OverwritesInPlaceAndKeepsTheStringBuffer) {
  json j = {{"name", std::string(100, 'n')}, {"tool_call_id", "id-1"}};
  const char* buffer = j["name"].get_ref<const std::string&>().data();
  object_writer w(j);
  w.string("name", "a shorter name, past the small-string size");
  w.string("tool_call_id", "id-2");
  w.done();
  EXPECT_EQ(j, json::parse(R"({"name":"a shorter name, past the small-string size","tool_call_id":"id-2"})"));
  EXPECT_EQ(j["name"].get_ref<const std::string&>().data(), buffer);  // refilled, not reallocated
}

TEST(ObjectWriter, RemovesWhatItDoesNotWriteBeforeBetweenAndAfter) {
  json j = {{"a", 1}, {"b", 2}, {"c", 3}, {"d", 4}, {"e", 5}, {"f", 6}};
  object_writer w(j);
  w.integer("b", 20);  // "a" before it goes
  w.integer("d", 40);  // "c" between goes
  w.done();            // "e" and "f" after go
  EXPECT_EQ(j, json::parse(R"({"b":20,"d":40})"));
}

TEST(ObjectWriter, InsertsMissingMembersInOrder) {
  json j = {{"b", 2}, {"d", 4}};
  object_writer w(j);
  w.integer("a", 1);
  w.integer("b", 22);
  w.integer("c", 3);
  w.integer("e", 5);
  w.done();  // "d" was skipped over by "e": removed
  EXPECT_EQ(j, json::parse(R"({"a":1,"b":22,"c":3,"e":5})"));
}

TEST(ObjectWriter, ReplacesValuesOfAnotherTypeAndNonObjects) {
  json j = json::array({1, 2, 3});
  {
    object_writer w(j);
    w.string("text", "hello");
    w.done();
  }
  EXPECT_EQ(j, json::parse(R"({"text":"hello"})"));
  j = {{"input", "not an object"}, {"text", 42}};
  object_writer w(j);
  object_writer input = w.object("input");
  input.string("command", "ls");
  input.done();
  w.string("text", "now a string");
  w.done();
  EXPECT_EQ(j, json::parse(R"({"input":{"command":"ls"},"text":"now a string"})"));
}

TEST(ObjectWriter, RefillsNestedObjects) {
  json j = json::parse(R"({"raw_output":{"command":"ls","exit_code":null,"extra":true,"status":"in_progress"}})");
  object_writer w(j);
  object_writer raw = w.object("raw_output");
  raw.string("command", "make");
  raw.integer("exit_code", 2);
  raw.string("status", "failed");
  raw.done();
  w.done();
  EXPECT_EQ(j, json::parse(R"({"raw_output":{"command":"make","exit_code":2,"status":"failed"}})"));
}

TEST(ObjectWriter, RetainedBytesAreBounded) {
  std::size_t budget = 1024;
  EXPECT_TRUE(detail::retains_at_most(json{{"text", "short"}}, budget));
  EXPECT_LT(budget, 1024U);
  budget = 1024;
  EXPECT_FALSE(detail::retains_at_most(json{{"text", std::string(2000, 'x')}}, budget));
  budget = 1024;
  EXPECT_FALSE(detail::retains_at_most(json{{"a", {{"b", json::array({std::string(2000, 'x')})}}}}, budget));
  budget = 1024;
  json many = json::array();
  for (int i = 0; i < 200; ++i) many.push_back(i);
  EXPECT_FALSE(detail::retains_at_most(json{{"items", many}}, budget));  // elements count too
}

TEST(ObjectWriter, GivesBackALargeStringBufferWhenRefilling) {
  json j = {{"output", std::string(100000, 'o')}};
  object_writer w(j);
  w.string("output", "ok");
  w.done();
  EXPECT_EQ(j.at("output"), "ok");
  EXPECT_LE(j.at("output").get_ref<const std::string&>().capacity(), detail::kMaxKeptBytes);

  json a = {{"items", json::array()}};  // an array refilled by copy_into with far fewer elements
  for (int i = 0; i < 5000; ++i) a["items"].push_back(i);
  detail::copy_into(a, json{{"items", {1, 2}}, {"note", std::string(50000, 'n')}});
  EXPECT_EQ(a.at("items"), json::array({1, 2}));
  EXPECT_LE(a.at("items").get_ref<const json::array_t&>().capacity() * sizeof(json), detail::kMaxKeptBytes);
  detail::copy_into(a, json{{"items", {1}}, {"note", "n"}});  // the copied large string is given back too
  EXPECT_LE(a.at("note").get_ref<const std::string&>().capacity(), detail::kMaxKeptBytes);
}

// ---- message_pool: which handed-back messages it keeps ------------------------------------------------------------

// The message start() hands out next for `type`: a kept one, or a fresh one (an empty object).
json next_content(detail::message_pool& pool, message_type type) {
  std::vector<message> out;
  pool.start(out, type);
  return out.back().content;
}

std::vector<message> one(message_type type, json content) {
  std::vector<message> v;
  v.push_back(message{type, std::move(content)});
  return v;
}

TEST(MessagePool, ALargeMessageIsDroppedOnceAnotherIsKeptOnTopOfIt) {
  detail::message_pool pool;
  auto big = one(message_type::tool_completed, {{"output", std::string(100000, 'o')}});
  auto small = one(message_type::tool_completed, {{"output", "ok"}});
  pool.recycle(big);
  pool.recycle(small);
  EXPECT_EQ(next_content(pool, message_type::tool_completed), json({{"output", "ok"}}));
  EXPECT_EQ(next_content(pool, message_type::tool_completed), json::object());  // not the large one
}

TEST(MessagePool, ALargeMessageOnTopIsDroppedWithinASweep) {
  detail::message_pool pool;
  auto big = one(message_type::assistant, {{"text", std::string(100000, 't')}});
  pool.recycle(big);
  std::vector<message> none;
  for (std::size_t i = 1; i < detail::message_pool::kSweepEvery; ++i) pool.recycle(none);
  EXPECT_EQ(next_content(pool, message_type::assistant), json::object());
}

TEST(MessagePool, KeepsSmallMessagesUpToEightPerTypeLastInFirstOut) {
  detail::message_pool pool;
  for (int i = 0; i < 10; ++i) {
    auto m = one(message_type::assistant_thought, {{"text", std::to_string(i)}});
    pool.recycle(m);
  }
  for (std::size_t i = 0; i < detail::message_pool::kSweepEvery; ++i) {  // a sweep keeps what is small
    std::vector<message> none;
    pool.recycle(none);
  }
  for (int i = 7; i >= 0; --i)
    EXPECT_EQ(next_content(pool, message_type::assistant_thought), json({{"text", std::to_string(i)}}));
  EXPECT_EQ(next_content(pool, message_type::assistant_thought), json::object());
  EXPECT_EQ(next_content(pool, message_type::assistant), json::object());  // kept per type
}

// ---- raw_to_json refills its target in place (the OpenCode fast path converts each tool's input into the last one) -

TEST(RawToJson, RefillingGivesWhatAFreshConversionGives) {
  std::string forty = "{";
  for (int i = 0; i < 40; ++i) forty += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  forty += "}";
  const std::vector<std::string> texts = {
      R"({"a":1,"b":"xx","c":[1,2,3]})",
      R"({"b":"y","d":{"e":null}})",             // a and c go
      R"({"a":"s","b":false,"a":{"x":1}})",       // a repeated key keeps its last value
      R"([1,"two",{"three":3},[4]])",             // an object becomes an array
      R"([true])",                                // which shrinks
      R"({"z":1})",
      forty,                                      // more members than the refill notes: converted again
      forty,                                      // over an object of that many members: starts empty
      R"({})",
      R"("just a string")",
      R"({"nested":{"deep":[{"a":1},{"b":2}],"keep":"k"}})",
      R"({"nested":{"deep":[{"b":3}]}})",
  };
  json target;
  for (const auto& text : texts) {
    const char* end = text.data() + text.size();
    ASSERT_EQ(detail::raw_to_json(text.data(), end, target), end) << text;
    EXPECT_EQ(target, json::parse(text)) << text;
  }
  const std::string fraction = R"({"a":1.5})";  // not the raw path's: the caller lets On-Demand convert it
  EXPECT_EQ(detail::raw_to_json(fraction.data(), fraction.data() + fraction.size(), target), nullptr);
}

// ---- mappers --------------------------------------------------------------------------------------------------------

struct agent_case {
  std::string dir;  // under fixtures/
  std::function<std::unique_ptr<event_mapper>(thinking_mode, bool merge)> make;
};

template <class Mapper, class Options>
agent_case agent(std::string dir) {
  return {std::move(dir), [](thinking_mode thinking, bool merge) -> std::unique_ptr<event_mapper> {
            Options o;
            o.thinking = thinking;
            o.merge_adjacent_text = merge;
            return std::make_unique<Mapper>(std::move(o));
          }};
}

std::vector<agent_case> agents() {
  return {
      agent<claude_mapper, claude_mapper_options>("claude-code/recorded"),
      agent<codex_mapper, codex_mapper_options>("codex/recorded"),
      agent<gemini_mapper, gemini_mapper_options>("gemini/recorded"),
      agent<opencode_mapper, opencode_mapper_options>("opencode/recorded"),
      agent<pi_mapper, pi_mapper_options>("pi/recorded"),
      agent<pi_mapper, pi_mapper_options>("pi"),  // the format-edge transcripts (thinking, errors, delta-only, RPC abort)
  };
}

std::vector<fs::path> transcripts(const std::string& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(AGENTHOST_FIXTURES_DIR) / dir))
    if (e.path().extension() == ".jsonl") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

enum class hand_back { clear, recycle, recycle_modified };

/// What a consumer sees: the lines mapped, the messages taken every `every` lines (and at the end), then handed back
/// as `how` says — a modified message has an extra member, a text of another type, or is no object at all.
std::vector<message> consume(event_mapper& mapper, const std::vector<std::string>& lines, std::size_t every,
                             hand_back how) {
  std::vector<message> seen, out;
  auto take = [&] {
    seen.insert(seen.end(), out.begin(), out.end());
    if (how == hand_back::clear) {
      out.clear();
      return;
    }
    if (how == hand_back::recycle_modified) {
      for (std::size_t i = 0; i < out.size(); ++i) {
        if (i % 3 == 0) out[i].content["zz_added_by_the_consumer"] = 1;
        else if (i % 3 == 1) out[i].content["text"] = 42;
        else out[i].content = json::array({"not", "an", "object"});
      }
    }
    mapper.recycle(out);
    EXPECT_TRUE(out.empty());
  };
  for (std::size_t i = 0; i < lines.size(); ++i) {
    mapper.on_line(lines[i], out);
    if ((i + 1) % every == 0) take();
  }
  mapper.finish(exited(0), out);
  take();
  return seen;
}

TEST(Recycle, EveryRecordedTranscriptMapsTheSameWithRecycledMessages) {
  std::size_t files = 0;
  for (const auto& agent : agents()) {
    for (const auto& file : transcripts(agent.dir)) {
      ++files;
      const auto lines = read_lines(file.string());
      for (const auto thinking : {thinking_mode::buffered, thinking_mode::stream}) {
        for (const std::size_t every : {std::size_t{1}, std::size_t{3}}) {
          const bool merge = every > 1;  // as the providers: merged text deltas, consumed per read
          const auto reference = consume(*agent.make(thinking, merge), lines, every, hand_back::clear);
          const auto recycled = consume(*agent.make(thinking, merge), lines, every, hand_back::recycle);
          const auto modified = consume(*agent.make(thinking, merge), lines, every, hand_back::recycle_modified);
          const std::string what = file.filename().string() + (thinking == thinking_mode::stream ? " stream" : "") +
                                   " every " + std::to_string(every);
          ASSERT_FALSE(reference.empty()) << what;
          EXPECT_EQ(to_jsonl(recycled), to_jsonl(reference)) << what;
          EXPECT_EQ(to_jsonl(modified), to_jsonl(reference)) << what;
        }
      }
    }
  }
  EXPECT_GE(files, 50U);  // every agent's recorded transcripts were found
}

/// A Codex run of `n` tool calls, as codex prints them.
std::vector<std::string> codex_commands(std::size_t n, const std::string& output) {
  std::vector<std::string> lines = {R"({"type":"thread.started","thread_id":"t-1"})", R"({"type":"turn.started"})"};
  for (std::size_t i = 0; i < n; ++i) {
    const std::string id = "item_" + std::to_string(i);
    lines.push_back(R"({"type":"item.started","item":{"id":")" + id +
                    R"(","type":"command_execution","command":"/bin/bash -lc 'make test'","aggregated_output":"","exit_code":null,"status":"in_progress"}})");
    lines.push_back(R"({"type":"item.completed","item":{"id":")" + id +
                    R"(","type":"command_execution","command":"/bin/bash -lc 'make test'","aggregated_output":")" +
                    output + R"(","exit_code":0,"status":"completed"}})");
  }
  return lines;
}

TEST(Recycle, ARecycledMessageIsRefilledInPlace) {
  codex_mapper mapper;
  const auto lines = codex_commands(3, std::string(200, 'o'));
  std::vector<message> out;
  const char* first_output = nullptr;
  std::size_t completed = 0;
  for (const auto& l : lines) {
    mapper.on_line(l, out);
    for (const auto& m : out) {
      if (m.type != message_type::tool_completed) continue;
      const auto& output = m.content.at("output").get_ref<const std::string&>();
      EXPECT_EQ(output, std::string(200, 'o'));
      if (completed++ == 0) {
        first_output = output.data();
      } else {
        EXPECT_EQ(output.data(), first_output);  // the same buffer, refilled
      }
    }
    mapper.recycle(out);
  }
  EXPECT_EQ(completed, 3U);
}

/// The operator new calls `f` makes on this thread.
template <class F>
std::size_t allocations_in(F&& f) {
  const std::size_t before = t_allocations;
  t_counting = true;
  std::forward<F>(f)();
  t_counting = false;
  return t_allocations - before;
}

/// An OpenCode run of `n` tool calls, each reported once, completed, as `opencode run --format json` prints them.
std::vector<std::string> opencode_tool_uses(std::size_t n) {
  std::vector<std::string> lines;
  for (std::size_t i = 0; i < n; ++i) {
    lines.push_back(
        R"({"type":"tool_use","timestamp":1796011996448,"sessionID":"ses_1","part":{"type":"tool","tool":"bash",)"
        R"("callID":"call_)" + std::to_string(i) +
        R"(","state":{"status":"completed","input":{"command":"ls src"},"output":"main.cpp\nparser.cpp\n",)"
        R"("metadata":{"output":"main.cpp\nparser.cpp\n","exit":0,"truncated":false},"title":"ls src",)"
        R"("time":{"start":1796011996148,"end":1796011996348}},"id":"prt_)" + std::to_string(i) +
        R"(","sessionID":"ses_1","messageID":"msg_1"}})");
  }
  return lines;
}

TEST(Recycle, ASteadyRunOfToolCallsAllocatesNothing) {
  // Each message comes back before the next line, so each is refilled in place: same keys, same string buffers.
  // A writer that writes a message's keys out of order (object_writer inserts and erases members then) or a
  // bookkeeping table that allocates per call fails this. The first calls fill the pool and the tables.
  struct run {
    std::string what;
    std::unique_ptr<event_mapper> mapper;
    std::vector<std::string> lines;
  };
  run runs[] = {
      {"codex", std::make_unique<codex_mapper>(), codex_commands(1500, "ok 12/12\\n")},
      {"opencode", std::make_unique<opencode_mapper>(), opencode_tool_uses(1500)},
  };
  for (auto& r : runs) {
    const std::size_t warm_up = r.lines.size() - 200;  // past the 1,024 closed ids remembered: their ring is full
    std::vector<message> out;
    std::size_t messages = 0;
    auto map = [&](std::size_t from, std::size_t to) {
      for (std::size_t i = from; i < to; ++i) {
        r.mapper->on_line(r.lines[i], out);
        messages += out.size();
        r.mapper->recycle(out);
      }
    };
    map(0, warm_up);
    const std::size_t before = messages;
    EXPECT_EQ(allocations_in([&] { map(warm_up, r.lines.size()); }), 0U) << r.what;
    EXPECT_GE(messages - before, 200U) << r.what;  // every line was mapped into messages
    EXPECT_EQ(r.mapper->stats().invalid_lines, 0U) << r.what;
  }
}

/// One pi ≥ 0.84 assistant message: a thinking block and a text block streamed in `deltas` deltas each, then its end.
std::vector<std::string> pi_delta_message(std::size_t deltas) {
  const auto update = [](const nlohmann::json& ame) {
    return nlohmann::json{{"type", "message_update"}, {"assistantMessageEvent", ame}}.dump();
  };
  std::vector<std::string> lines;
  lines.push_back(R"({"type":"message_start","message":{"role":"assistant","content":[]}})");
  lines.push_back(update({{"type", "thinking_start"}, {"contentIndex", 0}}));
  std::string thinking, text;
  for (std::size_t i = 0; i < deltas; ++i) {
    const std::string d = "thought " + std::to_string(i) + ". ";
    thinking += d;
    lines.push_back(update({{"type", "thinking_delta"}, {"contentIndex", 0}, {"delta", d}}));
  }
  lines.push_back(update({{"type", "thinking_end"}, {"contentIndex", 0}, {"content", thinking}}));
  lines.push_back(update({{"type", "text_start"}, {"contentIndex", 1}}));
  for (std::size_t i = 0; i < deltas; ++i) {
    const std::string d = "word " + std::to_string(i) + " ";
    text += d;
    lines.push_back(update({{"type", "text_delta"}, {"contentIndex", 1}, {"delta", d}}));
  }
  lines.push_back(update({{"type", "text_end"}, {"contentIndex", 1}, {"content", text}}));
  lines.push_back(nlohmann::json{{"type", "message_end"},
                                 {"message",
                                  {{"role", "assistant"},
                                   {"stopReason", "stop"},
                                   {"content",
                                    {{{"type", "thinking"}, {"thinking", thinking}}, {{"type", "text"}, {"text", text}}}}}}}
                      .dump());
  return lines;
}

TEST(Recycle, APiMessageStreamsIntoTheBuffersThePreviousMessageLeft) {
  // The blocks' text (and what the consumer saw of the message) is kept across messages: the deltas of a message no
  // longer than the previous one allocate nothing, in either thinking mode (buffered: its thinking is copied out at
  // the message's end, the block's buffer stays). Freed at each message, a block regrew by ~10 reallocations.
  for (const thinking_mode mode : {thinking_mode::buffered, thinking_mode::stream}) {
    pi_mapper mapper({.thinking = mode});
    const auto lines = pi_delta_message(400);
    std::vector<message> out;
    std::string text;
    auto map = [&](std::size_t from, std::size_t to) {
      for (std::size_t i = from; i < to; ++i) {
        mapper.on_line(lines[i], out);
        for (const auto& m : out) {
          if (m.type == message_type::assistant) text += m.content.at("text").get_ref<const std::string&>();
        }
        mapper.recycle(out);
      }
    };
    map(0, lines.size());
    const std::string first = text;
    text.clear();
    map(0, 1);  // message_start
    const std::size_t deltas_end = lines.size() - 2;  // before text_end and message_end
    EXPECT_EQ(allocations_in([&] { map(1, deltas_end); }), 0U) << (mode == thinking_mode::stream ? "stream" : "");
    map(deltas_end, lines.size());
    EXPECT_EQ(text, first);  // the second message's text, whole, from its own deltas
    EXPECT_EQ(mapper.stats().invalid_lines, 0U);
  }
}

TEST(PiBlockList, KeepsTheBuffersOfOrdinaryBlocksOnlyAndResetsReusedSlots) {
  detail::block_list blocks;
  blocks.grow_to(2);
  blocks[0].text.assign(200000, 'x');  // a long answer: more than kMaxKeptBlockBytes
  blocks[0].kind = detail::block_kind::text;
  blocks[0].ended = true;
  blocks[1].text.assign(3000, 'y');
  blocks[1].kind = detail::block_kind::thinking;
  blocks[1].released = true;
  const char* small_buffer = blocks[1].text.data();
  blocks.grow_to(51);
  blocks[50].text.assign(3000, 'z');  // beyond the kMaxKeptBlocks slots kept
  blocks.clear();
  EXPECT_TRUE(blocks.empty());

  blocks.grow_to(51);
  ASSERT_EQ(blocks.size(), 51U);
  for (const auto& b : blocks) {  // every slot is a new block, whatever it held before
    EXPECT_EQ(b.kind, detail::block_kind::other);
    EXPECT_TRUE(b.text.empty());
    EXPECT_FALSE(b.ended);
    EXPECT_FALSE(b.released);
  }
  EXPECT_LE(blocks[0].text.capacity(), detail::block_list::kMaxKeptBlockBytes);  // the large buffer was given back
  EXPECT_EQ(blocks[1].text.data(), small_buffer);                                // the ordinary one was kept
  EXPECT_GE(blocks[1].text.capacity(), 3000U);
  EXPECT_LT(blocks[50].text.capacity(), 3000U);  // its slot was dropped
  blocks.emplace_back().kind = detail::block_kind::tool_call;
  EXPECT_EQ(blocks.size(), 52U);
  EXPECT_EQ(blocks.back().kind, detail::block_kind::tool_call);
}

TEST(Recycle, KeepsNoLargeBuffer) {
  codex_mapper mapper;
  auto lines = codex_commands(1, std::string(100000, 'o'));
  const auto small = codex_commands(2, "ok");
  lines.insert(lines.end(), small.end() - 2, small.end());  // item_1, with a short output
  std::vector<message> out;
  std::size_t completed = 0;
  for (const auto& l : lines) {
    mapper.on_line(l, out);
    for (const auto& m : out) {
      if (m.type != message_type::tool_completed) continue;
      // The 100 kB message was not kept: the next one does not carry its buffer.
      if (completed++ == 1) {
        EXPECT_LT(m.content.at("output").get_ref<const std::string&>().capacity(), 32U * 1024);
      }
    }
    mapper.recycle(out);
  }
  EXPECT_EQ(completed, 2U);
}

// A hostile Claude line: a content array of a million `{}` (3 MB). The parser kept a slot per element (88 bytes and
// more: a 64 MiB line of them took gigabytes); now only what the mapper can use past the positions it follows. A tool
// result after them still closes its call.
TEST(Recycle, AClaudeMessageOfAMillionEmptyBlocksTakesNoSlotEach) {
  std::string content = "{}";
  for (int i = 1; i < 1000000; ++i) content += ",{}";
  const std::string tail = R"(,{"type":"tool_result","tool_use_id":"t1","content":"done"}]},"session_id":"s"})";
  const std::string line = R"({"type":"user","message":{"role":"user","content":[)" + content + tail;
  claude_mapper mapper;
  std::vector<message> out;
  // The parser's own buffers (the line's padded copy, simdjson's index of it) are sized by a first line as long.
  mapper.on_line(json{{"type", "user"}, {"message", {{"content", std::string(line.size(), 'x')}}}}.dump(), out);
  mapper.on_line(R"({"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash",)"
                 R"("input":{"command":"true"}}]},"session_id":"s"})",
                 out);
  out.clear();
  const std::size_t before = t_bytes;
  t_counting = true;
  mapper.on_line(line, out);
  t_counting = false;
  EXPECT_LT(t_bytes - before, line.size() / 2);
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(out[0].type, message_type::tool_completed);
  EXPECT_EQ(out[0].content.at("tool_call_id"), "t1");
}

TEST(Recycle, TheDefaultOnlyClears) {
  struct minimal final : event_mapper {
    void on_line(std::string_view, std::vector<message>&) override {}
    void on_oversize_line(std::string_view, std::size_t, std::vector<message>&) override {}
    [[nodiscard]] bool agent_finished() const noexcept override { return false; }
    void finish(const run_end&, std::vector<message>&) override {}
    [[nodiscard]] const mapper_stats& stats() const noexcept override { return s; }
    mapper_stats s;
  } m;
  std::vector<message> used(3);
  m.recycle(used);
  EXPECT_TRUE(used.empty());
}

}  // namespace
}  // namespace agenthost::mapper::test
