// The real Claude Code CLI (`@anthropic-ai/claude-code`, installed by scripts/install-agents.sh into
// .npm-agents/claude-code/) against the scripted mock model server (tests/mockmodel/, Anthropic Messages wire). There
// is no Claude provider or mapper yet, so the test drives `claude -p --output-format stream-json --verbose
// --include-partial-messages` through agenthost::process::child, parses its JSONL itself and checks it against the
// script: streamed text and thinking deltas, the full assistant frames that repeat them, the Bash tool call and its
// result, the final `result`, HTTP failures, and that a three-phase stop (mid-stream, during a `sleep 30` tool)
// leaves no process behind.
//
// Skips (naming why) when claude is not installed or python3 is missing. AGENTHOST_REAL_CLAUDE overrides the
// executable. AGENTHOST_RECORD_FIXTURES=1 writes what claude printed into fixtures/claude-code/recorded/<scenario>.jsonl.
#include "real_cli_util.hpp"

#include <gtest/gtest.h>

using namespace agenthost;
using namespace agenthost::test;
using namespace agenthost::test::real;

namespace {

const std::string prefix = source_dir + "/.npm-agents/claude-code";

std::string claude_executable() {
  return cli_executable("AGENTHOST_REAL_CLAUDE", prefix + "/node_modules/.bin/claude");
}

std::string claude_version() {
  return npm_package_version(prefix + "/node_modules/@anthropic-ai/claude-code/package.json");
}

std::string unavailable_reason() {
  if (auto why = real::unavailable_reason("claude", claude_executable(), "install-status-claude-code.txt",
                                          "AGENTHOST_REAL_CLAUDE");
      !why.empty())
    return why;
  const std::string status = first_line(read_file(source_dir + "/.npm-agents/install-status-claude-code.txt"));
  if (std::getenv("AGENTHOST_REAL_CLAUDE") == nullptr && status.rfind("ok:", 0) != 0)
    return "scripts/install-agents.sh did not report Claude Code as installed (" +
           (status.empty() ? std::string("no .npm-agents/install-status-claude-code.txt") : status) +
           ") — run it again, or set AGENTHOST_REAL_CLAUDE";
  return {};
}

const char* const prompt = "Do what the scenario says.";

// A path as Claude Code names its project folder (every '/' and '.' a '-').
std::string munged(std::string path) {
  for (auto& c : path)
    if (c == '/' || c == '.') c = '-';
  return path;
}

class RealClaude : public real_cli_test {
 protected:
  RealClaude() : real_cli_test("claude") {}

  void SetUp() override { start(unavailable_reason(), {dir + "/home", config_dir, dir + "/tmp"}); }

