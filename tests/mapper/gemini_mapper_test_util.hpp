// Shared by the Gemini CLI mapper tests (gemini_mapper_test.cpp, gemini_mapper_input_test.cpp): the recorded
// transcripts, a mapper run, and the event lines the hand-written cases are built from.
#pragma once

#include "mapper_test_util.hpp"

#include <agenthost/mapper/gemini_mapper.hpp>

#include <string>
#include <utility>
#include <vector>

namespace agenthost::mapper::test {

inline std::string gemini_fixture(const std::string& scenario) {
  return std::string(AGENTHOST_FIXTURES_DIR) + "/gemini/recorded/gemini-0.61.0-" + scenario + ".jsonl";
}

/// The session id gemini printed in a recorded transcript's `init` (its first line).
inline std::string recorded_session_id(const std::string& scenario) {
  return json::parse(read_lines(gemini_fixture(scenario)).at(0)).at("session_id").get<std::string>();
}

inline std::vector<message> run_gemini(const std::vector<std::string>& lines, run_end end = exited(0),
                                       gemini_mapper_options options = {}) {
  return map_lines<gemini_mapper>(lines, std::move(options), end);
}

// Event lines of gemini's stream-json shape.
inline const std::string kInit = R"({"type":"init","timestamp":"t","session_id":"s-1","model":"m"})";
inline const std::string kUser = R"({"type":"message","timestamp":"t","role":"user","content":"hi"})";
inline std::string delta(const std::string& text) {
  return json{{"type", "message"}, {"timestamp", "t"}, {"role", "assistant"}, {"content", text}, {"delta", true}}.dump();
}
inline const std::string kSuccess =
    R"({"type":"result","timestamp":"t","status":"success","stats":{"total_tokens":15,"input_tokens":10,"output_tokens":5,"cached":0,"input":10,"duration_ms":1,"tool_calls":0,"models":{}}})";
inline const std::string kToolUse =
    R"({"type":"tool_use","timestamp":"t","tool_name":"read_file","tool_id":"read_file__c1","parameters":{"path":"a.txt"}})";
inline const std::string kToolResult =
    R"({"type":"tool_result","timestamp":"t","tool_id":"read_file__c1","status":"success","output":"contents"})";

}  // namespace agenthost::mapper::test
