// Finding an agent's program the way its shell would, and how it launches (internal): see discovery.hpp.
#include "discovery.hpp"

#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>

extern char** environ;

namespace agenthost::providers::detail {

namespace fs = std::filesystem;

env_map effective_environment(const process::environment_options& o) {
  env_map env;
  if (o.inherit) {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      const std::string_view kv{*e};
      const auto eq = kv.find('=');
      if (eq == std::string_view::npos) continue;
      std::string name(kv.substr(0, eq));
      if (!o.allow.empty() && std::find(o.allow.begin(), o.allow.end(), name) == o.allow.end()) continue;
      if (std::find(o.unset.begin(), o.unset.end(), name) != o.unset.end()) continue;
      env.emplace(std::move(name), std::string(kv.substr(eq + 1)));
    }
  }
  for (const auto& [k, v] : o.set) env[k] = v;
  return env;
}

std::string env_value(const env_map& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? std::string{} : it->second;
}

std::string search_path(const env_map& env) {
  auto it = env.find("PATH");
  return it == env.end() ? std::string("/usr/local/bin:/usr/bin:/bin") : it->second;
}

std::string executable_search_path(const process::environment_options& o) {
  if (const auto it = o.set.find("PATH"); it != o.set.end()) return it->second;
  if (const char* p = std::getenv("PATH"); p != nullptr && o.inherit) return p;
  return "/usr/local/bin:/usr/bin:/bin";
}

file_check check_executable(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return file_check::missing;
  if (!S_ISREG(st.st_mode) || ::access(p.c_str(), X_OK) != 0) return file_check::not_executable;
  return file_check::ok;
}

std::vector<fs::path> split_path(const std::string& path_var) {
  std::vector<fs::path> dirs;
  std::size_t begin = 0;
  while (begin <= path_var.size()) {
    std::size_t end = path_var.find(':', begin);
    if (end == std::string::npos) end = path_var.size();
    dirs.emplace_back(end > begin ? path_var.substr(begin, end - begin) : std::string("."));
    begin = end + 1;
  }
  return dirs;
}

fs::path absolute_or_same(const fs::path& p) {
  std::error_code ec;
  auto a = fs::absolute(p, ec);
  return ec ? p : a.lexically_normal();
}

std::string read_head(const fs::path& p, std::size_t n) {
  std::ifstream in(p, std::ios::binary);
  std::string s(n, '\0');
  in.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<std::size_t>(in.gcount()));
  return s;
}

std::string expand(std::string value, const env_map& env) {
  std::string out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (value[i] == '$' && i + 1 < value.size()) {
      std::size_t start = i + 1, end = 0;
      bool braced = value[start] == '{';
      if (braced) {
        end = value.find('}', start);
        if (end == std::string::npos) {
          out += value.substr(i);
          break;
        }
        out += env_value(env, value.substr(start + 1, end - start - 1));
        i = end;
        continue;
      }
      end = start;
      while (end < value.size() && (std::isalnum(static_cast<unsigned char>(value[end])) || value[end] == '_')) ++end;
      if (end > start) {
        out += env_value(env, value.substr(start, end - start));
        i = end - 1;
        continue;
      }
    }
    out += value[i];
  }
  if (out.size() >= 2 && out[0] == '~' && out[1] == '/') {
    const auto home = env_value(env, "HOME");
    if (!home.empty()) out = home + out.substr(1);
  }
  return out;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::optional<fs::path> npmrc_prefix(const env_map& env) {
  fs::path rc = env_value(env, "NPM_CONFIG_USERCONFIG");
  if (rc.empty()) rc = env_value(env, "npm_config_userconfig");
  if (rc.empty()) {
    const auto home = env_value(env, "HOME");
    if (home.empty()) return std::nullopt;
    rc = fs::path(home) / ".npmrc";
  }
  std::ifstream in(rc);
  std::string line;
  std::optional<fs::path> prefix;
  while (std::getline(in, line)) {
    const auto t = trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    const auto eq = t.find('=');
    if (eq == std::string::npos || trim(std::string_view(t).substr(0, eq)) != "prefix") continue;
    auto v = trim(std::string_view(t).substr(eq + 1));
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
    if (!v.empty()) prefix = expand(v, env);  // the last one wins, as in npm
  }
  return prefix;
}

