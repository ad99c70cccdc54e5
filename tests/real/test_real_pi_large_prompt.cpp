// The real pi CLI (npm, scripts/install-agents.sh) with prompts above Linux's argument limit: a 1 MiB prompt goes
// through pi's stdin (pi_options::prompt_delivery = automatic) and must reach the model intact. The mock model server
// (tests/mockmodel) logs each request's user messages as sizes and CRC-32s (prompt_digest.py); the test compares
// them with the prompt it sent, and reports how long the 1 MiB run took next to a small-prompt run.
//
// Skips (naming why) when pi is not installed or python3 is missing. AGENTHOST_REAL_PI overrides the pi executable.
#include "real_cli_util.hpp"

#include <agenthost/providers/pi.hpp>
#include <agenthost/transport/contract_checker.hpp>

#include <boost/crc.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <iostream>

using namespace agenthost;
using namespace agenthost::test;
using namespace agenthost::test::real;

namespace {

std::uint32_t crc32(std::string_view s) {
  boost::crc_32_type c;
  c.process_bytes(s.data(), s.size());
  return c.checksum();
}

// 1 MiB of valid UTF-8 text of every kind a prompt has (code, shell syntax, flags, @file, CJK, emoji, tabs, CRLF, a
// control character), ending in a non-space.
std::string mebibyte_text() {
  static const char* const pieces[] = {"fix the failing test in src/main.cpp ", "\n", "$(touch /tmp/pwned) ", "`id` ",
                                       "--help ", "@/etc/passwd ", "caf\xC3\xA9 ", "\xE4\xBD\xA0\xE5\xA5\xBD ",
                                       "\xF0\x9F\x98\x80", "\t", "\r\n", "\x01", "{\"json\": [1, 2]} ", "'\"\\ "};
  std::string s;
  std::uint64_t state = 3;
  while (s.size() < (std::size_t{1} << 20)) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    s += pieces[(state >> 33) % std::size(pieces)];
  }
  while (s.size() > (std::size_t{1} << 20) - 1) s.pop_back();
  while ((static_cast<unsigned char>(s.back()) & 0xC0) == 0x80 || static_cast<unsigned char>(s.back()) >= 0xC0)
    s.pop_back();  // no cut UTF-8 sequence at the end
  s.resize((std::size_t{1} << 20) - 1, 'x');
  s += '.';
  return s;
}

class RealPiLargePrompt : public real_cli_test {
 protected:
  RealPiLargePrompt() : real_cli_test("pi-large", "AGENTHOST_TEST_TOKEN") {}

  void SetUp() override {
    start(pi_unavailable_reason(), {dir + "/home", dir + "/agent"});
    if (stopped_early()) return;
    const std::string base_url = mock->base_url();
    const json models = {{"providers",
                          {{"mock",
                            {{"baseUrl", base_url},
                             {"api", "openai-completions"},
                             {"apiKey", "mock-key"},
                             {"compat", {{"supportsDeveloperRole", false}, {"supportsUsageInStreaming", true}}},
                             {"models", json::array({{{"id", "answer"}, {"contextWindow", 2000000},
                                                      {"maxTokens", 4096}}})}}}}}};
    std::ofstream(dir + "/agent/models.json") << models.dump(2);
    std::ofstream(dir + "/agent/settings.json") << json{{"retry", {{"enabled", false}}}}.dump(2);
  }

  providers::pi_options options() const {
    providers::pi_options o{.executable = pi_executable(),
                            .provider = "mock",
                            .model = "answer",
                            .no_session = true,
                            .working_directory = work,
                            .env = environment({"OPENAI_API_KEY", "OPENAI_BASE_URL"},
                                               {{"HOME", dir + "/home"},
                                                {"PI_CODING_AGENT_DIR", dir + "/agent"},
                                                {"PI_OFFLINE", "1"},
                                                {"PI_SKIP_VERSION_CHECK", "1"}}),
                            .pi_version = providers::version::parse(pi_version_string()),
                            .reaper_path = AGENTHOST_REAPER};
    o.run.deadline = std::chrono::seconds(90);
    return o;
  }

