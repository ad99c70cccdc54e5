// The pi command line: typed options → argv, with the traps of pi's argument parser covered.
#include <agenthost/providers/pi.hpp>

#include <gtest/gtest.h>

using namespace agenthost::providers;
using strings = std::vector<std::string>;

namespace {
strings args(const pi_options& o, std::string_view prompt) {
  auto r = build_pi_arguments(o, prompt);
  EXPECT_TRUE(r) << (r ? "" : r.error());
  return r ? *r : strings{};
}
}  // namespace

TEST(PiArguments, DefaultCommandLine) {
  EXPECT_EQ(args({}, "hello"), (strings{"--mode", "json", "-p", "hello"}));
}

TEST(PiArguments, TypedOptionsBecomeFlags) {
  const pi_options o{.provider = "local",
                     .model = "fake-model",
                     .thinking_level = "low",
                     .no_session = true,
                     .tools = strings{"read", "bash"},
                     .append_system_prompt = {"be brief", "be kind"}};
  EXPECT_EQ(args(o, "go"),
            (strings{"--mode", "json", "--provider", "local", "--model", "fake-model", "--thinking", "low",
                     "--no-session", "--tools", "read,bash", "--append-system-prompt", "be brief",
                     "--append-system-prompt", "be kind", "-p", "go"}));
  EXPECT_EQ(args({.tools = strings{}}, "x"), (strings{"--mode", "json", "--no-tools", "-p", "x"}));
}

TEST(PiArguments, PromptStartingWithDashNeverBecomesAFlag) {
  // pi 0.73.1 has no `--`: the prompt keeps its text but cannot start with '-'.
  auto old = args({}, "-rf /");
  EXPECT_EQ(old.back(), " -rf /");
  EXPECT_EQ(args({}, "--help").back(), " --help");
  // pi >= 1.6 takes `--`: the prompt is passed unchanged after it.
  auto now = args({.pi_version = version{1, 6, 0}}, "--help");
  ASSERT_GE(now.size(), 2u);
  EXPECT_EQ(now[now.size() - 2], "--");
  EXPECT_EQ(now.back(), "--help");
  // Shell syntax and newlines are just text: no shell ever sees them.
  EXPECT_EQ(args({}, "$(id)\n`rm -rf /`").back(), "$(id)\n`rm -rf /`");
  const std::string big(1 << 20, 'p');
  EXPECT_EQ(args({}, big).back(), big);
}

TEST(PiArguments, ExtraArgumentsCannotSwallowThePrompt) {
  // An unknown pi flag consumes the next argument unless it starts with '-': extra arguments come first, where the
  // next argument is always one of our flags.
  auto a = args({.extra_args = {"--unknown-flag"}}, "the prompt");
  EXPECT_EQ(a.front(), "--unknown-flag");
  EXPECT_EQ(a[1], "--mode");
  EXPECT_EQ(a.back(), "the prompt");
}

TEST(PiArguments, FlagsMissingFromOlderPiAreNotPassed) {
  // pi 0.73.1 exits 1 on --session-id ("Unknown options"); --session takes an id there.
  auto old = args({.session_id = "abc"}, "x");
  EXPECT_NE(std::find(old.begin(), old.end(), "--session"), old.end());
  EXPECT_EQ(std::find(old.begin(), old.end(), "--session-id"), old.end());
  auto now = args({.session_id = "abc", .pi_version = version{1, 6, 0}}, "x");
  EXPECT_NE(std::find(now.begin(), now.end(), "--session-id"), now.end());
  // "max" thinking exists only from 1.6.
  EXPECT_FALSE(build_pi_arguments({.thinking_level = "max"}, "x"));
  EXPECT_TRUE(build_pi_arguments({.thinking_level = "max", .pi_version = version{1, 6, 0}}, "x"));
}

TEST(PiArguments, InvalidOptionsAreErrorsNotFlags) {
  auto bad = build_pi_arguments({.thinking_level = "extreme"}, "x");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("extreme"), std::string::npos);
  EXPECT_FALSE(build_pi_arguments({.session_id = "--help"}, "x"));
  EXPECT_FALSE(build_pi_arguments({.session_id = "a", .no_session = true}, "x"));
  EXPECT_FALSE(build_pi_arguments({.tools = strings{"read,bash"}}, "x"));
}

TEST(PiArguments, StdinIsDevNull) {
  auto s = pi_spawn_options({}, "x");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->stdin_mode, agenthost::process::stdin_kind::null);
}

TEST(Version, Parse) {
  EXPECT_EQ(version::parse("0.73.1"), (version{0, 73, 1}));
  EXPECT_EQ(version::parse("pi version 1.6.0\n"), (version{1, 6, 0}));
  EXPECT_EQ(version::parse("v10.20.30-beta"), (version{10, 20, 30}));
  EXPECT_FALSE(version::parse("no version"));
  EXPECT_FALSE(version::parse("1.2"));
  EXPECT_LT((version{0, 73, 1}), (version{1, 6, 0}));
}
