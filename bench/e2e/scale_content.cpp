// The scale section's content: see scale_content.hpp.
#include "scale_content.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <stdexcept>
#include <string>

namespace agenthost::bench::e2e {

namespace gen = agenthost::bench::detail_transcripts;

namespace {

/// pi ≤ 0.83 (snapshot era) session with one tool turn and then a long answer: every message_update carries the
/// event with the cumulative message (`partial`) and the same message again (`message`), as pi 0.73 writes them
/// (fixtures/pi/pi-0.73.1-json-tool-turn.jsonl); the tool's output grows over cumulative tool_execution_update events.
agenthost::bench::transcript make_snapshot_tool_session(std::size_t answer_chars) {
  using json = gen::json;
  agenthost::bench::transcript t;
  json user;
  gen::header(t, "Fix the failing test, then explain.", user);
  const auto snapshot_update = [&](json ame, const json& content) {
    const json partial = gen::assistant(content, "stop");
    ame["partial"] = partial;
    gen::add(t, {{"type", "message_update"}, {"assistantMessageEvent", ame}, {"message", partial}});
  };
  // Turn 1: thinking, a short text, a bash tool call streamed as argument fragments.
  gen::add(t, {{"type", "message_start"}, {"message", gen::assistant(json::array(), "stop")}});
  json content = json::array();
  std::string thinking;
  content.push_back({{"type", "thinking"}, {"thinking", ""}, {"thinkingSignature", "reasoning_content"}});
  snapshot_update({{"type", "thinking_start"}, {"contentIndex", 0}}, content);
  for (const auto& c : gen::prose_chunks(400, 1)) {
    thinking += c;
    content[0]["thinking"] = thinking;
    snapshot_update({{"type", "thinking_delta"}, {"contentIndex", 0}, {"delta", c}}, content);
  }
  snapshot_update({{"type", "thinking_end"}, {"contentIndex", 0}, {"content", thinking}}, content);
  std::string text;
  content.push_back({{"type", "text"}, {"text", ""}});
  snapshot_update({{"type", "text_start"}, {"contentIndex", 1}}, content);
  for (const auto& c : gen::prose_chunks(200, 2)) {
    text += c;
    content[1]["text"] = text;
    snapshot_update({{"type", "text_delta"}, {"contentIndex", 1}, {"delta", c}}, content);
  }
  snapshot_update({{"type", "text_end"}, {"contentIndex", 1}, {"content", text}}, content);
  const std::string id = "call_1";
  const json args = {{"command", "make test 2>&1 | tail -n 200"}};
  content.push_back({{"type", "toolCall"}, {"id", id}, {"name", "bash"}, {"arguments", json::object()},
                     {"partialArgs", ""}, {"streamIndex", 0}});
  snapshot_update({{"type", "toolcall_start"}, {"contentIndex", 2}}, content);
  const std::string args_text = args.dump();
  std::string partial_args;
  for (std::size_t i = 0; i < args_text.size(); i += 6) {
    partial_args += args_text.substr(i, 6);
    content[2]["partialArgs"] = partial_args;
    snapshot_update({{"type", "toolcall_delta"}, {"contentIndex", 2}, {"delta", args_text.substr(i, 6)}}, content);
  }
  content[2] = {{"type", "toolCall"}, {"id", id}, {"name", "bash"}, {"arguments", args}};
  snapshot_update({{"type", "toolcall_end"}, {"contentIndex", 2}, {"toolCall", content[2]}}, content);
  const json call_message = gen::assistant(content, "toolUse", 4000, 300);
  gen::add(t, {{"type", "message_end"}, {"message", call_message}});
  gen::add(t, {{"type", "tool_execution_start"}, {"toolCallId", id}, {"toolName", "bash"}, {"args", args}});
  std::string output;
  for (std::size_t i = 0; i < 40; ++i) {
    output += "test_case_" + std::to_string(i) + " ... ok (" + std::to_string(i * 3 % 17) + " ms)\n";
    gen::add(t, {{"type", "tool_execution_update"}, {"toolCallId", id}, {"toolName", "bash"}, {"args", args},
                 {"partialResult", {{"content", json::array({{{"type", "text"}, {"text", output}}})},
                                    {"details", json::object()}}}});
  }
  const json result = {{"content", json::array({{{"type", "text"}, {"text", output}}})}};
  gen::add(t, {{"type", "tool_execution_end"}, {"toolCallId", id}, {"toolName", "bash"}, {"result", result},
               {"isError", false}});
  const json tool_message = {{"role", "toolResult"}, {"toolCallId", id}, {"toolName", "bash"},
                             {"content", result["content"]}, {"isError", false}, {"timestamp", 1795978154667LL}};
  gen::add(t, {{"type", "message_start"}, {"message", tool_message}});
  gen::add(t, {{"type", "message_end"}, {"message", tool_message}});
  gen::add(t, {{"type", "turn_end"}, {"message", call_message}, {"toolResults", json::array({tool_message})}});
  // Turn 2: the long answer, one cumulative snapshot per ~4-character token.
  gen::add(t, {{"type", "turn_start"}});
  gen::add(t, {{"type", "message_start"}, {"message", gen::assistant(json::array(), "stop")}});
  json answer = json::array({{{"type", "text"}, {"text", ""}}});
  snapshot_update({{"type", "text_start"}, {"contentIndex", 0}}, answer);
  std::string answer_text;
  const auto chunks = gen::prose_chunks(answer_chars, 3);
  for (const auto& c : chunks) {
    answer_text += c;
    answer[0]["text"] = answer_text;
    snapshot_update({{"type", "text_delta"}, {"contentIndex", 0}, {"delta", c}}, answer);
  }
  snapshot_update({{"type", "text_end"}, {"contentIndex", 0}, {"content", answer_text}}, answer);
  const json final_message = gen::assistant(answer, "stop", 5000, static_cast<int>(chunks.size()));
  gen::add(t, {{"type", "message_end"}, {"message", final_message}});
  gen::add(t, {{"type", "turn_end"}, {"message", final_message}, {"toolResults", json::array()}});
  gen::add(t, {{"type", "agent_end"}, {"messages", json::array({user, call_message, tool_message, final_message})}});
  return t;
}

}  // namespace

scale_content make_scale_content(const std::string& name, const fs::path& dir) {
  scale_content c;
  c.name = name;
  if (name == "synthetic") return c;
  agenthost::bench::transcript t;
  if (name == "pi-delta") t = agenthost::bench::make_transcript(transcript_kind::tools, 1);  // ≥ 0.84, 1 tool turn
  else if (name == "pi-snapshot") t = make_snapshot_tool_session(4000);
  else throw std::runtime_error("unknown scale content '" + name + "' (synthetic, pi-delta, pi-snapshot)");
  c.file = dir / ("scale-" + name + ".jsonl");
  std::ofstream f(c.file, std::ios::binary);
  for (const auto& l : t.lines) {
    f << l << '\n';
    c.line_sizes.push_back(l.size() + 1);
    c.bytes += l.size() + 1;
  }
  return c;
}

}  // namespace agenthost::bench::e2e
