// Shared by the real-CLI tests (tests/real/) that run an installed agent CLI against the scripted mock model server
// (tests/mockmodel/): the installed CLI and why a suite must skip, the scripts, the mock server as a child process,
// the fixture frame (isolated scratch dir, run mark, leftovers killed), one CLI run driven directly through
// agenthost::process::child with its JSONL lines, exit status and (optionally) a three-phase stop, and the recording
// of what the CLI printed into fixtures/<agent>/recorded/.
#pragma once

#include "test_util.hpp"

#include <agenthost/process/child.hpp>
#include <agenthost/transport/message.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace agenthost::test::real {

/// A bound on a cancelled run's stop, from the cancellation (or the SIGINT) to the run's end. The three-phase stop
/// takes at most its grace (2 s by default) + the 5 s wait after the kill; the rest is slack for a loaded sanitizer
/// run. Far below what waiting for the scenarios' 40 s stream or 30 s tool would take, which is what the cancellation
/// tests rule out. The whole run is not bounded that tightly: a CLI's start-up alone took 14–17 s on a 2-vCPU VM, and
/// 37 s there with two of them starting at once under AddressSanitizer.
inline constexpr std::chrono::seconds kStopBound{15};
/// A run's stop_elapsed for a check against kStopBound: a run that was never cancelled (nullopt) fails it.
[[nodiscard]] inline std::chrono::milliseconds stopped_in(const std::optional<std::chrono::milliseconds>& stop) {
  return stop.value_or(std::chrono::milliseconds::max());
}

/// Times a run's stop the same way in every helper: mark() when the cancellation (or the signal) is sent; until(end)
/// is then the time from there to `end`, the run's end, and nullopt when nothing was marked (a run never cancelled).
class stop_clock {
 public:
  void mark() noexcept { marked_ = std::chrono::steady_clock::now(); }
  [[nodiscard]] bool marked() const noexcept { return marked_.has_value(); }
  /// When mark() was called (the clock's epoch if it was not).
  [[nodiscard]] std::chrono::steady_clock::time_point marked_at() const noexcept {
    return marked_.value_or(std::chrono::steady_clock::time_point{});
  }
  [[nodiscard]] std::optional<std::chrono::milliseconds> until(std::chrono::steady_clock::time_point end) const {
    if (!marked_) return std::nullopt;
    return std::chrono::duration_cast<std::chrono::milliseconds>(end - *marked_);
  }

 private:
  std::optional<std::chrono::steady_clock::time_point> marked_;
};

using nlohmann::json;
using transport::message;
using transport::message_type;

inline const std::string source_dir = AGENTHOST_SOURCE_DIR;
inline const std::string mockmodel_dir = source_dir + "/tests/mockmodel";

/// The prompt of a scenario run: the mock picks the scenario by the model name, so the text only has to be a prompt.
inline const std::string scenario_prompt = "Do what the scenario says.";

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

/// The strings one after another.
inline std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x;
  return s;
}

/// The messages of type `t`, in order.
inline std::vector<const message*> of_type(const std::vector<message>& ms, message_type t) {
  std::vector<const message*> out;
  for (const auto& m : ms)
    if (m.type == t) out.push_back(&m);
  return out;
}

/// The version in the package.json of an installed npm package ("" when unknown).
inline std::string npm_package_version(const std::string& package_json) {
  const auto j = json::parse(read_file(package_json), nullptr, false);
  return j.is_object() ? j.value("version", "") : "";
}

/// `$override_var` when set and not empty, else `installed` (the CLI installed by scripts/install-agents.sh).
inline std::string cli_executable(const char* override_var, const std::string& installed) {
  if (const char* p = std::getenv(override_var); p != nullptr && *p != '\0') return p;
  return installed;
}

