#include <agenthost/providers/claude.hpp>

#include "command_run.hpp"

namespace agenthost::providers {

namespace {

// `list` = the tools comma-joined for `--flag=list`; returns why an entry is invalid, if one is.
std::optional<std::string> tool_list(const std::vector<std::string>& tools, std::string_view option,
                                     std::string& list) {
  list.clear();
  for (const auto& t : tools) {
    if (t.empty() || t.front() == '-' || t.find(',') != std::string::npos || detail::has_nul(t))
      return "invalid " + std::string(option) + " entry '" + t + "' (empty, starting with '-' or containing ',')";
    if (!list.empty()) list += ',';
    list += t;
  }
  return std::nullopt;
}

}  // namespace

std::string_view to_string(claude_permission_mode mode) noexcept {
  switch (mode) {
    case claude_permission_mode::unset: return "";
    case claude_permission_mode::accept_edits: return "acceptEdits";
    case claude_permission_mode::auto_mode: return "auto";
    case claude_permission_mode::bypass_permissions: return "bypassPermissions";
    case claude_permission_mode::manual: return "manual";
    case claude_permission_mode::dont_ask: return "dontAsk";
    case claude_permission_mode::plan: return "plan";
  }
  return "";
}

boost::system::result<claude_command, std::string> build_claude_command(const claude_options& o,
                                                                        std::string_view prompt) {
  if (o.run.stdin_data)
    return std::string("claude_options::run.stdin_data must be empty: the provider uses it for long prompts");
  if (prompt.empty()) return std::string("the prompt is empty (claude -p would wait for one on stdin)");
  // execve() ends every argument at its first NUL: an option holding one would be cut silently.
  using detail::has_nul;
  for (const auto& e : o.extra_args)
    if (has_nul(e)) return std::string("an extra argument contains a NUL byte");
  if (has_nul(o.model) || (o.session_id && has_nul(*o.session_id)) || has_nul(o.append_system_prompt))
    return std::string("model, session_id or append_system_prompt contains a NUL byte");
  claude_command cmd;
  std::vector<std::string>& a = cmd.args;
  // Extra arguments first: whatever they are, the prompt still comes after `--`.
  a.insert(a.end(), o.extra_args.begin(), o.extra_args.end());
  a.insert(a.end(), {"-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages"});
  if (!o.model.empty()) {
    if (o.model.front() == '-') return "invalid model '" + o.model + "'";
    a.insert(a.end(), {"--model", o.model});
  }
  if (o.session_id) {
    if (o.session_id->empty() || o.session_id->front() == '-')
      return "invalid session id '" + *o.session_id + "'";
    a.insert(a.end(), {"--resume", *o.session_id});
  }
  // `=` form: Claude's list options take every following argument that does not start with '-'.
  if (!o.allowed_tools.empty()) {
    std::string list;
    if (auto error = tool_list(o.allowed_tools, "allowed_tools", list)) return *error;
    a.push_back("--allowedTools=" + list);
  }
  if (!o.disallowed_tools.empty()) {
    std::string list;
    if (auto error = tool_list(o.disallowed_tools, "disallowed_tools", list)) return *error;
    a.push_back("--disallowedTools=" + list);
  }
  if (o.tools) {
    std::string list;
    if (auto error = tool_list(*o.tools, "tools", list)) return *error;
    a.push_back("--tools=" + list);  // "--tools=" = no built-in tool
  }
  if (o.permission_mode != claude_permission_mode::unset) {
    const std::string_view mode = to_string(o.permission_mode);
    if (mode.empty()) return std::string("invalid permission mode");
    a.insert(a.end(), {"--permission-mode", std::string(mode)});
  }
  if (!o.append_system_prompt.empty()) a.push_back("--append-system-prompt=" + o.append_system_prompt);
  if (o.max_turns) {
    if (*o.max_turns < 1) return "invalid max_turns " + std::to_string(*o.max_turns) + " (must be at least 1)";
    a.insert(a.end(), {"--max-turns", std::to_string(*o.max_turns)});
  }
  if (prompt.size() > claude_prompt_argv_max || has_nul(prompt)) {
    // `claude -p` without a prompt argument reads the prompt from stdin (to EOF), which carries any byte.
    cmd.stdin_text.emplace(prompt);
    return cmd;
  }
  a.emplace_back("--");
  a.emplace_back(prompt);
  return cmd;
}

boost::system::result<std::vector<std::string>, std::string> build_claude_arguments(const claude_options& o,
                                                                                    std::string_view prompt) {
  return detail::arguments_of(build_claude_command(o, prompt));
}

agent_run_request make_claude_run(const claude_options& o, std::string_view prompt) {
  return detail::run_request_for(o, build_claude_command(o, prompt));
}

std::unique_ptr<mapper::event_mapper> make_claude_mapper(const claude_options& o) {
  return std::make_unique<mapper::claude_mapper>(
      mapper::claude_mapper_options{.thinking = o.thinking_output,
                                    .requested_session_id = o.session_id,
                                    .merge_adjacent_text = true});
}

transport::message run_claude(const claude_options& options, std::string_view prompt,
                              const message_handler& on_message) {
  auto run = make_claude_run(options, prompt);
  return run_agent(std::move(run.spawn), make_claude_mapper(options), std::move(run.run), on_message);
}

}  // namespace agenthost::providers
