// What each agent's probe knows: see probe_agents.hpp. The credential and trust checks read only variables and small
// files, the way each agent's own code looks them up (sources named per check); they never run the agent.
#include "probe_agents.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <fstream>
#include <initializer_list>
#include <string_view>

namespace agenthost::providers::detail {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// ---- shared pieces -------------------------------------------------------------------------------------------------

feature make_feature(const std::optional<version>& v, const char* name, std::optional<version> since,
                     const char* description) {
  return feature{.name = name,
                 .supported = v.has_value() && (!since || *v >= *since),
                 .since = since,
                 .description = description};
}

bool any_set(const probe_context& c, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (!env_value(c.env, n).empty()) return true;
  return false;
}

// A JSON (or JSONC) file, discarded when missing or malformed.
json read_json(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return json(json::value_t::discarded);
  return json::parse(in, nullptr, false, /*ignore_comments=*/true);
}

// The member at `path` (object keys only), or null when a step is missing or not an object. A user's settings file can
// hold anything: json_pointer lookups throw on some shapes (`"security": []`), and a probe never throws.
const json& member_at(const json& j, std::initializer_list<const char*> path) {
  static const json missing;
  const json* at = &j;
  for (const char* key : path) {
    if (!at->is_object()) return missing;
    const auto it = at->find(key);
    if (it == at->end()) return missing;
    at = &*it;
  }
  return *at;
}

bool non_empty_object(const fs::path& p) {
  const auto j = read_json(p);
  return j.is_object() && !j.empty();
}

// $VAR (expanded as the agent would) or HOME/`fallback`; empty when neither is known.
fs::path dir_from(const probe_context& c, const char* var, const char* fallback) {
  if (auto v = env_value(c.env, var); !v.empty()) return expand(v, c.env);
  const auto home = env_value(c.env, "HOME");
  return home.empty() ? fs::path{} : fs::path(home) / fallback;
}

bool file_has_line_starting(const fs::path& p, std::string_view prefix) {
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);)
    if (trim(line).rfind(prefix, 0) == 0) return true;
  return false;
}

std::string no_older_node_alternative(const version&) { return {}; }

// ---- pi ------------------------------------------------------------------------------------------------------------

constexpr version node_for_pi_1x{22, 19, 0};
constexpr version node_for_pi_0x{20, 6, 0};

std::vector<feature> pi_features(const std::optional<version>& v) {
  return {make_feature(v, "json_mode", std::nullopt, "--mode json -p: one-shot run with a JSON event stream"),
          make_feature(v, "session_id", pi_versions::session_id_flag, "--session-id ID: resume or create a session by id"),
          make_feature(v, "end_of_options", pi_versions::double_dash,
                       "-- before the prompt: a prompt starting with '-' stays a prompt"),
          make_feature(v, "thinking_max", pi_versions::thinking_max, "--thinking max"),
          make_feature(v, "delta_json", pi_versions::delta_json,
                       "delta-only message_update records (no quadratic snapshots)")};
}

std::optional<version> pi_node(const std::optional<version>& v) {
  if (!v) return std::nullopt;  // unknown: the check then only hints (see probe.cpp)
  return v->major >= 1 ? node_for_pi_1x : node_for_pi_0x;
}

std::string pi_older_node_alternative(const version& required) {
  return required.major >= 22 ? "or use @mariozechner/pi-coding-agent@0.73.1, which runs on Node.js >= 20.6" : "";
}

// What pi's own key lookup reads (pi-ai env-api-keys.ts); any of them set means some provider can authenticate.
constexpr std::array<const char*, 23> pi_credential_variables{
    "ANTHROPIC_API_KEY", "ANTHROPIC_OAUTH_TOKEN", "OPENAI_API_KEY",     "AZURE_OPENAI_API_KEY",
    "GEMINI_API_KEY",    "GROQ_API_KEY",          "CEREBRAS_API_KEY",   "XAI_API_KEY",
    "OPENROUTER_API_KEY", "AI_GATEWAY_API_KEY",   "ZAI_API_KEY",        "MISTRAL_API_KEY",
    "MINIMAX_API_KEY",   "MINIMAX_CN_API_KEY",    "HF_TOKEN",           "DEEPSEEK_API_KEY",
    "MOONSHOT_API_KEY",  "OPENCODE_API_KEY",      "KIMI_API_KEY",       "COPILOT_GITHUB_TOKEN",
    "AWS_PROFILE",       "AWS_BEARER_TOKEN_BEDROCK", "AWS_ACCESS_KEY_ID"};

