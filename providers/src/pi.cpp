#include <agenthost/providers/pi.hpp>

#include "command_run.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>

namespace agenthost::providers {

namespace {
// Until a probe says otherwise (pi_options::pi_version), assume the oldest supported behaviour.
constexpr const version& first_with_session_id_flag = pi_versions::session_id_flag;
constexpr const version& first_with_double_dash = pi_versions::double_dash;
constexpr const version& first_with_max_thinking = pi_versions::thinking_max;

bool at_least(const std::optional<version>& v, const version& min) { return v && *v >= min; }

// Length of the whitespace (JS String.prototype.trim's set, in UTF-8) at the end (or start) of `s`: TAB, LF, VT, FF,
// CR, space, U+00A0, U+1680, U+2000–U+200A, U+2028, U+2029, U+202F, U+205F, U+3000, U+FEFF.
std::size_t js_space_at(std::string_view s, bool at_end) {
  auto is_space = [](std::string_view c) {
    if (c.size() == 1) return c[0] == ' ' || (c[0] >= '\t' && c[0] <= '\r');
    if (c.size() == 2) return c == "\xC2\xA0";
    if (c.size() != 3) return false;
    if (c == "\xE1\x9A\x80" || c == "\xE2\x81\x9F" || c == "\xE3\x80\x80" || c == "\xEF\xBB\xBF") return true;
    if (c[0] != '\xE2' || c[1] != '\x80') return false;
    const auto b = static_cast<unsigned char>(c[2]);
    return (b >= 0x80 && b <= 0x8A) || b == 0xA8 || b == 0xA9 || b == 0xAF;
  };
  std::size_t n = 0;
  for (;;) {
    const std::string_view rest = at_end ? s.substr(0, s.size() - n) : s.substr(n);
    std::size_t step = 0;
    for (std::size_t k = 1; k <= 3 && k <= rest.size(); ++k) {
      if (is_space(at_end ? rest.substr(rest.size() - k) : rest.substr(0, k))) {
        step = k;
        break;
      }
    }
    if (step == 0) return n;
    n += step;
  }
}
}  // namespace

std::optional<version> version::parse(std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i])) ||
        (i > 0 && std::isdigit(static_cast<unsigned char>(text[i - 1]))))
      continue;
    version v;
    const char* p = text.data() + i;
    const char* end = text.data() + text.size();
    int* parts[3] = {&v.major, &v.minor, &v.patch};
    bool ok = true;
    for (int k = 0; k < 3 && ok; ++k) {
      auto [q, ec] = std::from_chars(p, end, *parts[k]);
      if (ec != std::errc{}) ok = false;
      p = q;
      if (k < 2) {
        if (p == end || *p != '.') ok = false;
        else ++p;
      }
    }
    if (ok) return v;
  }
  return std::nullopt;
}

std::string version::to_string() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

bool pi_thinking_level_valid(std::string_view level, const std::optional<version>& v) {
  static constexpr std::array<std::string_view, 6> levels{"off", "minimal", "low", "medium", "high", "xhigh"};
  if (std::find(levels.begin(), levels.end(), level) != levels.end()) return true;
  return level == "max" && at_least(v, first_with_max_thinking);
}

