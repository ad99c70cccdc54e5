// Command-line parsing of the agenthost program (internal to cli/).
#pragma once

#include <agenthost/providers/pi.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace agenthost::cli {

enum class command { run, map, replay, doctor, help };

/// The `run` options every agent takes; each agent's entry (agents.cpp) maps them onto its provider's options.
struct run_common {
  std::string executable;                    // --executable (empty: the provider's default name, from PATH)
  std::string model;                         // --model
  std::string cwd;                           // --cwd
  std::optional<std::string> session;        // --session: resume this session
  std::optional<mapper::thinking_mode> thinking;  // --thinking buffered|stream
  std::optional<std::chrono::milliseconds> deadline, idle_timeout, first_event_timeout;
  std::vector<std::string> extra_args;       // --arg, repeatable: passed to the agent verbatim
};

struct parsed {
  command cmd = command::help;
  std::string agent;
  run_common common{};
  /// pi-only options (--provider, --no-session, --tools, --thinking-level).
  providers::pi_options pi{};
  std::vector<std::string> pi_only_flags;  // which pi-only flags were given (an error for the other agents)
  std::string prompt;
  // map / replay
  std::string file;
  std::optional<int> exit_code;
  std::optional<int> exit_signal;
  int replay_delay_ms = 0;
  std::string fake_agent;
  // doctor
  std::vector<std::string> agents;                // --agent, repeatable; empty = every known agent
  std::chrono::milliseconds probe_timeout{5000};  // --timeout: per agent
  bool json_output = false;  // --json: JSONL even on a terminal
  bool verbose = false;
  agenthost::logger log{};  // set by main from --verbose
};

/// Parses argv; on a usage error returns the message (exit code 2).
std::variant<parsed, std::string> parse_command_line(int argc, char** argv);

/// "30s", "500ms", "2m", "1.5s", "10" (seconds).
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);
/// "TERM", "SIGTERM", "15".
std::optional<int> parse_signal(std::string_view text);

extern const char* const usage_text;

}  // namespace agenthost::cli
