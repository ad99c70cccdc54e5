// Deterministic Claude Code, Codex and Gemini CLI transcripts for the benchmarks, built to the shapes the real CLIs
// printed (fixtures/claude-code/recorded, fixtures/codex/recorded, fixtures/gemini/recorded: every key of those
// lines, in their order, with the same kinds of values). Header-only; uses pi_transcripts.hpp's prose and line store.
//
//   claude  Claude Code 2.1.332 `-p --output-format stream-json --verbose --include-partial-messages`, one long answer:
//           system/init, message_start, a thinking block (each delta preceded by system/thinking_tokens, then the
//           signature), the text block as text_delta stream_events, each block repeated as a full `assistant` frame
//           (the partial-messages quirk: the whole answer once more in one line), message_delta/stop and `result`
//           (the answer a third time).
//   codex   Codex 0.171.0 `exec --json`: many short events — reasoning and agent_message items, command_execution
//           item.started / item.completed pairs — in one turn (~140 bytes per line).
//   gemini  Gemini CLI 0.61.0 `--output-format stream-json`, one long answer: `message` deltas with timestamps.
//   opencode OpenCode 1.18.33 `run --format json --thinking`: many agent steps, each step_start, a whole reasoning
//           part, a whole text part, a bash `tool_use` (printed once the tool ran: input, output, metadata) and
//           step_finish with its tokens (~300-700 bytes per line; OpenCode prints parts whole, never deltas).
//   unmapped  100-byte lines of a type pi's mapper does not map (fake_agent's `rate` lines): only checked.
#pragma once

#include "pi_transcripts.hpp"

#include <cstdio>
#include <string>

