// The pi line parser's internals (mapper/src/pi_event.hpp) that the mapper's behaviour tests reach only in part.
#include "mapper_test_util.hpp"
#include "pi_event.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

namespace {

using agenthost::mapper::detail::classify_event;
using agenthost::mapper::detail::event_kind;
using agenthost::mapper::detail::x_event;

TEST(PiEvent, ClassifyEventKnowsEveryTypeAndNothingElse) {
  const std::pair<std::string_view, event_kind> known[] = {
      {"session", event_kind::session},
      {"agent_start", event_kind::agent_start},
      {"agent_end", event_kind::agent_end},
      {"agent_settled", event_kind::agent_settled},
      {"turn_start", event_kind::turn_start},
      {"turn_end", event_kind::turn_end},
      {"message_start", event_kind::message_start},
      {"message_update", event_kind::message_update},
      {"message_end", event_kind::message_end},
      {"tool_execution_start", event_kind::tool_execution_start},
      {"tool_execution_update", event_kind::tool_execution_update},
      {"tool_execution_end", event_kind::tool_execution_end},
      {"auto_retry_start", event_kind::auto_retry_start},
      {"auto_retry_end", event_kind::auto_retry_end},
      {"auto_compaction_start", event_kind::compaction_start},
      {"compaction_start", event_kind::compaction_start},
      {"auto_compaction_end", event_kind::compaction_end},
      {"compaction_end", event_kind::compaction_end},
      {"extension_error", event_kind::extension_error},
  };
  for (const auto& [name, kind] : known) {
    EXPECT_EQ(classify_event(name), kind) << name;
    // The same length with one byte changed, one byte more or less, another case: not a known type.
    std::string changed(name);
    changed.back() = changed.back() == 'x' ? 'y' : 'x';
    EXPECT_EQ(classify_event(changed), event_kind::unknown) << changed;
    EXPECT_EQ(classify_event(std::string(name) + "s"), event_kind::unknown) << name << 's';
    EXPECT_EQ(classify_event(name.substr(0, name.size() - 1)), event_kind::unknown) << name.substr(0, name.size() - 1);
    std::string upper(name);
    upper[0] = static_cast<char>(upper[0] - 'a' + 'A');
    EXPECT_EQ(classify_event(upper), event_kind::unknown) << upper;
  }
  for (const std::string_view other : {"", "rate", "queue_update", "response", "message", "turn", "tool_execution"})
    EXPECT_EQ(classify_event(other), event_kind::unknown) << other;
}

// Lines of a type the mapper does not map are only checked. Whatever path takes them (the quote bitmap for a short
// plain line, the member-by-member scan, the On-Demand parser), the verdict is the On-Demand parser's: each line is
// also parsed with a space after its '{', which no fast path takes.
TEST(PiEvent, UnmappedLinesGetTheOnDemandVerdictWhicheverPathChecksThem) {
  const std::string pad(40, 'x');
  const std::pair<std::string, bool> lines[] = {
      {R"({"type":"rate","i":0,"pad":")" + pad + R"("})", true},
      {R"({"type":"rate","i":12345,"pad":")" + pad + R"(","more":[1,{"a":"b"}],"t":true,"n":null})", true},
      {R"({"type":"rate" , "i" : 1 , "pad" : ")" + pad + R"(" })", true},
      {R"({"type":"rate","obj":{},"arr":[],"pad":")" + pad + R"("})", true},
      {R"({"type":"rate","pad":")" + pad + R"(","nested":{"x":{"y":[1,2,3]}}})", true},
      {R"({"type":"rate","pad":")" + pad + R"(","é":"ü"})", true},              // not ASCII
      {R"({"type":"rate","pad":")" + pad + R"(","q":"a\"b\\c\n"})", true},       // escapes
      {R"({"type":"rate","pad":")" + pad + R"("}   )", true},                     // spaces after the object
      {R"({"type":"rate","pad":")" + pad + R"("})" + std::string(600, ' '), true},  // too long for the bitmap
      {R"({"type":"rate","pad":")" + pad + R"(","type":"message_end"})", true},    // a second type: reclassified
      {R"({"type":"rate","pad":")" + pad + R"(")", false},                         // no closing brace
      {R"({"type":"rate","pad":")" + pad + R"(}")", false},                        // a string left open
      {R"({"type":"rate","pad":")" + pad + R"("}})", false},                       // a brace too many
      {R"({"type":"rate","pad":")" + pad + R"("} })", false},                      // a brace after the object
      {R"({"type":"rate","pad":")" + pad + R"(",})", false},                       // a comma before the brace
      {R"({"type":"rate","pad":")" + pad + R"(","a":})", false},                   // a member without a value
      {R"({"type":"rate","pad":")" + pad + R"(","a":{})", false},                  // an object left open
      {R"({"type":"rate","pad":")" + pad + R"(","a":1,"b"})", false},              // a key without a value
      {R"({"type":"rate","pad":")" + pad + R"(" "a":1})", false},                  // no comma
      {R"({"type":"rate","pad":")" + pad + "\x01" + R"("})", false},             // a control character in a string
      {R"({"type":"rate","pad":")" + pad + "\xff" + R"("})", false},             // not UTF-8
      {R"({"type":"rate","i":1,"pad":")" + pad + R"("}x})", false},                // bytes after the object
  };
  agenthost::mapper::detail::pi_event_parser parser;
  for (const auto& [line, valid] : lines) {
    // An exact-size copy: under ASan a read past the line's end is an error (a std::string has spare capacity).
    const auto exact = std::make_unique<char[]>(line.size());
    std::copy(line.begin(), line.end(), exact.get());
    const bool skipped = parser.skip_unmapped(std::string_view(exact.get(), line.size()));
    const bool fast = parser.parse(std::string_view(exact.get(), line.size())) == simdjson::SUCCESS;
    const event_kind fast_kind = parser.event().kind;
    // The mapper's lane for these lines (skip_unmapped, without parse()) takes exactly the valid unmapped ones here.
    EXPECT_EQ(skipped, fast && fast_kind == event_kind::unknown) << line;
    std::string spaced = line;
    spaced.insert(1, " ");
    const bool on_demand = parser.parse(spaced) == simdjson::SUCCESS;
    EXPECT_EQ(fast, on_demand) << line;
    EXPECT_EQ(fast, valid) << line;
    if (fast && on_demand) {
      EXPECT_EQ(fast_kind, parser.event().kind) << line;
      EXPECT_EQ(fast_kind, line.find(R"("type":"message_end")") == std::string::npos ? event_kind::unknown
                                                                                       : event_kind::message_end);
    }
  }
}

