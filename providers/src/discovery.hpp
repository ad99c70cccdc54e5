// Finding an agent's program the way its shell would, and how it launches (internal, used by the probes). Synchronous
// file-system look-ups: a few stat() calls and reads of small files. Nothing here runs a program.
#pragma once

#include <agenthost/process/options.hpp>
#include <agenthost/providers/probe.hpp>

#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agenthost::providers::detail {

using env_map = std::map<std::string, std::string>;

/// The environment the agent would get (same rules as process::spawn_options::env).
env_map effective_environment(const process::environment_options& o);
/// The value of `name`, empty when unset.
std::string env_value(const env_map& env, const std::string& name);
/// The PATH used to find programs: the agent's, or the default process::child::spawn uses without one.
std::string search_path(const env_map& env);
/// The PATH process::child::spawn searches for a bare executable name (launch.cpp): env.set's, else the host's when
/// inheriting — even when the allow-list or `unset` keeps it from the agent —, else the default. The probe finds the
/// agent's executable the same way, so that it reports the file a run starts.
std::string executable_search_path(const process::environment_options& o);

enum class file_check { ok, missing, not_executable };
/// A regular file we may execute?
file_check check_executable(const std::filesystem::path& p);
/// PATH's directories in order; an empty entry is the current directory, as for the shell.
std::vector<std::filesystem::path> split_path(const std::string& path_var);
/// `p` made absolute and normalized; `p` itself when that fails.
std::filesystem::path absolute_or_same(const std::filesystem::path& p);
/// The first `n` bytes of a file (fewer when it is shorter or unreadable).
std::string read_head(const std::filesystem::path& p, std::size_t n);
/// "${NAME}" / "$NAME" from the agent's environment and a leading "~/" (what npm does with .npmrc values).
std::string expand(std::string value, const env_map& env);
/// `s` without leading and trailing whitespace.
std::string trim(std::string_view s);
/// `prefix=` of the user's .npmrc ($NPM_CONFIG_USERCONFIG or ~/.npmrc), without running npm.
std::optional<std::filesystem::path> npmrc_prefix(const env_map& env);
/// Where npm, pnpm, pipx-style and other installers put programs that might not be on the agent's PATH.
std::vector<std::filesystem::path> install_places(const env_map& env);

struct lookup {
  std::filesystem::path found{};           ///< absolute, empty when not found
  bool on_path = false;                    ///< found in the agent's PATH (or given as a path)
  std::filesystem::path not_executable{};  ///< the first candidate that exists but cannot be executed
  std::string searched{};                  ///< where we looked, for messages
};
/// `name` as given (a path) or searched in the agent's PATH, then (when `use_install_places`) in install_places().
lookup find_program(const std::filesystem::path& name, const env_map& env, bool use_install_places);

struct node_launch {
  bool uses_node = false;
  std::string how{};                ///< e.g. "#!/usr/bin/env node", for messages
  bool via_path = false;            ///< node is looked up in the agent's PATH (so it must be there)
  std::filesystem::path node{};     ///< resolved; empty when not found
  std::filesystem::path script{};   ///< the JavaScript file, when known (to find the package.json)
};
/// Whether `exe` runs on Node.js (a node shebang, `env node`, or an npm shell shim) and which node it would get.
/// `exe` is the path as invoked (an npm shim's $basedir is the directory of $0, not of a symlink's target).
node_launch detect_node(const std::filesystem::path& exe, const env_map& env);

struct package_info {
  std::filesystem::path file{};
  std::optional<version> pkg_version{};
  std::optional<version> node_required{};  ///< `engines.node`
};
/// The package.json of the npm package `script` belongs to (up to five directories up), when its name contains
/// `name_part` (e.g. "pi-coding-agent").
std::optional<package_info> npm_package(const std::filesystem::path& script, std::string_view name_part);

}  // namespace agenthost::providers::detail
