#include <agenthost/process/error.hpp>

#include <boost/system/system_error.hpp>
#include <boost/throw_exception.hpp>

namespace agenthost {
namespace {

class category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "agenthost"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::executable_not_found: return "agent executable not found";
      case errc::executable_not_executable: return "agent executable is not an executable file";
      case errc::working_directory_not_found: return "working directory not found";
      case errc::spawn_failed: return "failed to spawn the agent";
      case errc::reaper_not_found: return "the agenthost-reaper helper was not found";
      case errc::reaper_failed: return "the agenthost-reaper helper failed";
      case errc::stdin_closed: return "the agent's stdin is closed";
      case errc::stdin_not_piped: return "the agent's stdin is not a pipe";
      case errc::not_running: return "the agent is not running";
      case errc::operation_in_progress: return "an operation of this kind is already in progress";
      case errc::stop_incomplete: return "processes of the agent's tree survived the stop";
      case errc::argument_list_too_long: return "the command line or environment exceeds the kernel's exec limits";
      case errc::argument_contains_nul: return "a command-line argument or environment entry contains a NUL byte";
      case errc::invalid_options: return "invalid options";
    }
    return "unknown agenthost error " + std::to_string(ev);
  }
};

}  // namespace

const char* errc_name(errc e) noexcept {
  switch (e) {
    case errc::executable_not_found: return "executable_not_found";
    case errc::executable_not_executable: return "executable_not_executable";
    case errc::working_directory_not_found: return "working_directory_not_found";
    case errc::spawn_failed: return "spawn_failed";
    case errc::reaper_not_found: return "reaper_not_found";
    case errc::reaper_failed: return "reaper_failed";
    case errc::stdin_closed: return "stdin_closed";
    case errc::stdin_not_piped: return "stdin_not_piped";
    case errc::not_running: return "not_running";
    case errc::operation_in_progress: return "operation_in_progress";
    case errc::stop_incomplete: return "stop_incomplete";
    case errc::argument_list_too_long: return "argument_list_too_long";
    case errc::argument_contains_nul: return "argument_contains_nul";
    case errc::invalid_options: return "invalid_options";
  }
  return "unknown";
}

const boost::system::error_category& error_category() noexcept {
  static const category instance;
  return instance;
}

void throw_exception_from_error(const spawn_error& e, const boost::source_location& loc) {
  boost::throw_exception(boost::system::system_error(e.code, e.message), loc);
}

}  // namespace agenthost