// agent_end, the run's last and longest line (the whole session's messages), is checked by a byte scan that reads
// only its flags. Whatever path reads it, the event is the On-Demand parser's: each line is also parsed with a space
// after its '{', which no fast path takes.
TEST(PiEvent, AgentEndGetsTheOnDemandEventWhicheverPathReadsIt) {
  const std::string messages =
      R"("messages":[{"role":"user","content":[{"type":"text","text":"Fix it.\n"}],"timestamp":1},)"
      R"({"role":"assistant","content":[{"type":"text","text":"Done: caf\u00e9 é"}],"usage":{"input":1.5e3}}])";
  struct expected {
    int will_retry = -1, aborted = -1, success = -1;
    bool is_error = false;
  };
  const std::tuple<std::string, bool, expected> lines[] = {
      {R"({"type":"agent_end",)" + messages + "}", true, {}},
      {R"({"type":"agent_end",)" + messages + R"(,"willRetry":false})", true, {.will_retry = 0}},
      {R"({"type":"agent_end",)" + messages + R"(,"willRetry":true,"aborted":false})", true,
       {.will_retry = 1, .aborted = 0}},
      {R"({"type":"agent_end","aborted":true,"success":false,"isError":true,)" + messages + "}", true,
       {.aborted = 1, .success = 0, .is_error = true}},
      {R"({"type":"agent_end","willRetry":true,"willRetry":false})", true, {.will_retry = 0}},  // the later one
      {R"({"type":"agent_end","willRetry":"yes","aborted":null,"isError":1})", true, {}},    // wrong types: absent
      {R"({"type":"agent_end","willRetry":true,"willRetry":null})", true, {.will_retry = 1}},
      {R"({"type":"agent_end" , "willRetry" : true })", true, {.will_retry = 1}},
      {R"({"type":"agent_end","errorMessage":"boom","willRetry":false})", true, {.will_retry = 0}},  // On-Demand
      {R"({"type":"agent_end","reason":"x","attempt":2})", true, {}},
      {R"({"type":"agent_end","message":{"role":"assistant"},"toolResults":[],"usage":{}})", true, {}},
      {R"({"type":"agent_end"})", true, {}},
      {R"({"type":"agent_end","willRetry":truex})", true, {}},  // On-Demand: not a bool, so absent
      {R"({"type":"agent_end","willRetry":true)", false, {}},                   // no closing brace
      {R"({"type":"agent_end",)" + messages + "}}", false, {}},                  // a brace too many
      {R"({"type":"agent_end",)" + messages.substr(0, 60) + "}", false, {}},    // the messages cut off
      {R"({"type":"agent_end","messages":[{"text":")" + std::string("a\x01") + R"("}]})", false, {}},
      {R"({"type":"agent_end","messages":[{"text":")" + std::string("\xff") + R"("}]})", false, {}},
      {R"({"type":"agent_end","willRetry":false} x)", false, {}},
  };
  agenthost::mapper::detail::pi_event_parser parser;
  for (const auto& [line, valid, want] : lines) {
    const auto exact = std::make_unique<char[]>(line.size());  // under ASan a read past the line's end is an error
    std::copy(line.begin(), line.end(), exact.get());
    const bool fast = parser.parse(std::string_view(exact.get(), line.size())) == simdjson::SUCCESS;
    const x_event ev = parser.event();
    std::string spaced = line;
    spaced.insert(1, " ");
    const bool on_demand = parser.parse(spaced) == simdjson::SUCCESS;
    EXPECT_EQ(fast, valid) << line;
    EXPECT_EQ(on_demand, valid) << line;
    if (!fast || !on_demand) continue;
    for (const x_event* e : {&ev, &std::as_const(parser).event()}) {
      EXPECT_EQ(e->kind, event_kind::agent_end) << line;
      EXPECT_EQ(e->will_retry, want.will_retry) << line;
      EXPECT_EQ(e->aborted, want.aborted) << line;
      EXPECT_EQ(e->success, want.success) << line;
      EXPECT_EQ(e->is_error, want.is_error) << line;
    }
  }
}

