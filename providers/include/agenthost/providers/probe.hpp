// agenthost/providers/probe.hpp — discovery: is an agent installed, which version, can we run it, and why not.
//
//   auto r = agenthost::providers::probe_pi({.timeout = std::chrono::seconds(3)});
//   if (!r.available) for (auto& p : r.problems) std::cerr << p << "\n";       // "pi 1.6.0 needs Node.js >= 22.19.0 …"
//   agenthost::providers::pi_options opts = with_probe({.model = "gpt-5"}, r);  // flags gated by the probed version
//
// A probe never sends a prompt and never calls a model. It
//   1. resolves the executable: an explicit path as given; a bare name in the agent's PATH, then in the usual install
//      places ($NPM_CONFIG_PREFIX/bin, the `prefix=` of ~/.npmrc, ~/.npm-global/bin, ~/.local/bin, /usr/local/bin,
//      ~/.volta/bin, ~/.bun/bin — never by running `npm config get prefix`, which takes seconds);
//   2. when the executable is a Node.js script (a `#!…node` shebang, or an npm/pnpm shell shim that execs node),
//      resolves that `node` the way the script would (its PATH, the shim's own directory) and runs `node --version`;
//   3. runs the version command (`pi --version`) with stdin on /dev/null, the agent's environment, and the whole
//      process tree contained: when the time is up the tree is killed (SIGKILL) and the probe reports a problem;
//   4. reports the features of that version the provider relies on, and configuration hints that can be known
//      without a model call (e.g. no credentials anywhere pi looks for them).
// A missing, broken or hanging agent is a result (available = false, problems say why), never an exception.
#pragma once

#include <agenthost/process/options.hpp>
#include <agenthost/providers/pi.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/system/error_code.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace agenthost::providers {

/// One capability the provider relies on, and whether the probed version has it.
struct feature {
  /// Stable identifier, e.g. "session_id" (see probe_pi() for pi's list).
  std::string name{};
  /// True when the probed version has it; false when it lacks it or the version is unknown.
  bool supported = false;
  /// The first version that has it; nullopt when it is not version-gated.
  std::optional<providers::version> since{};
  /// What it is, for people: e.g. "--session-id ID (resume or create a session by id)".
  std::string description{};
};

/// The interpreter a script-based agent runs on (pi: Node.js).
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
  /// "pi".
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
  /// The interpreter, when the agent is a script (pi installed with npm: Node.js). nullopt for native executables.
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

struct pi_probe_options {
  /// The pi executable: a path (used as given) or a bare name looked up in the agent's PATH, then in the install
  /// places listed at the top of this header. Default: "pi".
  std::filesystem::path executable = "pi";
  /// Bound for the whole probe, version commands included; a command still running then is killed with its whole
  /// tree. The probe completes at most ~`timeout` + 2 s (the kill) after it started. Default: 5 s.
  std::chrono::milliseconds timeout{5000};
  /// The environment pi would run with: PATH, HOME, NPM_CONFIG_PREFIX, API keys and PI_CODING_AGENT_DIR are read
  /// from it as pi would see them, and the version commands run with it. Default: inherit the host's.
  process::environment_options env{};
  /// Containment of the version commands' process trees. Default: automatic (the reaper helper when found).
  process::containment_kind containment = process::containment_kind::automatic;
  /// Path of the agenthost-reaper helper. Default: found automatically.
  std::filesystem::path reaper_path{};
  /// Logging. Default: none.
  agenthost::logger log{};
};

/// The probe options matching a run's options (same executable, environment, containment, reaper and logger).
pi_probe_options probe_options_for(const pi_options& options);

/// `options` with what the probe learned: pi_version = result.version when the probe found a version (so
/// build_pi_arguments() never passes a flag that version rejects; without one the caller's value, by default nullopt =
/// the oldest behaviour, stays), and executable = result.executable when the probe resolved one. Everything else is
/// unchanged.
pi_options with_probe(pi_options options, const probe_result& result);

namespace detail {
void async_probe_pi_impl(boost::asio::any_io_executor ex, pi_probe_options options,
                         boost::asio::any_completion_handler<void(boost::system::error_code, probe_result)> handler);
}

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
      [](auto handler, boost::asio::any_io_executor e, pi_probe_options o) {
        detail::async_probe_pi_impl(std::move(e), std::move(o), std::move(handler));
      },
      token, std::move(ex), std::move(options));
}

/// Blocking helper: runs async_probe_pi on a private io_context. Never throws for a missing or broken agent.
probe_result probe_pi(const pi_probe_options& options = {});

}  // namespace agenthost::providers