// A key pi's lookup reads, or pi's own auth.json / models.json with a provider.
void pi_configuration(const probe_context& c, probe_result& r) {
  for (const char* var : pi_credential_variables)
    if (!env_value(c.env, var).empty()) return;
  const fs::path dir = dir_from(c, "PI_CODING_AGENT_DIR", ".pi/agent");
  if (dir.empty()) return;  // cannot tell
  if (non_empty_object(dir / "auth.json")) return;
  if (const auto models = read_json(dir / "models.json");
      models.is_object() && models.contains("providers") && models["providers"].is_object() &&
      !models["providers"].empty())
    return;
  r.hints.push_back(
      "no credentials found: no provider API key in the environment (ANTHROPIC_API_KEY, OPENAI_API_KEY, "
      "GEMINI_API_KEY, …) and no auth.json or models.json with a provider in " + dir.string() +
      "; set a key, run `pi` and `/login`, or add a provider to " + (dir / "models.json").string());
}

// ---- Claude Code ---------------------------------------------------------------------------------------------------

std::vector<feature> claude_features(const std::optional<version>& v) {
  return {make_feature(v, "stream_json", std::nullopt, "-p --output-format stream-json --verbose: one JSON event per line"),
          make_feature(v, "partial_messages", std::nullopt, "--include-partial-messages: text as it is generated"),
          make_feature(v, "end_of_options", std::nullopt, "-- before the prompt: a prompt starting with '-' stays a prompt"),
          make_feature(v, "permission_mode", std::nullopt, "--permission-mode MODE")};
}

// Claude Code's npm package was a Node.js script (cli.js) before it shipped a native binary.
std::optional<version> claude_node(const std::optional<version>&) { return version{18, 0, 0}; }

// The variables Claude Code authenticates with in -p mode (code.claude.com env-vars), its credentials file, and the
// settings that supply a key (apiKeyHelper, or the key in settings' `env`).
void claude_configuration(const probe_context& c, probe_result& r) {
  if (any_set(c, {"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK",
                  "CLAUDE_CODE_USE_VERTEX"}))
    return;
  const fs::path dir = dir_from(c, "CLAUDE_CONFIG_DIR", ".claude");
  if (dir.empty()) return;
  if (non_empty_object(dir / ".credentials.json")) return;
  if (const auto s = read_json(dir / "settings.json"); s.is_object()) {
    if (s.contains("apiKeyHelper") && s["apiKeyHelper"].is_string()) return;
    if (s.contains("env") && s["env"].is_object() &&
        (s["env"].contains("ANTHROPIC_API_KEY") || s["env"].contains("ANTHROPIC_AUTH_TOKEN")))
      return;
  }
  r.hints.push_back("no credentials found: ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN and CLAUDE_CODE_OAUTH_TOKEN are "
                    "unset and " + (dir / ".credentials.json").string() +
                    " is missing; set a key, or run `claude` once and log in");
}

// ---- Codex ---------------------------------------------------------------------------------------------------------

std::vector<feature> codex_features(const std::optional<version>& v) {
  return {make_feature(v, "exec_json", std::nullopt, "codex exec --json: one JSON event per line"),
          make_feature(v, "skip_git_repo_check", std::nullopt,
                       "--skip-git-repo-check: run outside a git repository (codex refuses otherwise)"),
          make_feature(v, "ephemeral", std::nullopt, "--ephemeral: keep no session files"),
          make_feature(v, "exec_resume", std::nullopt, "codex exec resume SESSION_ID: continue a session")};
}

// @openai/codex's launcher (bin/codex.js) declares engines node >= 16.
std::optional<version> codex_node(const std::optional<version>&) { return version{16, 0, 0}; }

// Codex reads OPENAI_API_KEY / CODEX_API_KEY, its login in $CODEX_HOME/auth.json, or a provider configured in
// config.toml (model_providers, each naming its own key variable).
void codex_configuration(const probe_context& c, probe_result& r) {
  if (any_set(c, {"OPENAI_API_KEY", "CODEX_API_KEY"})) return;
  const fs::path dir = dir_from(c, "CODEX_HOME", ".codex");
  if (dir.empty()) return;
  if (non_empty_object(dir / "auth.json")) return;
  if (file_has_line_starting(dir / "config.toml", "[model_providers.")) return;
  r.hints.push_back("no credentials found: OPENAI_API_KEY and CODEX_API_KEY are unset, " +
                    (dir / "auth.json").string() + " is missing and " + (dir / "config.toml").string() +
                    " configures no model provider; set a key or run `codex login`");
}

// ---- Gemini CLI ----------------------------------------------------------------------------------------------------

std::vector<feature> gemini_features(const std::optional<version>& v) {
  return {make_feature(v, "stream_json", std::nullopt, "--output-format stream-json: one JSON event per line"),
          make_feature(v, "skip_trust", std::nullopt, "--skip-trust: trust the working directory for this run"),
          make_feature(v, "approval_mode", std::nullopt, "--approval-mode MODE")};
}