/// The version in the package.json of the npm package whose .bin link (or file) `executable` is ("" when unknown).
inline std::string npm_version_of_executable(const std::string& executable) {
  std::error_code ec;
  const auto target = std::filesystem::canonical(executable, ec);  // e.g. …/pi-coding-agent/dist/cli.js
  if (ec) return {};
  for (auto dir = target.parent_path(); dir.has_relative_path(); dir = dir.parent_path())
    if (std::filesystem::exists(dir / "package.json")) return npm_package_version(dir / "package.json");
  return {};
}

/// Why a real-CLI suite cannot run here ("" when it can): `name` is not installed at `executable` (with the last
/// result from `status_file`, under .npm-agents/, unless `override_var` is set), or python3 is missing.
inline std::string unavailable_reason(const std::string& name, const std::string& executable,
                                      const std::string& status_file, const char* override_var) {
  if (::access(executable.c_str(), X_OK) != 0) {
    std::string why = name + " is not installed at " + executable + " — run scripts/install-agents.sh";
    const std::string status = first_line(read_file(source_dir + "/.npm-agents/" + status_file));
    if (!status.empty() && std::getenv(override_var) == nullptr) why += " (its last result: " + status + ")";
    return why;
  }
  if (::access(AGENTHOST_PYTHON3, X_OK) != 0) return std::string("python3 not found (") + AGENTHOST_PYTHON3 + ")";
  return {};
}

/// pi (the two pi suites): AGENTHOST_REAL_PI or the one in .npm-agents/, its version, why the suite must skip.
inline std::string pi_executable() {
  return cli_executable("AGENTHOST_REAL_PI", source_dir + "/.npm-agents/node_modules/.bin/pi");
}
inline std::string pi_version_string() { return npm_version_of_executable(pi_executable()); }
inline std::string pi_unavailable_reason() {
  return unavailable_reason("pi", pi_executable(), "install-status.txt", "AGENTHOST_REAL_PI");
}

/// An agent CLI that scripts/install-agents.sh installs into a prefix of its own, .npm-agents/<dir>/ (its result in
/// .npm-agents/install-status-<dir>.txt); `override_var`, when set, names another executable to test.
struct npm_cli {
  std::string name;     // the command, and the agent's name in messages and recordings
  std::string dir;      // the prefix under .npm-agents/
  std::string package;  // the npm package, whose package.json has the version
  const char* override_var;

  [[nodiscard]] std::string executable() const {
    return cli_executable(override_var, source_dir + "/.npm-agents/" + dir + "/node_modules/.bin/" + name);
  }
  [[nodiscard]] std::string version() const {
    return npm_package_version(source_dir + "/.npm-agents/" + dir + "/node_modules/" + package + "/package.json");
  }
  /// Why the suite must skip ("" when it can run).
  [[nodiscard]] std::string unavailable_reason() const {
    return real::unavailable_reason(name, executable(), "install-status-" + dir + ".txt", override_var);
  }
};

inline const npm_cli claude_cli{"claude", "claude-code", "@anthropic-ai/claude-code", "AGENTHOST_REAL_CLAUDE"};
inline const npm_cli codex_cli{"codex", "codex", "@openai/codex", "AGENTHOST_REAL_CODEX"};
inline const npm_cli gemini_cli{"gemini", "gemini", "@google/gemini-cli", "AGENTHOST_REAL_GEMINI"};
inline const npm_cli opencode_cli{"opencode", "opencode", "opencode-ai", "AGENTHOST_REAL_OPENCODE"};

inline const json& scenarios() {
  static const json s = json::parse(read_file(mockmodel_dir + "/scenarios.json")).at("scenarios");
  return s;
}

/// What a scenario scripts, over all its turns.
struct script {
  std::vector<std::string> text_chunks;  // every text delta, in order
  std::vector<std::string> texts;        // one per text block, in order
  std::vector<std::string> thoughts;     // one per thinking block, in order
  std::vector<json> tool_calls;          // {id, name, arguments}
  std::string last_text;                 // the text of the last turn
  std::size_t turns = 0;

  [[nodiscard]] std::string text() const { return joined(text_chunks); }
};

