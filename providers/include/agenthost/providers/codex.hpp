// agenthost/providers/codex.hpp — the OpenAI Codex CLI (`@openai/codex`, `codex exec --json`).
//
//   agenthost::providers::codex_options opts{.model = "gpt-5-codex", .sandbox = codex_sandbox::workspace_write};
//   auto terminal = agenthost::providers::run_codex(opts, "fix the failing test", [](const auto& m) { ... });
//
// Codex runs as `codex exec --json --skip-git-repo-check [--ephemeral] [-m MODEL] [-c key=value]... [extra args] --
// PROMPT`, or to resume a session `codex exec resume --json … [extra args] -- SESSION_ID PROMPT`. The `--` keeps a
// prompt that starts with '-' from being read as a flag; extra arguments come right before it, so a flag among them
// that expects a value can only fail (clap: "a value is required"), never take the prompt. A prompt above
// codex_prompt_argv_max bytes, exactly "-", or with a NUL byte goes through codex's stdin (`-` as the prompt
// argument: codex reads stdin to EOF); otherwise stdin is /dev/null — with a prompt argument codex still reads a
// non-terminal stdin to EOF and appends it, so an open pipe would hang it. The stop policy is SIGINT to the process
// group (codex 0.171.0 exits 1 within ~30 ms and kills its own tool commands, which run in their own sessions), then
// the whole tree is killed as always.
#pragma once

#include <agenthost/mapper/codex_mapper.hpp>
#include <agenthost/providers/run.hpp>

#include <csignal>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace agenthost::providers {

/// Codex's sandbox for the commands the model runs (`-c sandbox_mode=…`, also accepted by `exec resume`, which has no
/// `--sandbox` flag).
enum class codex_sandbox {
  read_only,           ///< "read-only"
  workspace_write,     ///< "workspace-write"
  danger_full_access,  ///< "danger-full-access": no sandbox (for environments that are sandboxed already)
};

/// The largest prompt passed as an argument (64 KiB: half of Linux's per-argument limit, leaving room for the
/// environment and the other arguments); longer prompts go through codex's stdin.
inline constexpr std::size_t codex_prompt_argv_max = std::size_t{64} << 10;

struct codex_options {
  /// The codex executable: a path or a name looked up in PATH. Default: "codex".
  std::filesystem::path executable = "codex";
  /// `-m MODEL`. Default: empty = codex's configured model.
  std::string model{};
  /// Resume this session (thread id) with `codex exec resume … SESSION_ID`; the session message is then
  /// session.resumed. Must not be empty or start with '-'. Default: none (a new session).
  std::optional<std::string> session_id{};
  /// Working directory of the agent (codex's workspace root). Default: empty = the host's.
  std::filesystem::path working_directory{};
  /// The agent's environment. Default: inherit the host's.
  process::environment_options env{};
  /// Arguments passed to `codex exec` (or `exec resume`) verbatim, right before `--` and the prompt. Default: none.
  std::vector<std::string> extra_args{};
  /// When reasoning summaries are released to the stream. Default: buffered (when the turn ends).
  mapper::thinking_mode thinking_output = mapper::thinking_mode::buffered;
  /// Watchdogs and stop timing. Default: none, linger 3 s, stop = SIGINT to the group without stdin bytes (codex
  /// handles SIGINT: it kills its tool commands, which run in their own sessions, and exits 1 within ~30 ms; the
  /// tree kill follows after 2 s if anything is left), kill wait 5 s. `stdin_data` must stay empty: the provider uses
  /// it for long prompts.
  run_options run{.stop = process::stop_policy{.interrupt_bytes = {},
                                               .interrupt_signal = SIGINT,
                                               .interrupt_target = process::signal_target::group}};
  /// Containment of the process tree. Default: automatic (the reaper helper when found).
  process::containment_kind containment = process::containment_kind::automatic;
  /// Path of the agenthost-reaper helper. Default: found automatically.
  std::filesystem::path reaper_path{};
  /// Logging. Default: none.
  agenthost::logger log{};

  // ---- codex-specific ----------------------------------------------------------------------------------------------
  /// The sandbox for model-run commands (`-c sandbox_mode="…"`). Default: nullopt = codex's configured mode.
  std::optional<codex_sandbox> sandbox{};
  /// `--skip-git-repo-check`: run outside a git repository (codex exec refuses otherwise). Default: true.
  bool skip_git_repo_check = true;
  /// `--ephemeral`: keep no session files on disk (such a run cannot be resumed). Default: false.
  bool ephemeral = false;
  /// Configuration overrides, one `-c key=value` each, in order; the value is TOML (a bare word is taken as a
  /// string by codex). Keys must be non-empty, without '=' or whitespace, and not start with '-'. Default: none.
  std::vector<std::pair<std::string, std::string>> config{};
};

/// "read-only", "workspace-write", "danger-full-access".
std::string_view to_string(codex_sandbox s) noexcept;

/// A codex command: its arguments and what goes to its stdin.
using codex_command = agent_command;

/// The command for one prompt, or a message saying which option is invalid (an empty prompt is one too).
boost::system::result<codex_command, std::string> build_codex_command(const codex_options& options,
                                                                      std::string_view prompt);

/// build_codex_command(options, prompt).args.
boost::system::result<std::vector<std::string>, std::string> build_codex_arguments(const codex_options& options,
                                                                                   std::string_view prompt);

/// What async_run_agent needs for one codex run: the spawn request (an invalid option is its error, reported as
/// terminal.failed start_failed) and the run options (options.run, with a long prompt as stdin_data).
agent_run_request make_codex_run(const codex_options& options, std::string_view prompt);

/// A codex_mapper with options.thinking_output and options.session_id as the requested session.
std::unique_ptr<mapper::event_mapper> make_codex_mapper(const codex_options& options);

/// Run codex once. Same handler, cancellation and lifetime rules as async_run_agent(): the handler gets
/// (error_code, terminal message); on_message sees every message in order on `ex`; per-operation cancellation stops
/// the tree (options.run.stop) and ends with terminal.cancelled and operation_aborted. Options and prompt are copied:
/// they need not outlive the call. An invalid option is a terminal.failed (start_failed) message, never an exception.
/// Single attempt: nothing is retried.
template <class CompletionToken = boost::asio::deferred_t>
auto async_run_codex(boost::asio::any_io_executor ex, const codex_options& options, std::string_view prompt,
                     message_handler on_message, CompletionToken&& token = {}) {
  auto run = make_codex_run(options, prompt);
  return async_run_agent(std::move(ex), std::move(run.spawn), make_codex_mapper(options), std::move(run.run),
                         std::move(on_message), std::forward<CompletionToken>(token));
}

/// Blocking helper: runs codex on a private io_context; returns the terminal message. on_message is called on the
/// calling thread.
transport::message run_codex(const codex_options& options, std::string_view prompt, const message_handler& on_message);

}  // namespace agenthost::providers
