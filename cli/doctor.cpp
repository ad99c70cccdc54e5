#include "doctor.hpp"

#include <agenthost/providers/probe.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <algorithm>
#include <csignal>
#include <functional>
#include <iostream>
#include <list>

namespace agenthost::cli {

namespace asio = boost::asio;

namespace {

using done_fn = std::function<void(boost::system::error_code, providers::probe_result)>;

// Probes `agent` with the command line's options (--executable only with exactly one --agent, checked by the parser).
void start_probe(asio::io_context& io, providers::agent_kind agent, const parsed& p, asio::cancellation_slot slot,
                 done_fn done) {
  providers::probe_options o{.executable = p.common.executable,
                             .timeout = p.probe_timeout,
                             .working_directory = p.common.cwd,
                             .log = p.log};
  providers::async_probe(io.get_executor(), agent, std::move(o), asio::bind_cancellation_slot(slot, std::move(done)));
}

std::string cell_version(const providers::probe_result& r) {
  if (r.version) return r.version->to_string();
  return r.executable.empty() ? "-" : "?";
}

// A table for people (stdout is a terminal): one row per agent, problems first, then what to do.
void print_table(const std::vector<providers::probe_result>& results) {
  std::size_t w_agent = 5, w_version = 7, w_status = 6;
  for (const auto& r : results) {
    w_agent = std::max(w_agent, r.agent.size());
    w_version = std::max(w_version, cell_version(r).size());
    w_status = std::max(w_status, std::string(r.available ? "ok" : "unusable").size());
  }
  auto pad = [](std::string s, std::size_t w) {
    s.resize(std::max(s.size(), w), ' ');
    return s;
  };
  std::string out = pad("AGENT", w_agent) + "  " + pad("VERSION", w_version) + "  " + pad("STATUS", w_status) +
                    "  WHAT TO DO\n";
  const std::string indent(w_agent + w_version + w_status + 6, ' ');
  for (const auto& r : results) {
    const std::string status =
        (r.available ? "\x1b[32m" : "\x1b[31m") + pad(r.available ? "ok" : "unusable", w_status) + "\x1b[0m";
    std::vector<std::string> todo;
    for (const auto& p : r.problems) todo.push_back("problem: " + p);
    for (const auto& h : r.hints) todo.push_back(h);
    if (todo.empty()) todo.push_back("-");
    out += pad(r.agent, w_agent) + "  " + pad(cell_version(r), w_version) + "  " + status + "  " + todo[0] + "\n";
    for (std::size_t i = 1; i < todo.size(); ++i) out += indent + todo[i] + "\n";
    if (!r.executable.empty()) {
      std::string where = r.executable.string();
      if (r.runtime)
        where += "  (" + r.runtime->name + " " +
                 (r.runtime->version ? r.runtime->version->to_string() : std::string("?")) +
                 (r.runtime->executable.empty() ? std::string() : " at " + r.runtime->executable.string()) + ")";
      out += indent + "\x1b[2m" + where + "\x1b[0m\n";
    }
  }
  std::cout << out << std::flush;
}

}  // namespace

bool doctor_knows(std::string_view agent) { return providers::agent_kind_from_string(agent).has_value(); }

std::string doctor_agent_names() {
  std::string s;
  for (const auto a : providers::all_agent_kinds) s += (s.empty() ? "" : ", ") + std::string(providers::to_string(a));
  return s;
}

int run_doctor(const parsed& p, bool human) {
  // Every known agent in display order, or the named ones in the user's order (each once).
  std::vector<providers::agent_kind> selected;
  if (p.agents.empty()) {
    selected.assign(providers::all_agent_kinds.begin(), providers::all_agent_kinds.end());
  } else {
    for (const auto& name : p.agents)
      if (auto a = providers::agent_kind_from_string(name);
          a && std::find(selected.begin(), selected.end(), *a) == selected.end())
        selected.push_back(*a);
  }

  asio::io_context io;
  std::vector<providers::probe_result> results(selected.size());
  std::list<asio::cancellation_signal> cancels;  // stable addresses
  std::size_t pending = selected.size();
  asio::signal_set signals(io, SIGINT, SIGTERM);
  bool interrupted = false;
  signals.async_wait([&](boost::system::error_code ec, int) {
    if (ec) return;
    interrupted = true;
    for (auto& c : cancels) c.emit(asio::cancellation_type::terminal);
  });
  for (std::size_t i = 0; i < selected.size(); ++i) {
    auto& cancel = cancels.emplace_back();
    start_probe(io, selected[i], p, cancel.slot(), [&, i](boost::system::error_code, providers::probe_result r) {
      results[i] = std::move(r);
      if (--pending == 0) signals.cancel();
    });
  }
  if (pending == 0) signals.cancel();
  io.run();

  if (human) {
    print_table(results);
  } else {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& r : results) all.push_back(providers::to_json(r));
    std::cout << all.dump(2) << "\n" << std::flush;
  }
  const bool all_usable =
      std::all_of(results.begin(), results.end(), [](const providers::probe_result& r) { return r.available; });
  // What was found is still printed; the exit says the answer is incomplete, as `run` says a cancelled run.
  if (interrupted) return 130;
  return all_usable ? 0 : 1;
}

}  // namespace agenthost::cli