inline script scripted(const std::string& name) {
  script s;
  for (const auto& raw_turn : scenarios().at(name).at("turns")) {
    const json& turn = raw_turn.contains("attempts") ? raw_turn["attempts"].back() : raw_turn;
    ++s.turns;
    s.last_text.clear();
    for (const auto& block : turn.value("blocks", json::array())) {
      if (block.contains("text")) {
        std::vector<std::string> chunks;
        if (const auto& t = block["text"]; t.is_object())  // {"repeat": chunk, "count": n}
          chunks.assign(t.at("count").get<std::size_t>(), t.at("repeat").get<std::string>());
        else
          chunks = t.get<std::vector<std::string>>();
        std::string whole;
        for (const auto& c : chunks) {
          s.text_chunks.push_back(c);
          whole += c;
        }
        s.texts.push_back(whole);
        s.last_text += whole;
      } else if (block.contains("thinking")) {
        std::string t;
        for (const auto& c : block["thinking"]) t += c.get<std::string>();
        s.thoughts.push_back(t);
      } else if (block.contains("tool_call")) {
        s.tool_calls.push_back(block["tool_call"]);
      }
    }
  }
  return s;
}

/// The mock model server as a child process of the test (killed with its tree when the object goes away).
class mock_model {
 public:
  mock_model(asio::io_context& io, const std::string& dir, const std::string& token) : log_(dir + "/requests.jsonl") {
    auto c = process::child::spawn(
        io.get_executor(),
        {.executable = AGENTHOST_PYTHON3,
         .args = {"-B", mockmodel_dir + "/mockmodel.py", "--log", log_, "--max-seconds", "300"},
         .env = {.set = {{"AGENTHOST_MOCK_TOKEN", token}}},
         .stdin_mode = process::stdin_kind::null,
         .reaper_path = AGENTHOST_REAPER});
    if (!c) {
      error_ = "could not start the mock model server: " + c.error().message;
      return;
    }
    child_.emplace(std::move(*c));
    struct first {
      bool done = false;
      int port = 0;
    };
    auto got = std::make_shared<first>();
    child_->async_read_lines([got](boost::system::error_code ec, process::line_batch lines) {
      got->done = true;
      if (!ec && !lines.empty()) {
        const std::string l(lines.front().text);
        if (l.rfind("PORT ", 0) == 0) got->port = std::atoi(l.c_str() + 5);
      }
    });
    if (!run_until(io, [&] { return got->done; }, 20s))
      error_ = "the mock model server printed no port within 20 s: " + child_->stderr_tail();
    else if (got->port <= 0)
      error_ = "the mock model server did not start: " + child_->stderr_tail();
    port_ = got->port;
  }

  [[nodiscard]] const std::string& error() const { return error_; }
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string origin() const { return "http://127.0.0.1:" + std::to_string(port_); }
  /// The OpenAI-compatible base URL (origin + "/v1").
  [[nodiscard]] std::string base_url() const { return origin() + "/v1"; }

  /// The log records: one per request, plus {"n", "stream_started": scenario} when a stream's first event is out.
  /// The server writes a request's record after its answer is out, so an agent may have read the answer and exited
  /// before the record exists: this waits (at most 10 s) until every request the server received has its record.
  /// The "received" lines themselves are not returned.
  [[nodiscard]] std::vector<json> records() const { return read_log(true); }

  /// The last request's record (null when there is none).
  [[nodiscard]] json last_request() const {
    json last;
    for (auto& r : records())
      if (r.is_object() && r.contains("method")) last = std::move(r);
    return last;
  }

  /// "<outcome>@turn<n>" of every finished model request of `scenario`, in order.
  [[nodiscard]] std::vector<std::string> requests_of(const std::string& scenario) const {
    std::vector<std::string> out;
    for (const auto& r : records())
      if (r.is_object() && r.value("scenario", "") == scenario)
        out.push_back(r.value("outcome", "") + "@turn" + r["turn"].dump());
    return out;
  }

