// Discovery of pi: executable resolution, the version command (normal, garbage, failing, hanging), Node.js detection,
// configuration hints, cancellation, and flag gating through with_probe().
#include "probe_test_util.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>

using namespace agenthost;
using namespace agenthost::test;
using providers::probe_result;
using providers::version;

namespace {

using Probe = probe_fixture;

bool has_arg(const std::vector<std::string>& args, const std::string& a) {
  return std::find(args.begin(), args.end(), a) != args.end();
}

TEST_F(Probe, PlainVersionIsUsableWithoutTheNewFlags) {
  const auto exe = fake_pi("0.73.1");
  const auto r = probe(options(exe));
  EXPECT_EQ(r.agent, "pi");
  EXPECT_TRUE(r.available) << joined(r.problems);
  EXPECT_TRUE(r.problems.empty());
  EXPECT_EQ(r.executable, exe);
  ASSERT_TRUE(r.version.has_value());
  EXPECT_EQ(*r.version, (version{0, 73, 1}));
  EXPECT_EQ(r.version_text, "0.73.1");
  EXPECT_TRUE(providers::supports(r, "json_mode"));
  EXPECT_FALSE(providers::supports(r, "session_id"));
  EXPECT_FALSE(providers::supports(r, "end_of_options"));
  EXPECT_FALSE(providers::supports(r, "thinking_max"));
  EXPECT_FALSE(providers::supports(r, "delta_json"));
  EXPECT_FALSE(r.runtime.has_value()) << "a shell script is not a Node.js program";
}

TEST_F(Probe, NamedVersionEnablesTheNewFeatures) {
  fake_pi("pi 1.6.0");
  const auto r = probe(options("pi"));  // by name, in PATH
  EXPECT_TRUE(r.available) << joined(r.problems);
  EXPECT_EQ(r.executable, bin / "pi");
  ASSERT_TRUE(r.version.has_value());
  EXPECT_EQ(*r.version, (version{1, 6, 0}));
  EXPECT_EQ(r.version_text, "pi 1.6.0");
  for (const char* f : {"json_mode", "session_id", "end_of_options", "thinking_max", "delta_json"})
    EXPECT_TRUE(providers::supports(r, f)) << f;
  EXPECT_FALSE(providers::supports(r, "no_such_feature"));
}

TEST_F(Probe, GarbageVersionMakesItUnusable) {
  const auto exe = fake_pi("hello from something else");
  const auto r = probe(options(exe));
  EXPECT_FALSE(r.available);
  EXPECT_FALSE(r.version.has_value());
  EXPECT_EQ(r.version_text, "hello from something else");
  EXPECT_TRUE(contains(r.problems, "printed no version number")) << joined(r.problems);
  EXPECT_TRUE(contains(r.hints, "really pi?")) << joined(r.hints);
  EXPECT_FALSE(providers::supports(r, "json_mode"));
}

TEST_F(Probe, NonZeroExitIsAProblemNamingTheCodeAndStderr) {
  const auto exe = write(bin / "pi", "#!/bin/sh\necho 'Error: cannot load config' >&2\nexit 3\n");
  const auto r = probe(options(exe));
  EXPECT_FALSE(r.available);
  EXPECT_TRUE(contains(r.problems, "exited with code 3")) << joined(r.problems);
  EXPECT_TRUE(contains(r.problems, "Error: cannot load config")) << joined(r.problems);
  EXPECT_EQ(r.version_text, "Error: cannot load config");
}

TEST_F(Probe, HangingVersionTimesOutWithinItsBoundAndLeavesNoProcess) {
  // The fake forks a second sleeper: the whole tree has to go, not just the leader.
  const auto exe = write(bin / "pi", "#!/bin/sh\nsleep 60 &\nsleep 60\n");
  auto o = options(exe);
  o.timeout = 500ms;
  const auto start = std::chrono::steady_clock::now();
  const auto r = probe(o);  // checks processes_with_env(token) is empty
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(r.available);
  EXPECT_TRUE(contains(r.problems, "timed out after 0.5 s")) << joined(r.problems);
  EXPECT_GE(took, 450ms);
  EXPECT_LT(took, 3s) << "the probe must not outlive its timeout by more than the kill";
}

TEST_F(Probe, FileWithoutExecutePermissionIsUnusable) {
  const auto exe = write(bin / "pi", "#!/bin/sh\necho 1.6.0\n", 0644);
  const auto by_path = probe(options(exe));
  EXPECT_FALSE(by_path.available);
  EXPECT_EQ(by_path.executable, exe);
  EXPECT_TRUE(contains(by_path.problems, "is not an executable file")) << joined(by_path.problems);
  EXPECT_TRUE(contains(by_path.hints, "chmod +x")) << joined(by_path.hints);

  const auto by_name = probe(options("pi"));
  EXPECT_FALSE(by_name.available);
  EXPECT_TRUE(contains(by_name.problems, "is not an executable file")) << joined(by_name.problems);
}

TEST_F(Probe, MissingPathIsUnusable) {
  const auto r = probe(options(dir / "nowhere" / "pi"));
  EXPECT_FALSE(r.available);
  EXPECT_TRUE(r.executable.empty());
  EXPECT_TRUE(contains(r.problems, "pi not found at " + (dir / "nowhere" / "pi").string())) << joined(r.problems);
  EXPECT_TRUE(contains(r.hints, "npm install -g")) << joined(r.hints);
  EXPECT_TRUE(r.features.size() >= 5);
}

TEST_F(Probe, MissingNameSaysWhereItLooked) {
  const std::string name = "pi-missing-" + token;
  const auto r = probe(options(name));
  EXPECT_FALSE(r.available);
  EXPECT_TRUE(contains(r.problems, "`" + name + "` not found")) << joined(r.problems);
  EXPECT_TRUE(contains(r.problems, bin.string())) << joined(r.problems);
  EXPECT_TRUE(contains(r.problems, (home / ".npm-global" / "bin").string())) << joined(r.problems);
}

TEST_F(Probe, PathLookupTakesTheFirstExecutableInPathOrder) {
  const auto first = dir / "first";
  fake_pi("0.73.1", 0, first / "pi");
  write(dir / "second" / "pi", "#!/bin/sh\necho 1.6.0\n");
  write(dir / "zero" / "pi", "not executable", 0644);
  const auto r = probe(options("pi", (dir / "zero").string() + ":" + first.string() + ":" + (dir / "second").string() +
                                         ":/usr/bin:/bin"));
  EXPECT_TRUE(r.available) << joined(r.problems);
  EXPECT_EQ(r.executable, first / "pi");
  EXPECT_EQ(r.version, (version{0, 73, 1}));
  EXPECT_FALSE(contains(r.hints, "outside PATH"));
}

// An allow-list without PATH keeps PATH from the agent, but a run still finds its executable in the host's PATH
// (process::child::spawn): the probe reports that same file.
TEST_F(Probe, AFilteredPathFindsTheExecutableARunStarts) {
  fake_pi("0.73.1", 0, bin / "pi");
  const std::string saved = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
  ::setenv("PATH", (bin.string() + ":" + saved).c_str(), 1);
  auto o = options("pi");
  o.env = {.allow = {"HOME", "AGENTHOST_TEST_TOKEN"}};
  const auto r = probe(o);
  ::setenv("PATH", saved.c_str(), 1);
  EXPECT_EQ(r.executable, bin / "pi") << joined(r.problems);
  EXPECT_EQ(r.version, (version{0, 73, 1}));
  EXPECT_FALSE(contains(r.hints, "outside PATH")) << joined(r.hints);
}

TEST_F(Probe, FallsBackToTheNpmGlobalBinInHome) {
  const auto exe = fake_pi("0.73.1", 0, home / ".npm-global" / "bin" / "pi");
  const auto r = probe(options("pi"));  // PATH = bin:/usr/bin:/bin, pi only in ~/.npm-global/bin
  EXPECT_TRUE(r.available) << joined(r.problems);
  EXPECT_EQ(r.executable, exe);
  EXPECT_TRUE(contains(r.hints, "outside PATH")) << joined(r.hints);
  // The run uses the same file.
  const auto opts = providers::with_probe({}, r);
  EXPECT_EQ(opts.executable, exe);
}

TEST_F(Probe, FallsBackToTheNpmPrefixFromTheEnvironmentAndFromNpmrc) {
  const auto from_env = fake_pi("0.73.1", 0, dir / "env-prefix" / "bin" / "pi");
  auto o = options("pi");
  o.env.set["NPM_CONFIG_PREFIX"] = (dir / "env-prefix").string();
  EXPECT_EQ(probe(o).executable, from_env);

  const auto from_rc = fake_pi("1.6.0", 0, home / "npm-prefix" / "bin" / "pi");
  write(home / ".npmrc", "; comment\nregistry=https://registry.npmjs.org/\nprefix = ${HOME}/npm-prefix\n", 0644);
  const auto r = probe(options("pi"));
  EXPECT_EQ(r.executable, from_rc);
  EXPECT_EQ(r.version, (version{1, 6, 0}));

  write(home / ".npmrc", "prefix=~/npm-prefix\n", 0644);
  EXPECT_EQ(probe(options("pi")).executable, from_rc);
}

TEST_F(Probe, NodeScriptOnTooOldNodeIsUnusable) {
  fake_node(bin / "node", "v20.11.0", "1.6.0");
  const auto exe = write(bin / "pi", "#!/usr/bin/env node\nconsole.log('pi')\n");
  const auto r = probe(options("pi"));
  EXPECT_FALSE(r.available);
  EXPECT_EQ(r.executable, exe);
  EXPECT_EQ(r.version, (version{1, 6, 0}));
  ASSERT_TRUE(r.runtime.has_value());
  EXPECT_EQ(r.runtime->name, "node");
  EXPECT_EQ(r.runtime->executable, bin / "node");
  EXPECT_EQ(r.runtime->version, (version{20, 11, 0}));
  EXPECT_EQ(r.runtime->version_text, "v20.11.0");
  EXPECT_EQ(r.runtime->required, (version{22, 19, 0}));
  EXPECT_TRUE(contains(r.problems, "pi 1.6.0 needs Node.js >= 22.19.0")) << joined(r.problems);
  EXPECT_TRUE(contains(r.problems, "v20.11.0")) << joined(r.problems);
  EXPECT_TRUE(contains(r.hints, "install Node.js 22.19.0 or newer")) << joined(r.hints);
}

TEST_F(Probe, NodeScriptOnRecentNodeIsUsable) {
  fake_node(bin / "node", "v22.19.0", "1.6.0");
  write(bin / "pi", "#!/usr/bin/env node\nconsole.log('pi')\n");
  const auto r = probe(options("pi"));
  EXPECT_TRUE(r.available) << joined(r.problems);
  ASSERT_TRUE(r.runtime.has_value());
  EXPECT_EQ(r.runtime->version, (version{22, 19, 0}));
}

TEST_F(Probe, OldPiOnNode20IsUsable) {
  fake_node(bin / "node", "v20.11.0", "0.73.1");
  write(bin / "pi", "#!/usr/bin/env node\n");
  const auto r = probe(options("pi"));
  EXPECT_TRUE(r.available) << joined(r.problems);
  ASSERT_TRUE(r.runtime.has_value());
  EXPECT_EQ(r.runtime->required, (version{20, 6, 0}));
}

// npm's cmd-shim: `exec "$basedir/node" …` when a node sits next to the shim, else `exec node …`.
std::string npm_shim() {
  return "#!/bin/sh\n"
         "basedir=$(dirname \"$(echo \"$0\" | sed -e 's,\\\\,/,g')\")\n"
         "if [ -x \"$basedir/node\" ]; then\n"
         "  exec \"$basedir/node\"  \"$basedir/../lib/cli.js\" \"$@\"\n"
         "else \n"
         "  exec node  \"$basedir/../lib/cli.js\" \"$@\"\n"
         "fi\n";
}

TEST_F(Probe, ShellShimExecsItsSiblingNodeV20ForPi1xIsUnusable) {
  const auto shim_dir = dir / "prefix" / "bin";
  write(shim_dir / "pi", npm_shim());
  fake_node(shim_dir / "node", "v20.11.0", "1.6.0");
  fake_node(bin / "node", "v22.19.0", "1.6.0");  // on PATH, but the shim prefers its sibling
  const auto r = probe(options(shim_dir / "pi"));
  EXPECT_FALSE(r.available);
  ASSERT_TRUE(r.runtime.has_value());
  EXPECT_EQ(r.runtime->executable, shim_dir / "node");
  EXPECT_EQ(r.runtime->version, (version{20, 11, 0}));
  EXPECT_TRUE(contains(r.problems, "needs Node.js >= 22.19.0")) << joined(r.problems);
}

TEST_F(Probe, ShellShimExecsItsSiblingNodeV22ForPi1xIsUsable) {
  const auto shim_dir = dir / "prefix" / "bin";
  write(shim_dir / "pi", npm_shim());
  fake_node(shim_dir / "node", "v22.20.0", "1.6.0");
  const auto r = probe(options(shim_dir / "pi"));
  EXPECT_TRUE(r.available) << joined(r.problems);
  ASSERT_TRUE(r.runtime.has_value());
  EXPECT_EQ(r.runtime->executable, shim_dir / "node");
  EXPECT_EQ(r.version, (version{1, 6, 0}));
}

TEST_F(Probe, ShellShimWithoutSiblingUsesNodeOnPath) {
  const auto shim_dir = dir / "prefix" / "bin";
  write(shim_dir / "pi", npm_shim());
  fake_node(bin / "node", "v22.0.0", "1.6.0");
  const auto r = probe(options(shim_dir / "pi"));
  EXPECT_FALSE(r.available);
  ASSERT_TRUE(r.runtime.has_value());
  EXPECT_EQ(r.runtime->executable, bin / "node");
  EXPECT_TRUE(contains(r.problems, "needs Node.js >= 22.19.0, but " + (bin / "node").string() + " is v22.0.0"))
      << joined(r.problems);
}

TEST_F(Probe, NodeMissingFromPathIsAProblemAndAnotherNodeIsPointedOut) {
  write(bin / "pi", "#!/usr/bin/env node\n");
  fake_node(home / ".local" / "bin" / "node", "v22.19.0", "1.6.0");
  const auto r = probe(options("pi", bin.string()));  // no /usr/bin: no node on PATH
  EXPECT_FALSE(r.available);
  ASSERT_TRUE(r.runtime.has_value());
  EXPECT_TRUE(r.runtime->executable.empty());
  EXPECT_TRUE(contains(r.problems, "`node` was not found on PATH")) << joined(r.problems);
  EXPECT_TRUE(contains(r.problems, "#!/usr/bin/env node")) << joined(r.problems);
  EXPECT_TRUE(contains(r.hints, "a node exists at " + (home / ".local" / "bin" / "node").string()))
      << joined(r.hints);
}

TEST_F(Probe, HangingNodeUsesUpTheTimeoutAndPiIsNotRun) {
  write(bin / "node", "#!/bin/sh\nsleep 60\n");
  write(bin / "pi", "#!/usr/bin/env node\n");
  auto o = options("pi");
  o.timeout = 400ms;
  const auto start = std::chrono::steady_clock::now();
  const auto r = probe(o);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_FALSE(r.available);
  EXPECT_TRUE(contains(r.problems, "node --version` timed out after 0.4 s")) << joined(r.problems);
  EXPECT_FALSE(contains(r.problems, "pi --version")) << joined(r.problems);
}

TEST_F(Probe, PackageJsonGivesTheVersionWhenNodeIsTooOldToRunPi) {
  npm_install_pi("1.6.0");  // node v20 cannot even run `pi --version`
  fake_node(bin / "node", "v20.11.0", "");
  const auto r = probe(options("pi"));
  EXPECT_FALSE(r.available);
  EXPECT_EQ(r.version, (version{1, 6, 0}));
  EXPECT_TRUE(contains(r.problems, "exited with code 1: SyntaxError")) << joined(r.problems);
  EXPECT_TRUE(contains(r.problems, "pi 1.6.0 needs Node.js >= 22.19.0")) << joined(r.problems);
  EXPECT_TRUE(contains(r.hints, "package.json says pi 1.6.0")) << joined(r.hints);
}

// run_version_commands = false: the executable and the npm install's version, and not one process started.
TEST_F(Probe, AQuickProbeStartsNothingAndTakesTheVersionFromPackageJson) {
  npm_install_pi("1.6.0");
  const auto ran = dir / "node-ran";
  write(bin / "node", "#!/bin/sh\ntouch '" + ran.string() + "'\necho v22.20.0\n");
  auto o = options("pi");
  o.run_version_commands = false;
  const auto r = probe(o);
  EXPECT_TRUE(r.available) << joined(r.problems);
  EXPECT_EQ(r.executable, bin / "pi");
  EXPECT_EQ(r.version, (version{1, 6, 0}));
  EXPECT_TRUE(supports(r, "session_id"));
  ASSERT_TRUE(r.runtime.has_value());
  EXPECT_EQ(r.runtime->executable, bin / "node");
  EXPECT_FALSE(r.runtime->version.has_value());
  EXPECT_FALSE(fs::exists(ran)) << "node was run";
  // The full probe runs it (the same files), so the marker says what it should.
  EXPECT_TRUE(probe(options("pi")).runtime.has_value());
  EXPECT_TRUE(fs::exists(ran));
}

TEST_F(Probe, CredentialHintsComeFromTheEnvironmentAndPiConfigOnly) {
  const auto exe = fake_pi("0.73.1");
  EXPECT_TRUE(contains(probe(options(exe)).hints, "no credentials found"));

  auto with_key = options(exe);
  with_key.env.set["ANTHROPIC_API_KEY"] = "sk-test";
  EXPECT_FALSE(contains(probe(with_key).hints, "no credentials found"));

  write(home / ".pi" / "agent" / "auth.json", "{}", 0600);  // empty: still nothing
  EXPECT_TRUE(contains(probe(options(exe)).hints, "no credentials found"));
  write(home / ".pi" / "agent" / "auth.json", R"({"anthropic": {"type": "oauth"}})", 0600);
  EXPECT_FALSE(contains(probe(options(exe)).hints, "no credentials found"));

  auto custom_dir = options(exe);
  custom_dir.env.set["PI_CODING_AGENT_DIR"] = (dir / "pi-config").string();
  const auto r = probe(custom_dir);
  EXPECT_TRUE(contains(r.hints, (dir / "pi-config").string())) << joined(r.hints);
  write(dir / "pi-config" / "models.json", R"({"providers": {"local": {"baseUrl": "http://127.0.0.1:1/v1"}}})", 0644);
  EXPECT_FALSE(contains(probe(custom_dir).hints, "no credentials found"));
  EXPECT_TRUE(probe(custom_dir).available) << "hints never make an agent unusable";
}

TEST_F(Probe, CancellationKillsTheVersionCommandAndCompletesAborted) {
  const auto exe = write(bin / "pi", "#!/bin/sh\nsleep 60 &\nsleep 60\n");
  auto o = options(exe);
  o.timeout = 30s;
  asio::io_context io;
  asio::cancellation_signal cancel;
  asio::steady_timer timer(io, 300ms);
  timer.async_wait([&](boost::system::error_code) { cancel.emit(asio::cancellation_type::terminal); });
  std::optional<probe_result> result;
  boost::system::error_code ec;
  const auto start = std::chrono::steady_clock::now();
  providers::async_probe_pi(io.get_executor(), o,
                            asio::bind_cancellation_slot(cancel.slot(), [&](boost::system::error_code e, probe_result r) {
                              ec = e;
                              result = std::move(r);
                            }));
  ASSERT_TRUE(run_until(io, [&] { return result.has_value(); }, 30s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(ec, asio::error::operation_aborted);
  EXPECT_FALSE(result->available);
  EXPECT_TRUE(contains(result->problems, "probe cancelled")) << joined(result->problems);
  EXPECT_EQ(result->executable, exe);
  EXPECT_TRUE(processes_with_env(needle()).empty());
}

TEST_F(Probe, DeferredTokenAndBlockingHelperGiveTheSameResult) {
  fake_pi("pi 1.6.0");
  asio::io_context io;
  auto op = providers::async_probe_pi(io.get_executor(), options("pi"));  // default token: deferred, nothing runs yet
  std::optional<probe_result> deferred;
  std::move(op)([&](boost::system::error_code, probe_result r) { deferred = std::move(r); });
  ASSERT_TRUE(run_until(io, [&] { return deferred.has_value(); }));
  const auto blocking = providers::probe_pi(options("pi"));
  EXPECT_EQ(deferred->version, blocking.version);
  EXPECT_EQ(deferred->executable, blocking.executable);
  EXPECT_TRUE(blocking.available);
  EXPECT_TRUE(processes_with_env(needle()).empty());
}

// Paths and --version output are bytes: a pi installed under a Latin-1 directory name, whose --version line is cut
// inside a character, still gives JSON that nlohmann's default (throwing) dump() writes (`agenthost doctor --json`).
TEST(ProbeJson, TextThatIsNotUtf8IsMadeValid) {
  providers::probe_result r;
  r.agent = "pi";
  r.executable = "/opt/\xe9t\xe9/bin/pi";
  r.version_text = "pi 1.6.0 \xE2\x80";
  r.problems = {"cannot read /opt/\xe9t\xe9/lib"};
  const auto j = providers::to_json(r);
  std::string dumped;
  ASSERT_NO_THROW(dumped = j.dump());
  EXPECT_EQ(j["executable"], "/opt/\xEF\xBF\xBDt\xEF\xBF\xBD/bin/pi");
  EXPECT_EQ(j["version_text"], "pi 1.6.0 \xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(j["problems"][0], "cannot read /opt/\xEF\xBF\xBDt\xEF\xBF\xBD/lib");
}

TEST_F(Probe, JsonFormHasEveryField) {
  fake_node(bin / "node", "v22.19.0", "1.6.0");
  write(bin / "pi", "#!/usr/bin/env node\n");
  const auto j = providers::to_json(probe(options("pi")));
  EXPECT_EQ(j["agent"], "pi");
  EXPECT_EQ(j["available"], true);
  EXPECT_EQ(j["executable"], (bin / "pi").string());
  EXPECT_EQ(j["version"], "1.6.0");
  EXPECT_EQ(j["version_text"], "1.6.0");
  ASSERT_TRUE(j["features"].is_array());
  EXPECT_EQ(j["features"][1]["name"], "session_id");
  EXPECT_EQ(j["features"][1]["supported"], true);
  EXPECT_EQ(j["features"][1]["since"], "1.6.0");
  EXPECT_TRUE(j["features"][0]["since"].is_null());
  EXPECT_TRUE(j["problems"].is_array() && j["problems"].empty());
  EXPECT_TRUE(j["hints"].is_array());
  EXPECT_EQ(j["runtime"]["name"], "node");
  EXPECT_EQ(j["runtime"]["version"], "22.19.0");
  EXPECT_EQ(j["runtime"]["required"], "22.19.0");
  EXPECT_TRUE(j["elapsed_ms"].is_number_integer());
  const nlohmann::json adl = probe(options(dir / "missing"));
  EXPECT_TRUE(adl["version"].is_null());
  EXPECT_TRUE(adl["runtime"].is_null());
  EXPECT_EQ(adl["available"], false);
}

// with_probe() + build_pi_arguments(): the flags follow the probed version, and a feature reported as supported is
// exactly one build_pi_arguments() uses.
TEST_F(Probe, WithProbeGatesTheFlagsByTheProbedVersion) {
  providers::pi_options base{.thinking_level = "high", .session_id = "abc"};
  for (const char* v : {"0.73.1", "1.6.0"}) {
    SCOPED_TRACE(v);
    const auto exe = fake_pi(v);
    const auto r = probe(options(exe));
    ASSERT_TRUE(r.available) << joined(r.problems);
    const auto opts = providers::with_probe(base, r);
    EXPECT_EQ(opts.pi_version, r.version);
    EXPECT_EQ(opts.executable, exe);
    EXPECT_EQ(opts.model, base.model);
    const auto args = providers::build_pi_arguments(opts, "-starts with a dash");
    ASSERT_TRUE(args.has_value()) << args.error();
    EXPECT_EQ(has_arg(*args, "--session-id"), providers::supports(r, "session_id"));
    EXPECT_EQ(has_arg(*args, "--session"), !providers::supports(r, "session_id"));
    EXPECT_EQ(has_arg(*args, "--"), providers::supports(r, "end_of_options"));
    auto max = opts;
    max.thinking_level = "max";
    EXPECT_EQ(providers::build_pi_arguments(max, "x").has_value(), providers::supports(r, "thinking_max"));
  }
}

TEST_F(Probe, WithProbeKeepsTheCallersVersionWhenTheProbeFoundNone) {
  providers::pi_options base{.pi_version = version{1, 6, 0}};
  const auto r = probe(options(dir / "missing"));
  const auto opts = providers::with_probe(base, r);
  EXPECT_EQ(opts.pi_version, (version{1, 6, 0}));
  EXPECT_EQ(opts.executable, base.executable);
  // And the probe options follow the run options.
  providers::pi_options run{.executable = "/opt/pi/bin/pi", .env = {.set = {{"A", "1"}}}};
  const auto po = providers::probe_options_for(run);
  EXPECT_EQ(po.executable, run.executable);
  EXPECT_EQ(po.env.set, run.env.set);
  EXPECT_EQ(po.timeout, 5s);
}

// The pi the project installs for real-CLI tests (scripts/install-agents.sh), when present.
TEST(RealPi, ProbesTheInstalledPi) {
  const fs::path pi = fs::path(AGENTHOST_SOURCE_DIR) / ".npm-agents" / "node_modules" / ".bin" / "pi";
  if (!fs::exists(pi)) {
    std::string why = "no real pi at " + pi.string() + " (run scripts/install-agents.sh)";
    std::ifstream status(fs::path(AGENTHOST_SOURCE_DIR) / ".npm-agents" / "install-status.txt");
    if (std::string line; std::getline(status, line)) why += ": " + line;
    GTEST_SKIP() << why;
  }
  const auto r = providers::probe_pi({.executable = pi, .timeout = 20s, .reaper_path = AGENTHOST_REAPER});
  std::cout << providers::to_json(r).dump(2) << "\n";
  EXPECT_TRUE(r.available) << joined(r.problems);
  ASSERT_TRUE(r.version.has_value());
  ASSERT_TRUE(r.runtime.has_value());
  EXPECT_EQ(r.runtime->name, "node");
  EXPECT_TRUE(r.runtime->version.has_value());
}

}  // namespace
