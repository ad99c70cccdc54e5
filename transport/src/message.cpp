// agenthost/transport/message.cpp — JSON spelling of the message contract.
#include <agenthost/transport/message.hpp>

#include <array>
#include <utility>

namespace agenthost::transport {
namespace {

constexpr std::array<std::pair<message_type, std::string_view>, 12> kNames{{
    {message_type::session_started, "session.started"},
    {message_type::session_resumed, "session.resumed"},
    {message_type::assistant, "assistant"},
    {message_type::assistant_thought, "assistant.thought"},
    {message_type::tool_call, "tool.call"},
    {message_type::tool_update, "tool.update"},
    {message_type::tool_completed, "tool.completed"},
    {message_type::tool_failed, "tool.failed"},
    {message_type::status, "status"},
    {message_type::terminal_completed, "terminal.completed"},
    {message_type::terminal_failed, "terminal.failed"},
    {message_type::terminal_cancelled, "terminal.cancelled"},
}};

}  // namespace

std::string_view to_string(message_type type) noexcept {
  for (const auto& [t, name] : kNames) {
    if (t == type) return name;
  }
  return "status";  // unreachable for valid enumerators
}

std::optional<message_type> message_type_from_string(std::string_view name) noexcept {
  for (const auto& [t, n] : kNames) {
    if (n == name) return t;
  }
  return std::nullopt;
}

nlohmann::json message::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  j["type"] = std::string(to_string(type));
  j["content"] = content.is_null() ? nlohmann::json::object() : content;
  return j;
}

std::string message::to_json_line() const {
  // Written by hand so that "type" comes first (nlohmann's default object sorts its keys). Strings that are not
  // valid UTF-8 are replaced by U+FFFD instead of throwing.
  const std::string_view name = to_string(type);
  std::string body =
      content.is_null() ? std::string("{}") : content.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string line;
  line.reserve(name.size() + body.size() + 24);
  line += R"({"type":")";
  line += name;
  line += R"(","content":)";
  line += body;
  line += '}';
  return line;
}

nlohmann::json parse_json_within_depth(std::string_view text, int max_depth) {
  bool too_deep = false;
  const nlohmann::json::parser_callback_t depth_guard = [&too_deep, max_depth](int depth, nlohmann::json::parse_event_t,
                                                                               nlohmann::json&) {
    if (depth > max_depth) too_deep = true;
    return !too_deep;  // discard what is below the limit: nothing of it is kept
  };
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), depth_guard, /*allow_exceptions=*/false);
  return too_deep ? nlohmann::json(nlohmann::json::value_t::discarded) : j;
}

std::optional<message> message::from_json_line(std::string_view line) {
  nlohmann::json j = parse_json_within_depth(line);
  if (!j.is_object()) return std::nullopt;
  const auto type_it = j.find("type");
  const auto content_it = j.find("content");
  if (type_it == j.end() || !type_it->is_string() || content_it == j.end() || !content_it->is_object()) {
    return std::nullopt;
  }
  const auto type = message_type_from_string(type_it->get_ref<const std::string&>());
  if (!type) return std::nullopt;
  return message{*type, std::move(*content_it)};
}

}  // namespace agenthost::transport
