// agenthost/providers/pi.hpp — the pi coding agent (`@mariozechner/pi-coding-agent`, `@earendil-works/pi-coding-agent`).
//
//   agenthost::providers::pi_options opts{.model = "gpt-5", .thinking_level = "low"};
//   auto terminal = agenthost::providers::run_pi(opts, "fix the failing test", [](const auto& m) { ... });
//
// pi runs as `pi [extra args] --mode json [flags] -p [--] PROMPT`. A prompt too long for one argument (Linux: 128 KiB)
// goes through pi's stdin instead (pi_options::prompt_delivery): pi reads piped stdin to EOF before doing anything and
// puts it in front of the prompt argument; otherwise stdin is /dev/null. The stop policy is SIGTERM (pi kills its
// detached tool children only on SIGTERM/SIGHUP; SIGINT kills it without cleanup), then the whole tree is killed as
// always.
#pragma once

#include <agenthost/mapper/pi_mapper.hpp>
#include <agenthost/providers/run.hpp>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace agenthost::providers {

/// A parsed "major.minor.patch" version.
struct version {
  int major = 0, minor = 0, patch = 0;
  friend auto operator<=>(const version&, const version&) = default;
  /// Finds the first "N.N.N" in text such as "0.73.1" or "pi 1.6.0\n"; nullopt when there is none.
  static std::optional<version> parse(std::string_view text);
  [[nodiscard]] std::string to_string() const;
};

/// The first pi versions with the flags the provider uses when it may (first seen in pi 1.6.0, the earliest 1.x whose
/// sources were checked; pi 0.73.1 exits 1 on them with "Unknown options"). Shared by build_pi_arguments and probes.
namespace pi_versions {
inline constexpr version session_id_flag{1, 6, 0};   ///< --session-id ID
inline constexpr version double_dash{1, 6, 0};       ///< -- before the prompt
inline constexpr version thinking_max{1, 6, 0};      ///< --thinking max
inline constexpr version delta_json{0, 84, 0};       ///< delta-only message_update records
}  // namespace pi_versions

/// How the prompt reaches pi.
enum class pi_prompt_delivery {
  /// argv when the prompt has at most pi_prompt_argv_max bytes, does not start with '@' (pi would read that as a
  /// file to attach) and holds no NUL byte (an argument cannot carry one); stdin otherwise. The default.
  automatic,
  /// Always the last argument: exact for any text without a NUL byte (before pi 1.6 a prompt starting with '-' or '@'
  /// gets one leading space; a NUL is invalid_options), but Linux refuses an argument of 128 KiB or more
  /// (start_failed, "argument_list_too_long").
  argv,
  /// Always pi's stdin, then EOF: any size, never parsed as flags or files. pi trims what it reads from stdin (JS
  /// String.trim), so the prompt's trailing whitespace is passed as the last argument, which pi appends unchanged;
  /// its leading whitespace is dropped.
  stdin,
};

/// The largest prompt `automatic` passes as an argument (64 KiB: half of Linux's per-argument limit, leaving room for
/// the environment and the other arguments in the total limit).
inline constexpr std::size_t pi_prompt_argv_max = std::size_t{64} << 10;

