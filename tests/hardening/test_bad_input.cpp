// The bad-input matrix: hostile agent output through the real path — the fake agent as a child process (under the
// reaper helper), process::child's framing, providers::async_run_agent and the pi mapper (make_pi_mapper).
//
// Every case expects: no crash, a clear terminal.* (checked per case), the contract checker satisfied, no process
// left behind, the offending lines in the terminal's invalid_output_lines, and a bounded peak RSS of the test
// process (VmHWM reset before the case; the bound is asserted, the figure printed as "[figure] …").
#include "../providers/provider_test_util.hpp"
#include "hardening_util.hpp"

#include <random>

using namespace agenthost;
using namespace agenthost::test;
using transport::message;
using transport::message_type;

namespace {

const std::string fixtures = AGENTHOST_FIXTURES_DIR;
const std::string tool_turn = fixtures + "/pi/pi-0.73.1-json-tool-turn.jsonl";
const std::string tool_turn_text = "The command printed `hello`.";
constexpr long MiB = 1024;  // in KiB

// Sanitizer builds keep freed memory in quarantine and add shadow memory: bounds are loosened there (the figures
// that matter come from the plain build).
long bound_kib(long plain_kib) { return under_sanitizer ? plain_kib * 4 + 256 * MiB : plain_kib; }

class BadInput : public provider_fixture {
 protected:
  std::string file(const std::string& name, const std::string& bytes) {
    const std::string p = dir + "/" + name;
    write_file(p, bytes);
    return p;
  }
  static std::vector<std::string> transcript_lines() {
    std::vector<std::string> lines;
    std::istringstream in(read_file(tool_turn));
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  }
  static std::string join(const std::vector<std::string>& lines, const std::string& eol = "\n") {
    std::string s;
    for (const auto& l : lines) s += l + eol;
    return s;
  }

  // Runs one case with the RSS probe around it; asserts the bound and prints the figure.
  run_result measured(const std::string& name, providers::spawn_request spawn, long plain_bound_kib,
                      providers::run_options opts = {},
                      mapper::thinking_mode thinking = mapper::thinking_mode::buffered) {
    peak_rss_probe probe;
    auto r = run(std::move(spawn), opts, thinking);
    const long delta = probe.delta_kib();
    std::ostringstream f;
    f << "bad_input case=" << name << " peak_rss_delta_kib=" << delta << " (start " << probe.start_kib()
      << " KiB, peak " << probe.peak_kib() << " KiB) bound_kib=" << bound_kib(plain_bound_kib)
      << " elapsed_ms=" << r.elapsed.count() << " terminal=" << transport::to_string(r.terminal.type) << "/"
      << r.reason() << " invalid_lines=" << r.invalid_count() << (under_sanitizer ? " [sanitizer build]" : "");
    report_figure(f.str());
    EXPECT_LE(delta, bound_kib(plain_bound_kib)) << "peak RSS grew by " << delta << " KiB";
    return r;
  }

  void expect_completed_tool_turn(const run_result& r) {
    EXPECT_EQ(r.terminal.type, message_type::terminal_completed) << r.terminal.to_json_line().substr(0, 2000);
    EXPECT_EQ(r.assistant_text(), tool_turn_text);
    EXPECT_EQ(r.count(message_type::tool_call), 1u);
    EXPECT_EQ(r.count(message_type::tool_completed), 1u);
  }
};

// ---- line sizes ------------------------------------------------------------------------------------------------

TEST_F(BadInput, LineOf64MiBIsDeliveredWholeAndReportedWhenInvalid) {
  // Exactly max_line_bytes (64 MiB, the default): delivered whole to the mapper. Raw 'x' bytes are an invalid line;
  // the same size as a JSON event of an unknown type is ignored.
  const std::string n = std::to_string(std::size_t{64} << 20);
  auto r = measured("line_64MiB", fake({"line", n, "line", n, "--json", "replay", tool_turn}), 384 * MiB);
  expect_completed_tool_turn(r);
  ASSERT_EQ(r.invalid_count(), 1u);
  const auto lines = r.invalid_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], std::string(4096, 'x') + "\xE2\x80\xA6") << "cut at 4 KiB with an ellipsis";
}

