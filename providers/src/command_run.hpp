// Internal: the part of every provider that turns a built command into a run request (the options all providers
// share: executable, working directory, environment, containment, reaper path, logger, run options).
#pragma once

#include <agenthost/providers/run.hpp>

#include <string_view>
#include <utility>

namespace agenthost::providers::detail {

/// Whether `s` holds a NUL byte: execve() ends an argument at its first one, so such a value cannot be passed as an
/// argument (a prompt then goes through stdin; an option is refused).
inline bool has_nul(std::string_view s) noexcept { return s.find('\0') != std::string_view::npos; }

/// The spawn request and run options for `command`: stdin is a pipe carrying command->stdin_text (then EOF) when the
/// prompt goes through stdin, else /dev/null — every agent reads a non-terminal stdin (some to EOF before starting),
/// so an inherited one could hang it. An invalid command (its error) becomes the spawn request's error.
template <class Options>
agent_run_request run_request_for(const Options& o, boost::system::result<agent_command, std::string> command) {
  agent_run_request r{.spawn = spawn_request(boost::system::in_place_error, std::string()), .run = o.run};
  if (!command) {
    r.spawn = spawn_request(boost::system::in_place_error, command.error());
    return r;
  }
  const bool via_stdin = command->stdin_text.has_value();
  r.run.stdin_data = std::move(command->stdin_text);
  r.spawn = process::spawn_options{.executable = o.executable,
                                   .args = std::move(command->args),
                                   .working_directory = o.working_directory,
                                   .env = o.env,
                                   .stdin_mode = via_stdin ? process::stdin_kind::pipe : process::stdin_kind::null,
                                   .containment = o.containment,
                                   .reaper_path = o.reaper_path,
                                   .log = o.log};
  return r;
}

/// command->args, or its error.
inline boost::system::result<std::vector<std::string>, std::string> arguments_of(
    boost::system::result<agent_command, std::string> command) {
  if (!command) return command.error();
  return std::move(command->args);
}

}  // namespace agenthost::providers::detail
