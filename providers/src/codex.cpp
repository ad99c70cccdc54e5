#include <agenthost/providers/codex.hpp>

#include "command_run.hpp"

namespace agenthost::providers {

namespace {

// A value placed after a flag must not look like a flag itself (clap would reject or misread it).
bool flag_like(std::string_view s) { return !s.empty() && s.front() == '-'; }

}  // namespace

std::string_view to_string(codex_sandbox s) noexcept {
  switch (s) {
    case codex_sandbox::read_only: return "read-only";
    case codex_sandbox::workspace_write: return "workspace-write";
    case codex_sandbox::danger_full_access: return "danger-full-access";
  }
  return "read-only";
}

boost::system::result<codex_command, std::string> build_codex_command(const codex_options& o, std::string_view prompt) {
  if (o.run.stdin_data)
    return std::string("codex_options::run.stdin_data must be empty: the provider uses it for long prompts");
  if (prompt.empty()) return std::string("the prompt is empty");
  codex_command cmd;
  std::vector<std::string>& a = cmd.args;
  a.emplace_back("exec");
  if (o.session_id) {
    if (o.session_id->empty() || flag_like(*o.session_id)) return "invalid session id '" + *o.session_id + "'";
    a.emplace_back("resume");
  }
  a.emplace_back("--json");
  if (o.skip_git_repo_check) a.emplace_back("--skip-git-repo-check");
  if (o.ephemeral) a.emplace_back("--ephemeral");
  if (!o.model.empty()) {
    if (flag_like(o.model)) return "invalid model '" + o.model + "'";
    a.insert(a.end(), {"-m", o.model});
  }
  // `exec resume` has no --sandbox flag; the config override works for both.
  if (o.sandbox) a.insert(a.end(), {"-c", "sandbox_mode=\"" + std::string(to_string(*o.sandbox)) + "\""});
  for (const auto& [key, value] : o.config) {
    if (key.empty() || flag_like(key) || key.find_first_of("= \t\r\n") != std::string::npos)
      return "invalid config key '" + key + "'";
    a.insert(a.end(), {"-c", key + "=" + value});
  }
  // Extra arguments last before `--`: a flag among them that wants a value meets `--` and fails loudly.
  a.insert(a.end(), o.extra_args.begin(), o.extra_args.end());
  a.emplace_back("--");
  if (o.session_id) a.emplace_back(*o.session_id);
  // "-" as the prompt argument means "read stdin": a prompt that is exactly "-", too long for one argument, or with a
  // NUL byte (an argument would end there) goes through stdin (codex reads it to EOF).
  if (prompt.size() > codex_prompt_argv_max || prompt == "-" || detail::has_nul(prompt)) {
    a.emplace_back("-");
    cmd.stdin_text.emplace(prompt);
  } else {
    a.emplace_back(prompt);
  }
  return cmd;
}

boost::system::result<std::vector<std::string>, std::string> build_codex_arguments(const codex_options& o,
                                                                                   std::string_view prompt) {
  return detail::arguments_of(build_codex_command(o, prompt));
}

agent_run_request make_codex_run(const codex_options& o, std::string_view prompt) {
  return detail::run_request_for(o, build_codex_command(o, prompt));
}

std::unique_ptr<mapper::event_mapper> make_codex_mapper(const codex_options& o) {
  return std::make_unique<mapper::codex_mapper>(
      mapper::codex_mapper_options{.thinking = o.thinking_output,
                                   .requested_session_id = o.session_id,
                                   .merge_adjacent_text = true,
                                   .thought_release_batch = 8});
}

transport::message run_codex(const codex_options& options, std::string_view prompt,
                             const message_handler& on_message) {
  auto run = make_codex_run(options, prompt);
  return run_agent(std::move(run.spawn), make_codex_mapper(options), std::move(run.run), on_message);
}

}  // namespace agenthost::providers
