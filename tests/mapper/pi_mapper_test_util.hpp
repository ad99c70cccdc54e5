// Shared by the pi mapper tests (pi_mapper_test.cpp, pi_mapper_end_test.cpp): the recorded transcripts they map
// (fixtures/pi/) and what those transcripts say.
#pragma once

#include "mapper_test_util.hpp"

#include <string>

namespace agenthost::mapper::test {

inline const std::string kToolTurn = "pi-0.73.1-json-tool-turn.jsonl";
inline const std::string kThinking = "pi-0.73.1-json-thinking.jsonl";
inline const std::string kDerivedToolTurn = "derived-1.x-delta-only-tool-turn.jsonl";
inline const std::string kHttp400 = "pi-0.73.1-json-http400-error.jsonl";
inline const std::string kRetry503 = "pi-0.73.1-json-503-auto-retry.jsonl";

inline const std::string kThinkingText =
    "Let me think about this carefully. First, the question is simple. Second, no tool is needed. Third, I will "
    "answer briefly and include a greeting: 你好。 Done thinking.";
inline const std::string kThinkingAnswer = "After thinking it over: the answer is 42. 你好，世界!";

}  // namespace agenthost::mapper::test
