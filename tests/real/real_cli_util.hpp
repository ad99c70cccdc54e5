// Shared by the real-CLI tests that drive an agent CLI directly through agenthost::process::child (no provider or
// mapper exists for it yet) against the scripted mock model server (tests/mockmodel/): the scripts, the mock server
// as a child process, one CLI run with its JSONL lines, exit status and (optionally) a three-phase stop, and the
// recording of what the CLI printed into fixtures/<agent>/recorded/.
#pragma once

#include "test_util.hpp"

#include <agenthost/process/child.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace agenthost::test::real {

using nlohmann::json;

inline const std::string source_dir = AGENTHOST_SOURCE_DIR;
inline const std::string mockmodel_dir = source_dir + "/tests/mockmodel";

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

/// The version in the package.json of an installed npm package ("" when unknown).
inline std::string npm_package_version(const std::string& package_json) {
  const auto j = json::parse(read_file(package_json), nullptr, false);
  return j.is_object() ? j.value("version", "") : "";
}

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

  [[nodiscard]] std::string text() const {
    std::string s;
    for (const auto& c : text_chunks) s += c;
    return s;
  }
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

  /// The log records so far: one per request, plus {"n", "stream_started": scenario} when a stream's first event
  /// is out.
  [[nodiscard]] std::vector<json> records() const {
    std::vector<json> out;
    std::istringstream in(read_file(log_));
    for (std::string l; std::getline(in, l);)
      if (!l.empty()) out.push_back(json::parse(l, nullptr, false));
    return out;
  }

  /// "<outcome>@turn<n>" of every finished model request of `scenario`, in order.
  [[nodiscard]] std::vector<std::string> requests_of(const std::string& scenario) const {
    std::vector<std::string> out;
    for (const auto& r : records())
      if (r.is_object() && r.value("scenario", "") == scenario)
        out.push_back(r.value("outcome", "") + "@turn" + r["turn"].dump());
    return out;
  }

  [[nodiscard]] bool stream_started(const std::string& scenario) const {
    for (const auto& r : records())
      if (r.is_object() && r.value("stream_started", "") == scenario) return true;
    return false;
  }

 private:
  std::string log_;
  std::string error_;
  int port_ = 0;
  std::optional<process::child> child_;
};

inline const char* phase_name(process::stop_phase p) {
  switch (p) {
    case process::stop_phase::already_gone: return "already_gone";
    case process::stop_phase::interrupt: return "interrupt (the tree exited within the grace period)";
    case process::stop_phase::kill: return "kill (SIGKILL was needed)";
  }
  return "?";
}

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

/// Runs `options` to its end (bounded by `limit`). `stop_when` is asked after every batch of lines and every 10 ms
/// while the CLI runs; once it says yes, the whole tree is stopped with `policy` (the three-phase stop). With
/// `stdin_data` (and stdin_kind::pipe) that is written to stdin, which is then closed.
inline cli_result run_cli(asio::io_context& io, process::spawn_options options,
                          const std::function<bool(const cli_result&)>& stop_when = {},
                          process::stop_policy policy = process::stop_policy::ctrl_c(),
                          std::chrono::milliseconds limit = 60s,
                          const std::optional<std::string>& stdin_data = std::nullopt) {
  cli_result r;
  const auto t0 = std::chrono::steady_clock::now();
  auto c = process::child::spawn(io.get_executor(), std::move(options));
  if (!c) {
    ADD_FAILURE() << "spawn failed: " << c.error().message;
    return r;
  }
  bool eof = false, exited = false, stopping = false, stopped = false;
  if (stdin_data) {
    c->async_write_stdin(asio::buffer(*stdin_data), [&](boost::system::error_code ec, std::size_t) {
      EXPECT_FALSE(ec) << "writing stdin: " << ec.message();
      c->close_stdin();
    });
  }
  std::function<void()> read = [&] {
    c->async_read_lines([&](boost::system::error_code ec, process::line_batch batch) {
      if (ec) {
        eof = true;
        return;
      }
      for (const auto& l : batch) {
        r.lines.emplace_back(l.text);
        if (auto j = parse_line(r.lines.back()); j.is_object()) r.events.push_back(std::move(j));
      }
      read();
    });
  };
  read();
  c->async_wait([&](boost::system::error_code ec, process::exit_status s) {
    if (!ec) r.status = s;
    exited = true;
  });
  r.finished = run_until(io, [&] {
    if (!stopping && !exited && stop_when && stop_when(r)) {
      stopping = true;
      c->async_stop(policy, [&](boost::system::error_code ec, process::stop_report rep) {
        r.stop_ec = ec;
        r.stop = std::move(rep);
        stopped = true;
      });
    }
    return eof && exited && (!stopping || stopped);
  }, limit);
  if (!r.finished) {  // bounded: kill what is left, then report
    bool killed = false;
    c->async_stop(process::stop_policy::kill_now(), [&](boost::system::error_code, process::stop_report) { killed = true; });
    run_until(io, [&] { return killed; }, 10s);
  }
  if (r.stop && !r.status) r.status = r.stop->leader_status;
  r.stderr_tail = c->stderr_tail();
  r.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  return r;
}

/// A live process carrying `needle` in its environment whose command name is `comm`.
inline std::optional<int> process_named(const std::string& needle, const std::string& comm) {
  for (int pid : processes_with_env(needle)) {
    std::string c = read_file("/proc/" + std::to_string(pid) + "/comm");
    if (!c.empty() && c.back() == '\n') c.pop_back();
    if (c == comm) return pid;
  }
  return std::nullopt;
}

/// A live process (any environment) whose command line is exactly `argv` (NUL-separated in /proc/<pid>/cmdline).
inline std::optional<int> process_with_cmdline(const std::vector<std::string>& argv) {
  std::string want;
  for (const auto& a : argv) want += a + '\0';
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (read_file("/proc/" + name + "/cmdline") == want) {
      const std::string stat = read_file("/proc/" + name + "/stat");
      const auto close = stat.rfind(')');
      if (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z') return std::stoi(name);
    }
  }
  return std::nullopt;
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
