// What each agent's probe knows (internal): its command, npm package, the features its provider relies on, the Node.js
// it needs when it is a script, the versions agenthost was checked against, and the configuration it can inspect
// without running it (credentials, Gemini's folder trust). The probe itself (finding, running, concluding) is the same
// for every agent: probe.cpp.
#pragma once

#include <agenthost/providers/probe.hpp>

#include "discovery.hpp"

#include <optional>
#include <string>
#include <vector>

namespace agenthost::providers::detail {

/// What the configuration checks may read: the agent's environment and the probe's options.
struct probe_context {
  const env_map& env;
  const probe_options& options;
};

struct agent_spec {
  agent_kind kind;
  /// The command name, also the default executable and probe_result::agent: "claude".
  const char* name;
  /// A part of the npm package's name, to recognize its package.json: "@anthropic-ai/claude-code".
  const char* package_part;
  /// How to install it, one sentence.
  const char* install_hint;
  /// The features the provider relies on, each `supported` for this version (all unsupported without a version).
  std::vector<feature> (*features)(const std::optional<version>& v);
  /// The oldest version agenthost was tested with, and the newest it knows (a newer major gets a hint).
  version oldest_tested;
  version newest_known;
  /// What a version newer than newest_known means for the run, appended to the hint.
  const char* when_newer;
  /// The Node.js the agent's version needs when it runs as a script and its package.json does not say; nullopt when
  /// not known.
  std::optional<version> (*node_required)(const std::optional<version>& agent_version);
  /// Extra hint when Node.js is too old (e.g. an older release that runs on it); empty for none.
  std::string (*older_node_alternative)(const version& required);
  /// Adds hints about configuration problems that can be seen without a model call (credentials, trust).
  void (*check_configuration)(const probe_context& context, probe_result& result);
};

/// The spec of `agent`; every agent_kind has one.
const agent_spec& spec_for(agent_kind agent);

}  // namespace agenthost::providers::detail
