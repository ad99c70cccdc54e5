// Runs pi once and prints what it says. Usage: agenthost_example_quickstart "your prompt"
#include <agenthost/providers/pi.hpp>

#include <iostream>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  // [quickstart]
  using namespace agenthost;
  providers::pi_options options{.model = "claude-sonnet-4-5", .thinking_level = "low"};
  options.run.idle_timeout = std::chrono::minutes(2);  // watchdog: no output for 2 min -> terminal.failed
  transport::message terminal = providers::run_pi(options, argv[1], [](const transport::message& m) {
    if (m.type == transport::message_type::assistant) std::cout << m.content["text"].get<std::string>() << std::flush;
    if (m.type == transport::message_type::tool_call) std::cout << "\n[tool] " << m.content["name"] << "\n";
  });
  if (terminal.type != transport::message_type::terminal_completed)
    std::cerr << "\nfailed: " << terminal.content.value("text", "") << " (" << terminal.content.value("reason", "")
              << ", retryable: " << terminal.content.value("retryable", false) << ")\n";
  // [quickstart]
  return terminal.type == transport::message_type::terminal_completed ? 0 : 1;
}