  struct result {
    message terminal;
    std::vector<message> messages;
    std::chrono::milliseconds elapsed{};
  };

  result run(const providers::pi_options& o, const std::string& prompt) {
    result r;
    bool done = false;
    const auto t0 = std::chrono::steady_clock::now();
    providers::async_run_pi(io.get_executor(), o, prompt, [&](const message& m) { r.messages.push_back(m); },
                            [&](boost::system::error_code, message t) {
                              r.terminal = std::move(t);
                              done = true;
                            });
    EXPECT_TRUE(run_until(io, [&] { return done; }, 120s)) << "the run did not end within 120 s";
    r.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    EXPECT_EQ(transport::check_run(r.messages), std::vector<std::string>{});
    EXPECT_EQ(processes_with_env(run_mark()), std::vector<int>{}) << "processes left behind";
    return r;
  }

  // The user messages of the mock's last request.
  json last_user_digests() const {
    const json last = mock->last_request();
    return last.is_object() ? last.value("user_digests", json::array()) : json::array();
  }
};

TEST_F(RealPiLargePrompt, MebibytePromptReachesTheModelIntactThroughStdin) {
  // Baseline: a small prompt through argv.
  const auto small = run(options(), "Say the answer.");
  ASSERT_EQ(small.terminal.type, message_type::terminal_completed) << small.terminal.to_json_line();
  auto digests = last_user_digests();
  ASSERT_EQ(digests.size(), 1u) << digests.dump();
  EXPECT_EQ(digests[0].at("bytes"), 15);
  EXPECT_EQ(digests[0].at("crc32"), crc32("Say the answer."));

  // 1 MiB, with leading and trailing whitespace: pi trims its stdin, so the provider passes the trailing whitespace
  // as the argument (pi appends it) and the leading whitespace is dropped — documented in pi.hpp.
  const std::string body = mebibyte_text();
  const std::string prompt = "  \n" + body + "\n\n";
  const std::string expected = body + "\n\n";
  auto cmd = providers::build_pi_command(options(), prompt);
  ASSERT_TRUE(cmd);
  ASSERT_TRUE(cmd->stdin_text) << "a 1 MiB prompt goes through stdin";
  const auto large = run(options(), prompt);
  ASSERT_EQ(large.terminal.type, message_type::terminal_completed) << large.terminal.to_json_line().substr(0, 2000);
  digests = last_user_digests();
  ASSERT_EQ(digests.size(), 1u) << digests.dump().substr(0, 2000);
  EXPECT_EQ(digests[0].at("bytes"), expected.size());
  EXPECT_EQ(digests[0].at("crc32"), crc32(expected)) << "head " << digests[0].at("head") << " tail "
                                                      << digests[0].at("tail");
  std::cout << "[figure] real pi " << pi_version_string() << ": small prompt (argv) run " << small.elapsed.count()
            << " ms; 1 MiB prompt (stdin) run " << large.elapsed.count() << " ms; difference "
            << (large.elapsed - small.elapsed).count() << " ms\n";
}

TEST_F(RealPiLargePrompt, AtFilePromptIsTextNotAFile) {
  // pi reads an argument starting with '@' as a file to attach; the provider sends such a prompt through stdin.
  const std::string prompt = "@/etc/hostname is a path, not an attachment";
  const auto r = run(options(), prompt);
  ASSERT_EQ(r.terminal.type, message_type::terminal_completed) << r.terminal.to_json_line();
  const auto digests = last_user_digests();
  ASSERT_EQ(digests.size(), 1u) << digests.dump();
  EXPECT_EQ(digests[0].at("bytes"), prompt.size()) << digests.dump();
  EXPECT_EQ(digests[0].at("crc32"), crc32(prompt)) << digests.dump();
}

}  // namespace