// Everything parse_message() and parse_tool_results() put into an event, as text (numbers exactly, as hex floats).
std::string describe(const agenthost::mapper::detail::x_message& m) {
  std::string s;
  const auto add = [&s](std::string_view name, std::string_view value) {
    s.append(name).append("=").append(value).append(";");
  };
  const auto number = [](double d) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%a", d);
    return std::string(buf);
  };
  add("present", m.present ? "1" : "0");
  add("role", m.role);
  add("stop", m.stop_reason);
  add("error", m.has_error_message ? m.error_message : "(none)");
  add("model", m.model);
  add("call", m.tool_call_id);
  add("tool", m.tool_name);
  add("is_error", m.is_error ? "1" : "0");
  add("has_content", m.has_content ? "1" : "0");
  for (std::size_t i = 0; i < m.nblocks; ++i) {
    const auto& b = m.blocks[i];
    add("block", std::to_string(static_cast<int>(b.kind)));
    add("text", b.text);
    add("id", b.id);
    add("name", b.name);
    add("arguments", b.has_arguments ? b.arguments.dump() : "(none)");
  }
  add("content_json", m.has_content_json ? m.content_json.dump() : "(none)");
  add("details", m.has_details ? m.details.dump() : "(none)");
  const auto& u = m.usage;
  add("usage", u.present ? "1" : "0");
  for (const double d : {u.input, u.output, u.cache_read, u.cache_write, u.total_tokens, u.reasoning, u.cost_input,
                         u.cost_output, u.cost_cache_read, u.cost_cache_write, u.cost_total})
    add("n", number(d));
  add("reasoning", u.has_reasoning ? "1" : "0");
  add("cost", u.has_cost ? "1" : "0");
  return s;
}

