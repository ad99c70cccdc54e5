#include "exec_limits.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>

namespace agenthost::process::detail {

exec_limits exec_limits::current() {
  const long page = ::sysconf(_SC_PAGESIZE);
  exec_limits l;
  l.max_string = 32 * static_cast<std::size_t>(page > 0 ? page : 4096);  // MAX_ARG_STRLEN, its NUL included
  l.max_total = std::size_t{6} << 20;                                     // 3/4 of the kernel's 8 MiB cap
  if (rlimit rl{}; ::getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    l.max_total = std::min<std::size_t>(l.max_total, static_cast<std::size_t>(rl.rlim_cur / 4));
  l.max_total = std::max<std::size_t>(l.max_total, std::size_t{128} << 10);  // ARG_MAX
  return l;
}

std::optional<std::string> check_exec_limits(const std::vector<std::string>& argv,
                                             const std::vector<std::string>& envp, std::size_t extra_strings,
                                             std::size_t extra_bytes, const exec_limits& limits) {
  auto too_long = [&](const std::string& what, std::size_t size) {
    return what + " is " + std::to_string(size) + " bytes; Linux limits one argument or environment string to " +
           std::to_string(limits.max_string - 1) + " bytes (MAX_ARG_STRLEN = " + std::to_string(limits.max_string) +
           " with its NUL): execve would fail with E2BIG";
  };
  std::size_t total = extra_bytes;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::size_t n = argv[i].size() + 1;
    if (n > limits.max_string) return too_long(i == 0 ? "argv[0]" : "argument " + std::to_string(i), n - 1);
    total += n;
  }
  for (const auto& e : envp) {
    const std::size_t n = e.size() + 1;
    if (n > limits.max_string) {
      const std::string_view name = std::string_view(e).substr(0, e.find('='));
      return too_long("environment variable " + std::string(name), n - 1);
    }
    total += n;
  }
  total += (argv.size() + envp.size() + extra_strings + 2) * sizeof(void*);
  if (total > limits.max_total)
    return "the command line and environment take " + std::to_string(total) + " bytes; Linux limits them to " +
           std::to_string(limits.max_total) +
           " (a quarter of the stack limit, RLIMIT_STACK): execve would fail with E2BIG";
  return std::nullopt;
}

}  // namespace agenthost::process::detail
