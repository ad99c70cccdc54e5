// Discovery of Claude Code, Codex, Gemini CLI and OpenCode through the generic probe(): names, the version command,
// default executable names and install hints, version range hints, Node.js requirements, credential hints,
// probe_options_for()/with_probe(), the timeout (cancellation: test_probe.cpp, the same engine), and the real installed
// CLIs. Gemini's folder trust: test_gemini_trust.cpp.
#include "probe_test_util.hpp"


#include <algorithm>
#include <iostream>

using namespace agenthost;
using namespace agenthost::test;
using providers::agent_kind;
using providers::probe_result;
using providers::version;

namespace {

bool credentials_hint(const probe_result& r) {
  return std::any_of(r.hints.begin(), r.hints.end(),
                     [](const std::string& h) { return h.rfind("no credentials found", 0) == 0; });
}

std::vector<std::string> feature_names(const probe_result& r) {
  std::vector<std::string> names;
  for (const auto& f : r.features) names.push_back(f.name);
  std::sort(names.begin(), names.end());
  return names;
}

// What each agent's probe must report for its real `--version` output.
struct agent_case {
  agent_kind kind;
  std::string name;
  std::string version_line;  // what the real CLI prints
  version pinned;            // the version agenthost was checked against
  std::vector<std::string> features;
  std::string npm_install;
  std::string older_line;
  std::string newer_line;
};

// For gtest (and ctest's test names): the agent's name, not the object's bytes.
void PrintTo(const agent_case& c, std::ostream* os) { *os << c.name; }

const std::vector<agent_case>& agent_cases() {
  static const std::vector<agent_case> cases = {
      {agent_kind::claude, "claude", "2.1.332 (Claude Code)", {2, 1, 332},
       {"end_of_options", "partial_messages", "permission_mode", "stream_json"},
       "npm install -g @anthropic-ai/claude-code", "2.0.14 (Claude Code)", "3.0.0 (Claude Code)"},
      {agent_kind::codex, "codex", "codex-cli 0.171.0", {0, 171, 0},
       {"ephemeral", "exec_json", "exec_resume", "skip_git_repo_check"}, "npm install -g @openai/codex",
       "codex-cli 0.98.2", "codex-cli 1.0.0"},
      {agent_kind::gemini, "gemini", "0.61.0", {0, 61, 0}, {"approval_mode", "skip_trust", "stream_json"},
       "npm install -g @google/gemini-cli", "0.45.1", "1.0.0"},
      {agent_kind::opencode, "opencode", "1.18.33", {1, 18, 33}, {"json_format", "session", "thinking"},
       "npm install -g opencode-ai", "1.2.0", "2.0.1"},
  };
  return cases;
}

TEST(AgentKind, NamesRoundTrip) {
  const std::vector<std::string> expected = {"pi", "claude", "codex", "gemini", "opencode"};
  ASSERT_EQ(providers::all_agent_kinds.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto kind = providers::all_agent_kinds[i];
    EXPECT_EQ(providers::to_string(kind), expected[i]);
    EXPECT_EQ(providers::agent_kind_from_string(expected[i]), kind);
  }
  EXPECT_EQ(providers::to_string(agent_kind::claude), "claude");
  EXPECT_EQ(providers::to_string(agent_kind::opencode), "opencode");
  for (const char* bad : {"claude-code", "", "Claude", "gemini-cli", "codex "})
    EXPECT_FALSE(providers::agent_kind_from_string(bad).has_value()) << "'" << bad << "'";
}

class ProbeAgent : public probe_fixture, public ::testing::WithParamInterface<agent_case> {};

TEST_P(ProbeAgent, RealVersionOutputIsUsableWithEveryFeatureAndNoCredentialsIsAHint) {
  const auto& c = GetParam();
  const auto exe = fake_agent(c.name, c.version_line);
  const auto r = probe(c.kind, options(exe));
  EXPECT_EQ(r.agent, c.name);
  EXPECT_TRUE(r.available) << joined(r.problems);
  EXPECT_TRUE(r.problems.empty()) << joined(r.problems);
  EXPECT_EQ(r.executable, exe);
  EXPECT_EQ(r.version, c.pinned);
  EXPECT_EQ(r.version_text, c.version_line);
  EXPECT_FALSE(r.runtime.has_value()) << "a /bin/sh script is not a Node.js program";
  EXPECT_EQ(feature_names(r), c.features);
  for (const auto& f : r.features) EXPECT_TRUE(f.supported) << f.name;
  for (const auto& f : c.features) EXPECT_TRUE(providers::supports(r, f)) << f;
  EXPECT_FALSE(contains(r.hints, "older than")) << joined(r.hints);
  EXPECT_FALSE(contains(r.hints, "newer than")) << joined(r.hints);
  EXPECT_TRUE(credentials_hint(r)) << "no credentials: a hint, not a problem\n" << joined(r.hints);
  EXPECT_EQ(providers::to_json(r)["agent"], c.name);
}

TEST_P(ProbeAgent, GarbageVersionMakesItUnusable) {
  const auto& c = GetParam();
  const auto exe = fake_agent(c.name, "hello from something else");
  const auto r = probe(c.kind, options(exe));
  EXPECT_FALSE(r.available);
  EXPECT_FALSE(r.version.has_value());
  EXPECT_EQ(r.version_text, "hello from something else");
  EXPECT_TRUE(contains(r.problems, "printed no version number")) << joined(r.problems);
  ASSERT_FALSE(r.features.empty());
  for (const auto& f : r.features) EXPECT_FALSE(f.supported) << f.name;
}

TEST_P(ProbeAgent, DefaultNameIsFoundOnPathAndAVersionOnStderrCounts) {
  const auto& c = GetParam();
  const auto exe = write(bin / c.name, "#!/bin/sh\necho '" + c.version_line + "' >&2\n");
  const auto r = probe(c.kind, options(fs::path{}));
  EXPECT_TRUE(r.available) << joined(r.problems);
  EXPECT_EQ(r.executable, exe);
  EXPECT_EQ(r.version, c.pinned);
}

TEST_P(ProbeAgent, DefaultNameFallsBackToTheNpmGlobalBin) {
  const auto& c = GetParam();
  const auto exe = fake_agent(c.name, c.version_line, 0, home / ".npm-global" / "bin" / c.name);
  const auto r = probe(c.kind, options(fs::path{}, bin.string()));
  EXPECT_TRUE(r.available) << joined(r.problems);
  EXPECT_EQ(r.executable, exe);
}

TEST_P(ProbeAgent, MissingSaysHowToInstall) {
  const auto& c = GetParam();
  fake_pi("1.6.0");  // another agent on PATH does not count
  const auto r = probe(c.kind, options(fs::path{}, bin.string()));
  EXPECT_EQ(r.agent, c.name);
  EXPECT_FALSE(r.available);
  EXPECT_TRUE(r.executable.empty());
  EXPECT_TRUE(contains(r.problems, "`" + c.name + "` not found on PATH")) << joined(r.problems);
  EXPECT_TRUE(contains(r.hints, c.npm_install)) << joined(r.hints);
  EXPECT_FALSE(r.features.empty());
}

TEST_P(ProbeAgent, OlderOrNewerMajorVersionIsAHintNotAProblem) {
  const auto& c = GetParam();
  auto r = probe(c.kind, options(fake_agent(c.name, c.older_line)));
  EXPECT_TRUE(r.available) << joined(r.problems);
  EXPECT_TRUE(contains(r.hints, "older than " + c.pinned.to_string())) << joined(r.hints);
  EXPECT_FALSE(contains(r.hints, "newer than")) << joined(r.hints);

  r = probe(c.kind, options(fake_agent(c.name, c.newer_line)));
  EXPECT_TRUE(r.available) << joined(r.problems);
  EXPECT_TRUE(contains(r.hints, "newer than any version agenthost knows")) << joined(r.hints);
  EXPECT_FALSE(contains(r.hints, "older than")) << joined(r.hints);
}

INSTANTIATE_TEST_SUITE_P(Agents, ProbeAgent, ::testing::ValuesIn(agent_cases()),
                         [](const ::testing::TestParamInfo<agent_case>& i) { return i.param.name; });

class ProbeAgents : public probe_fixture {
 protected:
  // An npm install: bin/gemini -> ../lib/node_modules/@google/gemini-cli/bundle/gemini.js.
  void npm_install_gemini(const std::string& package_json) {
    const auto pkg = dir / "lib" / "node_modules" / "@google" / "gemini-cli";
    write(pkg / "package.json", package_json, 0644);
    write(pkg / "bundle" / "gemini.js", "#!/usr/bin/env node\n");
    fs::create_symlink("../lib/node_modules/@google/gemini-cli/bundle/gemini.js", bin / "gemini");
  }
};

// --- Node.js ----------------------------------------------------------------------------------------------------

TEST_F(ProbeAgents, CodexNodeScriptNeedsNode16) {
  const auto exe = write(bin / "codex", "#!/usr/bin/env node\nimport './codex.js'\n");
  fake_node(bin / "node", "v16.20.2", "codex-cli 0.171.0");
  auto r = probe(agent_kind::codex, options(fs::path{}));
  EXPECT_TRUE(r.available) << joined(r.problems);
  EXPECT_EQ(r.executable, exe);
  EXPECT_EQ(r.version, (version{0, 171, 0}));
  ASSERT_TRUE(r.runtime.has_value());
  EXPECT_EQ(r.runtime->name, "node");
  EXPECT_EQ(r.runtime->executable, bin / "node");
  EXPECT_EQ(r.runtime->version, (version{16, 20, 2}));
  EXPECT_EQ(r.runtime->required, (version{16, 0, 0}));

  fake_node(bin / "node", "v14.21.3", "codex-cli 0.171.0");
  r = probe(agent_kind::codex, options(fs::path{}));
  EXPECT_FALSE(r.available);
  EXPECT_TRUE(contains(r.problems, "needs Node.js >= 16.0.0")) << joined(r.problems);
}

TEST_F(ProbeAgents, GeminiOnNode18IsUnusableOnNode22Usable) {
  write(bin / "gemini", "#!/usr/bin/env node\n");
  fake_node(bin / "node", "v18.20.0", "0.61.0");
  auto r = probe(agent_kind::gemini, options(fs::path{}));
  EXPECT_FALSE(r.available);
  ASSERT_TRUE(r.runtime.has_value());
  EXPECT_EQ(r.runtime->name, "node");
  EXPECT_EQ(r.runtime->required, (version{20, 0, 0}));
  EXPECT_TRUE(contains(r.problems, "needs Node.js >= 20.0.0")) << joined(r.problems);

  fake_node(bin / "node", "v22.3.0", "0.61.0");
  r = probe(agent_kind::gemini, options(fs::path{}));
  EXPECT_TRUE(r.available) << joined(r.problems);
  ASSERT_TRUE(r.runtime.has_value());
  EXPECT_EQ(r.runtime->version, (version{22, 3, 0}));
  EXPECT_EQ(r.version, (version{0, 61, 0}));
}

TEST_F(ProbeAgents, GeminiPackageJsonEnginesIsTheRequirement) {
  npm_install_gemini(R"({"name": "@google/gemini-cli", "version": "0.61.0", "engines": {"node": ">=20.19.0"}})");
  fake_node(bin / "node", "v20.11.0", "0.61.0");
  auto r = probe(agent_kind::gemini, options(fs::path{}));
  EXPECT_FALSE(r.available);
  ASSERT_TRUE(r.runtime.has_value());
  EXPECT_EQ(r.runtime->required, (version{20, 19, 0}));
  EXPECT_TRUE(contains(r.problems, "needs Node.js >= 20.19.0")) << joined(r.problems);

  fake_node(bin / "node", "v20.19.1", "0.61.0");
  r = probe(agent_kind::gemini, options(fs::path{}));
  EXPECT_TRUE(r.available) << joined(r.problems);
}

TEST_F(ProbeAgents, PackageJsonOfAnotherPackageIsIgnored) {
  npm_install_gemini(R"({"name": "something-else", "version": "9.9.9", "engines": {"node": ">=99.0.0"}})");
  fake_node(bin / "node", "v20.11.0", "0.61.0");
  const auto r = probe(agent_kind::gemini, options(fs::path{}));
  EXPECT_TRUE(r.available) << joined(r.problems);
  ASSERT_TRUE(r.runtime.has_value());
  EXPECT_EQ(r.runtime->required, (version{20, 0, 0}));
}

TEST_F(ProbeAgents, PackageJsonWithANameThatIsNotAStringIsIgnored) {
  npm_install_gemini(R"({"name": null, "version": "9.9.9", "engines": {"node": ">=99.0.0"}})");  // j.value() threw
  fake_node(bin / "node", "v20.11.0", "0.61.0");
  const auto r = probe(agent_kind::gemini, options(fs::path{}));
  EXPECT_TRUE(r.available) << joined(r.problems);
  ASSERT_TRUE(r.runtime.has_value());
  EXPECT_EQ(r.runtime->required, (version{20, 0, 0}));
}

// --- Credentials ------------------------------------------------------------------------------------------------

class Credentials : public probe_fixture {
 protected:
  // Whether a probe of `agent` (its fake on PATH) with `extra` in its environment hints that it has no credentials.
  bool hinted(agent_kind agent, const std::map<std::string, std::string>& extra = {}) {
    const std::string name(providers::to_string(agent));
    for (const auto& c : agent_cases())
      if (c.kind == agent && !fs::exists(bin / name)) fake_agent(name, c.version_line);
    auto o = options(fs::path{});
    for (const auto& [k, v] : extra) o.env.set[k] = v;
    const auto r = probe(agent, o);
    EXPECT_TRUE(r.available) << name << ": hints never make an agent unusable\n" << joined(r.problems);
    return credentials_hint(r);
  }
};

TEST_F(Credentials, Claude) {
  const auto a = agent_kind::claude;
  EXPECT_TRUE(hinted(a));
  for (const char* var : {"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN",
                          "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"})
    EXPECT_FALSE(hinted(a, {{var, "1"}})) << var;
  EXPECT_TRUE(hinted(a, {{"OPENAI_API_KEY", "sk"}})) << "another vendor's key is no Claude credential";

  write(home / ".claude" / ".credentials.json", "{}", 0600);
  EXPECT_TRUE(hinted(a)) << "an empty object";
  write(home / ".claude" / ".credentials.json", R"({"claudeAiOauth": {"accessToken": "t"}})", 0600);
  EXPECT_FALSE(hinted(a));
  fs::remove(home / ".claude" / ".credentials.json");

  const auto config_dir = dir / "claude-config";
  fs::create_directories(config_dir);
  write(home / ".claude" / ".credentials.json", R"({"claudeAiOauth": {"accessToken": "t"}})", 0600);
  EXPECT_TRUE(hinted(a, {{"CLAUDE_CONFIG_DIR", config_dir.string()}})) << "$CLAUDE_CONFIG_DIR replaces ~/.claude";
  fs::remove(home / ".claude" / ".credentials.json");
  write(config_dir / ".credentials.json", R"({"claudeAiOauth": {"accessToken": "t"}})", 0600);
  EXPECT_FALSE(hinted(a, {{"CLAUDE_CONFIG_DIR", config_dir.string()}}));

  write(home / ".claude" / "settings.json", R"({"env": {"OTHER": "x"}, "model": "sonnet"})", 0644);
  EXPECT_TRUE(hinted(a));
  write(home / ".claude" / "settings.json", R"({"apiKeyHelper": "/usr/local/bin/get-key"})", 0644);
  EXPECT_FALSE(hinted(a));
  write(home / ".claude" / "settings.json", R"({"env": {"ANTHROPIC_API_KEY": "sk"}})", 0644);
  EXPECT_FALSE(hinted(a));
  write(home / ".claude" / "settings.json", R"({"env": {"ANTHROPIC_AUTH_TOKEN": "t"}})", 0644);
  EXPECT_FALSE(hinted(a));
}

TEST_F(Credentials, Codex) {
  const auto a = agent_kind::codex;
  EXPECT_TRUE(hinted(a));
  EXPECT_FALSE(hinted(a, {{"OPENAI_API_KEY", "sk"}}));
  EXPECT_FALSE(hinted(a, {{"CODEX_API_KEY", "sk"}}));
  EXPECT_TRUE(hinted(a, {{"ANTHROPIC_API_KEY", "sk"}}));

  write(home / ".codex" / "auth.json", "{}", 0600);
  EXPECT_TRUE(hinted(a)) << "an empty object";
  write(home / ".codex" / "auth.json", R"({"OPENAI_API_KEY": "sk"})", 0600);
  EXPECT_FALSE(hinted(a));
  fs::remove(home / ".codex" / "auth.json");

  write(home / ".codex" / "config.toml", "model = \"o3\"\n# [model_providers.x]\n", 0644);
  EXPECT_TRUE(hinted(a));
  write(home / ".codex" / "config.toml", "model = \"m\"\n[model_providers.local]\nbase_url = \"http://x/v1\"\n", 0644);
  EXPECT_FALSE(hinted(a));
  fs::remove(home / ".codex" / "config.toml");

  const auto codex_home = dir / "codex-home";
  write(codex_home / "auth.json", R"({"tokens": {"id_token": "t"}})", 0600);
  EXPECT_FALSE(hinted(a, {{"CODEX_HOME", codex_home.string()}}));
  fs::remove(codex_home / "auth.json");
  write(codex_home / "config.toml", "[model_providers.mock]\nname = \"m\"\n", 0644);
  EXPECT_FALSE(hinted(a, {{"CODEX_HOME", codex_home.string()}}));
  EXPECT_TRUE(hinted(a)) << "$CODEX_HOME's config is not ~/.codex's";
  fs::remove(codex_home / "config.toml");
  write(home / ".codex" / "auth.json", R"({"OPENAI_API_KEY": "sk"})", 0600);
  EXPECT_TRUE(hinted(a, {{"CODEX_HOME", codex_home.string()}})) << "$CODEX_HOME replaces ~/.codex";
}

TEST_F(Credentials, Gemini) {
  const auto a = agent_kind::gemini;
  EXPECT_TRUE(hinted(a));
  EXPECT_FALSE(hinted(a, {{"GEMINI_API_KEY", "k"}}));
  EXPECT_FALSE(hinted(a, {{"GOOGLE_API_KEY", "k"}}));
  EXPECT_FALSE(hinted(a, {{"GOOGLE_GENAI_USE_VERTEXAI", "true"}}));
  EXPECT_FALSE(hinted(a, {{"GOOGLE_GENAI_USE_GCA", "true"}}));
  EXPECT_TRUE(hinted(a, {{"GOOGLE_GENAI_USE_VERTEXAI", "false"}}));

  const auto g = home / ".gemini";
  write(g / "oauth_creds.json", "{}", 0600);
  EXPECT_TRUE(hinted(a)) << "an empty object";
  write(g / "oauth_creds.json", R"({"access_token": "t", "refresh_token": "r"})", 0600);
  EXPECT_FALSE(hinted(a));
  fs::remove(g / "oauth_creds.json");

  write(g / "settings.json", R"({"security": {"folderTrust": {"enabled": true}}})", 0644);
  EXPECT_TRUE(hinted(a));
  write(g / "settings.json", R"({"security": {"auth": {"selectedType": "gemini-api-key"}}})", 0644);
  EXPECT_FALSE(hinted(a));
  for (const char* odd : {R"({"security": []})", R"({"security": {"auth": 7}})", "[]", "null"}) {
    write(g / "settings.json", odd, 0644);  // a file of another shape: no auth type, and no exception
    EXPECT_TRUE(hinted(a)) << odd;
  }
  fs::remove(g / "settings.json");

  write(g / ".env", "GOOGLE_CLOUD_PROJECT=p\n", 0600);
  EXPECT_TRUE(hinted(a));
  write(g / ".env", "GOOGLE_CLOUD_PROJECT=p\nGEMINI_API_KEY=k\n", 0600);
  EXPECT_FALSE(hinted(a));
  fs::remove(g / ".env");

  const auto gemini_home = dir / "gemini-home";
  write(gemini_home / ".gemini" / "oauth_creds.json", R"({"access_token": "t"})", 0600);
  EXPECT_FALSE(hinted(a, {{"GEMINI_CLI_HOME", gemini_home.string()}}));
  EXPECT_TRUE(hinted(a)) << "GEMINI_CLI_HOME's credentials are not HOME's";
  fs::remove(gemini_home / ".gemini" / "oauth_creds.json");
  write(g / "oauth_creds.json", R"({"access_token": "t"})", 0600);
  EXPECT_TRUE(hinted(a, {{"GEMINI_CLI_HOME", gemini_home.string()}})) << "$GEMINI_CLI_HOME replaces HOME";
}

TEST_F(Credentials, Opencode) {
  const auto a = agent_kind::opencode;
  EXPECT_TRUE(hinted(a));
  for (const char* var : {"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY",
                          "OPENROUTER_API_KEY"})
    EXPECT_FALSE(hinted(a, {{var, "k"}})) << var;
  EXPECT_TRUE(hinted(a, {{"SOME_UNRELATED_VAR", "k"}}));
  EXPECT_FALSE(hinted(a, {{"OPENCODE_CONFIG_CONTENT", R"({"provider": {"x": {}}})"}}));

  const auto auth = home / ".local" / "share" / "opencode" / "auth.json";
  write(auth, "{}", 0600);
  EXPECT_TRUE(hinted(a)) << "an empty object";
  write(auth, R"({"anthropic": {"type": "api", "key": "sk"}})", 0600);
  EXPECT_FALSE(hinted(a));
  fs::remove(auth);
  write(dir / "xdg-data" / "opencode" / "auth.json", R"({"openai": {"type": "oauth"}})", 0600);
  EXPECT_FALSE(hinted(a, {{"XDG_DATA_HOME", (dir / "xdg-data").string()}}));

  const auto cfg = home / ".config" / "opencode";
  write(cfg / "opencode.json", R"({"provider": {}, "model": "x/y"})", 0644);
  EXPECT_TRUE(hinted(a)) << "an empty provider object";
  const std::string with_provider =
      R"({"provider": {"local": {"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": "http://x/v1"}}}})";
  write(cfg / "opencode.json", with_provider, 0644);
  EXPECT_FALSE(hinted(a));
  fs::remove(cfg / "opencode.json");
  write(cfg / "opencode.jsonc", with_provider, 0644);
  EXPECT_FALSE(hinted(a));
  fs::remove(cfg / "opencode.jsonc");

  write(dir / "xdg-config" / "opencode" / "opencode.json", with_provider, 0644);
  EXPECT_FALSE(hinted(a, {{"XDG_CONFIG_HOME", (dir / "xdg-config").string()}}));
  write(dir / "custom.json", with_provider, 0644);
  EXPECT_FALSE(hinted(a, {{"OPENCODE_CONFIG", (dir / "custom.json").string()}}));
  EXPECT_TRUE(hinted(a));
}

// --- probe_options_for() / with_probe() ---------------------------------------------------------------------------

template <class Options>
void check_options_round_trip(const char* agent, Options run) {
  SCOPED_TRACE(agent);
  int logged = 0;
  run.executable = "/opt/agent/bin/agent";
  run.working_directory = "/srv/project";
  run.env = {.inherit = false, .unset = {"U"}, .set = {{"A", "1"}}};
  run.containment = process::containment_kind::session;
  run.reaper_path = "/opt/agenthost/reaper";
  run.log = {.level = log_level::debug, .sink = [&](log_level, std::string_view) { ++logged; }};
  const auto po = providers::probe_options_for(run);
  EXPECT_EQ(po.executable, run.executable);
  EXPECT_EQ(po.working_directory, run.working_directory);
  EXPECT_FALSE(po.env.inherit);
  EXPECT_EQ(po.env.unset, run.env.unset);
  EXPECT_EQ(po.env.set, run.env.set);
  EXPECT_EQ(po.containment, process::containment_kind::session);
  EXPECT_EQ(po.reaper_path, run.reaper_path);
  EXPECT_EQ(po.log.level, log_level::debug);
  po.log.log(log_level::info, "x");
  EXPECT_EQ(logged, 1) << "the logger's sink is passed on";
  EXPECT_EQ(po.timeout, 5s);

  probe_result found;
  found.executable = "/home/u/.npm-global/bin/agent";
  const auto with = providers::with_probe(run, found);
  EXPECT_EQ(with.executable, found.executable);
  EXPECT_EQ(with.model, run.model);
  EXPECT_EQ(with.working_directory, run.working_directory);
  EXPECT_EQ(with.env.set, run.env.set);
  EXPECT_EQ(with.reaper_path, run.reaper_path);
  const auto without = providers::with_probe(run, probe_result{});
  EXPECT_EQ(without.executable, run.executable) << "an empty probe result leaves the executable";
}

TEST(ProbeOptionsFor, CopiesTheRunOptionsAndWithProbeSetsTheExecutable) {
  check_options_round_trip("claude", providers::claude_options{.model = "sonnet"});
  check_options_round_trip("codex", providers::codex_options{.model = "o3"});
  check_options_round_trip("gemini", providers::gemini_options{.model = "gemini-2.5-pro"});
  check_options_round_trip("opencode", providers::opencode_options{.model = "anthropic/claude"});
  EXPECT_EQ(providers::probe_options_for(providers::gemini_options{}).executable, "gemini");
}

// --- timeout, cancellation, deferred ------------------------------------------------------------------------------

TEST_F(ProbeAgents, HangingCodexTimesOutAndLeavesNoProcess) {
  const auto exe = write(bin / "codex", "#!/bin/sh\nsleep 60 &\nsleep 60\n");
  auto o = options(exe);
  o.timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  const auto r = probe(agent_kind::codex, o);  // checks processes_with_env(token) is empty
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_EQ(r.agent, "codex");
  EXPECT_FALSE(r.available);
  EXPECT_TRUE(contains(r.problems, "timed out after 0.3 s")) << joined(r.problems);
}

TEST_F(ProbeAgents, DeferredTokenAndBlockingHelperGiveTheSameResult) {
  fake_agent("opencode", "1.18.33");
  asio::io_context io;
  auto op = providers::async_probe(io.get_executor(), agent_kind::opencode, options(fs::path{}));
  std::optional<probe_result> deferred;
  std::move(op)([&](boost::system::error_code, probe_result r) { deferred = std::move(r); });
  ASSERT_TRUE(run_until(io, [&] { return deferred.has_value(); }));
  const auto blocking = providers::probe(agent_kind::opencode, options(fs::path{}));
  EXPECT_TRUE(blocking.available) << joined(blocking.problems);
  EXPECT_EQ(deferred->agent, "opencode");
  EXPECT_EQ(deferred->available, blocking.available);
  EXPECT_EQ(deferred->version, blocking.version);
  EXPECT_EQ(deferred->executable, blocking.executable);
  EXPECT_EQ(deferred->hints, blocking.hints);
  EXPECT_EQ(feature_names(*deferred), feature_names(blocking));
  EXPECT_TRUE(processes_with_env(needle()).empty());
}

// --- the CLIs scripts/install-agents.sh installs, when present ------------------------------------------------------

void probe_real(agent_kind agent, const std::string& prefix, const std::string& status_file, const version& pinned,
                bool on_node) {
  const fs::path source(AGENTHOST_SOURCE_DIR);
  const std::string name(providers::to_string(agent));
  const fs::path exe = source / ".npm-agents" / prefix / "node_modules" / ".bin" / name;
  if (::access(exe.c_str(), X_OK) != 0) {
    std::string why = "no real " + name + " at " + exe.string() + " (run scripts/install-agents.sh)";
    std::ifstream status(source / ".npm-agents" / status_file);
    if (std::string line; std::getline(status, line)) why += ": " + line;
    GTEST_SKIP() << why;
  }
  // The host's environment (its PATH finds node), plus a mark to find leftovers by.
  const std::string mark = random_token();
  providers::probe_options o{.executable = exe, .timeout = 20s, .reaper_path = AGENTHOST_REAPER};
  o.env.set["AGENTHOST_TEST_TOKEN"] = mark;
  const auto r = providers::probe(agent, o);
  std::cout << providers::to_json(r).dump(2) << "\n";
  EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + mark).empty()) << "the probe left processes behind";
  kill_leftovers("AGENTHOST_TEST_TOKEN=" + mark);
  EXPECT_EQ(r.agent, name);
  EXPECT_TRUE(r.available) << joined(r.problems);
  EXPECT_EQ(r.version, pinned) << r.version_text;
  EXPECT_FALSE(contains(r.hints, "older than")) << joined(r.hints);
  EXPECT_FALSE(contains(r.hints, "newer than")) << joined(r.hints);
  for (const auto& f : r.features) EXPECT_TRUE(f.supported) << f.name;
  if (on_node) {
    ASSERT_TRUE(r.runtime.has_value());
    EXPECT_EQ(r.runtime->name, "node");
    ASSERT_TRUE(r.runtime->version.has_value()) << r.runtime->version_text;
    ASSERT_TRUE(r.runtime->required.has_value());
    EXPECT_GE(*r.runtime->version, *r.runtime->required);
  } else {
    EXPECT_FALSE(r.runtime.has_value()) << "npm installs a native executable";
  }
}

TEST(RealClaude, ProbesTheInstalledClaude) {
  probe_real(agent_kind::claude, "claude-code", "install-status-claude-code.txt", {2, 1, 332}, false);
}
TEST(RealCodex, ProbesTheInstalledCodex) {
  probe_real(agent_kind::codex, "codex", "install-status-codex.txt", {0, 171, 0}, true);
}
TEST(RealGemini, ProbesTheInstalledGemini) {
  probe_real(agent_kind::gemini, "gemini", "install-status-gemini.txt", {0, 61, 0}, true);
}
TEST(RealOpencode, ProbesTheInstalledOpencode) {
  probe_real(agent_kind::opencode, "opencode", "install-status-opencode.txt", {1, 18, 33}, false);
}

}  // namespace
