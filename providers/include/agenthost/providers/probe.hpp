// agenthost/providers/probe.hpp — discovery: is an agent installed, which version, can we run it, and why not.
//
//   auto r = agenthost::providers::probe_pi({.timeout = std::chrono::seconds(3)});
//   if (!r.available) for (auto& p : r.problems) std::cerr << p << "\n";       // "pi 1.6.0 needs Node.js >= 22.19.0 …"
//   agenthost::providers::pi_options opts = with_probe({.model = "gpt-5"}, r);  // flags gated by the probed version
//   auto c = agenthost::providers::probe(agenthost::providers::agent_kind::codex);  // any agent: pi, claude, codex…
//
// A probe never sends a prompt and never calls a model. It
//   1. resolves the executable: an explicit path as given; a bare name in the agent's PATH, then in the usual install
//      places ($NPM_CONFIG_PREFIX/bin, the `prefix=` of ~/.npmrc, ~/.npm-global/bin, ~/.local/bin, /usr/local/bin,
//      ~/.volta/bin, ~/.bun/bin — never by running `npm config get prefix`, which takes seconds);
//   2. when the executable is a Node.js script (a `#!…node` shebang, or an npm/pnpm shell shim that execs node),
//      resolves that `node` the way the script would (its PATH, the shim's own directory) and runs `node --version`;
//   3. runs the version command (`pi --version`, `claude --version`, …) with stdin on /dev/null, the agent's
//      environment, and the whole process tree contained: when the time is up the tree is killed (SIGKILL) and the
//      probe reports a problem;
//   4. reports the features of that version the provider relies on, and configuration hints that can be known
//      without a model call (no credentials anywhere the agent looks for them; for Gemini, a working directory that
//      is not trusted).
// A missing, broken or hanging agent is a result (available = false, problems say why), never an exception.
#pragma once

#include <agenthost/process/options.hpp>
#include <agenthost/providers/claude.hpp>
#include <agenthost/providers/codex.hpp>
#include <agenthost/providers/gemini.hpp>
#include <agenthost/providers/opencode.hpp>
#include <agenthost/providers/pi.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/system/error_code.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <chrono>
#include <concepts>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agenthost::providers {

/// The agents agenthost has a provider (and a probe) for.
enum class agent_kind {
  pi,        ///< "pi": pi-coding-agent
  claude,    ///< "claude": Claude Code
  codex,     ///< "codex": the OpenAI Codex CLI
  gemini,    ///< "gemini": Gemini CLI
  opencode,  ///< "opencode": OpenCode
};

/// Every agent_kind, in the order `agenthost doctor` lists them.
inline constexpr std::array<agent_kind, 5> all_agent_kinds{agent_kind::pi, agent_kind::claude, agent_kind::codex,
                                                           agent_kind::gemini, agent_kind::opencode};

/// "pi", "claude", "codex", "gemini", "opencode": the names the CLI takes, and probe_result::agent.
[[nodiscard]] std::string_view to_string(agent_kind agent) noexcept;
/// Inverse of to_string(); nullopt for anything else.
[[nodiscard]] std::optional<agent_kind> agent_kind_from_string(std::string_view name) noexcept;

/// One capability the provider relies on, and whether the probed version has it.
struct feature {
  /// Stable identifier, e.g. "session_id" (see probe_pi() and probe() for each agent's list).
  std::string name{};
  /// True when the probed version has it; false when it lacks it or the version is unknown.
  bool supported = false;
  /// The first version that has it; nullopt when it is not version-gated.
  std::optional<providers::version> since{};
  /// What it is, for people: e.g. "--session-id ID (resume or create a session by id)".
  std::string description{};
};

/// The interpreter a script-based agent runs on (pi, Codex's launcher, Gemini CLI: Node.js).
struct runtime_info {
  /// "node".
  std::string name{};
  /// The interpreter the agent would run; empty when it was not found.
  std::filesystem::path executable{};
  /// From `node --version`; nullopt when it could not be run or parsed.
  std::optional<providers::version> version{};
  /// The first line `node --version` printed (or why it failed).
  std::string version_text{};
  /// The minimum the agent's version needs, when known.
  std::optional<providers::version> required{};
};

/// What a probe found. Plain data; `to_json()` gives its JSON form.
struct probe_result {
  /// to_string() of the agent: "pi", "claude", "codex", "gemini" or "opencode".
  std::string agent{};
  /// True when the agent can be run: found, executable, its version command succeeded with a version number, and its
  /// runtime (if any) is recent enough. Problems are empty exactly when this is true.
  bool available = false;
  /// The resolved absolute path (empty when not found). May lie outside PATH (an install place): with_probe() passes
  /// it on so the run uses the same file.
  std::filesystem::path executable{};
  /// The parsed version: from the version command, or — when that failed — from the package.json of an npm install.
  std::optional<providers::version> version{};
  /// The first non-empty line the version command printed (stdout, else stderr), at most 200 bytes.
  std::string version_text{};
  /// The features the provider relies on, each with `supported` for this version.
  std::vector<feature> features{};
  /// Why the agent is unusable, one sentence each (empty when available).
  std::vector<std::string> problems{};
  /// What to do, and configuration issues that do not make the agent unusable (e.g. no credentials found).
  std::vector<std::string> hints{};
  /// The interpreter, when the agent is a script (pi installed with npm: Node.js). nullopt for native executables
  /// (Claude Code and OpenCode as npm installs them).
  std::optional<runtime_info> runtime{};
  /// How long the probe took.
  std::chrono::milliseconds elapsed{};
};

