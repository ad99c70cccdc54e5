// agenthost/process/exit_status.hpp — how a child process ended, as a type.
//
// An exit code and a terminating signal are different facts: `exit(9)` and SIGKILL must never look alike
// (Boost.Process v2's evaluate_exit_code conflates them). `exit_status` holds exactly one of
//   exited{code}      the process called exit(code) / returned from main,
//   signaled{signal}  the process was terminated by a signal,
//   unknown_status{}  the process is gone but its status was lost (someone else reaped it, e.g. a host that sets
//                     SIGCHLD to SIG_IGN or calls waitpid(-1)).
#pragma once

#include <string>
#include <variant>

namespace agenthost::process {

/// The process called exit(code).
struct exited {
  int code = 0;
  friend bool operator==(const exited&, const exited&) = default;
};

/// The process was terminated by `signal`.
struct signaled {
  int signal = 0;
  bool core_dumped = false;
  friend bool operator==(const signaled&, const signaled&) = default;
};

/// The process is gone, but its status could not be collected.
struct unknown_status {
  friend bool operator==(const unknown_status&, const unknown_status&) = default;
};

/// One of exited / signaled / unknown_status. Value type; cheap to copy.
class exit_status {
 public:
  exit_status() = default;
  exit_status(exited e) : value_(e) {}            // NOLINT(google-explicit-constructor): a status *is* an exited
  exit_status(signaled s) : value_(s) {}          // NOLINT(google-explicit-constructor)
  exit_status(unknown_status u) : value_(u) {}    // NOLINT(google-explicit-constructor)

  /// True for exited{0}.
  [[nodiscard]] bool success() const noexcept {
    const auto* e = std::get_if<exited>(&value_);
    return e != nullptr && e->code == 0;
  }
  [[nodiscard]] const exited* as_exited() const noexcept { return std::get_if<exited>(&value_); }
  [[nodiscard]] const signaled* as_signaled() const noexcept { return std::get_if<signaled>(&value_); }
  [[nodiscard]] bool is_unknown() const noexcept { return std::holds_alternative<unknown_status>(value_); }
  [[nodiscard]] const std::variant<unknown_status, exited, signaled>& value() const noexcept { return value_; }

  /// "exited with code 3", "killed by signal 9 (SIGKILL)", "status unknown".
  [[nodiscard]] std::string to_string() const;

  /// Decode a wait status as returned by waitpid()/waitid() (si_code/si_status form is handled by the caller).
  static exit_status from_wait_status(int wait_status) noexcept;

  friend bool operator==(const exit_status&, const exit_status&) = default;

 private:
  std::variant<unknown_status, exited, signaled> value_{};
};

/// "SIGINT" for 2, "signal 99" for unknown numbers.
std::string signal_name(int signal);

}  // namespace agenthost::process
