// Fake agents for the probe tests: shell scripts written into a per-test temporary directory, run with a private
// environment (PATH, HOME and a per-test token only) so that nothing of the host's setup leaks in.
#pragma once

#include "test_util.hpp"

#include <agenthost/providers/probe.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace agenthost::test {

namespace fs = std::filesystem;

/// Whether an entry of `v` contains `needle`.
inline bool contains(const std::vector<std::string>& v, const std::string& needle) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.find(needle) != std::string::npos; });
}

/// One line per entry, for failure messages.
inline std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

class probe_fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/agenthost-probe-XXXXXX";
    dir = ::mkdtemp(tmpl);
    bin = dir / "bin";
    home = dir / "home";
    fs::create_directories(bin);
    fs::create_directories(home);
  }
  void TearDown() override {
    kill_leftovers(needle());
    std::filesystem::remove_all(dir);
  }

  std::string needle() const { return "AGENTHOST_TEST_TOKEN=" + token; }

  /// Writes `body` to `path` with mode `mode`; creates the parent directories.
  static fs::path write(const fs::path& path, const std::string& body, mode_t mode = 0755) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << body;
    ::chmod(path.c_str(), mode);
    return path;
  }

  /// A fake agent `name` (in bin/ unless `where` is given): `name --version` prints `output` and exits with `code`.
  fs::path fake_agent(const std::string& name, const std::string& output, int code = 0, const fs::path& where = {}) {
    return write(where.empty() ? bin / name : where,
                 "#!/bin/sh\nprintf '%s\\n' '" + output + "'\nexit " + std::to_string(code) + "\n");
  }

  /// A fake pi: `pi --version` prints `output` and exits with `code`.
  fs::path fake_pi(const std::string& output, int code = 0, const fs::path& where = {}) {
    return fake_agent("pi", output, code, where);
  }

  /// An npm install of pi `version` under dir (needing Node.js >= 22.19.0): bin/pi ->
  /// ../lib/node_modules/@earendil-works/pi-coding-agent/dist/cli.js, a script for `node`.
  void npm_install_pi(const std::string& version) const {
    const auto pkg = dir / "lib" / "node_modules" / "@earendil-works" / "pi-coding-agent";
    write(pkg / "package.json",
          R"({"name": "@earendil-works/pi-coding-agent", "version": ")" + version +
              R"(", "engines": {"node": ">=22.19.0"}})",
          0644);
    write(pkg / "dist" / "cli.js", "#!/usr/bin/env node\nimport './main.js'\n");
    fs::create_symlink("../lib/node_modules/@earendil-works/pi-coding-agent/dist/cli.js", bin / "pi");
  }

  /// A fake node: `node --version` prints `version`; `node SCRIPT --version` prints `pi_version` (the agent's version
  /// line, any agent; empty: fails like a Node.js too old for the script).
  static fs::path fake_node(const fs::path& path, const std::string& version, const std::string& pi_version) {
    std::string run_script = pi_version.empty()
                                 ? "echo 'SyntaxError: Unexpected token' >&2\nexit 1\n"
                                 : "[ \"$1\" = --version ] && echo '" + pi_version + "'\nexit 0\n";
    return write(path, "#!/bin/sh\nif [ \"$1\" = --version ]; then echo " + version +
                           "; exit 0; fi\nshift\n" + run_script);
  }

  providers::pi_probe_options options(fs::path exe = "pi", std::string path_var = {}) const {
    if (path_var.empty()) path_var = bin.string() + ":/usr/bin:/bin";
    return {.executable = std::move(exe),
            .env = {.inherit = false,
                    .set = {{"PATH", path_var}, {"HOME", home.string()}, {"AGENTHOST_TEST_TOKEN", token}}},
            .reaper_path = AGENTHOST_REAPER};
  }

  /// Runs one probe to its end; checks that it completed and left no process behind.
  providers::probe_result probe(providers::pi_probe_options o, boost::system::error_code* ec_out = nullptr) {
    return probe(providers::agent_kind::pi, std::move(o), ec_out);
  }

  /// Runs one probe of `agent` to its end; checks that it completed and left no process behind.
  providers::probe_result probe(providers::agent_kind agent, providers::probe_options o,
                                boost::system::error_code* ec_out = nullptr) {
    asio::io_context io;
    std::optional<providers::probe_result> result;
    boost::system::error_code ec;
    providers::async_probe(io.get_executor(), agent, std::move(o),
                           [&](boost::system::error_code e, providers::probe_result r) {
                             ec = e;
                             result = std::move(r);
                           });
    EXPECT_TRUE(run_until(io, [&] { return result.has_value(); }, 30s));
    EXPECT_TRUE(processes_with_env(needle()).empty()) << "the probe left processes behind";
    if (ec_out != nullptr) *ec_out = ec;
    else EXPECT_FALSE(ec) << ec.message();
    return result.value_or(providers::probe_result{});
  }

  std::string token = random_token();
  fs::path dir, bin, home;
};

}  // namespace agenthost::test