// @google/gemini-cli declares engines node >= 20.
std::optional<version> gemini_node(const std::optional<version>&) { return version{20, 0, 0}; }

// Gemini's configuration directory: $GEMINI_CLI_HOME/.gemini, else ~/.gemini (its homedir()).
fs::path gemini_dir(const probe_context& c) {
  auto home = env_value(c.env, "GEMINI_CLI_HOME");
  if (home.empty()) home = env_value(c.env, "HOME");
  return home.empty() ? fs::path{} : fs::path(expand(home, c.env)) / ".gemini";
}

fs::path real_or_same(const fs::path& p) {
  std::error_code ec;
  auto r = fs::canonical(p, ec);
  return ec ? absolute_or_same(p) : r;
}

bool is_within(const fs::path& parent, const fs::path& child) {
  auto pi = parent.begin();
  auto ci = child.begin();
  for (; pi != parent.end(); ++pi, ++ci) {
    if (pi->empty()) continue;  // a trailing '/'
    if (ci == child.end() || *pi != *ci) return false;
  }
  return true;
}

// gemini-cli trustedFolders: GEMINI_CLI_TRUST_WORKSPACE / GEMINI_RESTRICTED_MODE decide first; then, when
// security.folderTrust.enabled (default true), the longest rule of trustedFolders.json whose folder (TRUST_PARENT: its
// parent) contains the working directory. No rule = not trusted: headless gemini exits 55 (FatalUntrustedWorkspaceError).
void gemini_trust(const probe_context& c, const fs::path& dir, probe_result& r) {
  const auto trust_env = env_value(c.env, "GEMINI_CLI_TRUST_WORKSPACE");
  if (trust_env == "true") return;
  const bool forced_untrusted = trust_env == "false" || env_value(c.env, "GEMINI_RESTRICTED_MODE") == "true";
  if (!forced_untrusted) {
    const auto settings = read_json(dir / "settings.json");
    const json& t = member_at(settings, {"security", "folderTrust", "enabled"});
    if (t.is_boolean() && !t.get<bool>()) return;
  }
  std::error_code ec;
  const fs::path cwd = c.options.working_directory.empty() ? fs::current_path(ec) : c.options.working_directory;
  const fs::path where = real_or_same(cwd);
  fs::path rules_file = env_value(c.env, "GEMINI_CLI_TRUSTED_FOLDERS_PATH");
  if (rules_file.empty()) rules_file = dir / "trustedFolders.json";
  std::optional<bool> trusted;
  if (!forced_untrusted) {
    const auto rules = read_json(rules_file);
    std::size_t longest = 0;
    if (rules.is_object()) {
      for (const auto& [rule, level] : rules.items()) {
        if (!level.is_string()) continue;
        const auto l = level.get<std::string>();
        const fs::path folder = l == "TRUST_PARENT" ? fs::path(rule).parent_path() : fs::path(rule);
        if (!is_within(real_or_same(folder), where) || (trusted && rule.size() <= longest)) continue;
        if (l == "TRUST_FOLDER" || l == "TRUST_PARENT") trusted = true;
        else if (l == "DO_NOT_TRUST") trusted = false;
        else continue;
        longest = rule.size();
      }
    }
  }
  if (trusted.value_or(false)) return;
  r.hints.push_back(where.string() + " is not a trusted folder for gemini (" +
                    (forced_untrusted ? std::string("GEMINI_CLI_TRUST_WORKSPACE=false or GEMINI_RESTRICTED_MODE=true")
                                      : "no TRUST_FOLDER rule for it in " + rules_file.string()) +
                    "): headless gemini exits 55; pass --skip-trust (gemini_options::skip_trust), set "
                    "GEMINI_CLI_TRUST_WORKSPACE=true, or trust the folder in gemini once");
}

// Gemini's non-interactive auth: an API key, Vertex AI or Code Assist switches, a cached Google login, or an auth type
// chosen in settings.json; ~/.gemini/.env is loaded like the environment.
void gemini_configuration(const probe_context& c, probe_result& r) {
  const fs::path dir = gemini_dir(c);
  bool have_credentials = any_set(c, {"GEMINI_API_KEY", "GOOGLE_API_KEY"}) ||
                          env_value(c.env, "GOOGLE_GENAI_USE_VERTEXAI") == "true" ||
                          env_value(c.env, "GOOGLE_GENAI_USE_GCA") == "true";
  if (!have_credentials && !dir.empty()) {
    const auto settings = read_json(dir / "settings.json");
    have_credentials =
        non_empty_object(dir / "oauth_creds.json") || file_has_line_starting(dir / ".env", "GEMINI_API_KEY=") ||
        member_at(settings, {"security", "auth", "selectedType"}).is_string();
  }
  if (!have_credentials && !dir.empty())
    r.hints.push_back("no credentials found: GEMINI_API_KEY and GOOGLE_API_KEY are unset, Vertex AI is not selected "
                      "and " + dir.string() + " holds no login (oauth_creds.json) nor an auth type in settings.json; "
                      "set a key or run `gemini` once and log in");
  if (!dir.empty()) gemini_trust(c, dir, r);
}

