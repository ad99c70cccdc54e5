// The pi command line: typed options → argv, with the traps of pi's argument parser covered.
#include <agenthost/providers/pi.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <csignal>
#include <cstdint>

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
  EXPECT_EQ(args({.prompt_delivery = pi_prompt_delivery::argv}, big).back(), big);
  // Before pi 1.6 a prompt starting with '@' would be read as a file to attach: argv delivery gets a space too.
  EXPECT_EQ(args({.prompt_delivery = pi_prompt_delivery::argv}, "@/etc/passwd").back(), " @/etc/passwd");
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

namespace {
// What pi 0.73.1 makes of a command (main.js readPipedStdin + cli/initial-message.js): stdin.trim() (JS whitespace)
// followed directly by the prompt argument.
const std::vector<std::string> js_spaces{"\t", "\n", "\v", "\f", "\r", " ", "\xC2\xA0", "\xE1\x9A\x80",
                                         "\xE2\x80\x80", "\xE2\x80\x85", "\xE2\x80\x8A", "\xE2\x80\xA8",
                                         "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80",
                                         "\xEF\xBB\xBF"};
std::string js_trim(std::string s) {
  for (bool again = true; again;) {
    again = false;
    for (const auto& w : js_spaces) {
      if (s.size() >= w.size() && s.compare(0, w.size(), w) == 0) s.erase(0, w.size()), again = true;
      if (s.size() >= w.size() && s.compare(s.size() - w.size(), w.size(), w) == 0) s.resize(s.size() - w.size()), again = true;
    }
  }
  return s;
}
std::string pi_sees(const pi_command& c) {
  std::string text = c.stdin_text ? js_trim(*c.stdin_text) : "";
  if (c.args.back() != "-p" && c.args.back() != "--") text += c.args.back();
  return text;
}
pi_command command(const pi_options& o, std::string_view prompt) {
  auto r = build_pi_command(o, prompt);
  EXPECT_TRUE(r) << (r ? "" : r.error());
  return r ? *r : pi_command{};
}
}  // namespace

TEST(PiPromptDelivery, AutomaticUsesArgvUpToTheThresholdThenStdin) {
  const std::string fits(pi_prompt_argv_max, 'a');
  auto small = command({}, fits);
  EXPECT_FALSE(small.stdin_text);
  EXPECT_EQ(small.args.back(), fits);
  const std::string big(pi_prompt_argv_max + 1, 'a');
  auto large = command({}, big);
  ASSERT_TRUE(large.stdin_text);
  EXPECT_EQ(*large.stdin_text, big);
  EXPECT_EQ(large.args.back(), "-p") << "nothing after -p: the whole prompt is on stdin";
  auto large_new = command({.pi_version = version{1, 6, 0}}, big);
  EXPECT_EQ(large_new.args.back(), "-p");
  // '@…' would be an @file argument to pi: through stdin, whatever its size.
  auto at = command({}, "@alice please review");
  ASSERT_TRUE(at.stdin_text);
  EXPECT_EQ(*at.stdin_text, "@alice please review");
  // A NUL would end an argument: through stdin, whole; refused when argv is forced.
  const std::string nul("fix\0 it", 7);
  auto with_nul = command({}, nul);
  ASSERT_TRUE(with_nul.stdin_text);
  EXPECT_EQ(*with_nul.stdin_text, nul);
  EXPECT_EQ(with_nul.args.back(), "-p");
  const auto forced = build_pi_command({.prompt_delivery = pi_prompt_delivery::argv}, nul);
  ASSERT_FALSE(forced);
  EXPECT_NE(forced.error().find("NUL"), std::string::npos) << forced.error();
  // Forced deliveries.
  EXPECT_FALSE(command({.prompt_delivery = pi_prompt_delivery::argv}, big).stdin_text);
  EXPECT_TRUE(command({.prompt_delivery = pi_prompt_delivery::stdin}, "hi").stdin_text);
}

