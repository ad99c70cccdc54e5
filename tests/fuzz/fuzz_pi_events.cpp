// Fuzz target: mapper::pi_mapper on generated pi event sequences — a structure-aware companion of fuzz_pi_mapper.
//
// Byte mutation of JSON rarely produces a *different valid event*; this target turns the input bytes into a sequence
// of well-formed pi events (every kind the mapper handles, both wire formats: deltas and snapshot-only updates) with
// parameters drawn from small sets — three call ids, three content indexes, a handful of texts (multi-byte UTF-8, a
// lone surrogate escape, whitespace), every stop reason — so that the fuzzer explores the mapper's state machine:
// orders pi never produces, repeated, missing and interleaved events. Same properties as fuzz_pi_mapper
// (mapper_checks.hpp).
//
// Input layout: [options byte][end byte] then per event [opcode][parameter bytes…] until the input ends (≤ 256 events).
#include "mapper_checks.hpp"

#include <array>

namespace {

using agenthost::fuzz::byte_reader;

constexpr std::array<const char*, 3> ids{"c1", "c2", "c3"};
constexpr std::array<const char*, 3> tools{"bash", "read", ""};
// JSON string bodies (already escaped).
constexpr std::array<const char*, 12> texts{"",          " ",        "a",          "Hello",  " world", "h\u00e9llo",
                                            "\xF0\x9F\x98\x80", "\\ud83d",  "x\\ny",      "\\\"q\\\"", "Hello world",
                                            "The command printed `hello`."};
constexpr std::array<const char*, 7> stops{"stop", "length", "toolUse", "error", "aborted", "pending", ""};
constexpr std::array<const char*, 5> errors{"503 service unavailable", "400 bad request", "overloaded", "", "x"};
constexpr std::array<const char*, 2> sessions{"01a228a3-d083-76d7-a9f9-b93789e48028", "s2"};

class gen {
 public:
  explicit gen(byte_reader& in) : in_(in) {}
  std::uint8_t b() { return in_.byte(); }
  template <std::size_t N>
  const char* pick(const std::array<const char*, N>& a) {
    return a[b() % N];
  }
  std::string str(const char* s) { return std::string("\"") + s + "\""; }
  std::string idx() { return std::to_string(b() % 3); }
  std::string boolean() { return b() % 2 != 0 ? "true" : "false"; }
  std::string text() { return str(pick(texts)); }

  std::string tool_call_block() {
    return R"({"type":"toolCall","id":)" + str(pick(ids)) + R"(,"name":)" + str(pick(tools)) +
           R"(,"arguments":{"command":)" + text() + "}}";
  }
  std::string block() {
    switch (b() % 3) {
      case 0: return R"({"type":"text","text":)" + text() + "}";
      case 1: return R"({"type":"thinking","thinking":)" + text() + "}";
      default: return tool_call_block();
    }
  }
  std::string assistant_message() {
    std::string m = R"({"role":"assistant","content":[)";
    const int n = b() % 4;
    for (int i = 0; i < n; ++i) m += (i > 0 ? "," : "") + block();
    m += "]";
    if (const char* s = pick(stops); *s != '\0') m += R"(,"stopReason":)" + str(s);
    if (b() % 2 != 0) m += R"(,"errorMessage":)" + str(pick(errors));
    m += R"(,"model":"m","usage":{"input":)" + std::to_string(b()) + R"(,"output":)" + std::to_string(b()) +
         R"(,"cacheRead":0,"cacheWrite":0,"totalTokens":)" + std::to_string(b()) + "}}";
    return m;
  }
  std::string tool_result_message() {
    return R"({"role":"toolResult","toolCallId":)" + str(pick(ids)) + R"(,"toolName":)" + str(pick(tools)) +
           R"(,"content":[{"type":"text","text":)" + text() + R"(}],"isError":)" + boolean() + "}";
  }
  // Three spellings of one update: bare; pi ≥ 0.84 (delta-only) with `usage` first — the prefix the mapper's fast
  // path memoizes across lines; pi ≤ 0.83 with the cumulative `partial` snapshot after the event's own fields.
  std::string update(const std::string& event) {
    switch (b() % 3) {
      case 0: return R"({"type":"message_update","assistantMessageEvent":)" + event + "}";
      case 1:
        return R"({"type":"message_update","usage":{"input":)" + std::to_string(b() % 3) +
               R"(,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"assistantMessageEvent":)" +
               event + "}";
      default: {
        std::string e = event;
        e.pop_back();  // the closing '}' of the event
        return R"({"type":"message_update","assistantMessageEvent":)" + e + R"(,"partial":)" + assistant_message() +
               "}}";
      }
    }
  }

