// Runs a tiny "agent" (/bin/echo printing a pi session header and nothing else) through the installed library and
// checks the contract: session.started first, then terminal.failed with reason no_terminal_event.
#include <agenthost/providers/pi.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  agenthost::process::spawn_options spawn{
      .executable = "/bin/echo",
      .args = {R"({"type":"session","version":3,"id":"consumer-session","cwd":"/tmp"})"},
      .stdin_mode = agenthost::process::stdin_kind::null};
  if (argc > 1) {  // the installed reaper helper: require it, so a broken install fails here
    spawn.containment = agenthost::process::containment_kind::reaper;
    spawn.reaper_path = argv[1];
  }
  std::vector<std::string> types;
  auto terminal = agenthost::providers::run_agent(
      spawn, agenthost::providers::make_pi_mapper({}), {},
      [&](const agenthost::transport::message& m) { types.emplace_back(to_string(m.type)); });
  const bool ok = types.size() == 2 && types[0] == "session.started" && types[1] == "terminal.failed" &&
                  terminal.content.value("reason", "") == "no_terminal_event";
  std::printf("consumer: %s (%s)\n", ok ? "ok" : "FAILED", terminal.to_json_line().c_str());
  return ok ? 0 : 1;
}
