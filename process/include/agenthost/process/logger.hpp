// agenthost/process/logger.hpp — injected logging. The library never touches spdlog's (or anyone's) globals:
// a host passes a `logger` in the options; the default logs nothing. examples/spdlog_logger.cpp shows a
// ten-line adapter to a std::shared_ptr<spdlog::logger>.
#pragma once

#include <functional>
#include <string_view>
#include <utility>

namespace agenthost {

enum class log_level { trace, debug, info, warn, error, off };

/// A level threshold plus a sink. Copyable; the sink must be callable from any thread that runs the io_context.
struct logger {
  /// Messages below this level are not formatted at all. Default: info.
  log_level level = log_level::info;
  /// Receives the message; empty = logging disabled. Default: empty.
  std::function<void(log_level, std::string_view)> sink{};

  [[nodiscard]] bool enabled(log_level l) const noexcept { return sink && l >= level && level != log_level::off; }
  void log(log_level l, std::string_view message) const {
    if (enabled(l)) sink(l, message);
  }
};

}  // namespace agenthost
