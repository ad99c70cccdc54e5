#include "agents.hpp"

#include <agenthost/providers/claude.hpp>
#include <agenthost/providers/codex.hpp>
#include <agenthost/providers/gemini.hpp>
#include <agenthost/providers/opencode.hpp>
#include <agenthost/providers/pi.hpp>
#include <agenthost/providers/probe.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>

#include <memory>

namespace agenthost::cli {

namespace asio = boost::asio;

namespace {

// The options every provider shares, filled from the command line; the rest stays the provider's default.
template <class Options>
Options with_common(Options o, const parsed& p) {
  const run_common& c = p.common;
  if (!c.executable.empty()) o.executable = c.executable;
  o.model = c.model;
  o.working_directory = c.cwd;
  o.session_id = c.session;
  if (c.thinking) o.thinking_output = *c.thinking;
  if (c.deadline) o.run.deadline = c.deadline;
  if (c.idle_timeout) o.run.idle_timeout = c.idle_timeout;
  if (c.first_event_timeout) o.run.first_event_timeout = c.first_event_timeout;
  o.extra_args = c.extra_args;
  o.log = p.log;
  return o;
}

// A run starts with what a probe finds, as `doctor` reports it: the executable where doctor finds it (an install
// place off PATH included) and, for pi, the version its flags depend on (with_probe). The probe is a quick one (no
// process started: the version from the npm install's package.json); only pi, when that gives no version, is asked
// `pi --version` (seconds: Node.js starts). A signal during the probe ends the run cancelled before it starts.
template <class Options, class Run>
void start_probed(asio::any_io_executor ex, providers::agent_kind kind, Options o, const parsed& p, Run run,
                  providers::message_handler on_message, asio::cancellation_slot slot, run_done done,
                  bool quick = true) {
  auto po = providers::probe_options_for(o);
  po.run_version_commands = !quick;
  providers::async_probe(
      ex, kind, std::move(po),
      asio::bind_cancellation_slot(slot, [ex, kind, o = std::move(o), &p, run, on_message = std::move(on_message), slot,
                                          done = std::move(done), quick](boost::system::error_code ec,
                                                                         providers::probe_result r) mutable {
        if (!ec && quick && kind == providers::agent_kind::pi && !r.executable.empty() && !r.version)
          return start_probed(std::move(ex), kind, std::move(o), p, run, std::move(on_message), slot,
                              std::move(done), false);
        if (!ec && p.log.enabled(log_level::warn))
          for (const auto& problem : r.problems) p.log.sink(log_level::warn, "probe: " + problem);
        auto probed = providers::with_probe(std::move(o), r);
        if (!ec) {
          run(ex, std::move(probed), p.prompt, std::move(on_message), asio::bind_cancellation_slot(slot, std::move(done)));
          return;
        }
        // Cancelled while probing: the run is started cancelled, so that it ends as any cancelled run does (its
        // terminal.cancelled, no process spawned).
        auto cancel = std::make_shared<asio::cancellation_signal>();
        run(ex, std::move(probed), p.prompt, std::move(on_message),
            asio::bind_cancellation_slot(cancel->slot(), [cancel, done = std::move(done)](
                                                             boost::system::error_code e, transport::message m) {
              done(e, std::move(m));
            }));
        cancel->emit(asio::cancellation_type::terminal);
      }));
}

// One entry per agent from its provider's functions; `Options` is the provider's options aggregate.
// `base` gives the provider's options before the common ones are applied (its defaults, or pi's own flags).
template <class Base, class Run, class MakeMapper>
agent_entry entry(const char* name, providers::agent_kind kind, Base base, Run run, MakeMapper make_mapper) {
  return {name,
          [base, run, kind](asio::io_context& io, const parsed& p, providers::message_handler on_message,
                            asio::cancellation_slot slot, run_done done) {
            start_probed(io.get_executor(), kind, with_common(base(p), p), p, run, std::move(on_message), slot,
                         std::move(done));
          },
          [base, make_mapper](const parsed& p) { return make_mapper(with_common(base(p), p)); },
          [base](const parsed& p) { return with_common(base(p), p).run; }};
}

const std::vector<agent_entry>& agents() {
  static const std::vector<agent_entry> all = {
      entry("pi", providers::agent_kind::pi, [](const parsed& p) { return p.pi; },
            [](asio::any_io_executor ex, providers::pi_options o, std::string_view prompt,
               providers::message_handler cb, auto token) {
              providers::async_run_pi(std::move(ex), o, prompt, std::move(cb), std::move(token));
            },
            [](const providers::pi_options& o) { return providers::make_pi_mapper(o); }),
      entry("claude", providers::agent_kind::claude, [](const parsed&) { return providers::claude_options{}; },
            [](asio::any_io_executor ex, providers::claude_options o, std::string_view prompt,
               providers::message_handler cb, auto token) {
              providers::async_run_claude(std::move(ex), o, prompt, std::move(cb), std::move(token));
            },
            [](const providers::claude_options& o) { return providers::make_claude_mapper(o); }),
      entry("codex", providers::agent_kind::codex, [](const parsed&) { return providers::codex_options{}; },
            [](asio::any_io_executor ex, providers::codex_options o, std::string_view prompt,
               providers::message_handler cb, auto token) {
              providers::async_run_codex(std::move(ex), o, prompt, std::move(cb), std::move(token));
            },
            [](const providers::codex_options& o) { return providers::make_codex_mapper(o); }),
      entry("gemini", providers::agent_kind::gemini, [](const parsed&) { return providers::gemini_options{}; },
            [](asio::any_io_executor ex, providers::gemini_options o, std::string_view prompt,
               providers::message_handler cb, auto token) {
              providers::async_run_gemini(std::move(ex), o, prompt, std::move(cb), std::move(token));
            },
            [](const providers::gemini_options& o) { return providers::make_gemini_mapper(o); }),
      entry("opencode", providers::agent_kind::opencode, [](const parsed&) { return providers::opencode_options{}; },
            [](asio::any_io_executor ex, providers::opencode_options o, std::string_view prompt,
               providers::message_handler cb, auto token) {
              providers::async_run_opencode(std::move(ex), o, prompt, std::move(cb), std::move(token));
            },
            [](const providers::opencode_options& o) { return providers::make_opencode_mapper(o); }),
  };
  return all;
}

}  // namespace

const agent_entry* find_agent(std::string_view name) {
  for (const auto& a : agents())
    if (name == a.name) return &a;
  return nullptr;
}

std::string agent_names() {
  std::string s;
  for (const auto& a : agents()) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

}  // namespace agenthost::cli