std::vector<fs::path> install_places(const env_map& env) {
  std::vector<fs::path> dirs;
  auto add = [&](const fs::path& d) {
    if (!d.empty() && std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
  };
  for (const char* var : {"NPM_CONFIG_PREFIX", "npm_config_prefix"})
    if (auto p = env_value(env, var); !p.empty()) add(fs::path(expand(p, env)) / "bin");
  if (auto p = npmrc_prefix(env)) add(*p / "bin");
  const auto home = env_value(env, "HOME");
  if (!home.empty()) {
    add(fs::path(home) / ".npm-global" / "bin");
    add(fs::path(home) / ".local" / "bin");
  }
  add("/usr/local/bin");
  if (!home.empty()) {
    add(fs::path(home) / ".volta" / "bin");
    add(fs::path(home) / ".bun" / "bin");
  }
  return dirs;
}

lookup find_program(const fs::path& name, const env_map& env, bool use_install_places) {
  lookup r;
  if (name.native().find('/') != std::string::npos) {
    const auto abs = absolute_or_same(name);
    switch (check_executable(abs)) {
      case file_check::ok: r.found = abs; r.on_path = true; break;
      case file_check::not_executable: r.not_executable = abs; break;
      case file_check::missing: break;
    }
    r.searched = abs.string();
    return r;
  }
  auto try_dirs = [&](const std::vector<fs::path>& dirs) {
    for (const auto& d : dirs) {
      const auto candidate = d / name;
      const auto c = check_executable(candidate);
      if (c == file_check::ok) return absolute_or_same(candidate);
      if (c == file_check::not_executable && r.not_executable.empty()) r.not_executable = absolute_or_same(candidate);
    }
    return fs::path{};
  };
  const auto path_var = search_path(env);
  r.searched = "PATH=" + path_var;
  r.found = try_dirs(split_path(path_var));
  r.on_path = !r.found.empty();
  if (r.found.empty() && use_install_places) {
    const auto places = install_places(env);
    r.found = try_dirs(places);
    for (const auto& d : places) r.searched += ", " + d.string();
  }
  return r;
}

// ---- Node.js detection ---------------------------------------------------------------------------------------------

namespace {

bool is_node_name(const fs::path& p) {
  const auto n = p.filename().string();
  return n == "node" || n == "nodejs";
}

bool is_shell_name(const fs::path& p) {
  const auto n = p.filename().string();
  return n == "sh" || n == "bash" || n == "dash" || n == "zsh" || n == "ksh" || n == "ash";
}

std::vector<std::string> split_words(std::string_view s) {
  std::vector<std::string> words;
  std::istringstream in{std::string(s)};
  std::string w;
  while (in >> w) words.push_back(w);
  return words;
}

// One shell word starting at `pos` (quotes removed, no expansion); pos is moved past it.
std::string shell_word(std::string_view s, std::size_t& pos) {
  while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t')) ++pos;
  std::string w;
  while (pos < s.size() && !std::isspace(static_cast<unsigned char>(s[pos])) && s[pos] != ';' && s[pos] != '&' &&
         s[pos] != '|') {
    const char c = s[pos];
    if (c == '"' || c == '\'') {
      const auto end = s.find(c, pos + 1);
      if (end == std::string_view::npos) {
        w += s.substr(pos + 1);
        pos = s.size();
        return w;
      }
      w += s.substr(pos + 1, end - pos - 1);
      pos = end + 1;
    } else {
      w += c;
      ++pos;
    }
  }
  return w;
}

std::string replace_basedir(std::string w, const std::string& basedir) {
  for (const char* var : {"${basedir}", "$basedir"}) {
    for (auto at = w.find(var); at != std::string::npos; at = w.find(var, at + basedir.size()))
      w.replace(at, std::strlen(var), basedir);
  }
  return w;
}

}  // namespace

node_launch detect_node(const fs::path& exe, const env_map& env) {
  node_launch r;
  const auto head = read_head(exe, 16384);
  if (head.size() < 2 || head[0] != '#' || head[1] != '!') return r;
  const auto nl = head.find('\n');
  const auto shebang = trim(std::string_view(head).substr(2, nl == std::string::npos ? std::string::npos : nl - 2));
  auto words = split_words(shebang);
  if (words.empty()) return r;
  auto resolve_in_path = [&](const std::string& word) {
    r.uses_node = true;
    r.via_path = word.find('/') == std::string::npos;
    auto l = find_program(word, env, false);
    r.node = l.found;
  };
  const fs::path interpreter = words[0];
  if (interpreter.filename() == "env") {
    // env [-S] [-i] [-u NAME] [NAME=VALUE]... COMMAND [ARGS]; with -S the rest is split again (already split here).
    for (std::size_t i = 1; i < words.size(); ++i) {
      const auto& w = words[i];
      if (w == "-u" || w == "--unset") {
        ++i;
        continue;
      }
      if (w.starts_with("-S")) {
        if (w.size() > 2) {
          auto rest = split_words(w.substr(2));
          if (!rest.empty() && is_node_name(rest[0])) {
            r.how = "#!" + shebang;
            resolve_in_path(rest[0]);
            r.script = exe;
          }
          return r;
        }
        continue;
      }
      if (w.starts_with("-") || w.find('=') != std::string::npos) continue;
      if (is_node_name(w)) {
        r.how = "#!" + shebang;
        resolve_in_path(w);
        r.script = exe;
      }
      return r;
    }
    return r;
  }
  if (is_node_name(interpreter)) {
    r.uses_node = true;
    r.how = "#!" + shebang;
    r.node = check_executable(interpreter) == file_check::ok ? interpreter : fs::path{};
    r.script = exe;
    return r;
  }
  if (!is_shell_name(interpreter)) return r;
  // A shell shim (npm's cmd-shim, pnpm): `exec "$basedir/node" "$basedir/…/cli.js" "$@"`, falling back to
  // `exec node …`. The first `exec` of node that resolves is the one the shim would take.
  const std::string basedir = exe.parent_path().string();
  const std::string_view body(head);
  for (std::size_t at = body.find("exec"); at != std::string_view::npos; at = body.find("exec", at + 4)) {
    const bool word_start = at == 0 || std::string_view(" \t\n;&|(").find(body[at - 1]) != std::string_view::npos;
    if (!word_start || at + 4 >= body.size() || (body[at + 4] != ' ' && body[at + 4] != '\t')) continue;
    std::size_t pos = at + 4;
    const std::string word = replace_basedir(shell_word(body, pos), basedir);
    if (!is_node_name(word)) continue;
    const std::string script = replace_basedir(shell_word(body, pos), basedir);
    r.uses_node = true;
    r.how = "a shell shim that runs `exec " + std::string(trim(body.substr(at + 5, pos - at - 5))) + " …`";
    if (!script.empty() && script[0] != '$') r.script = script;
    if (word.find('/') != std::string::npos) {
      if (check_executable(word) == file_check::ok) {
        r.node = word;
        r.via_path = false;
        return r;
      }
      continue;  // the shim's `[ -x "$basedir/node" ]` fails: it takes the next branch
    }
    resolve_in_path(word);
    if (!r.node.empty()) return r;
  }
  return r;
}

std::optional<package_info> npm_package(const fs::path& script, std::string_view name_part) {
  if (script.empty()) return std::nullopt;
  std::error_code ec;
  fs::path dir = fs::canonical(script, ec);
  if (ec) return std::nullopt;
  for (int up = 0; up < 5 && dir.has_parent_path() && dir != dir.root_path(); ++up) {
    dir = dir.parent_path();
    const auto file = dir / "package.json";
    if (!fs::is_regular_file(file, ec)) continue;
    std::ifstream in(file);
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    const auto name_it = j.find("name");  // not j.value(): it throws when `name` is there but not a string
    if (name_it == j.end() || !name_it->is_string() ||
        name_it->get_ref<const std::string&>().find(name_part) == std::string::npos)
      return std::nullopt;  // someone else's package (or no valid name)
    package_info p{.file = file};
    if (j.contains("version") && j["version"].is_string()) p.pkg_version = version::parse(j["version"].get<std::string>());
    if (j.contains("engines") && j["engines"].is_object() && j["engines"].contains("node") &&
        j["engines"]["node"].is_string())
      p.node_required = version::parse(j["engines"]["node"].get<std::string>());
    return p;
  }
  return std::nullopt;
}

}  // namespace agenthost::providers::detail
