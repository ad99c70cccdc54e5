// Golden tests: each pi input under fixtures/pi/ (real captures, derived and synthetic transcripts) mapped with a
// given run_end/options must produce exactly fixtures/pi/golden/<case>.expected.jsonl.
//
// Regenerate with AGENTHOST_UPDATE_GOLDEN=1 (then review every changed golden by hand against its input: a golden
// that encodes a bug is a defect). Every output is also checked against the contract invariants.
#include "mapper_test_util.hpp"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace agenthost::mapper::test {
namespace {

struct golden_case {
  std::string name;   // golden file: golden/<name>.expected.jsonl
  std::string input;  // relative to fixtures/pi/
  pi_mapper_options options{};
  run_end end{.status = process::exited{0}};
};

std::ostream& operator<<(std::ostream& os, const golden_case& c) { return os << c.name; }

std::vector<golden_case> cases() {
  const auto stream = pi_mapper_options{.thinking = thinking_mode::stream};
  return {
      // Real pi 0.73.1 captures (snapshot era).
      {"tool-turn", "pi-0.73.1-json-tool-turn.jsonl"},
      {"tool-turn.thinking-stream", "pi-0.73.1-json-tool-turn.jsonl", stream},
      {"tool-turn.exit-1", "pi-0.73.1-json-tool-turn.jsonl", {},
       {.status = process::exited{1}, .stderr_tail = "Error: extension crashed\n"}},
      {"tool-turn.sigkill", "pi-0.73.1-json-tool-turn.jsonl", {}, {.status = process::signaled{9}}},
      {"tool-turn.cancelled", "pi-0.73.1-json-tool-turn.jsonl", {}, {.cancelled = true}},
      {"tool-turn.resumed", "pi-0.73.1-json-tool-turn.jsonl",
       {.requested_session_id = "01a228a3-d083-76d7-a9f9-b93789e48028"}},
      {"tool-turn.restarted", "pi-0.73.1-json-tool-turn.jsonl", {.requested_session_id = "0000-old-session"}},
      {"thinking", "pi-0.73.1-json-thinking.jsonl"},
      {"thinking.stream", "pi-0.73.1-json-thinking.jsonl", stream},
      {"http400", "pi-0.73.1-json-http400-error.jsonl"},
      {"503-auto-retry", "pi-0.73.1-json-503-auto-retry.jsonl"},
      {"rpc-prompt-abort", "pi-0.73.1-rpc-prompt-abort.jsonl"},
      // Real pi 0.73.1 runs against the mock provider (tests/real).
      {"cut-retry", "recorded/pi-0.73.1-cut-retry.jsonl"},
      {"cut-retry.thinking-stream", "recorded/pi-0.73.1-cut-retry.jsonl", stream},
      {"repeat-after-tool", "recorded/pi-0.73.1-repeat-after-tool.jsonl"},
      // ≥ 0.84 delta-only format.
      {"derived-tool-turn", "derived-1.x-delta-only-tool-turn.jsonl"},
      {"derived-thinking", "synthetic/derived-1.x-delta-only-thinking.jsonl"},
      // Synthetic transcripts.
      {"whitespace-snapshots", "synthetic/whitespace-snapshots.jsonl"},
      {"cross-turn-replay", "synthetic/cross-turn-replay.jsonl"},
      {"replay-lookalike", "synthetic/replay-lookalike.jsonl"},
      {"invalid-lines", "synthetic/invalid-lines.jsonl", {.max_invalid_lines = 12, .max_invalid_line_bytes = 120}},
      {"tool-result-before-call", "synthetic/tool-result-before-call.jsonl"},
      {"duplicate-terminal", "synthetic/duplicate-terminal.jsonl"},
      {"final-text-divergence", "synthetic/final-text-divergence.jsonl"},
      {"length-cjk", "synthetic/length-cjk.jsonl"},
      {"compaction", "synthetic/compaction.jsonl"},
      {"message-end-only", "synthetic/message-end-only.jsonl"},
      {"timeout", "pi-0.73.1-json-tool-turn.jsonl", {}, {.timeout = "idle", .stderr_tail = "some warning\n"}},
  };
}

class PiGolden : public ::testing::TestWithParam<golden_case> {};

TEST_P(PiGolden, MatchesExpectedOutput) {
  const golden_case& c = GetParam();
  const auto lines = read_lines(fixture_path(c.input));
  ASSERT_FALSE(lines.empty()) << "missing input " << c.input;
  const auto out = run_mapper(lines, c.options, c.end);
  expect_valid_run(out);
  const std::string actual = to_jsonl(out);
  const std::string golden_path = fixture_path("golden/" + c.name + ".expected.jsonl");
  const char* update = std::getenv("AGENTHOST_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::filesystem::create_directories(std::filesystem::path(golden_path).parent_path());
    std::ofstream(golden_path, std::ios::binary) << actual;
    GTEST_SKIP() << "golden written: " << golden_path;
  }
  const std::string expected = read_file(golden_path);
  ASSERT_FALSE(expected.empty()) << "missing golden " << golden_path << " (AGENTHOST_UPDATE_GOLDEN=1 writes it)";
  EXPECT_EQ(actual, expected) << "golden " << golden_path;
}

std::string case_name(const ::testing::TestParamInfo<golden_case>& param_info) {
  std::string n = param_info.param.name;
  for (auto& ch : n) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return n;
}

INSTANTIATE_TEST_SUITE_P(Pi, PiGolden, ::testing::ValuesIn(cases()), case_name);

}  // namespace
}  // namespace agenthost::mapper::test
