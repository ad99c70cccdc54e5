// Fuzz target: the agenthost program's command-line parsing (cli/options.cpp, compiled into this target).
//
// Input: the arguments after argv[0], separated by NUL bytes (at most 64). Properties: parse_command_line,
// parse_duration and parse_signal never crash and never execute undefined behaviour (UBSan aborts); a successful
// parse is coherent (a known agent, the pi-only flags only with pi; a run has a prompt; exit codes 0–255; a
// non-negative replay delay; durations non-negative; --exit-code and --exit-signal exclusive) and, for pi, its options
// go through build_pi_command without a crash; when that succeeds, the prompt is the last argument and cannot be read as a flag or an @file (after "--", or
// with the protective leading space older pi versions get) — or it goes through stdin, and stdin + the last argument
// (its trailing whitespace) end the prompt.
#include "fuzz_util.hpp"

#include "agents.hpp"
#include "options.hpp"

#include <cstdlib>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  agenthost::fuzz::byte_reader in(data, size);
  const std::string_view text = in.rest();
  std::vector<std::string> args{"agenthost"};
  std::size_t pos = 0;
  while (pos <= text.size() && args.size() < 65) {
    std::size_t z = text.find('\0', pos);
    if (z == std::string_view::npos) z = text.size();
    args.emplace_back(text.substr(pos, z - pos));
    pos = z + 1;
  }
  if (text.empty()) args.pop_back();

  for (const auto& a : args) {
    if (auto d = agenthost::cli::parse_duration(a)) AGENTHOST_FUZZ_CHECK(d->count() >= 0, "negative duration: " + a);
    if (auto s = agenthost::cli::parse_signal(a)) AGENTHOST_FUZZ_CHECK(*s > 0 && *s < 65, "signal out of range: " + a);
  }

  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  auto r = agenthost::cli::parse_command_line(static_cast<int>(args.size()), argv.data());
  if (auto* err = std::get_if<std::string>(&r)) {
    AGENTHOST_FUZZ_CHECK(!err->empty(), "an empty usage error");
    return 0;
  }
  const auto& p = std::get<agenthost::cli::parsed>(r);
  using agenthost::cli::command;
  // Commands without an agent run (help, and doctor where it exists) have nothing more to check.
  if (p.cmd != command::run && p.cmd != command::map && p.cmd != command::replay) return 0;
  // Every agent of cli/agents.cpp is accepted; the pi-only flags only with pi.
  AGENTHOST_FUZZ_CHECK(agenthost::cli::find_agent(p.agent) != nullptr, "accepted unknown agent " + p.agent);
  AGENTHOST_FUZZ_CHECK(p.agent == "pi" || p.pi_only_flags.empty(), "pi-only flags accepted for " + p.agent);
  AGENTHOST_FUZZ_CHECK(!(p.exit_code && p.exit_signal), "--exit-code and --exit-signal together");
  if (p.exit_code) AGENTHOST_FUZZ_CHECK(*p.exit_code >= 0 && *p.exit_code <= 255, "exit code out of range");
  AGENTHOST_FUZZ_CHECK(p.replay_delay_ms >= 0, "negative replay delay");  // was KB-CLI-2
  for (const auto& d : {p.pi.run.deadline, p.pi.run.idle_timeout, p.pi.run.first_event_timeout, p.common.deadline,
                        p.common.idle_timeout, p.common.first_event_timeout})
    if (d) AGENTHOST_FUZZ_CHECK(d->count() >= 0, "negative watchdog duration");
  if (p.cmd == command::run) AGENTHOST_FUZZ_CHECK(!p.prompt.empty(), "a run without a prompt");  // was KB-CLI-3
  // The pi command line is checked for pi runs; the other agents' command builders have their own tests.
  if (p.cmd == command::run && p.agent == "pi") {
    auto cmd = agenthost::providers::build_pi_command(p.pi, p.prompt);
    if (cmd) {
      const auto& a = cmd->args;
      AGENTHOST_FUZZ_CHECK(a.size() >= 3, "too few pi arguments");
      const std::string& last = a.back();
      const bool after_p = a[a.size() - 2] == "-p" || (a.size() >= 3 && a[a.size() - 2] == "--" && a[a.size() - 3] == "-p");
      if (cmd->stdin_text) {
        // Through stdin (automatic: above 64 KiB or starting with '@'): the stdin text, then the argument (trailing
        // whitespace) if any, is the prompt from its first non-space on.
        const bool no_argument = last == "-p" || (last == "--" && a[a.size() - 2] == "-p");
        const std::string seen = *cmd->stdin_text + (no_argument ? std::string() : last);
        AGENTHOST_FUZZ_CHECK(p.prompt.size() >= seen.size() &&
                                 p.prompt.compare(p.prompt.size() - seen.size(), seen.size(), seen) == 0,
                             "stdin text + argument is not the end of the prompt");
        AGENTHOST_FUZZ_CHECK(no_argument || after_p, "the prompt's argument is not right after -p [--]");
      } else {
        const bool protected_prompt = last == p.prompt || last == " " + p.prompt;
        AGENTHOST_FUZZ_CHECK(protected_prompt, "the prompt is not the last pi argument");
        AGENTHOST_FUZZ_CHECK(after_p, "the prompt is not right after -p [--]");
      }
      AGENTHOST_FUZZ_CHECK(last.empty() || (last[0] != '-' && last[0] != '@') || a[a.size() - 2] == "--" ||
                               last == "-p" || last == "--",
                           "a prompt starting with '-' or '@' can be read as a flag or a file");
    }
  } else {
    AGENTHOST_FUZZ_CHECK(p.cmd != command::replay || !p.file.empty(), "replay without a file");
  }
  return 0;
}
