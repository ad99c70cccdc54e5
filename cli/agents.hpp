// The agents the agenthost program runs, maps and replays (internal to cli/). Adding an agent is one entry in
// agents.cpp: how `run` starts it from the common options, and which mapper reads its output.
#pragma once

#include "options.hpp"

#include <agenthost/mapper/event_mapper.hpp>
#include <agenthost/providers/run.hpp>

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace agenthost::cli {

using run_done = std::function<void(boost::system::error_code, transport::message)>;

struct agent_entry {
  const char* name;
  /// Starts one run of the agent for `p.prompt` (with p.common and, for pi, p.pi): every message to `on_message`,
  /// then `done` once with the terminal. Cancelled through `slot`.
  std::function<void(boost::asio::io_context&, const parsed& p, providers::message_handler on_message,
                     boost::asio::cancellation_slot slot, run_done done)>
      run;
  /// The mapper for `map` / `replay`, with the thinking mode of p.common.
  std::function<std::unique_ptr<mapper::event_mapper>(const parsed& p)> make_mapper;
  /// The run options for `replay` (watchdogs from p.common, the agent's stop policy).
  std::function<providers::run_options(const parsed& p)> replay_run_options;
};

/// nullptr for an agent the program does not know.
const agent_entry* find_agent(std::string_view name);
/// "pi, claude, codex, gemini, opencode"
std::string agent_names();

}  // namespace agenthost::cli
