// Helpers shared by the mapper tests: reading transcripts, driving a mapper over them, picking messages out of what
// it emits, and the mock model's script the recorded transcripts were made from.
#pragma once

#include <agenthost/mapper/event_mapper.hpp>
#include <agenthost/mapper/pi_mapper.hpp>
#include <agenthost/transport/contract_checker.hpp>
#include <agenthost/transport/message.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace agenthost::mapper::test {

using transport::message;
using transport::message_type;
using json = nlohmann::json;

// ---- transcripts ----------------------------------------------------------------------------------------------------

/// A whole file as bytes (empty if it cannot be read: the callers' own checks say which file is missing).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Lines of a file split on '\n' (a final empty piece after the last newline is dropped).
inline std::vector<std::string> read_lines(const std::string& path) {
  const std::string body = read_file(path);
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < body.size()) {
    std::size_t nl = body.find('\n', start);
    if (nl == std::string::npos) nl = body.size();
    lines.push_back(body.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

/// The same transcript with every object's keys sorted (so `type` is no longer first): the mappers' fast paths expect
/// the agent's own key order, so this sends the same events down the general path.
inline std::vector<std::string> sorted_keys(const std::vector<std::string>& lines) {
  std::vector<std::string> r;
  for (const auto& l : lines) r.push_back(json::parse(l).dump());
  return r;
}

// ---- picking messages out -------------------------------------------------------------------------------------------

/// The messages as the JSON lines a consumer reads: the form the goldens hold and failure output shows.
inline std::string to_jsonl(const std::vector<message>& messages) {
  std::string s;
  for (const auto& m : messages) {
    s += m.to_json_line();
    s += '\n';
  }
  return s;
}

/// The messages of type `t`, in order.
inline std::vector<message> of_type(const std::vector<message>& messages, message_type t) {
  std::vector<message> r;
  for (const auto& m : messages) {
    if (m.type == t) r.push_back(m);
  }
  return r;
}

/// Index of the first message of type `t`; messages.size() if there is none.
inline std::size_t index_of_first(const std::vector<message>& messages, message_type t) {
  for (std::size_t i = 0; i < messages.size(); ++i)
    if (messages[i].type == t) return i;
  return messages.size();
}

/// Index of the last message of type `t`; messages.size() if there is none.
inline std::size_t index_of_last(const std::vector<message>& messages, message_type t) {
  for (std::size_t i = messages.size(); i-- > 0;)
    if (messages[i].type == t) return i;
  return messages.size();
}

/// A valid run ends with exactly one terminal message, so it is the last one.
inline const message& terminal(const std::vector<message>& messages) { return messages.back(); }

/// The concatenation of all `assistant` deltas.
inline std::string assistant_text(const std::vector<message>& messages) {
  std::string s;
  for (const auto& m : of_type(messages, message_type::assistant)) s += m.content.at("text").get<std::string>();
  return s;
}

/// The `text` of every message of type `t`, in order.
inline std::vector<std::string> texts(const std::vector<message>& messages, message_type t) {
  std::vector<std::string> r;
  for (const auto& m : of_type(messages, t)) r.push_back(m.content.at("text").get<std::string>());
  return r;
}

/// The message types in order, spelled as on the wire so that a mismatch reads like the output.
inline std::vector<std::string> type_names(const std::vector<message>& messages) {
  std::vector<std::string> r;
  for (const auto& m : messages) r.emplace_back(transport::to_string(m.type));
  return r;
}

/// Every run a mapper emits must satisfy the contract, whatever its input; the output is shown when it does not.
inline void expect_valid_run(const std::vector<message>& messages) {
  const auto violations = transport::check_run(messages);
  EXPECT_TRUE(violations.empty()) << ::testing::PrintToString(violations) << "\n" << to_jsonl(messages);
}

// ---- running a mapper -----------------------------------------------------------------------------------------------

/// The end of a run whose process exited with `code` and nothing else happened.
inline run_end exited(int code) { return {.status = process::exited{code}}; }
/// The two ends most recorded transcripts are checked with: a clean exit, and the exit an agent error gives.
inline const run_end exit0 = exited(0);
inline const run_end exit1 = exited(1);

/// Everything a fresh `Mapper` emits for `lines` and then `end`, driven as a provider drives it: every line into one
/// output, then finish once.
template <class Mapper, class Options>
std::vector<message> map_lines(const std::vector<std::string>& lines, Options options, const run_end& end) {
  Mapper mapper(std::move(options));
  std::vector<message> out;
  for (const auto& l : lines) mapper.on_line(l, out);
  mapper.finish(end, out);
  return out;
}

/// Feeds `lines` to `mapper`, which must report the agent finished after the last line and not before: a provider
/// stops an agent that lingers once it finished, so an early "finished" would cut a run short.
inline void expect_finished_at_the_last_line(event_mapper& mapper, const std::vector<std::string>& lines,
                                             std::vector<message>& out) {
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    mapper.on_line(lines[i], out);
    EXPECT_FALSE(mapper.agent_finished()) << lines[i];
  }
  mapper.on_line(lines.back(), out);
  EXPECT_TRUE(mapper.agent_finished());
}

/// Both thinking modes of a mapper (`run` maps lines with options and an end) must give the same thoughts, text,
/// terminal and number of messages: only where the thoughts stand may differ.
template <class Options>
void expect_same_in_both_modes(std::vector<message> (*run)(const std::vector<std::string>&, Options, run_end),
                               const std::vector<std::string>& lines, const run_end& end) {
  const auto buffered = run(lines, {.thinking = thinking_mode::buffered}, end);
  const auto streamed = run(lines, {.thinking = thinking_mode::stream}, end);
  expect_valid_run(buffered);
  expect_valid_run(streamed);
  EXPECT_EQ(texts(buffered, message_type::assistant_thought), texts(streamed, message_type::assistant_thought));
  EXPECT_EQ(assistant_text(buffered), assistant_text(streamed));
  EXPECT_EQ(terminal(buffered).to_json_line(), terminal(streamed).to_json_line());
  EXPECT_EQ(buffered.size(), streamed.size());
}

// ---- the mock model's script ----------------------------------------------------------------------------------------

/// What the mock model streams for a scenario of tests/mockmodel/scenarios.json, which the recorded transcripts were
/// made from: what a mapper emits for them is checked against it.
struct mock_script {
  std::vector<std::string> chunks;    // every text chunk, as streamed
  std::vector<std::string> texts;     // each text block, whole
  std::vector<std::string> thoughts;  // each thinking block, whole
  std::string last_turn_text;         // the last turn's text: the answer a terminal reports

  /// All the text, as the concatenated `assistant` deltas must give it.
  [[nodiscard]] std::string text() const {
    std::string s;
    for (const auto& c : chunks) s += c;
    return s;
  }
};

/// The script of `scenario`. A turn with `attempts` counts with its last attempt: the failed ones are what the agent
/// retries, the last is what it ends with.
inline mock_script scripted(const std::string& scenario) {
  static const std::string path = std::string(AGENTHOST_FIXTURES_DIR) + "/../tests/mockmodel/scenarios.json";
  static const json scenarios = json::parse(read_file(path)).at("scenarios");
  mock_script s;
  for (const auto& raw_turn : scenarios.at(scenario).at("turns")) {
    const json& turn = raw_turn.contains("attempts") ? raw_turn.at("attempts").back() : raw_turn;
    s.last_turn_text.clear();
    for (const auto& block : turn.value("blocks", json::array())) {
      if (block.contains("text")) {
        // A long text is scripted as one chunk repeated `count` times.
        const json& t = block.at("text");
        std::vector<std::string> chunks;
        if (t.is_object())
          chunks.assign(t.at("count").get<std::size_t>(), t.at("repeat").get<std::string>());
        else
          chunks = t.get<std::vector<std::string>>();
        std::string whole;
        for (const auto& c : chunks) whole += c;
        s.chunks.insert(s.chunks.end(), chunks.begin(), chunks.end());
        s.texts.push_back(whole);
        s.last_turn_text += whole;
      } else if (block.contains("thinking")) {
        std::string whole;
        for (const auto& c : block.at("thinking")) whole += c.get<std::string>();
        s.thoughts.push_back(whole);
      }
    }
  }
  return s;
}

// ---- pi (its mapper and golden tests) -------------------------------------------------------------------------------

/// A file under fixtures/pi/.
inline std::string fixture_path(const std::string& relative) {
  return std::string(AGENTHOST_FIXTURES_DIR) + "/pi/" + relative;
}

/// pi_mapper over `lines`; by default a clean exit, as most of pi's transcripts end.
inline std::vector<message> run_mapper(const std::vector<std::string>& lines, pi_mapper_options options = {},
                                       run_end end = exited(0)) {
  return map_lines<pi_mapper>(lines, std::move(options), end);
}

}  // namespace agenthost::mapper::test