struct pi_options {
  /// The pi executable: a path or a name looked up in PATH. Default: "pi".
  std::filesystem::path executable = "pi";
  /// `--provider`. Default: empty = pi's default.
  std::string provider{};
  /// `--model`. Default: empty = pi's default.
  std::string model{};
  /// `--thinking`: off, minimal, low, medium, high, xhigh (pi ≥ 1.6 also max). Validated here: pi only warns on an
  /// invalid level. Default: empty = pi's default.
  std::string thinking_level{};
  /// This session: `--session-id ID` with pi_version ≥ 1.6 (resumes it, or creates it); otherwise `--session ID`, which
  /// only opens an existing one (none found: pi exits 1, a terminal.failed). Default: none.
  std::optional<std::string> session_id{};
  /// `--continue`: continue the most recent session in the working directory. Default: false.
  bool continue_session = false;
  /// `--no-session`: keep nothing on disk. Default: false.
  bool no_session = false;
  /// `--session-dir`. Default: empty = pi's default.
  std::filesystem::path session_dir{};
  /// Built-in tools allowed (`--tools a,b`); an empty vector means `--no-tools`. Default: nullopt = pi's default set.
  std::optional<std::vector<std::string>> tools{};
  /// `--append-system-prompt`, once per entry (pi < 1.6 keeps only the last one). Default: none.
  std::vector<std::string> append_system_prompt{};
  /// Working directory of the agent. Default: empty = the host's.
  std::filesystem::path working_directory{};
  /// The agent's environment. Default: inherit the host's.
  process::environment_options env{};
  /// Arguments passed to pi verbatim, placed before our own flags so that an unknown flag can never swallow the
  /// prompt. Default: none.
  std::vector<std::string> extra_args{};
  /// When thinking is released to the stream. Default: buffered (at the end of the final turn).
  mapper::thinking_mode thinking_output = mapper::thinking_mode::buffered;
  /// The pi version, if known (from a probe); gates flags older versions reject. Default: nullopt = assume the
  /// oldest supported (0.73.1) behaviour.
  std::optional<version> pi_version{};
  /// How the prompt reaches pi. Default: automatic (argv up to pi_prompt_argv_max bytes, stdin above).
  pi_prompt_delivery prompt_delivery = pi_prompt_delivery::automatic;
  /// Watchdogs and stop timing. Default: none, linger 3 s, stop = SIGTERM to pi, 2 s, tree kill, 5 s. `stdin_data`
  /// must stay empty: the provider uses it for the prompt.
  run_options run{.stop = process::stop_policy::sigterm()};
  /// Containment of the process tree. Default: automatic (the reaper helper when found).
  process::containment_kind containment = process::containment_kind::automatic;
  /// Path of the agenthost-reaper helper. Default: found automatically.
  std::filesystem::path reaper_path{};
  /// Logging. Default: none.
  agenthost::logger log{};
};

/// Thinking levels pi accepts (for the given version; nullopt = oldest supported).
bool pi_thinking_level_valid(std::string_view level, const std::optional<version>& v);

/// A pi command: its arguments and what goes to its stdin.
using pi_command = agent_command;

/// The command for one prompt, or a message saying which option is invalid.
/// Rules: a prompt passed as an argument never becomes a flag (`--` where pi supports it; older pi gets the prompt
/// prefixed with one space, which the model reads the same) nor a file (`@…`: the space before pi 1.6; that `--`
/// also ends pi ≥ 1.6's @file parsing is assumed, not verified — `automatic` sends such prompts through stdin anyway);
/// extra arguments come first so they cannot swallow the prompt; flags the given pi version rejects are never passed.
/// Through stdin, pi receives exactly the prompt without its leading whitespace: stdin gets the prompt without
/// leading and trailing whitespace (JS String.trim's set), the last argument the trailing whitespace, if any (checked
/// against pi 0.73.1's main.js readPipedStdin and cli/initial-message.js: `stdin.trim() + argument`).
boost::system::result<pi_command, std::string> build_pi_command(const pi_options& options, std::string_view prompt);

/// build_pi_command(options, prompt).args.
boost::system::result<std::vector<std::string>, std::string> build_pi_arguments(const pi_options& options,
                                                                                std::string_view prompt);

/// What async_run_agent needs for one pi run: the spawn request and the run options (options.run, with the prompt's
/// stdin part as stdin_data).
using pi_run = agent_run_request;
pi_run make_pi_run(const pi_options& options, std::string_view prompt);

/// The spawn options for one pi run (exposed for tools such as `agenthost replay`). A prompt that would be delivered
/// through stdin is an error here (nothing would write it): use make_pi_run().
spawn_request pi_spawn_options(const pi_options& options, std::string_view prompt);
std::unique_ptr<mapper::event_mapper> make_pi_mapper(const pi_options& options);

/// Run pi once. Same handler, cancellation and lifetime rules as async_run_agent(); an invalid option is a
/// terminal.failed (start_failed) message too.
template <class CompletionToken = boost::asio::deferred_t>
auto async_run_pi(boost::asio::any_io_executor ex, const pi_options& options, std::string_view prompt,
                  message_handler on_message, CompletionToken&& token = {}) {
  auto run = make_pi_run(options, prompt);
  return async_run_agent(std::move(ex), std::move(run.spawn), make_pi_mapper(options), std::move(run.run),
                         std::move(on_message), std::forward<CompletionToken>(token));
}

/// Blocking helper: runs pi on a private io_context; returns the terminal message.
transport::message run_pi(const pi_options& options, std::string_view prompt, const message_handler& on_message);

}  // namespace agenthost::providers
