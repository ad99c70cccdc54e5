// agenthost/providers/gemini.hpp — Gemini CLI (`@google/gemini-cli`, checked against 0.61.0).
//
//   agenthost::providers::gemini_options opts{.model = "gemini-2.5-pro", .approval_mode = gemini_approval_mode::yolo};
//   auto terminal = agenthost::providers::run_gemini(opts, "fix the failing test", [](const auto& m) { ... });
//
// Gemini runs as `gemini [extra args] --output-format stream-json [flags] --prompt=PROMPT` (never through a shell).
// The prompt is passed glued to its flag (`--prompt=<text>`), so that a prompt starting with '-' is never read as a
// flag (checked against the real CLI: it echoes such a prompt unchanged). A prompt above gemini_prompt_argv_max bytes
// goes through gemini's stdin instead (gemini reads piped stdin when it is not a terminal and takes it as the prompt
// when no --prompt is given), up to gemini_prompt_stdin_max bytes; otherwise stdin is /dev/null.
//
// Stop policy (cancellation, timeouts, linger): SIGINT to every process of the tree, a 1-s grace, then SIGKILL to the
// whole tree. Why: gemini ends on SIGINT (exit 0, no `result`) within ~0.1 s mid-stream but leaves its shell tool's
// command running in a session of its own; SIGTERM to the leader (the relaunching parent node) is ignored. SIGINT to
// the tree ends the tool's command too, and the tree kill ends whatever is left (gemini takes 1–3.5 s to exit by
// itself during a tool, which the short grace does not wait for: it prints nothing more anyway).
#pragma once

#include <agenthost/mapper/gemini_mapper.hpp>
#include <agenthost/providers/run.hpp>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace agenthost::providers {

/// `--approval-mode`: which tool calls gemini runs without asking (in non-interactive mode a call that would need
/// approval is refused).
enum class gemini_approval_mode {
  default_mode,  ///< "default": ask (refused when headless)
  auto_edit,     ///< "auto_edit": edit tools approved
  yolo,          ///< "yolo": every tool approved
  plan,          ///< "plan": read-only
};

/// The value gemini expects for a mode ("default", "auto_edit", "yolo", "plan").
std::string_view to_string(gemini_approval_mode mode) noexcept;

/// How the prompt reaches gemini.
enum class gemini_prompt_delivery {
  /// `--prompt=<text>` up to gemini_prompt_argv_max bytes (and without NUL bytes), stdin otherwise. The default.
  automatic,
  /// Always `--prompt=<text>`: Linux refuses an argument of 128 KiB or more (start_failed, "argument_list_too_long");
  /// a prompt with a NUL byte is an invalid option.
  argv,
  /// Always gemini's stdin, then EOF (no --prompt): the text arrives unchanged, up to gemini_prompt_stdin_max bytes.
  stdin,
};

/// The largest prompt `automatic` passes as an argument (64 KiB: half of Linux's per-argument limit, leaving room for
/// the environment and the other arguments).
inline constexpr std::size_t gemini_prompt_argv_max = std::size_t{64} << 10;
/// The largest prompt gemini takes from stdin: it truncates stdin at 8 MiB (with only a debug warning), so a longer
/// prompt is refused here (start_failed) instead of being cut silently.
inline constexpr std::size_t gemini_prompt_stdin_max = std::size_t{8} << 20;

/// SIGINT to the whole tree (no Ctrl+C bytes: stdin may carry the prompt), 1-s grace, then the tree kill. See above.
process::stop_policy gemini_stop_policy();