namespace agenthost::bench {

namespace detail_transcripts {

inline std::string fake_uuid(std::size_t n) {
  char b[40];
  std::snprintf(b, sizeof b, "%08zx-%04zx-4%03zx-8%03zx-%012zx", n * 2654435761u % 0xffffffffu, n % 0xffff,
                n % 0xfff, (n * 7) % 0xfff, n * 40503u);
  return b;
}

inline const std::string claude_session = "519302db-3c98-4d19-baf8-1053a7e35306";

inline json claude_stream(const json& event, std::size_t n, bool thinking_display = false) {
  json j = {{"type", "stream_event"}, {"event", event}, {"session_id", claude_session},
            {"parent_tool_use_id", nullptr}, {"uuid", fake_uuid(n)}};
  if (thinking_display) j["thinking_display"] = "updates";
  j["api_message_id"] = "msg_bench_1";
  return j;
}

inline json claude_usage(int out) {
  return {{"input_tokens", 100}, {"cache_creation_input_tokens", 0}, {"cache_read_input_tokens", 0},
          {"output_tokens", out}};
}

inline json claude_frame(const json& block, std::size_t n) {
  return {{"type", "assistant"},
          {"message", {{"id", "msg_bench_1"}, {"type", "message"}, {"role", "assistant"}, {"model", "claude-bench"},
                       {"content", json::array({block})}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                       {"usage", claude_usage(1)}, {"context_management", nullptr}}},
          {"parent_tool_use_id", nullptr}, {"session_id", claude_session}, {"uuid", fake_uuid(n)}};
}

}  // namespace detail_transcripts

/// Claude Code stream-json with partial messages: one answer of about `chars` characters.
inline transcript make_claude_answer(std::size_t chars) {
  using namespace detail_transcripts;
  transcript t;
  std::size_t n = 0;
  add(t, {{"type", "system"}, {"subtype", "init"}, {"cwd", "/home/user/project"}, {"session_id", claude_session},
          {"tools", json::array({"Task", "Bash", "Edit", "Read", "Write"})}, {"mcp_servers", json::array()},
          {"model", "claude-bench"}, {"permissionMode", "default"}, {"apiKeySource", "ANTHROPIC_API_KEY"},
          {"claude_code_version", "2.1.332"}, {"output_style", "default"}, {"uuid", fake_uuid(++n)}});
  add(t, {{"type", "system"}, {"subtype", "status"}, {"status", "requesting"}, {"session_id", claude_session},
          {"uuid", fake_uuid(++n)}});
  add(t, claude_stream({{"type", "message_start"},
                        {"message", {{"id", "msg_bench_1"}, {"type", "message"}, {"role", "assistant"},
                                     {"model", "claude-bench"}, {"content", json::array()}, {"stop_reason", nullptr},
                                     {"stop_sequence", nullptr}, {"usage", claude_usage(1)}}}},
                       ++n));
  // Thinking: a tenth of the answer's length.
  add(t, claude_stream({{"type", "content_block_start"}, {"index", 0},
                        {"content_block", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}}},
                       ++n, true));
  std::string thinking;
  int estimated = 0;
  for (const auto& c : prose_chunks(chars / 10, 3)) {
    estimated += 3;
    add(t, {{"type", "system"}, {"subtype", "thinking_tokens"}, {"estimated_tokens", estimated},
            {"estimated_tokens_delta", 3}, {"session_id", claude_session}, {"uuid", fake_uuid(++n)}});
    add(t, claude_stream({{"type", "content_block_delta"}, {"index", 0},
                          {"delta", {{"type", "thinking_delta"}, {"thinking", c}}}},
                         ++n, true));
    thinking += c;
  }
  add(t, claude_stream({{"type", "content_block_delta"}, {"index", 0},
                        {"delta", {{"type", "signature_delta"}, {"signature", "bW9jay1zaWduYXR1cmUt0001"}}}},
                       ++n));
  add(t, claude_frame({{"type", "thinking"}, {"thinking", thinking}, {"signature", "bW9jay1zaWduYXR1cmUt0001"}}, ++n));
  add(t, claude_stream({{"type", "content_block_stop"}, {"index", 0}}, ++n));
  // The answer.
  add(t, claude_stream({{"type", "content_block_start"}, {"index", 1},
                        {"content_block", {{"type", "text"}, {"text", ""}}}},
                       ++n));
  std::string text;
  const auto chunks = prose_chunks(chars);
  for (const auto& c : chunks) {
    add(t, claude_stream({{"type", "content_block_delta"}, {"index", 1},
                          {"delta", {{"type", "text_delta"}, {"text", c}}}},
                         ++n));
    text += c;
  }
  add(t, claude_frame({{"type", "text"}, {"text", text}}, ++n));
  add(t, claude_stream({{"type", "content_block_stop"}, {"index", 1}}, ++n));
  add(t, claude_stream({{"type", "message_delta"}, {"delta", {{"stop_reason", "end_turn"}, {"stop_sequence", nullptr}}},
                        {"usage", {{"output_tokens", static_cast<int>(chunks.size())}}}},
                       ++n));
  add(t, claude_stream({{"type", "message_stop"}}, ++n));
  add(t, {{"type", "result"}, {"subtype", "success"}, {"is_error", false}, {"api_error_status", nullptr},
          {"duration_ms", 26700}, {"duration_api_ms", 26500}, {"num_turns", 1}, {"result", text},
          {"stop_reason", "end_turn"}, {"session_id", claude_session}, {"total_cost_usd", 0.0123},
          {"usage", {{"input_tokens", 100}, {"cache_creation_input_tokens", 0}, {"cache_read_input_tokens", 0},
                     {"output_tokens", static_cast<int>(chunks.size())}, {"service_tier", "standard"}}},
          {"permission_denials", json::array()}, {"terminal_reason", "completed"}, {"uuid", fake_uuid(++n)}});
  return t;
}