// The fields of tool_execution_* and of a toolcall_end update, as text.
std::string describe_tool(const x_event& ev) {
  std::string s = "kind=" + std::to_string(static_cast<int>(ev.kind));
  s += ";call=" + std::string(ev.tool_call_id) + ";tool=" + std::string(ev.tool_name);
  s += ";args=" + (ev.has_args ? ev.args.dump() : "(none)");
  s += ";result=" + (ev.has_result ? ev.result.dump() : "(none)");
  s += ";is_error=" + std::to_string(ev.is_error ? 1 : 0);
  s += ";update=" + std::to_string(static_cast<int>(ev.update)) + ";index=" + std::to_string(ev.content_index);
  if (ev.has_tool_call) {
    const auto& b = ev.tool_call;
    s += ";tool_call{kind=" + std::to_string(static_cast<int>(b.kind)) + ";text=" + std::string(b.text) +
         ";id=" + std::string(b.id) + ";name=" + std::string(b.name) +
         ";arguments=" + (b.has_arguments ? b.arguments.dump() : "(none)") + "}";
  }
  return s;
}

std::string describe(const x_event& ev) {
  std::string s = "kind=" + std::to_string(static_cast<int>(ev.kind)) + ";message{" + describe(ev.message) + "}";
  for (std::size_t i = 0; i < ev.ntool_results; ++i) s += ";result{" + describe(ev.tool_results[i]) + "}";
  return s + ";" + describe_tool(ev);
}