TEST_F(BadInput, LineOfMaxPlusOneBytesIsDroppedAndReported) {
  const std::string n = std::to_string((std::size_t{64} << 20) + 1);
  auto r = measured("line_max_plus_1", fake({"line", n, "replay", tool_turn}), 256 * MiB);
  expect_completed_tool_turn(r);
  ASSERT_EQ(r.invalid_count(), 1u);
  const auto lines = r.invalid_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("[line of " + n + " bytes dropped; it began with] xxxx", 0), 0u) << lines[0].substr(0, 100);
  EXPECT_LE(lines[0].size(), 4096u + 3u);
}

TEST_F(BadInput, OversizeLineWithASmallerMaximumKeepsMemoryFlat) {
  // 256 MiB in one line against a 1 MiB maximum: the framer never holds more than the maximum plus one read.
  auto spawn = fake({"line", std::to_string(std::size_t{256} << 20), "replay", tool_turn});
  spawn.max_line_bytes = std::size_t{1} << 20;
  auto r = measured("line_256MiB_max_1MiB", std::move(spawn), 32 * MiB);
  expect_completed_tool_turn(r);
  EXPECT_EQ(r.invalid_count(), 1u);
}

// ---- bytes that are not JSON events -----------------------------------------------------------------------------

TEST_F(BadInput, InvalidUtf8) {
  auto r = measured("invalid_utf8", fake({"invalid-utf8", "replay", tool_turn}), 16 * MiB);
  expect_completed_tool_turn(r);
  ASSERT_EQ(r.invalid_lines().size(), 1u);
  const std::string l = r.invalid_lines()[0];
  EXPECT_EQ(l.rfind(R"({"type":"invalid_utf8","text":"a)", 0), 0u);
  EXPECT_NE(l.find("\xEF\xBF\xBD"), std::string::npos) << "invalid bytes are reported as U+FFFD";
  EXPECT_NE(r.terminal.to_json_line().find("invalid_output_lines"), std::string::npos);
}

TEST_F(BadInput, NulBytes) {
  auto r = measured("nul_bytes", fake({"nul-bytes", "replay", tool_turn}), 16 * MiB);
  expect_completed_tool_turn(r);
  ASSERT_EQ(r.invalid_lines().size(), 1u);
  EXPECT_EQ(r.invalid_lines()[0], std::string(R"({"type":"nul","text":"a)") + '\0' + "b" + '\0' + R"(c"})");
}

TEST_F(BadInput, BinaryGarbage) {
  std::mt19937 rng(20240601);
  std::string garbage(std::size_t{4} << 20, '\0');
  for (auto& c : garbage) c = static_cast<char>(rng() & 0xff);
  garbage += '\n';
  // The mapper ignores blank lines (only spaces, tabs, '\r'); every other line of the garbage is invalid.
  std::size_t expected = 0;
  for (std::size_t pos = 0; pos < garbage.size();) {
    std::size_t nl = garbage.find('\n', pos);
    std::string_view l(garbage.data() + pos, nl - pos);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (l.find_first_not_of(" \t\r") != std::string_view::npos) ++expected;
    pos = nl + 1;
  }
  auto r = measured("binary_garbage_4MiB", fake({"replay", file("garbage", garbage), "replay", tool_turn}), 32 * MiB);
  expect_completed_tool_turn(r);
  EXPECT_EQ(r.invalid_count(), expected);
  EXPECT_EQ(r.invalid_lines().size(), 20u) << "kept lines are bounded (max_invalid_lines)";
  for (const auto& l : r.invalid_lines()) EXPECT_LE(l.size(), 4096u + 3u);
}

TEST_F(BadInput, JsonThatIsNotAnEventObject) {
  const std::vector<std::string> bad{"[1,2,3]", "42", "-0.5e3", "\"a string\"", "null", "true", "{}",
                                     R"({"type":5})", R"({"type":null})", R"({"type":"agent_start"} trailing)",
                                     R"([{"type":"agent_end"}])"};
  auto r = measured("json_not_object", fake({"replay", file("bad", join(bad)), "replay", tool_turn}), 16 * MiB);
  expect_completed_tool_turn(r);
  EXPECT_EQ(r.invalid_lines(), bad);
}

TEST_F(BadInput, DeeplyNestedJsonCannotOverflowTheStack) {
  const std::size_t deep = 1'000'000;
  auto nest = [](std::size_t n, const std::string& open, const std::string& leaf, const std::string& close) {
    std::string s;
    s.reserve(n * (open.size() + close.size()) + leaf.size());
    for (std::size_t i = 0; i < n; ++i) s += open;
    s += leaf;
    for (std::size_t i = 0; i < n; ++i) s += close;
    return s;
  };
  const std::string tool_end_prefix = R"({"type":"tool_execution_end","toolCallId":"call_1","toolName":"bash","result":)";
  const std::vector<std::string> bad{
      // unbalanced and balanced arrays a million deep (the parser's depth limit, 1024, rejects them)
      std::string(deep, '['),
      nest(deep, "[", "1", "]"),
      // a tool call whose arguments (a value the mapper converts) are 100,000 deep
      R"({"type":"tool_execution_start","toolCallId":"deep_1","toolName":"bash","args":)" +
          nest(100'000, "{\"a\":", "1", "}") + "}",
      // a value just above the mapper's conversion limit (256) but within the parser's
      R"({"type":"tool_execution_start","toolCallId":"deep_2","toolName":"bash","args":)" +
          nest(300, "{\"a\":", "1", "}") + "}",
  };
  auto lines = transcript_lines();
  // Within the limits: a result 200 deep is converted, emitted and serialized.
  const std::string ok_deep = tool_end_prefix + R"({"content":[{"type":"text","text":"hello\n"}],"details":)" +
                              nest(200, "[", "0", "]") + R"(},"isError":false})";
  std::vector<std::string> all = bad;
  for (auto& l : lines) {
    if (l.find(R"("type":"tool_execution_end")") != std::string::npos) l = ok_deep;
    all.push_back(l);
  }
  // Documented validation choice (docs/contract.md §2.5): values the mapper skips are not grammar-checked, so an
  // event whose unread field is a million levels deep is still that event — skipping is iterative, no recursion.
  all.insert(all.begin() + 2, R"({"type":"turn_start","x":)" + nest(deep, "{\"a\":", "1", "}") + "}");
  // Peak memory follows the longest line (7 MB here): simdjson's structural index takes 4 bytes per structural
  // character, and every character of these lines is one.
  auto r = measured("deeply_nested", fake({"replay", file("deep", join(all))}), 128 * MiB);
  expect_completed_tool_turn(r);
  EXPECT_EQ(r.invalid_count(), bad.size());
  for (const auto& m : r.messages) {
    if (m.type == message_type::tool_call) {
      EXPECT_EQ(m.content.at("tool_call_id"), "call_1");  // the deep_* calls were rejected
    }
  }
}

TEST_F(BadInput, DuplicateKeys) {
  // Duplicate keys are legal JSON with no defined meaning; whatever the mapper picks, the run must stay coherent.
  auto lines = transcript_lines();
  for (auto& l : lines) {
    if (l.find(R"("type":"text_delta")") != std::string::npos)
      l.replace(l.find(R"("delta":)"), 8, R"("delta":"dup ","delta":)");
    if (l.find(R"("type":"tool_execution_end")") != std::string::npos)
      l.insert(1, R"("toolCallId":"call_other","isError":true,)");
    if (l.find(R"("type":"agent_end")") != std::string::npos) l.insert(1, R"("type":"agent_start",)");
  }
  lines.insert(lines.begin() + 1, R"({"type":"session","type":"session","id":"a","id":"b"})");
  auto r = measured("duplicate_keys", fake({"replay", file("dup", join(lines))}), 16 * MiB);
  EXPECT_TRUE(r.terminal.is_terminal());
  EXPECT_LE(r.count(message_type::session_started), 1u);
  report_figure("bad_input duplicate_keys terminal: " + r.terminal.to_json_line().substr(0, 400));
}

TEST_F(BadInput, TruncatedLastLine) {
  auto lines = transcript_lines();
  std::string last = lines.back();  // agent_end
  lines.pop_back();
  std::string bytes = join(lines) + last.substr(0, last.size() / 2);  // cut, no newline
  auto r = measured("truncated_last_line", fake({"replay", file("trunc", bytes)}), 16 * MiB);
  EXPECT_EQ(r.terminal.type, message_type::terminal_failed);
  EXPECT_EQ(r.reason(), "no_terminal_event") << "pi's final event never arrived whole";
  ASSERT_EQ(r.invalid_lines().size(), 1u);
  EXPECT_EQ(r.invalid_lines()[0], last.substr(0, std::min<std::size_t>(last.size() / 2, 4096)) +
                                      (last.size() / 2 > 4096 ? "\xE2\x80\xA6" : ""));
  EXPECT_EQ(r.assistant_text(), tool_turn_text) << "everything before the cut was mapped";
}

TEST_F(BadInput, CrlfLineEndingsMapLikeLf) {
  auto lf = run(fake({"replay", tool_turn}));
  auto r = measured("crlf", fake({"crlf", "replay", file("crlf", join(transcript_lines(), "\r\n"))}), 16 * MiB);
  expect_completed_tool_turn(r);
  EXPECT_EQ(r.invalid_count(), 0u) << "the fake agent's crlf lines are valid events of an unknown type";
  // The provider merges the text deltas that arrive in one read, so compare with adjacent deltas merged.
  EXPECT_EQ(merged_text(r.messages), merged_text(lf.messages));
}

TEST_F(BadInput, BomMidStreamIsAnInvalidLineBomAtStartIsStripped) {
  auto lines = transcript_lines();
  const std::string bom = "\xEF\xBB\xBF";
  lines[0] = bom + lines[0];                         // start of the stream: stripped
  const std::string mid = R"({"type":"turn_start"})";  // harmless event, made invalid by a BOM
  lines.insert(lines.begin() + 3, bom + mid);
  auto r = measured("bom_mid_stream", fake({"replay", file("bom", join(lines)), "bom"}), 16 * MiB);
  expect_completed_tool_turn(r);
  EXPECT_EQ(r.messages.front().type, message_type::session_started) << "the BOM at the start is stripped";
  EXPECT_EQ(r.invalid_lines(), (std::vector<std::string>{bom + mid, bom + R"({"type":"bom"})"}));
}

// ---- streams and process behaviour ------------------------------------------------------------------------------

TEST_F(BadInput, GigabytesOfStderr) {
  // 1 GiB of stderr while the transcript is printed: stderr is drained continuously, only its tail is kept.
  const std::string gib = std::to_string(std::size_t{1} << 30);
  auto r = measured("stderr_1GiB", fake({"stderr-flood", gib, "replay", tool_turn}), 16 * MiB);
  expect_completed_tool_turn(r);
  // Failing after the flood: terminal.failed carries a bounded tail (64 KiB) that ends with the last stderr lines.
  auto f = measured("stderr_1GiB_then_exit_1",
                    fake({"stderr-flood", gib, "replay", tool_turn, "stderr", "Error: the end", "exit", "1"}), 16 * MiB);
  EXPECT_EQ(f.terminal.type, message_type::terminal_failed);
  EXPECT_EQ(f.reason(), "exited");
  const std::string tail = f.terminal.content.at("stderr").get<std::string>();
  EXPECT_LE(tail.size(), std::size_t{64} << 10);
  EXPECT_GE(tail.size(), std::size_t{32} << 10);
  EXPECT_EQ(tail.substr(tail.size() - 15), "Error: the end\n");
}

TEST_F(BadInput, ClosesStdoutAndKeepsRunningEndsByTheIdleWatchdog) {
  std::vector<std::string> head = transcript_lines();
  head.resize(8);
  providers::run_options o{.idle_timeout = std::chrono::milliseconds(500)};
  auto r = measured("close_stdout_keep_running", fake({"replay", file("head", join(head)), "close-stdout", "never-exit"}),
                    16 * MiB, o);
  EXPECT_EQ(r.terminal.type, message_type::terminal_failed);
  EXPECT_EQ(r.reason(), "timeout");
  EXPECT_EQ(r.terminal.content.at("timeout"), "idle");
}

TEST_F(BadInput, ClosesStdoutAfterItsFinalEventAndKeepsRunningCompletes) {
  providers::run_options o{.linger_after_finish = std::chrono::milliseconds(200)};
  auto r = measured("close_stdout_after_final_event", fake({"replay", tool_turn, "close-stdout", "never-exit"}),
                    16 * MiB, o);
  expect_completed_tool_turn(r);
  EXPECT_EQ(r.terminal.content.value("stopped_after_finish", false), true);
}

// Regression: after stdout EOF the run used to wait for the leader's exit without any bound. Now bounded by
// run_options::exit_after_eof (the opposite case, leader exited with stdout held open, by drain_after_exit).
TEST_F(BadInput, ClosesStdoutAndKeepsRunningEndsWithoutWatchdogs) {
  std::vector<std::string> head = transcript_lines();
  head.resize(8);
  auto r = run(fake({"replay", file("head", join(head)), "close-stdout", "never-exit"}), {},
               mapper::thinking_mode::buffered, std::chrono::seconds(30));
  EXPECT_EQ(r.terminal.type, message_type::terminal_failed);
  EXPECT_EQ(r.terminal.content.value("timeout", ""), "exit_after_eof");
  EXPECT_FALSE(r.ec) << "ended by itself, not by the test's cancellation";
}

TEST_F(BadInput, NeverWritesEndsByTheFirstEventWatchdog) {
  providers::run_options o{.first_event_timeout = std::chrono::milliseconds(300)};
  auto r = measured("never_writes", fake({"never-exit"}), 16 * MiB, o);
  EXPECT_EQ(r.terminal.type, message_type::terminal_failed);
  EXPECT_EQ(r.reason(), "timeout");
  EXPECT_EQ(r.terminal.content.at("timeout"), "first_event");
  EXPECT_EQ(r.terminal.content.value("retryable", false), true);
}

TEST_F(BadInput, ExitsZeroWithNoOutput) {
  auto r = measured("exit_0_no_output", fake({"exit", "0"}), 16 * MiB);
  EXPECT_EQ(r.terminal.type, message_type::terminal_failed);
  EXPECT_EQ(r.reason(), "no_terminal_event");
  EXPECT_EQ(r.terminal.content.value("retryable", true), false) << "the agent never started working";
  EXPECT_EQ(r.messages.size(), 1u);
  EXPECT_TRUE(r.invalid_lines().empty());
}

TEST_F(BadInput, TerminalEventPrintedTwice) {
  // pi's final events (turn_end, agent_end, agent_settled) printed twice: one terminal, one copy of the answer.
  auto lines = transcript_lines();
  const std::size_t n = lines.size();
  lines.push_back(lines[n - 2]);  // turn_end
  lines.push_back(lines[n - 1]);  // agent_end
  lines.emplace_back(R"({"type":"agent_settled","aborted":false})");
  lines.emplace_back(R"({"type":"agent_end","messages":[],"willRetry":false})");
  lines.emplace_back(R"({"type":"agent_settled","aborted":false})");
  auto r = measured("terminal_event_twice", fake({"replay", file("twice", join(lines))}), 16 * MiB);
  expect_completed_tool_turn(r);
  EXPECT_EQ(r.count(message_type::terminal_completed), 1u);
  EXPECT_EQ(r.terminal.content.at("text"), tool_turn_text);
  auto s = measured("terminal_event_twice_synthetic",
                    fake({"replay", fixtures + "/pi/synthetic/duplicate-terminal.jsonl"}), 16 * MiB);
  EXPECT_EQ(s.terminal.type, message_type::terminal_completed);
  EXPECT_EQ(s.assistant_text(), "Once.");
}

// Regression KB-MAPPER-2 (fixed in mapper/src/pi_mapper.cpp, repeats_ended_message): the final assistant
// `message_end` (or its `text_end`) printed a second time — no message_start in between — was taken as the
// authoritative text of a message that streamed nothing, and the whole answer was emitted again as a new `assistant`
// delta, and its usage was added again (input_tokens 280 → 440). A repeat of an ended message adds no delta and no
// usage.
TEST_F(BadInput, FinalMessageEndPrintedTwiceDoesNotDoubleTheAnswer) {
  auto once = run(fake({"replay", tool_turn}));
  auto lines = transcript_lines();
  const std::size_t n = lines.size();
  for (std::size_t i = n - 4; i < n; ++i) lines.push_back(lines[i]);  // text_end, message_end, turn_end, agent_end
  auto r = run(fake({"replay", file("twice", join(lines))}));
  expect_completed_tool_turn(r);
  EXPECT_EQ(r.terminal.content.at("usage"), once.terminal.content.at("usage"));
}

TEST_F(BadInput, ToolResultBeforeItsCall) {
  for (auto thinking : {mapper::thinking_mode::buffered, mapper::thinking_mode::stream}) {
    auto r = measured("tool_result_before_call", fake({"replay", fixtures + "/pi/synthetic/tool-result-before-call.jsonl"}),
                      16 * MiB, {}, thinking);
    bool synthesized = false;
    for (const auto& m : r.messages)
      synthesized = synthesized || (m.type == message_type::tool_call && m.content.value("synthesized", false));
    EXPECT_TRUE(synthesized) << "a result without a call gets a synthesized tool.call first";
    EXPECT_TRUE(r.terminal.is_terminal());
  }
  // The same inversion in the real tool-turn transcript: the tool's result events moved before the call's first
  // announcement, within the same turn.
  auto lines = transcript_lines();
  auto is_result = [](const std::string& l) {
    return l.rfind(R"({"type":"tool_execution_end")", 0) == 0 ||
           l.rfind(R"({"type":"message_start","message":{"role":"toolResult")", 0) == 0 ||
           l.rfind(R"({"type":"message_end","message":{"role":"toolResult")", 0) == 0;
  };
  std::vector<std::string> results, swapped;
  for (const auto& l : lines)
    if (is_result(l)) results.push_back(l);
  ASSERT_EQ(results.size(), 3u);
  for (const auto& l : lines) {
    if (is_result(l)) continue;
    if (l.find(R"("type":"toolcall_start")") != std::string::npos) swapped.insert(swapped.end(), results.begin(), results.end());
    swapped.push_back(l);
  }
  auto r = measured("tool_result_before_call_tool_turn", fake({"replay", file("swapped", join(swapped))}), 16 * MiB);
  EXPECT_EQ(r.terminal.type, message_type::terminal_completed);
  EXPECT_EQ(r.count(message_type::tool_call), 1u) << "the late call is not announced a second time";
  EXPECT_EQ(r.count(message_type::tool_completed) + r.count(message_type::tool_failed), 1u);
  EXPECT_EQ(r.assistant_text(), tool_turn_text);
}

// Regression KB-MAPPER-1 (fixed in mapper/src/pi_mapper.cpp: prune_tools() keeps the ids of closed calls): closed
// calls were forgotten at turn_end, so an event for a call closed in an earlier turn — its announcement
// (toolcall_end, message_end content, tool_execution_start) after a result that came first, or a repeated
// tool_execution_end — opened it again: a second `tool.call` with the same id, closed a second time by finish().
// Minimal input: tool_execution_end(c1), turn_end, toolcall_end(c1). Events of a closed call are ignored.
TEST_F(BadInput, EventsOfACallClosedInAnEarlierTurnKeepTheContract) {
  auto lines = transcript_lines();
  std::size_t result = 0, turn_end = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind(R"({"type":"tool_execution_end")", 0) == 0) result = i;
    if (turn_end == 0 && lines[i].rfind(R"({"type":"turn_end")", 0) == 0) turn_end = i;
  }
  lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(turn_end) + 1, lines[result]);  // the result again
  auto r = run(fake({"replay", file("dup-result", join(lines))}));  // run() checks the contract
  expect_completed_tool_turn(r);
}

}  // namespace
