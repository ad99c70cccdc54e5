// The library never touches spdlog's globals: it takes an agenthost::logger. This is the whole adapter to a
// std::shared_ptr<spdlog::logger> (not registered in spdlog's registry). Usage: agenthost_example_spdlog_logger
#include <agenthost/process/child.hpp>

#include <boost/asio/io_context.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

agenthost::logger to_agenthost(std::shared_ptr<spdlog::logger> log) {
  // agenthost::log_level and spdlog::level::level_enum list trace … error, off in the same order, except critical.
  const auto level = [](agenthost::log_level l) {
    return l == agenthost::log_level::off ? spdlog::level::off : static_cast<spdlog::level::level_enum>(l);
  };
  return {.level = agenthost::log_level::debug,
          .sink = [log = std::move(log), level](agenthost::log_level l, std::string_view m) { log->log(level(l), "{}", m); }};
}

int main() {
  auto log = std::make_shared<spdlog::logger>("agenthost", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  log->set_level(spdlog::level::debug);
  boost::asio::io_context io;
  // A failed spawn is a clear error value; a successful one logs at debug level through the adapter.
  auto c = agenthost::process::child::spawn(io.get_executor(), {.executable = "/bin/true", .log = to_agenthost(log)});
  if (!c) {
    log->error("{}", c.error().message);
    return 1;
  }
  c->async_stop(agenthost::process::stop_policy{}, [&](boost::system::error_code ec, agenthost::process::stop_report r) {
    log->info("stopped: {} after {} us", ec ? ec.message() : "ok",
              std::chrono::duration_cast<std::chrono::microseconds>(r.elapsed).count());
  });
  io.run();
}