// message_start, message_end and turn_end carry whole messages; a byte scan reads those it can read exactly as
// parse_message() does and leaves the rest to On-Demand. Whatever path reads a line, the event is the On-Demand
// parser's: each line is also parsed with a space after its '{', which no fast path takes. `fast` says which lines the
// byte scan must take (pi's own spelling of each event, and the variations it reads).
TEST(PiEvent, MessageEventsGetTheOnDemandEventWhicheverPathReadsThem) {
  const std::string usage =
      R"("usage":{"input":5000,"output":900,"cacheRead":3,"cacheWrite":4,"totalTokens":5907,)"
      R"("cost":{"input":0.0012,"output":0.30000000000000004,"cacheRead":0.25,"cacheWrite":0,"total":1.5}})";
  const std::string assistant =
      R"({"role":"assistant","content":[{"type":"thinking","thinking":"Plan \"it\".","thinkingSignature":"r"},)"
      R"({"type":"text","text":"caf\u00e9 é\n"},)"
      R"({"type":"toolCall","id":"call_1","name":"bash","arguments":{"command":"ls -la","n":[1,-2,true,null,{}]}}],)"
      R"("api":"openai-completions","provider":"local","model":"fake-model",)" +
      usage + R"(,"stopReason":"toolUse","timestamp":1795978154187,"responseId":"chatcmpl-fake"})";
  const std::string closed_result =
      R"({"role":"toolResult","toolCallId":"closed","toolName":"bash","content":[{"type":"text","text":"ok\n"}],)"
      R"("details":{"exitCode":0,"lines":[1,2.5]},"isError":false,"timestamp":1795978154667})";
  const std::string open_result =
      R"({"role":"toolResult","toolCallId":"open","toolName":"bash","content":[{"type":"text","text":"ok"}],)"
      R"("details":{"exitCode":1},"isError":true})";
  const std::pair<std::string, bool> fast_lines[] = {
      {R"({"type":"message_start","message":{"role":"user","content":[{"type":"text","text":"Fix it.\n"}],"timestamp":1}})", true},
      {R"({"type":"message_start","message":{"role":"assistant","content":[],"model":"m","stopReason":"pending"}})", true},
      {R"({"type":"message_end","message":)" + assistant + "}", true},
      {R"({"type":"message_start","message":)" + assistant + "}", true},
      {R"({"type":"message_end","message":)" + closed_result + "}", true},
      {R"({"type":"message_start","message":)" + open_result + "}", true},  // header only: its JSON is not built
      {R"({"type":"turn_end","message":)" + assistant + R"(,"toolResults":[)" + closed_result + "," + closed_result +
           "]}", true},
      {R"({"type":"turn_end","message":)" + assistant + R"(,"toolResults":[]})", true},
      {R"({"type":"message_end","message":{"role":"assistant","content":"plain","errorMessage":"429 \u0041","stopReason":"error"}})", true},
      {R"({"type":"message_end","message":{"role":"assistant","content":5,"usage":{"input":1,"reasoning":12,"cost":{}}}})", true},
      {R"({"type":"message_end","message":{"role":"assistant","content":[1,"x",[],{"type":"text","text":"a","text":"b"}]}})", true},
      {R"({"type":"message_end","message":{"role":"assistant","content":[{"text":"a"}],"content":[{"type":"thinking","text":"t","thinking":"th"}]}})", true},
      {R"({"type":"message_end","message":{"content":[{"type":"text","text":"before role"}],"role":"assistant","details":{"a":1}}})", true},
      {R"({"type":"message_end","message":{"role":"assistant","isError":"yes","stopReason":"stop","stopReason":"end"}})", true},
      {R"({"type":"message_end","message":{"role":"custom","content":[{"type":"image","data":"AAAA"}]}})", true},
      {R"({"type":"message_end","message":{"role":"assistant","usage":{"input":0.5,"input":7}}})", true},
      {R"({"type":"message_end" , "message" : { "role" : "assistant" , "content" : [ { "type" : "text" , "text" : "spaced" } ] } })", true},
      {R"({"type":"message_end","message":{}})", true},
      // Exponents: JavaScript prints a cost below 1e-6 as 1.2e-7.
      {R"({"type":"message_end","message":{"role":"assistant","usage":{"input":1.5e3,"output":2E+2,)"
       R"("cost":{"input":1.2e-7,"output":6E-7,"cacheRead":0.5e0,"cacheWrite":1e-0300,)"
       R"("total":7.999999999999999e-7}}}})",
       true},
      // Left to On-Demand (same event, or the same verdict).
      {R"({"type":"message_end","message":)" + open_result + "}", false},  // the result of an open call is built
      {R"({"type":"turn_end","message":)" + assistant + R"(,"toolResults":[)" + open_result + "]}", false},
      {R"({"type":"turn_end","message":)" + assistant + R"(,"toolResults":null})", false},
      {R"({"type":"turn_end","message":)" + assistant + R"(,"toolResults":[1]})", false},
      {R"({"type":"message_end","message":{"role":"assistant","content":[{"type":"toolCall","arguments":{"n":2.5}}]}})", false},
      {R"({"type":"message_end","message":{"role":"assistant","content":[{"type":"toolCall","arguments":{"n": 2}}]}})", false},
      {R"({"type":"message_end","message":{"role":"assistant","usage":{"input":-1}}})", false},
      {R"({"type":"message_end","message":{"role":"assistant","usage":{"input":1e99999}}})", false},
      {R"({"type":"message_end","message":{"role":"assistant","usage":{"input":1e400}}})", false},
      {R"({"type":"message_end","message":{"role":"assistant","usage":{"cost":{"total":-1.2e-7}}}})", false},
      // Not numbers: On-Demand's get_number() fails on them and the field stays unset, as for a string.
      {R"({"type":"message_end","message":{"role":"assistant","usage":{"input":1e}}})", false},
      {R"({"type":"message_end","message":{"role":"assistant","usage":{"cost":{"total":1.5e+}}}})", false},
      {R"({"type":"message_end","message":{"role":"assistant","usage":{"input":1.e5}}})", false},
      {R"({"type":"message_end","message":{"role":"assistant","usage":{"input":01}}})", false},
      {R"({"type":"message_end","message":{"role":"assistant","usage":{"input":"many"}}})", false},
      {R"({"type":"message_end","message":{"role":"assistant","usage":{"cost":"free"}}})", false},
      {R"({"type":"message_end","message":{"role":"assistant","usage":null}})", false},
      {R"({"type":"message_end","message":{"role":5,"content":[{"type":"text","text":"a"}]}})", false},
      {R"({"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":7}]}})", false},
      {R"({"type":"message_end","message":null})", false},
      {R"({"type":"message_end","message":{"role":"assistant"},"message":{"role":"user"}})", false},
      {R"({"type":"message_end","message":{"role":"assistant"},"toolCallId":"x"})", false},
      {R"({"type":"message_end","message":{"r\u006fle":"assistant"}})", false},
      {R"({"message":{"role":"assistant"},"type":"message_end"})", false},
      {R"({"type":"message_end","message":{"role":"assistant","timestamp":)" + std::string(70, '[') +
           std::string(70, ']') + "}}", false},
  };
  const std::string bad_lines[] = {
      R"({"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"open]}})",
      R"({"type":"message_end","message":{"role":"assistant"}}x)",
      R"({"type":"message_end","message":{"role":"assistant","content":[}})",
      R"({"type":"turn_end","message":{"role":"assistant"},"toolResults":[{"role":"toolResult",}]})",
      R"({"type":"message_end","message":{"role":"assistant","model":")" "\xff" R"("}})",
      R"({"type":"message_end","message":{"role":"assistant","model":"a)" "\x01" R"("}})",
  };
  agenthost::mapper::detail::pi_event_parser parser;
  parser.set_closed_call_check([](std::string_view id) { return id == "closed"; });
  // An exact-size copy of the line (under ASan a read past its end is an error), kept until the next one: the event's
  // strings may be views into it.
  std::unique_ptr<char[]> exact;
  const auto parse_exact = [&parser, &exact](const std::string& line) {
    exact = std::make_unique<char[]>(line.size());
    std::copy(line.begin(), line.end(), exact.get());
    return parser.parse(std::string_view(exact.get(), line.size())) == simdjson::SUCCESS;
  };
  for (const auto& [line, fast] : fast_lines) {
    ASSERT_TRUE(parse_exact(line)) << line;
    EXPECT_EQ(parser.took_fast_path(), fast) << line;
    const std::string scanned = describe(parser.event());
    std::string spaced = line;
    spaced.insert(1, " ");
    ASSERT_EQ(parser.parse(spaced), simdjson::SUCCESS) << line;
    EXPECT_FALSE(parser.took_fast_path()) << line;
    EXPECT_EQ(scanned, describe(parser.event())) << line;
  }
  for (const auto& line : bad_lines) {
    EXPECT_FALSE(parse_exact(line)) << line;
    std::string spaced = line;
    spaced.insert(1, " ");
    EXPECT_NE(parser.parse(spaced), simdjson::SUCCESS) << line;
  }
  // What the byte scan read, field by field, on pi's own lines.
  ASSERT_TRUE(parse_exact(R"({"type":"turn_end","message":)" + assistant + R"(,"toolResults":[)" + closed_result + "]}"));
  ASSERT_TRUE(parser.took_fast_path());
  const x_event& ev = parser.event();
  EXPECT_EQ(ev.kind, event_kind::turn_end);
  ASSERT_EQ(ev.message.nblocks, 3U);
  EXPECT_EQ(ev.message.blocks[0].text, "Plan \"it\".");
  EXPECT_EQ(ev.message.blocks[1].text, "caf\u00e9 \u00e9\n");
  EXPECT_EQ(ev.message.blocks[2].kind, agenthost::mapper::detail::block_kind::tool_call);
  EXPECT_EQ(ev.message.blocks[2].arguments, nlohmann::json::parse(R"({"command":"ls -la","n":[1,-2,true,null,{}]})"));
  EXPECT_EQ(ev.message.stop_reason, "toolUse");
  EXPECT_EQ(ev.message.usage.input, 5000);
  EXPECT_EQ(ev.message.usage.cost_input, 0.0012);
  EXPECT_EQ(ev.message.usage.cost_output, 0.30000000000000004);
  ASSERT_EQ(ev.ntool_results, 1U);
  EXPECT_EQ(ev.tool_results[0].tool_call_id, "closed");
  EXPECT_TRUE(ev.tool_results[0].has_content);
  EXPECT_FALSE(ev.tool_results[0].has_content_json);  // a closed call's result is checked, not built
}