/// Codex `exec --json`: about `events` short events in one turn.
inline transcript make_codex_events(std::size_t events) {
  using namespace detail_transcripts;
  transcript t;
  add(t, {{"type", "thread.started"}, {"thread_id", "01a229da-2b26-7cb3-99a8-e086d5b7ce9f"}});
  add(t, {{"type", "turn.started"}});
  static const char* reasoning[] = {"Checking the tests.", "The failure is in the parser.", "Run the suite again."};
  static const char* messages[] = {"Looking at the failing test now.", "The parser drops the last line; fixing it.",
                                   "All tests pass: 你好, café."};
  static const char* commands[] = {"/bin/bash -lc 'ls src'", "/bin/bash -lc 'grep -n parse src/*.cpp'",
                                   "/bin/bash -lc 'make test'"};
  static const char* outputs[] = {"main.cpp\nparser.cpp\n", "src/parser.cpp:42:  parse(line);\n", "ok 12/12\n"};
  std::size_t item = 0;
  for (std::size_t i = 0; t.lines.size() + 1 < events; ++i) {
    const std::size_t k = i % 3;
    const std::string id = "item_" + std::to_string(item++);
    switch (i % 4) {
      case 0:
        add(t, {{"type", "item.completed"}, {"item", {{"id", id}, {"type", "reasoning"}, {"text", reasoning[k]}}}});
        break;
      case 1:
        add(t, {{"type", "item.completed"}, {"item", {{"id", id}, {"type", "agent_message"}, {"text", messages[k]}}}});
        break;
      default:
        add(t, {{"type", "item.started"},
                {"item", {{"id", id}, {"type", "command_execution"}, {"command", commands[k]}, {"aggregated_output", ""},
                          {"exit_code", nullptr}, {"status", "in_progress"}}}});
        add(t, {{"type", "item.completed"},
                {"item", {{"id", id}, {"type", "command_execution"}, {"command", commands[k]},
                          {"aggregated_output", outputs[k]}, {"exit_code", 0}, {"status", "completed"}}}});
        break;
    }
  }
  add(t, {{"type", "turn.completed"},
          {"usage", {{"input_tokens", 200000}, {"cached_input_tokens", 0}, {"cache_write_input_tokens", 0},
                     {"output_tokens", 28000}, {"reasoning_output_tokens", 0}}}});
  return t;
}

/// Gemini CLI stream-json: one answer of about `chars` characters as `message` deltas.
inline transcript make_gemini_answer(std::size_t chars) {
  using namespace detail_transcripts;
  transcript t;
  add(t, {{"type", "init"}, {"timestamp", "2026-11-30T00:20:30.261Z"},
          {"session_id", "47c55a09-b664-4946-b650-716d0f04a8c9"}, {"model", "gemini-bench"}});
  add(t, {{"type", "message"}, {"timestamp", "2026-11-30T00:20:30.267Z"}, {"role", "user"},
          {"content", "Write a long answer."}});
  const auto chunks = prose_chunks(chars);
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    char ts[32];
    std::snprintf(ts, sizeof ts, "2026-11-30T00:%02zu:%02zu.%03zuZ", 21 + i / 60000 % 30, i / 1000 % 60, i % 1000);
    add(t, {{"type", "message"}, {"timestamp", ts}, {"role", "assistant"}, {"content", chunks[i]}, {"delta", true}});
  }
  add(t, {{"type", "result"}, {"timestamp", "2026-11-30T00:59:31.152Z"}, {"status", "success"},
          {"stats", {{"total_tokens", 1200 + chunks.size()}, {"input_tokens", 1200}, {"output_tokens", chunks.size()},
                     {"cached", 0}, {"input", 1200}, {"duration_ms", 89200}, {"tool_calls", 0}}}});
  return t;
}