TEST(PiPromptDelivery, StdinKeepsWhatPiWouldTrimInTheArgument) {
  const pi_options o{.prompt_delivery = pi_prompt_delivery::stdin};
  auto c = command(o, "fix it \n\t");
  ASSERT_TRUE(c.stdin_text);
  EXPECT_EQ(*c.stdin_text, "fix it");
  EXPECT_EQ(c.args.back(), " \n\t") << "trailing whitespace follows as the argument, which pi appends unchanged";
  EXPECT_EQ(c.args[c.args.size() - 2], "-p");
  auto n = command({.pi_version = version{1, 6, 0}, .prompt_delivery = pi_prompt_delivery::stdin}, "x\n");
  EXPECT_EQ(n.args[n.args.size() - 2], "--");
  EXPECT_EQ(n.args.back(), "\n");
  // Leading whitespace is dropped (pi trims stdin and nothing can come before it), Unicode spaces included.
  auto lead = command(o, "\xEF\xBB\xBF\xC2\xA0 \n body\xE3\x80\x80");
  EXPECT_EQ(*lead.stdin_text, "body");
  EXPECT_EQ(lead.args.back(), "\xE3\x80\x80");
  EXPECT_EQ(pi_sees(lead), "body\xE3\x80\x80");
  // Not whitespace for JS (U+200B ZERO WIDTH SPACE, U+0085 NEL): kept on stdin.
  auto zw = command(o, "a\xE2\x80\x8B\xC2\x85");
  EXPECT_EQ(*zw.stdin_text, "a\xE2\x80\x8B\xC2\x85");
  EXPECT_EQ(zw.args.back(), "-p");
  // Only whitespace: nothing on stdin, the argument carries it. Empty: nothing at all.
  auto blank = command(o, " \n ");
  EXPECT_EQ(*blank.stdin_text, "");
  EXPECT_EQ(blank.args.back(), " \n ");
  auto empty = command(o, "");
  EXPECT_EQ(*empty.stdin_text, "");
  EXPECT_EQ(empty.args.back(), "-p");
}

TEST(PiPromptDelivery, PiSeesThePromptWithoutLeadingWhitespaceForRandomPrompts) {
  std::vector<std::string> pieces = js_spaces;
  for (const char* p : {"a", "-", "@", "Z", "\xC3\xA9", "\xE2\x80\x8B", "\xF0\x9F\x98\x80", "$(id)", "\xE2"}) pieces.emplace_back(p);
  std::uint64_t state = 42;
  auto next = [&] { return (state = state * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  for (int i = 0; i < 2000; ++i) {
    std::string prompt;
    for (auto n = next() % 12; n > 0; --n) prompt += pieces[next() % pieces.size()];
    for (const auto& v : {std::optional<version>{}, std::optional(version{1, 6, 0})}) {
      const pi_options o{.pi_version = v, .prompt_delivery = pi_prompt_delivery::stdin};
      const auto c = command(o, prompt);
      ASSERT_TRUE(c.stdin_text);
      EXPECT_EQ(js_trim(*c.stdin_text), *c.stdin_text) << "stdin must be what trim() leaves unchanged";
      // Leading whitespace is dropped, unless the prompt is nothing but whitespace (then it is the argument).
      std::string expected = prompt;
      for (bool again = !js_trim(prompt).empty(); again;) {
        again = false;
        for (const auto& w : js_spaces)
          if (expected.compare(0, w.size(), w) == 0) expected.erase(0, w.size()), again = true;
      }
      const std::string seen = pi_sees(c);
      EXPECT_EQ(seen, expected) << "prompt of " << prompt.size() << " bytes, case " << i;
    }
  }
}

TEST(PiPromptDelivery, RunOptionsAndSpawnOptions) {
  const std::string big(std::size_t{1} << 20, 'q');
  auto r = make_pi_run({}, big);
  ASSERT_TRUE(r.spawn);
  EXPECT_EQ(r.spawn->stdin_mode, agenthost::process::stdin_kind::pipe);
  ASSERT_TRUE(r.run.stdin_data);
  EXPECT_EQ(*r.run.stdin_data, big);
  EXPECT_EQ(r.run.stop.interrupt_signal, SIGTERM) << "the rest of options.run is kept";
  auto s = pi_spawn_options({}, big);
  ASSERT_FALSE(s) << "nothing would write the prompt";
  EXPECT_NE(s.error().find("make_pi_run"), std::string::npos);
  auto small = make_pi_run({}, "x");
  EXPECT_FALSE(small.run.stdin_data);
  EXPECT_EQ(small.spawn->stdin_mode, agenthost::process::stdin_kind::null);
  pi_options preset;
  preset.run.stdin_data = "mine";
  EXPECT_FALSE(build_pi_command(preset, "x")) << "stdin_data is the provider's";
}

TEST(Version, Parse) {
  EXPECT_EQ(version::parse("0.73.1"), (version{0, 73, 1}));
  EXPECT_EQ(version::parse("pi version 1.6.0\n"), (version{1, 6, 0}));
  EXPECT_EQ(version::parse("v10.20.30-beta"), (version{10, 20, 30}));
  EXPECT_FALSE(version::parse("no version"));
  EXPECT_FALSE(version::parse("1.2"));
  EXPECT_LT((version{0, 73, 1}), (version{1, 6, 0}));
}