// pi's own message and tool events (message_start / message_end / turn_end, tool_execution_start / tool_execution_end,
// toolcall_end; every recorded and derived pi transcript of fixtures/pi) take the byte scan, with the On-Demand event.
// Every call counts as closed here, as it is by the time pi writes its result's message_end.
TEST(PiEvent, RecordedMessageAndToolEventsTakeTheByteScan) {
  agenthost::mapper::detail::pi_event_parser parser;
  parser.set_closed_call_check([](std::string_view) { return true; });
  std::size_t checked = 0;
  for (const char* dir : {"", "recorded"}) {
    for (const auto& entry : std::filesystem::directory_iterator(agenthost::mapper::test::fixture_path(dir))) {
      if (entry.path().extension() != ".jsonl") continue;
      for (const std::string& line : agenthost::mapper::test::read_lines(entry.path().string())) {
        const bool tool_call_end = line.find(R"("type":"toolcall_end")") != std::string::npos;
        if (line.rfind(R"({"type":"message_start")", 0) != 0 && line.rfind(R"({"type":"message_end")", 0) != 0 &&
            line.rfind(R"({"type":"turn_end")", 0) != 0 && line.rfind(R"({"type":"tool_execution_start")", 0) != 0 &&
            line.rfind(R"({"type":"tool_execution_end")", 0) != 0 && !tool_call_end)
          continue;
        ASSERT_EQ(parser.parse(line), simdjson::SUCCESS) << line;
        EXPECT_TRUE(parser.took_fast_path()) << entry.path() << ": " << line;
        const std::string scanned = describe(parser.event());
        ASSERT_EQ(parser.parse("{ " + line.substr(1)), simdjson::SUCCESS) << line;
        EXPECT_EQ(scanned, describe(parser.event())) << line;
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 100U);
}

// tool_execution_start / tool_execution_end and a toolcall_end update carry JSON the mapper builds (args, result, the
// call's arguments): the byte scan builds it with raw_to_json() or leaves the line to On-Demand, with the same event.
TEST(PiEvent, ToolEventsGetTheOnDemandEventWhicheverPathReadsThem) {
  const std::string usage =
      R"("usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"total":0}})";
  const std::pair<std::string, bool> lines[] = {
      {R"({"type":"tool_execution_start","toolCallId":"call_1","toolName":"bash","args":{"command":"make test 2>&1 | tail -n 200","timeout":30}})", true},
      {R"({"type":"tool_execution_end","toolCallId":"call_1","toolName":"bash","result":{"content":[{"type":"text","text":"ok\n\u00e9"}],"details":{}},"isError":false})", true},
      {R"({"type":"tool_execution_end","toolCallId":"c","toolName":"bash","partialResult":[1,"a"],"isError":true,"isError":"no"})", true},
      {R"({"type":"tool_execution_start","toolCallId":"c","toolName":"read","args":{"path":"a"},"result":{"x":1}})", true},
      {R"({"type":"tool_execution_end","toolCallId":"c","args":{"path":"a"},"result":"text","result":{"b":[true,null]}})", true},
      {R"({"type":"message_update",)" + usage + R"(,"assistantMessageEvent":{"type":"toolcall_end","contentIndex":2,)"
       R"("toolCall":{"type":"toolCall","id":"call_1","name":"bash","arguments":{"command":"ls","n":[1,-2,{}]}}}})", true},
      {R"({"type":"message_update","assistantMessageEvent":{"type":"toolcall_end","contentIndex":0,"toolCall":{"type":"toolCall","id":"x","arguments":{}},"toolCall":{"name":"n"}}})", true},
      // Left to On-Demand: what raw_to_json() does not convert, members parse_root() reads for every event, types.
      {R"({"type":"tool_execution_start","toolCallId":"c","args":{"n":2.5}})", false},
      {R"({"type":"tool_execution_start","toolCallId":"c","args":{"n": 2}})", false},
      {R"({"type":"tool_execution_end","toolCallId":"c","result":{"k\u0041":1}})", false},
      {R"({"type":"tool_execution_end","toolCallId":"c","result":{},"errorMessage":"boom"})", false},
      {R"({"type":"tool_execution_end","toolCallId":5,"result":{}})", false},
      {R"({"type":"message_update","assistantMessageEvent":{"type":"toolcall_end","toolCall":{"type":"toolCall","arguments":{"a":1e3}}}})", false},
      {R"({"type":"message_update","assistantMessageEvent":{"type":"toolcall_end","toolCall":null}})", false},
  };
  agenthost::mapper::detail::pi_event_parser parser;
  for (const auto& [line, fast] : lines) {
    const auto exact = std::make_unique<char[]>(line.size());  // under ASan a read past the line's end is an error
    std::copy(line.begin(), line.end(), exact.get());
    ASSERT_EQ(parser.parse(std::string_view(exact.get(), line.size())), simdjson::SUCCESS) << line;
    EXPECT_EQ(parser.took_fast_path(), fast) << line;
    const std::string scanned = describe(parser.event());
    ASSERT_EQ(parser.parse("{ " + line.substr(1)), simdjson::SUCCESS) << line;
    EXPECT_EQ(scanned, describe(parser.event())) << line;
  }
}