  std::string event() {
    switch (b() % 24) {
      case 0: return R"({"type":"session","version":3,"id":)" + str(pick(sessions)) + R"(,"cwd":"/p"})";
      case 1: return R"({"type":"agent_start"})";
      case 2: {
        const int r = b() % 3;
        return std::string(R"({"type":"agent_end","messages":[])") +
               (r == 0 ? "" : std::string(R"(,"willRetry":)") + (r == 1 ? "true" : "false")) + "}";
      }
      case 3: return R"({"type":"agent_settled","aborted":)" + boolean() + "}";
      case 4: return R"({"type":"turn_start"})";
      case 5: {
        std::string e = R"({"type":"turn_end","message":)" + assistant_message() + R"(,"toolResults":[)";
        const int n = b() % 3;
        for (int i = 0; i < n; ++i) e += (i > 0 ? "," : "") + tool_result_message();
        return e + "]}";
      }
      case 6: return R"({"type":"message_start","message":{"role":"assistant","content":[]}})";
      case 7: return R"({"type":"message_start","message":{"role":"user","content":[{"type":"text","text":"q"}]}})";
      case 8: return update(R"({"type":"text_start","contentIndex":)" + idx() + "}");
      case 9: return update(R"({"type":"text_delta","contentIndex":)" + idx() + R"(,"delta":)" + text() + "}");
      case 10: return update(R"({"type":"text_end","contentIndex":)" + idx() + R"(,"content":)" + text() + "}");
      case 11: return update(R"({"type":"thinking_start","contentIndex":)" + idx() + "}");
      case 12: return update(R"({"type":"thinking_delta","contentIndex":)" + idx() + R"(,"delta":)" + text() + "}");
      case 13: return update(R"({"type":"thinking_end","contentIndex":)" + idx() + R"(,"content":)" + text() + "}");
      case 14: return update(R"({"type":"toolcall_start","contentIndex":)" + idx() + R"(,"id":)" + str(pick(ids)) +
                             R"(,"toolName":)" + str(pick(tools)) + "}");
      case 15: return update(R"({"type":"toolcall_delta","contentIndex":)" + idx() + R"(,"delta":"{\"command\":"})");
      case 16: return update(R"({"type":"toolcall_end","contentIndex":)" + idx() + R"(,"toolCall":)" +
                             tool_call_block() + "}");
      case 17: {  // snapshot era: an update without a delta, the cumulative message in `partial`
        const std::string kind = b() % 2 != 0 ? "text_delta" : "thinking_delta";
        return update(R"({"type":")" + kind + R"(","contentIndex":)" + idx() + R"(,"partial":)" + assistant_message() +
                      "}");
      }
      case 18: return R"({"type":"message_end","message":)" + assistant_message() + "}";
      case 19: return R"({"type":"message_end","message":)" + tool_result_message() + "}";
      case 20: {
        const std::string id = str(pick(ids)), name = str(pick(tools));
        switch (b() % 3) {
          case 0: return R"({"type":"tool_execution_start","toolCallId":)" + id + R"(,"toolName":)" + name +
                         R"(,"args":{"command":)" + text() + "}}";
          case 1: return R"({"type":"tool_execution_update","toolCallId":)" + id + R"(,"toolName":)" + name +
                         R"(,"partialResult":{"content":[{"type":"text","text":)" + text() + "}]}}";
          default: return R"({"type":"tool_execution_end","toolCallId":)" + id + R"(,"toolName":)" + name +
                          R"(,"result":{"content":[{"type":"text","text":)" + text() + R"(}]},"isError":)" + boolean() +
                          "}";
        }
      }
      case 21:
        if (b() % 2 != 0)
          return R"({"type":"auto_retry_start","attempt":)" + std::to_string(b() % 4) +
                 R"(,"maxAttempts":3,"delayMs":100,"errorMessage":)" + str(pick(errors)) + "}";
        return R"({"type":"auto_retry_end","success":)" + boolean() + R"(,"attempt":2,"finalError":)" +
               str(pick(errors)) + "}";
      case 22:
        if (b() % 2 != 0) return R"({"type":"auto_compaction_start","reason":"overflow"})";
        return R"({"type":"auto_compaction_end","willRetry":)" + boolean() + R"(,"aborted":)" + boolean() + "}";
      default: {
        constexpr std::array<const char*, 5> junk{"not json", "{}", "[]", "", R"({"type":"queue_update"})"};
        return pick(junk);
      }
    }
  }

 private:
  byte_reader& in_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  byte_reader in(data, size);
  const auto options = agenthost::fuzz::make_options(in.byte());
  const auto end = agenthost::fuzz::make_end(in.byte());
  std::vector<std::string> events;
  gen g(in);
  while (in.remaining() > 0 && events.size() < 256) events.push_back(g.event());  // each event takes ≥ 1 byte
  std::vector<std::string_view> lines;
  for (const auto& e : events) lines.emplace_back(e);
  agenthost::fuzz::map_and_check(options, end, lines);
  return 0;
}
