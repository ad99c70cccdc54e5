#include <agenthost/providers/pi.hpp>

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

boost::system::result<std::vector<std::string>, std::string> build_pi_arguments(const pi_options& o,
                                                                                std::string_view prompt) {
  std::vector<std::string> a;
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
  if (at_least(o.pi_version, first_with_double_dash)) {
    a.emplace_back("--");
    a.emplace_back(prompt);
  } else if (!prompt.empty() && prompt.front() == '-') {
    // No `--` before pi 1.6: a leading space keeps the prompt from being parsed as a flag.
    a.emplace_back(" " + std::string(prompt));
  } else {
    a.emplace_back(prompt);
  }
  return a;
}

spawn_request pi_spawn_options(const pi_options& o, std::string_view prompt) {
  auto args = build_pi_arguments(o, prompt);
  if (!args) return spawn_request(boost::system::in_place_error, args.error());
  return process::spawn_options{.executable = o.executable,
                                .args = std::move(*args),
                                .working_directory = o.working_directory,
                                .env = o.env,
                                // pi reads piped stdin to EOF before doing anything: give it /dev/null.
                                .stdin_mode = process::stdin_kind::null,
                                .containment = o.containment,
                                .reaper_path = o.reaper_path,
                                .log = o.log};
}

std::unique_ptr<mapper::event_mapper> make_pi_mapper(const pi_options& o) {
  return std::make_unique<mapper::pi_mapper>(
      mapper::pi_mapper_options{.thinking = o.thinking_output, .requested_session_id = o.session_id});
}

transport::message run_pi(const pi_options& options, std::string_view prompt, const message_handler& on_message) {
  return run_agent(pi_spawn_options(options, prompt), make_pi_mapper(options), options.run, on_message);
}

}  // namespace agenthost::providers