  // Isolated: own HOME and config dir, the mock as the API, no traffic besides model calls, one retry of a failed
  // model call (instead of ten with backoff up to ~35 s). The scenario is the model id. Bash is allowed by rule:
  // --permission-mode bypassPermissions / --dangerously-skip-permissions are refused when running as root.
  process::spawn_options spawn_options(const std::string& scenario) const {
    return {.executable = claude_executable(),
            .args = {"-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages", "--model",
                     scenario, "--allowedTools=Bash", "--", prompt},
            .working_directory = work,
            .env = {.unset = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                              "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_MODEL", "ANTHROPIC_CUSTOM_HEADERS",
                              "ANTHROPIC_SMALL_FAST_MODEL", "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT",
                              "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "NODE_OPTIONS"},
                    .set = {{"HOME", dir + "/home"},
                            {"CLAUDE_CONFIG_DIR", config_dir},
                            // Its messaging socket (cc-socks/<pid>.sock, left behind when it is killed) and tmp files.
                            {"TMPDIR", dir + "/tmp"},
                            {"ANTHROPIC_BASE_URL", mock->origin()},
                            {"ANTHROPIC_API_KEY", "mock-key"},
                            {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"},
                            {"CLAUDE_CODE_MAX_RETRIES", "1"},
                            {"NO_PROXY", "127.0.0.1,localhost"},
                            {"AGENTHOST_TEST_RUN", mark}}},
            .stdin_mode = process::stdin_kind::null,
            .reaper_path = AGENTHOST_REAPER};
  }

  cli_result run(const std::string& scenario, const std::function<bool(const cli_result&)>& stop_when = {},
                 process::stop_policy policy = process::stop_policy::ctrl_c(), const std::string& record_as = {}) {
    auto r = run_cli(io, spawn_options(scenario), stop_when, policy);
    expect_clean_end("claude", scenario, r, run_mark());
    const std::string port = std::to_string(mock->port());
    record_fixture("claude-code", (record_as.empty() ? scenario : record_as) + ".jsonl", r.lines,
                   {{work, "/home/user/project"},
                    {dir, "/home/user"},
                    {munged(work), "-home-user-project"},  // the project's key under the config dir
                    {"127.0.0.1:" + port, "127.0.0.1:18765"}});
    return r;
  }

  std::string config_dir = dir + "/claude-config";
};

// The raw API events Claude relays (`stream_event`, main agent only), in order.
std::vector<const json*> api_events(const cli_result& r) {
  std::vector<const json*> out;
  for (const auto* e : r.of_type("stream_event"))
    if (e->at("parent_tool_use_id").is_null()) out.push_back(&e->at("event"));
  return out;
}

// Every delta of `kind` ("text_delta" → "text", "thinking_delta" → "thinking"), in order.
std::vector<std::string> deltas(const cli_result& r, const std::string& kind, const std::string& field) {
  std::vector<std::string> out;
  for (const auto* ev : api_events(r))
    if (ev->value("type", "") == "content_block_delta" && ev->at("delta").value("type", "") == kind)
      out.push_back(ev->at("delta").at(field).get<std::string>());
  return out;
}

// The streamed deltas of `kind` joined per content block (one string per block that had any), in order.
std::vector<std::string> streamed_blocks(const cli_result& r, const std::string& kind, const std::string& field) {
  std::vector<std::string> out;
  bool open = false;
  for (const auto* ev : api_events(r)) {
    const std::string t = ev->value("type", "");
    if (t == "content_block_start") {
      open = false;
    } else if (t == "content_block_delta" && ev->at("delta").value("type", "") == kind) {
      if (!open) out.emplace_back();
      open = true;
      out.back() += ev->at("delta").at(field).get<std::string>();
    }
  }
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x;
  return s;
}

// The content blocks of the full `assistant` frames (each frame holds one block), in order.
std::vector<const json*> frame_blocks(const cli_result& r, const std::string& type = {}) {
  std::vector<const json*> out;
  for (const auto* e : r.of_type("assistant"))
    for (const auto& b : e->at("message").at("content"))
      if (type.empty() || b.value("type", "") == type) out.push_back(&b);
  return out;
}

std::vector<std::string> frame_texts(const cli_result& r, const std::string& type, const std::string& field) {
  std::vector<std::string> out;
  for (const auto* b : frame_blocks(r, type)) out.push_back(b->at(field).get<std::string>());
  return out;
}

const json& result_event(const cli_result& r) {
  static const json none;
  const auto results = r.of_type("result");
  return results.empty() ? none : *results.back();
}

// The frame of every run: system/init first (with the scenario as model and the work dir as cwd), every line JSON.
void expect_run_frame(const cli_result& r, const std::string& scenario, const std::string& cwd) {
  ASSERT_FALSE(r.events.empty()) << r.dump();
  EXPECT_EQ(r.lines.size(), r.events.size()) << "every stdout line is a JSON object\n" << r.dump();
  const auto& init = r.events.front();
  EXPECT_EQ(init.value("type", ""), "system");
  EXPECT_EQ(init.value("subtype", ""), "init");
  EXPECT_EQ(init.value("model", ""), scenario);
  EXPECT_EQ(init.value("cwd", ""), cwd);
  EXPECT_EQ(init.value("claude_code_version", ""), claude_version());
  const auto tools = init.value("tools", json::array());
  EXPECT_NE(std::find(tools.begin(), tools.end(), "Bash"), tools.end()) << init.dump();
  // One session throughout.
  for (const auto& e : r.events) {
    if (e.contains("session_id")) {
      EXPECT_EQ(e.at("session_id"), init.at("session_id")) << e.dump();
    }
  }
}

// Each API response Claude relays is whole and well-formed: message_start … message_stop, blocks started, delta'd and
// stopped by index. Returns the number of messages.
std::size_t expect_well_formed_api_stream(const cli_result& r) {
  std::size_t messages = 0;
  bool in_message = false;
  int open_block = -1, next_index = 0;
  for (const auto* ev : api_events(r)) {
    const std::string t = ev->value("type", "");
    if (t == "message_start") {
      EXPECT_FALSE(in_message);
      in_message = true;
      next_index = 0;
      ++messages;
    } else if (t == "content_block_start") {
      EXPECT_TRUE(in_message);
      EXPECT_EQ(open_block, -1);
      EXPECT_EQ(ev->value("index", -1), next_index);
      open_block = next_index++;
    } else if (t == "content_block_delta") {
      EXPECT_EQ(ev->value("index", -2), open_block);
    } else if (t == "content_block_stop") {
      EXPECT_EQ(ev->value("index", -2), open_block);
      open_block = -1;
    } else if (t == "message_stop") {
      EXPECT_TRUE(in_message);
      EXPECT_EQ(open_block, -1);
      in_message = false;
    }
  }
  EXPECT_FALSE(in_message) << "a message was not stopped";
  return messages;
}

// The text and thinking the model streamed, exactly once as deltas and once more as full frames (one `assistant`
// frame per content block: the duplicate a consumer must drop).
void expect_script(const cli_result& r, const script& s) {
  EXPECT_EQ(deltas(r, "text_delta", "text"), s.text_chunks) << r.dump();
  EXPECT_EQ(joined(deltas(r, "text_delta", "text")), s.text());
  EXPECT_EQ(streamed_blocks(r, "text_delta", "text"), s.texts);
  EXPECT_EQ(streamed_blocks(r, "thinking_delta", "thinking"), s.thoughts) << r.dump();
  EXPECT_EQ(frame_texts(r, "text", "text"), s.texts);
  EXPECT_EQ(frame_texts(r, "thinking", "thinking"), s.thoughts);
  for (const auto* b : frame_blocks(r, "thinking")) EXPECT_FALSE(b->value("signature", "").empty());
}

void expect_success_result(const cli_result& r, const script& s, int turns, int input_tokens, int output_tokens) {
  const json& res = result_event(r);
  ASSERT_TRUE(res.is_object()) << "no result\n" << r.dump();
  EXPECT_EQ(&res, &r.events.back()) << "the result is the last line";
  EXPECT_EQ(r.of_type("result").size(), 1u);
  EXPECT_EQ(res.value("subtype", ""), "success");
  EXPECT_EQ(res.value("is_error", true), false);
  EXPECT_EQ(res.value("result", ""), s.last_text);
  EXPECT_EQ(res.value("num_turns", 0), turns);
  EXPECT_EQ(res.value("stop_reason", ""), "end_turn");
  EXPECT_EQ(res.value("terminal_reason", ""), "completed");
  EXPECT_TRUE(res.at("api_error_status").is_null());
  EXPECT_EQ(res.at("usage").value("input_tokens", 0), input_tokens);
  EXPECT_EQ(res.at("usage").value("output_tokens", 0), output_tokens);
  EXPECT_EQ(r.exit_code(), 0) << r.dump();
}

TEST_F(RealClaude, ToolCallWithThinkingAndANonAsciiAnswer) {
  const auto s = scripted("tool");
  auto r = run("tool");
  expect_run_frame(r, "tool", work);
  EXPECT_EQ(expect_well_formed_api_stream(r), 2u);
  expect_script(r, s);
  expect_success_result(r, s, 2, 200, 12 + 16);

  // Exactly one Bash tool_use: streamed (start + input_json_delta pieces) and as a full frame with the parsed input.
  const auto& call = s.tool_calls.at(0);
  const auto uses = frame_blocks(r, "tool_use");
  ASSERT_EQ(uses.size(), 1u) << r.dump();
  EXPECT_EQ(uses[0]->at("id"), call.at("id"));
  EXPECT_EQ(uses[0]->at("name"), "Bash");
  EXPECT_EQ(uses[0]->at("input"), call.at("arguments"));
  EXPECT_EQ(json::parse(joined(deltas(r, "input_json_delta", "partial_json"))), call.at("arguments"));
  EXPECT_GT(deltas(r, "input_json_delta", "partial_json").size(), 3u);

  // Its result: one user line with the tool_result (the output without its trailing newline) and the raw stdout.
  const auto users = r.of_type("user");
  ASSERT_EQ(users.size(), 1u) << r.dump();
  const auto& content = users[0]->at("message").at("content");
  ASSERT_EQ(content.size(), 1u);
  EXPECT_EQ(content[0].at("type"), "tool_result");
  EXPECT_EQ(content[0].at("tool_use_id"), call.at("id"));
  EXPECT_EQ(content[0].at("content"), "agenthost-tool-output");
  EXPECT_EQ(content[0].value("is_error", true), false);
  EXPECT_EQ(users[0]->at("tool_use_result").at("stdout"), "agenthost-tool-output");
  EXPECT_EQ(users[0]->at("tool_use_result").at("interrupted"), false);

  // Order of the full frames and the tool result: thinking, text, tool_use, result, thinking, text, result.
  std::vector<std::string> order;
  for (const auto& e : r.events) {
    const std::string t = e.value("type", "");
    if (t == "assistant")
      order.push_back("assistant:" + e.at("message").at("content").at(0).value("type", ""));
    else if (t == "user" || t == "result")
      order.push_back(t);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"assistant:thinking", "assistant:text", "assistant:tool_use", "user",
                                             "assistant:thinking", "assistant:text", "result"}))
      << r.dump();
  // No request besides the two model calls of the scenario (no title, quota or token-count calls).
  EXPECT_EQ(mock->requests_of("tool"), (std::vector<std::string>{"complete@turn0", "complete@turn1"}));
  std::size_t requests = 0;
  for (const auto& rec : mock->records())
    if (rec.contains("method")) ++requests;
  EXPECT_EQ(requests, 2u);
}

