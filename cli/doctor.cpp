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

struct known_agent {
  const char* name;
  // Starts the agent's probe; `executable` is empty unless given with --executable.
  std::function<void(asio::io_context&, const parsed&, asio::cancellation_slot, done_fn)> start;
};

// The agents doctor knows, in display order. Adding one is one entry here.
const known_agent known_agents[] = {
    {"pi",
     [](asio::io_context& io, const parsed& p, asio::cancellation_slot slot, done_fn done) {
       auto pi = p.pi;
       pi.log = p.log;
       auto o = providers::probe_options_for(pi);
       o.timeout = p.probe_timeout;
       providers::async_probe_pi(io.get_executor(), std::move(o), asio::bind_cancellation_slot(slot, std::move(done)));
     }},
};

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

bool doctor_knows(std::string_view agent) {
  return std::any_of(std::begin(known_agents), std::end(known_agents),
                     [&](const known_agent& a) { return agent == a.name; });
}

std::string doctor_agent_names() {
  std::string s;
  for (const auto& a : known_agents) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

int run_doctor(const parsed& p, bool human) {
  std::vector<const known_agent*> selected;
  for (const auto& a : known_agents)
    if (p.agents.empty() || std::find(p.agents.begin(), p.agents.end(), a.name) != p.agents.end())
      selected.push_back(&a);
  // Keep the user's order when agents were named.
  if (!p.agents.empty())
    std::sort(selected.begin(), selected.end(), [&](const known_agent* x, const known_agent* y) {
      return std::find(p.agents.begin(), p.agents.end(), x->name) < std::find(p.agents.begin(), p.agents.end(), y->name);
    });

  asio::io_context io;
  std::vector<providers::probe_result> results(selected.size());
  std::list<asio::cancellation_signal> cancels;  // stable addresses
  std::size_t pending = selected.size();
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](boost::system::error_code ec, int) {
    if (ec) return;
    for (auto& c : cancels) c.emit(asio::cancellation_type::terminal);
  });
  for (std::size_t i = 0; i < selected.size(); ++i) {
    auto& cancel = cancels.emplace_back();
    selected[i]->start(io, p, cancel.slot(), [&, i](boost::system::error_code, providers::probe_result r) {
      if (r.agent.empty()) r.agent = selected[i]->name;
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
  return all_usable ? 0 : 1;
}

}  // namespace agenthost::cli
