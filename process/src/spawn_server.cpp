#include <agenthost/process/spawn_server.hpp>

#include "linux/reaper_server.hpp"
#include "posix/spawn.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>

namespace agenthost::process {

boost::system::result<void, spawn_error> prestart_spawn_server(const std::filesystem::path& reaper_path) {
  const auto reaper = detail::find_reaper(reaper_path);
  if (reaper.empty())
    return spawn_error{make_error_code(errc::reaper_not_found),
                       "agenthost-reaper not found" +
                           (reaper_path.empty() ? std::string{} : " at '" + reaper_path.string() + "'")};
  if (const int e = detail::start_spawn_server(reaper); e != 0)
    return spawn_error{make_error_code(errc::spawn_failed),
                       "the spawn server (" + reaper.string() + " --server) could not be started: " +
                           (e == ENOTSUP ? std::string("a server of another reaper path runs in this process")
                                         : std::string(std::strerror(e)))};
  // A host that prestarts wants its first agent served at once: wait (outside the server's lock) until the server's
  // first idle reaper takes requests.
  if (const int e = detail::wait_spawn_server_ready(std::chrono::seconds(5)); e != 0)
    return spawn_error{make_error_code(errc::spawn_failed),
                       "the spawn server (" + reaper.string() + " --server) did not become ready: " +
                           (e == ETIMEDOUT ? std::string("no idle reaper within 5 s")
                                           : e == ESRCH ? std::string("it exited") : std::string(std::strerror(e)))};
  return {};
}

}  // namespace agenthost::process