struct gemini_options {
  /// The gemini executable: a path or a name looked up in PATH. Default: "gemini".
  std::filesystem::path executable = "gemini";
  /// `-m MODEL`. Default: empty = gemini's default (its settings, then its built-in model).
  std::string model{};
  /// Resume this session: `--resume ID` (a session id gemini printed in its `init` event, i.e. session.started;
  /// gemini looks it up among the sessions of the working directory's project; an unknown id makes it exit 42 before
  /// any event: terminal.failed, reason exited). The session message is then session.resumed. Default: none = a new
  /// session.
  std::optional<std::string> session_id{};
  /// Working directory of the agent (also selects gemini's project: sessions, trust). Default: empty = the host's.
  std::filesystem::path working_directory{};
  /// The agent's environment. Default: inherit the host's. (GEMINI_CLI_NO_RELAUNCH=1 keeps gemini from starting
  /// itself a second time with a bigger heap, which halves its start-up.)
  process::environment_options env{};
  /// Arguments passed to gemini verbatim, placed before our own flags; the prompt is glued to `--prompt=` (or on
  /// stdin), so no extra argument can swallow it. Default: none.
  std::vector<std::string> extra_args{};
  /// When thinking is released to the stream. Default: buffered. (Gemini's stream-json exposes no thoughts.)
  mapper::thinking_mode thinking_output = mapper::thinking_mode::buffered;
  /// `--approval-mode`. Default: nullopt = gemini's default (its settings; "default" otherwise).
  std::optional<gemini_approval_mode> approval_mode{};
  /// `--skip-trust`: trust the working directory for this session (an untrusted folder restricts what gemini
  /// loads). Default: false.
  bool skip_trust = false;
  /// `--sandbox`: run tools in gemini's sandbox (docker/podman/sandbox-exec, set up by the user). Default: false.
  bool sandbox = false;
  /// `--include-directories DIR`, once per entry (no commas: gemini splits on them). Default: none.
  std::vector<std::filesystem::path> include_directories{};
  /// How the prompt reaches gemini. Default: automatic (argv up to gemini_prompt_argv_max bytes, stdin above).
  gemini_prompt_delivery prompt_delivery = gemini_prompt_delivery::automatic;
  /// Watchdogs and stop timing. Default: none, linger 3 s, stop = gemini_stop_policy(). `stdin_data` must stay
  /// empty: the provider uses it for the prompt.
  run_options run{.stop = gemini_stop_policy()};
  /// Containment of the process tree. Default: automatic (the reaper helper when found).
  process::containment_kind containment = process::containment_kind::automatic;
  /// Path of the agenthost-reaper helper. Default: found automatically.
  std::filesystem::path reaper_path{};
  /// Logging. Default: none.
  agenthost::logger log{};
};

/// A gemini command: its arguments and what goes to its stdin.
using gemini_command = agent_command;

/// The command for one prompt, or a message saying which option is invalid (an empty prompt, a model starting with
/// '-', a session id that is empty or starts with '-', an include directory that is empty, starts with '-' or holds a
/// comma, a prompt above gemini_prompt_stdin_max bytes for stdin, a prompt with a NUL byte for argv, run.stdin_data
/// set).
boost::system::result<gemini_command, std::string> build_gemini_command(const gemini_options& options,
                                                                        std::string_view prompt);

/// build_gemini_command(options, prompt).args.
boost::system::result<std::vector<std::string>, std::string> build_gemini_arguments(const gemini_options& options,
                                                                                    std::string_view prompt);

/// What async_run_agent needs for one gemini run: the spawn request (holding the error for an invalid option) and
/// the run options (options.run, with the prompt as stdin_data when it goes through stdin).
agent_run_request make_gemini_run(const gemini_options& options, std::string_view prompt);

std::unique_ptr<mapper::event_mapper> make_gemini_mapper(const gemini_options& options);

/// Run gemini once. Handler: void(boost::system::error_code, transport::message terminal); same handler, cancellation
/// (terminal/partial/total: the tree is stopped with options.run.stop, then terminal.cancelled and
/// operation_aborted) and lifetime rules as async_run_agent() — everything is copied in; `on_message` is called on
/// the executor until the handler runs. An invalid option is a terminal.failed (start_failed) message too. Single
/// attempt: never retried.
template <class CompletionToken = boost::asio::deferred_t>
auto async_run_gemini(boost::asio::any_io_executor ex, const gemini_options& options, std::string_view prompt,
                      message_handler on_message, CompletionToken&& token = {}) {
  auto run = make_gemini_run(options, prompt);
  return async_run_agent(std::move(ex), std::move(run.spawn), make_gemini_mapper(options), std::move(run.run),
                         std::move(on_message), std::forward<CompletionToken>(token));
}

/// Blocking helper: runs gemini on a private io_context; returns the terminal message. Not thread-safe with respect
/// to `on_message` (called on the calling thread).
transport::message run_gemini(const gemini_options& options, std::string_view prompt,
                              const message_handler& on_message);

}  // namespace agenthost::providers
