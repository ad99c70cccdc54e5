// The real Claude Code CLI (`@anthropic-ai/claude-code`, installed by scripts/install-agents.sh into
// .npm-agents/claude-code/) against the scripted mock model server (tests/mockmodel/, Anthropic Messages wire), run
// through the Claude provider (agenthost::providers::async_run_claude). Every scenario checks the normalized stream —
// the exact scripted text once, the thinking, the Bash tool call and its output, the terminal (HTTP errors classified,
// cancellation through the completion token's cancellation slot) and that no process survives — and, from the same
// run's raw stdout lines (run_options::on_agent_line), the CLI's own behaviour that the mapping relies on: streamed
// deltas plus a full frame per block, the `result` line, api_retry lines, what SIGINT and SIGTERM do.
//
// A cancelled run's lines end where agenthost stopped reading (the process layer drops what the stopping agent still
// prints, by design): what Claude prints after an interrupt is observed by the probes that signal the CLI themselves
// (Sigint…/Sigterm… below), whose runs end by themselves.
//
// Skips (naming why) when claude is not installed or python3 is missing. AGENTHOST_REAL_CLAUDE overrides the
// executable. AGENTHOST_RECORD_FIXTURES=1 writes what claude printed into fixtures/claude-code/recorded/<name>.jsonl.
#include "cli_interrupt.hpp"
#include "real_cli_util.hpp"

#include <agenthost/providers/claude.hpp>
#include <agenthost/transport/contract_checker.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <gtest/gtest.h>

#include <csignal>

using namespace agenthost;
using namespace agenthost::test;
using namespace agenthost::test::real;

namespace {

// Why the suite must skip: claude_cli's reasons, or scripts/install-agents.sh did not report Claude Code installed.
std::string unavailable_reason() {
  if (auto why = claude_cli.unavailable_reason(); !why.empty()) return why;
  const std::string status = first_line(read_file(source_dir + "/.npm-agents/install-status-claude-code.txt"));
  if (std::getenv("AGENTHOST_REAL_CLAUDE") == nullptr && status.rfind("ok:", 0) != 0)
    return "scripts/install-agents.sh did not report Claude Code as installed (" +
           (status.empty() ? std::string("no .npm-agents/install-status-claude-code.txt") : status) +
           ") — run it again, or set AGENTHOST_REAL_CLAUDE";
  return {};
}

// A path as Claude Code names its project folder (every '/' and '.' a '-').
std::string munged(std::string path) {
  for (auto& c : path)
    if (c == '/' || c == '.') c = '-';
  return path;
}

// "exited with code N" / "killed by signal N (…)" (the terminal's exit_status) → the status.
std::optional<process::exit_status> parse_exit_status(const json& terminal) {
  const std::string s = terminal.value("exit_status", "");
  if (s.rfind("exited with code ", 0) == 0) return process::exited{std::stoi(s.substr(17))};
  if (s.rfind("killed by signal ", 0) == 0) return process::signaled{std::stoi(s.substr(17))};
  return std::nullopt;
}

// One run through the provider: the normalized messages, and the raw lines as Claude printed them.
struct claude_run {
  cli_result raw;  // lines/events from on_agent_line; status from the terminal's exit_status
  std::vector<message> messages;
  message terminal;
  boost::system::error_code ec;
  bool cancel_sent = false;
  bool finished = false;
  std::chrono::milliseconds elapsed{};