  /// Whether a stream of `scenario` has its first event out; asked while the stream runs, so it does not wait.
  [[nodiscard]] bool stream_started(const std::string& scenario) const {
    for (const auto& r : read_log(false))
      if (r.is_object() && r.value("stream_started", "") == scenario) return true;
    return false;
  }

  /// The digest ({bytes, crc32, head, tail}) of the last user message of the last request that had one.
  [[nodiscard]] std::optional<json> last_user_digest() const {
    std::optional<json> digest;
    for (const auto& r : records())
      if (r.is_object() && r.contains("user_digests") && !r["user_digests"].empty()) digest = r["user_digests"].back();
    return digest;
  }

 private:
  // `settled`: wait until every received request has its record (or 10 s have passed).
  [[nodiscard]] std::vector<json> read_log(bool settled) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      std::vector<json> out;
      std::set<std::int64_t> received, finished;
      std::istringstream in(read_file(log_));
      for (std::string l; std::getline(in, l);) {
        if (l.empty()) continue;
        json r = json::parse(l, nullptr, false);
        if (r.is_object() && r.contains("received")) {
          received.insert(r.value("n", std::int64_t{-1}));
          continue;
        }
        if (r.is_object() && r.contains("method")) finished.insert(r.value("n", std::int64_t{-1}));
        out.push_back(std::move(r));
      }
      if (!settled || std::includes(finished.begin(), finished.end(), received.begin(), received.end()) ||
          std::chrono::steady_clock::now() >= deadline)
        return out;
      // Polling the file the server appends to: once its client is gone the server logs within milliseconds.
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  std::string log_;
  std::string error_;
  int port_ = 0;
  std::optional<process::child> child_;
};

/// The frame of a real-CLI test: an isolated scratch dir (removed afterwards) with work/ in it, the mark every
/// process of a run carries in its environment (`mark_var`=<random>), and the mock model server; TearDown kills
/// whatever carries the run's or the mock's mark. A suite's SetUp calls start() and returns when it skipped/failed.
class real_cli_test : public ::testing::Test {
 protected:
  explicit real_cli_test(const std::string& name, std::string mark_variable = "AGENTHOST_TEST_RUN")
      : mark_var(std::move(mark_variable)), dir(make_dir("/tmp/agenthost-real-" + name + "-XXXXXX")) {}

  /// Skips with `why_unavailable` (when not empty); otherwise creates `dirs` and work/, and starts the mock.
  void start(const std::string& why_unavailable, const std::vector<std::string>& dirs) {
    if (!why_unavailable.empty()) GTEST_SKIP() << why_unavailable;
    for (const auto& d : dirs) std::filesystem::create_directories(d);
    std::filesystem::create_directories(work);
    mock.emplace(io, dir, mock_token);
    ASSERT_EQ(mock->error(), "");
  }
  [[nodiscard]] bool stopped_early() const { return IsSkipped() || HasFatalFailure(); }

  void TearDown() override {
    mock.reset();
    kill_leftovers(run_mark());
    kill_leftovers("AGENTHOST_MOCK_TOKEN=" + mock_token);
    std::filesystem::remove_all(dir);
  }

  /// The mark every process of the run carries (the CLI, its tools' shells and commands).
  [[nodiscard]] std::string run_mark() const { return mark_var + "=" + mark; }

