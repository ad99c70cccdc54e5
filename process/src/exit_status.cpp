#include <agenthost/process/exit_status.hpp>

#include <sys/wait.h>

#include <csignal>
#include <cstring>

namespace agenthost::process {

std::string signal_name(int signal) {
  if (const char* abbrev = ::sigabbrev_np(signal)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(signal);
}

std::string exit_status::to_string() const {
  if (const auto* e = as_exited()) return "exited with code " + std::to_string(e->code);
  if (const auto* s = as_signaled())
    return "killed by signal " + std::to_string(s->signal) + " (" + signal_name(s->signal) + ")" +
           (s->core_dumped ? ", core dumped" : "");
  return "exit status unknown";
}

exit_status exit_status::from_wait_status(int wait_status) noexcept {
  if (WIFEXITED(wait_status)) return exited{WEXITSTATUS(wait_status)};
  if (WIFSIGNALED(wait_status)) return signaled{WTERMSIG(wait_status), WCOREDUMP(wait_status) != 0};
  return unknown_status{};
}

}  // namespace agenthost::process
