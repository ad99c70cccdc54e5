// Shared by the Claude Code mapper tests (claude_mapper_test.cpp, claude_mapper_input_test.cpp): the recorded
// transcripts and a mapper run checked against the contract.
#pragma once

#include "mapper_test_util.hpp"

#include <agenthost/mapper/claude_mapper.hpp>

#include <fstream>
#include <string>
#include <vector>

namespace agenthost::mapper::test {

inline const std::string kRecorded = std::string(AGENTHOST_FIXTURES_DIR) + "/claude-code/recorded/";

/// The lines of a recorded transcript; a missing file fails the test instead of mapping an empty run.
inline std::vector<std::string> recorded_lines(const std::string& name) {
  EXPECT_TRUE(std::ifstream(kRecorded + name, std::ios::binary).good()) << name;
  return read_lines(kRecorded + name);
}

/// claude_mapper over `lines`; every run it emits is checked against the contract.
inline std::vector<message> run(const std::vector<std::string>& lines, run_end end = exited(0),
                                claude_mapper_options options = {}) {
  auto out = map_lines<claude_mapper>(lines, std::move(options), end);
  EXPECT_EQ(transport::check_run(out), std::vector<std::string>{});
  return out;
}

// A line with one field replaced (parsed and dumped again: key order changes, which the mapper must not mind).
inline std::string with(const std::string& line, const json::json_pointer& ptr, const json& value) {
  json j = json::parse(line);
  j[ptr] = value;
  return j.dump();
}

inline bool is_text_delta(const std::string& line) { return line.find("\"text_delta\"") != std::string::npos; }

}  // namespace agenthost::mapper::test