/// OpenCode `run --format json --thinking`: about `events` events in `events / 5` steps, the last one answering.
inline transcript make_opencode_steps(std::size_t events) {
  using namespace detail_transcripts;
  transcript t;
  static const std::string session = "ses_dd557ebfbffeCWlElkDUaI20E0";
  static const char* reasoning[] = {"The user wants the tests run. I will call the bash tool.",
                                    "The parser drops the last line; check the loop.", "It printed the marker."};
  static const char* texts[] = {"Running the command now.", "Fixing the parser: 你好, café 🌍.",
                                "All tests pass.\n- [x] done"};
  static const char* commands[] = {"ls src", "grep -n parse src/*.cpp", "make test"};
  static const char* outputs[] = {"main.cpp\nparser.cpp\n", "src/parser.cpp:42:  parse(line);\n", "ok 12/12\n"};
  std::int64_t ts = 1796011996300;
  std::size_t n = 0;
  auto part_id = [&] {
    char b[40];
    std::snprintf(b, sizeof b, "prt_22aa%08zx%014zx", n, n * 2654435761u);
    ++n;
    return std::string(b);
  };
  const std::size_t steps = events < 10 ? 1 : events / 5;
  for (std::size_t step = 0; step < steps; ++step) {
    const std::size_t k = step % 3;
    const bool last = step + 1 == steps;
    char mid[40];
    std::snprintf(mid, sizeof mid, "msg_22aa%08zxHqUbkzTrHOdf8H", step);
    auto part = [&](json p) {
      json head = {{"id", part_id()}, {"messageID", mid}, {"sessionID", session}};
      head.update(p);
      return head;
    };
    auto event = [&](const char* type, json p) {
      ts += 37;
      add(t, {{"type", type}, {"timestamp", ts}, {"sessionID", session}, {"part", std::move(p)}});
    };
    event("step_start", part({{"type", "step-start"}}));
    event("reasoning", part({{"type", "reasoning"}, {"text", reasoning[k]}, {"time", {{"start", ts - 90}, {"end", ts - 50}}}}));
    event("text", part({{"type", "text"}, {"text", last ? std::string(texts[2]) : std::string(texts[k])},
                        {"time", {{"start", ts - 40}, {"end", ts - 10}}}}));
    if (!last) {
      char call[32];
      std::snprintf(call, sizeof call, "call_%zu", step);
      add(t, {{"type", "tool_use"}, {"timestamp", ts += 37}, {"sessionID", session},
              {"part", {{"type", "tool"}, {"tool", "bash"}, {"callID", call},
                        {"state", {{"status", "completed"}, {"input", {{"command", commands[k]}}}, {"output", outputs[k]},
                                   {"metadata", {{"output", outputs[k]}, {"exit", 0}, {"truncated", false}}},
                                   {"title", commands[k]}, {"time", {{"start", ts - 300}, {"end", ts - 100}}}}},
                        {"id", part_id()}, {"sessionID", session}, {"messageID", mid}}}});
    }
    // opencode's order for a step-finish part: the reason right after the id.
    event("step_finish", {{"id", part_id()}, {"reason", last ? "stop" : "tool-calls"}, {"messageID", mid},
                          {"sessionID", session}, {"type", "step-finish"},
                          {"tokens", {{"total", 112}, {"input", 100}, {"output", 12}, {"reasoning", 0},
                                      {"cache", {{"write", 0}, {"read", 0}}}}},
                          {"cost", 0}});
  }
  return t;
}

/// Lines the pi mapper reads and does not map, as many agents print besides their answer (status, progress,
/// heartbeats): fake_agent's `rate` lines, `{"type":"rate","i":N,"pad":"xxx…"}` of 99 bytes (100 with the newline),
/// the content of the end-to-end scale benchmark's `synthetic` rows (bench/README.md#scale). They follow the session
/// header of a short pi ≥ 0.84 run, whose answer and agent_end come after them: the run ends cleanly.
inline transcript make_unmapped_lines(std::size_t lines) {
  using detail_transcripts::add_line;
  const transcript run = make_transcript(transcript_kind::delta, 100);
  transcript t;
  add_line(t, run.lines.front());
  for (std::size_t i = 0; i < lines; ++i) {
    std::string s = R"({"type":"rate","i":)" + std::to_string(i) + R"(,"pad":")";
    s.append(99 - s.size() - 2, 'x');
    add_line(t, s + R"("})");
  }
  for (std::size_t i = 1; i < run.lines.size(); ++i) add_line(t, run.lines[i]);
  return t;
}

}  // namespace agenthost::bench