/// JSON form: {"agent","available","executable","version" (string or null),"version_text","features":[{"name",
/// "supported","since","description"}],"problems":[…],"hints":[…],"runtime":{…} or null,"elapsed_ms"}.
nlohmann::json to_json(const probe_result& result);
/// The same, for nlohmann's ADL conversion (`nlohmann::json j = result;`).
void to_json(nlohmann::json& j, const probe_result& result);

/// The supported-flag of the feature `name`, or false when the result has no such feature.
[[nodiscard]] bool supports(const probe_result& result, std::string_view name);

/// How to probe an agent (any of them).
struct probe_options {
  /// The agent's executable: a path (used as given) or a bare name looked up in the agent's PATH, then in the install
  /// places listed at the top of this header. Default: empty = the agent's command name ("pi", "claude", "codex",
  /// "gemini", "opencode").
  std::filesystem::path executable{};
  /// Bound for the whole probe, version commands included; a command still running then is killed with its whole
  /// tree. The probe completes at most ~`timeout` + 2 s (the kill) after it started. Default: 5 s.
  std::chrono::milliseconds timeout{5000};
  /// false: start no process — a quick probe (no `--version`, no `node --version`: milliseconds instead of the
  /// seconds a Node.js agent takes to start) for a host that starts many runs. The executable is resolved as always;
  /// the version comes from the package.json of an npm install (none for a native executable or another kind of
  /// install); Node.js's own version is not checked (a missing `node` still is). Default: true.
  bool run_version_commands = true;
  /// The environment the agent would run with: PATH, HOME, NPM_CONFIG_PREFIX, the agent's credential variables and
  /// configuration directories (PI_CODING_AGENT_DIR, CLAUDE_CONFIG_DIR, CODEX_HOME, GEMINI_CLI_HOME, XDG_*…) are read
  /// from it as the agent would see them, and the version commands run with it. Default: inherit the host's.
  process::environment_options env{};
  /// The working directory the agent would run in; only Gemini CLI's folder-trust hint reads it. Default: empty = the
  /// host's.
  std::filesystem::path working_directory{};
  /// Containment of the version commands' process trees. Default: automatic (the reaper helper when found).
  process::containment_kind containment = process::containment_kind::automatic;
  /// Path of the agenthost-reaper helper. Default: found automatically.
  std::filesystem::path reaper_path{};
  /// Logging. Default: none.
  agenthost::logger log{};
};

/// The options of probe_pi(): the same as every agent's.
using pi_probe_options = probe_options;

/// The providers whose options have what a probe needs (executable, env, working_directory, containment, reaper_path,
/// log) and choose no flag by version.
template <class Options>
concept probed_options = std::same_as<Options, claude_options> || std::same_as<Options, codex_options> ||
                         std::same_as<Options, gemini_options> || std::same_as<Options, opencode_options>;

namespace detail {
// Every provider's options name these fields as probe_options does.
template <class Options>
probe_options probe_options_from(const Options& options) {
  return {.executable = options.executable,
          .env = options.env,
          .working_directory = options.working_directory,
          .containment = options.containment,
          .reaper_path = options.reaper_path,
          .log = options.log};
}
}  // namespace detail

/// The probe options matching a run's options (same executable, environment, working directory, containment, reaper
/// and logger).
probe_options probe_options_for(const pi_options& options);
/// The same for Claude Code, Codex, Gemini CLI and OpenCode. (Templates so that a braced `probe_options_for({…})`
/// still means pi_options.)
template <probed_options Options>
probe_options probe_options_for(const Options& options) {
  return detail::probe_options_from(options);
}

/// `options` with what the probe learned: pi_version = result.version when the probe found a version (so
/// build_pi_arguments() never passes a flag that version rejects; without one the caller's value, by default nullopt =
/// the oldest behaviour, stays), and executable = result.executable when the probe resolved one. Everything else is
/// unchanged.
pi_options with_probe(pi_options options, const probe_result& result);
/// `options` with executable = result.executable when the probe resolved one (these providers choose no flag by
/// version). Everything else is unchanged. (A template so that a braced `with_probe({.model = …}, r)` still means
/// pi_options.)
template <probed_options Options>
Options with_probe(Options options, const probe_result& result) {
  if (!result.executable.empty()) options.executable = result.executable;
  return options;
}