boost::system::result<pi_command, std::string> build_pi_command(const pi_options& o, std::string_view prompt) {
  if (o.run.stdin_data) return std::string("pi_options::run.stdin_data must be empty: the provider uses it for the prompt");
  pi_command cmd;
  std::vector<std::string>& a = cmd.args;
  // Extra arguments first: an unknown flag consumes the next argument unless it starts with '-', and ours all do.
  a.insert(a.end(), o.extra_args.begin(), o.extra_args.end());
  a.insert(a.end(), {"--mode", "json"});
  if (!o.provider.empty()) a.insert(a.end(), {"--provider", o.provider});
  if (!o.model.empty()) a.insert(a.end(), {"--model", o.model});
  if (!o.thinking_level.empty()) {
    if (!pi_thinking_level_valid(o.thinking_level, o.pi_version))
      return "invalid thinking level '" + o.thinking_level +
             "' (expected off, minimal, low, medium, high, xhigh" +
             (at_least(o.pi_version, first_with_max_thinking) ? ", max)" : ")");
    a.insert(a.end(), {"--thinking", o.thinking_level});
  }
  const int session_choices = (o.session_id ? 1 : 0) + (o.continue_session ? 1 : 0) + (o.no_session ? 1 : 0);
  if (session_choices > 1) return std::string("session_id, continue_session and no_session exclude each other");
  if (o.session_id) {
    if (o.session_id->empty() || o.session_id->front() == '-')
      return "invalid session id '" + *o.session_id + "'";
    if (at_least(o.pi_version, first_with_session_id_flag)) {
      a.insert(a.end(), {"--session-id", *o.session_id});
    } else {
      a.insert(a.end(), {"--session", *o.session_id});
    }
  }
  if (o.continue_session) a.emplace_back("--continue");
  if (o.no_session) a.emplace_back("--no-session");
  if (!o.session_dir.empty()) a.insert(a.end(), {"--session-dir", o.session_dir.string()});
  if (o.tools) {
    if (o.tools->empty()) {
      a.emplace_back("--no-tools");
    } else {
      std::string list;
      for (const auto& t : *o.tools) {
        if (t.empty() || t.find(',') != std::string::npos || t.front() == '-')
          return "invalid tool name '" + t + "'";
        list += (list.empty() ? "" : ",") + t;
      }
      a.insert(a.end(), {"--tools", list});
    }
  }
  for (const auto& p : o.append_system_prompt) a.insert(a.end(), {"--append-system-prompt", p});
  // -p last among the flags: in pi 1.x it consumes the next argument as the prompt unless that starts with '-'.
  a.emplace_back("-p");
  // execve() would end the argument at a NUL: such a prompt goes through stdin, or is refused when argv is asked for.
  const bool nul = detail::has_nul(prompt);
  if (nul && o.prompt_delivery == pi_prompt_delivery::argv)
    return std::string("the prompt contains a NUL byte, which a command-line argument cannot carry");
  const bool via_stdin =
      o.prompt_delivery == pi_prompt_delivery::stdin ||
      (o.prompt_delivery == pi_prompt_delivery::automatic &&
       (prompt.size() > pi_prompt_argv_max || (!prompt.empty() && prompt.front() == '@') || nul));
  std::string_view argument = prompt;
  if (via_stdin) {
    // pi: stdin.trim() + the first message, joined with nothing between. The trimmed text goes to stdin unchanged;
    // its trailing whitespace, which trim() would drop, follows as the argument; leading whitespace is lost.
    const std::size_t lead = js_space_at(prompt, false);
    const std::string_view rest = prompt.substr(lead);
    const std::size_t trail = js_space_at(rest, true);
    if (trail == rest.size()) {  // nothing but whitespace: stdin would be empty, pi takes the argument alone
      cmd.stdin_text.emplace();
    } else {
      cmd.stdin_text.emplace(rest.substr(0, rest.size() - trail));
      argument = rest.substr(rest.size() - trail);
    }
    if (argument.empty()) return cmd;
  }
  if (at_least(o.pi_version, first_with_double_dash)) {
    a.emplace_back("--");
    a.emplace_back(argument);
  } else if (!argument.empty() && (argument.front() == '-' || argument.front() == '@')) {
    // No `--` before pi 1.6: a leading space keeps the prompt from being parsed as a flag or an @file.
    a.emplace_back(" " + std::string(argument));
  } else {
    a.emplace_back(argument);
  }
  return cmd;
}

boost::system::result<std::vector<std::string>, std::string> build_pi_arguments(const pi_options& o,
                                                                                std::string_view prompt) {
  return detail::arguments_of(build_pi_command(o, prompt));
}

pi_run make_pi_run(const pi_options& o, std::string_view prompt) {
  return detail::run_request_for(o, build_pi_command(o, prompt));
}

spawn_request pi_spawn_options(const pi_options& o, std::string_view prompt) {
  auto r = make_pi_run(o, prompt);
  if (r.spawn && r.run.stdin_data)
    return spawn_request(boost::system::in_place_error,
                         std::string("this prompt goes through pi's stdin (prompt_delivery): use make_pi_run()"));
  return std::move(r.spawn);
}

std::unique_ptr<mapper::event_mapper> make_pi_mapper(const pi_options& o) {
  return std::make_unique<mapper::pi_mapper>(
      mapper::pi_mapper_options{.thinking = o.thinking_output,
                                .requested_session_id = o.session_id,
                                .merge_adjacent_text = true});
}

transport::message run_pi(const pi_options& options, std::string_view prompt, const message_handler& on_message) {
  auto run = make_pi_run(options, prompt);
  return run_agent(std::move(run.spawn), make_pi_mapper(options), std::move(run.run), on_message);
}

}  // namespace agenthost::providers
