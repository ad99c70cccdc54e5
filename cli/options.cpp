#include "options.hpp"

#include "agents.hpp"
#include "doctor.hpp"

#include <agenthost/process/exit_status.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>

namespace agenthost::cli {

const char* const usage_text =
    "usage:\n"
    "  agenthost run --agent AGENT [--executable PATH] [--model M] [--cwd DIR] [--session ID]\n"
    "                [--thinking buffered|stream] [--timeout D] [--idle-timeout D] [--first-event-timeout D]\n"
    "                [--arg ARG]... [--json] [--] PROMPT...\n"
    "      pi only: [--provider P] [--no-session] [--tools a,b] [--thinking-level L]\n"
    "  agenthost map --agent AGENT [--exit-code N | --exit-signal SIG] [FILE]\n"
    "  agenthost replay --agent AGENT [--delay-ms N] [--fake-agent PATH] FILE\n"
    "  agenthost doctor [--agent NAME]... [--executable PATH] [--cwd DIR] [--timeout D] [--json]\n"
    "\n"
    "AGENT: pi, claude, codex, gemini or opencode.\n"
    "Streams normalized messages as JSONL on stdout (a readable rendering on a terminal unless --json); logs on\n"
    "stderr. Durations: 500ms, 30s, 2m. Exit codes: 0 completed, 1 failed, 2 usage error, 130 cancelled.\n"
    "doctor: which agents are installed and usable (a table on a terminal, else one JSON array); exit 0 when every\n"
    "requested agent (default: all known) is usable, 1 otherwise, 130 when interrupted; --cwd: the folder the agents\n"
    "would run in (Gemini's folder trust). --help after any command prints this text.\n";

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const std::string s(text);
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(v) || v < 0) return std::nullopt;
  const std::string_view unit(end);
  double ms = 0;
  if (unit.empty() || unit == "s") ms = v * 1000;
  else if (unit == "ms") ms = v;
  else if (unit == "m") ms = v * 60000;
  else if (unit == "h") ms = v * 3600000;
  else return std::nullopt;
  // Longer than ten years is a typo, and beyond ~9.2e18 ms the conversion would be undefined.
  if (ms > 10.0 * 365 * 24 * 3600 * 1000) return std::nullopt;
  return std::chrono::milliseconds(static_cast<long long>(ms));
}

std::optional<int> parse_signal(std::string_view text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const std::string s(text);
  const long n = std::strtol(s.c_str(), &end, 10);
  if (*end == '\0' && n > 0 && n < 65) return static_cast<int>(n);
  std::string_view name = text;
  if (name.substr(0, 3) == "SIG") name.remove_prefix(3);
  for (int sig = 1; sig < 32; ++sig) {
    const char* abbrev = ::sigabbrev_np(sig);
    if (abbrev != nullptr && name == abbrev) return sig;
  }
  return std::nullopt;
}