namespace detail {
void async_probe_impl(boost::asio::any_io_executor ex, agent_kind agent, probe_options options,
                      boost::asio::any_completion_handler<void(boost::system::error_code, probe_result)> handler);
}

/// Probe any agent: find it, run `<agent> --version` (and `node --version` when it is a Node.js script), report its
/// features, problems and hints. What each agent's probe knows (pi: see async_probe_pi):
///   claude   features "stream_json" (`-p --output-format stream-json --verbose`), "partial_messages"
///            (`--include-partial-messages`), "end_of_options" (`--` before the prompt), "permission_mode"; hints when
///            no credentials are found (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN, Bedrock/Vertex
///            switches, .credentials.json in $CLAUDE_CONFIG_DIR or ~/.claude, or an apiKeyHelper or key in its
///            settings.json).
///   codex    features "exec_json" (`codex exec --json`), "skip_git_repo_check", "ephemeral", "exec_resume"; hints when
///            no credentials are found (OPENAI_API_KEY, CODEX_API_KEY, auth.json or a `model_providers` table in
///            config.toml in $CODEX_HOME or ~/.codex). Codex's launcher is a Node.js script (engines: Node >= 16).
///   gemini   features "stream_json" (`--output-format stream-json`), "skip_trust", "approval_mode"; hints when no
///            credentials are found (GEMINI_API_KEY, GOOGLE_API_KEY, Vertex/GCA switches, oauth_creds.json or an auth
///            type in settings.json, or a .env with GEMINI_API_KEY in $GEMINI_CLI_HOME/.gemini or ~/.gemini), and when
///            folder trust is on and the
///            working directory is not trusted in trustedFolders.json (gemini then exits 55 unless
///            gemini_options::skip_trust or GEMINI_CLI_TRUST_WORKSPACE=true). Runs on Node.js >= 20.
///   opencode features "json_format" (`opencode run --format json`), "thinking" (`--thinking`), "session"
///            (`--session ID`); hints when no credentials are found (a provider API key in the environment, auth.json in
///            $XDG_DATA_HOME/opencode or ~/.local/share/opencode, or a config naming providers).
/// Each agent's probe also hints when its version is older than the one agenthost was checked against (claude
/// 2.1.332, codex 0.171.0, gemini 0.61.0, opencode 1.18.33) or of a newer major version.
/// Handler, cancellation, lifetimes and thread safety: as async_probe_pi.
template <class CompletionToken = boost::asio::deferred_t>
auto async_probe(boost::asio::any_io_executor ex, agent_kind agent, probe_options options,
                 CompletionToken&& token = {}) {
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, probe_result)>(
      [](auto handler, boost::asio::any_io_executor e, agent_kind a, probe_options o) {
        detail::async_probe_impl(std::move(e), a, std::move(o), std::move(handler));
      },
      token, std::move(ex), agent, std::move(options));
}

/// Blocking helper: runs async_probe on a private io_context. Never throws for a missing or broken agent.
probe_result probe(agent_kind agent, const probe_options& options = {});

/// Probe pi: find it, run `pi --version` (and `node --version` for an npm install), report features and problems.
/// pi's features: "json_mode" (`--mode json -p`, every version), "session_id" (`--session-id`, 1.6.0),
///   "end_of_options" (`--` before the prompt, 1.6.0), "thinking_max" (`--thinking max`, 1.6.0), "delta_json"
///   (delta-only message_update records, 0.84.0). pi ≥ 1.0 needs Node.js ≥ 22.19.0 (older: ≥ 20.6.0), or what the
///   package.json `engines.node` of the install says.
/// Handler: void(boost::system::error_code ec, probe_result result). ec is asio::error::operation_aborted when the
///   probe was cancelled (result then holds what was found so far, available = false, problem "probe cancelled");
///   otherwise success, whatever was found — a missing or broken agent is a result.
/// Per-operation cancellation: terminal, partial, total — all stop the version command that is running (its whole
///   tree is killed; that cannot be cancelled and takes milliseconds), then complete with operation_aborted.
/// Lifetimes: `options` is moved in; nothing needs to outlive the call. The handler runs on its associated executor
///   (default: `ex`), never inside this call.
/// Thread safety: each probe is independent; several may run at once on the same or different executors. One probe's
///   handlers are serialized only if `ex` is: when the io_context runs on several threads, pass a strand.
template <class CompletionToken = boost::asio::deferred_t>
auto async_probe_pi(boost::asio::any_io_executor ex, pi_probe_options options, CompletionToken&& token = {}) {
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, probe_result)>(
      [](auto handler, boost::asio::any_io_executor e, probe_options o) {
        detail::async_probe_impl(std::move(e), agent_kind::pi, std::move(o), std::move(handler));
      },
      token, std::move(ex), std::move(options));
}

/// Blocking helper: runs async_probe_pi on a private io_context. Never throws for a missing or broken agent.
probe_result probe_pi(const pi_probe_options& options = {});

}  // namespace agenthost::providers