  /// A run's environment: the host's without `unset`, the proxies (the mock is on 127.0.0.1) and NODE_OPTIONS (every
  /// CLI here is a node program or started by one), with `set` and the run mark.
  [[nodiscard]] process::environment_options environment(std::vector<std::string> unset,
                                                         std::map<std::string, std::string> set) const {
    unset.insert(unset.begin(), {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"});
    unset.emplace_back("NODE_OPTIONS");
    set.emplace("NO_PROXY", "127.0.0.1,localhost");
    set.emplace(mark_var, mark);
    return {.unset = std::move(unset), .set = std::move(set)};
  }

  /// What record_fixture() replaces so that a recording does not depend on this machine: the work dir, the scratch
  /// dir (in that order: work is inside it) and the mock's port (in URLs and host:port alike).
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> stable_paths() const {
    return {{work, "/home/user/project"},
            {dir, "/home/user"},
            {"127.0.0.1:" + std::to_string(mock->port()), "127.0.0.1:18765"}};
  }

  static std::string make_dir(std::string pattern) { return ::mkdtemp(pattern.data()); }

  asio::io_context io;
  std::string mark_var;
  std::string mark = random_token();
  std::string mock_token = random_token();
  std::string dir;
  std::string work = dir + "/work";
  std::optional<mock_model> mock;
};

/// A JSONL line as JSON (a discarded value when it is not JSON).
inline json parse_line(const std::string& line) { return json::parse(line, nullptr, false); }

/// One CLI run: every stdout line, the leader's exit status and, when it was stopped, the stop's report.
struct cli_result {
  std::vector<std::string> lines;
  std::vector<json> events;  // the lines that are JSON objects
  std::optional<process::exit_status> status;
  std::optional<process::stop_report> stop;
  boost::system::error_code stop_ec;
  std::string stderr_tail;
  std::chrono::milliseconds elapsed{};
  bool finished = false;

  [[nodiscard]] std::vector<const json*> of_type(const std::string& type) const {
    std::vector<const json*> out;
    for (const auto& e : events)
      if (e.value("type", "") == type) out.push_back(&e);
    return out;
  }
  [[nodiscard]] std::string status_text() const { return status ? status->to_string() : "no status"; }
  [[nodiscard]] std::string dump() const {
    std::string s;
    for (const auto& l : lines) s += "  " + l + "\n";
    return s + "  [" + status_text() + "] stderr: " + stderr_tail.substr(stderr_tail.size() > 2000 ? stderr_tail.size() - 2000 : 0);
  }
  [[nodiscard]] int exit_code() const {
    const auto* e = status ? status->as_exited() : nullptr;
    return e != nullptr ? e->code : -1;
  }
};

/// A live process carrying `needle` in its environment whose command name is `comm`.
inline std::optional<int> process_named(const std::string& needle, const std::string& comm) {
  for (int pid : processes_with_env(needle)) {
    std::string c = read_file("/proc/" + std::to_string(pid) + "/comm");
    if (!c.empty() && c.back() == '\n') c.pop_back();
    if (c == comm) return pid;
  }
  return std::nullopt;
}

/// For a cancel_when that waits for a tool's `sleep`: true once `tool_called` and a `sleep` with `run_mark` runs (its
/// pid kept in `sleep_pid`, so that the test can check it is gone afterwards).
inline bool sleep_runs(bool tool_called, const std::string& run_mark, std::optional<int>& sleep_pid) {
  if (!tool_called) return false;
  if (!sleep_pid) sleep_pid = process_named(run_mark, "sleep");
  return sleep_pid.has_value();
}

/// AGENTHOST_RECORD_FIXTURES=1: `lines` → fixtures/<agent>/recorded/<file>, each `from` replaced by its `to`.
inline void record_fixture(const std::string& agent, const std::string& file, const std::vector<std::string>& lines,
                           const std::vector<std::pair<std::string, std::string>>& replacements) {
  const char* flag = std::getenv("AGENTHOST_RECORD_FIXTURES");
  if (flag == nullptr || std::string(flag) != "1") return;
  const std::string out_dir = source_dir + "/fixtures/" + agent + "/recorded";
  std::filesystem::create_directories(out_dir);
  std::ofstream out(out_dir + "/" + file, std::ios::binary | std::ios::trunc);
  for (std::string line : lines) {
    for (const auto& [from, to] : replacements)
      for (auto pos = line.find(from); pos != std::string::npos; pos = line.find(from, pos + to.size()))
        line.replace(pos, from.size(), to);
    out << line << "\n";
  }
}

}  // namespace agenthost::test::real
