// Shared by the real Claude Code suites (test_real_claude.cpp: the stream, errors and retries;
// test_real_claude_stop.cpp: cancellation, SIGINT and SIGTERM): the RealClaude fixture, the run record and the
// checks of the CLI's raw lines and of the normalized stream. See test_real_claude.cpp for what the suites cover.
#pragma once

#include "cli_interrupt.hpp"
#include "real_cli_util.hpp"

#include <agenthost/providers/claude.hpp>
#include <agenthost/transport/contract_checker.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <gtest/gtest.h>

#include <csignal>
#include <optional>


namespace agenthost::test::real::claude_suite {

using namespace agenthost;
using namespace agenthost::test;
using namespace agenthost::test::real;


// Why the suite must skip: claude_cli's reasons, or scripts/install-agents.sh did not report Claude Code installed.
inline std::string unavailable_reason() {
  if (auto why = claude_cli.unavailable_reason(); !why.empty()) return why;
  const std::string status = first_line(read_file(source_dir + "/.npm-agents/install-status-claude-code.txt"));
  if (std::getenv("AGENTHOST_REAL_CLAUDE") == nullptr && status.rfind("ok:", 0) != 0)
    return "scripts/install-agents.sh did not report Claude Code as installed (" +
           (status.empty() ? std::string("no .npm-agents/install-status-claude-code.txt") : status) +
           ") — run it again, or set AGENTHOST_REAL_CLAUDE";
  return {};
}

// A path as Claude Code names its project folder (every '/' and '.' a '-').
inline std::string munged(std::string path) {
  for (auto& c : path)
    if (c == '/' || c == '.') c = '-';
  return path;
}

// "exited with code N" / "killed by signal N (…)" (the terminal's exit_status) → the status.
inline std::optional<process::exit_status> parse_exit_status(const json& terminal) {
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
  std::chrono::milliseconds elapsed{};  // the whole run, claude's start-up included
  std::optional<std::chrono::milliseconds> stop_elapsed;  // from the cancellation to the terminal, if cancelled

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
inline std::optional<int> claude_pid(const std::string& run_mark) {
  for (int pid : processes_with_env(run_mark)) {
    const std::string cmdline = read_file("/proc/" + std::to_string(pid) + "/cmdline");
    if (cmdline.find("--include-partial-messages") != std::string::npos) return pid;
  }
  return std::nullopt;
}

// A process that still exists and is not a zombie.
inline bool alive(int pid) {
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
    stop_clock stop_watch;
    providers::async_run_claude(io.get_executor(), o, text, [&](const message& m) { r.messages.push_back(m); },
                                asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code ec, message t) {
                                  r.ec = ec;
                                  r.terminal = std::move(t);
                                  done = true;
                                }));
    r.finished = run_until(io, [&] {
      if (!done && !r.cancel_sent && cancel_when && cancel_when(r)) {
        r.cancel_sent = true;
        stop_watch.mark();
        sig.emit(asio::cancellation_type::terminal);
      }
      return done;
    }, 60s);
    if (!r.finished) {  // bounded: cancel, which stops the tree, then report
      sig.emit(asio::cancellation_type::terminal);
      run_until(io, [&] { return done; }, 20s);
    }
    const auto ended = std::chrono::steady_clock::now();
    r.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(ended - t0);
    if (r.finished) r.stop_elapsed = stop_watch.until(ended);
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
  // stop_elapsed: from the signal to run()'s return (its checks included: an upper bound).
  claude_run run_signalled_during_tool(int sig, const std::string& record_as, std::optional<int>& sleep_pid) {
    stop_clock stop_watch;
    claude_run r = run("long-tool-echo", [&](const claude_run& now) {
      if (stop_watch.marked()) return false;
      if (!sleep_runs(!now.of(message_type::tool_call).empty(), run_mark(), sleep_pid)) return false;
      const auto pid = claude_pid(run_mark());
      EXPECT_TRUE(pid.has_value());
      stop_watch.mark();
      if (pid) ::kill(*pid, sig);
      return false;
    }, record_as);
    if (r.finished) r.stop_elapsed = stop_watch.until(std::chrono::steady_clock::now());
    return r;
  }

  std::string config_dir = dir + "/claude-config";
};

// The raw API events Claude relays (`stream_event`, main agent only), in order.
inline std::vector<const json*> api_events(const cli_result& r) {
  std::vector<const json*> out;
  for (const auto* e : r.of_type("stream_event"))
    if (e->at("parent_tool_use_id").is_null()) out.push_back(&e->at("event"));
  return out;
}

// Every delta of `kind` ("text_delta" → "text", "thinking_delta" → "thinking"), in order.
inline std::vector<std::string> deltas(const cli_result& r, const std::string& kind, const std::string& field) {
  std::vector<std::string> out;
  for (const auto* ev : api_events(r))
    if (ev->value("type", "") == "content_block_delta" && ev->at("delta").value("type", "") == kind)
      out.push_back(ev->at("delta").at(field).get<std::string>());
  return out;
}

// The streamed deltas of `kind` joined per content block (one string per block that had any), in order.
inline std::vector<std::string> streamed_blocks(const cli_result& r, const std::string& kind,
                                                const std::string& field) {
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
inline std::vector<const json*> frame_blocks(const cli_result& r, const std::string& type = {}) {
  std::vector<const json*> out;
  for (const auto* e : r.of_type("assistant"))
    for (const auto& b : e->at("message").at("content"))
      if (type.empty() || b.value("type", "") == type) out.push_back(&b);
  return out;
}

inline std::vector<std::string> frame_texts(const cli_result& r, const std::string& type, const std::string& field) {
  std::vector<std::string> out;
  for (const auto* b : frame_blocks(r, type)) out.push_back(b->at(field).get<std::string>());
  return out;
}

inline const json& result_event(const cli_result& r) {
  static const json none;
  const auto results = r.of_type("result");
  return results.empty() ? none : *results.back();
}

// The frame of every run: system/init first (with the scenario as model and the work dir as cwd), every line JSON.
inline void expect_run_frame(const cli_result& r, const std::string& scenario, const std::string& cwd) {
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
inline std::size_t expect_well_formed_api_stream(const cli_result& r) {
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
inline void expect_script(const cli_result& r, const script& s) {
  EXPECT_EQ(deltas(r, "text_delta", "text"), s.text_chunks) << r.dump();
  EXPECT_EQ(joined(deltas(r, "text_delta", "text")), s.text());
  EXPECT_EQ(streamed_blocks(r, "text_delta", "text"), s.texts);
  EXPECT_EQ(streamed_blocks(r, "thinking_delta", "thinking"), s.thoughts) << r.dump();
  EXPECT_EQ(frame_texts(r, "text", "text"), s.texts);
  EXPECT_EQ(frame_texts(r, "thinking", "thinking"), s.thoughts);
  for (const auto* b : frame_blocks(r, "thinking")) EXPECT_FALSE(b->value("signature", "").empty());
}

inline void expect_success_result(const cli_result& r, const script& s, int turns, int input_tokens,
                                  int output_tokens) {
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
inline void expect_session(const claude_run& r, const std::string& scenario, const std::string& cwd) {
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
inline void expect_completed(const claude_run& r, const script& s, int turns, int input_tokens, int output_tokens) {
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
inline const message* expect_one_tool_call(const claude_run& r, const std::string& id, const json& input,
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

}  // namespace agenthost::test::real::claude_suite