TEST_F(RealClaude, AnswerWithoutTools) {
  const auto s = scripted("answer");
  auto r = run("answer");
  expect_run_frame(r, "answer", work);
  EXPECT_EQ(expect_well_formed_api_stream(r), 1u);
  expect_script(r, s);
  expect_success_result(r, s, 1, 100, 15);
  EXPECT_TRUE(frame_blocks(r, "tool_use").empty());
  EXPECT_TRUE(r.of_type("user").empty());
  EXPECT_EQ(mock->requests_of("answer"), (std::vector<std::string>{"complete@turn0"}));
}

// An HTTP error: Claude retries once (CLAUDE_CODE_MAX_RETRIES=1, a system/api_retry line), then prints a synthetic
// assistant message with the error text and a result that is subtype "success" with is_error true, and exits 1.
void expect_http_failure(const cli_result& r, int status, const std::string& retry_error,
                         const std::string& api_error_type, const std::string& text) {
  EXPECT_EQ(r.exit_code(), 1) << r.dump();
  const auto retries = r.of_type("system");
  std::vector<const json*> api_retries;
  for (const auto* e : retries)
    if (e->value("subtype", "") == "api_retry") api_retries.push_back(e);
  ASSERT_EQ(api_retries.size(), 1u) << r.dump();
  EXPECT_EQ(api_retries[0]->at("attempt"), 1);
  EXPECT_EQ(api_retries[0]->at("max_retries"), 1);
  EXPECT_EQ(api_retries[0]->at("error_status"), status);
  EXPECT_EQ(api_retries[0]->at("error"), retry_error);
  EXPECT_TRUE(deltas(r, "text_delta", "text").empty());
  const auto frames = r.of_type("assistant");
  ASSERT_EQ(frames.size(), 1u) << r.dump();
  EXPECT_EQ(frames[0]->at("message").at("model"), "<synthetic>");
  EXPECT_EQ(frame_texts(r, "text", "text"), std::vector<std::string>{text});
  const json& res = result_event(r);
  ASSERT_TRUE(res.is_object()) << r.dump();
  EXPECT_EQ(&res, &r.events.back());
  EXPECT_EQ(res.value("subtype", ""), "success");
  EXPECT_EQ(res.value("is_error", false), true);
  EXPECT_EQ(res.value("api_error_status", 0), status);
  EXPECT_EQ(res.value("api_error_type", ""), api_error_type);
  EXPECT_EQ(res.value("terminal_reason", ""), "api_error");
  EXPECT_EQ(res.value("result", ""), text);
}

