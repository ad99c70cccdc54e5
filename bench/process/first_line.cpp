// agenthost_bench_process, the first-line scenario: spawn → first stdout line delivered, the library per containment
// (and per reaper spawn-server state) beside a bare pipe2 + posix_spawn + blocking read() of the same program.
#include "common.hpp"

#include <agenthost/process/spawn_server.hpp>

#include "../../process/src/linux/reaper_server.hpp"  // detail::spawn_server_ready

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <thread>

extern char** environ;

namespace agenthost::bench::process_bench {
namespace {

/// Bare baseline: pipe2 + posix_spawn + blocking read() until the first '\n'. Returns ms or nullopt (recorded).
std::optional<double> bare_first_line(const bench_env& env, samples& s) {
  std::vector<std::string> args{kFakeAgent, "stdout", "x"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) envs.emplace_back(*e);
  envs.push_back(env.needle());
  std::vector<char*> envp;
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);

  const auto t0 = clk::now();
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    s.fail(std::string("pipe2: ") + std::strerror(errno));
    return std::nullopt;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, kFakeAgent, &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(p[1]);
  std::string got;
  if (rc == 0) {
    char buf[256];
    while (got.find('\n') == std::string::npos) {
      const ssize_t n = ::read(p[0], buf, sizeof buf);
      if (n > 0) {
        got.append(buf, static_cast<std::size_t>(n));
      } else if (n < 0 && errno == EINTR && g_abort == 0) {
        continue;
      } else {
        break;
      }
    }
  }
  const auto t1 = clk::now();
  ::close(p[0]);
  if (rc != 0) {
    s.fail(std::string("posix_spawn: ") + std::strerror(rc));
    return std::nullopt;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got != "x\n") {
    s.fail("bare: unexpected output '" + got + "'");
    return std::nullopt;
  }
  return ms_between(t0, t1);
}

struct line_state {
  bool done = false;
  error_code ec;
  std::string text;
  clk::time_point when{};
};

/// The library's reaper spawn server of this process (our child running `agenthost-reaper --server`), or -1.
int find_spawn_server() {
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return -1;
  int found = -1;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state = 0;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid != ::getpid() || state == 'Z') continue;
    std::ifstream cmd("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    if (all.find(std::string("--server\0", 9)) != std::string::npos) found = static_cast<int>(pid);
  }
  ::closedir(d);
  return found;
}

/// Waits (polling, bounded) until this process's spawn server runs and its idle reaper has said "ready", so that the
/// next spawn is served by it.
bool wait_server_ready(std::chrono::milliseconds timeout) {
  const auto deadline = clk::now() + timeout;
  while (clk::now() < deadline) {
    if (ap::detail::spawn_server_ready()) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return false;
}

/// SIGKILLs the spawn server and waits (≤ 5 s) until it is dead, so that the next spawn starts a new one.
void kill_spawn_server() {
  const int pid = find_spawn_server();
  if (pid <= 0) return;
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return;
  ::syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0);
  pollfd p{fd, POLLIN, 0};
  ::poll(&p, 1, 5000);
  ::close(fd);
}

/// How a first-line row spawns.
struct first_line_variant {
  const char* label;
  ap::containment_kind mode;
  bool reaper_server = true;
  bool fresh_server = false;  // kill the spawn server before the run: the timed spawn starts a new one
  bool prestart = false;      // after that kill, prestart_spawn_server() (untimed) before the timed spawn
  bool prestart_settled = false;  // … and wait (untimed) until the server has forked its first idle reaper
};

