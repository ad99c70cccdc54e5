#include "inherited_state.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <optional>
#include <string>

namespace agenthost::process::detail {
namespace {

// Entries are "name=value\n"; a name never contains '=' or '\n', a value never contains '\n' (multi-line files are
// folded).
void add(std::string& out, std::string_view name, std::string_view value) {
  out.append(name);
  out.push_back('=');
  for (char c : value) out.push_back(c == '\n' ? ';' : c);
  out.push_back('\n');
}

// A small /proc file, whole (/proc reports no size). nullopt when it cannot be read (EMFILE near the descriptor
// limit, no /proc): the snapshot is then unknown rather than different.
std::optional<std::string> read_proc(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[4096];
  bool ok = true;
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ok = false;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > (std::size_t{1} << 20)) break;
  }
  ::close(fd);
  if (!ok) return std::nullopt;
  return text;
}

constexpr std::array<std::string_view, 16> kLimitNames = {
    "RLIMIT_CPU",   "RLIMIT_FSIZE",  "RLIMIT_DATA",    "RLIMIT_STACK", "RLIMIT_CORE",       "RLIMIT_RSS",
    "RLIMIT_NPROC", "RLIMIT_NOFILE", "RLIMIT_MEMLOCK", "RLIMIT_AS",    "RLIMIT_LOCKS",      "RLIMIT_SIGPENDING",
    "RLIMIT_MSGQUEUE", "RLIMIT_NICE", "RLIMIT_RTPRIO", "RLIMIT_RTTIME"};

constexpr std::array<std::string_view, 4> kProcessWideKeys = {"Umask", "Uid", "Gid", "Groups"};
constexpr std::array<std::string_view, 8> kPerThreadKeys = {"NoNewPrivs", "Seccomp", "Seccomp_filters", "CapInh",
                                                            "CapPrm",     "CapEff",  "CapBnd",          "CapAmb"};

template <std::size_t N>
bool one_of(std::string_view key, const std::array<std::string_view, N>& keys) {
  for (std::string_view k : keys)
    if (key == k) return true;
  return false;
}

// "Uid:\t0\t0\t0\t0": real, effective, saved, fs. The first three are process-wide (glibc's setuid() changes every
// thread); setfsuid() changes only the calling thread.
void add_ids(inherited_snapshot& out, std::string_view key, std::string_view value) {
  const std::size_t last = value.find_last_of(" \t");
  if (last == std::string_view::npos) {
    add(out.process_wide, key, value);
    return;
  }
  add(out.process_wide, key, value.substr(0, last));
  add(out.per_thread, std::string(key) + "_fs", value.substr(last + 1));
}

}  // namespace

inherited_snapshot inherited_state() {
  inherited_snapshot out;
  out.process_wide.reserve(1024);
  for (std::size_t r = 0; r < kLimitNames.size() && r < static_cast<std::size_t>(RLIM_NLIMITS); ++r) {
    rlimit l{};
#if defined(__GLIBC__)
    const auto resource = static_cast<__rlimit_resource_t>(r);
#else
    const auto resource = static_cast<int>(r);
#endif
    if (::getrlimit(resource, &l) != 0) continue;
    add(out.process_wide, kLimitNames[r], std::to_string(l.rlim_cur) + "/" + std::to_string(l.rlim_max));
  }
  // The calling thread's status (/proc/thread-self, Linux 3.17+; /proc/self/task/<tid> would name another thread
  // when /proc belongs to another pid namespace): a posix_spawn from this thread passes this thread's on.
  auto status = read_proc("/proc/thread-self/status");
  const auto cgroup = read_proc("/proc/self/cgroup");
  const auto oom = read_proc("/proc/self/oom_score_adj");
  if (!status || !cgroup || !oom) return {};
  for (std::size_t at = 0; at < status->size();) {
    std::size_t end = status->find('\n', at);
    if (end == std::string::npos) end = status->size();
    const std::string_view line(status->data() + at, end - at);
    at = end + 1;
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    if (key == "Uid" || key == "Gid") {
      add_ids(out, key, value);
    } else if (one_of(key, kProcessWideKeys)) {
      add(out.process_wide, key == "Umask" ? "umask" : key, value);
    } else if (one_of(key, kPerThreadKeys)) {
      add(out.per_thread, key, value);
    }
  }
  add(out.process_wide, "cgroup", *cgroup);
  add(out.process_wide, "oom_score_adj", *oom);
  return out;
}

std::string first_difference(std::string_view a, std::string_view b) {
  if (a == b || a.empty() || b.empty()) return {};
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
