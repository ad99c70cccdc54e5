// Gemini CLI's folder trust as the probe reads it: trustedFolders.json rules (TRUST_FOLDER, TRUST_PARENT, the longest
// rule), symlinks, the environment overrides, settings.json's security.folderTrust.enabled (and files of other
// shapes), the rules file's locations.
#include "probe_test_util.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <string>

using namespace agenthost;
using namespace agenthost::test;
using providers::agent_kind;

namespace {

class GeminiTrust : public probe_fixture {
 protected:
  void SetUp() override {
    probe_fixture::SetUp();
    fake_agent("gemini", "0.61.0");
    base = fs::canonical(dir);  // rules name real paths
    work = base / "projects" / "app";
    fs::create_directories(work);
  }
  // Whether gemini probed with working directory `wd` hints that it is not trusted.
  bool untrusted(const fs::path& wd, const std::map<std::string, std::string>& extra = {}) {
    auto o = options(fs::path{});
    o.working_directory = wd;
    for (const auto& [k, v] : extra) o.env.set[k] = v;
    const auto r = probe(agent_kind::gemini, o);
    EXPECT_TRUE(r.available) << joined(r.problems);
    const bool hint = contains(r.hints, "is not a trusted folder");
    if (hint) {
      EXPECT_TRUE(contains(r.hints, "skip_trust")) << joined(r.hints);
    }
    return hint;
  }
  void rules(const nlohmann::json& j, const fs::path& file = {}) {
    write(file.empty() ? home / ".gemini" / "trustedFolders.json" : file, j.dump(), 0644);
  }
  fs::path parent() const { return base / "projects"; }
  fs::path base, work;
};

TEST_F(GeminiTrust, NoRulesIsUntrusted) { EXPECT_TRUE(untrusted(work)); }

TEST_F(GeminiTrust, TrustFolderOfTheDirectoryOrAParent) {
  rules({{work.string(), "TRUST_FOLDER"}});
  EXPECT_FALSE(untrusted(work));
  EXPECT_TRUE(untrusted(parent())) << "a rule for a child does not trust its parent";
  rules({{parent().string(), "TRUST_FOLDER"}});
  EXPECT_FALSE(untrusted(work));
  rules({{(base / "proj").string(), "TRUST_FOLDER"}});
  EXPECT_TRUE(untrusted(work)) << "a name prefix is no parent";
}

TEST_F(GeminiTrust, TrustParentTrustsTheSiblings) {
  rules({{(parent() / "other").string(), "TRUST_PARENT"}});
  EXPECT_FALSE(untrusted(work));
}

TEST_F(GeminiTrust, LongestRuleWins) {
  rules({{parent().string(), "TRUST_FOLDER"}, {work.string(), "DO_NOT_TRUST"}});
  EXPECT_TRUE(untrusted(work));
  rules({{parent().string(), "DO_NOT_TRUST"}, {work.string(), "TRUST_FOLDER"}});
  EXPECT_FALSE(untrusted(work));
}

TEST_F(GeminiTrust, WorkingDirectoryIsResolvedThroughSymlinks) {
  rules({{work.string(), "TRUST_FOLDER"}});
  fs::create_directory_symlink(work, base / "link");
  EXPECT_FALSE(untrusted(base / "link"));
}

TEST_F(GeminiTrust, EnvironmentOverrideTrusts) {
  EXPECT_FALSE(untrusted(work, {{"GEMINI_CLI_TRUST_WORKSPACE", "true"}}));
}

TEST_F(GeminiTrust, DisabledFolderTrustNeedsNoRule) {
  write(home / ".gemini" / "settings.json", R"({"security": {"folderTrust": {"enabled": false}}})", 0644);
  EXPECT_FALSE(untrusted(work));
  write(home / ".gemini" / "settings.json", R"({"security": {"folderTrust": {"enabled": true}}})", 0644);
  EXPECT_TRUE(untrusted(work));
  // Other shapes (json_pointer lookups would throw on the first two): folder trust stays on, and nothing throws.
  for (const char* odd : {R"({"security": []})", R"({"security": {"folderTrust": [false]}})", R"({"security": 1})"}) {
    write(home / ".gemini" / "settings.json", odd, 0644);
    EXPECT_TRUE(untrusted(work)) << odd;
  }
}

TEST_F(GeminiTrust, RulesFileFromTheEnvironmentAndGeminiHome) {
  rules({{work.string(), "TRUST_FOLDER"}}, dir / "rules.json");
  EXPECT_FALSE(untrusted(work, {{"GEMINI_CLI_TRUSTED_FOLDERS_PATH", (dir / "rules.json").string()}}));
  rules({{work.string(), "TRUST_FOLDER"}}, dir / "gemini-home" / ".gemini" / "trustedFolders.json");
  EXPECT_FALSE(untrusted(work, {{"GEMINI_CLI_HOME", (dir / "gemini-home").string()}}));
  EXPECT_TRUE(untrusted(work)) << "the rules in GEMINI_CLI_HOME are not HOME's";
}

TEST_F(GeminiTrust, EmptyWorkingDirectoryIsTheHostsCurrentDirectory) {
  EXPECT_TRUE(untrusted({}));
  rules({{fs::canonical(fs::current_path()).string(), "TRUST_FOLDER"}});
  EXPECT_FALSE(untrusted({}));
}

}  // namespace
