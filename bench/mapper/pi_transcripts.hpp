// Deterministic pi transcripts for the benchmarks (bench/mapper, bench/e2e). Header-only; needs nlohmann_json.
//
//   snapshot  pi ≤ 0.83, one long answer: every message_update carries the delta plus the cumulative message twice
//             (`partial` and `message`), so the log grows quadratically with the answer (22.6 k characters → ~100 MB).
//   delta     pi ≥ 0.84, one long answer: message_update carries the delta and a `usage` object before it.
//   tools     pi ≥ 0.84 agentic session: turns of thinking deltas, text deltas, a streamed bash tool call whose
//             cumulative output grows over tool_execution_update events, the tool result, then a final answer.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace agenthost::bench {

enum class transcript_kind { snapshot, delta, tools };

inline std::string_view to_string(transcript_kind k) {
  switch (k) {
    case transcript_kind::snapshot: return "snapshot";
    case transcript_kind::delta: return "delta";
    case transcript_kind::tools: return "tools";
  }
  return "?";
}

struct transcript {
  std::vector<std::string> lines;  // without '\n'; capacity ≥ size + 64 (simdjson padding for parse-only baselines)
  std::size_t bytes = 0;           // sum of line sizes (no newlines)
  std::size_t longest = 0;         // longest line
};

