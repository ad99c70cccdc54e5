#include <agenthost/providers/gemini.hpp>

#include "command_run.hpp"

#include <chrono>

namespace agenthost::providers {

std::string_view to_string(gemini_approval_mode mode) noexcept {
  switch (mode) {
    case gemini_approval_mode::default_mode: return "default";
    case gemini_approval_mode::auto_edit: return "auto_edit";
    case gemini_approval_mode::yolo: return "yolo";
    case gemini_approval_mode::plan: return "plan";
  }
  return "default";
}

process::stop_policy gemini_stop_policy() {
  return {.interrupt_bytes = {},
          .interrupt_signal = SIGINT,
          .interrupt_target = process::signal_target::tree,
          .graceful_wait = std::chrono::milliseconds{1000}};
}

boost::system::result<gemini_command, std::string> build_gemini_command(const gemini_options& o,
                                                                        std::string_view prompt) {
  if (o.run.stdin_data)
    return std::string("gemini_options::run.stdin_data must be empty: the provider uses it for the prompt");
  // gemini refuses to run without input ("No input provided via stdin"); say so before spawning it.
  if (prompt.empty()) return std::string("the prompt is empty");
  gemini_command cmd;
  std::vector<std::string>& a = cmd.args;
  // Extra arguments first: whatever they are, the prompt below is glued to its flag and cannot be taken by them.
  a.insert(a.end(), o.extra_args.begin(), o.extra_args.end());
  a.insert(a.end(), {"--output-format", "stream-json"});
  if (!o.model.empty()) {
    if (o.model.front() == '-') return "invalid model '" + o.model + "'";
    a.insert(a.end(), {"-m", o.model});
  }
  if (o.skip_trust) a.emplace_back("--skip-trust");
  if (o.approval_mode) a.emplace_back("--approval-mode=" + std::string(to_string(*o.approval_mode)));
  if (o.sandbox) a.emplace_back("--sandbox");
  for (const auto& d : o.include_directories) {
    const std::string s = d.string();
    if (s.empty() || s.front() == '-' || s.find(',') != std::string::npos)
      return "invalid include directory '" + s + "' (empty, starting with '-' or holding a comma)";
    a.insert(a.end(), {"--include-directories", s});
  }
  if (o.session_id) {
    if (o.session_id->empty() || o.session_id->front() == '-')
      return "invalid session id '" + *o.session_id + "'";
    a.insert(a.end(), {"--resume", *o.session_id});
  }
  // A NUL byte would silently end an argument (execve takes C strings): such a prompt goes through stdin.
  const bool nul = detail::has_nul(prompt);
  if (nul && o.prompt_delivery == gemini_prompt_delivery::argv)
    return std::string("the prompt contains a NUL byte, which a command-line argument cannot carry");
  const bool via_stdin =
      o.prompt_delivery == gemini_prompt_delivery::stdin ||
      (o.prompt_delivery == gemini_prompt_delivery::automatic && (prompt.size() > gemini_prompt_argv_max || nul));
  if (via_stdin) {
    if (prompt.size() > gemini_prompt_stdin_max)
      return "the prompt is " + std::to_string(prompt.size()) + " bytes: gemini reads at most " +
             std::to_string(gemini_prompt_stdin_max) + " bytes from stdin and would cut it";
    // No --prompt: gemini then takes stdin alone as the prompt (with --prompt it would prepend stdin + "\n\n").
    cmd.stdin_text.emplace(prompt);
  } else {
    // Glued to the flag: yargs takes everything after the first '=' as the value, even "-x" or "--help".
    a.emplace_back("--prompt=" + std::string(prompt));
  }
  return cmd;
}

boost::system::result<std::vector<std::string>, std::string> build_gemini_arguments(const gemini_options& o,
                                                                                    std::string_view prompt) {
  return detail::arguments_of(build_gemini_command(o, prompt));
}

agent_run_request make_gemini_run(const gemini_options& o, std::string_view prompt) {
  return detail::run_request_for(o, build_gemini_command(o, prompt));
}

std::unique_ptr<mapper::event_mapper> make_gemini_mapper(const gemini_options& o) {
  return std::make_unique<mapper::gemini_mapper>(
      mapper::gemini_mapper_options{.thinking = o.thinking_output,
                                   .requested_session_id = o.session_id,
                                   .merge_adjacent_text = true});
}

transport::message run_gemini(const gemini_options& options, std::string_view prompt,
                              const message_handler& on_message) {
  auto run = make_gemini_run(options, prompt);
  return run_agent(std::move(run.spawn), make_gemini_mapper(options), std::move(run.run), on_message);
}

}  // namespace agenthost::providers
