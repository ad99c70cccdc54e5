#include "inherited_state.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <string>

namespace agenthost::process::detail {
namespace {

// Entries are "name=value\n"; a name never contains '=' or '\n', a value never contains '\n' (multi-line files are
// folded below).
void add(std::string& out, std::string_view name, std::string_view value) {
  out.append(name);
  out.push_back('=');
  for (char c : value) out.push_back(c == '\n' ? ';' : c);
  out.push_back('\n');
}

// A small /proc file, whole (its size is unknown in advance: /proc reports 0). Empty when it cannot be read.
std::string read_proc(const char* path) {
  std::string text;
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || text.size() > (std::size_t{1} << 20)) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

constexpr std::array<std::string_view, 12> kStatusKeys = {
    "Umask", "Uid", "Gid", "Groups", "NoNewPrivs", "Seccomp", "Seccomp_filters",
    "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};

constexpr std::array<std::string_view, 16> kLimitNames = {
    "RLIMIT_CPU",   "RLIMIT_FSIZE",   "RLIMIT_DATA",       "RLIMIT_STACK",  "RLIMIT_CORE",  "RLIMIT_RSS",
    "RLIMIT_NPROC", "RLIMIT_NOFILE",  "RLIMIT_MEMLOCK",    "RLIMIT_AS",     "RLIMIT_LOCKS", "RLIMIT_SIGPENDING",
    "RLIMIT_MSGQUEUE", "RLIMIT_NICE", "RLIMIT_RTPRIO",     "RLIMIT_RTTIME"};

}  // namespace

std::string inherited_state() {
  std::string out;
  out.reserve(1024);
  for (int r = 0; r < RLIM_NLIMITS && static_cast<std::size_t>(r) < kLimitNames.size(); ++r) {
    rlimit l{};
    if (::getrlimit(static_cast<__rlimit_resource_t>(r), &l) != 0) continue;
    add(out, kLimitNames[static_cast<std::size_t>(r)], std::to_string(l.rlim_cur) + "/" + std::to_string(l.rlim_max));
  }
  // The calling thread's: capabilities, seccomp and no_new_privs are per thread, and a posix_spawn from this thread
  // passes this thread's on.
  const std::string status_path =
      "/proc/self/task/" + std::to_string(static_cast<long>(::syscall(SYS_gettid))) + "/status";
  const std::string status = read_proc(status_path.c_str());
  for (std::size_t at = 0; at < status.size();) {
    std::size_t end = status.find('\n', at);
    if (end == std::string::npos) end = status.size();
    const std::string_view line(status.data() + at, end - at);
    at = end + 1;
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    for (std::string_view k : kStatusKeys) {
      if (key == k) {
        std::string_view value = line.substr(colon + 1);
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
        add(out, key == "Umask" ? "umask" : key, value);
        break;
      }
    }
  }
  add(out, "cgroup", read_proc("/proc/self/cgroup"));
  add(out, "oom_score_adj", read_proc("/proc/self/oom_score_adj"));
  return out;
}

std::string first_difference(std::string_view a, std::string_view b) {
  if (a == b) return {};
  // Same entries in the same order on both sides (one build, one kernel): the first differing line names it.
  while (!a.empty() || !b.empty()) {
    const std::size_t ea = a.find('\n'), eb = b.find('\n');
    const std::string_view la = a.substr(0, ea), lb = b.substr(0, eb);
    if (la != lb) {
      const std::string_view line = la.empty() ? lb : la;
      return std::string(line.substr(0, line.find('=')));
    }
    a.remove_prefix(ea == std::string_view::npos ? a.size() : ea + 1);
    b.remove_prefix(eb == std::string_view::npos ? b.size() : eb + 1);
  }
  return "attributes";
}

}  // namespace agenthost::process::detail
