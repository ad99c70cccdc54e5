#include <agenthost/providers/opencode.hpp>

#include "command_run.hpp"

namespace agenthost::providers {

namespace {

// A value placed after a flag must not look like a flag itself (yargs would read it as the next option).
bool flag_like(std::string_view s) { return !s.empty() && s.front() == '-'; }

using detail::has_nul;

}  // namespace

boost::system::result<opencode_command, std::string> build_opencode_command(const opencode_options& o,
                                                                            std::string_view prompt) {
  if (o.run.stdin_data)
    return std::string("opencode_options::run.stdin_data must be empty: the provider uses it for the prompt");
  if (prompt.empty()) return std::string("the prompt is empty");
  opencode_command cmd;
  std::vector<std::string>& a = cmd.args;
  a.insert(a.end(), {"run", "--format", "json"});
  if (o.show_thinking) a.emplace_back("--thinking");
  if (!o.model.empty()) {
    if (flag_like(o.model) || o.model.find('/') == std::string::npos || has_nul(o.model))
      return "invalid model '" + o.model + "' (expected provider/model)";
    a.insert(a.end(), {"-m", o.model});
  }
  if (o.session_id) {
    if (o.session_id->empty() || flag_like(*o.session_id) || has_nul(*o.session_id))
      return "invalid session id '" + *o.session_id + "'";
    a.insert(a.end(), {"--session", *o.session_id});
  }
  if (o.fork) {
    if (!o.session_id) return std::string("fork needs a session_id to fork");
    a.emplace_back("--fork");
  }
  if (!o.agent.empty()) {
    if (flag_like(o.agent) || has_nul(o.agent)) return "invalid agent '" + o.agent + "'";
    a.insert(a.end(), {"--agent", o.agent});
  }
  if (!o.variant.empty()) {
    if (flag_like(o.variant) || has_nul(o.variant)) return "invalid variant '" + o.variant + "'";
    a.insert(a.end(), {"--variant", o.variant});
  }
  if (o.auto_approve) a.emplace_back("--auto");
  for (const auto& x : o.extra_args)
    if (has_nul(x)) return std::string("an extra argument contains a NUL byte");
  // Extra arguments last. The prompt is not an argument (below), so no extra flag can take it as its value.
  a.insert(a.end(), o.extra_args.begin(), o.extra_args.end());
  // The prompt always goes through stdin (then EOF), never as an argument: opencode re-joins its message arguments
  // into one string and wraps each one that contains a space in double quotes (run.ts), so an argument would not
  // reach the model as given; a non-terminal stdin is read to EOF and used as the message unchanged. This also keeps
  // a prompt starting with '-' from being an option and lifts the argument-length limit.
  cmd.stdin_text.emplace(prompt);
  return cmd;
}

boost::system::result<std::vector<std::string>, std::string> build_opencode_arguments(const opencode_options& o,
                                                                                      std::string_view prompt) {
  return detail::arguments_of(build_opencode_command(o, prompt));
}

agent_run_request make_opencode_run(const opencode_options& o, std::string_view prompt) {
  return detail::run_request_for(o, build_opencode_command(o, prompt));
}

std::unique_ptr<mapper::event_mapper> make_opencode_mapper(const opencode_options& o) {
  return std::make_unique<mapper::opencode_mapper>(
      mapper::opencode_mapper_options{.thinking = o.thinking_output,
                                      .requested_session_id = o.session_id,
                                      .merge_adjacent_text = true,
                                      .thought_release_batch = 8});
}

transport::message run_opencode(const opencode_options& options, std::string_view prompt,
                                const message_handler& on_message) {
  auto run = make_opencode_run(options, prompt);
  return run_agent(std::move(run.spawn), make_opencode_mapper(options), std::move(run.run), on_message);
}

}  // namespace agenthost::providers
