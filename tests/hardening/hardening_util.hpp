// Helpers of the hardening suites: memory figures of the test process, sanitizer detection, and one provider run
// (fake agent as a real process → async_run_agent → pi mapper) with the checks every case shares.
#pragma once

#include "test_util.hpp"  // tests/process: run_until, random_token, processes_with_env, kill_leftovers

#include <agenthost/providers/pi.hpp>
#include <agenthost/transport/contract_checker.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace agenthost::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool under_sanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool under_sanitizer = true;
#else
inline constexpr bool under_sanitizer = false;
#endif
#else
inline constexpr bool under_sanitizer = false;
#endif

/// A field of /proc/self/status in KiB ("VmRSS", "VmHWM"); -1 when absent.
inline long proc_status_kib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::strtol(line.c_str() + field.size() + 1, nullptr, 10);
  }
  return -1;
}

/// Peak RSS measured around a piece of work: the kernel's high-water mark (VmHWM) is reset first (clear_refs 5, Linux
/// ≥ 4.0) and free heap is given back (malloc_trim), so that `delta_kib()` is what the work itself added on top of
/// the resident set it started with.
class peak_rss_probe {
 public:
  peak_rss_probe() {
    ::malloc_trim(0);
    std::ofstream("/proc/self/clear_refs") << "5";
    start_kib_ = proc_status_kib("VmRSS");
  }
  [[nodiscard]] long start_kib() const { return start_kib_; }
  [[nodiscard]] long peak_kib() const { return proc_status_kib("VmHWM"); }
  [[nodiscard]] long delta_kib() const { return peak_kib() - start_kib_; }

 private:
  long start_kib_ = 0;
};

/// Prints one figure line (and appends it to $AGENTHOST_HARDENING_FIGURES when set) for the report.
inline void report_figure(const std::string& line) {
  std::cout << "[figure] " << line << std::endl;
  if (const char* path = std::getenv("AGENTHOST_HARDENING_FIGURES"); path != nullptr && *path != '\0') {
    std::ofstream(path, std::ios::app) << line << "\n";
  }
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline std::string make_temp_dir(const char* prefix = "/tmp/agenthost-hardening-XXXXXX") {
  std::string t = prefix;
  if (::mkdtemp(t.data()) == nullptr) return {};
  return t;
}

/// The outcome of one provider run.
struct run_result {
  boost::system::error_code ec;
  std::vector<transport::message> messages;
  transport::message terminal;
  bool done = false;
  std::chrono::milliseconds elapsed{};

  [[nodiscard]] std::string reason() const { return terminal.content.value("reason", std::string()); }
  [[nodiscard]] std::vector<std::string> invalid_lines() const {
    std::vector<std::string> r;
    if (auto it = terminal.content.find("invalid_output_lines"); it != terminal.content.end() && it->is_array())
      for (const auto& l : *it) r.push_back(l.get<std::string>());
    return r;
  }
  [[nodiscard]] std::size_t invalid_count() const {
    return terminal.content.value("invalid_output_line_count", std::size_t{0});
  }
  [[nodiscard]] std::size_t count(transport::message_type t) const {
    std::size_t n = 0;
    for (const auto& m : messages) n += m.type == t ? 1 : 0;
    return n;
  }
  [[nodiscard]] std::string assistant_text() const {
    std::string s;
    for (const auto& m : messages)
      if (m.type == transport::message_type::assistant) s += m.content.at("text").get<std::string>();
    return s;
  }
};

/// A fixture for provider runs of the fake agent: a private temp dir, a token in the agent's environment, and after
/// each test a sweep of whatever still carries the token.
class provider_fixture : public ::testing::Test {
 protected:
  void TearDown() override {
    kill_leftovers("AGENTHOST_TEST_TOKEN=" + token);
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }

  [[nodiscard]] process::spawn_options fake(std::vector<std::string> args) const {
    return {.executable = AGENTHOST_FAKE_AGENT,
            .args = std::move(args),
            .env = {.set = {{"AGENTHOST_TEST_TOKEN", token}}},
            .stdin_mode = process::stdin_kind::null,
            .reaper_path = AGENTHOST_REAPER};
  }

  /// Runs to the end through async_run_agent + the pi mapper and checks what every run must satisfy: it ends within
  /// `timeout`, the contract checker finds nothing, the terminal is the last message, no process is left.
  run_result run(providers::spawn_request spawn, providers::run_options opts = {},
                 mapper::thinking_mode thinking = mapper::thinking_mode::buffered,
                 std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    run_result r;
    asio::cancellation_signal sig;
    const auto t0 = std::chrono::steady_clock::now();
    providers::async_run_agent(
        io.get_executor(), std::move(spawn), providers::make_pi_mapper({.thinking_output = thinking}), opts,
        [&](const transport::message& m) { r.messages.push_back(m); },
        asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code ec, transport::message t) {
          r.ec = ec;
          r.terminal = std::move(t);
          r.done = true;
        }));
    const bool ended = run_until(io, [&] { return r.done; }, timeout);
    EXPECT_TRUE(ended) << "no terminal within " << timeout.count() << " ms";
    if (!ended) {  // do not leave a run behind: cancel it and let the stop finish
      sig.emit(asio::cancellation_type::terminal);
      run_until(io, [&] { return r.done; }, std::chrono::seconds(20));
    }
    r.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    EXPECT_EQ(transport::check_run(r.messages), std::vector<std::string>{});
    EXPECT_FALSE(r.messages.empty());
    if (!r.messages.empty()) {
      EXPECT_EQ(r.messages.back(), r.terminal);
    }
    for (const auto& m : r.messages) (void)m.to_json_line();  // never throws, whatever the agent printed
    EXPECT_TRUE(processes_with_env("AGENTHOST_TEST_TOKEN=" + token).empty()) << "the run left processes behind";
    return r;
  }

  asio::io_context io;
  std::string token = random_token();
  std::string dir = make_temp_dir();
};

}  // namespace agenthost::test
