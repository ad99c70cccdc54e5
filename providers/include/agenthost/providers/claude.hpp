// agenthost/providers/claude.hpp — Claude Code (`@anthropic-ai/claude-code`, the `claude` CLI; checked against 2.1.332).
//
//   agenthost::providers::claude_options opts{.model = "claude-sonnet-4-5", .allowed_tools = {{"Bash", "Read"}}};
//   auto terminal = agenthost::providers::run_claude(opts, "fix the failing test", [](const auto& m) { ... });
//
// Claude runs as `claude [extra args] -p --output-format stream-json --verbose --include-partial-messages [flags]
// -- PROMPT`, never through a shell. A prompt above claude_prompt_argv_max bytes goes to Claude's stdin instead (with
// no prompt argument, `claude -p` reads its prompt from stdin); otherwise stdin is /dev/null. The stop policy is the
// default "\x03" + SIGINT to the process group: SIGINT is Claude's graceful interrupt (it stops its running tool
// itself, reports the interruption and exits 0 within ~0.2 s), SIGTERM is not (it SIGKILLs the tool and exits 143);
// the tree kill of the stop's last phase covers the rest either way.
//
// Thread safety: the functions below only read their arguments (safe from any thread); a run's handlers are called on
// the executor given to async_run_claude.
#pragma once

#include <agenthost/mapper/claude_mapper.hpp>
#include <agenthost/providers/run.hpp>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agenthost::providers {

/// The largest prompt passed as an argument (64 KiB: half of Linux's per-argument limit); longer prompts go through
/// Claude's stdin.
inline constexpr std::size_t claude_prompt_argv_max = std::size_t{64} << 10;

/// `--permission-mode` values Claude Code 2.1.332 accepts.
enum class claude_permission_mode {
  /// Not passed: Claude's default (or its settings').
  unset,
  accept_edits,        ///< "acceptEdits"
  auto_mode,           ///< "auto"
  bypass_permissions,  ///< "bypassPermissions" — Claude refuses it when running as root ("cannot be used with root")
  manual,              ///< "manual"
  dont_ask,            ///< "dontAsk"
  plan,                ///< "plan"
};

/// The `--permission-mode` value ("" for unset).
std::string_view to_string(claude_permission_mode mode) noexcept;

struct claude_options {
  /// The claude executable: a path or a name looked up in PATH. Default: "claude".
  std::filesystem::path executable = "claude";
  /// `--model` (an alias such as "sonnet" or a full model id). Default: empty = Claude's default.
  std::string model{};
  /// Resume this session: `--resume ID` (Claude continues it under the same id; the mapper then reports
  /// session.resumed). Default: none = a new session.
  std::optional<std::string> session_id{};
  /// Working directory of the agent (Claude's project). Default: empty = the host's.
  std::filesystem::path working_directory{};
  /// The agent's environment. Default: inherit the host's.
  process::environment_options env{};
  /// Arguments passed to Claude verbatim, placed before our own flags; the prompt follows `--`, so they can never
  /// swallow it. Default: none.
  std::vector<std::string> extra_args{};
  /// When thinking is released to the stream. Default: buffered (when the final API message ends).
  mapper::thinking_mode thinking_output = mapper::thinking_mode::buffered;
  /// Watchdogs and stop timing. Default: no watchdogs, linger 3 s, stop = "\x03" + SIGINT to the group (Claude's
  /// graceful interrupt, which also stops its running tool), 2 s, tree kill, 5 s. `stdin_data` must stay empty: the
  /// provider uses it for long prompts.
  run_options run{.stop = process::stop_policy::ctrl_c()};
  /// Containment of the process tree. Default: automatic (the reaper helper when found).
  process::containment_kind containment = process::containment_kind::automatic;
  /// Path of the agenthost-reaper helper. Default: found automatically.
  std::filesystem::path reaper_path{};
  /// Logging. Default: none.
  agenthost::logger log{};

  /// Tools allowed without asking (`--allowedTools=a,b`; rules such as "Bash(git *)" are allowed). In `-p` mode a tool
  /// that needs permission and is not allowed is refused, and the model is told so. Validated: no empty entry, none
  /// starting with '-'. Default: none = Claude's default permissions.
  std::vector<std::string> allowed_tools{};
  /// Tools denied (`--disallowedTools=a,b`). Same rules. Default: none.
  std::vector<std::string> disallowed_tools{};
  /// The built-in tools available at all (`--tools=a,b`; an empty vector = `--tools=` = none). Default: nullopt =
  /// Claude's default set.
  std::optional<std::vector<std::string>> tools{};
  /// `--permission-mode`. Default: unset (Claude's default).
  claude_permission_mode permission_mode = claude_permission_mode::unset;
  /// `--append-system-prompt`. Default: empty = not passed.
  std::string append_system_prompt{};
  /// `--max-turns N` (accepted by Claude 2.1.332 although its --help does not list it); must be ≥ 1. Default: none.
  std::optional<int> max_turns{};
};

/// A claude command: its arguments and what goes to its stdin.
using claude_command = agent_command;

/// The command for one prompt, or a message saying which option is invalid. Rules: extra arguments first, then ours;
/// list-valued flags use the `--flag=value` form (Claude's list options take every following argument that does not
/// start with '-'); the prompt follows `--`, so it is never read as a flag whatever it starts with; a prompt above
/// claude_prompt_argv_max bytes, or holding a NUL byte (which an argument cannot carry), goes to stdin instead (no
/// `--`, no prompt argument). An empty prompt is invalid (Claude would wait for one on stdin), and so is a NUL byte in
/// any other option.
boost::system::result<claude_command, std::string> build_claude_command(const claude_options& options,
                                                                        std::string_view prompt);

/// build_claude_command(options, prompt).args.
boost::system::result<std::vector<std::string>, std::string> build_claude_arguments(const claude_options& options,
                                                                                    std::string_view prompt);

/// What async_run_agent needs for one Claude run: the spawn request (holding the error when an option is invalid) and
/// the run options (options.run, with the prompt as stdin_data when it goes through stdin).
agent_run_request make_claude_run(const claude_options& options, std::string_view prompt);

/// The mapper for a run with these options (thinking mode, the session to resume).
std::unique_ptr<mapper::event_mapper> make_claude_mapper(const claude_options& options);

/// Run Claude once. Same handler, cancellation and lifetime rules as async_run_agent(): handler
/// void(error_code, transport::message terminal), ec = operation_aborted after a cancellation through the token's
/// cancellation slot (terminal.cancelled), success otherwise — failures, including an invalid option or a start
/// failure, are a terminal.failed message, never an exception. `options` and `prompt` are copied before this returns.
/// Single attempt: never retries.
template <class CompletionToken = boost::asio::deferred_t>
auto async_run_claude(boost::asio::any_io_executor ex, const claude_options& options, std::string_view prompt,
                      message_handler on_message, CompletionToken&& token = {}) {
  auto run = make_claude_run(options, prompt);
  return async_run_agent(std::move(ex), std::move(run.spawn), make_claude_mapper(options), std::move(run.run),
                         std::move(on_message), std::forward<CompletionToken>(token));
}

/// Blocking helper: runs Claude on a private io_context; returns the terminal message.
transport::message run_claude(const claude_options& options, std::string_view prompt,
                              const message_handler& on_message);

}  // namespace agenthost::providers