/// Library: child::spawn → the async_read_lines handler with the first line. Returns ms or nullopt (recorded).
std::optional<double> lib_first_line(bench_env& env, const first_line_variant& v, samples& s) {
  if (v.fresh_server) kill_spawn_server();  // untimed
  // Untimed, as a host's start-up would do it. Without `prestart_settled` the timed spawn follows at once (the server
  // may still be starting and forking its first idle reaper: the worst case, a host that spawns right after
  // prestarting); with it, the server is ready (a host that prestarted at its start-up, before its first agent).
  if (v.prestart) {
    if (auto r = ap::prestart_spawn_server(kReaper); !r) {
      s.fail("prestart_spawn_server: " + r.error().message);
      return std::nullopt;
    }
    if (v.prestart_settled && !wait_server_ready(2s)) {
      s.fail("the prestarted server did not say ready within 2 s");
      return std::nullopt;
    }
  }
  const auto t0 = clk::now();
  auto c = ap::child::spawn(env.io.get_executor(), {.executable = kFakeAgent,
                                                    .args = {"stdout", "x"},
                                                    .env = {.set = {{kTokenName, env.token}}},
                                                    .containment = v.mode,
                                                    .reaper_path = kReaper,
                                                    .reaper_server = v.reaper_server});
  if (!c) {
    s.fail("spawn failed: " + c.error().message);
    return std::nullopt;
  }
  auto st = std::make_shared<line_state>();
  c->async_read_lines([st](error_code ec, ap::line_batch lines) {
    st->when = clk::now();
    st->ec = ec;
    if (!ec && !lines.empty()) st->text = std::string(lines.front().text);
    st->done = true;
  });
  const bool finished = run_until(env.io, [&] { return st->done; }, 10s);
  std::optional<double> result;
  if (!finished) {
    s.fail("no first line within 10 s");
  } else if (st->ec || st->text != "x") {
    s.fail("first line: " + (st->ec ? st->ec.message() : "'" + st->text + "'"));
  } else {
    result = ms_between(t0, st->when);
  }
  // Untimed: make sure the (short-lived) tree is gone before the next run.
  if (finished) {
    auto out = std::make_shared<stop_outcome>();
    c->async_stop(ap::stop_policy::kill_now(), [out](error_code ec, ap::stop_report r) {
      out->ec = ec;
      out->report = std::move(r);
      out->done = true;
    });
    if (!run_until(env.io, [&] { return out->done; }, 10s) || out->ec) {
      s.fail("cleanup stop failed");
      result.reset();
    }
  }
  { auto gone = std::move(*c); }
  drain(env.io);
  if (const auto n = kill_leftovers(env.needle()); n > 0) {
    s.fail(std::to_string(n) + " process(es) with the run token alive after the run");
    result.reset();
  }
  return result;
}

}  // namespace

void first_line_scenario(const config& cfg, bench_env& env, std::vector<row>& table) {
  std::vector<first_line_variant> variants;
  for (auto mode : cfg.modes) {
    if (mode == ap::containment_kind::reaper) {
      variants.push_back({"reaper, exec per agent", mode, false, false});
      variants.push_back({"reaper, server (steady)", mode, true, false});
      variants.push_back({"reaper, server (first spawn)", mode, true, true});
      variants.push_back({"reaper, server (first spawn right after prestart)", mode, true, true, true});
      variants.push_back({"reaper, server (first spawn, prestarted)", mode, true, true, true, true});
    } else {
      variants.push_back({mode_name(mode), mode});
    }
  }
  samples bare;
  std::vector<samples> lib(variants.size());
  for (int i = 0; i < cfg.warmup + cfg.runs && g_abort == 0; ++i) {
    const bool measured = i >= cfg.warmup;
    samples scratch;
    if (auto t = bare_first_line(env, measured ? bare : scratch); t && measured) bare.ms.push_back(*t);
    for (std::size_t m = 0; m < variants.size() && g_abort == 0; ++m) {
      samples scratch2;
      if (auto t = lib_first_line(env, variants[m], measured ? lib[m] : scratch2); t && measured)
        lib[m].ms.push_back(*t);
    }
  }
  table.push_back(row{"first line: bare posix_spawn + read()", "–", bare, std::nullopt, false, "(baseline)", {}});
  const double b50 = percentile(bare.ms, 50), b95 = percentile(bare.ms, 95);
  for (std::size_t m = 0; m < variants.size(); ++m) {
    row r{"first line: child::spawn → async_read_lines", variants[m].label, lib[m], std::nullopt, false,
          "(info)", {}};
    char buf[96];
    std::snprintf(buf, sizeof buf, "ratio to bare: ×%.2f p50, ×%.2f p95", percentile(lib[m].ms, 50) / b50,
                  percentile(lib[m].ms, 95) / b95);
    r.note = buf;
    table.push_back(std::move(r));
  }
}

}  // namespace agenthost::bench::process_bench