TEST_F(RealClaude, Http500IsAnErrorResultAfterOneRetry) {
  auto r = run("http500");
  expect_run_frame(r, "http500", work);
  expect_http_failure(r, 500, "server_error", "api_error",
                      "API Error: 500 mock internal server error. This is a server-side issue, usually temporary — "
                      "try again in a moment. If it persists, check your inference gateway (" +
                          mock->origin().substr(7) + ").");
  EXPECT_EQ(mock->requests_of("http500"), (std::vector<std::string>{"http_error@turn0", "http_error@turn0"}));
}

TEST_F(RealClaude, Http429IsAnErrorResultAfterOneRetry) {
  auto r = run("http429");
  expect_run_frame(r, "http429", work);
  expect_http_failure(r, 429, "rate_limit", "rate_limit_error", "API Error: Request rejected (429) · mock rate limit exceeded");
  EXPECT_EQ(mock->requests_of("http429"), (std::vector<std::string>{"http_error@turn0", "http_error@turn0"}));
}

// What Claude prints last after SIGINT: one result, subtype error_during_execution, is_error, the abort reason.
// Sometimes (~20 % of the runs on a loaded 2-core machine, never on an idle one) Claude exits 0 after SIGINT without
// printing the interruption's lines and result — the silent exit of SigintBetweenToolUseAndToolStartExits0WithoutAResult,
// hit when the signal lands while Claude is between states: returns false then, and says so.
bool interrupted_result(const cli_result& r, const std::string& terminal_reason) {
  const auto results = r.of_type("result");
  EXPECT_LE(results.size(), 1u) << r.dump();
  if (results.empty()) {
    std::cout << "[ real claude ] NOTE: claude exited (" << r.status_text() << ") after SIGINT without a result line ("
              << r.lines.size() << " lines)\n";
    return false;
  }
  const json& res = *results.back();
  EXPECT_EQ(&res, &r.events.back()) << "the result is the last line";
  EXPECT_EQ(res.value("subtype", ""), "error_during_execution");
  EXPECT_EQ(res.value("is_error", false), true);
  EXPECT_EQ(res.value("terminal_reason", ""), terminal_reason);
  const auto errors = res.value("errors", json::array());
  EXPECT_EQ(errors.size(), 1u) << res.dump();
  if (!errors.empty()) {
    EXPECT_EQ(errors.at(0).get<std::string>().rfind("[ede_diagnostic] result_type=user", 0), 0u) << res.dump();
  }
  return true;
}

