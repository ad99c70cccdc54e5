#include "spawn.hpp"

#include "../detail/reaper_protocol.hpp"
#include "clean_spawn_attributes.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

extern char** environ;

#ifndef AGENTHOST_BUILD_REAPER_PATH
#define AGENTHOST_BUILD_REAPER_PATH ""
#endif
#ifndef AGENTHOST_INSTALL_REAPER_PATH
#define AGENTHOST_INSTALL_REAPER_PATH ""
#endif

namespace agenthost::process::detail {
namespace fs = std::filesystem;

std::vector<std::string> build_environment(const environment_options& env) {
  std::vector<std::string> result;
  auto name_of = [](std::string_view kv) { return kv.substr(0, kv.find('=')); };
  if (env.inherit) {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      const std::string_view kv{*e};
      const auto name = name_of(kv);
      if (!env.allow.empty() && std::find(env.allow.begin(), env.allow.end(), name) == env.allow.end()) continue;
      if (std::find(env.unset.begin(), env.unset.end(), name) != env.unset.end()) continue;
      if (env.set.contains(std::string(name))) continue;
      result.emplace_back(kv);
    }
  }
  for (const auto& [k, v] : env.set) result.push_back(k + "=" + v);
  return result;
}

namespace {

spawn_error make_error(errc code, std::string message) { return {make_error_code(code), std::move(message)}; }

// errc for a candidate path, or nothing when it is an executable regular file.
std::optional<errc> check_executable(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return errc::executable_not_found;
  if (!S_ISREG(st.st_mode) || ::access(p.c_str(), X_OK) != 0) return errc::executable_not_executable;
  return std::nullopt;
}

}  // namespace

boost::system::result<fs::path, spawn_error> resolve_executable(const fs::path& exe, const std::string& path_var) {
  if (exe.empty()) return make_error(errc::executable_not_found, "no agent executable given");
  const std::string& s = exe.native();
  if (s.find('/') != std::string::npos) {
    std::error_code ec;
    const fs::path abs = fs::absolute(exe, ec);
    if (ec) return make_error(errc::executable_not_found, "agent executable '" + s + "': " + ec.message());
    if (auto e = check_executable(abs)) {
      return make_error(*e, *e == errc::executable_not_found
                                ? "agent executable not found: '" + abs.string() + "'"
                                : "agent executable is not an executable file: '" + abs.string() + "'");
    }
    return abs;
  }
  std::optional<fs::path> not_executable;
  std::size_t begin = 0;
  while (begin <= path_var.size()) {
    std::size_t end = path_var.find(':', begin);
    if (end == std::string::npos) end = path_var.size();
    const std::string dir = end > begin ? path_var.substr(begin, end - begin) : std::string(".");
    fs::path candidate = fs::path(dir) / exe;
    if (auto e = check_executable(candidate); !e) {
      std::error_code ec;
      return fs::absolute(candidate, ec);
    } else if (*e == errc::executable_not_executable && !not_executable) {
      not_executable = candidate;
    }
    begin = end + 1;
  }
  if (not_executable)
    return make_error(errc::executable_not_executable,
                      "agent executable is not an executable file: '" + not_executable->string() + "'");
  return make_error(errc::executable_not_found, "agent executable '" + s + "' not found in PATH=" + path_var);
}

fs::path find_reaper(const fs::path& configured) {
  auto usable = [](const fs::path& p) { return !p.empty() && ::access(p.c_str(), X_OK) == 0; };
  // Absolute: the reaper may be exec'd in the agent's working directory, where a relative path means another file.
  const auto absolute = [](const fs::path& p) {
    std::error_code ec;
    auto a = fs::absolute(p, ec);
    return ec ? p : a;
  };
  if (!configured.empty()) return usable(configured) ? absolute(configured) : fs::path{};
  if (const char* env = std::getenv("AGENTHOST_REAPER"); env != nullptr && usable(env)) return absolute(env);
  for (const char* compiled : {AGENTHOST_BUILD_REAPER_PATH, AGENTHOST_INSTALL_REAPER_PATH})
    if (usable(compiled)) return compiled;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& candidate : {self.parent_path() / reaper_program_name,
                                      self.parent_path().parent_path() / "libexec" / "agenthost" / reaper_program_name})
      if (usable(candidate)) return candidate;
  }
  return {};
}

unique_fd move_above_stdio(unique_fd fd) {
  if (!fd) return fd;
  return unique_fd{::fcntl(fd.get(), F_DUPFD_CLOEXEC, 10)};
}

int spawn_process(const spawn_request& r, int& error) {
  std::vector<char*> argv;
  argv.reserve(r.argv.size() + 1);
  for (const auto& a : r.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  envp.reserve(r.envp.size() + 1);
  for (const auto& e : r.envp) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  posix_spawnattr_t attr;
  if (const int rc = init_clean_spawn_attributes(attr); rc != 0) {
    error = rc;
    return -1;
  }

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, r.stdin_fd, 0);
  posix_spawn_file_actions_adddup2(&fa, r.stdout_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, r.stderr_fd, 2);
  if (r.fd3 >= 0) posix_spawn_file_actions_adddup2(&fa, r.fd3, 3);
  posix_spawn_file_actions_addclosefrom_np(&fa, r.fd3 >= 0 ? 4 : 3);
  if (!r.working_directory.empty()) posix_spawn_file_actions_addchdir_np(&fa, r.working_directory.c_str());

  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, r.executable.c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    error = rc;
    return -1;
  }
  return static_cast<int>(pid);
}

}  // namespace agenthost::process::detail
