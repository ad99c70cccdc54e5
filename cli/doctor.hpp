// `agenthost doctor`: probe the agents and say which are usable and what to do about the others (internal to cli/).
#pragma once

#include "options.hpp"

#include <string>
#include <string_view>

namespace agenthost::cli {

/// True when `agent` is one doctor can probe.
bool doctor_knows(std::string_view agent);
/// "pi" (comma-separated, in display order).
std::string doctor_agent_names();

/// Probes the requested agents (all known ones when p.agents is empty) concurrently and prints a table (`human`) or
/// one JSON array. SIGINT/SIGTERM kill the running version commands; what was found is printed. Returns 130 after
/// such a signal, else 0 when every requested agent is usable, 1 otherwise.
int run_doctor(const parsed& p, bool human);

}  // namespace agenthost::cli