// skip_unmapped() only answers for a line whose first member is `type` naming an unmapped event; it never parses, so
// the last parse()'s event stays as it was.
TEST(PiEvent, SkipUnmappedTakesOnlyUnmappedTypesAndLeavesTheEventAlone) {
  agenthost::mapper::detail::pi_event_parser parser;
  ASSERT_EQ(parser.parse(R"({"type":"turn_start"})"), simdjson::SUCCESS);
  ASSERT_EQ(parser.event().kind, event_kind::turn_start);
  EXPECT_TRUE(parser.skip_unmapped(R"({"type":"queue_update","steering":[],"followUp":[]})"));
  EXPECT_TRUE(parser.skip_unmapped(R"({"type":"rate"})"));
  EXPECT_EQ(parser.event().kind, event_kind::turn_start);
  // Mapped types, whatever their members: parse() reads them.
  EXPECT_FALSE(parser.skip_unmapped(R"({"type":"turn_start"})"));
  EXPECT_FALSE(parser.skip_unmapped(R"({"type":"message_update","assistantMessageEvent":{"type":"start"}})"));
  EXPECT_FALSE(parser.skip_unmapped(R"({"type":"tool_execution_update","toolCallId":"a"})"));
  // Valid unmapped events that this check leaves to parse(): `type` not first, an escaped type, a space before it, a
  // type beginning with 'm' (the per-token message_update leaves after one byte test).
  for (const std::string_view other : {R"({"i":1,"type":"rate"})", R"({"type":"r\u0061te"})", R"({ "type":"rate"})",
                                       R"({"type":"model_changed"})"}) {
    EXPECT_FALSE(parser.skip_unmapped(other)) << other;
    ASSERT_EQ(parser.parse(other), simdjson::SUCCESS) << other;
    EXPECT_EQ(parser.event().kind, event_kind::unknown) << other;
  }
  // Not JSON, or not an object with a type: never skipped.
  for (const std::string_view bad : {"", "{", R"({"type":)", R"({"type":"rate")", R"({"type":"rate"}{})", "[1]"})
    EXPECT_FALSE(parser.skip_unmapped(bad)) << bad;
}

// A huge line grows the padded buffer and the parsers' indexes; a small line afterwards gives that memory back — the
// index of the parser that reads a message that came before the line's type too.
TEST(PiEvent, TheMemoryOfAHugeLineIsGivenBack) {
  agenthost::mapper::detail::pi_event_parser parser;
  const std::string text(std::size_t{40} << 20, 'x');
  // `message` before `type`: kept raw, then read by the second (deferred) parser once the type is known.
  const std::string huge = R"({"message":{"role":"assistant","content":[{"type":"text","text":")" + text +
                           R"("}],"stopReason":"stop"},"type":"message_end"})";
  ASSERT_EQ(parser.parse(huge), simdjson::SUCCESS);
  ASSERT_EQ(parser.event().kind, event_kind::message_end);
  ASSERT_GT(parser.bytes_held(), huge.size());
  const std::string small = R"({"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"stop"}})";
  ASSERT_EQ(parser.parse(small), simdjson::SUCCESS);
  EXPECT_LT(parser.bytes_held(), std::size_t{1} << 20) << "after a 40 MB line, a small one";
}

}  // namespace
