// Tests of the message contract's JSON spelling.
#include <agenthost/transport/message.hpp>

#include <gtest/gtest.h>

using agenthost::transport::message;
using agenthost::transport::message_type;

namespace {

constexpr message_type kAllTypes[] = {
    message_type::session_started,    message_type::session_resumed, message_type::assistant,
    message_type::assistant_thought,  message_type::tool_call,       message_type::tool_update,
    message_type::tool_completed,     message_type::tool_failed,     message_type::status,
    message_type::terminal_completed, message_type::terminal_failed, message_type::terminal_cancelled,
};

TEST(Message, TypeNamesRoundTrip) {
  for (const auto t : kAllTypes) {
    const auto name = agenthost::transport::to_string(t);
    const auto back = agenthost::transport::message_type_from_string(name);
    ASSERT_TRUE(back.has_value()) << name;
    EXPECT_EQ(*back, t);
  }
  EXPECT_EQ(agenthost::transport::to_string(message_type::assistant_thought), "assistant.thought");
  EXPECT_EQ(agenthost::transport::to_string(message_type::terminal_failed), "terminal.failed");
  EXPECT_FALSE(agenthost::transport::message_type_from_string("terminal").has_value());
  EXPECT_FALSE(agenthost::transport::message_type_from_string("").has_value());
}

TEST(Message, IsTerminal) {
  for (const auto t : kAllTypes) {
    const bool expected = t == message_type::terminal_completed || t == message_type::terminal_failed ||
                          t == message_type::terminal_cancelled;
    EXPECT_EQ(agenthost::transport::is_terminal(t), expected);
    EXPECT_EQ((message{t, {}}).is_terminal(), expected);
  }
}

TEST(Message, JsonLineHasTypeFirstAndNoNewline) {
  const message m{message_type::assistant, {{"text", "Hello\n"}}};
  EXPECT_EQ(m.to_json_line(), R"({"type":"assistant","content":{"text":"Hello\n"}})");
  const auto j = m.to_json();
  EXPECT_EQ(j["type"], "assistant");
  EXPECT_EQ(j["content"]["text"], "Hello\n");
}

TEST(Message, JsonLineRoundTrip) {
  const message m{message_type::terminal_failed,
                  {{"text", "400 fake bad request"},
                   {"reason", "agent_error"},
                   {"stderr", ""},
                   {"invalid_output_lines", nlohmann::json::array({"not json"})},
                   {"http_status", 400},
                   {"retryable", false}}};
  const auto back = message::from_json_line(m.to_json_line());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, m);
}

TEST(Message, InvalidUtf8IsReplacedNotThrown) {
  message m{message_type::assistant, {{"text", std::string("ok \xff\xfe bad \xc3")}}};
  std::string line;
  ASSERT_NO_THROW(line = m.to_json_line());
  EXPECT_NE(line.find("ok \xEF\xBF\xBD"), std::string::npos) << line;
  const auto back = message::from_json_line(line);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->type, message_type::assistant);
}

TEST(Message, NulAndControlCharactersAreEscaped) {
  const message m{message_type::assistant, {{"text", std::string("a\0b\x01", 4)}}};
  const auto line = m.to_json_line();
  EXPECT_EQ(line, R"({"type":"assistant","content":{"text":"a\u0000b\u0001"}})");
  EXPECT_EQ(line.find('\0'), std::string::npos);
  const auto back = message::from_json_line(line);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->content["text"].get<std::string>(), std::string("a\0b\x01", 4));
}

TEST(Message, FromJsonLineRejectsNonContractLines) {
  EXPECT_FALSE(message::from_json_line("").has_value());
  EXPECT_FALSE(message::from_json_line("not json").has_value());
  EXPECT_FALSE(message::from_json_line("[1,2]").has_value());
  EXPECT_FALSE(message::from_json_line(R"({"type":"assistant"})").has_value());
  EXPECT_FALSE(message::from_json_line(R"({"type":"assistant","content":"x"})").has_value());
  EXPECT_FALSE(message::from_json_line(R"({"type":"nope","content":{}})").has_value());
  EXPECT_FALSE(message::from_json_line(R"({"type":1,"content":{}})").has_value());
  EXPECT_TRUE(message::from_json_line(R"({"content":{},"type":"terminal.cancelled"})").has_value());
}

TEST(Message, DefaultContentIsAnEmptyObject) {
  const message m{};
  EXPECT_TRUE(m.content.is_object());
  EXPECT_EQ(m.to_json_line(), R"({"type":"status","content":{}})");
}

// message{type, {}} value-initializes content to null: it is written, and read back, as {}.
TEST(Message, NullContentIsWrittenAsAnEmptyObject) {
  const message m{message_type::terminal_cancelled, {}};
  ASSERT_TRUE(m.content.is_null());
  EXPECT_EQ(m.to_json_line(), R"({"type":"terminal.cancelled","content":{}})");
  EXPECT_TRUE(m.to_json()["content"].is_object());
  const auto back = message::from_json_line(m.to_json_line());
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(back->content.is_object());
}

// Parsing is iterative, writing the value back is not: a line nested deeper than max_json_depth is refused (and does
// not crash, 100,000 levels deep); one at the limit is accepted and round-trips.
TEST(Message, FromJsonLineRefusesJsonNestedTooDeep) {
  const auto nested = [](int levels) {
    return R"({"type":"status","content":{"a":)" + std::string(static_cast<std::size_t>(levels), '[') + "1" +
           std::string(static_cast<std::size_t>(levels), ']') + "}}";
  };
  EXPECT_FALSE(message::from_json_line(nested(100000)).has_value());
  EXPECT_FALSE(message::from_json_line(nested(agenthost::transport::max_json_depth)).has_value());
  const auto ok = message::from_json_line(nested(agenthost::transport::max_json_depth - 2));
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->to_json_line(), nested(agenthost::transport::max_json_depth - 2));
}

}  // namespace
