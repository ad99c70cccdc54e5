#include "render.hpp"

#include <string>

namespace agenthost::cli {

namespace {
void write(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
}
std::string str(const nlohmann::json& c, const char* key) {
  auto it = c.find(key);
  if (it == c.end()) return {};
  return it->is_string() ? it->get<std::string>() : it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
}  // namespace

void renderer::operator()(const transport::message& m) {
  using transport::message_type;
  if (!human_) {
    write(m.to_json_line() + "\n");
    std::fflush(stdout);
    return;
  }
  const auto& c = m.content;
  auto line = [&](const std::string& s) {
    if (mid_line_) write("\n");
    mid_line_ = false;
    write(s + "\n");
  };
  switch (m.type) {
    case message_type::session_started:
    case message_type::session_resumed:
      line("\x1b[2m── " + std::string(to_string(m.type)) + " " + str(c, "agent") + " " + str(c, "session_id") + "\x1b[0m");
      break;
    case message_type::assistant:
      write(str(c, "text"));
      mid_line_ = true;
      break;
    case message_type::assistant_thought:
      line("\x1b[2;3m" + str(c, "text") + "\x1b[0m");
      break;
    case message_type::tool_call:
      line("\x1b[36m▶ " + str(c, "name") + " " + str(c, "input") + "\x1b[0m");
      break;
    case message_type::tool_update:
      break;  // partial output: the final result follows
    case message_type::tool_completed:
      line("\x1b[32m✓ " + str(c, "name") + "\x1b[0m " + str(c, "output"));
      break;
    case message_type::tool_failed:
      line("\x1b[31m✗ " + str(c, "name") + "\x1b[0m " + str(c, "error"));
      break;
    case message_type::status:
      line("\x1b[33m[" + str(c, "kind") + "] " + str(c, "text") + "\x1b[0m");
      break;
    case message_type::terminal_completed:
      line("\x1b[32m── completed\x1b[0m");
      break;
    case message_type::terminal_failed:
      line("\x1b[31m── failed (" + str(c, "reason") + "): " + str(c, "text") + "\x1b[0m");
      if (!str(c, "stderr").empty()) line("\x1b[2m" + str(c, "stderr") + "\x1b[0m");
      break;
    case message_type::terminal_cancelled:
      line("\x1b[33m── cancelled\x1b[0m");
      break;
  }
  std::fflush(stdout);
}

int exit_code_for(const transport::message& terminal) {
  switch (terminal.type) {
    case transport::message_type::terminal_completed: return 0;
    case transport::message_type::terminal_cancelled: return 130;
    default: {
      // Options the parser took but the provider refused (--session with --no-session, an unknown thinking level…)
      // are usage errors too: the terminal is printed, and the exit code says so.
      const auto& c = terminal.content;
      const auto error = c.is_object() ? c.find("error") : c.end();
      const bool invalid_options =
          error != c.end() && error->is_string() && error->get_ref<const std::string&>() == "invalid_options";
      return invalid_options ? 2 : 1;
    }
  }
}

}  // namespace agenthost::cli
