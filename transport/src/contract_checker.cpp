// agenthost/transport/contract_checker.cpp
#include <agenthost/transport/contract_checker.hpp>

#include <span>
#include <string_view>

namespace agenthost::transport {
namespace {

enum class kind : unsigned char { string, object, array, integer, boolean, any };

std::string_view kind_name(kind k) {
  switch (k) {
    case kind::string: return "a string";
    case kind::object: return "an object";
    case kind::array: return "an array";
    case kind::integer: return "an integer";
    case kind::boolean: return "a boolean";
    case kind::any: return "present";
  }
  return "?";
}

bool has_kind(const nlohmann::json& v, kind k) {
  switch (k) {
    case kind::string: return v.is_string();
    case kind::object: return v.is_object();
    case kind::array: return v.is_array();
    case kind::integer: return v.is_number_integer();
    case kind::boolean: return v.is_boolean();
    case kind::any: return true;
  }
  return false;
}

struct field_rule {
  std::string_view name;
  kind type;
  bool required;
};

constexpr field_rule kSession[] = {{"session_id", kind::string, true}, {"agent", kind::string, true},
                                   {"model", kind::string, false},     {"cwd", kind::string, false},
                                   {"requested_session_id", kind::string, false}, {"resume", kind::string, false}};
constexpr field_rule kText[] = {{"text", kind::string, true}};
constexpr field_rule kToolCall[] = {
    {"tool_call_id", kind::string, true}, {"name", kind::string, true}, {"input", kind::object, true}};
constexpr field_rule kToolUpdate[] = {
    {"tool_call_id", kind::string, true}, {"name", kind::string, true}, {"output", kind::string, false}};
constexpr field_rule kToolCompleted[] = {
    {"tool_call_id", kind::string, true}, {"name", kind::string, true}, {"output", kind::string, true}};
constexpr field_rule kToolFailed[] = {
    {"tool_call_id", kind::string, true}, {"name", kind::string, true}, {"error", kind::string, true}};
constexpr field_rule kStatus[] = {{"kind", kind::string, true}, {"text", kind::string, true}};
constexpr field_rule kCompleted[] = {{"session_id", kind::string, false}, {"stop_reason", kind::string, false},
                                     {"usage", kind::object, false},      {"text", kind::string, false},
                                     {"invalid_output_lines", kind::array, false}};
constexpr field_rule kFailed[] = {{"text", kind::string, true},          {"reason", kind::string, true},
                                  {"stderr", kind::string, true},        {"invalid_output_lines", kind::array, true},
                                  {"exit_code", kind::integer, false},   {"signal", kind::integer, false},
                                  {"http_status", kind::integer, false}, {"retryable", kind::boolean, false},
                                  {"session_id", kind::string, false},   {"usage", kind::object, false}};
constexpr field_rule kCancelled[] = {{"text", kind::string, false}};

std::span<const field_rule> rules_for(message_type t) {
  switch (t) {
    case message_type::session_started:
    case message_type::session_resumed: return kSession;
    case message_type::assistant:
    case message_type::assistant_thought: return kText;
    case message_type::tool_call: return kToolCall;
    case message_type::tool_update: return kToolUpdate;
    case message_type::tool_completed: return kToolCompleted;
    case message_type::tool_failed: return kToolFailed;
    case message_type::status: return kStatus;
    case message_type::terminal_completed: return kCompleted;
    case message_type::terminal_failed: return kFailed;
    case message_type::terminal_cancelled: return kCancelled;
  }
  return {};
}

bool is_content_message(message_type t) {
  switch (t) {
    case message_type::assistant:
    case message_type::assistant_thought:
    case message_type::tool_call:
    case message_type::tool_update:
    case message_type::tool_completed:
    case message_type::tool_failed:
      return true;
    default:
      return false;
  }
}

}  // namespace

void contract_checker::violation(const message& msg, std::string what) {
  std::string v = "#" + std::to_string(index_) + " " + std::string(to_string(msg.type)) + ": ";
  v += what;
  violations_.push_back(std::move(v));
}

void contract_checker::observe(const message& msg) {
  if (finished_) {
    violation(msg, "message after finish()");
  }
  if (terminal_seen_) {
    violation(msg, "message after the terminal message");
  }
  if (!msg.content.is_object()) {
    violation(msg, "content is not an object");
    ++index_;
    return;
  }
  for (const auto& rule : rules_for(msg.type)) {
    const auto it = msg.content.find(std::string(rule.name));
    if (it == msg.content.end()) {
      if (rule.required) violation(msg, "missing field `" + std::string(rule.name) + "`");
      continue;
    }
    if (!has_kind(*it, rule.type)) {
      violation(msg, "field `" + std::string(rule.name) + "` is not " + std::string(kind_name(rule.type)));
    }
  }
  if (msg.type == message_type::terminal_failed || msg.type == message_type::terminal_completed) {
    const auto it = msg.content.find("invalid_output_lines");
    if (it != msg.content.end() && it->is_array()) {
      for (const auto& line : *it) {
        if (!line.is_string()) {
          violation(msg, "invalid_output_lines holds a non-string");
          break;
        }
      }
    }
  }

  // Session ordering.
  if (msg.type == message_type::session_started || msg.type == message_type::session_resumed) {
    if (session_seen_) violation(msg, "second session.* message");
    if (content_seen_) violation(msg, "session.* after an assistant/tool message");
    session_seen_ = true;
  } else if (is_content_message(msg.type)) {
    if (!session_seen_ && !content_seen_) violation(msg, "assistant/tool message before any session.* message");
    content_seen_ = true;
  }

  // Tool call pairing.
  const auto id_it = msg.content.find("tool_call_id");
  const std::string id = (id_it != msg.content.end() && id_it->is_string()) ? id_it->get<std::string>() : std::string();
  switch (msg.type) {
    case message_type::tool_call: {
      auto [it, inserted] = calls_.try_emplace(id, call_state::open);
      if (!inserted) {
        violation(msg, "duplicate tool.call for `" + id + "`");
      } else {
        ++open_calls_;
      }
      break;
    }
    case message_type::tool_update: {
      const auto it = calls_.find(id);
      if (it == calls_.end()) violation(msg, "tool.update for unknown call `" + id + "`");
      else if (it->second == call_state::closed) violation(msg, "tool.update after the call `" + id + "` closed");
      break;
    }
    case message_type::tool_completed:
    case message_type::tool_failed: {
      const auto it = calls_.find(id);
      if (it == calls_.end()) {
        violation(msg, "result for unknown call `" + id + "`");
      } else if (it->second == call_state::closed) {
        violation(msg, "call `" + id + "` closed twice");
      } else {
        it->second = call_state::closed;
        --open_calls_;
      }
      break;
    }
    default:
      break;
  }

  if (msg.is_terminal()) {
    if (open_calls_ != 0) {
      violation(msg, std::to_string(open_calls_) + " tool call(s) still open at the terminal");
    }
    terminal_seen_ = true;
  }
  ++index_;
}

const std::vector<std::string>& contract_checker::finish() {
  if (!finished_) {
    finished_ = true;
    if (!terminal_seen_) violations_.push_back("run ended without a terminal.* message");
  }
  return violations_;
}

std::vector<std::string> check_run(std::span<const message> messages) {
  contract_checker checker;
  for (const auto& m : messages) checker.observe(m);
  return checker.finish();
}

}  // namespace agenthost::transport
