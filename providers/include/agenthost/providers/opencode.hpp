// agenthost/providers/opencode.hpp — OpenCode (`opencode-ai`, `opencode run --format json`; checked against 1.18.33).
//
//   agenthost::providers::opencode_options opts{.model = "anthropic/claude-sonnet-4-5"};
//   auto terminal = agenthost::providers::run_opencode(opts, "fix the failing test", [](const auto& m) { ... });
//
// OpenCode runs as `opencode run --format json [--thinking] [-m PROVIDER/MODEL] [--session ID [--fork]] [--agent NAME]
// [--variant V] [--auto] [extra args]` with the prompt on its stdin, then EOF. Never as an argument: opencode re-joins
// its message arguments into one string and wraps each that contains a space in double quotes, so the model would not
// see the prompt as given (checked against 1.18.33: `"Do this."` arrives with the quotes); a non-terminal stdin is read
// to EOF and used unchanged. So a prompt starting with '-' is never an option and there is no argument-length limit.
//
// The provider writes no configuration: opencode's config (providers, permissions, `agent.title.disable`…) comes
// from the caller through the environment (XDG_CONFIG_HOME/opencode/opencode.json, OPENCODE_CONFIG…).
//
// The stop policy is SIGINT to opencode itself (it exits 130 within ~0.25 s), then the tree kill: opencode starts its
// bash tool's commands in their own process group and leaves them running on SIGINT/SIGTERM, so only the tree kill
// (containment) ends them.
#pragma once

#include <agenthost/mapper/opencode_mapper.hpp>
#include <agenthost/providers/run.hpp>

#include <csignal>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace agenthost::providers {

struct opencode_options {
  /// The opencode executable: a path or a name looked up in PATH. Default: "opencode".
  std::filesystem::path executable = "opencode";
  /// `-m PROVIDER/MODEL` (must contain '/'). Default: empty = opencode's configured model.
  std::string model{};
  /// Continue this session with `--session ID`; the session message is then session.resumed. Must not be empty or
  /// start with '-'. Default: none (a new session).
  std::optional<std::string> session_id{};
  /// Working directory of the agent (opencode's project directory). Default: empty = the host's.
  std::filesystem::path working_directory{};
  /// The agent's environment (opencode's config comes through it: XDG_CONFIG_HOME, OPENCODE_CONFIG…). Default:
  /// inherit the host's.
  process::environment_options env{};
  /// Arguments passed to `opencode run` verbatim, after the provider's own flags (the prompt goes through stdin, so no
  /// extra flag can take it as its value). Default: none.
  std::vector<std::string> extra_args{};
  /// When thinking is released to the stream. Default: buffered (when the final step ends).
  mapper::thinking_mode thinking_output = mapper::thinking_mode::buffered;
  /// Watchdogs and stop timing. Default: none, linger 3 s, stop = SIGINT to the leader without stdin bytes (opencode
  /// exits 130 within ~0.25 s but leaves its tool commands running in their own process group: the tree kill that
  /// follows after the grace ends them), kill wait 5 s. `stdin_data` must stay empty: the provider uses it for the
  /// prompt.
  run_options run{.stop = process::stop_policy{.interrupt_bytes = {},
                                               .interrupt_signal = SIGINT,
                                               .interrupt_target = process::signal_target::leader}};
  /// Containment of the process tree. Default: automatic (the reaper helper when found).
  process::containment_kind containment = process::containment_kind::automatic;
  /// Path of the agenthost-reaper helper. Default: found automatically.
  std::filesystem::path reaper_path{};
  /// Logging. Default: none.
  agenthost::logger log{};

  // ---- opencode-specific -------------------------------------------------------------------------------------------
  /// `--thinking`: opencode prints its reasoning parts (without it they are not printed at all). Default: true.
  bool show_thinking = true;
  /// `--agent NAME` (opencode's agent: build, plan, or one from the config). Default: empty = opencode's default.
  std::string agent{};
  /// `--variant V` (provider-specific reasoning effort: high, max, minimal…). Default: empty = none.
  std::string variant{};
  /// `--auto`: approve the permissions the config would ask for (in `run` an ask is otherwise rejected). Dangerous.
  /// Default: false.
  bool auto_approve = false;
  /// `--fork`: continue a copy of session_id (requires session_id). Default: false.
  bool fork = false;
};

/// An opencode command: its arguments and what goes to its stdin.
using opencode_command = agent_command;  // stdin_text is always set: the prompt goes through stdin

/// The command for one prompt, or a message saying which option is invalid (an empty prompt is one too).
boost::system::result<opencode_command, std::string> build_opencode_command(const opencode_options& options,
                                                                            std::string_view prompt);

/// build_opencode_command(options, prompt).args.
boost::system::result<std::vector<std::string>, std::string> build_opencode_arguments(const opencode_options& options,
                                                                                      std::string_view prompt);

/// What async_run_agent needs for one opencode run: the spawn request (an invalid option is its error, reported as
/// terminal.failed start_failed) and the run options (options.run, with the prompt as stdin_data).
agent_run_request make_opencode_run(const opencode_options& options, std::string_view prompt);

/// An opencode_mapper with options.thinking_output, options.session_id as the requested session and merged text.
std::unique_ptr<mapper::event_mapper> make_opencode_mapper(const opencode_options& options);

/// Run opencode once. Same handler, cancellation and lifetime rules as async_run_agent(): the handler gets
/// (error_code, terminal message); on_message sees every message in order on `ex`; per-operation cancellation stops
/// the tree (options.run.stop) and ends with terminal.cancelled and operation_aborted. Options and prompt are copied:
/// they need not outlive the call. An invalid option is a terminal.failed (start_failed) message, never an exception.
/// Single attempt: nothing is retried (opencode itself retries 429/5xx up to 5 times inside one run).
template <class CompletionToken = boost::asio::deferred_t>
auto async_run_opencode(boost::asio::any_io_executor ex, const opencode_options& options, std::string_view prompt,
                        message_handler on_message, CompletionToken&& token = {}) {
  auto run = make_opencode_run(options, prompt);
  return async_run_agent(std::move(ex), std::move(run.spawn), make_opencode_mapper(options), std::move(run.run),
                         std::move(on_message), std::forward<CompletionToken>(token));
}

/// Blocking helper: runs opencode on a private io_context; returns the terminal message. on_message is called on the
/// calling thread.
transport::message run_opencode(const opencode_options& options, std::string_view prompt,
                                const message_handler& on_message);

}  // namespace agenthost::providers