// A process that still exists and is not a zombie.
bool alive(int pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

// The process layer's stop (SIGINT to the group, 2 s grace, SIGKILL to the tree) while the model streams (40 s).
TEST_F(RealClaude, CancellationMidStream) {
  const auto s = scripted("slow");
  auto r = run("slow", [](const cli_result& now) { return !deltas(now, "text_delta", "text").empty(); });
  ASSERT_TRUE(r.stop.has_value()) << "no text was streamed\n" << r.dump();
  expect_run_frame(r, "slow", work);
  const std::string got = joined(deltas(r, "text_delta", "text"));
  EXPECT_FALSE(got.empty());
  EXPECT_LT(got.size(), s.text().size());
  EXPECT_EQ(s.text().substr(0, got.size()), got) << "what was streamed before the stop is a prefix of the script";
  // SIGINT is a graceful interrupt for Claude Code: it closes the message it was streaming (a synthetic message_delta
  // without stop_reason and a message_stop marked `abandoned_blocks`), prints an error result and exits 0.
  EXPECT_EQ(r.stop->phase, process::stop_phase::interrupt) << "claude did not exit on SIGINT within the grace period";
  EXPECT_EQ(r.exit_code(), 0) << r.dump();
  if (interrupted_result(r, "aborted_streaming")) {
    const auto stops = r.of_type("stream_event");
    ASSERT_FALSE(stops.empty());
    EXPECT_EQ(stops.back()->at("event").value("type", ""), "message_stop");
    EXPECT_TRUE(stops.back()->contains("abandoned_blocks")) << stops.back()->dump();
    // The text streamed so far also comes once as a full frame, then a "[Request interrupted by user]" user line.
    EXPECT_EQ(frame_texts(r, "text", "text"), std::vector<std::string>{got}) << r.dump();
    const auto users = r.of_type("user");
    ASSERT_EQ(users.size(), 1u) << r.dump();
    EXPECT_EQ(users[0]->at("message").at("content").at(0).value("text", ""), "[Request interrupted by user]");
  }
  std::cout << "[ real claude ] SIGINT mid-stream: claude " << r.status_text() << ", "
            << r.of_type("result").size() << " result line(s), last lines:\n"
            << (r.lines.size() > 3 ? r.lines[r.lines.size() - 3] + "\n" + r.lines[r.lines.size() - 2] + "\n" : "")
            << (r.lines.empty() ? "" : r.lines.back()) << "\n";
  EXPECT_LT(r.elapsed, std::chrono::seconds(20)) << "the stream takes 40 s; the stop must not wait for it";
}

// Claude Code's Bash refuses a command that starts with a long sleep (the scenario `long-tool`, `sleep 30`): the tool
// result is an error telling the model to use Monitor or run_in_background, and the run goes on to the next turn.
TEST_F(RealClaude, StandaloneSleep30IsBlockedByClaudesBash) {
  auto r = run("long-tool");
  expect_run_frame(r, "long-tool", work);
  const auto users = r.of_type("user");
  ASSERT_EQ(users.size(), 1u) << r.dump();
  const auto& result = users[0]->at("message").at("content").at(0);
  EXPECT_EQ(result.at("tool_use_id"), "call_mock_sleep_1");
  EXPECT_EQ(result.value("is_error", false), true);
  EXPECT_EQ(result.at("content").get<std::string>().rfind("<tool_use_error>Blocked: standalone sleep 30.", 0), 0u)
      << result.dump();
  EXPECT_EQ(process_named(run_mark(), "sleep"), std::nullopt);
  EXPECT_EQ(result_event(r).value("result", ""), "The sleep finished.");
  EXPECT_EQ(r.exit_code(), 0);
}

// The stop during a running tool (`echo sleeping; sleep 30`, which Claude's Bash accepts): the tool's sleep dies
// with the tree.
TEST_F(RealClaude, CancellationDuringAToolKillsTheToolProcess) {
  std::optional<int> sleep_pid;
  auto r = run("long-tool-echo", [&](const cli_result& now) {
    if (frame_blocks(now, "tool_use").empty()) return false;
    if (!sleep_pid) sleep_pid = process_named(run_mark(), "sleep");
    return sleep_pid.has_value();
  });
  ASSERT_TRUE(sleep_pid.has_value()) << "the tool's sleep never ran\n" << r.dump();
  ASSERT_TRUE(r.stop.has_value());
  expect_run_frame(r, "long-tool-echo", work);
  EXPECT_EQ(frame_texts(r, "text", "text"), std::vector<std::string>{"Sleeping."});
  const auto uses = frame_blocks(r, "tool_use");
  ASSERT_EQ(uses.size(), 1u) << r.dump();
  EXPECT_EQ(uses[0]->at("input").at("command"), "echo sleeping; sleep 30");
  EXPECT_EQ(process_named(run_mark(), "sleep"), std::nullopt) << "the tool's sleep survived";
  EXPECT_FALSE(alive(*sleep_pid)) << "the tool's sleep survived";
  // Claude ends the tool call as rejected by the user, adds an interruption note, prints an error result, exits 0.
  EXPECT_EQ(r.stop->phase, process::stop_phase::interrupt) << "claude did not exit on SIGINT within the grace period";
  EXPECT_EQ(r.exit_code(), 0) << r.dump();
  if (interrupted_result(r, "aborted_tools")) {
    const auto users = r.of_type("user");
    ASSERT_EQ(users.size(), 2u) << r.dump();
    const auto& rejected = users[0]->at("message").at("content").at(0);
    EXPECT_EQ(rejected.at("tool_use_id"), "call_mock_sleep_2");
    EXPECT_EQ(rejected.value("is_error", false), true);
    EXPECT_EQ(users[0]->at("tool_use_result"), "User rejected tool use");
    EXPECT_EQ(users[1]->at("message").at("content").at(0).value("text", ""),
              "[Request interrupted by user for tool use]");
  }
  std::cout << "[ real claude ] SIGINT during the tool: claude " << r.status_text() << ", "
            << r.of_type("result").size() << " result line(s), last lines:\n"
            << (r.lines.size() > 3 ? r.lines[r.lines.size() - 3] + "\n" + r.lines[r.lines.size() - 2] + "\n" : "")
            << (r.lines.empty() ? "" : r.lines.back()) << "\n";
  EXPECT_LT(r.elapsed, std::chrono::seconds(20)) << "the tool sleeps 30 s; the stop must not wait for it";
}

// SIGINT to the CLI alone (not its process group): does Claude stop its running tool itself? The stop reports in which
// phase the tree was gone; the tree is gone in any case.
TEST_F(RealClaude, SigintToTheCliAloneDuringATool) {
  std::optional<int> sleep_pid;
  auto policy = process::stop_policy::ctrl_c();
  policy.interrupt_target = process::signal_target::leader;
  auto r = run("long-tool-echo", [&](const cli_result& now) {
    if (frame_blocks(now, "tool_use").empty()) return false;
    if (!sleep_pid) sleep_pid = process_named(run_mark(), "sleep");
    return sleep_pid.has_value();
  }, policy, "long-tool-echo-sigint-cli-only");
  ASSERT_TRUE(sleep_pid.has_value()) << "the tool's sleep never ran\n" << r.dump();
  ASSERT_TRUE(r.stop.has_value());
  EXPECT_FALSE(alive(*sleep_pid)) << "the tool's sleep survived";
  EXPECT_EQ(r.stop->phase, process::stop_phase::interrupt) << "claude left its tool running after SIGINT";
  EXPECT_EQ(r.exit_code(), 0) << r.dump();
  interrupted_result(r, "aborted_tools");
  std::cout << "[ real claude ] SIGINT to the CLI alone during the tool: claude " << r.status_text() << "\n";
}

// SIGINT right after the tool_use frame, before the tool runs: Claude 2.1.332 exits 0 at once, without closing the
// API message (no message_delta / message_stop), without a tool result and without a result line — the same silent
// exit that, on a loaded machine, also hits a SIGINT while the tool's process is just starting.
TEST_F(RealClaude, SigintBetweenToolUseAndToolStartExits0WithoutAResult) {
  auto r = run("long-tool-echo", [](const cli_result& now) { return !frame_blocks(now, "tool_use").empty(); },
               process::stop_policy::ctrl_c(), "long-tool-echo-sigint-before-tool");
  ASSERT_TRUE(r.stop.has_value()) << r.dump();
  EXPECT_EQ(r.stop->phase, process::stop_phase::interrupt);
  EXPECT_EQ(r.exit_code(), 0) << r.dump();
  EXPECT_EQ(process_named(run_mark(), "sleep"), std::nullopt);
  const auto results = r.of_type("result");
  std::cout << "[ real claude ] SIGINT between tool_use and tool start: " << r.status_text() << ", " << results.size()
            << " result line(s), last event: " << (r.events.empty() ? "" : r.events.back().dump().substr(0, 160))
            << "\n";
  EXPECT_TRUE(results.empty()) << r.dump();
  EXPECT_TRUE(r.of_type("user").empty()) << r.dump();
}

// SIGTERM (the stop policy pi needs) during the tool: Claude kills its tool (SIGKILL: "Exit code 137") and reports
// it as a failed tool result, and exits 143 without a result line.
TEST_F(RealClaude, SigtermDuringAToolExits143WithoutAResult) {
  std::optional<int> sleep_pid;
  auto r = run("long-tool-echo", [&](const cli_result& now) {
    if (frame_blocks(now, "tool_use").empty()) return false;
    if (!sleep_pid) sleep_pid = process_named(run_mark(), "sleep");
    return sleep_pid.has_value();
  }, process::stop_policy::sigterm(), "long-tool-echo-sigterm");
  ASSERT_TRUE(sleep_pid.has_value()) << "the tool's sleep never ran\n" << r.dump();
  ASSERT_TRUE(r.stop.has_value());
  EXPECT_FALSE(alive(*sleep_pid)) << "the tool's sleep survived";
  EXPECT_EQ(r.stop->phase, process::stop_phase::interrupt) << "claude did not exit on SIGTERM within the grace period";
  EXPECT_EQ(r.exit_code(), 143) << r.dump();
  EXPECT_TRUE(r.of_type("result").empty()) << r.dump();
  const auto users = r.of_type("user");
  EXPECT_LE(users.size(), 1u) << r.dump();
  if (!users.empty()) {  // printed unless claude was killed before (as with SIGINT, seen under load)
    const auto& failed = users[0]->at("message").at("content").at(0);
    EXPECT_EQ(failed.at("tool_use_id"), "call_mock_sleep_2");
    EXPECT_EQ(failed.value("is_error", false), true);
    EXPECT_EQ(failed.at("content"), "Exit code 137\nsleeping");
  } else {
    std::cout << "[ real claude ] NOTE: no tool result line after SIGTERM\n";
  }
  std::cout << "[ real claude ] SIGTERM during the tool: claude " << r.status_text() << "\n";
}

// HTTP 503 (Anthropic's overloaded_error), then the answer on Claude's own retry: one api_retry line, the answer once.
TEST_F(RealClaude, OverloadedThenSuccessOnClaudesRetry) {
  const auto s = scripted("flaky");
  auto r = run("flaky");
  expect_run_frame(r, "flaky", work);
  std::vector<const json*> api_retries;
  for (const auto* e : r.of_type("system"))
    if (e->value("subtype", "") == "api_retry") api_retries.push_back(e);
  ASSERT_EQ(api_retries.size(), 1u) << r.dump();
  EXPECT_EQ(api_retries[0]->at("error_status"), 503);
  EXPECT_EQ(api_retries[0]->at("error"), "overloaded");
  EXPECT_EQ(expect_well_formed_api_stream(r), 1u);
  expect_script(r, s);
  expect_success_result(r, s, 1, 100, 5);
  EXPECT_EQ(mock->requests_of("flaky"), (std::vector<std::string>{"http_error@turn0", "complete@turn0"}));
}

// The stream is cut mid-thinking; Claude closes the cut message (message_stop with abandoned_blocks), retries and
// streams the retry's blocks: the text comes exactly once.
TEST_F(RealClaude, StreamCutAndRetriedByClaudeIsNotDuplicated) {
  const auto s = scripted("cut-retry");
  auto r = run("cut-retry");
  expect_run_frame(r, "cut-retry", work);
  std::vector<const json*> api_retries;
  for (const auto* e : r.of_type("system"))
    if (e->value("subtype", "") == "api_retry") api_retries.push_back(e);
  ASSERT_EQ(api_retries.size(), 1u) << r.dump();
  EXPECT_TRUE(api_retries[0]->at("error_status").is_null());
  EXPECT_EQ(api_retries[0]->at("error"), "unknown");
  // What Claude relays of the cut attempt varies from run to run: nothing, or its message_start (and sometimes its
  // first thinking delta) closed by a synthetic message_stop with abandoned_blocks.
  const std::size_t messages = expect_well_formed_api_stream(r);
  EXPECT_TRUE(messages == 1 || messages == 2) << r.dump();
  std::size_t abandoned = 0;
  for (const auto* e : r.of_type("stream_event")) abandoned += e->contains("abandoned_blocks") ? 1 : 0;
  EXPECT_EQ(abandoned, messages - 1) << r.dump();
  EXPECT_EQ(deltas(r, "text_delta", "text"), s.text_chunks) << r.dump();
  EXPECT_EQ(frame_texts(r, "text", "text"), s.texts);
  const auto thoughts = streamed_blocks(r, "thinking_delta", "thinking");
  ASSERT_FALSE(thoughts.empty());
  EXPECT_EQ(thoughts.back(), s.thoughts.back());
  if (thoughts.size() > 1) {  // the cut attempt's thinking, as far as it came
    EXPECT_EQ(thoughts.size(), 2u) << r.dump();
    EXPECT_EQ(std::string("Thinking once.").rfind(thoughts.front(), 0), 0u) << r.dump();
  }
  const json& res = result_event(r);
  ASSERT_TRUE(res.is_object()) << r.dump();
  EXPECT_EQ(res.value("subtype", ""), "success");
  EXPECT_EQ(res.value("is_error", true), false);
  EXPECT_EQ(res.value("result", ""), s.last_text);
  EXPECT_EQ(r.exit_code(), 0);
  std::cout << "[ real claude ] cut stream: " << messages << " API message(s) relayed, result usage "
            << res.at("usage").value("input_tokens", 0) << " in / " << res.at("usage").value("output_tokens", 0)
            << " out\n";
  EXPECT_EQ(mock->requests_of("cut-retry"), (std::vector<std::string>{"cut@turn0", "complete@turn0"}));
}

}  // namespace