// ---- OpenCode ------------------------------------------------------------------------------------------------------

std::vector<feature> opencode_features(const std::optional<version>& v) {
  return {make_feature(v, "json_format", std::nullopt, "opencode run --format json: one JSON event per line"),
          make_feature(v, "thinking", std::nullopt, "--thinking: reasoning parts in the stream"),
          make_feature(v, "session", std::nullopt, "--session ID: continue a session")};
}

std::optional<version> opencode_node(const std::optional<version>&) { return std::nullopt; }

bool opencode_config_has_provider(const fs::path& p) {
  const auto j = read_json(p);
  return j.is_object() && j.contains("provider") && j["provider"].is_object() && !j["provider"].empty();
}

// OpenCode authenticates from provider keys in the environment (models.dev lists each provider's variables; the common
// ones here), `opencode auth login` (auth.json in its data directory), or providers in its config.
void opencode_configuration(const probe_context& c, probe_result& r) {
  if (any_set(c, {"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY",
                  "OPENROUTER_API_KEY", "GROQ_API_KEY", "XAI_API_KEY", "DEEPSEEK_API_KEY", "MISTRAL_API_KEY",
                  "OPENCODE_API_KEY", "AZURE_API_KEY", "AWS_ACCESS_KEY_ID", "AWS_PROFILE", "GITHUB_TOKEN",
                  "OPENCODE_CONFIG_CONTENT"}))
    return;
  const fs::path data = dir_from(c, "XDG_DATA_HOME", ".local/share");
  if (!data.empty() && non_empty_object(data / "opencode" / "auth.json")) return;
  if (auto file = env_value(c.env, "OPENCODE_CONFIG"); !file.empty() && opencode_config_has_provider(expand(file, c.env)))
    return;
  const fs::path config = dir_from(c, "XDG_CONFIG_HOME", ".config");
  if (config.empty()) return;
  for (const char* name : {"opencode.json", "opencode.jsonc", "config.json"})
    if (opencode_config_has_provider(config / "opencode" / name)) return;
  r.hints.push_back("no credentials found: no provider API key in the environment (ANTHROPIC_API_KEY, OPENAI_API_KEY, "
                    "…), no " + (data.empty() ? fs::path("auth.json") : data / "opencode" / "auth.json").string() +
                    " and no provider in " + (config / "opencode" / "opencode.json").string() +
                    "; set a key or run `opencode auth login`");
}

// ---- the table -----------------------------------------------------------------------------------------------------

const agent_spec specs[] = {
    {agent_kind::pi, "pi", "pi-coding-agent",
     "install pi: `npm install -g @earendil-works/pi-coding-agent` (needs Node.js >= 22.19), or "
     "`npm install -g @mariozechner/pi-coding-agent@0.73.1` on older Node.js; or give its path",
     pi_features, version{0, 73, 1}, version{1, 6, 0}, "flags are chosen as for 1.6.0", pi_node,
     pi_older_node_alternative, pi_configuration},
    {agent_kind::claude, "claude", "@anthropic-ai/claude-code",
     "install Claude Code: `npm install -g @anthropic-ai/claude-code`; or give its path", claude_features,
     version{2, 1, 332}, version{2, 1, 332}, "its event format may differ", claude_node, no_older_node_alternative,
     claude_configuration},
    {agent_kind::codex, "codex", "@openai/codex", "install Codex: `npm install -g @openai/codex`; or give its path",
     codex_features, version{0, 171, 0}, version{0, 171, 0}, "its event format may differ", codex_node,
     no_older_node_alternative, codex_configuration},
    {agent_kind::gemini, "gemini", "@google/gemini-cli",
     "install Gemini CLI: `npm install -g @google/gemini-cli` (needs Node.js >= 20); or give its path", gemini_features,
     version{0, 61, 0}, version{0, 61, 0}, "its event format may differ", gemini_node, no_older_node_alternative,
     gemini_configuration},
    {agent_kind::opencode, "opencode", "opencode-ai", "install OpenCode: `npm install -g opencode-ai`; or give its path",
     opencode_features, version{1, 18, 33}, version{1, 18, 33}, "its event format may differ (OpenCode 2 renames events)",
     opencode_node, no_older_node_alternative, opencode_configuration},
};

}  // namespace

const agent_spec& spec_for(agent_kind agent) {
  for (const auto& s : specs)
    if (s.kind == agent) return s;
  return specs[0];  // unreachable: every agent_kind has a spec
}

}  // namespace agenthost::providers::detail