namespace detail_transcripts {

using json = nlohmann::ordered_json;

/// Deterministic prose with some multi-byte characters and escapes, cut in ~4-character "tokens".
inline std::vector<std::string> prose_chunks(std::size_t chars, std::size_t seed = 0) {
  static const char* words[] = {"the ", "mapper ", "reads ", "only ", "what ", "it ", "needs; ", "你好 ",
                                "snapshot ", "delta ", "\n\n", "- item ", "`code` ", "é ", "42. ", "\"quoted\" "};
  constexpr std::size_t n = sizeof(words) / sizeof(words[0]);
  std::vector<std::string> chunks;
  std::size_t total = 0;
  for (std::size_t i = seed; total < chars; ++i) {
    std::string w = words[(i * 7 + i / 3) % n];
    total += w.size();
    chunks.push_back(std::move(w));
  }
  return chunks;
}

inline json usage_json(int in, int out) {
  return {{"input", in},
          {"output", out},
          {"cacheRead", 0},
          {"cacheWrite", 0},
          {"totalTokens", in + out},
          {"cost", {{"input", 0}, {"output", 0}, {"cacheRead", 0}, {"cacheWrite", 0}, {"total", 0}}}};
}

inline json assistant(json content, const char* stop, int in = 0, int out = 0) {
  return {{"role", "assistant"}, {"content", std::move(content)}, {"api", "openai-completions"},
          {"provider", "local"},  {"model", "fake-model"},         {"usage", usage_json(in, out)},
          {"stopReason", stop},   {"timestamp", 1795978154187LL},  {"responseId", "chatcmpl-fake"}};
}

inline json text_content(const std::string& text) {
  json content = json::array();
  if (!text.empty()) content.push_back({{"type", "text"}, {"text", text}});
  return content;
}

/// Appends one line (without '\n') and counts it, with the capacity the parse-only baselines' padding needs.
inline void add_line(transcript& t, std::string s) {
  t.bytes += s.size();
  if (s.size() > t.longest) t.longest = s.size();
  s.reserve(s.size() + 64);
  t.lines.push_back(std::move(s));
}

inline void add(transcript& t, const json& j) { add_line(t, j.dump()); }

inline json update(const json& event) {  // ≥ 0.84: usage first, then the event
  return {{"type", "message_update"}, {"usage", usage_json(0, 0)}, {"assistantMessageEvent", event}};
}

inline void header(transcript& t, const std::string& prompt, json& user) {
  add(t, {{"type", "session"}, {"version", 3}, {"id", "01a228a3-d083-76d7-a9f9-b93789e48028"},
          {"timestamp", "2026-11-29T18:49:14.116Z"}, {"cwd", "/home/user/project"}});
  add(t, {{"type", "agent_start"}});
  add(t, {{"type", "turn_start"}});
  user = {{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", prompt}}})},
          {"timestamp", 1795978154134LL}};
  add(t, {{"type", "message_start"}, {"message", user}});
  add(t, {{"type", "message_end"}, {"message", user}});
}

inline transcript make_answer(std::size_t chars, bool snapshot_era) {
  transcript t;
  json user;
  header(t, "Write a long answer.", user);
  add(t, {{"type", "message_start"}, {"message", assistant(json::array(), snapshot_era ? "stop" : "pending")}});
  std::string text;
  const auto chunks = prose_chunks(chars);
  for (const auto& c : chunks) {
    text += c;
    json ame = {{"type", "text_delta"}, {"contentIndex", 0}, {"delta", c}};
    if (snapshot_era) {
      const json partial = assistant(text_content(text), "stop");
      ame["partial"] = partial;
      add(t, {{"type", "message_update"}, {"assistantMessageEvent", ame}, {"message", partial}});
    } else {
      add(t, update(ame));
    }
  }
  const json final_message = assistant(text_content(text), "stop", 1000, static_cast<int>(chunks.size()));
  add(t, {{"type", "message_end"}, {"message", final_message}});
  add(t, {{"type", "turn_end"}, {"message", final_message}, {"toolResults", json::array()}});
  add(t, {{"type", "agent_end"}, {"messages", json::array({user, final_message})}, {"willRetry", false}});
  if (!snapshot_era) add(t, {{"type", "agent_settled"}, {"aborted", false}});
  return t;
}

inline transcript make_tools(std::size_t turns) {
  transcript t;
  json user;
  header(t, "Fix the failing test.", user);
  json messages = json::array({user});
  for (std::size_t turn = 0; turn <= turns; ++turn) {
    const bool last = turn == turns;
    if (turn > 0) add(t, {{"type", "turn_start"}});
    add(t, {{"type", "message_start"}, {"message", assistant(json::array(), "pending")}});
    json content = json::array();
    // Thinking.
    std::string thinking;
    add(t, update({{"type", "thinking_start"}, {"contentIndex", 0}}));
    for (const auto& c : prose_chunks(400, turn)) {
      thinking += c;
      add(t, update({{"type", "thinking_delta"}, {"contentIndex", 0}, {"delta", c}}));
    }
    add(t, update({{"type", "thinking_end"}, {"contentIndex", 0}, {"content", thinking}}));
    content.push_back({{"type", "thinking"}, {"thinking", thinking}, {"thinkingSignature", "reasoning_content"}});
    // Text.
    std::string text;
    add(t, update({{"type", "text_start"}, {"contentIndex", 1}}));
    for (const auto& c : prose_chunks(last ? 4000 : 200, turn + 1)) {
      text += c;
      add(t, update({{"type", "text_delta"}, {"contentIndex", 1}, {"delta", c}}));
    }
    add(t, update({{"type", "text_end"}, {"contentIndex", 1}, {"content", text}}));
    content.push_back({{"type", "text"}, {"text", text}});
    if (last) {
      const json final_message = assistant(content, "stop", 5000, 900);
      add(t, {{"type", "message_end"}, {"message", final_message}});
      add(t, {{"type", "turn_end"}, {"message", final_message}, {"toolResults", json::array()}});
      messages.push_back(final_message);
      break;
    }
    // A bash tool call, streamed as JSON fragments.
    const std::string id = "call_" + std::to_string(turn + 1);
    const json args = {{"command", "make test TEST=case_" + std::to_string(turn) + " 2>&1 | tail -n 200"}};
    add(t, update({{"type", "toolcall_start"}, {"contentIndex", 2}, {"id", id}, {"toolName", "bash"}}));
    const std::string args_text = args.dump();
    for (std::size_t i = 0; i < args_text.size(); i += 6) {
      add(t, update({{"type", "toolcall_delta"}, {"contentIndex", 2}, {"delta", args_text.substr(i, 6)}}));
    }
    const json call = {{"type", "toolCall"}, {"id", id}, {"name", "bash"}, {"arguments", args}};
    add(t, update({{"type", "toolcall_end"}, {"contentIndex", 2}, {"toolCall", call}}));
    content.push_back(call);
    const json call_message = assistant(content, "toolUse", 4000 + static_cast<int>(turn) * 500, 300);
    add(t, {{"type", "message_end"}, {"message", call_message}});
    // Its execution: cumulative partial output.
    add(t, {{"type", "tool_execution_start"}, {"toolCallId", id}, {"toolName", "bash"}, {"args", args}});
    std::string output;
    for (std::size_t i = 0; i < 40; ++i) {
      output += "test_case_" + std::to_string(i) + " ... ok (" + std::to_string(i * 3 % 17) + " ms)\n";
      add(t, {{"type", "tool_execution_update"},
              {"toolCallId", id},
              {"toolName", "bash"},
              {"args", args},
              {"partialResult", {{"content", json::array({{{"type", "text"}, {"text", output}}})}, {"details", json::object()}}}});
    }
    const json result = {{"content", json::array({{{"type", "text"}, {"text", output}}})}};
    add(t, {{"type", "tool_execution_end"}, {"toolCallId", id}, {"toolName", "bash"}, {"result", result},
            {"isError", false}});
    const json tool_message = {{"role", "toolResult"}, {"toolCallId", id},       {"toolName", "bash"},
                               {"content", result["content"]}, {"isError", false}, {"timestamp", 1795978154667LL}};
    add(t, {{"type", "message_start"}, {"message", tool_message}});
    add(t, {{"type", "message_end"}, {"message", tool_message}});
    add(t, {{"type", "turn_end"}, {"message", call_message}, {"toolResults", json::array({tool_message})}});
    messages.push_back(call_message);
    messages.push_back(tool_message);
  }
  add(t, {{"type", "agent_end"}, {"messages", messages}, {"willRetry", false}});
  add(t, {{"type", "agent_settled"}, {"aborted", false}});
  return t;
}

}  // namespace detail_transcripts

/// `size` is the answer length in characters (snapshot, delta) or the number of tool turns (tools).
inline transcript make_transcript(transcript_kind kind, std::size_t size) {
  switch (kind) {
    case transcript_kind::snapshot: return detail_transcripts::make_answer(size, true);
    case transcript_kind::delta: return detail_transcripts::make_answer(size, false);
    case transcript_kind::tools: return detail_transcripts::make_tools(size);
  }
  return {};
}

/// The default sizes: snapshot ~100 MB / ~4.2 k lines (the "long answer"), delta the same answer ×10 (more
/// lines per run), tools 40 turns.
inline std::size_t default_size(transcript_kind kind) {
  switch (kind) {
    case transcript_kind::snapshot: return 22600;
    case transcript_kind::delta: return 226000;
    case transcript_kind::tools: return 40;
  }
  return 0;
}

}  // namespace agenthost::bench
