// agenthost/process/error.hpp — the library's one error vocabulary.
//
// `agenthost::errc` is registered with boost::system (is_error_code_enum), so `ec == agenthost::errc::…` works on any
// boost::system::error_code the library hands out. Rich context (which path, which errno, stderr tail, exit status)
// travels beside the code in a diagnostics object — see spawn_error below and transport's terminal.failed.
#pragma once

#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

#include <string>
#include <type_traits>

namespace agenthost {

enum class errc {
  executable_not_found = 1,     ///< the agent executable does not exist (or is not on PATH)
  executable_not_executable,    ///< it exists but is a directory or lacks execute permission
  working_directory_not_found,  ///< the working directory does not exist or is not a directory
  spawn_failed,                 ///< posix_spawn / pipe / socket creation failed (see the message)
  reaper_not_found,             ///< containment::reaper was required but the helper program is missing
  reaper_failed,                ///< the reaper helper misbehaved (protocol error, died unexpectedly)
  stdin_closed,                 ///< stdin was closed by us, or the agent is gone (EPIPE); never a signal
  stdin_not_piped,              ///< the process was spawned with stdin on /dev/null
  not_running,                  ///< the operation needs a running process
  operation_in_progress,        ///< another operation of the same kind is pending (e.g. two reads at once)
  stop_incomplete,              ///< the stop ran to the end but processes of the tree survived
  argument_list_too_long,       ///< an argument, an environment string or all of them exceed the kernel's exec limits
  argument_contains_nul,        ///< an argument, environment entry, executable or working directory holds a NUL byte
  invalid_options,              ///< an option has a value that cannot work (e.g. read_chunk_bytes = 0; see the message)
};

/// The enumerator's name: "executable_not_found", "argument_list_too_long"… (what terminal.failed `error` carries for
/// a start failure); "unknown" for a value that is none of them.
[[nodiscard]] const char* errc_name(errc e) noexcept;

const boost::system::error_category& error_category() noexcept;

inline boost::system::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

/// Why a spawn failed: a code plus a human-readable message naming the path and the OS error.
struct spawn_error {
  boost::system::error_code code{};
  std::string message{};
};

/// Lets boost::system::result<T, spawn_error>::value() throw a boost::system::system_error carrying the message.
[[noreturn]] void throw_exception_from_error(const spawn_error& e, const boost::source_location& loc);

}  // namespace agenthost

template <>
struct boost::system::is_error_code_enum<agenthost::errc> : std::true_type {};
