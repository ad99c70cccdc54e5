// agenthost — run a coding agent, map a recorded transcript, replay one through the full provider path, or check
// which agents are usable (doctor).
#include "agents.hpp"
#include "doctor.hpp"
#include "options.hpp"
#include "render.hpp"

#include <agenthost/process/line_framer.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

namespace asio = boost::asio;
using namespace agenthost;

namespace {

// The library takes a logger; this is the whole spdlog adapter (no spdlog globals: the logger is not registered).
agenthost::logger make_logger(bool verbose) {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto log = std::make_shared<spdlog::logger>("agenthost", sink);
  return {.level = verbose ? log_level::debug : log_level::warn,
          .sink = [log](log_level l, std::string_view m) {
            log->log(static_cast<spdlog::level::level_enum>(static_cast<int>(l)), "{}", m);
          }};
}

// Runs one agent run on an io_context; SIGINT/SIGTERM cancel it (the tree is stopped, terminal.cancelled printed).
int run_with_signals(cli::renderer& render, const std::function<void(asio::io_context&, asio::cancellation_slot,
                                                                        std::function<void(transport::message)>)>& start) {
  asio::io_context io;
  asio::cancellation_signal cancel;
  asio::signal_set signals(io, SIGINT, SIGTERM);
  std::optional<transport::message> terminal;
  signals.async_wait([&](boost::system::error_code ec, int) {
    if (!ec) cancel.emit(asio::cancellation_type::terminal);
  });
  start(io, cancel.slot(), [&](transport::message t) {
    terminal = std::move(t);
    signals.cancel();
  });
  io.run();
  (void)render;
  return terminal ? cli::exit_code_for(*terminal) : 1;
}

std::filesystem::path find_fake_agent(const std::string& configured) {
  if (!configured.empty()) return configured;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  for (const auto& candidate : {self / "fake_agent", self.parent_path() / "libexec" / "agenthost" / "fake_agent"})
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  return "fake_agent";
}

// Closes the input file (not stdin) on every return.
struct input_fd {
  int fd = STDIN_FILENO;
  ~input_fd() {
    if (fd != STDIN_FILENO) ::close(fd);
  }
};

int map_file(const cli::parsed& p, cli::renderer& render) {
  // read(2), not an istream: a read returns what is there, so messages from a live pipe (`agent | agenthost map`)
  // come as their lines do, not when a 1 MiB buffer is full; and a read error is reported, not taken for the end.
  input_fd in;
  const std::string name = p.file.empty() || p.file == "-" ? std::string("standard input") : "'" + p.file + "'";
  if (!p.file.empty() && p.file != "-") {
    in.fd = ::open(p.file.c_str(), O_RDONLY | O_CLOEXEC);
    if (in.fd < 0) {
      std::cerr << "agenthost: cannot open " << name << ": " << std::strerror(errno) << "\n";
      return 2;
    }
  }
  auto mapper = cli::find_agent(p.agent)->make_mapper(p);
  std::vector<transport::message> out;
  process::line_framer framer;
  auto flush = [&] {
    for (const auto& m : out) render(m);
    mapper->recycle(out);
  };
  auto on_line = [&](const process::line_view& l) {
    if (l.oversize) mapper->on_oversize_line(l.text, l.total_bytes, out);
    else mapper->on_line(l.text, out);
    // As the providers do: only an `assistant` text at the end may still take the next line's delta.
    if (!out.empty() && out.back().type != transport::message_type::assistant) flush();
    while (mapper->take_more(out)) flush();  // a turn's buffered thoughts, a slice at a time
  };
  for (;;) {
    auto space = framer.prepare(1 << 20);
    const ssize_t n = ::read(in.fd, space.data(), space.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      // Not a transcript that ended here: what was mapped so far has been printed, and no terminal is made up.
      std::cerr << "agenthost: cannot read " << name << ": " << std::strerror(errno) << "\n";
      return 2;
    }
    if (n == 0) break;
    framer.commit(static_cast<std::size_t>(n), on_line);
    flush();
  }
  framer.finish(on_line);
  mapper::run_end end;
  if (p.exit_signal) end.status = process::signaled{*p.exit_signal, false};
  else end.status = process::exited{p.exit_code.value_or(0)};
  mapper->finish(end, out);
  const int code = out.empty() ? 1 : cli::exit_code_for(out.back());
  flush();
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  auto parsed = cli::parse_command_line(argc, argv);
  if (auto* err = std::get_if<std::string>(&parsed)) {
    std::cerr << "agenthost: " << *err << "\n" << cli::usage_text;
    return 2;
  }
  auto& p = std::get<cli::parsed>(parsed);
  if (p.cmd == cli::command::help) {
    std::cout << cli::usage_text;
    return 0;
  }
  cli::renderer render(!p.json_output && ::isatty(STDOUT_FILENO) == 1);
  p.log = make_logger(p.verbose);
  try {
    switch (p.cmd) {
      case cli::command::map: return map_file(p, render);
      case cli::command::doctor: return cli::run_doctor(p, !p.json_output && ::isatty(STDOUT_FILENO) == 1);
      case cli::command::run:
        return run_with_signals(render, [&](asio::io_context& io, asio::cancellation_slot slot, auto done) {
          cli::find_agent(p.agent)->run(io, p, std::ref(render), slot,
                                        [done](boost::system::error_code, transport::message t) { done(t); });
        });
      case cli::command::replay: {
        // The recorded transcript goes through a real child process and the whole provider path. A file that cannot
        // be read is the caller's error (as for map), not the fake agent's exit status.
        std::error_code ec;
        const auto st = std::filesystem::status(p.file, ec);
        std::string why;
        if (ec) why = ec.message();
        else if (std::filesystem::is_directory(st)) why = std::strerror(EISDIR);
        else if (::access(p.file.c_str(), R_OK) != 0) why = std::strerror(errno);
        if (!why.empty()) {
          std::cerr << "agenthost: cannot read '" << p.file << "': " << why << "\n";
          return 2;
        }
        const auto* agent = cli::find_agent(p.agent);
        std::vector<std::string> args = {"replay", std::filesystem::absolute(p.file).string()};
        if (p.replay_delay_ms > 0) args.insert(args.end(), {"--delay-ms", std::to_string(p.replay_delay_ms)});
        process::spawn_options spawn{.executable = find_fake_agent(p.fake_agent),
                                     .args = args,
                                     .stdin_mode = process::stdin_kind::null,
                                     .log = p.log};
        return run_with_signals(render, [&](asio::io_context& io, asio::cancellation_slot slot, auto done) {
          providers::async_run_agent(io.get_executor(), std::move(spawn), agent->make_mapper(p),
                                     agent->replay_run_options(p), std::ref(render),
                                     asio::bind_cancellation_slot(slot, [done](boost::system::error_code,
                                                                               transport::message t) { done(t); }));
        });
      }
      case cli::command::help: break;
    }
  } catch (const std::exception& e) {
    std::cerr << "agenthost: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