std::variant<parsed, std::string> parse_command_line(int argc, char** argv) {
  parsed p;
  if (argc < 2) return std::string("missing command");
  const std::string_view cmd = argv[1];
  if (cmd == "run") p.cmd = command::run;
  else if (cmd == "map") p.cmd = command::map;
  else if (cmd == "replay") p.cmd = command::replay;
  else if (cmd == "doctor") p.cmd = command::doctor;
  else if (cmd == "help" || cmd == "--help" || cmd == "-h") return parsed{};
  else return "unknown command '" + std::string(cmd) + "'";

  std::vector<std::string> positional;
  bool options_done = false;
  for (int i = 2; i < argc; ++i) {
    std::string_view a = argv[i];
    if (options_done || a.empty() || a[0] != '-' || a == "-") {
      positional.emplace_back(a);
      continue;
    }
    if (a == "--") {
      options_done = true;
      continue;
    }
    // `agenthost run --help` asks for the usage, as every CLI does; after `--` it is a word of the prompt.
    if (a == "--help" || a == "-h") return parsed{};
    // --name=value or --name value
    std::string name(a), value;
    bool has_inline = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_inline = true;
    }
    auto take = [&]() -> std::optional<std::string> {
      if (has_inline) return value;
      if (i + 1 >= argc) return std::nullopt;
      return std::string(argv[++i]);
    };
    auto need = [&](const char* what) -> std::variant<std::string, std::monostate> {
      auto v = take();
      if (!v) return std::monostate{};
      (void)what;
      return *v;
    };
    auto flag_only = [&]() { return !has_inline; };
    std::variant<std::string, std::monostate> v;
#define AH_VALUE()                                                   \
  v = need(name.c_str());                                            \
  if (std::holds_alternative<std::monostate>(v)) return name + " needs a value"; \
  const std::string val = std::get<std::string>(v)
    if (name == "--agent") {
      AH_VALUE();
      // Only doctor checks several agents; elsewhere a second --agent is a mistake, not "the last one wins".
      if (p.cmd != command::doctor && !p.agent.empty() && p.agent != val)
        return "--agent given twice ('" + p.agent + "', '" + val + "'): " + std::string(cmd) + " runs one agent";
      p.agent = val;
      if (std::find(p.agents.begin(), p.agents.end(), val) == p.agents.end()) p.agents.push_back(val);
    } else if (name == "--json") {
      if (!flag_only()) return std::string("--json takes no value");
      p.json_output = true;
    } else if (name == "--verbose" || name == "-v") {
      if (!flag_only()) return name + " takes no value";
      p.verbose = true;
    } else if (p.cmd == command::doctor && name == "--timeout") {
      AH_VALUE();
      auto d = parse_duration(val);
      if (!d || d->count() <= 0) return "invalid duration '" + val + "' for " + name;
      p.probe_timeout = *d;
    } else if ((p.cmd == command::run || p.cmd == command::doctor) && name == "--executable") {
      AH_VALUE();
      p.common.executable = val;
    } else if (p.cmd == command::run && name == "--model") {
      AH_VALUE();
      p.common.model = val;
    } else if (p.cmd == command::run && name == "--provider") {
      AH_VALUE();
      p.pi.provider = val;
      p.pi_only_flags.push_back(name);
    } else if ((p.cmd == command::run || p.cmd == command::doctor) && name == "--cwd") {
      AH_VALUE();
      p.common.cwd = val;
    } else if (p.cmd == command::run && name == "--session") {
      AH_VALUE();
      p.common.session = val;
    } else if (p.cmd == command::run && name == "--no-session") {
      if (!flag_only()) return name + " takes no value";
      p.pi.no_session = true;
      p.pi_only_flags.push_back(name);
    } else if (p.cmd == command::run && name == "--tools") {
      AH_VALUE();
      std::vector<std::string> tools;
      std::size_t b = 0;
      while (b <= val.size() && !val.empty()) {
        auto e = val.find(',', b);
        if (e == std::string::npos) e = val.size();
        tools.push_back(val.substr(b, e - b));
        b = e + 1;
      }
      p.pi.tools = tools;
      p.pi_only_flags.push_back(name);
    } else if (p.cmd == command::run && name == "--thinking") {
      AH_VALUE();
      if (val == "buffered") p.common.thinking = mapper::thinking_mode::buffered;
      else if (val == "stream") p.common.thinking = mapper::thinking_mode::stream;
      else return "--thinking takes buffered or stream, not '" + val + "'";
    } else if (p.cmd == command::run && name == "--thinking-level") {
      AH_VALUE();
      p.pi.thinking_level = val;
      p.pi_only_flags.push_back(name);
    } else if (p.cmd == command::run &&
               (name == "--timeout" || name == "--idle-timeout" || name == "--first-event-timeout")) {
      AH_VALUE();
      auto d = parse_duration(val);
      // Zero (or less than a millisecond) would end every run at once.
      if (!d || d->count() <= 0) return "invalid duration '" + val + "' for " + name + " (at least 1ms)";
      if (name == "--timeout") p.common.deadline = d;
      else if (name == "--idle-timeout") p.common.idle_timeout = d;
      else p.common.first_event_timeout = d;
    } else if (p.cmd == command::run && name == "--arg") {
      AH_VALUE();
      p.common.extra_args.push_back(val);
    } else if (p.cmd == command::map && name == "--exit-code") {
      AH_VALUE();
      char* end = nullptr;
      const long n = std::strtol(val.c_str(), &end, 10);
      if (*end != '\0' || val.empty() || n < 0 || n > 255) return "invalid exit code '" + val + "'";
      p.exit_code = static_cast<int>(n);
    } else if (p.cmd == command::map && name == "--exit-signal") {
      AH_VALUE();
      p.exit_signal = parse_signal(val);
      if (!p.exit_signal) return "invalid signal '" + val + "'";
    } else if (p.cmd == command::replay && name == "--delay-ms") {
      AH_VALUE();
      char* end = nullptr;
      const long n = std::strtol(val.c_str(), &end, 10);
      if (*end != '\0' || val.empty() || n < 0 || n > INT_MAX) return "invalid delay '" + val + "'";
      p.replay_delay_ms = static_cast<int>(n);
    } else if (p.cmd == command::replay && name == "--fake-agent") {
      AH_VALUE();
      p.fake_agent = val;
    } else {
      return "unknown option '" + name + "' for " + std::string(cmd);
    }
#undef AH_VALUE
  }
  if (p.cmd == command::doctor) {
    if (!positional.empty()) return std::string("doctor takes no arguments");
    for (const auto& a : p.agents)
      if (!doctor_knows(a)) return "unknown agent '" + a + "' (known: " + doctor_agent_names() + ")";
    if (!p.common.executable.empty() && p.agents.size() != 1)
      return std::string("--executable needs exactly one --agent");
    return p;
  }
  if (p.agent.empty()) return "--agent is required (supported: " + agent_names() + ")";
  if (find_agent(p.agent) == nullptr) return "unsupported agent '" + p.agent + "' (supported: " + agent_names() + ")";
  if (p.agent != "pi" && !p.pi_only_flags.empty())
    return p.pi_only_flags.front() + " is a pi option; agent '" + p.agent + "' does not take it";
  if (p.exit_code && p.exit_signal) return std::string("--exit-code and --exit-signal exclude each other");
  if (p.cmd == command::run) {
    if (positional.empty()) return std::string("missing PROMPT");
    for (const auto& w : positional) p.prompt += (p.prompt.empty() ? "" : " ") + w;
    if (p.prompt.find_first_not_of(" \t\n") == std::string::npos) return std::string("missing PROMPT (it is empty)");
  } else {
    if (positional.size() > 1) return std::string("too many arguments");
    if (!positional.empty()) p.file = positional[0];
    if (p.cmd == command::replay && p.file.empty()) return std::string("missing FILE");
  }
  return p;
}

}  // namespace agenthost::cli