  [[nodiscard]] std::vector<const message*> of(message_type t) const { return of_type(messages, t); }
  [[nodiscard]] std::string text() const {
    std::string s;
    for (const auto* m : of(message_type::assistant)) s += m->content.at("text").get<std::string>();
    return s;
  }
  [[nodiscard]] std::vector<std::string> thoughts() const {
    std::vector<std::string> out;
    for (const auto* m : of(message_type::assistant_thought)) out.push_back(m->content.at("text"));
    return out;
  }
  [[nodiscard]] std::string dump() const {
    std::string s = raw.dump() + "\n  messages:\n";
    for (const auto& m : messages) s += "  " + m.to_json_line().substr(0, 600) + "\n";
    return s;
  }
};

// The claude process of the run (the leader: the one with our stream-json flags on its command line).
std::optional<int> claude_pid(const std::string& run_mark) {
  for (int pid : processes_with_env(run_mark)) {
    const std::string cmdline = read_file("/proc/" + std::to_string(pid) + "/cmdline");
    if (cmdline.find("--include-partial-messages") != std::string::npos) return pid;
  }
  return std::nullopt;
}

// A process that still exists and is not a zombie.
bool alive(int pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

class RealClaude : public real_cli_test {
 protected:
  RealClaude() : real_cli_test("claude") {}

  void SetUp() override { start(unavailable_reason(), {dir + "/home", config_dir, dir + "/tmp"}); }

  // Isolated: own HOME and config dir, the mock as the API, no traffic besides model calls, one retry of a failed
  // model call (instead of ten with backoff up to ~35 s). The scenario is the model id. Bash is allowed by rule:
  // --permission-mode bypassPermissions / --dangerously-skip-permissions are refused when running as root.
  providers::claude_options options(const std::string& scenario) const {
    providers::claude_options o{
        .executable = claude_cli.executable(),
        .model = scenario,
        .working_directory = work,
        .env = environment({"ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_MODEL", "ANTHROPIC_CUSTOM_HEADERS",
                            "ANTHROPIC_SMALL_FAST_MODEL", "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT",
                            "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"},
                           {{"HOME", dir + "/home"},
                            {"CLAUDE_CONFIG_DIR", config_dir},
                            // Its messaging socket (cc-socks/<pid>.sock, left behind when it is killed) and tmp files.
                            {"TMPDIR", dir + "/tmp"},
                            {"ANTHROPIC_BASE_URL", mock->origin()},
                            {"ANTHROPIC_API_KEY", "mock-key"},
                            {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"},
                            {"CLAUDE_CODE_MAX_RETRIES", "1"}}),
        .reaper_path = AGENTHOST_REAPER,
        .allowed_tools = {"Bash"}};
    return o;
  }

  // Runs `scenario` through async_run_claude to its end (bounded). `cancel_when` is asked after every line and every
  // 10 ms; once it says yes the run is cancelled through the completion token's cancellation slot. `on_line` sees each
  // raw line right after it was recorded (a probe may signal the CLI from there). The run is recorded as `record_as`
  // (default: the scenario) when AGENTHOST_RECORD_FIXTURES=1.
  claude_run run(const std::string& scenario, const std::function<bool(const claude_run&)>& cancel_when = {},
                 const std::string& record_as = {},
                 const std::function<void(claude_run&, const json& event)>& on_line = {},
                 std::optional<providers::claude_options> custom = std::nullopt,
                 const std::string& text = scenario_prompt) {
    claude_run r;
    auto o = custom ? *custom : options(scenario);
    o.run.on_agent_line = [&](std::string_view line) {
      r.raw.lines.emplace_back(line);
      auto j = parse_line(r.raw.lines.back());
      if (j.is_object()) {
        r.raw.events.push_back(std::move(j));
        if (on_line) on_line(r, r.raw.events.back());
      }
    };
    bool done = false;
    asio::cancellation_signal sig;
    const auto t0 = std::chrono::steady_clock::now();
    providers::async_run_claude(io.get_executor(), o, text, [&](const message& m) { r.messages.push_back(m); },
                                asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code ec, message t) {
                                  r.ec = ec;
                                  r.terminal = std::move(t);
                                  done = true;
                                }));
    r.finished = run_until(io, [&] {
      if (!done && !r.cancel_sent && cancel_when && cancel_when(r)) {
        r.cancel_sent = true;
        sig.emit(asio::cancellation_type::terminal);
      }
      return done;
    }, 60s);
    if (!r.finished) {  // bounded: cancel, which stops the tree, then report
      sig.emit(asio::cancellation_type::terminal);
      run_until(io, [&] { return done; }, 20s);
    }
    r.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    r.raw.status = parse_exit_status(r.terminal.content);

    // Every run: a valid message stream ending with its terminal, and nothing left running.
    EXPECT_TRUE(r.finished) << "claude did not end within 60 s\n" << r.dump();
    EXPECT_EQ(transport::check_run(r.messages), std::vector<std::string>{}) << r.dump();
    EXPECT_FALSE(r.messages.empty()) << r.dump();
    if (!r.messages.empty()) {
      EXPECT_EQ(r.messages.back(), r.terminal);
    }
    EXPECT_EQ(processes_with_env(run_mark()), std::vector<int>{}) << "the run left processes behind";
    EXPECT_EQ(r.ec == asio::error::operation_aborted, r.terminal.type == message_type::terminal_cancelled);
    auto replacements = stable_paths();
    replacements.emplace_back(munged(work), "-home-user-project");  // the project's key under the config dir
    record_fixture("claude-code", (record_as.empty() ? scenario : record_as) + ".jsonl", r.raw.lines, replacements);
    std::cout << "[ real claude ] " << scenario << ": " << r.raw.lines.size() << " lines, "
              << r.messages.size() << " messages, " << transport::to_string(r.terminal.type) << " "
              << r.terminal.content.value("reason", "") << " (" << r.raw.status_text() << "), " << r.elapsed.count()
              << " ms\n";
    return r;
  }

  // Runs long-tool-echo and, once the tool's sleep runs, sends `sig` to the claude process alone (not its group), so
  // that the run ends by itself and what Claude prints afterwards is seen. `sleep_pid`: the tool's sleep, once found.
  claude_run run_signalled_during_tool(int sig, const std::string& record_as, std::optional<int>& sleep_pid) {
    bool sent = false;
    return run("long-tool-echo", [&](const claude_run& now) {
      if (sent || !sleep_runs(!now.of(message_type::tool_call).empty(), run_mark(), sleep_pid)) return false;
      const auto pid = claude_pid(run_mark());
      EXPECT_TRUE(pid.has_value());
      if (pid) ::kill(*pid, sig);
      sent = true;
      return false;
    }, record_as);
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
  EXPECT_EQ(init.value("claude_code_version", ""), claude_cli.version());
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

// ---- the normalized stream ---------------------------------------------------------------------------------------------

// session.started first, with Claude's session id, the scenario as model and the work dir.
void expect_session(const claude_run& r, const std::string& scenario, const std::string& cwd) {
  ASSERT_FALSE(r.messages.empty());
  ASSERT_FALSE(r.raw.events.empty()) << r.dump();
  const auto& first = r.messages.front();
  ASSERT_EQ(first.type, message_type::session_started) << r.dump();
  EXPECT_EQ(first.content.at("session_id"), r.raw.events.front().at("session_id"));
  EXPECT_EQ(first.content.at("agent"), "claude");
  EXPECT_EQ(first.content.at("model"), scenario);
  EXPECT_EQ(first.content.at("cwd"), cwd);
}

// The scripted text exactly once (deltas), the thinking per block, a completed terminal with the last turn's text.
void expect_completed(const claude_run& r, const script& s, int turns, int input_tokens, int output_tokens) {
  EXPECT_EQ(r.text(), s.text()) << r.dump();
  EXPECT_EQ(r.thoughts(), s.thoughts) << r.dump();
  ASSERT_EQ(r.terminal.type, message_type::terminal_completed) << r.dump();
  const json& t = r.terminal.content;
  EXPECT_EQ(t.at("text"), s.last_text);
  EXPECT_EQ(t.at("session_id"), r.messages.front().content.at("session_id"));
  EXPECT_EQ(t.at("stop_reason"), "end_turn");
  EXPECT_EQ(t.at("num_turns"), turns);
  EXPECT_EQ(t.at("usage").at("input_tokens"), input_tokens);
  EXPECT_EQ(t.at("usage").at("output_tokens"), output_tokens);
  EXPECT_EQ(t.at("exit_status"), "exited with code 0");
  EXPECT_FALSE(t.contains("text_diverged"));
  EXPECT_FALSE(t.contains("invalid_output_lines")) << t.dump();
  EXPECT_FALSE(r.ec);
}

// One tool.call with `input`, closed by the given message type; returns the closing message.
const message* expect_one_tool_call(const claude_run& r, const std::string& id, const json& input,
                                    message_type closed_by) {
  const auto calls = r.of(message_type::tool_call);
  EXPECT_EQ(calls.size(), 1u) << r.dump();
  if (calls.size() != 1) return nullptr;
  EXPECT_EQ(calls[0]->content.at("tool_call_id"), id);
  EXPECT_EQ(calls[0]->content.at("name"), "Bash");
  EXPECT_EQ(calls[0]->content.at("input"), input);
  const auto closes = r.of(closed_by);
  EXPECT_EQ(closes.size(), 1u) << r.dump();
  EXPECT_EQ(r.of(message_type::tool_completed).size() + r.of(message_type::tool_failed).size(), 1u);
  if (closes.size() != 1) return nullptr;
  EXPECT_EQ(closes[0]->content.at("tool_call_id"), id);
  return closes[0];
}

// ---- tests -------------------------------------------------------------------------------------------------------------

TEST_F(RealClaude, ToolCallWithThinkingAndANonAsciiAnswer) {
  const auto s = scripted("tool");
  {
    auto r = run("tool");
    expect_session(r, "tool", work);
    expect_completed(r, s, 2, 200, 12 + 16);
    const auto& call = s.tool_calls.at(0);
    const message* done = expect_one_tool_call(r, call.at("id"), call.at("arguments"), message_type::tool_completed);
    ASSERT_NE(done, nullptr);
    EXPECT_EQ(done->content.at("output"), "agenthost-tool-output");
    EXPECT_EQ(done->content.at("raw_output").at("stdout"), "agenthost-tool-output");
    EXPECT_TRUE(r.of(message_type::status).empty()) << r.dump();
    // Buffered thinking: both blocks after the last text, before the terminal.
    std::size_t last_text = 0, first_thought = r.messages.size();
    for (std::size_t i = 0; i < r.messages.size(); ++i) {
      if (r.messages[i].type == message_type::assistant) last_text = i;
      if (r.messages[i].type == message_type::assistant_thought && first_thought == r.messages.size()) first_thought = i;
    }
    EXPECT_GT(first_thought, last_text) << r.dump();

    // The raw stream: what the mapping relies on.
    const cli_result& raw = r.raw;
    expect_run_frame(raw, "tool", work);
    EXPECT_EQ(expect_well_formed_api_stream(raw), 2u);
    expect_script(raw, s);
    expect_success_result(raw, s, 2, 200, 12 + 16);
    const auto uses = frame_blocks(raw, "tool_use");
    ASSERT_EQ(uses.size(), 1u) << raw.dump();
    EXPECT_EQ(uses[0]->at("id"), call.at("id"));
    EXPECT_EQ(uses[0]->at("name"), "Bash");
    EXPECT_EQ(uses[0]->at("input"), call.at("arguments"));
    EXPECT_EQ(json::parse(joined(deltas(raw, "input_json_delta", "partial_json"))), call.at("arguments"));
    EXPECT_GT(deltas(raw, "input_json_delta", "partial_json").size(), 3u);
    // Its result: one user line with the tool_result (the output without its trailing newline) and the raw stdout.
    const auto users = raw.of_type("user");
    ASSERT_EQ(users.size(), 1u) << raw.dump();
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
    for (const auto& e : raw.events) {
      const std::string t = e.value("type", "");
      if (t == "assistant")
        order.push_back("assistant:" + e.at("message").at("content").at(0).value("type", ""));
      else if (t == "user" || t == "result")
        order.push_back(t);
    }
    EXPECT_EQ(order, (std::vector<std::string>{"assistant:thinking", "assistant:text", "assistant:tool_use", "user",
                                               "assistant:thinking", "assistant:text", "result"}))
        << raw.dump();
    // No request besides the two model calls of the scenario (no title, quota or token-count calls).
    EXPECT_EQ(mock->requests_of("tool"), (std::vector<std::string>{"complete@turn0", "complete@turn1"}));
    std::size_t requests = 0;
    for (const auto& rec : mock->records())
      if (rec.contains("method")) ++requests;
    EXPECT_EQ(requests, 2u);
  }
}

TEST_F(RealClaude, AnswerWithoutToolsStreamingThinking) {
  const auto s = scripted("answer");
  auto o = options("answer");
  o.thinking_output = mapper::thinking_mode::stream;
  // A prompt made of flags: after `--` Claude takes it as the prompt (else it would print its help, or its version).
  const std::string flags_prompt = "--help -v -p Do what the scenario says.";
  auto r = run("answer", {}, {}, {}, o, flags_prompt);
  expect_session(r, "answer", work);
  expect_completed(r, s, 1, 100, 15);
  EXPECT_TRUE(r.of(message_type::tool_call).empty());
  // Streamed thinking: released at its frame, before the text.
  std::size_t first_text = r.messages.size(), thought = r.messages.size();
  for (std::size_t i = r.messages.size(); i-- > 0;) {
    if (r.messages[i].type == message_type::assistant) first_text = i;
    if (r.messages[i].type == message_type::assistant_thought) thought = i;
  }
  EXPECT_LT(thought, first_text) << r.dump();

  expect_run_frame(r.raw, "answer", work);
  EXPECT_EQ(expect_well_formed_api_stream(r.raw), 1u);
  expect_script(r.raw, s);
  expect_success_result(r.raw, s, 1, 100, 15);
  EXPECT_TRUE(frame_blocks(r.raw, "tool_use").empty());
  EXPECT_TRUE(r.raw.of_type("user").empty());
  EXPECT_EQ(mock->requests_of("answer"), (std::vector<std::string>{"complete@turn0"}));
  json digests;
  for (const auto& rec : mock->records())
    if (rec.is_object() && rec.value("scenario", "") == "answer") digests = rec.value("user_digests", json::array());
  ASSERT_FALSE(digests.empty());
  EXPECT_EQ(digests.back().at("tail"), flags_prompt.substr(flags_prompt.size() - 32)) << digests.dump();
}

// An HTTP error: Claude retries once (CLAUDE_CODE_MAX_RETRIES=1, a system/api_retry line), then prints a synthetic
// assistant message with the error text and a result that is subtype "success" with is_error true, and exits 1.
// Normalized: one retry status, no assistant text, terminal.failed agent_error with http_status and retryable.
void expect_http_failure(const claude_run& run, int status, const std::string& retry_error,
                         const std::string& api_error_type, const std::string& text) {
  ASSERT_EQ(run.terminal.type, message_type::terminal_failed) << run.dump();
  const json& t = run.terminal.content;
  EXPECT_EQ(t.at("reason"), "agent_error");
  EXPECT_EQ(t.at("http_status"), status);
  EXPECT_EQ(t.at("retryable"), true);
  EXPECT_EQ(t.at("text"), text);
  EXPECT_EQ(t.at("exit_status"), "exited with code 1");
  EXPECT_EQ(run.text(), "") << "the error text is not the model's answer";
  const auto statuses = run.of(message_type::status);
  ASSERT_EQ(statuses.size(), 1u) << run.dump();
  EXPECT_EQ(statuses[0]->content.at("kind"), "retry");
  EXPECT_EQ(statuses[0]->content.at("attempt"), 1);
  EXPECT_EQ(statuses[0]->content.at("max_attempts"), 1);
  EXPECT_EQ(statuses[0]->content.at("error_status"), status);

  const cli_result& r = run.raw;
  EXPECT_EQ(r.exit_code(), 1) << r.dump();
  std::vector<const json*> api_retries;
  for (const auto* e : r.of_type("system"))
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
  EXPECT_EQ(frames[0]->value("is_api_error_message", false), true);
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

TEST_F(RealClaude, Http500IsARetryableAgentErrorAfterOneRetry) {
  auto r = run("http500");
  expect_session(r, "http500", work);
  expect_run_frame(r.raw, "http500", work);
  expect_http_failure(r, 500, "server_error", "api_error",
                      "API Error: 500 mock internal server error. This is a server-side issue, usually temporary — "
                      "try again in a moment. If it persists, check your inference gateway (" +
                          mock->origin().substr(7) + ").");
  EXPECT_EQ(mock->requests_of("http500"), (std::vector<std::string>{"http_error@turn0", "http_error@turn0"}));
}

TEST_F(RealClaude, Http429IsARetryableAgentErrorAfterOneRetry) {
  auto r = run("http429");
  expect_session(r, "http429", work);
  expect_run_frame(r.raw, "http429", work);
  expect_http_failure(r, 429, "rate_limit", "rate_limit_error",
                      "API Error: Request rejected (429) · mock rate limit exceeded");
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

// Cancellation through the completion token while the model streams (40 s): the provider's stop ("\x03" + SIGINT to
// the group, 2 s, tree kill) ends the run with terminal.cancelled and operation_aborted, well before the stream would;
// what claude prints when interrupted is still mapped.
TEST_F(RealClaude, CancellationMidStream) {
  const auto s = scripted("slow");
  auto r = run("slow", [](const claude_run& now) { return !now.text().empty(); }, "slow-cancelled");
  ASSERT_TRUE(r.cancel_sent) << "no text was streamed\n" << r.dump();
  expect_session(r, "slow", work);
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  ASSERT_EQ(r.terminal.type, message_type::terminal_cancelled) << r.dump();
  EXPECT_EQ(r.terminal.content.at("session_id"), r.messages.front().content.at("session_id"));
  const std::string got = r.text();
  EXPECT_FALSE(got.empty());
  EXPECT_LT(got.size(), s.text().size());
  EXPECT_EQ(s.text().substr(0, got.size()), got) << "what was streamed before the stop is a prefix of the script";
  // The raw lines: the same deltas, each once.
  expect_run_frame(r.raw, "slow", work);
  EXPECT_EQ(joined(deltas(r.raw, "text_delta", "text")).substr(0, got.size()), got);
  // The run reads claude's output to its end, also during the stop: what claude prints when interrupted (its
  // `result`, with the cost of the turn) is mapped into the cancelled terminal — when claude prints it.
  if (interrupted_result(r.raw, "aborted_streaming")) {
    ASSERT_TRUE(r.terminal.content.contains("usage")) << r.dump();
    EXPECT_TRUE(r.terminal.content.at("usage").contains("cost")) << r.dump();
  }
  EXPECT_LT(r.elapsed, std::chrono::seconds(20)) << "the stream takes 40 s; the stop must not wait for it";
}

// Claude Code's Bash refuses a command that starts with a long sleep (the scenario `long-tool`, `sleep 30`): the tool
// result is an error telling the model to use Monitor or run_in_background, and the run goes on to the next turn.
TEST_F(RealClaude, StandaloneSleep30IsBlockedByClaudesBash) {
  auto r = run("long-tool");
  expect_session(r, "long-tool", work);
  const message* failed =
      expect_one_tool_call(r, "call_mock_sleep_1", json{{"command", "sleep 30"}}, message_type::tool_failed);
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->content.at("error").get<std::string>().rfind("<tool_use_error>Blocked: standalone sleep 30.", 0),
            0u)
      << failed->content.dump();
  EXPECT_EQ(r.text(), "Sleeping.The sleep finished.");
  ASSERT_EQ(r.terminal.type, message_type::terminal_completed) << r.dump();
  EXPECT_EQ(r.terminal.content.at("text"), "The sleep finished.");

  expect_run_frame(r.raw, "long-tool", work);
  const auto users = r.raw.of_type("user");
  ASSERT_EQ(users.size(), 1u) << r.raw.dump();
  const auto& result = users[0]->at("message").at("content").at(0);
  EXPECT_EQ(result.at("tool_use_id"), "call_mock_sleep_1");
  EXPECT_EQ(result.value("is_error", false), true);
  EXPECT_EQ(process_named(run_mark(), "sleep"), std::nullopt);
  EXPECT_EQ(result_event(r.raw).value("result", ""), "The sleep finished.");
  EXPECT_EQ(r.raw.exit_code(), 0);
}

// Cancellation through the completion token during a running tool (`echo sleeping; sleep 30`, which Claude's Bash
// accepts): terminal.cancelled, the call closed by claude's own report, and the tool's sleep dies with the tree.
TEST_F(RealClaude, CancellationDuringAToolKillsTheToolProcess) {
  std::optional<int> sleep_pid;
  auto r = run("long-tool-echo", [&](const claude_run& now) {
    return sleep_runs(!now.of(message_type::tool_call).empty(), run_mark(), sleep_pid);
  }, "long-tool-echo-cancelled");
  ASSERT_TRUE(sleep_pid.has_value()) << "the tool's sleep never ran\n" << r.dump();
  expect_session(r, "long-tool-echo", work);
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  ASSERT_EQ(r.terminal.type, message_type::terminal_cancelled) << r.dump();
  EXPECT_EQ(r.text(), "Sleeping.");
  const message* closed = expect_one_tool_call(r, "call_mock_sleep_2", json{{"command", "echo sleeping; sleep 30"}},
                                               message_type::tool_failed);
  ASSERT_NE(closed, nullptr);
  if (interrupted_result(r.raw, "aborted_tools")) {
    // Closed by claude itself: interrupted, it reports the call as rejected and prints its `result`, which the run
    // still reads and maps during the stop (the cost of the turn reaches the cancelled terminal).
    EXPECT_EQ(closed->content.value("closed_by_finish", false), false) << closed->content.dump();
    EXPECT_EQ(closed->content.value("error", "").rfind("The user doesn't want to proceed with this tool use.", 0), 0u)
        << closed->content.dump();
    ASSERT_TRUE(r.terminal.content.contains("usage")) << r.dump();
    EXPECT_TRUE(r.terminal.content.at("usage").contains("cost")) << r.dump();
  } else {
    EXPECT_EQ(closed->content.value("closed_by_finish", false), true) << closed->content.dump();
  }
  EXPECT_EQ(process_named(run_mark(), "sleep"), std::nullopt) << "the tool's sleep survived";
  EXPECT_FALSE(alive(*sleep_pid)) << "the tool's sleep survived";
  EXPECT_EQ(frame_texts(r.raw, "text", "text"), std::vector<std::string>{"Sleeping."});
  EXPECT_LT(r.elapsed, std::chrono::seconds(20)) << "the tool sleeps 30 s; the stop must not wait for it";
}

// Probe: SIGINT to the CLI alone (not its process group) during the tool, sent by the test, so that the run ends by
// itself and what Claude prints afterwards is seen. Claude stops its running tool itself, reports the call as
// rejected by the user, prints an error_during_execution result and exits 0: not a caller's cancel, so the terminal
// is failed/agent_error (aborted_tools). Why the provider's stop can rely on SIGINT.
TEST_F(RealClaude, SigintToTheCliAloneDuringATool) {
  std::optional<int> sleep_pid;
  auto r = run_signalled_during_tool(SIGINT, "long-tool-echo-sigint-cli-only", sleep_pid);
  ASSERT_TRUE(sleep_pid.has_value()) << "the tool's sleep never ran\n" << r.dump();
  EXPECT_FALSE(alive(*sleep_pid)) << "the tool's sleep survived";
  EXPECT_EQ(r.raw.exit_code(), 0) << r.dump();
  EXPECT_LT(r.elapsed, std::chrono::seconds(20));
  ASSERT_EQ(r.terminal.type, message_type::terminal_failed) << r.dump();
  if (interrupted_result(r.raw, "aborted_tools")) {
    EXPECT_EQ(r.terminal.content.at("reason"), "agent_error");
    EXPECT_EQ(r.terminal.content.at("terminal_reason"), "aborted_tools");
    EXPECT_EQ(r.terminal.content.at("retryable"), false);
    const message* failed = expect_one_tool_call(r, "call_mock_sleep_2", json{{"command", "echo sleeping; sleep 30"}},
                                                 message_type::tool_failed);
    ASSERT_NE(failed, nullptr);
    EXPECT_EQ(failed->content.at("raw_output"), "User rejected tool use");
    EXPECT_EQ(failed->content.at("error").get<std::string>().rfind("The user doesn't want to proceed", 0), 0u);
    const auto users = r.raw.of_type("user");
    ASSERT_EQ(users.size(), 2u) << r.raw.dump();
    EXPECT_EQ(users[1]->at("message").at("content").at(0).value("text", ""),
              "[Request interrupted by user for tool use]");
  } else {
    EXPECT_EQ(r.terminal.content.at("reason"), "no_terminal_event");
  }
}

// Probe: SIGINT to the group right after the tool_use frame, before the tool runs: Claude 2.1.332 exits 0 at once,
// without closing the API message (no message_delta / message_stop), without a tool result and without a result line
// — the same silent exit that, on a loaded machine, also hits a SIGINT while the tool's process is just starting.
// Without a caller's cancel that is failed/no_terminal_event (exit 0 without a result is never success). On a slow
// host the signal can land after the tool started: then claude's interruption report is checked instead.
TEST_F(RealClaude, SigintBetweenToolUseAndToolStartExits0WithoutAResult) {
  bool sent = false;
  auto r = run("long-tool-echo", {}, "long-tool-echo-sigint-before-tool", [&](claude_run&, const json& e) {
    if (sent || e.value("type", "") != "assistant") return;
    const auto& content = e.at("message").at("content");
    if (content.empty() || content.at(0).value("type", "") != "tool_use") return;
    sent = true;
    const auto pid = claude_pid(run_mark());
    EXPECT_TRUE(pid.has_value());
    if (pid) ::killpg(::getpgid(*pid), SIGINT);
  });
  ASSERT_TRUE(sent) << r.dump();
  EXPECT_EQ(r.raw.exit_code(), 0) << r.dump();
  EXPECT_EQ(process_named(run_mark(), "sleep"), std::nullopt);
  const auto results = r.raw.of_type("result");
  std::cout << "[ real claude ] SIGINT between tool_use and tool start: " << r.raw.status_text() << ", "
            << results.size() << " result line(s), last event: "
            << (r.raw.events.empty() ? "" : r.raw.events.back().dump().substr(0, 160)) << "\n";
  ASSERT_EQ(r.terminal.type, message_type::terminal_failed);
  const message* closed = expect_one_tool_call(r, "call_mock_sleep_2", json{{"command", "echo sleeping; sleep 30"}},
                                               message_type::tool_failed);
  ASSERT_NE(closed, nullptr);
  if (!results.empty()) {
    // The signal is sent from the test's line callback: when the host is slow (sanitizers, load) it lands once the
    // tool has started, and claude reports the interruption instead — mapped like SigintToTheCliAloneDuringATool.
    std::cout << "[ real claude ] NOTE: the SIGINT landed after the tool started (a slow host); the silent exit was "
                 "not hit this time\n";
    EXPECT_TRUE(interrupted_result(r.raw, "aborted_tools"));
    EXPECT_EQ(r.terminal.content.at("reason"), "agent_error");
    EXPECT_EQ(closed->content.value("closed_by_finish", false), false);
    return;
  }
  EXPECT_TRUE(r.raw.of_type("user").empty()) << r.dump();
  EXPECT_EQ(r.terminal.content.at("reason"), "no_terminal_event");
  EXPECT_EQ(closed->content.value("closed_by_finish", false), true);
}

// Probe: SIGTERM (the stop policy pi needs) to the CLI during the tool: Claude kills its tool (SIGKILL: "Exit code
// 137") and reports it as a failed tool result, and exits 143 without a result line: failed/exited. Why the provider
// does not stop Claude with SIGTERM.
TEST_F(RealClaude, SigtermDuringAToolExits143WithoutAResult) {
  std::optional<int> sleep_pid;
  auto r = run_signalled_during_tool(SIGTERM, "long-tool-echo-sigterm", sleep_pid);
  ASSERT_TRUE(sleep_pid.has_value()) << "the tool's sleep never ran\n" << r.dump();
  EXPECT_FALSE(alive(*sleep_pid)) << "the tool's sleep survived";
  EXPECT_EQ(r.raw.exit_code(), 143) << r.dump();
  EXPECT_TRUE(r.raw.of_type("result").empty()) << r.dump();
  ASSERT_EQ(r.terminal.type, message_type::terminal_failed) << r.dump();
  EXPECT_EQ(r.terminal.content.at("reason"), "exited");
  EXPECT_EQ(r.terminal.content.at("exit_code"), 143);
  const auto users = r.raw.of_type("user");
  EXPECT_LE(users.size(), 1u) << r.dump();
  const message* failed = expect_one_tool_call(r, "call_mock_sleep_2", json{{"command", "echo sleeping; sleep 30"}},
                                               message_type::tool_failed);
  ASSERT_NE(failed, nullptr);
  if (!users.empty()) {  // printed unless claude was killed before (as with SIGINT, seen under load)
    const auto& raw_failed = users[0]->at("message").at("content").at(0);
    EXPECT_EQ(raw_failed.at("tool_use_id"), "call_mock_sleep_2");
    EXPECT_EQ(raw_failed.value("is_error", false), true);
    EXPECT_EQ(raw_failed.at("content"), "Exit code 137\nsleeping");
    EXPECT_EQ(failed->content.at("error"), "Exit code 137\nsleeping");
  } else {
    std::cout << "[ real claude ] NOTE: no tool result line after SIGTERM\n";
    EXPECT_EQ(failed->content.value("closed_by_finish", false), true);
  }
}

// HTTP 503 (Anthropic's overloaded_error), then the answer on Claude's own retry: one retry status, the answer once.
TEST_F(RealClaude, OverloadedThenSuccessOnClaudesRetry) {
  const auto s = scripted("flaky");
  auto r = run("flaky");
  expect_session(r, "flaky", work);
  expect_completed(r, s, 1, 100, 5);
  const auto statuses = r.of(message_type::status);
  ASSERT_EQ(statuses.size(), 1u) << r.dump();
  EXPECT_EQ(statuses[0]->content.at("kind"), "retry");
  EXPECT_EQ(statuses[0]->content.at("error_status"), 503);
  EXPECT_EQ(statuses[0]->content.at("error"), "503 overloaded");

  expect_run_frame(r.raw, "flaky", work);
  std::vector<const json*> api_retries;
  for (const auto* e : r.raw.of_type("system"))
    if (e->value("subtype", "") == "api_retry") api_retries.push_back(e);
  ASSERT_EQ(api_retries.size(), 1u) << r.raw.dump();
  EXPECT_EQ(api_retries[0]->at("error_status"), 503);
  EXPECT_EQ(api_retries[0]->at("error"), "overloaded");
  EXPECT_EQ(expect_well_formed_api_stream(r.raw), 1u);
  expect_script(r.raw, s);
  expect_success_result(r.raw, s, 1, 100, 5);
  EXPECT_EQ(mock->requests_of("flaky"), (std::vector<std::string>{"http_error@turn0", "complete@turn0"}));
}

// The stream is cut mid-thinking; Claude closes the cut message (message_stop with abandoned_blocks), retries and
// streams the retry's blocks: the text comes exactly once, and only the retry's thinking is released.
TEST_F(RealClaude, StreamCutAndRetriedByClaudeIsNotDuplicated) {
  const auto s = scripted("cut-retry");
  auto r = run("cut-retry");
  expect_session(r, "cut-retry", work);
  EXPECT_EQ(r.text(), "Hello world.") << r.dump();
  EXPECT_EQ(r.text(), s.text());
  EXPECT_EQ(r.thoughts(), std::vector<std::string>{s.thoughts.back()}) << r.dump();
  ASSERT_EQ(r.terminal.type, message_type::terminal_completed) << r.dump();
  EXPECT_EQ(r.terminal.content.at("text"), s.last_text);
  EXPECT_FALSE(r.terminal.content.contains("text_diverged"));
  const auto statuses = r.of(message_type::status);
  ASSERT_EQ(statuses.size(), 1u) << r.dump();
  EXPECT_EQ(statuses[0]->content.at("error"), "unknown");

  const cli_result& raw = r.raw;
  expect_run_frame(raw, "cut-retry", work);
  std::vector<const json*> api_retries;
  for (const auto* e : raw.of_type("system"))
    if (e->value("subtype", "") == "api_retry") api_retries.push_back(e);
  ASSERT_EQ(api_retries.size(), 1u) << raw.dump();
  EXPECT_TRUE(api_retries[0]->at("error_status").is_null());
  EXPECT_EQ(api_retries[0]->at("error"), "unknown");
  // What Claude relays of the cut attempt varies from run to run: nothing, or its message_start (and sometimes its
  // first thinking delta) closed by a synthetic message_stop with abandoned_blocks.
  const std::size_t messages = expect_well_formed_api_stream(raw);
  EXPECT_TRUE(messages == 1 || messages == 2) << raw.dump();
  std::size_t abandoned = 0;
  for (const auto* e : raw.of_type("stream_event")) abandoned += e->contains("abandoned_blocks") ? 1 : 0;
  EXPECT_EQ(abandoned, messages - 1) << raw.dump();
  EXPECT_EQ(deltas(raw, "text_delta", "text"), s.text_chunks) << raw.dump();
  EXPECT_EQ(frame_texts(raw, "text", "text"), s.texts);
  const auto thoughts = streamed_blocks(raw, "thinking_delta", "thinking");
  ASSERT_FALSE(thoughts.empty());
  EXPECT_EQ(thoughts.back(), s.thoughts.back());
  if (thoughts.size() > 1) {  // the cut attempt's thinking, as far as it came
    EXPECT_EQ(thoughts.size(), 2u) << raw.dump();
    EXPECT_EQ(std::string("Thinking once.").rfind(thoughts.front(), 0), 0u) << raw.dump();
  }
  const json& res = result_event(raw);
  ASSERT_TRUE(res.is_object()) << raw.dump();
  EXPECT_EQ(res.value("subtype", ""), "success");
  EXPECT_EQ(res.value("result", ""), s.last_text);
  EXPECT_EQ(raw.exit_code(), 0);
  std::cout << "[ real claude ] cut stream: " << messages << " API message(s) relayed, result usage "
            << res.at("usage").value("input_tokens", 0) << " in / " << res.at("usage").value("output_tokens", 0)
            << " out\n";
  EXPECT_EQ(r.terminal.content.at("usage").at("input_tokens"), res.at("usage").value("input_tokens", 0));
  EXPECT_EQ(mock->requests_of("cut-retry"), (std::vector<std::string>{"cut@turn0", "complete@turn0"}));
}

// A prompt above 64 KiB goes through Claude's stdin (no prompt argument): it reaches the model whole.
TEST_F(RealClaude, ALongPromptReachesTheModelThroughStdin) {
  const auto s = scripted("answer");
  std::string text = "-- a prompt that starts like a flag\n";
  for (int i = 0; text.size() <= providers::claude_prompt_argv_max + 1000; ++i)
    text += "line " + std::to_string(i) + ": caf\xC3\xA9 $(id) `x` --help\n";
  text += "the last 32 characters are ASCII: END-OF-PROMPT";  // the mock's tail is 32 characters
  auto cmd = providers::build_claude_command(options("answer"), text);
  ASSERT_TRUE(cmd);
  ASSERT_TRUE(cmd->stdin_text.has_value());
  auto r = run("answer", {}, "", {}, std::nullopt, text);
  expect_completed(r, s, 1, 100, 15);
  json digests;
  for (const auto& rec : mock->records())
    if (rec.is_object() && rec.value("scenario", "") == "answer") digests = rec.value("user_digests", json::array());
  ASSERT_FALSE(digests.empty()) << "no request of the scenario";
  // Claude may put context before the prompt in the same user message; the prompt is its end, whole.
  const json& d = digests.back();
  EXPECT_EQ(d.at("tail"), text.substr(text.size() - 32)) << d.dump();
  EXPECT_GE(d.at("bytes").get<std::size_t>(), text.size()) << d.dump();
  std::cout << "[ real claude ] " << text.size() << "-byte prompt through stdin: the user message has " << d.at("bytes")
            << " bytes\n";
}

#ifdef AGENTHOST_CLI
// `agenthost run --agent claude` interrupted by SIGINT once the first text delta is out: terminal.cancelled, exit code
// 130, nothing left.
TEST_F(RealClaude, CliSigintCancelsTheRunAndExits130) {
  const auto o = options("slow");
  expect_agenthost_run_interrupted("claude", o.executable.string(), {"--model", "slow", "--cwd", work}, o.env,
                                   "{\"type\":\"assistant\",", std::chrono::seconds(20), dir, run_mark());
}
#endif

}  // namespace
