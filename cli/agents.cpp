#include "agents.hpp"

#include <agenthost/providers/claude.hpp>
#include <agenthost/providers/codex.hpp>
#include <agenthost/providers/gemini.hpp>
#include <agenthost/providers/opencode.hpp>
#include <agenthost/providers/pi.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>

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

// One entry per agent from its provider's functions; `Options` is the provider's options aggregate.
// `base` gives the provider's options before the common ones are applied (its defaults, or pi's own flags).
template <class Base, class Run, class MakeMapper>
agent_entry entry(const char* name, Base base, Run run, MakeMapper make_mapper) {
  return {name,
          [base, run](asio::io_context& io, const parsed& p, providers::message_handler on_message,
                      asio::cancellation_slot slot, run_done done) {
            run(io.get_executor(), with_common(base(p), p), p.prompt, std::move(on_message),
                asio::bind_cancellation_slot(slot, std::move(done)));
          },
          [base, make_mapper](const parsed& p) { return make_mapper(with_common(base(p), p)); },
          [base](const parsed& p) { return with_common(base(p), p).run; }};
}

const std::vector<agent_entry>& agents() {
  static const std::vector<agent_entry> all = {
      entry("pi", [](const parsed& p) { return p.pi; },
            [](asio::any_io_executor ex, providers::pi_options o, std::string_view prompt,
               providers::message_handler cb, auto token) {
              providers::async_run_pi(std::move(ex), o, prompt, std::move(cb), std::move(token));
            },
            [](const providers::pi_options& o) { return providers::make_pi_mapper(o); }),
      entry("claude", [](const parsed&) { return providers::claude_options{}; },
            [](asio::any_io_executor ex, providers::claude_options o, std::string_view prompt,
               providers::message_handler cb, auto token) {
              providers::async_run_claude(std::move(ex), o, prompt, std::move(cb), std::move(token));
            },
            [](const providers::claude_options& o) { return providers::make_claude_mapper(o); }),
      entry("codex", [](const parsed&) { return providers::codex_options{}; },
            [](asio::any_io_executor ex, providers::codex_options o, std::string_view prompt,
               providers::message_handler cb, auto token) {
              providers::async_run_codex(std::move(ex), o, prompt, std::move(cb), std::move(token));
            },
            [](const providers::codex_options& o) { return providers::make_codex_mapper(o); }),
      entry("gemini", [](const parsed&) { return providers::gemini_options{}; },
            [](asio::any_io_executor ex, providers::gemini_options o, std::string_view prompt,
               providers::message_handler cb, auto token) {
              providers::async_run_gemini(std::move(ex), o, prompt, std::move(cb), std::move(token));
            },
            [](const providers::gemini_options& o) { return providers::make_gemini_mapper(o); }),
      entry("opencode", [](const parsed&) { return providers::opencode_options{}; },
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
